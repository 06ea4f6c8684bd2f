"""Built-in tabletop tasks: Reach, Push and PickPlace on the shared MjSpec scene.

Importing this module registers the tasks with Gymnasium (once)::

    robogen/Reach-v0      entry point robogen.envs.tabletop:ReachEnv       100 steps
    robogen/Push-v0       entry point robogen.envs.tabletop:PushEnv        150 steps
    robogen/PickPlace-v0  entry point robogen.envs.tabletop:PickPlaceEnv   200 steps

Every task is a :class:`TabletopEnv`, which implements the
:class:`~robogen.envs.base.MujocoScene` protocol so perturbation axes can act
on it. The scene itself is built in :mod:`robogen.envs.scene`.
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
from robogen.envs.families import EnvOptions
from robogen.envs.frames import SceneFrames
from robogen.envs.observations import (
    BAD_OBS_MODE,  # noqa: F401  (re-exported: the message template tests reuse)
    OBS_MODES,
    check_obs_mode,
    compose_observation,
    observation_space,
)
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

_SPACES_DOC = """
    ## Action Space

    ``Box(-1, 1, (6,), float32)``. The arm is driven by position servos
    (actuators named like the joints); an action moves their targets.

    | index | meaning | scale | unit |
    |---|---|---|---|
    | 0 | change of base_yaw target | x ACTION_SCALE (0.05) | rad |
    | 1 | change of shoulder_pitch target | x 0.05 | rad |
    | 2 | change of elbow_pitch target | x 0.05 | rad |
    | 3 | change of wrist_pitch target | x 0.05 | rad |
    | 4 | change of wrist_roll target | x 0.05 | rad |
    | 5 | gripper: -1 closed .. +1 open (absolute finger target) | [0, 0.04] per finger | m |

    Targets are clipped to the actuators' ``ctrlrange`` (the joint ranges).

    ## Observation Space

    ``state``: ``Box(-inf, inf, (30,), float32)``:

    | index | field | unit |
    |---|---|---|
    | 0-4 | arm joint positions (base_yaw, shoulder, elbow, wrist_pitch, wrist_roll) | rad |
    | 5-9 | arm joint velocities | rad/s |
    | 10 | gripper gap (sum of both finger slides) | m |
    | 11-13 | end-effector (grip_site) position | m |
    | 14-16 | object position | m |
    | 17-20 | object orientation quaternion (w, x, y, z) | - |
    | 21-23 | target position | m |
    | 24-26 | object position - end-effector position | m |
    | 27-29 | target position - object position | m |

    ``pixels``: ``Box(0, 255, (height, width, 3), uint8)`` from camera ``camera``
    (default ``front``, 84x84). ``state+pixels``: ``Dict(state=..., pixels=...)``.

    ## Perturbation hooks

    The env is a :class:`~robogen.envs.base.MujocoScene`: floor/table/object
    geoms each have their own 64x64 texture, two named lights
    (``key_light``, ``fill_light``), three cameras (``front``, ``top``,
    ``side``), six hidden mocap distractor slots, an actuated arm (position
    servos with bias terms), the object's free joint and the target's mocap
    position as pose degrees of freedom. Model-derived ids are looked up from
    the current ``model`` (never cached across :meth:`install_model`).
"""


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
        """Scene roles; ``cameras[0]`` is this env's observation camera."""
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
            distractor_region=sc.DISTRACTOR_REGION,
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


class ReachEnv(TabletopEnv):
    """Move the gripper to a target in the air above the table.

    ## Description

    The target (green sphere) is placed uniformly in the box x in [-0.12,
    0.12], y in [-0.16, 0.16], z in table + [0.06, 0.22] m; the box rests on
    the table (x in [-0.10, 0.12], y in [-0.15, 0.15] m, yaw in [-45, 45]
    deg) and plays no role.

    ## Reward

    ``-d + SUCCESS_BONUS * [first success]`` with ``d`` the end-effector to
    target distance [m].

    ## Success

    ``d < 0.03`` m. ``info["success"]`` on every step; ``info["distance"]`` is ``d``.

    ## Episode End

    Terminates on success; truncated after 100 steps (2 s) by the registered TimeLimit.

    ## Version History

    * v0: initial version; later the rendering change of every task (:class:`TabletopEnv`).
    """

    env_id = "robogen/Reach-v0"
    success_rule = "end-effector within 0.03 m of the target"
    threshold = 0.03

    def _sample_target(self, obj_xy: np.ndarray) -> np.ndarray:
        rng = self.np_random
        return np.array([rng.uniform(-0.12, 0.12), rng.uniform(-0.16, 0.16),
                         self._ids().table_top_z + rng.uniform(0.06, 0.22)])

    def _evaluate(self) -> tuple[float, bool, dict[str, Any]]:
        ee, _, target = self._positions()
        d = float(np.linalg.norm(ee - target))
        return -d, d < self.threshold, {"distance": d}


