"""Adapter that lets robogen's perturbation axes act on Gymnasium's MuJoCo v5 envs.

``robogen.envs.make("gymnasium/Hopper-v5")`` calls :func:`make_adapted`, which
wraps ``gymnasium.make("Hopper-v5")`` in a :class:`GymMujocoAdapter`. The adapter
implements the :class:`~robogen.envs.base.MujocoScene` protocol: it names the
scene roles each axis needs (floor, robot links, camera, ...), hands out a fresh
nominal :class:`mujoco.MjSpec` for structural edits, swaps a recompiled model
into the wrapped ``MujocoEnv``, renders pixel observations with its own
offscreen renderer, and defines success for envs that have no success flag.

This module is generic: what is particular to one env (success rule, camera,
scene roles) is that env's :class:`~robogen.envs.gym_catalog.GymEnvRecord` in
:mod:`robogen.envs.gym_catalog`. Adding a Gymnasium MuJoCo env is one record there.

Nominal scene:
    The nominal spec is Gymnasium's own XML (``env.unwrapped.fullpath``) with
    two additions that change neither physics nor observations: unnamed
    elements get names (an actuator takes its joint's name, lights become
    ``light0``..., unnamed geoms ``<body>_geom``, unnamed bodies
    ``<parent>_child``) so that roles can refer to them, and envs whose record
    has an :class:`~robogen.envs.gym_catalog.AddedCamera` get a fixed camera
    ``robogen_cam`` aimed at the scene. This model is installed when the adapter
    is built, so nominal episodes step exactly like the stock env (pinned in the
    tests).

Cameras:
    The observation camera is the record's: the env's own ``track`` camera for
    locomotion, ``robogen_cam`` for the others (see :mod:`robogen.envs.gym_catalog`).
    Gymnasium's own ``render()`` (free camera) is unchanged.

Rendering:
    Pixel observations come from a :class:`~robogen.envs.render.OffscreenRenderer`
    (drawn on the process's render thread) that only rebuilds its ``MjrContext``
    (a few ms) when a recompiled model is installed. Defaults: 84x84, shadow map off
    (``shadowsize=0``) and no multisampling (``offsamples=0``): about 1-2 ms per
    frame on a CPU (Mesa llvmpipe) against 20-50 ms for a model's default 4096^2
    shadow map with 4x MSAA. The settings are exposed as
    ``adapter.render_settings`` (a :class:`~robogen.types.RenderSettings`) for
    the evaluation manifest and written into every installed model's
    ``vis.quality``.

Distractors:
    ``roles.distractor_slots`` is empty: distractors are added through MjSpec as
    static, jointless geoms of the world body. A free-joint body would change the
    observation size (Gymnasium observations include all qpos/qvel; Ant-v5 also
    includes one contact-force row per body), so :meth:`install_model` checks
    that the observation shape is unchanged and refuses a model that changes it.

Success:
    The record's rule (table in :mod:`robogen.envs.gym_catalog`), decided when the
    episode ends; ``info["success"]`` is False on every earlier step. With
    ``max_steps`` other than the registered limit, return thresholds scale by
    ``max_steps / registered_limit``. ``success_threshold`` replaces any rule by a
    return threshold (unscaled). ``info["episode_return"]`` is the running sum of
    rewards and ``info["robogen"]["success_metric"]`` the distance [m] or return.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from typing import Any, ClassVar

import gymnasium as gym  # robogen.envs imported robogen._gl first (MUJOCO_GL)
import mujoco
import numpy as np
from gymnasium import spaces

from robogen.envs.base import PoseDof, SceneCapabilities, SceneRoles
from robogen.envs.camera_geometry import camera_pose
from robogen.envs.elements import descends_from, name_elements
from robogen.envs.families import EnvOptions
from robogen.envs.frames import SceneFrames
from robogen.envs.gym_catalog import (
    GYM_ENVS,
    AddedCamera,
    GymEnvRecord,
    SuccessRule,
    gym_env_record,
)
from robogen.envs.observations import check_obs_mode, compose_observation, observation_space
from robogen.errors import InvalidSpecError, SceneError
from robogen.types import RenderSettings

__all__ = [
    "ADDED_CAMERA", "SUPPORTED", "THRESHOLD_REFUSED", "GymMujocoAdapter", "SuccessRule",
    "build_nominal_spec", "descends_from",
    "camera_pose", "family_ids", "family_make", "make_adapted", "set_weld_rows",
    "success_rule",
]

SUPPORTED: tuple[str, ...] = tuple(GYM_ENVS)
"""Gymnasium ids of the built-in catalog records (robogen ids ``gymnasium/<id>``); records
registered later are in :func:`family_ids`."""

ADDED_CAMERA = "robogen_cam"
OBS_SIZE_CHANGED = (
    "the installed model changes {env}'s observation from {expected} to {got} values; "
    "add distractors as static (jointless) world geoms, not bodies with joints"
)


# ----------------------------------------------------------------------------- success


def success_rule(
    gym_id: str, *, max_steps: int | None = None, success_threshold: float | None = None
) -> SuccessRule:
    """The success rule of ``gym_id`` for an episode limit of ``max_steps``.

    Args:
        gym_id: An id of the catalog (:func:`family_ids`).
        max_steps: Step limit (None: the registered limit); scales return thresholds.
        success_threshold: If given, a return threshold replacing the env's rule.

    Raises:
        UnknownNameError: If ``gym_id`` is not in the catalog.
    """
    rule = gym_env_record(gym_id).success
    if success_threshold is not None:
        return SuccessRule("return", float(success_threshold))
    limit = gym.spec(gym_id).max_episode_steps
    if rule.kind == "return" and max_steps is not None and limit and max_steps != limit:
        return dataclasses.replace(rule, threshold=rule.threshold * max_steps / limit)
    return rule


# ----------------------------------------------------------------------------- roles


def _roles(record: GymEnvRecord, model: mujoco.MjModel) -> SceneRoles:
    """Scene roles of ``record``'s env in the nominal ``model`` (names filled in)."""
    joints = tuple(model.joint(int(model.actuator_trnid[a, 0])).name for a in range(model.nu))
    if record.robot_root:
        rid = model.body(record.robot_root).id
        robot = tuple(model.body(i).name for i in range(model.nbody)
                      if i >= rid and _is_descendant(model, i, rid))
    else:
        robot = record.robot_bodies
    camera = record.camera
    if record.look_at is not None:
        look_at = record.look_at
    elif isinstance(camera, AddedCamera):
        look_at = camera.look_at
    else:
        look_at = (0.0, 0.0, float(model.body(record.robot_root).pos[2]))
    region = None
    if record.distractor_xy is not None:
        surface = (record.table_geoms or record.floor_geoms)[0]
        region = (*record.distractor_xy, float(model.geom(surface).pos[2]))
    pose: tuple[PoseDof, ...] = ()
    if record.hinge_offset is not None:
        for n in joints:
            j = model.joint(n)
            low, high = (float(j.range[0]), float(j.range[1])) if model.jnt_limited[j.id] \
                else (None, None)
            pose += (PoseDof(n, 0, record.hinge_offset, low, high),)
    return SceneRoles(
        floor_geoms=record.floor_geoms, table_geoms=record.table_geoms,
        object_geoms=record.object_geoms, object_bodies=record.object_bodies,
        robot_bodies=robot, robot_joints=joints,
        robot_actuators=tuple(model.actuator(a).name for a in range(model.nu)),
        cameras=(ADDED_CAMERA if isinstance(camera, AddedCamera) else camera,),
        lights=tuple(model.light(i).name for i in range(model.nlight)),
        look_at=look_at, distractor_region=region, pose_dofs=pose + record.pose_dofs,
        keep_clear=(*robot, *record.keep_clear),
    )


