"""The tabletop tasks' shared env: :class:`TabletopEnv` on the shared MjSpec scene (its
action and state layout, sampling regions, stepping, rendering and
:class:`~robogen.envs.base.MujocoScene` hooks); each task (:mod:`robogen.envs.tabletop`)
adds its target sampling and success predicate.

:mod:`robogen.envs.tabletop` re-exports every public name here.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import robogen._gl  # noqa: F401  (choose MUJOCO_GL before mujoco is imported)

# isort: split
import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from robogen.envs import scene as sc
from robogen.envs.base import PoseDof, SceneCapabilities, SceneRoles, SubstepObserver
from robogen.envs.frames import SceneFrames
from robogen.envs.observations import check_obs_mode, compose_observation, observation_space
from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.types import RenderSettings

ACTION_SCALE = 0.05
"""Largest change of an arm joint's position target per control step [rad] (2.5 rad/s)."""
SUCCESS_BONUS = 1.0
"""Reward added on the step where the success predicate first holds [-]."""
STATE_LAYOUT: tuple[tuple[str, int, str], ...] = (
    ("arm_qpos", 5, "rad"),
    ("arm_qvel", 5, "rad/s"),
    ("gripper_gap", 1, "m"),
    ("ee_pos", 3, "m"),
    ("object_pos", 3, "m"),
    ("object_quat", 4, "-"),
    ("target_pos", 3, "m"),
    ("object_to_ee", 3, "m"),
    ("target_to_object", 3, "m"),
)
"""(field, size, unit) of the state vector, in order (30 values)."""
STATE_DIM = sum(size for _, size, _ in STATE_LAYOUT)

# Sampling regions of the initial state (world frame) [m].
OBJECT_XY_RANGE = ((-0.10, 0.12), (-0.15, 0.15))
OBJECT_YAW_RANGE = (-np.pi / 4, np.pi / 4)
POSE_CLIP_XY = ((-0.16, 0.20), (-0.24, 0.24))
"""Area the object_pose axis may move object and target to: reachable table area [m]."""

BAD_SIZE = "{field} must be an integer in [1, {high}] px, got {value!r}"
THRESHOLD_NOT_USED = (
    "{env_id} has its own success predicate ({rule}); success_threshold={value!r} applies only "
    "to envs without one. Remove success_threshold for this env"
)


def task_name(env_id_or_name: str) -> str:
    """Snake-case task name: ``robogen/PickPlace-v0``, ``PickPlace`` -> ``pick_place``."""
    name = env_id_or_name.split("/")[-1].split("-v")[0]
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0 and name[i - 1] not in "_-":
            out.append("_")
        out.append(ch.lower())
    return "".join(out).replace("-", "_")


