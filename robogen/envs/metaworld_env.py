"""The ``metaworld`` env family: Meta-World v3 Sawyer tasks made perturbable.

``robogen.envs.make("metaworld/pick-place-v3")`` builds Meta-World's
``SawyerPickPlaceEnvV3`` with the goal observable (as in MT1/MT10/MT50) and
wraps it in a :class:`MetaWorldAdapter`, a
:class:`~robogen.envs.gym_adapter.GymMujocoAdapter` whose hooks give Meta-World's
roles, success and frame-stacked observation; model swaps, pixel rendering and
texture uploads are the Gymnasium adapter's.

Install: ``make setup-metaworld``: ``pip install --no-deps metaworld==3.1.1``
next to robogen's mujoco 4.0 (metaworld pins ``mujoco==3.3.0`` exactly, which
pip refuses next to 4.0; ``pip check`` then reports that pin). Physics differ
slightly between mujoco versions, so a Meta-World number names its mujoco
version (it is in every run's manifest).

mujoco >= 3.17 fix (:func:`patch_reset_mocap_welds`):
    a weld's ``eq_data`` row grew from 11 to 12 values, and Meta-World's
    ``SawyerMocapBase.reset_mocap_welds`` writes an 11-value row into it
    (``ValueError: could not broadcast ... (11,) into shape (12,)``). When this
    family loads, and only if the rows are longer than 11, robogen replaces
    that one method by a copy that writes the same 11 values into the first 11
    columns. Measured: MT1 pick-place 10/10 and MT50 96/98 with the scripted
    policies, the same totals as on mujoco 3.3.0.

Initial states: ``reset(seed=s)`` seeds Meta-World's generator (``env.seed(s)``)
and draws object and goal positions from the task's own reset range (the way MT1
draws its 50 tasks), so episode *i* gets the same initial state in every
condition. ``task=k`` (env kwarg) instead fixes MT1's task *k* (``MT1(<task>,
seed=task_seed)``, default seed 0): every reset then starts from that task.

Success: ``info["success"]`` true at **any** step (Meta-World's flag does not
latch and its envs never end on success; Farama-Foundation/Metaworld#176,
#331). The adapter's ``info["success"]`` is that latched value at the last step
(False before), ``info["robogen"]["success_now"]`` the per-step flag and
``info["robogen"]["first_success_step"]`` the first successful step (or -1).
Horizon: the env's ``max_path_length`` (500); a larger ``max_steps`` is capped
at 500 with a warning, never an error.

Observation (``state``, float32, 39 values, Meta-World's layout): hand position
[m] 0:3, gripper opening [0-1] 3, object 1 position/quaternion 4:11, object 2
11:18, the previous step's 18 values 18:36, goal position [m] 36:39.

Scene roles: floor ``floor``, the table's geoms (``tablelink_geom*``), the task's
objects (every body outside the robot, table, wall and mocap), the Sawyer arm
from ``right_l0`` (links, 7 arm joints and 2 finger joints, the 2 finger
actuators; the hand moves by mocap, so gain edits act on the fingers), the
three lights, cameras ``corner`` (observation), ``corner2``, ``corner3``,
``topview``, distractors on the table top, and pose dofs: the x/y of every free
object joint, and the mocap target's x/y/z (the arm's initial position: the weld
pulls the hand to the displaced target over the first steps).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, ClassVar

import gymnasium as gym  # robogen.envs imported robogen._gl first (MUJOCO_GL)
import mujoco
import numpy as np
from gymnasium.envs.registration import EnvSpec

from robogen.envs.base import PoseDof, SceneCapabilities, SceneRoles
from robogen.envs.elements import descends_from, name_elements
from robogen.envs.families import EnvOptions, check_max_steps
from robogen.envs.gym_adapter import GymMujocoAdapter, set_weld_rows
from robogen.errors import InvalidSpecError, RobogenWarning, UnknownNameError
from robogen.types import RenderSettings

TASKS: tuple[str, ...] = (
    "reach-v3", "push-v3", "pick-place-v3", "door-open-v3", "drawer-open-v3",
    "button-press-v3", "window-open-v3", "peg-insert-side-v3",
)
"""Meta-World v3 task names of this family (robogen ids ``metaworld/<task>``)."""
MAX_PATH_LENGTH = 500
"""Meta-World's episode horizon (``SawyerXYZEnv.max_path_length``) [steps]."""
HORIZON_CAPPED = (
    "metaworld/{task} episodes end at Meta-World's max_path_length of {limit} steps; "
    "max_steps={asked} is capped to {limit} (the run's manifest and report record {limit})"
)
CAMERAS = ("corner", "corner2", "corner3", "topview")
FIXED_BODIES = ("world", "tablelink", "RetainingWall", "base", "mocap")
ARM_ROOT = "right_l0"
WELD_ROW = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0)
"""Meta-World's weld ``eq_data`` row (anchor, relpose, torquescale) [11 values]."""
LOOK_AT = (0.0, 0.6, 0.0)
DISTRACTOR_REGION = (-0.45, 0.45, 0.35, 0.95, 0.0)
NOT_PICKLABLE = (
    "{env_id} cannot be pickled: Meta-World's env drops its task and observability settings "
    "when rebuilt; build it where it runs with robogen.envs.make({env_id!r})"
)
"""Message of the TypeError that pickling a Meta-World env raises (tests reuse it)."""
"""Table-top area (x/y [m]) and height [m] where distractors are placed."""