def _is_descendant(model: mujoco.MjModel, body: int, root: int) -> bool:
    while body > 0:
        if body == root:
            return True
        body = int(model.body_parentid[body])
    return root == 0


# ----------------------------------------------------------------------------- spec


def build_nominal_spec(gym_id: str, fullpath: str) -> mujoco.MjSpec:
    """Gymnasium's XML for ``gym_id`` with names filled in and the record's added camera."""
    spec = mujoco.MjSpec.from_file(fullpath)
    name_elements(spec)
    cam = gym_env_record(gym_id).camera
    if isinstance(cam, AddedCamera) and not any(c.name == ADDED_CAMERA for c in spec.cameras):
        pos, quat = camera_pose(cam.look_at, cam.distance, cam.azimuth_deg, cam.elevation_deg)
        spec.worldbody.add_camera(name=ADDED_CAMERA, pos=pos, quat=quat, fovy=cam.fovy_deg)
    return spec


THRESHOLD_REFUSED = "{how}; --success-threshold {value!r} does not apply: leave it out"
"""Message when a success threshold is given to a suite that decides success itself."""


# ----------------------------------------------------------------------------- adapter


class GymMujocoAdapter(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """A Gymnasium MuJoCo v5 env made perturbable: a :class:`MujocoScene` with success.

    Description:
        Wraps ``gymnasium.make(<id>)`` (with its ``TimeLimit``). Physics, reward
        and termination are the stock env's; the adapter adds scene roles,
        model swaps, pixel observations and a success flag.

    Observation Space:
        ============  =====================================  =============================
        obs_mode      space                                  unit
        ============  =====================================  =============================
        state         Box(-inf, inf, (obs_dim,), float32)    the env's own (m, rad, m/s...)
        pixels        Box(0, 255, (H, W, 3), uint8)          RGB from ``roles.cameras[0]``
        state+pixels  Dict(state=..., pixels=...)            both
        ============  =====================================  =============================

    Action Space:
        The env's own Box (torques, normalized to its ``ctrlrange``).

    Reward:
        The env's own.

    Perturbation hooks:
        :meth:`nominal_spec`, :meth:`install_model`, :meth:`textures_changed`,
        :meth:`observe`, :meth:`render_frame`, :attr:`roles`.

    Success:
        The record's rule (:mod:`robogen.envs.gym_catalog`); ``info["success"]`` in
        every step, decided at the last step.

    Episode End:
        The env's own termination; truncation at ``max_steps``.

    Version History:
        * v0: initial adapter.

    Args:
        env: ``gymnasium.make(<id>)`` of an id in the catalog (:func:`family_ids`).
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        render: Pixel settings (size, camera, shadows, MSAA); None: 84x84 from
            ``roles.cameras[0]``, shadows and MSAA off.
        success_threshold: Return threshold replacing the env's success rule.

    Raises:
        UnknownNameError: If the env's id is not in the catalog.
        InvalidSpecError: On a bad observation mode or render size.
    """

    capabilities: ClassVar[SceneCapabilities] = SceneCapabilities(rebuildable_objects=True)
    """Gymnasium's MuJoCo envs and Fetch find their objects by body, joint and site (see
    :class:`~robogen.envs.base.SceneCapabilities`)."""

    own_success: ClassVar[str] = ""
    """How a suite with its own success flag decides success (e.g. ``info['success']``);
    non-empty: a ``success_threshold`` is refused (:data:`THRESHOLD_REFUSED`)."""

    def __init__(
        self,
        env: gym.Env[Any, Any],
        obs_mode: str = "state",
        render: RenderSettings | None = None,
        success_threshold: float | None = None,
    ) -> None:
        if self.own_success and success_threshold is not None:
            raise InvalidSpecError(THRESHOLD_REFUSED.format(how=self.own_success,
                                                            value=success_threshold))
        gym.utils.RecordConstructorArgs.__init__(
            self, obs_mode=obs_mode,
            render=None if render is None else dataclasses.asdict(render),
            success_threshold=success_threshold,
        )
        gym.Wrapper.__init__(self, env)
        gym_id = env.spec.id if env.spec is not None else ""
        self._check_env_id(gym_id)
        check_obs_mode(obs_mode)
        self.gym_id = gym_id
        self.obs_mode = obs_mode
        self._frames = SceneFrames()
        self.defer_frames = False
        """Pixel observations are :class:`~robogen.envs.render.PendingFrame` objects, drawn
        on the render thread while the caller goes on (resolve them with
        :func:`~robogen.envs.render.resolve_frames`); set by the rollout worker."""
        self.render_lane = 0
        """Render lane drawing this env's frames (see :mod:`robogen.envs.render`); set by the
        rollout worker."""
        self._episode_return = 0.0
        inner: Any = env.unwrapped  # a Gymnasium MuJoCo env (model, data, mujoco_renderer)
        self._inner_obs_shape = self._state_shape()
        self._init_sizes = (inner.model.nq, inner.model.nv, inner.model.nu)
        max_steps = env.spec.max_episode_steps if env.spec is not None else None
        self._rule = self._make_rule(max_steps, success_threshold)
        self._metric_rows: tuple[Any, ...] | None = None
        """(data, xpos, body_a id, body_b id) of the distance rule, per ``MjData``."""
        first = self._compile_nominal()  # same physics, names for the roles
        self._roles = self._make_roles(first)
        settings = render or RenderSettings()
        if settings.width < 1 or settings.height < 1:
            raise InvalidSpecError(
                f"render width and height must be >= 1 px, got {settings.width}x{settings.height}"
            )
        self.render_settings = dataclasses.replace(
            settings, camera=settings.camera or self._roles.cameras[0],
            mujoco_gl=os.environ.get("MUJOCO_GL", ""),
        )
        self.install_model(first)
        self._camera_id(self.render_settings.camera)  # validate the camera name
        # the observation camera is the one the camera axis moves (roles.cameras[0])
        cam = self.render_settings.camera
        self._roles = dataclasses.replace(
            self._roles, cameras=(cam, *(c for c in self._roles.cameras if c != cam)))
        self.observation_space = self._make_obs_space()

    # -- MujocoScene ---------------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model currently simulated."""
        return self.env.unwrapped.model  # type: ignore[attr-defined]

    @property
    def data(self) -> mujoco.MjData:
        """The simulation data."""
        return self.env.unwrapped.data  # type: ignore[attr-defined]

    @property
    def roles(self) -> SceneRoles:
        """Scene roles of this env."""
        return self._roles

    @property
    def rule(self) -> SuccessRule:
        """The success rule in force."""
        return self._rule

    @property
    def success_rule(self) -> str:
        """The success rule in words (``rule.describe()``)."""
        return str(self._rule.describe())

    def nominal_spec(self) -> mujoco.MjSpec:
        """A fresh nominal MjSpec (Gymnasium's XML, names filled in, added camera)."""
        return build_nominal_spec(self.gym_id, self.env.unwrapped.fullpath)  # type: ignore[attr-defined]

    def install_model(self, model: mujoco.MjModel) -> None:
        """Simulate ``model`` from now on; keeps spaces, state and the renderers in sync.

        The current ``qpos``/``qvel``/``act``/``ctrl``/``time`` carry over to the new
        ``MjData``; ``init_qpos``/``init_qvel`` are kept. Gymnasium's own viewers
        are closed (rebuilt lazily on the next ``render()``) and the pixel
        renderer is pointed at the new model. Render settings are written into
        ``model.vis``.

        Raises:
            SceneError: If ``model`` changes the number of qpos, qvel or
                actuators, or the observation size; the previous model stays.
        """
        inner: Any = self.env.unwrapped
        sizes = (model.nq, model.nv, model.nu)
        if sizes != self._init_sizes:
            raise SceneError(
                f"the installed model has (nq, nv, nu) = {sizes} but {self.gym_id} needs "
                f"{self._init_sizes}; add distractors as static world geoms, not jointed bodies"
            )
        self._prepare_model(model)
        s = self.render_settings
        model.vis.quality.shadowsize = s.shadowsize
        model.vis.quality.offsamples = s.offsamples
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, s.width, inner.width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, s.height, inner.height)
        old_model, old_data = inner.model, inner.data
        data = mujoco.MjData(model)
        data.qpos[:], data.qvel[:], data.ctrl[:] = old_data.qpos, old_data.qvel, old_data.ctrl
        if model.na == old_model.na:
            data.act[:] = old_data.act
        data.time = old_data.time
        mujoco.mj_forward(model, data)
        inner.model, inner.data = model, data
        got = np.shape(self._state_obs())
        if got != self._inner_obs_shape:
            inner.model, inner.data = old_model, old_data
            raise SceneError(OBS_SIZE_CHANGED.format(
                env=self.gym_id, expected=self._inner_obs_shape, got=got))
        viewer = inner.mujoco_renderer
        viewer.close()
        viewer._viewers, viewer.viewer = {}, None
        viewer.model, viewer.data = model, data
        self._frames.set_model(model)

    def textures_changed(self, texture_ids: tuple[int, ...]) -> None:
        """Re-upload ``model.tex_data`` of ``texture_ids`` to every open GL context."""
        if not texture_ids:
            return
        self._frames.upload_textures(texture_ids)
        inner: Any = self.env.unwrapped  # a Gymnasium MuJoCo env
        for v in getattr(inner.mujoco_renderer, "_viewers", {}).values():
            v.make_context_current()
            for t in texture_ids:
                mujoco.mjr_uploadTexture(v.model, v.con, int(t))

    def observe(self) -> Any:
        """The observation of the current state (runs ``mj_forward`` first)."""
        inner: Any = self.env.unwrapped
        mujoco.mj_forward(inner.model, inner.data)
        return self._transform(self._state_obs())

    def render_frame(
        self, camera: str | None = None, width: int = 84, height: int = 84
    ) -> np.ndarray:
        """Render ``(height, width, 3) uint8`` RGB from ``camera`` (default ``roles.cameras[0]``).

        Raises:
            SceneError: On an unknown camera name.
            RenderError: If no offscreen GL context can be created.
        """
        return self._frame(camera, int(width), int(height), defer=False)

    def _frame(self, camera: str | None, width: int, height: int, *, defer: bool) -> Any:
        cam = self._camera_id(camera or self._roles.cameras[0])
        return self._frames.observation(self.model, self.data, cam, width, height,
                                        lane=self.render_lane, defer=defer)

    # -- gym API ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; ``info`` gets ``success=False`` and ``episode_return=0``."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._episode_return = 0.0
        info = dict(info)
        info["success"] = False
        info["episode_return"] = 0.0
        return self._transform(obs), info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step; ``info`` gets ``success`` (decided at the last step) and ``episode_return``."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._episode_return += float(reward)
        metric = self._metric()
        success = False
        if terminated or truncated:
            if self._rule.kind == "distance":
                success = metric < self._rule.threshold
            else:
                success = (not terminated) and metric >= self._rule.threshold
        info = dict(info)
        info["success"] = bool(success)
        info["episode_return"] = self._episode_return
        info["robogen"] = {"success_metric": metric}
        return self._transform(obs), reward, terminated, truncated, info

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the pixel renderer (GL objects stay in their process)."""
        state = self.__dict__.copy()
        state["_metric_rows"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle: Gymnasium rebuilt the wrapped env from its constructor arguments
        (``EzPickle``), so the named nominal model is installed into it again; the copy
        is the env as constructed: reset it before stepping."""
        self.__dict__.update(state)
        self.install_model(self._compile_nominal())

    def close(self) -> None:
        """Free the pixel renderer and close the env."""
        self._frames.close()
        super().close()

    # -- helpers ---------------------------------------------------------------------------

    def _metric(self) -> float:
        if self._rule.kind == "distance":
            data = self.data
            cached = self._metric_rows
            if cached is None or cached[0] is not data:  # body lookups by name are slow
                cached = self._metric_rows = (data, data.xpos, data.body(self._rule.body_a).id,
                                              data.body(self._rule.body_b).id)
            _, xpos, ia, ib = cached
            d = xpos[ia, :2] - xpos[ib, :2]
            return math.sqrt(d.dot(d))  # np.linalg.norm(d) to the bit, without its checks
        return self._episode_return

    def _compile_nominal(self) -> mujoco.MjModel:
        with warnings.catch_warnings():  # half_cheetah.xml's deprecated settotalmass
            warnings.filterwarnings("ignore", message=".*settotalmass.*")
            return self.nominal_spec().compile()

    def _camera_id(self, name: str) -> int:
        cid = self._frames.camera_id(self.model, name)
        if cid < 0:
            names = [self.model.camera(i).name for i in range(self.model.ncam)]
            raise SceneError(f"{self.gym_id} has no camera {name!r}; cameras: {names}")
        return cid

    def _make_obs_space(self) -> spaces.Space[Any]:
        s = self.render_settings
        return observation_space(self.obs_mode, self._inner_obs_shape, s.height, s.width)

    # -- hooks of the suite adapters (robogen.envs.fetch_env, robogen.envs.metaworld_env) -----

    def _check_env_id(self, gym_id: str) -> None:
        """Raise UnknownNameError if this adapter does not support ``gym_id``."""
        gym_env_record(gym_id)

    def _make_rule(self, max_steps: int | None, success_threshold: float | None) -> Any:
        """The success rule in force (``describe()`` gives the line for reports)."""
        return success_rule(self.gym_id, max_steps=max_steps, success_threshold=success_threshold)

    def _make_roles(self, model: mujoco.MjModel) -> SceneRoles:
        """Scene roles of the nominal ``model`` (names filled in)."""
        return _roles(gym_env_record(self.gym_id), model)

    def _prepare_model(self, model: mujoco.MjModel) -> None:
        """Edit a model about to be installed as the wrapped env's own setup would (no-op)."""

    def _state_shape(self) -> tuple[int, ...]:
        """Shape of the ``state`` observation."""
        shape = self.env.unwrapped.observation_space.shape
        assert shape is not None  # the MuJoCo envs' observation spaces are Boxes
        return tuple(shape)

    def _state_obs(self) -> Any:
        """The wrapped env's observation of the current state (no side effects on the env)."""
        return self.env.unwrapped._get_obs()  # type: ignore[attr-defined]

    def _as_state(self, obs: Any) -> Any:
        """The ``state`` vector of an observation the wrapped env returned (identity)."""
        return obs

    def _transform(self, obs: Any) -> Any:
        obs = self._as_state(obs)
        if self.obs_mode == "state":  # every step of a state policy: skip the closures
            return np.asarray(obs, dtype=np.float32)
        s = self.render_settings
        return compose_observation(
            self.obs_mode, lambda: obs,
            lambda: self._frame(s.camera, s.width, s.height, defer=self.defer_frames))


