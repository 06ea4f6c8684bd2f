"""The Gymnasium MuJoCo v5 envs robogen adapts, stepped on N worlds as torch operations.

Each env's ``step`` (Gymnasium 1.x, ``gymnasium/envs/mujoco/*_v5.py``) is written once
more over the worlds' device arrays (:meth:`BatchedWorlds.tensor` views, float32):

* action -> ``ctrl``: ``ctrl = action`` unclipped, as ``MujocoEnv.do_simulation`` does
  (MuJoCo clamps a limited actuator's ``ctrl`` to its ``ctrlrange`` inside the step; the
  control cost uses the raw action);
* ``frame_skip`` physics steps (the env's own, :attr:`GymV5Task.frame_skip`);
* the observation ``_get_obs`` of the env as constructed (its
  ``exclude_current_positions_from_observation``, Ant's ``include_cfrc_ext_in_observation``
  and contact-force clipping, Hopper/Walker2d's velocity clipping, Reacher's
  fingertip-target vector, InvertedDoublePendulum's constraint force); body and site
  positions are read as ``mj_step`` leaves them (from the last substep's kinematics, before
  its integration), like the serial env;
* the reward, with the env's weights read from the env (``_ctrl_cost_weight``, ...);
* termination: the healthy ranges (Hopper, Walker2d, Ant), the pole rules (inverted
  pendulums); the others never terminate;
* success: the adapter's rule (:func:`robogen.envs.gym_adapter.success_rule`, scaled to the
  step limit) decided at the episode's last step: distance rule ``(terminated | last) &
  (d < threshold)``, return rule ``last & ~terminated & (return >= threshold)``.

Ant's observation and reward use ``cfrc_ext`` (external contact forces), which Gymnasium
computes with ``mj_rnePostConstraint`` after the steps; its task turns on MJWarp's
``opt.run_rne_postconstraint`` so that every step computes them (the same forces: they
depend on the last substep's contact forces, not on the integrated velocities). Ant with
its own pyramidal friction cones is refused (:data:`ANT_PYRAMIDAL`): MJWarp's tangent frame
of a capsule-on-plane contact differs from C MuJoCo's, which rotates the friction pyramid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import torch

from robogen.batched.tasks import TASK_FAMILIES, UNSUPPORTED_ENV, StepOutcome, register_task
from robogen.batched.tasks.views import WorldViews
from robogen.envs.base import find_scene
from robogen.errors import InvalidSpecError

if TYPE_CHECKING:
    from robogen.batched.worlds import BatchedWorlds

FAMILY = "gymnasium"
ANT_PYRAMIDAL = (
    "MJWarp orients the tangent frame of a capsule-on-plane contact differently from C "
    "MuJoCo (fixed axes, not the capsule's), which rotates the pyramidal friction cone Ant "
    "uses: a foot impact changes joint velocities by up to ~1 m/s in one step, so its "
    "episodes would not pair with the serial backend's (an Ant model with "
    "opt.cone = elliptic is accepted)"
)
MISSING_PARAM = (
    "{env_id}: the Gymnasium env has no attribute {name!r} that its batched step reads "
    "(a Gymnasium version whose {cls} differs from 1.x's v5); run it with --backend ray"
)


class GymV5Task:
    """One Gymnasium MuJoCo v5 env's step on N worlds (a :class:`BatchedTask`).

    Subclasses give :meth:`_observe` and :meth:`_reward` for their env; this class maps the
    action, remembers the position the velocity reward differentiates, and decides success.

    Args:
        env_id: ``gymnasium/<Id>``.
        scene: The env's :class:`~robogen.envs.gym_adapter.GymMujocoAdapter` (its rule, model
            and the wrapped Gymnasium env's parameters).
        worlds: The worlds this task steps.

    Raises:
        InvalidSpecError: If the Gymnasium env lacks a parameter the step reads.
    """

    gym_id: ClassVar[str] = ""

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        inner = scene.unwrapped
        self.env_id = env_id
        self._inner = inner
        self.frame_skip = int(inner.frame_skip)
        self.dt = float(inner.dt)
        """Env step duration [s] (``timestep * frame_skip``)."""
        self.obs_dim = int(inner.observation_space.shape[0])
        self.act_dim = int(inner.model.nu)
        rule = scene.rule
        self.rule = rule
        """The adapter's success rule in force (:class:`~robogen.envs.gym_catalog.SuccessRule`)."""
        model = scene.model
        self._rule_bodies = ((model.body(rule.body_a).id, model.body(rule.body_b).id)
                             if rule.kind == "distance" else (0, 0))
        self._views = WorldViews()
        self._before: torch.Tensor | None = None

    @classmethod
    def refuse(cls, model: Any) -> str:
        """Why MJWarp cannot reproduce this env's step on ``model`` (``""``: it can)."""
        return ""

    # ---------------------------------------------------------------- BatchedTask

    def on_reset(self, worlds: BatchedWorlds, rows: Sequence[int], envs: Sequence[Any]) -> None:
        """Nothing to copy: every Gymnasium v5 env keeps its episode state in MuJoCo's."""

    def apply_action(self, worlds: BatchedWorlds, actions: torch.Tensor) -> None:
        """``ctrl = actions`` (unclipped); remembers the position of the velocity reward."""
        self._t(worlds, "ctrl").copy_(actions)
        self._before = self._position(worlds)

    def observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        """The env's ``_get_obs()``: ``(N, obs_dim)`` float32."""
        return self._observe(worlds)

    def outcome(self, worlds: BatchedWorlds, actions: torch.Tensor, *, last: torch.Tensor,
                episode_return: torch.Tensor) -> StepOutcome:
        """Reward, termination and the adapter's success of the step just taken."""
        reward, terminated = self._reward(worlds, actions)
        rule = self.rule
        if rule.kind == "distance":
            xpos = self._t(worlds, "xpos")
            a, b = self._rule_bodies
            metric = torch.linalg.vector_norm(xpos[:, a, :2] - xpos[:, b, :2], dim=-1)
            success = (terminated | last) & (metric < rule.threshold)
        else:
            success = last & ~terminated & (episode_return + reward >= rule.threshold)
        return StepOutcome(reward=reward, terminated=terminated, success=success)

    # ---------------------------------------------------------------- per env

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        raise NotImplementedError

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(reward (N,) float32, terminated (N,) bool)``."""
        raise NotImplementedError

    def _position(self, worlds: BatchedWorlds) -> torch.Tensor | None:
        """What the velocity reward differentiates (None: no velocity reward)."""
        return None

    # ---------------------------------------------------------------- helpers

    def _t(self, worlds: BatchedWorlds, name: str) -> torch.Tensor:
        """The torch view of ``worlds``' array ``name`` (cached)."""
        return self._views(worlds, name)

    def _param(self, name: str) -> Any:
        """The wrapped Gymnasium env's attribute ``name`` (a reward weight, a range)."""
        try:
            return getattr(self._inner, name)
        except AttributeError:
            raise InvalidSpecError(MISSING_PARAM.format(
                env_id=self.env_id, name=name, cls=type(self._inner).__name__)) from None

    def _velocity(self, worlds: BatchedWorlds) -> torch.Tensor:
        """``(position after - position before) / dt``: ``(N,)`` or ``(N, 2)``."""
        before = self._before
        if before is None:
            raise RuntimeError(f"{self.env_id}: outcome() before apply_action()")
        after = self._position(worlds)
        assert after is not None
        return (after - before) / self.dt

    @staticmethod
    def _ctrl_cost(actions: torch.Tensor, weight: float) -> torch.Tensor:
        return weight * actions.square().sum(dim=-1)