def _check(task: str) -> None:
    if task not in TASKS:
        raise UnknownNameError("Meta-World task", task, TASKS)


# ----------------------------------------------------------------------------- mujoco fix


def _reset_mocap_welds(self: Any) -> None:
    """Meta-World's ``reset_mocap_welds`` writing its 11 values into the first 11 columns."""
    model = self.model
    if model.nmocap > 0 and model.eq_data is not None:
        for i in range(model.eq_data.shape[0]):
            if int(model.eq_type[i]) == int(mujoco.mjtEq.mjEQ_WELD):
                model.eq_data[i, :len(WELD_ROW)] = WELD_ROW


def weld_row_size() -> int:
    """Number of ``eq_data`` values per equality constraint in the running mujoco."""
    spec = mujoco.MjSpec.from_string(
        '<mujoco><worldbody><body name="a" mocap="true"/><body name="b"><freejoint/>'
        '<geom size="0.1"/></body></worldbody><equality><weld body1="a" body2="b"/>'
        "</equality></mujoco>")
    return int(spec.compile().eq_data.shape[1])


def patch_reset_mocap_welds() -> bool:
    """Fix ``SawyerMocapBase.reset_mocap_welds`` on mujoco >= 3.17 (see the module docstring).

    Returns:
        True if the method was replaced (now or earlier), False if not needed.
    """
    from metaworld import sawyer_xyz_env

    if weld_row_size() <= len(WELD_ROW):
        return False
    sawyer_xyz_env.SawyerMocapBase.reset_mocap_welds = _reset_mocap_welds  # type: ignore[method-assign]
    return True


# ----------------------------------------------------------------------------- adapter


@dataclasses.dataclass(frozen=True, slots=True)
class MetaWorldSuccessRule:
    """Meta-World's success: ``info["success"]`` at any step of the episode.

    Attributes:
        horizon: Episode length [steps] (``max_path_length`` or less).
    """

    horizon: int = MAX_PATH_LENGTH

    def describe(self) -> str:
        """One line for reports and metadata."""
        return (f'info["success"] at any step (Meta-World; the flag does not latch and the env '
                f"never ends on success), horizon {self.horizon} steps (max_path_length 500)")


