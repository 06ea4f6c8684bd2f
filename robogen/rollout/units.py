"""What a worker needs around a unit's episodes: its env and the policy's load context, the
unit's deadline, the causes recorded for failures, the batch of observations, and the
:class:`~robogen.types.EpisodeResult` of an episode.

:mod:`robogen.rollout.worker` re-exports every public name here.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from robogen._cores import usable_cores
from robogen.errors import InfrastructureError, InfrastructureTimeoutError
from robogen.rollout.plan import episode_seed
from robogen.types import EpisodeResult, EvalManifest, WorkUnit


def _infra_cause(e: BaseException) -> str | None:
    """``infra_timeout`` (the render thread gave no frame in time, the unit's budget ran out
    waiting for a policy server) or ``infra_error`` (e.g. a policy server that failed) for an
    infrastructure failure, else None."""
    if isinstance(e, InfrastructureTimeoutError):
        return "infra_timeout"
    return "infra_error" if isinstance(e, InfrastructureError) else None


def _error_cause(e: BaseException) -> str:
    """The infrastructure cause of ``e`` if it has one, else ``policy_error``.

    An infrastructure failure (e.g. a policy server that timed out) is never a policy failure.
    """
    return _infra_cause(e) or "policy_error"


def _short_error(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}"
    return msg if len(msg) <= 500 else msg[:497] + "..."


def make_env(manifest: EvalManifest) -> Any:
    """Create one perturbable env (a ``PerturbedEnv``) as the manifest describes."""
    from robogen.envs import make
    from robogen.perturbations.wrapper import PerturbedEnv

    render = manifest.render if manifest.obs_mode != "state" else None
    env = make(
        manifest.env_id,
        obs_mode=manifest.obs_mode,
        max_steps=manifest.max_steps,
        render=render,
        success_threshold=manifest.success_threshold,
        disable_env_checker=True,  # robogen's envs are checked by tests, not on every run
        **manifest.env_kwargs,
    )
    return PerturbedEnv(env)


def policy_context(
    env_id: str, obs_mode: str, vecnormalize: str | None, env: Any, device: str = "cpu",
    worker_index: int = 0, deadline: float | None = None,
) -> Any:
    """The :class:`~robogen.policies.base.LoadContext` of ``env`` for worker ``worker_index``
    (``deadline``: a ``time.monotonic()`` value loading must end by, None: no bound)."""
    from robogen.policies.base import LoadContext, non_default_env_kwargs

    return LoadContext(
        env_id=env_id,
        observation_space=env.observation_space,
        action_space=env.action_space,
        obs_mode=obs_mode,
        vecnormalize=vecnormalize,
        device=device,
        env_kwargs=non_default_env_kwargs(env),
        worker_index=worker_index,
        deadline=deadline,
    )


def _stack(obs: list[Any]) -> Any:
    """The batch of observations (a copy: a policy may write into its input)."""
    if len(obs) == 1:  # np.stack of one array costs ~3 us, a copy of a view ~0.4 us
        o = obs[0]
        if isinstance(o, dict):
            return {k: np.array(v)[None] for k, v in o.items()}
        return np.array(o)[None]
    if isinstance(obs[0], dict):
        return {k: np.stack([o[k] for o in obs]) for k in obs[0]}
    return np.stack(obs)


def accepts_slots(policy: Any) -> bool:
    """True if ``policy`` declares (or its ``act`` takes) ``slots`` (see the Policy protocol)."""
    from robogen.policies.base import policy_capabilities

    return policy_capabilities(policy).slots


class UnitAborted(RuntimeError):
    """:meth:`EpisodeWorker.run_unit` stopped between two steps because :attr:`EpisodeWorker.abort`
    was set (the run is being closed, e.g. after Ctrl-C); the unit has no results."""


NO_POLICY = ("the worker could not load the policy: {error}; the unit's episodes are "
             "recorded as '{cause}' (robogen eval --resume RUN_DIR reruns them)")

DEADLINE_SHARE = 0.9
"""Share of a unit's wall-clock budget (:func:`~robogen.rollout.backend.unit_budget_s`) after
which the worker stops waiting on the infrastructure (a policy server's replies, retries and
back-off): its episodes still waiting are recorded as ``infra_timeout`` by the worker itself,
before the backend's watchdog would abandon the worker and start the unit again."""
DEADLINE_MARGIN_S = 1.0
"""Least time [s] the worker keeps between its deadline and the watchdog's (closing sockets,
the results' trip to the driver), at most half the budget."""


def unit_deadline(budget_s: float | None) -> float | None:
    """The ``time.monotonic()`` by which a worker stops waiting on the infrastructure in a
    unit of ``budget_s`` [s] starting now: :data:`DEADLINE_SHARE` of it, keeping at least
    :data:`DEADLINE_MARGIN_S` (at most half the budget) before the watchdog. None: no bound."""
    if budget_s is None:
        return None
    budget = float(budget_s)
    margin = min(max((1.0 - DEADLINE_SHARE) * budget, DEADLINE_MARGIN_S), 0.5 * budget)
    return time.monotonic() + budget - margin


def serial_render_lanes() -> int:
    """Render lanes for a worker that has the process (and its cores) to itself, e.g. the
    serial backend's: 2 where the process may use two cores or more, else 1.

    With two lanes two envs' frames are drawn at once while the worker's thread steps the
    next env, so pixel rollouts use both cores (``benchmarks/bench_rollout.py --only
    pixels``); more lanes would only share the same cores with the worker's thread.
    """
    return 2 if usable_cores() >= 2 else 1


def unit_result(manifest: EvalManifest, unit: WorkUnit, episode_index: int,
                **outcome: Any) -> EpisodeResult:
    """The :class:`EpisodeResult` of episode ``episode_index`` of ``unit``; ``outcome`` gives
    the remaining fields (return, length, success, cause, ...)."""
    return EpisodeResult(
        env_id=manifest.env_id,
        policy_id=manifest.policy,
        condition=unit.condition.name,
        axes=unit.condition.axes,
        severity=unit.condition.severity,
        split=unit.condition.split,
        episode_index=episode_index,
        seed=episode_seed(manifest.seed, episode_index),
        unit_id=unit.unit_id,
        **outcome,
    )