GYM_TASKS: dict[str, type[GymV5Task]] = {}
"""Gymnasium id -> its batched task class."""


def _gym_task(cls: type[GymV5Task]) -> type[GymV5Task]:
    GYM_TASKS[cls.gym_id] = cls
    return cls


class _Planar(GymV5Task):
    """HalfCheetah, Hopper, Walker2d: forward velocity of ``qpos[0]``, observation
    ``qpos[skip:]``, ``qvel`` (clipped to +-10 where the env clips)."""

    clip_qvel: ClassVar[bool] = False

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        super().__init__(env_id, scene, worlds)
        self._skip = int(bool(self._param("_exclude_current_positions_from_observation")))
        self._forward_w = float(self._param("_forward_reward_weight"))
        self._ctrl_w = float(self._param("_ctrl_cost_weight"))

    def _position(self, worlds: BatchedWorlds) -> torch.Tensor:
        return self._t(worlds, "qpos")[:, 0].clone()

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        qvel = self._t(worlds, "qvel")
        if self.clip_qvel:
            qvel = qvel.clamp(-10.0, 10.0)
        return torch.cat((self._t(worlds, "qpos")[:, self._skip:], qvel), dim=1)


@_gym_task
class HalfCheetahTask(_Planar):
    """HalfCheetah-v5: ``forward_w * vx - ctrl_w * |a|^2``; never terminates."""

    gym_id = "HalfCheetah-v5"

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        reward = self._forward_w * self._velocity(worlds) - self._ctrl_cost(actions, self._ctrl_w)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