class MetaWorldAdapter(GymMujocoAdapter):
    """A Meta-World v3 task made perturbable (roles, any-step success, seeded resets).

    Description:
        Wraps a Meta-World env (goal observable) in a ``TimeLimit`` of at most
        500 steps. Physics, reward (v2 reward functions) and the task's reset
        ranges are Meta-World's.

    Observation Space:
        ============  =====================================  =============================
        obs_mode      space                                  unit
        ============  =====================================  =============================
        state         Box(-inf, inf, (39,), float32)         layout in the module docstring
        pixels        Box(0, 255, (H, W, 3), uint8)          RGB from ``corner``
        state+pixels  Dict(state=..., pixels=...)            both
        ============  =====================================  =============================

    Action Space:
        Box(-1, 1, (4,), float32): hand displacement x, y, z (x 0.01 m per step
        through the mocap) and gripper effort (positive closes).

    Reward:
        Meta-World's (v2), in [0, 10] per step.

    Perturbation hooks:
        Those of :class:`~robogen.envs.gym_adapter.GymMujocoAdapter`; roles in
        the module docstring.

    Success:
        ``info["success"]`` at any step (latched by the adapter).

    Episode End:
        Truncation at ``max_steps`` (at most 500); never terminated.

    Version History:
        * v0: initial adapter (metaworld 3.1.1, ``-v3`` tasks).

    Args:
        env: ``TimeLimit`` around a Meta-World env whose spec id is ``metaworld/<task>``.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        render: Pixel settings; None: 84x84 from ``corner``, shadows and MSAA off.
        success_threshold: Must be None (Meta-World has its own success flag).

    Raises:
        UnknownNameError: If the env's task is not in :data:`TASKS`.
        InvalidSpecError: On a success threshold, a bad observation mode or render size.
    """

    capabilities: ClassVar[SceneCapabilities] = SceneCapabilities(rebuildable_objects=False)
    """Meta-World's tasks look objects' geoms up by name (``objGeom``): not rebuilt."""

    own_success: ClassVar[str] = "Meta-World envs decide success by info['success']"

    def __getstate__(self) -> dict[str, Any]:
        """Refuse pickling (a rebuilt Meta-World env would have another task and spaces).

        Raises:
            TypeError: Always (:data:`NOT_PICKLABLE`).
        """
        raise TypeError(NOT_PICKLABLE.format(env_id=self.gym_id))

    def __init__(self, env: gym.Env[Any, Any], obs_mode: str = "state",
                 render: RenderSettings | None = None,
                 success_threshold: float | None = None) -> None:
        self._any_success = False
        self._first_success = -1
        self._steps = 0
        self._last_raw: np.ndarray | None = None
        super().__init__(env, obs_mode=obs_mode, render=render,
                         success_threshold=success_threshold)

    # -- hooks -----------------------------------------------------------------------------

    def _check_env_id(self, gym_id: str) -> None:
        _check(gym_id.split("/", 1)[-1])

    def _make_rule(self, max_steps: int | None, success_threshold: float | None) -> Any:
        return MetaWorldSuccessRule(int(max_steps or MAX_PATH_LENGTH))

    def _make_roles(self, model: mujoco.MjModel) -> SceneRoles:
        arm_root = model.body(ARM_ROOT).id
        robot = tuple(model.body(i).name for i in range(model.nbody)
                      if descends_from(model, i, arm_root))
        robot_ids = {model.body(b).id for b in robot}
        fixed = {model.body(b).id for b in FIXED_BODIES if _has_body(model, b)}
        base = model.body("base").id  # the robot's tree hangs off "base"
        # objects: bodies outside the robot (whose tree hangs off "base"), table, wall and mocap
        objects = tuple(model.body(i).name for i in range(1, model.nbody)
                        if _root(model, i) not in fixed | {base})
        object_ids = {model.body(b).id for b in objects}
        table = model.body("tablelink").id
        table_geoms = tuple(model.geom(g).name for g in range(model.ngeom)
                            if int(model.geom_bodyid[g]) == table)
        object_geoms = tuple(model.geom(g).name for g in range(model.ngeom)
                             if int(model.geom_bodyid[g]) in object_ids)
        joints = tuple(model.joint(j).name for j in range(model.njnt)
                       if int(model.jnt_bodyid[j]) in robot_ids)
        inner: Any = self.env.unwrapped
        pose: list[PoseDof] = []
        for j in range(model.njnt):
            if (int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)
                    and int(model.jnt_bodyid[j]) in object_ids):
                name = model.joint(j).name
                pose += [PoseDof(name, 0, 0.05, -0.4, 0.4), PoseDof(name, 1, 0.05, 0.4, 0.95)]
        low, high = np.asarray(inner.mocap_low, float), np.asarray(inner.mocap_high, float)
        pose += [PoseDof("mocap", k, 0.05, float(low[k]), float(high[k]), kind="mocap")
                 for k in range(3)]
        return SceneRoles(
            floor_geoms=("floor",), table_geoms=table_geoms, object_geoms=object_geoms,
            object_bodies=objects, robot_bodies=robot, robot_joints=joints,
            robot_actuators=tuple(model.actuator(a).name for a in range(model.nu)),
            cameras=CAMERAS, lights=tuple(model.light(i).name for i in range(model.nlight)),
            look_at=LOOK_AT, distractor_region=DISTRACTOR_REGION, pose_dofs=tuple(pose),
            keep_clear=(*robot, *objects, "mocap"),
        )

    def _prepare_model(self, model: mujoco.MjModel) -> None:
        """Meta-World's ``reset_mocap_welds`` on a freshly compiled model."""
        for i in range(model.neq):
            if int(model.eq_type[i]) == int(mujoco.mjtEq.mjEQ_WELD):
                model.eq_data[i, :len(WELD_ROW)] = WELD_ROW

    def _state_shape(self) -> tuple[int, ...]:
        return (39,)

    def _state_obs(self) -> np.ndarray:
        """``[current 18, previous 18, goal 3]`` of the current state, without side effects."""
        inner: Any = self.env.unwrapped
        return np.hstack((inner._get_curr_obs_combined_no_goal(), inner._prev_obs,
                          self._goal()))

    def _goal(self) -> np.ndarray:
        inner: Any = self.env.unwrapped
        if inner._partially_observable or inner._target_pos is None:
            return np.zeros(3)
        return np.asarray(inner._get_pos_goal(), dtype=np.float64)

    def nominal_spec(self) -> mujoco.MjSpec:
        """A fresh nominal MjSpec: Meta-World's XML with names filled in."""
        spec = mujoco.MjSpec.from_file(self.env.unwrapped.fullpath)  # type: ignore[attr-defined]
        name_elements(spec)
        for body in spec.bodies:  # unnamed joints (peg-insert-side's peg) get "<body>_joint"
            for k, joint in enumerate(body.joints):
                if not joint.name:
                    joint.name = f"{body.name}_joint" if k == 0 else f"{body.name}_joint{k}"
        set_weld_rows(spec, WELD_ROW)
        return spec

    def suite_observation(self) -> np.ndarray:
        """The last observation the env returned, float64 (39,) (for the scripted policies)."""
        if self._last_raw is None:
            return self._state_obs()
        return self._last_raw

    # -- gym API ---------------------------------------------------------------------------

    def observe(self) -> Any:
        """The observation after a state edit at reset: both frames are the current one."""
        inner: Any = self.env.unwrapped
        mujoco.mj_forward(inner.model, inner.data)
        curr = inner._get_curr_obs_combined_no_goal()
        inner._prev_obs = curr.copy()
        raw = np.hstack((curr, curr, self._goal()))
        self._last_raw = raw
        return self._transform(raw)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        """Reset; ``seed`` seeds Meta-World's generator (object and goal positions)."""
        inner: Any = self.env.unwrapped
        if seed is not None:
            inner.seed(int(seed))
        self._any_success, self._first_success, self._steps = False, -1, 0
        obs, info = self.env.reset(seed=seed, options=options)
        self._episode_return = 0.0
        self._last_raw = np.asarray(obs, dtype=np.float64)
        info = dict(info)
        info["success"] = False
        info["episode_return"] = 0.0
        return self._transform(obs), info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step; ``info["success"]`` is "succeeded at any step so far" at the last step."""
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(action))
        self._steps += 1
        self._episode_return += float(reward)
        now = bool(info.get("success", 0.0))
        if now and not self._any_success:
            self._first_success = self._steps
        self._any_success |= now
        self._last_raw = np.asarray(obs, dtype=np.float64)
        info = dict(info)
        info["success"] = self._any_success if (terminated or truncated) else False
        info["episode_return"] = self._episode_return
        info["robogen"] = {"success_metric": float(self._any_success), "success_now": now,
                           "first_success_step": self._first_success}
        return self._transform(obs), reward, terminated, truncated, info


def _has_body(model: mujoco.MjModel, name: str) -> bool:
    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name) >= 0


def _root(model: mujoco.MjModel, body: int) -> int:
    """The world child that ``body`` hangs from."""
    while int(model.body_parentid[body]) > 0:
        body = int(model.body_parentid[body])
    return body


def make_metaworld(task: str, *, obs_mode: str = "state", max_steps: int | None = None,
                   render: RenderSettings | None = None,
                   success_threshold: float | None = None, task_index: int | None = None,
                   task_seed: int = 0, **kwargs: Any) -> MetaWorldAdapter:
    """Create Meta-World's ``task`` wrapped as a perturbable robogen env.

    Args:
        task: A :data:`TASKS` name, e.g. ``pick-place-v3``.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        max_steps: Step limit (None: 500); above 500 it is capped with a warning.
        render: Pixel settings; None: 84x84 from ``corner``, shadows and MSAA off.
        success_threshold: Must be None.
        task_index: If given, every reset starts from MT1's task ``task_index``
            (0..49) of ``MT1(task, seed=task_seed)``; None: initial states from
            the reset seed.
        task_seed: Seed of the MT1 benchmark whose task is fixed.
        **kwargs: Passed to the Meta-World env class (``reward_function_version``).

    Raises:
        UnknownNameError: If ``task`` is not in :data:`TASKS`.
        InvalidSpecError: On a bad step limit or task index, or a success threshold.
    """
    _check(task)
    check_max_steps(max_steps)
    if max_steps is not None and max_steps > MAX_PATH_LENGTH:
        warnings.warn(HORIZON_CAPPED.format(task=task, limit=MAX_PATH_LENGTH, asked=max_steps),
                      RobogenWarning, stacklevel=2)
        max_steps = MAX_PATH_LENGTH
    import metaworld
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    patch_reset_mocap_welds()
    kwargs.pop("disable_env_checker", None)  # a gym.make argument; the env is built directly
    inner: Any = ALL_V3_ENVIRONMENTS[task](**kwargs)
    if task_index is not None:
        if not isinstance(task_index, int) or not 0 <= task_index < 50:
            raise InvalidSpecError(
                f"task_index must be an MT1 task index in 0..49, got {task_index!r}")
        inner.set_task(metaworld.MT1(task, seed=task_seed).train_tasks[task_index])
    else:  # what MT1 does per task, drawing the reset vector from the seeded generator
        inner._set_task_called = True
        inner._partially_observable = False
        inner.__dict__.pop("sawyer_observation_space", None)
        inner._freeze_rand_vec = False
        inner.seeded_rand_vec = True
    limit = max_steps or MAX_PATH_LENGTH
    inner.spec = EnvSpec(id=f"metaworld/{task}", entry_point=f"{__name__}:make_metaworld",
                         max_episode_steps=limit, kwargs={"task": task, "max_steps": limit})
    env = gym.wrappers.TimeLimit(inner, limit)
    return MetaWorldAdapter(env, obs_mode=obs_mode, render=render,
                            success_threshold=success_threshold)


def family_ids() -> tuple[str, ...]:
    """Names of the ``metaworld`` env family: :data:`TASKS`."""
    return TASKS


def family_make(name: str, options: EnvOptions, **kwargs: Any) -> MetaWorldAdapter:
    """Create ``metaworld/<name>`` with :func:`make_metaworld` (whose keywords the env's
    ``spec`` entry point rebuilds it from)."""
    return make_metaworld(name, obs_mode=options.obs_mode, max_steps=options.max_steps,
                          render=options.render, success_threshold=options.success_threshold,
                          **kwargs)

