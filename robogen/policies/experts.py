"""Scripted experts of the built-in tabletop tasks (``expert:<task>`` policy URIs).

Each expert is a :class:`~robogen.policies.base.PrivilegedPolicy`: it ignores
the observation and reads the simulator of the scene bound to each env slot
(:meth:`attach`). Motions come from damped least-squares inverse kinematics
on the model's own Jacobian (``mujoco.mj_jacSite`` at ``grip_site``), and the
servo targets add a gravity feed-forward computed from the model's own bias
forces and actuator gains (``qfrc_bias / gainprm[0]``), so the experts keep
working when link lengths, masses, damping or gains are perturbed.

Damped least squares: dq = (J^T J + lambda^2 I)^-1 J^T e (Wampler, "Manipulator
inverse kinematic solutions based on vector formulations and damped
least-squares methods", IEEE SMC 1986).

URIs: ``expert:reach``, ``expert:push``, ``expert:pick_place`` (``Reach``,
``PickPlace``, ``robogen/PickPlace-v0`` are accepted too); ``expert:`` alone
takes the task of the env being evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import robogen._gl  # noqa: F401  (choose MUJOCO_GL before mujoco is imported)

# isort: split
import mujoco
import numpy as np
from gymnasium import spaces

from robogen.envs import scene as sc
from robogen.envs.tabletop import ACTION_SCALE, TASK_NAMES, task_name
from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.policies.base import (
    LoadContext,
    PolicyCapabilities,
    attached_rows,
    register_policy_scheme,
)

if TYPE_CHECKING:
    from robogen.envs.base import MujocoScene

IK_DAMPING = 0.02
"""Damping lambda of the least-squares solve [m]."""
ORIENT_WEIGHT = 0.3
"""Weight of the gripper-points-down error against position error [m/rad]."""

_DOWN = np.array([0.0, 0.0, -1.0])


def _wrap_quarter(angle: float) -> float:
    """Wrap ``angle`` [rad] into [-pi/4, pi/4) modulo pi/2 (a box looks the same every 90 deg)."""
    return (angle + np.pi / 4) % (np.pi / 2) - np.pi / 4


class _TabletopExpert:
    """Shared IK controller and slot bookkeeping of the tabletop experts."""

    name: ClassVar[str] = ""

    capabilities: ClassVar[PolicyCapabilities] = PolicyCapabilities(slots=True, seeds=False)

    def __init__(self, observation_space: Any = None, obs_mode: str = "state") -> None:
        self.observation_space = observation_space
        self.action_space = spaces.Box(-1.0, 1.0, (6,), np.float32)
        self.obs_mode = obs_mode
        self._scenes: list[MujocoScene] = []
        self._ids: list[sc.SceneIds | None] = []
        self._mem: list[dict[str, Any]] = []

    # ---- PrivilegedPolicy --------------------------------------------------------------
    def attach(self, scenes: Sequence[MujocoScene]) -> None:
        """Bind env slot k to ``scenes[k]`` (read at every :meth:`act`)."""
        self._scenes = list(scenes)
        self._ids = [None] * len(self._scenes)
        self._mem = [{} for _ in self._scenes]

    def reset(self, slots: Sequence[int]) -> None:
        """Restart the phase machine of ``slots``."""
        for k in slots:
            if k < len(self._mem):
                self._mem[k] = {}

    def act(
        self, obs: Any, *, deterministic: bool = True, slots: Sequence[int] | None = None
    ) -> np.ndarray:
        """Return ``(B, 6) float32`` actions; row i acts in attached scene ``slots[i]``.

        Args:
            obs: A batch of ``B`` observations (ignored: the expert reads the simulator).
            deterministic: Ignored (the expert is deterministic).
            slots: Env slot of each row; None means rows ``0..B-1``.

        Raises:
            InvalidSpecError: If a slot has no attached scene.
        """
        batch = _batch_size(obs)
        rows = attached_rows(self.name, slots, batch, len(self._scenes))
        out = np.zeros((batch, 6), np.float32)
        for i, k in enumerate(rows):
            scene = self._scenes[k]
            ids = self._ids[k]
            if ids is None or ids.model is not scene.model:
                ids = self._ids[k] = sc.SceneIds(scene.model)
            out[i] = self._act_one(scene.model, scene.data, ids, self._mem[k])
        return out

    # ---- task logic ----------------------------------------------------------------------
    def _act_one(self, model: mujoco.MjModel, data: mujoco.MjData, ids: sc.SceneIds,
                 mem: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _move(model: mujoco.MjModel, data: mujoco.MjData, ids: sc.SceneIds, p_des: np.ndarray,
              grip: float, *, yaw: float | None = None, max_step: float = 0.015,
              orient_weight: float = ORIENT_WEIGHT) -> np.ndarray:
        """Action moving grip_site towards ``p_des`` [m] with the gripper pointing down.

        Args:
            p_des: Desired grip_site position [m].
            grip: Gripper command in [-1 (closed), 1 (open)].
            yaw: Angle [rad] the finger closing axis should align with modulo
                pi/2 (a box face), or None to keep the wrist roll.
            max_step: Largest Cartesian move asked for in one control step [m].
            orient_weight: Weight of the pointing-down error [m/rad].
        """
        p = data.site_xpos[ids.grip_site]
        rot = data.site_xmat[ids.grip_site].reshape(3, 3)
        dp = p_des - p
        norm = float(np.linalg.norm(dp))
        if norm > max_step:
            dp *= max_step / norm
        jacp = np.zeros((3, model.nv))
        jacr = np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jacp, jacr, ids.grip_site)
        cols = ids.arm_dadr[:4]
        e_rot = np.cross(rot[:, 2], _DOWN)[:2]
        jac = np.vstack([jacp[:, cols], orient_weight * jacr[:2, cols]])
        err = np.concatenate([dp, orient_weight * np.clip(e_rot, -0.2, 0.2)])
        dq = np.zeros(5)
        dq[:4] = np.linalg.solve(jac.T @ jac + IK_DAMPING**2 * np.eye(4), jac.T @ err)
        roll_gain = jacr[2, ids.arm_dadr[4]]
        if yaw is not None and abs(roll_gain) > 0.3:
            finger_axis = rot[:, 1]
            err_yaw = _wrap_quarter(yaw - np.arctan2(finger_axis[1], finger_axis[0]))
            dq[4] = np.clip(err_yaw, -0.2, 0.2) / roll_gain
        q = data.qpos[ids.arm_qadr]
        gain = model.actuator_gainprm[ids.arm_act, 0]
        feedforward = data.qfrc_bias[ids.arm_dadr] / np.where(gain > 0, gain, np.inf)
        ctrl_des = q + dq + feedforward
        action = np.empty(6)
        action[:5] = np.clip((ctrl_des - data.ctrl[ids.arm_act]) / ACTION_SCALE, -1.0, 1.0)
        action[5] = grip
        return action


def _box_yaw(data: mujoco.MjData, ids: sc.SceneIds) -> float:
    x_axis = data.xmat[ids.object_body].reshape(3, 3)[:, 0]
    return float(np.arctan2(x_axis[1], x_axis[0]))


class ReachExpert(_TabletopExpert):
    """Moves the open gripper straight to the target (soft pointing-down constraint)."""

    name = "reach"

    def _act_one(self, model, data, ids, mem):  # noqa: D102
        return self._move(model, data, ids, data.mocap_pos[ids.target_mocap].copy(), 1.0,
                          max_step=0.02, orient_weight=0.1)


class PushExpert(_TabletopExpert):
    """Closes the gripper, goes behind the box (seen from the target) and pushes it there.

    Phases: ``approach`` (above the point 0.05 m behind the box, lifting first
    if low), ``descend`` (to box-centre height), ``push`` (towards the
    target along the box-target line). It returns to ``approach`` when the
    gripper leaves the push line by more than 0.02 m.
    """

    name = "push"
    standoff = 0.05
    contact = 0.032
    z_high = 0.08

    def _act_one(self, model, data, ids, mem):  # noqa: D102
        ee = data.site_xpos[ids.grip_site]
        obj = data.xpos[ids.object_body]
        target = data.mocap_pos[ids.target_mocap]
        to_target = target[:2] - obj[:2]
        dist = float(np.linalg.norm(to_target))
        u = to_target / max(dist, 1e-6)
        normal = np.array([-u[1], u[0]])
        yaw = float(np.arctan2(u[1], u[0]))
        z_push = ids.table_top_z + sc.OBJECT_HALF_SIZE + 0.002
        z_high = ids.table_top_z + self.z_high
        behind = obj[:2] - self.standoff * u
        phase = mem.setdefault("phase", "approach")
        rel = ee[:2] - obj[:2]
        if phase == "push" and (abs(rel @ normal) > 0.02 or rel @ u > -0.015):
            phase = "approach"
        if phase == "approach":
            if np.linalg.norm(ee[:2] - behind) > 0.02 and ee[2] < z_high - 0.02:
                p_des = np.array([ee[0], ee[1], z_high])
            else:
                p_des = np.array([behind[0], behind[1], z_high])
                if np.linalg.norm(ee[:2] - behind) < 0.01:
                    phase = "descend"
        if phase == "descend":
            p_des = np.array([behind[0], behind[1], z_push])
            if abs(ee[2] - z_push) < 0.01:
                phase = "push"
            elif np.linalg.norm(ee[:2] - behind) > 0.025:
                phase = "approach"
        if phase == "push":
            ahead = min(0.03, dist)
            xy = obj[:2] - self.contact * u + ahead * u
            p_des = np.array([xy[0], xy[1], z_push])
        mem["phase"] = phase
        return self._move(model, data, ids, p_des, -1.0, yaw=yaw, max_step=0.012)


class PickPlaceExpert(_TabletopExpert):
    """Grasps the box from above and carries it to the target.

    Phases: ``above`` (open gripper 0.08 m over the box, fingers aligned
    with a box face), ``descend`` (to the box centre), ``close`` (8 control
    steps), ``carry`` (to the target). A missed grasp (finger gap below
    0.025 m) or a dropped box (> 0.04 m from the gripper) restarts at ``above``.
    """

    name = "pick_place"
    hover = 0.08
    close_steps = 8

    def _act_one(self, model, data, ids, mem):  # noqa: D102
        ee = data.site_xpos[ids.grip_site]
        obj = data.xpos[ids.object_body].copy()
        target = data.mocap_pos[ids.target_mocap].copy()
        yaw = _box_yaw(data, ids)
        gap = float(data.qpos[ids.finger_qadr].sum())
        phase = mem.setdefault("phase", "above")
        if phase == "carry" and np.linalg.norm(obj - ee) > 0.04:
            phase = "above"
        if phase == "above":
            p_des = obj + np.array([0.0, 0.0, self.hover])
            if np.linalg.norm(ee[:2] - obj[:2]) < 0.008 and abs(ee[2] - p_des[2]) < 0.03:
                phase = "descend"
            action = self._move(model, data, ids, p_des, 1.0, yaw=yaw)
        if phase == "descend":
            if np.linalg.norm(ee[:2] - obj[:2]) > 0.02:
                phase = "above"
                action = self._move(model, data, ids, obj + [0, 0, self.hover], 1.0, yaw=yaw)
            else:
                action = self._move(model, data, ids, obj, 1.0, yaw=yaw, max_step=0.01)
                if np.linalg.norm(ee - obj) < 0.008:
                    phase, mem["count"] = "close", 0
        if phase == "close":
            mem["count"] = mem.get("count", 0) + 1
            action = self._move(model, data, ids, obj, -1.0)
            if mem["count"] >= self.close_steps:
                phase = "carry" if gap > 0.025 else "above"
        if phase == "carry":
            action = self._move(model, data, ids, target, -1.0, max_step=0.012)
        mem["phase"] = phase
        return action


EXPERTS: dict[str, type[_TabletopExpert]] = {
    "reach": ReachExpert, "push": PushExpert, "pick_place": PickPlaceExpert,
}


def _batch_size(obs: Any) -> int:
    if isinstance(obs, dict):
        obs = obs.get("state", next(iter(obs.values())))
    arr = np.asarray(obs)
    return int(arr.shape[0]) if arr.ndim >= 1 else 1


def make_expert(task: str, ctx: LoadContext | None = None) -> _TabletopExpert:
    """Create the expert of ``task`` (``reach``, ``push``, ``pick_place`` or an env id).

    Args:
        task: Task name; CamelCase (``PickPlace``) and env ids are accepted; empty:
            the task of ``ctx.env_id``.
        ctx: The env the expert will act in (observation space and mode).

    Raises:
        UnknownNameError: On a task without an expert (lists the tasks).
    """
    raw = task or (ctx.env_id if ctx is not None else "")
    name = task_name(raw)
    if name not in EXPERTS:
        raise UnknownNameError("expert task", raw, EXPERTS)
    env_id = ctx.env_id if ctx is not None else ""
    if env_id and task_name(env_id) != name:
        fit = task_name(env_id)
        hint = (f"; use expert:{fit}" if fit in EXPERTS
                else " (experts exist for the built-in tasks only)")
        raise InvalidSpecError(
            f"expert:{task} is the scripted expert of {TASK_NAMES[name]}; it cannot act in "
            f"{env_id}{hint}")
    obs_space = ctx.observation_space if ctx is not None else None
    obs_mode = ctx.obs_mode if ctx is not None else "state"
    return EXPERTS[name](obs_space, obs_mode)


@register_policy_scheme("expert", form="expert:TASK")
def load_expert(rest: str, ctx: LoadContext) -> Any:
    """Loader of ``expert:<task>`` URIs (see :func:`make_expert`); ``expert:<family>/<name>``
    of a third-party env family goes to :mod:`robogen.policies.suite_experts`."""
    from robogen.policies import suite_experts

    if suite_experts.handles(rest, ctx):
        return suite_experts.load_suite_expert(rest, ctx)
    return make_expert(rest, ctx)


def run_expert_episode(env: Any, expert: _TabletopExpert, seed: int) -> tuple[bool, int]:
    """Run one episode of ``expert`` in the single env ``env`` from ``env.reset(seed=seed)``.

    Returns:
        (success, number of steps).
    """
    from robogen.envs.base import find_scene

    expert.attach([find_scene(env)])
    expert.reset([0])
    obs, info = env.reset(seed=seed)
    steps, success = 0, bool(info.get("success", False))
    while not success:
        batch = {k: v[None] for k, v in obs.items()} if isinstance(obs, dict) else obs[None]
        obs, _, terminated, truncated, info = env.step(expert.act(batch)[0])
        steps += 1
        success = bool(info["success"])
        if terminated or truncated:
            break
    return success, steps


__all__ = [
    "EXPERTS", "PickPlaceExpert", "PushExpert", "ReachExpert", "load_expert", "make_expert",
    "run_expert_episode",
]