class _Healthy(_Planar):
    """Hopper/Walker2d: ``forward_w * vx + healthy_reward * healthy - ctrl_w * |a|^2``;
    terminates when unhealthy (if ``terminate_when_unhealthy``)."""

    clip_qvel = True
    check_state: ClassVar[bool] = False

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        super().__init__(env_id, scene, worlds)
        self._healthy_reward = float(self._param("_healthy_reward"))
        self._terminate = bool(self._param("_terminate_when_unhealthy"))
        self._z_range = tuple(map(float, self._param("_healthy_z_range")))
        self._angle_range = tuple(map(float, self._param("_healthy_angle_range")))
        self._state_range = (tuple(map(float, self._param("_healthy_state_range")))
                             if self.check_state else (0.0, 0.0))

    def _healthy(self, worlds: BatchedWorlds) -> torch.Tensor:
        qpos = self._t(worlds, "qpos")
        z, angle = qpos[:, 1], qpos[:, 2]
        (zlo, zhi), (alo, ahi) = self._z_range, self._angle_range
        ok = (zlo < z) & (z < zhi) & (alo < angle) & (angle < ahi)
        if self.check_state:
            state = torch.cat((qpos, self._t(worlds, "qvel")), dim=1)[:, 2:]
            lo, hi = self._state_range
            ok &= ((lo < state) & (state < hi)).all(dim=1)
        return ok

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        healthy = self._healthy(worlds)
        reward = (self._forward_w * self._velocity(worlds) + self._healthy_reward * healthy
                  - self._ctrl_cost(actions, self._ctrl_w))
        return reward, ~healthy if self._terminate else torch.zeros_like(healthy)


@_gym_task
class HopperTask(_Healthy):
    """Hopper-v5: healthy if z, torso angle and ``state[2:]`` are inside their ranges."""

    gym_id = "Hopper-v5"
    check_state = True


@_gym_task
class Walker2dTask(_Healthy):
    """Walker2d-v5: healthy if z and torso angle are inside their ranges."""

    gym_id = "Walker2d-v5"


@_gym_task
class SwimmerTask(GymV5Task):
    """Swimmer-v5: ``forward_w * vx - ctrl_w * |a|^2`` (vx of ``qpos[0]``); never terminates."""

    gym_id = "Swimmer-v5"

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        super().__init__(env_id, scene, worlds)
        self._skip = 2 * int(bool(self._param("_exclude_current_positions_from_observation")))
        self._forward_w = float(self._param("_forward_reward_weight"))
        self._ctrl_w = float(self._param("_ctrl_cost_weight"))

    def _position(self, worlds: BatchedWorlds) -> torch.Tensor:
        return self._t(worlds, "qpos")[:, 0].clone()

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        return torch.cat((self._t(worlds, "qpos")[:, self._skip:], self._t(worlds, "qvel")),
                         dim=1)

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        reward = self._forward_w * self._velocity(worlds) - self._ctrl_cost(actions, self._ctrl_w)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


