"""Each supported env family's step on N worlds, as torch operations on the device.

A serial env step is Python: map the action to ``ctrl``, run ``frame_skip`` physics
steps, build the observation, compute reward, termination and success. A
:class:`BatchedTask` does the same for every world at once on the worlds' device arrays
(:meth:`robogen.batched.worlds.BatchedWorlds.tensor`: zero-copy torch views of MJWarp's
``Data``/``Model`` arrays through DLPack), so that only per-episode summaries cross to the
host.

Families register a factory with :func:`register_task`; :func:`batched_task` builds the
task of one env (or refuses the env, naming ``--backend ray``). The built-in ``robogen/*``
tabletop tasks and the Gymnasium MuJoCo v5 envs are supported; suites whose step logic is
Python (dm_control, robosuite, Meta-World, Fetch) are not.

One env step of every world::

    task.apply_action(worlds, actions)     # writes ctrl (Gymnasium: = actions; tabletop: +=)
    worlds.advance(task.frame_skip)        # not worlds.step(ctrl, ...): that overwrites ctrl
    obs = task.observe(worlds)
    out = task.outcome(worlds, actions, last=last, episode_return=episode_return)

``outcome`` is called once per step (the tabletop tasks latch their first success in it),
after ``apply_action`` (the velocity rewards difference positions from before the step).
A world refilled with a new episode gets its state rows (``ctrl`` included: the tabletop
actions move servo targets from the current ``ctrl``) and then ``on_reset`` for its row.

Contract, pinned per env by ``tests/batched/test_tasks.py``: for the same state and
action, ``apply_action`` + ``frame_skip`` steps + ``observe``/``outcome`` give the serial
env's observation, reward, termination and ``info["success"]`` within float32 tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from robogen.errors import InvalidSpecError
from robogen.registry import Registry

if TYPE_CHECKING:
    import torch

    from robogen.batched.worlds import BatchedWorlds

UNSUPPORTED_ENV = (
    "the batched backend cannot run {env_id!r}: {why}; families it runs: {families}. "
    "Run this env with --backend ray (or serial)"
)


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What one env step of every world gives, on the worlds' device.

    Attributes:
        reward: ``(N,)`` float32 reward of this step.
        terminated: ``(N,)`` bool: the env's own termination (Hopper fell; a tabletop
            task succeeded), not the step limit.
        success: ``(N,)`` bool: ``info["success"]`` the serial env reports at this step
            (for rules decided at the episode's last step: only where ``last`` is True).
    """

    reward: torch.Tensor
    terminated: torch.Tensor
    success: torch.Tensor


class BatchedTask(Protocol):
    """One env's step semantics over the N worlds of a :class:`BatchedWorlds`.

    Attributes:
        env_id: The env id (``gymnasium/Hopper-v5``).
        frame_skip: Physics steps per env step.
        obs_dim: Length of a state observation (``observe`` gives ``(N, obs_dim)``).
        act_dim: Length of an action.
    """

    env_id: str
    frame_skip: int
    obs_dim: int
    act_dim: int

    def on_reset(self, worlds: BatchedWorlds, rows: Sequence[int], envs: Sequence[Any]) -> None:
        """Copy per-episode task state that is not MuJoCo state (targets kept in Python,
        thresholds) from host envs just reset (``envs[j]`` went to world ``rows[j]``)."""
        ...

    def apply_action(self, worlds: BatchedWorlds, actions: torch.Tensor) -> None:
        """Write every world's ``ctrl`` from ``actions`` ``(N, act_dim)`` float32 (on the
        worlds' device), as the serial env's ``step`` does before its physics steps."""
        ...

    def observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        """State observations ``(N, obs_dim)`` float32 on the worlds' device."""
        ...

    def outcome(self, worlds: BatchedWorlds, actions: torch.Tensor, *, last: torch.Tensor,
                episode_return: torch.Tensor) -> StepOutcome:
        """Reward, termination and success of the step just taken.

        Args:
            worlds: The worlds, after the step's physics.
            actions: ``(N, act_dim)`` float32 actions of this step.
            last: ``(N,)`` bool: this step is the episode's last by the step limit.
            episode_return: ``(N,)`` float32 return before this step's reward.
        """
        ...


TaskFactory = Callable[[str, Any, "BatchedWorlds"], BatchedTask]
"""``factory(env_id, env, worlds)``: the task of ``env_id`` given one host env of it (the
unwrapped robogen scene: read its scene roles, ids and thresholds from it) and the worlds."""

TASK_FAMILIES: Registry[TaskFactory] = Registry("batched task family")
"""Env family prefix (``gymnasium``, ``robogen``) -> factory."""


def register_task(family: str) -> Callable[[TaskFactory], TaskFactory]:
    """Decorator registering the batched task factory of an env family (its id prefix)."""
    return TASK_FAMILIES.register(family)


def batched_task(env_id: str, env: Any, worlds: BatchedWorlds) -> BatchedTask:
    """The :class:`BatchedTask` of ``env_id``.

    Raises:
        InvalidSpecError: If the env's family (or this env of it) has no batched task; the
            message names the env, why, and ``--backend ray``.
    """
    _load_families()
    family = env_id.split("/", 1)[0]
    if family not in TASK_FAMILIES:
        raise InvalidSpecError(UNSUPPORTED_ENV.format(
            env_id=env_id, why=f"its family {family!r} steps in Python",
            families=", ".join(f"{f}/" for f in sorted(TASK_FAMILIES))))
    return TASK_FAMILIES.get(family)(env_id, env, worlds)


def _load_families() -> None:
    """Import the modules that register the built-in families."""
    import importlib

    for name in ("gymnasium_v5", "tabletop"):
        importlib.import_module(f"robogen.batched.tasks.{name}")