class PushEnv(TabletopEnv):
    """Push the box across the table onto a target on the table.

    ## Description

    The box starts at x in [-0.08, 0.10], y in [-0.15, 0.15] m (yaw in [-45,
    45] deg); the target lies on the table 0.10-0.18 m away in a random
    direction, inside x in [-0.12, 0.16], y in [-0.20, 0.20] m. The target
    is visual only: the box is pushed onto it.

    ## Reward

    ``-d_obj - 0.5 * d_ee + SUCCESS_BONUS * [first success]`` with ``d_obj``
    the horizontal box-to-target distance and ``d_ee`` the end-effector to
    box distance [m].

    ## Success

    ``d_obj < 0.05`` m with the box on the table (its centre within 0.01 m
    of resting height). ``info["distance"]`` is ``d_obj``.

    ## Episode End

    Terminates on success; truncated after 150 steps (3 s).

    ## Version History

    * v0: initial version; later the rendering change of every task (:class:`TabletopEnv`).
    """

    env_id = "robogen/Push-v0"
    success_rule = "box centre within 0.05 m (horizontally) of the target, box on the table"
    threshold = 0.05
    object_xy_range = ((-0.08, 0.10), (-0.15, 0.15))

    def _sample_target(self, obj_xy: np.ndarray) -> np.ndarray:
        rng = self.np_random
        for _ in range(100):
            angle, dist = rng.uniform(-np.pi, np.pi), rng.uniform(0.10, 0.18)
            xy = obj_xy + dist * np.array([np.cos(angle), np.sin(angle)])
            if -0.12 <= xy[0] <= 0.16 and -0.20 <= xy[1] <= 0.20:
                break
        return np.array([xy[0], xy[1], self._ids().table_top_z + sc.OBJECT_HALF_SIZE])

    def _evaluate(self) -> tuple[float, bool, dict[str, Any]]:
        ee, obj, target = self._positions()
        d_obj = float(np.linalg.norm(obj[:2] - target[:2]))
        on_table = abs(obj[2] - (self._ids().table_top_z + sc.OBJECT_HALF_SIZE)) < 0.01
        reward = -d_obj - 0.5 * float(np.linalg.norm(ee - obj))
        return reward, bool(d_obj < self.threshold and on_table), {"distance": d_obj}


class PickPlaceEnv(TabletopEnv):
    """Pick up the box and hold it at a target in the air.

    ## Description

    The box starts on the table (x in [-0.10, 0.12], y in [-0.15, 0.15] m,
    yaw in [-45, 45] deg); the target floats at table + [0.08, 0.18] m,
    horizontally at x in [-0.12, 0.12], y in [-0.16, 0.16] m and at least
    0.08 m from the box. Because the target is elevated the box must be
    grasped and lifted.

    ## Reward

    ``-d_obj - 0.5 * d_ee + SUCCESS_BONUS * [first success]`` with ``d_obj``
    the box-to-target distance and ``d_ee`` the end-effector to box distance [m].

    ## Success

    ``d_obj < 0.05`` m (3-D distance of the box centre to the target).
    ``info["distance"]`` is ``d_obj``.

    ## Episode End

    Terminates on success; truncated after 200 steps (4 s).

    ## Version History

    * v0: initial version; later the rendering change of every task (:class:`TabletopEnv`).
    """

    env_id = "robogen/PickPlace-v0"
    success_rule = "box centre within 0.05 m of the elevated target"
    threshold = 0.05

    def _sample_target(self, obj_xy: np.ndarray) -> np.ndarray:
        rng = self.np_random
        for _ in range(100):
            xy = np.array([rng.uniform(-0.12, 0.12), rng.uniform(-0.16, 0.16)])
            if np.linalg.norm(xy - obj_xy) >= 0.08:
                break
        return np.array([xy[0], xy[1], self._ids().table_top_z + rng.uniform(0.08, 0.18)])

    def _evaluate(self) -> tuple[float, bool, dict[str, Any]]:
        ee, obj, target = self._positions()
        d_obj = float(np.linalg.norm(obj - target))
        reward = -d_obj - 0.5 * float(np.linalg.norm(ee - obj))
        return reward, d_obj < self.threshold, {"distance": d_obj}


for _cls in (ReachEnv, PushEnv, PickPlaceEnv):
    _cls.__doc__ = (_cls.__doc__ or "") + _SPACES_DOC