@_gym_task
class AntTask(GymV5Task):
    """Ant-v5: ``vx + healthy_reward * healthy - ctrl_w * |a|^2 - contact_w * |clip(cfrc_ext)|^2``
    (vx of the main body's ``xpos``); healthy: finite state and ``min_z <= z <= max_z``.

    Turns on ``opt.run_rne_postconstraint`` of ``worlds`` (``cfrc_ext`` every step).
    """

    gym_id = "Ant-v5"

    @classmethod
    def refuse(cls, model: Any) -> str:
        """Refused with pyramidal friction cones (Ant's own): see :data:`ANT_PYRAMIDAL`."""
        return ANT_PYRAMIDAL if int(model.opt.cone) == int(mujoco.mjtCone.mjCONE_PYRAMIDAL) else ""

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        super().__init__(env_id, scene, worlds)
        self._skip = 2 * int(bool(self._param("_exclude_current_positions_from_observation")))
        self._with_forces = bool(self._param("_include_cfrc_ext_in_observation"))
        self._forward_w = float(self._param("_forward_reward_weight"))
        self._ctrl_w = float(self._param("_ctrl_cost_weight"))
        self._contact_w = float(self._param("_contact_cost_weight"))
        self._healthy_reward = float(self._param("_healthy_reward"))
        self._terminate = bool(self._param("_terminate_when_unhealthy"))
        self._z_range = tuple(map(float, self._param("_healthy_z_range")))
        self._force_range = tuple(map(float, self._param("_contact_force_range")))
        main = self._param("_main_body")
        self._main = int(main) if isinstance(main, int) else int(scene.model.body(main).id)
        worlds.m.opt.run_rne_postconstraint = True

    def _position(self, worlds: BatchedWorlds) -> torch.Tensor:
        return self._t(worlds, "xpos")[:, self._main, :2].clone()

    def _forces(self, worlds: BatchedWorlds) -> torch.Tensor:
        lo, hi = self._force_range
        return self._t(worlds, "cfrc_ext").clamp(lo, hi)

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        parts = [self._t(worlds, "qpos")[:, self._skip:], self._t(worlds, "qvel")]
        if self._with_forces:
            parts.append(self._forces(worlds)[:, 1:].flatten(1))
        return torch.cat(parts, dim=1)

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        qpos, qvel = self._t(worlds, "qpos"), self._t(worlds, "qvel")
        lo, hi = self._z_range
        z = qpos[:, 2]
        finite = torch.isfinite(qpos).all(dim=1) & torch.isfinite(qvel).all(dim=1)
        healthy = finite & (lo <= z) & (z <= hi)
        contact = self._contact_w * self._forces(worlds).square().sum(dim=(1, 2))
        reward = (self._forward_w * self._velocity(worlds)[:, 0] + self._healthy_reward * healthy
                  - self._ctrl_cost(actions, self._ctrl_w) - contact)
        return reward, ~healthy if self._terminate else torch.zeros_like(healthy)


@_gym_task
class ReacherTask(GymV5Task):
    """Reacher-v5: ``-dist_w * |fingertip - target| - ctrl_w * |a|^2``; never terminates."""

    gym_id = "Reacher-v5"

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        super().__init__(env_id, scene, worlds)
        self._dist_w = float(self._param("_reward_dist_weight"))
        self._ctrl_w = float(self._param("_reward_control_weight"))
        model = scene.model
        self._tip, self._target = model.body("fingertip").id, model.body("target").id

    def _vec(self, worlds: BatchedWorlds) -> torch.Tensor:
        xpos = self._t(worlds, "xpos")
        return xpos[:, self._tip] - xpos[:, self._target]

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        qpos = self._t(worlds, "qpos")
        theta = qpos[:, :2]
        return torch.cat((theta.cos(), theta.sin(), qpos[:, 2:], self._t(worlds, "qvel")[:, :2],
                          self._vec(worlds)[:, :2]), dim=1)

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        dist = torch.linalg.vector_norm(self._vec(worlds), dim=-1)
        reward = -dist * self._dist_w - self._ctrl_cost(actions, self._ctrl_w)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