def make_adapted(gym_id: str, options: EnvOptions | None = None,
                 **kwargs: Any) -> GymMujocoAdapter:
    """Create Gymnasium's ``gym_id`` wrapped as a perturbable robogen env.

    Args:
        gym_id: An id in the catalog (:func:`family_ids`), e.g. ``Hopper-v5``.
        options: Observation mode, step limit (None: the registered limit), render
            settings (None: 84x84, shadows and MSAA off) and a return threshold replacing
            the env's success rule; default :class:`~robogen.envs.families.EnvOptions`.
        **kwargs: Passed to ``gymnasium.make`` (e.g. ``reset_noise_scale``).

    Returns:
        A :class:`GymMujocoAdapter`.

    Raises:
        UnknownNameError: If ``gym_id`` is not in the catalog (lists close matches).
    """
    gym_env_record(gym_id)
    options = options or EnvOptions()
    limit = options.max_steps or gym.spec(gym_id).max_episode_steps
    env = gym.make(gym_id, max_episode_steps=limit, **kwargs)
    return GymMujocoAdapter(env, obs_mode=options.obs_mode, render=options.render,
                            success_threshold=options.success_threshold)


def family_ids() -> tuple[str, ...]:
    """Names of the ``gymnasium`` env family (:mod:`robogen.envs.families`): the catalog's ids."""
    return tuple(GYM_ENVS)


family_make = make_adapted
"""Create ``gymnasium/<name>``: the family's ``family_make`` is :func:`make_adapted`."""


def set_weld_rows(spec: mujoco.MjSpec, row: tuple[float, ...]) -> None:
    """Write a suite's mocap weld row into every weld of ``spec`` (first ``len(row)`` values).

    Suites with a mocap-driven arm (Fetch, Meta-World) write the weld at run time; writing
    it into the spec too means a compile or ``mj_setConst`` (run by the wrapper after
    inertial edits) keeps it.
    """
    for eq in spec.equalities:
        if int(eq.type) == int(mujoco.mjtEq.mjEQ_WELD):
            data = np.array(eq.data, dtype=float)
            data[:len(row)] = row
            eq.data = data
