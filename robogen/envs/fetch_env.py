"""The ``gymnasium-robotics`` env family: Fetch arm tasks made perturbable.

``robogen.envs.make("gymnasium-robotics/FetchPickAndPlace-v4")`` wraps
``gymnasium.make("FetchPickAndPlace-v4")`` (gymnasium-robotics 1.4.2) in a
:class:`FetchAdapter`, a :class:`~robogen.envs.gym_adapter.GymMujocoAdapter`
whose hooks give Fetch's roles, success and flattened observations; model
swaps, pixel rendering and texture uploads are the Gymnasium adapter's.

Install: ``make setup-fetch`` (``pip install "robogen[fetch]"``). It installs
next to mujoco 4.0.

mujoco >= 3.12 fix (:func:`patch_joint_type_checks`):
    ``gymnasium_robotics.utils.mujoco_utils.set_joint_qpos`` / ``set_joint_qvel`` /
    ``get_joint_qpos`` / ``get_joint_qvel`` assert
    ``joint_type in (mjJNT_HINGE, mjJNT_SLIDE)``, and from mujoco 3.12 a
    ``mjtJoint`` enum never equals the numpy integer ``model.jnt_type[j]``, so
    every Fetch env fails while it is built. When this family loads, and only
    if that comparison is broken in the running mujoco, robogen replaces those
    four functions in that module by copies that compare ``int(joint_type)``;
    nothing else changes. (Same step counts as on mujoco 3.3.0.)

Observation (``state``, float32, ``FLAT_LAYOUT``): Fetch's dict observation
flattened as ``[observation, achieved_goal, desired_goal]``:

=======================  ========  ===================================================
env                      obs_dim   layout (indices)
=======================  ========  ===================================================
FetchReach-v4            16        observation 0:10, achieved_goal 10:13, desired 13:16
Push/PickAndPlace/Slide  31        observation 0:25, achieved_goal 25:28, desired 28:31
=======================  ========  ===================================================

``observation`` is gymnasium-robotics' own (Reach: gripper position [m], finger
positions [m], gripper velocity [m/step], finger velocities; with an object:
gripper position, object position, object - gripper, fingers, object Euler
angles [rad], object linear/angular velocity, gripper velocity, finger
velocities). ``achieved_goal`` is the gripper (Reach) or object position [m],
``desired_goal`` the goal [m].

Success: ``info["is_success"]`` (goal distance < 0.05 m) at the last step of
the episode (50 steps by default), as the suite defines it; ``info["success"]``
is False on earlier steps.

Scene roles: floor ``floor0``, the table's box (``table0_geom``; Slide: ``table0``),
the object ``object0`` (not in Reach), the Fetch arm from ``robot0:shoulder_pan_link`` (bodies, arm
joints, the two finger actuators; motion is by mocap, so gain edits act on the
fingers), ``light0``, the added fixed camera ``robogen_cam`` aimed at the table,
distractors on the table top, and pose dofs: the object's x/y (not Reach) and
three arm joints (shoulder pan/lift, elbow), which displace the arm's initial
configuration (the mocap follows the gripper from the first step). The goal is
drawn by the env (not a pose dof).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import gymnasium as gym  # robogen.envs imported robogen._gl first (MUJOCO_GL)
import mujoco
import numpy as np

from robogen.envs.base import PoseDof, SceneRoles
from robogen.envs.elements import descends_from, name_elements
from robogen.envs.families import EnvOptions
from robogen.envs.gym_adapter import (
    ADDED_CAMERA,
    GymMujocoAdapter,
    camera_pose,
    set_weld_rows,
)
from robogen.errors import UnknownNameError

FETCH_IDS: tuple[str, ...] = (
    "FetchReach-v4", "FetchPush-v4", "FetchPickAndPlace-v4", "FetchSlide-v4",
)
"""gymnasium-robotics ids of this family (robogen ids ``gymnasium-robotics/<id>``)."""
FLAT_LAYOUT: dict[str, tuple[int, int]] = {
    "observation": (0, 25), "achieved_goal": (25, 28), "desired_goal": (28, 31),
}
"""Index ranges of the flattened state for tasks with an object (Reach: 0:10, 10:13, 13:16)."""
CAMERA = ((1.3, 0.75, 0.45), 1.7, 180.0, -35.0)
"""look_at [m], distance [m], azimuth [deg], elevation [deg] of ``robogen_cam``."""
ARM_POSE_JOINTS = ("robot0:shoulder_pan_joint", "robot0:shoulder_lift_joint",
                   "robot0:elbow_flex_joint")


def _check(gym_id: str) -> None:
    if gym_id not in FETCH_IDS:
        raise UnknownNameError("gymnasium-robotics env", gym_id, FETCH_IDS)


# ----------------------------------------------------------------------------- mujoco fix


def _joint_ndim(model: Any, joint_id: int, free: int, ball: int) -> int:
    jt = int(model.jnt_type[joint_id])
    if jt == int(mujoco.mjtJoint.mjJNT_FREE):
        return free
    if jt == int(mujoco.mjtJoint.mjJNT_BALL):
        return ball
    if jt not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
        raise ValueError(f"joint {joint_id} has unknown type {jt}")
    return 1


def _joint_id(model: Any, name: str) -> int:
    jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
    if jid == -1:
        raise ValueError(f"Joint with name '{name}' is not part of the model!")
    return jid


def _joint_slice(model: Any, name: str, adr: Any, free: int, ball: int) -> slice:
    """Where joint ``name`` sits in qpos (``adr=jnt_qposadr``) or qvel (``jnt_dofadr``)."""
    j = _joint_id(model, name)
    start = int(adr[j])
    return slice(start, start + _joint_ndim(model, j, free, ball))


def _write_joint(vec: np.ndarray, where: slice, name: str, value: Any) -> None:
    value = np.array(value)
    n = where.stop - where.start
    if n > 1 and value.shape != (n,):
        raise ValueError(f"Value has incorrect shape {name}: {value}")
    vec[where] = value


def _set_joint_qpos(model: Any, data: Any, name: str, value: Any) -> None:
    _write_joint(data.qpos, _joint_slice(model, name, model.jnt_qposadr, 7, 4), name, value)


def _set_joint_qvel(model: Any, data: Any, name: str, value: Any) -> None:
    _write_joint(data.qvel, _joint_slice(model, name, model.jnt_dofadr, 6, 3), name, value)


def _get_joint_qpos(model: Any, data: Any, name: str) -> np.ndarray:
    return data.qpos[_joint_slice(model, name, model.jnt_qposadr, 7, 4)].copy()


def _get_joint_qvel(model: Any, data: Any, name: str) -> np.ndarray:
    return data.qvel[_joint_slice(model, name, model.jnt_dofadr, 6, 4)].copy()  # 4: as upstream


def enum_comparison_broken() -> bool:
    """True if ``np.int32(hinge) in (mjJNT_HINGE, mjJNT_SLIDE)`` is False (mujoco >= 3.12)."""
    hinge = np.int32(int(mujoco.mjtJoint.mjJNT_HINGE))
    return hinge not in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)


def patch_joint_type_checks() -> bool:
    """Fix gymnasium-robotics' joint-type asserts on this mujoco (see the module docstring).

    Returns:
        True if the four functions were replaced (now or earlier), False if
        the running mujoco compares enums with numpy ints correctly.
    """
    from gymnasium_robotics.utils import mujoco_utils

    if not enum_comparison_broken():
        return False
    mujoco_utils.set_joint_qpos = _set_joint_qpos
    mujoco_utils.set_joint_qvel = _set_joint_qvel
    mujoco_utils.get_joint_qpos = _get_joint_qpos
    mujoco_utils.get_joint_qvel = _get_joint_qvel
    return True


# ----------------------------------------------------------------------------- adapter


@dataclasses.dataclass(frozen=True, slots=True)
class FetchSuccessRule:
    """Fetch's own success: ``info["is_success"]`` at the last step.

    Attributes:
        threshold: Goal distance under which ``is_success`` is 1 [m].
    """

    threshold: float = 0.05

    def describe(self) -> str:
        """One line for reports and metadata."""
        return (f'info["is_success"] at the last step (goal distance < {self.threshold:g} m, '
                "gymnasium-robotics)")


class FetchAdapter(GymMujocoAdapter):
    """A gymnasium-robotics Fetch env made perturbable (roles, flat observations, success).

    Description:
        Wraps ``gymnasium.make(<Fetch id>)`` (with its ``TimeLimit``, 50 steps).
        Physics, reward (sparse: -1 until the goal is reached) and goal sampling
        are the suite's.

    Observation Space:
        ============  =====================================  =============================
        obs_mode      space                                  unit
        ============  =====================================  =============================
        state         Box(-inf, inf, (16,) or (31,), float32)  see ``FLAT_LAYOUT`` (m, rad)
        pixels        Box(0, 255, (H, W, 3), uint8)          RGB from ``robogen_cam``
        state+pixels  Dict(state=..., pixels=...)            both
        ============  =====================================  =============================

    Action Space:
        Box(-1, 1, (4,), float32): gripper displacement x, y, z (x 0.05 m per
        step) and finger opening (positive opens).

    Reward:
        The suite's sparse reward.

    Perturbation hooks:
        Those of :class:`~robogen.envs.gym_adapter.GymMujocoAdapter`; roles in
        the module docstring.

    Success:
        ``info["is_success"]`` at the last step.

    Episode End:
        Truncation at ``max_steps`` (default 50); never terminated.

    Version History:
        * v0: initial adapter (gymnasium-robotics 1.4.2, ids ``-v4``).

    Args:
        env: ``gymnasium.make(<id>)`` of a :data:`FETCH_IDS` id.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        render: Pixel settings; None: 84x84 from ``robogen_cam``, shadows and MSAA off.
        success_threshold: Must be None (Fetch has its own success flag).

    Raises:
        UnknownNameError: If the env's id is not a Fetch id.
        InvalidSpecError: On a success threshold, a bad observation mode or render size.
    """

    own_success: ClassVar[str] = (
        "Fetch envs decide success by info['is_success'] (goal distance < 0.05 m)")

    # -- hooks -----------------------------------------------------------------------------

    def _check_env_id(self, gym_id: str) -> None:
        _check(gym_id)

    def _make_rule(self, max_steps: int | None, success_threshold: float | None) -> Any:
        return FetchSuccessRule(float(self.env.unwrapped.distance_threshold))  # type: ignore[attr-defined]

    def _make_roles(self, model: mujoco.MjModel) -> SceneRoles:
        has_object = bool(self.env.unwrapped.has_object)  # type: ignore[attr-defined]
        root = model.body("robot0:shoulder_pan_link").id
        robot = tuple(model.body(i).name for i in range(model.nbody)
                      if descends_from(model, i, root))
        joints = tuple(model.joint(j).name for j in range(model.njnt)
                       if int(model.jnt_bodyid[j]) in {model.body(b).id for b in robot})
        top = _table_top(model)
        pose: tuple[PoseDof, ...] = tuple(
            PoseDof(j, 0, 0.15, float(model.joint(j).range[0]), float(model.joint(j).range[1]))
            if model.jnt_limited[model.joint(j).id] else PoseDof(j, 0, 0.15)
            for j in ARM_POSE_JOINTS)
        objects: tuple[str, ...] = ()
        obj_geoms: tuple[str, ...] = ()
        if has_object:
            objects = ("object0",)
            obj_geoms = tuple(model.geom(g).name for g in range(model.ngeom)
                              if int(model.geom_bodyid[g]) == model.body("object0").id)
            pose = (PoseDof("object0:joint", 0, 0.08, 1.05, 1.55),
                    PoseDof("object0:joint", 1, 0.08, 0.45, 1.05), *pose)
        return SceneRoles(
            floor_geoms=("floor0",), table_geoms=(_table_geom(model),), object_geoms=obj_geoms,
            object_bodies=objects, robot_bodies=robot, robot_joints=joints,
            robot_actuators=tuple(model.actuator(a).name for a in range(model.nu)),
            cameras=(ADDED_CAMERA,),
            lights=tuple(model.light(i).name for i in range(model.nlight)),
            look_at=CAMERA[0], distractor_region=(1.1, 1.5, 0.45, 1.05, top),
            pose_dofs=pose, keep_clear=(*robot, *objects),
        )

    def _prepare_model(self, model: mujoco.MjModel) -> None:
        """The suite's ``reset_mocap_welds`` on a freshly compiled model (weld at identity)."""
        for i in range(model.neq):
            if int(model.eq_type[i]) == int(mujoco.mjtEq.mjEQ_WELD):
                model.eq_data[i, :7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)

    def _state_shape(self) -> tuple[int, ...]:
        spaces = self.env.unwrapped.observation_space.spaces  # type: ignore[attr-defined]
        return (sum(int(spaces[k].shape[0])
                    for k in ("observation", "achieved_goal", "desired_goal")),)

    def _state_obs(self) -> np.ndarray:
        return flatten(self.goal_observation())

    def _as_state(self, obs: Any) -> Any:
        return flatten(obs) if isinstance(obs, dict) else obs

    def goal_observation(self) -> dict[str, np.ndarray]:
        """The suite's dict observation of the current state (float64; for scripted policies).

        Before the first reset the env has no goal yet: ``desired_goal`` is then zeros(3).
        """
        inner: Any = self.env.unwrapped
        obs = dict(inner._get_obs())
        if np.size(obs["desired_goal"]) == 0:
            obs["desired_goal"] = np.zeros(3)
        return obs

    def nominal_spec(self) -> mujoco.MjSpec:
        """A fresh nominal MjSpec: the suite's XML, names filled in, ``robogen_cam`` added."""
        spec = mujoco.MjSpec.from_file(self.env.unwrapped.fullpath)  # type: ignore[attr-defined]
        name_elements(spec)
        set_weld_rows(spec, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0))
        pos, quat = camera_pose(*CAMERA)
        spec.worldbody.add_camera(name=ADDED_CAMERA, pos=pos, quat=quat, fovy=45.0)
        return spec

    # -- gym API ---------------------------------------------------------------------------

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step; ``info["success"]`` is ``info["is_success"]`` at the last step, else False."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._episode_return += float(reward)
        info = dict(info)
        now = bool(info.get("is_success", 0.0))
        info["success"] = now if (terminated or truncated) else False
        info["episode_return"] = self._episode_return
        info["robogen"] = {"success_metric": float(now)}
        return self._transform(obs), reward, terminated, truncated, info


