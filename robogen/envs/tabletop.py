"""Built-in tabletop tasks: Reach, Push and PickPlace on the shared MjSpec scene.

Importing this module registers the tasks with Gymnasium (once)::

    robogen/Reach-v0      entry point robogen.envs.tabletop:ReachEnv       100 steps
    robogen/Push-v0       entry point robogen.envs.tabletop:PushEnv        150 steps
    robogen/PickPlace-v0  entry point robogen.envs.tabletop:PickPlaceEnv   200 steps

Every task is a :class:`TabletopEnv` (:mod:`robogen.envs.tabletop_scene`), which
implements the :class:`~robogen.envs.base.MujocoScene` protocol so perturbation axes can
act on it; a task adds its target sampling and success predicate. The scene itself is
built in :mod:`robogen.envs.scene`.
"""

from __future__ import annotations

import os
from typing import Any

import robogen._gl  # noqa: F401  (choose MUJOCO_GL before mujoco is imported)

# isort: split
import gymnasium as gym
import numpy as np

from robogen.envs import scene as sc
from robogen.envs.families import EnvOptions
from robogen.envs.observations import (
    BAD_OBS_MODE,  # noqa: F401  (re-exported: the message template tests reuse)
    OBS_MODES,
)
from robogen.envs.tabletop_scene import (  # the constants: re-exported, as before the split
    ACTION_SCALE,
    BAD_SIZE,  # noqa: F401
    OBJECT_XY_RANGE,  # noqa: F401
    OBJECT_YAW_RANGE,  # noqa: F401
    POSE_CLIP_XY,  # noqa: F401
    STATE_DIM,
    STATE_LAYOUT,
    SUCCESS_BONUS,  # noqa: F401
    THRESHOLD_NOT_USED,
    TabletopEnv,
    task_name,
)
from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.types import RenderSettings

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