class TabletopEnv(gym.Env[Any, np.ndarray]):
    """Base of the tabletop tasks: a 5-joint arm with a parallel gripper, a box and a target.

    ## Description

    Shared scene of :mod:`robogen.envs.scene`. Subclasses define how the
    target is placed (:meth:`_sample_target`) and the reward and
    success predicate (:meth:`_evaluate`). Control runs at 50 Hz
    (``FRAME_SKIP = 10`` physics steps of 0.002 s).

    ## Version History (every task)

    * v0: initial version. Later, for CPU rendering speed: the default shadow map is
      sized to the image (256 px for 84x84, was 1024; recorded as ``render.shadowsize``
      in every manifest) and the floor's render grid is 0.5 m (was 0.05 m); only frames
      with a shadow-casting light (lighting axis) differ. Round geoms (arm capsules,
      cylinders) are drawn with 12 slices x 8 stacks (MuJoCo's default 28 x 16; recorded
      as ``render.numslices`` / ``render.numstacks``; stored runs keep 28 x 16): every frame
      differs slightly at the arm's silhouette.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 50}
    env_id: ClassVar[str] = ""
    success_rule: ClassVar[str] = ""
    capabilities: ClassVar[SceneCapabilities] = SceneCapabilities(rebuildable_objects=True)
    """The object is found by its body and joint only (see SceneCapabilities)."""

    def __init__(
        self,
        obs_mode: str = "state",
        width: int = 84,
        height: int = 84,
        camera: str = "front",
        render_mode: str | None = None,
        shadowsize: int | None = None,
        offsamples: int = sc.OFFSAMPLES,
        numslices: int = sc.NUMSLICES,
        numstacks: int = sc.NUMSTACKS,
    ) -> None:
        check_obs_mode(obs_mode)
        for field, value, high in (("width", width, sc.OFFSCREEN_SIZE[0]),
                                   ("height", height, sc.OFFSCREEN_SIZE[1])):
            if not isinstance(value, (int, np.integer)) or not 1 <= value <= high:
                raise InvalidSpecError(BAD_SIZE.format(field=field, high=high, value=value))
        if camera not in sc.CAMERAS:
            raise UnknownNameError("camera", camera, sc.CAMERAS)
        if render_mode not in (None, "rgb_array"):
            raise InvalidSpecError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if shadowsize is None:
            shadowsize = sc.shadow_size_for(width, height)
        self._init_kwargs = dict(obs_mode=obs_mode, width=int(width), height=int(height),
                                 camera=camera, render_mode=render_mode,
                                 shadowsize=int(shadowsize), offsamples=int(offsamples),
                                 numslices=int(numslices), numstacks=int(numstacks))
        self.obs_mode = obs_mode
        self.width, self.height, self.camera = int(width), int(height), camera
        self.render_mode = render_mode
        self._model = self.nominal_spec().compile()
        self._data = mujoco.MjData(self._model)
        self._ids_cache: sc.SceneIds | None = None
        self._frames = SceneFrames(grow=False)
        self._ctrl_cache: tuple[Any, ...] = ()  # see _control
        self.defer_frames = False
        self.substep_observer: SubstepObserver | None = None
        """See :class:`~robogen.envs.base.SubstepScene` (the safety monitor sets it)."""
        """Pixel observations are :class:`~robogen.envs.render.PendingFrame` objects, drawn
        on the render thread while the caller goes on (resolve them with
        :func:`~robogen.envs.render.resolve_frames`); set by the rollout worker."""
        self.render_lane = 0
        """Render lane drawing this env's frames (see :mod:`robogen.envs.render`); set by the
        rollout worker."""
        self._succeeded = False

        self.observation_space = observation_space(obs_mode, (STATE_DIM,), self.height,
                                                   self.width)
        self.action_space = spaces.Box(-1.0, 1.0, (6,), np.float32)
        self._reset_arm()
        mujoco.mj_forward(self._model, self._data)

    # ---- MujocoScene protocol ------------------------------------------------------------
    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model currently simulated."""
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        """The data of :attr:`model`."""
        return self._data

    @property
    def roles(self) -> SceneRoles:
        """Scene roles; ``cameras[0]`` is this env's observation camera. The distractor
        region stands on the table top read from the current model (:func:`scene.table_top_z`),
        so distractors and the safety drop check follow an edited table."""
        (x0, x1), (y0, y1) = POSE_CLIP_XY
        cams = (self.camera,) + tuple(c for c in sc.CAMERAS if c != self.camera)
        return SceneRoles(
            floor_geoms=(sc.FLOOR_GEOM,),
            table_geoms=(sc.TABLE_GEOM,),
            object_geoms=(sc.OBJECT_GEOM,),
            object_bodies=(sc.OBJECT_BODY,),
            robot_bodies=sc.ROBOT_BODIES,
            robot_joints=sc.ROBOT_JOINTS,
            robot_actuators=sc.ROBOT_ACTUATORS,
            cameras=cams,
            lights=sc.LIGHTS,
            look_at=sc.LOOK_AT,
            distractor_region=(*sc.DISTRACTOR_REGION[:4], sc.table_top_z(self.model)),
            distractor_slots=sc.DISTRACTOR_SLOTS,
            pose_dofs=(
                PoseDof(sc.OBJECT_JOINT, 0, 0.08, x0, x1, "qpos"),
                PoseDof(sc.OBJECT_JOINT, 1, 0.08, y0, y1, "qpos"),
                PoseDof(sc.TARGET_BODY, 0, 0.08, x0, x1, "mocap"),
                PoseDof(sc.TARGET_BODY, 1, 0.08, y0, y1, "mocap"),
            ),
            keep_clear=(sc.OBJECT_BODY, sc.TARGET_BODY) + sc.GRIPPER_BODIES,
        )

    @property
    def render_settings(self) -> RenderSettings:
        """Offscreen settings of pixel observations in effect (recorded in the manifest)."""
        quality = self._model.vis.quality
        return RenderSettings(width=self.width, height=self.height, camera=self.camera,
                              shadowsize=int(quality.shadowsize),
                              offsamples=int(quality.offsamples),
                              mujoco_gl=os.environ.get("MUJOCO_GL", ""),
                              numslices=int(quality.numslices),
                              numstacks=int(quality.numstacks))

    def nominal_spec(self) -> mujoco.MjSpec:
        """A fresh, unedited spec of the nominal scene (new object each call)."""
        kw = self._init_kwargs
        return sc.build_spec(shadowsize=int(kw["shadowsize"] or 0),
                             offsamples=int(kw["offsamples"] or 0),
                             numslices=int(kw["numslices"] or 0),
                             numstacks=int(kw["numstacks"] or 0))

    def install_model(self, model: mujoco.MjModel) -> None:
        """Simulate ``model`` from now on: new ``MjData``, renderer re-pointed; spaces kept."""
        self._model = model
        self._data = mujoco.MjData(model)
        self._ids_cache = None
        self._frames.set_model(model)
        self._reset_arm()
        mujoco.mj_forward(model, self._data)

    def textures_changed(self, texture_ids: tuple[int, ...]) -> None:
        """Re-upload edited ``model.tex_data`` of ``texture_ids`` if a renderer exists."""
        self._frames.upload_textures(tuple(texture_ids))

    def observe(self) -> Any:
        """Observation of the current ``data`` in this env's obs mode (see :attr:`defer_frames`)."""
        return compose_observation(self.obs_mode, self._state, self._pixels)

    def _pixels(self) -> Any:
        return self._frames.observation(self._model, self._data, self._camera_id(self.camera),
                                        self.width, self.height, lane=self.render_lane,
                                        defer=self.defer_frames)

    def render_frame(
        self, camera: str | None = None, width: int = 84, height: int = 84
    ) -> np.ndarray:
        """Render ``(height, width, 3) uint8`` from ``camera`` (default: the observation camera).

        Raises:
            UnknownNameError: If the model has no camera ``camera``.
            RenderError: If offscreen rendering is unavailable or the frame is too large.
        """
        return self._frames.draw(self._model, self._data, self._camera_id(camera or self.camera),
                                 int(width), int(height), lane=self.render_lane)

    def _camera_id(self, camera: str) -> int:
        cam_id = self._frames.camera_id(self._model, camera)
        if cam_id < 0:
            names = [self._model.camera(i).name for i in range(self._model.ncam)]
            raise UnknownNameError("camera", camera, names)
        return cam_id

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """``(height, width, 3) uint8`` frame of the observation camera for ``rgb_array``."""
        if self.render_mode != "rgb_array":
            return None
        return self.render_frame(self.camera, self.width, self.height)

    def close(self) -> None:
        """Free the renderer's OpenGL resources (the env stays usable; a new one is made lazily)."""
        self._frames.close()

    # ---- gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the arm to home and sample object and target from ``self.np_random``."""
        super().reset(seed=seed)
        model, data = self._model, self._data
        mujoco.mj_resetData(model, data)
        self._reset_arm()
        ids = self._ids()
        (x0, x1), (y0, y1) = self.object_xy_range
        obj_xy = np.array([self.np_random.uniform(x0, x1), self.np_random.uniform(y0, y1)])
        yaw = self.np_random.uniform(*OBJECT_YAW_RANGE)
        target = self._sample_target(obj_xy)
        adr = ids.object_qadr
        data.qpos[adr:adr + 3] = (obj_xy[0], obj_xy[1], ids.table_top_z + sc.OBJECT_HALF_SIZE)
        data.qpos[adr + 3:adr + 7] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
        data.mocap_pos[ids.target_mocap] = target
        mujoco.mj_forward(model, data)
        self._succeeded = False
        _, success, extra = self._evaluate()
        return self.observe(), {"success": bool(success), **extra}

    def step(self, action: np.ndarray):
        """Apply ``action`` for ``FRAME_SKIP`` physics steps; see the class docstring."""
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), -1.0, 1.0)
        if a.shape != (6,):
            raise InvalidSpecError(f"action must have shape (6,), got {np.shape(action)}")
        model, data = self._model, self._data
        ctrl, arm_act, finger_act, ctrl_range = self._control()
        arm = ctrl[arm_act] + ACTION_SCALE * a[:5]
        # np.clip(arm, lo, hi) is maximum then minimum; spelt out it costs less per step
        ctrl[arm_act] = np.minimum(np.maximum(arm, ctrl_range[arm_act, 0]), ctrl_range[arm_act, 1])
        lo, hi = ctrl_range[finger_act, 0], ctrl_range[finger_act, 1]
        ctrl[finger_act] = lo + (a[5] + 1.0) / 2.0 * (hi - lo)
        observer = self.substep_observer
        if observer is None:
            mujoco.mj_step(model, data, nstep=sc.FRAME_SKIP)  # pyright: ignore[reportAttributeAccessIssue]
        else:  # the same steps one at a time (bit for bit), each shown to the observer
            for _ in range(sc.FRAME_SKIP):
                mujoco.mj_step(model, data)  # pyright: ignore[reportAttributeAccessIssue]
                observer(model, data)
        reward, success, extra = self._evaluate()
        if success and not self._succeeded:
            reward += SUCCESS_BONUS
        self._succeeded = self._succeeded or success
        obs = self.observe()
        return obs, float(reward), bool(success), False, {"success": bool(success), **extra}

    # ---- pickling ------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"kwargs": self._init_kwargs, "model": self._model, "data": self._data,
                "np_random": self._np_random, "np_random_seed": self._np_random_seed,
                "succeeded": self._succeeded, "spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["kwargs"])
        self._model, self._data = state["model"], state["data"]
        self._np_random, self._np_random_seed = state["np_random"], state["np_random_seed"]
        self._succeeded = state["succeeded"]
        self.spec = state["spec"]

    # ---- helpers -------------------------------------------------------------------------
    object_xy_range: ClassVar[tuple[tuple[float, float], tuple[float, float]]] = OBJECT_XY_RANGE

    def _ids(self) -> sc.SceneIds:
        if self._ids_cache is None or self._ids_cache.model is not self._model:
            self._ids_cache = sc.SceneIds(self._model)
        return self._ids_cache

    def _control(self) -> tuple[np.ndarray, Any, Any, np.ndarray]:
        """``(data.ctrl, arm actuators, finger actuators, model.actuator_ctrlrange)``: views
        into the current model and data (edits in place show through), the actuator indices
        as slices where they are contiguous (as in the built scene), kept per data object."""
        cached = self._ctrl_cache
        if not cached or cached[0] is not self._data or cached[1] is not self._model:
            ids = self._ids()
            cached = self._ctrl_cache = (self._data, self._model, self._data.ctrl,
                                         _as_slice(ids.arm_act), _as_slice(ids.finger_act),
                                         self._model.actuator_ctrlrange)
        return cached[2], cached[3], cached[4], cached[5]

    def _reset_arm(self) -> None:
        model, data, ids = self._model, self._data, self._ids()
        for name, q in sc.HOME_QPOS.items():
            data.qpos[model.joint(name).qposadr[0]] = q
        data.ctrl[ids.arm_act] = data.qpos[ids.arm_qadr]
        data.ctrl[ids.finger_act] = data.qpos[ids.finger_qadr]

    def _positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(end-effector, object, target) positions [m], each ``(3,) float64``."""
        ids, data = self._ids(), self._data
        return (data.site_xpos[ids.grip_site].copy(), data.xpos[ids.object_body].copy(),
                data.mocap_pos[ids.target_mocap].copy())

    def _state(self) -> np.ndarray:
        ids, data = self._ids(), self._data
        ee, obj, target = self._positions()
        adr = ids.object_qadr
        return np.concatenate([
            data.qpos[ids.arm_qadr], data.qvel[ids.arm_dadr],
            [data.qpos[ids.finger_qadr].sum()], ee, obj, data.qpos[adr + 3:adr + 7], target,
            obj - ee, target - obj,
        ]).astype(np.float32)

    def _sample_target(self, obj_xy: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _evaluate(self) -> tuple[float, bool, dict[str, Any]]:
        raise NotImplementedError


def _as_slice(index: np.ndarray) -> slice | np.ndarray:
    """``index`` (1-D int) as the equivalent slice if it is a run of consecutive ids."""
    if len(index) and np.array_equal(index, np.arange(index[0], index[0] + len(index))):
        return slice(int(index[0]), int(index[0]) + len(index))
    return index