def flatten(obs: dict[str, np.ndarray]) -> np.ndarray:
    """``[observation, achieved_goal, desired_goal]`` as one float64 vector."""
    return np.concatenate([np.asarray(obs[k], dtype=np.float64).ravel()
                           for k in ("observation", "achieved_goal", "desired_goal")])


def _table_geom(model: mujoco.MjModel) -> str:
    """The table's box (``table0_geom`` once named; Slide names it ``table0``)."""
    body = model.body("table0").id
    return next(model.geom(g).name for g in range(model.ngeom)
                if int(model.geom_bodyid[g]) == body)


def _table_top(model: mujoco.MjModel) -> float:
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    g = model.geom(_table_geom(model)).id
    return float(data.geom_xpos[g][2] + model.geom_size[g][2])


def make_fetch(gym_id: str, options: EnvOptions | None = None, **kwargs: Any) -> FetchAdapter:
    """Create the Fetch env ``gym_id`` wrapped as a perturbable robogen env.

    Args:
        gym_id: A :data:`FETCH_IDS` id, e.g. ``FetchPickAndPlace-v4``.
        options: Observation mode, step limit (None: the registered 50), render settings
            (None: 84x84, shadows and MSAA off); its ``success_threshold`` must be None.
        **kwargs: Passed to ``gymnasium.make`` (e.g. ``reward_type="dense"``).

    Raises:
        UnknownNameError: If ``gym_id`` is not a Fetch id.
        InvalidSpecError: On a success threshold.
    """
    _check(gym_id)
    options = options or EnvOptions()
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    patch_joint_type_checks()
    limit = options.max_steps or gym.spec(gym_id).max_episode_steps
    env = gym.make(gym_id, max_episode_steps=limit, **kwargs)
    return FetchAdapter(env, obs_mode=options.obs_mode, render=options.render,
                        success_threshold=options.success_threshold)


def family_ids() -> tuple[str, ...]:
    """Names of the ``gymnasium-robotics`` env family: :data:`FETCH_IDS`."""
    return FETCH_IDS


family_make = make_fetch
"""Create ``gymnasium-robotics/<name>``: the family's ``family_make`` is :func:`make_fetch`."""