@_gym_task
class PusherTask(GymV5Task):
    """Pusher-v5: ``-dist_w * |object - goal| - near_w * |object - tips_arm| - ctrl_w *
    |a|^2``; never terminates."""

    gym_id = "Pusher-v5"

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        super().__init__(env_id, scene, worlds)
        self._near_w = float(self._param("_reward_near_weight"))
        self._dist_w = float(self._param("_reward_dist_weight"))
        self._ctrl_w = float(self._param("_reward_control_weight"))
        model = scene.model
        self._bodies = [model.body(n).id for n in ("tips_arm", "object", "goal")]

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        xpos = self._t(worlds, "xpos")[:, self._bodies].flatten(1)
        return torch.cat((self._t(worlds, "qpos")[:, :7], self._t(worlds, "qvel")[:, :7], xpos),
                         dim=1)

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        xpos = self._t(worlds, "xpos")
        tips, obj, goal = (xpos[:, i] for i in self._bodies)
        reward = (-torch.linalg.vector_norm(obj - goal, dim=-1) * self._dist_w
                  - self._ctrl_cost(actions, self._ctrl_w)
                  - torch.linalg.vector_norm(obj - tips, dim=-1) * self._near_w)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


@_gym_task
class InvertedPendulumTask(GymV5Task):
    """InvertedPendulum-v5: reward 1 while the pole is up; terminates when ``|qpos[1]| > 0.2``
    or the state is not finite."""

    gym_id = "InvertedPendulum-v5"

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        return torch.cat((self._t(worlds, "qpos"), self._t(worlds, "qvel")), dim=1)

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        obs = self._observe(worlds)
        terminated = ~torch.isfinite(obs).all(dim=1) | (obs[:, 1].abs() > 0.2)
        return (~terminated).to(torch.float32), terminated


@_gym_task
class InvertedDoublePendulumTask(GymV5Task):
    """InvertedDoublePendulum-v5: ``healthy_reward * alive - (0.01 x^2 + (y - 2)^2) -
    (1e-3 v1^2 + 5e-3 v2^2)`` of the tip site; terminates when the tip's ``y <= 1``."""

    gym_id = "InvertedDoublePendulum-v5"

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        super().__init__(env_id, scene, worlds)
        self._healthy_reward = float(self._param("_healthy_reward"))

    def _observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        qpos = self._t(worlds, "qpos")
        return torch.cat((qpos[:, :1], qpos[:, 1:].sin(), qpos[:, 1:].cos(),
                          self._t(worlds, "qvel").clamp(-10.0, 10.0),
                          self._t(worlds, "qfrc_constraint")[:, :1].clamp(-10.0, 10.0)), dim=1)

    def _reward(self, worlds: BatchedWorlds, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        tip = self._t(worlds, "site_xpos")[:, 0]
        x, y = tip[:, 0], tip[:, 2]
        qvel = self._t(worlds, "qvel")
        terminated = y <= 1.0
        dist_penalty = 0.01 * x.square() + (y - 2.0).square()
        vel_penalty = 1e-3 * qvel[:, 1].square() + 5e-3 * qvel[:, 2].square()
        reward = self._healthy_reward * (~terminated) - dist_penalty - vel_penalty
        return reward, terminated


@register_task(FAMILY)
def gymnasium_task(env_id: str, env: Any, worlds: BatchedWorlds) -> GymV5Task:
    """The batched task of ``gymnasium/<Id>`` (a :data:`TaskFactory`).

    Raises:
        InvalidSpecError: If the env has no batched step here (a Gymnasium env added to the
            catalog by a plug-in); the message names ``--backend ray``.
    """
    gym_id = env_id.split("/", 1)[1]
    cls = GYM_TASKS.get(gym_id)
    if cls is None:
        raise InvalidSpecError(UNSUPPORTED_ENV.format(
            env_id=env_id, why=f"no batched step is written for Gymnasium's {gym_id!r} "
                               f"(batched: {', '.join(sorted(GYM_TASKS))})",
            families=", ".join(f"{f}/" for f in sorted(TASK_FAMILIES))))
    scene = find_scene(env)
    why = cls.refuse(scene.model)
    if why:
        raise InvalidSpecError(UNSUPPORTED_ENV.format(
            env_id=env_id, why=why, families=", ".join(f"{f}/" for f in sorted(TASK_FAMILIES))))
    return cls(env_id, scene, worlds)