TASKS: dict[str, tuple[type[TabletopEnv], int]] = {
    ReachEnv.env_id: (ReachEnv, 100),
    PushEnv.env_id: (PushEnv, 150),
    PickPlaceEnv.env_id: (PickPlaceEnv, 200),
}
"""Env id -> (class, registered max_episode_steps)."""
TASK_IDS: tuple[str, ...] = tuple(TASKS)
TASK_NAMES: dict[str, str] = {task_name(env_id): env_id for env_id in TASK_IDS}
"""Snake-case task name (``reach``, ``push``, ``pick_place``) -> env id."""


def register_tasks() -> None:
    """Register the tasks with Gymnasium (no-op for ids already registered)."""
    for env_id, (cls, max_steps) in TASKS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=f"{__name__}:{cls.__name__}",
                         max_episode_steps=max_steps)


def default_render_settings(
    width: int = 84, height: int = 84, camera: str = "front"
) -> RenderSettings:
    """The render settings the tabletop tasks use unless told otherwise."""
    return RenderSettings(width=width, height=height, camera=camera,
                          shadowsize=sc.shadow_size_for(width, height),
                          offsamples=sc.OFFSAMPLES, mujoco_gl=os.environ.get("MUJOCO_GL", ""),
                          numslices=sc.NUMSLICES, numstacks=sc.NUMSTACKS)


def make_task(env_id: str, options: EnvOptions | None = None, **kwargs: Any) -> gym.Env:
    """Create a built-in task through ``gymnasium.make`` (called by :func:`robogen.envs.make`).

    Args:
        env_id: One of :data:`TASK_IDS`.
        options: Observation mode; step limit (None: the registered default:
            100/150/200); ``success_threshold``, which must be None: every built-in task
            has its own success predicate (documented per task); and ``render``, the pixel
            settings (default :class:`~robogen.envs.families.EnvOptions`). Of ``render``,
            width, height and camera (``""``: ``front``) are
            used; a non-zero ``shadowsize`` / ``offsamples`` replaces the scene's
            (0 means "the scene's own": a map sized to the image, 256 px for 84x84, see
            :func:`~robogen.envs.scene.shadow_size_for`, and ``OFFSAMPLES`` = 0;
            likewise ``numslices`` / ``numstacks``, the scene's 12 / 8);
            pass ``shadowsize=0`` as a keyword to disable the shadow map).
            The settings in effect are ``env.unwrapped.render_settings``.
            None: :func:`default_render_settings`.
        **kwargs: Further constructor arguments (``render_mode``, ``shadowsize``, ...).

    Returns:
        The env wrapped by Gymnasium's TimeLimit (and checker wrappers).

    Raises:
        UnknownNameError: On an env id that is not a built-in task.
        InvalidSpecError: On a success threshold, or a bad obs mode or size.
    """
    if env_id not in TASKS:
        raise UnknownNameError("env id", env_id, TASK_IDS)
    options = options or EnvOptions()
    if options.success_threshold is not None:
        raise InvalidSpecError(THRESHOLD_NOT_USED.format(
            env_id=env_id, rule=TASKS[env_id][0].success_rule, value=options.success_threshold))
    register_tasks()
    render = options.render or default_render_settings()
    kwargs.setdefault("width", render.width)
    kwargs.setdefault("height", render.height)
    kwargs.setdefault("camera", render.camera or "front")
    if render.shadowsize:
        kwargs.setdefault("shadowsize", render.shadowsize)
    if render.offsamples:
        kwargs.setdefault("offsamples", render.offsamples)
    if render.numslices:
        kwargs.setdefault("numslices", render.numslices)
    if render.numstacks:
        kwargs.setdefault("numstacks", render.numstacks)
    extra: dict[str, Any] = ({} if options.max_steps is None
                             else {"max_episode_steps": options.max_steps})
    return gym.make(env_id, obs_mode=options.obs_mode, **kwargs, **extra)


def family_ids() -> tuple[str, ...]:
    """Names of the ``robogen`` env family (:mod:`robogen.envs.families`): ``Reach-v0``, ..."""
    return tuple(i.split("/", 1)[1] for i in TASK_IDS)


def family_make(name: str, options: EnvOptions, **kwargs: Any) -> gym.Env:
    """Create ``robogen/<name>`` (see :func:`make_task`)."""
    return make_task(f"robogen/{name}", options, **kwargs)


register_tasks()

__all__ = [
    "ACTION_SCALE", "OBS_MODES", "STATE_DIM", "STATE_LAYOUT", "TASK_IDS", "TASK_NAMES",
    "PickPlaceEnv", "PushEnv", "ReachEnv", "TabletopEnv", "default_render_settings",
    "family_ids", "family_make", "make_task", "register_tasks", "task_name",
]
