"""Per-episode side jobs of the rollout worker, as observers.

The worker (:class:`~robogen.rollout.worker.EpisodeWorker`) runs a unit's episodes and
records each one's outcome; everything else it does per episode (safety metrics, the
instruction of a prompted policy, a policy server's latency, video frames, demonstrations)
is an :class:`EpisodeObserver` with three hooks, called in a fixed order, as Gymnasium
stacks wrappers:

* ``on_reset(k, episode, env)``: after the unit's envs were reset and their first
  frames drawn, for every env slot ``k`` whose reset succeeded (``episode.done`` is True
  if its first frame failed), before the policy's ``reset``;
* ``on_step(k, episode, env, obs, action, reward)``: after every env step that did not
  raise (``episode.steps`` counts it; ``obs`` is the observation ``action`` was chosen
  from; ``reward`` may be non-finite, the worker then ends the episode);
* ``on_end(k, episode)``: once per returned episode after the unit; the mapping it
  returns gives :class:`~robogen.types.EpisodeResult` fields of the episode's record
  (:data:`OBSERVED_FIELDS`: its optional fields, ``policy_latency_ms`` and the safety
  metrics; a new metric of the episode table is a defaulted field there).

A per-episode job is one module plus one registration::

    from robogen.rollout import Observer, register_observer

    class StepCounter(Observer):
        def __init__(self) -> None:
            self.counts = {}
        def on_step(self, k, episode, env, obs, action, reward):
            self.counts[episode.episode_index] = episode.steps

    @register_observer("step_counter")
    def step_counter(manifest, policy):
        return StepCounter()  # or None: not for this run

Each worker builds its observers once, when it has loaded the policy
(:func:`build_observers`: every registered factory in registration order, the built-in
ones first), so a factory decides from the manifest (``manifest.safety``) and the policy
(its protocols) whether the run needs it. A plug-in module that registers an observer is
listed in the manifest's ``plugins`` and imported by every worker, serial or Ray.
Observers run in the worker's thread; an observer that raises fails the unit (a bug in
an observer is not an episode's outcome).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from robogen.errors import RobogenError
from robogen.registry import Registry
from robogen.types import EpisodeResult, EvalManifest


@dataclass
class EpisodeState:
    """The running state of one episode in a worker's unit (one env slot).

    Attributes:
        episode_index: Episode index i.
        seed: Seed of the env's reset.
        obs: The latest observation (None once a frame failed).
        ret: Sum of rewards so far [-].
        steps: Env steps taken.
        done: The episode has ended (or is not run: another episode of the unit runs alone).
        success: Its outcome once done.
        cause: Why it failed, once done (None on success).
        error: The exception that failed it, if any.
        perturbations: JSON list of the applied perturbations (the record's
            ``perturbations_json``; an observer may complete a record, as the prompts do).
        changed: Axes whose perturbation changed the scene in this episode.
        wall_time_s: Wall-clock time from the unit's start to the episode's end [s].
        first_success: The first env step at which the env reported success (None: never).
        first_frame: Digest of the policy's first image (pixel policies; None otherwise).
    """

    episode_index: int
    seed: int
    obs: Any = None
    ret: float = 0.0
    steps: int = 0
    done: bool = False
    success: bool = False
    cause: str | None = None
    error: str | None = None
    perturbations: str = "[]"
    changed: tuple[str, ...] = ()
    wall_time_s: float = 0.0
    first_success: int | None = None
    first_frame: str | None = None


@runtime_checkable
class EpisodeObserver(Protocol):
    """A per-episode side job of the worker (see the module docstring for when each hook runs).

    ``k`` is the env slot (the episode's row in the unit's batch), stable for the unit.
    """

    def on_reset(self, k: int, episode: EpisodeState, env: Any) -> None:
        """Episode ``episode`` starts in env slot ``k`` (``env``: its ``PerturbedEnv``)."""
        ...

    def on_step(self, k: int, episode: EpisodeState, env: Any, obs: Any,
                action: np.ndarray, reward: float) -> None:
        """Env slot ``k`` took one step with ``action`` (``(action_dim,) float32``, clipped to
        the action space) from observation ``obs`` and got ``reward``."""
        ...

    def on_end(self, k: int, episode: EpisodeState) -> Mapping[str, Any]:
        """The episode in slot ``k`` is over; returns fields of its record
        (:data:`OBSERVED_FIELDS`; empty: none)."""
        ...


class Observer:
    """An :class:`EpisodeObserver` whose hooks do nothing: subclass it and override some."""

    def on_reset(self, k: int, episode: EpisodeState, env: Any) -> None:
        """Nothing."""

    def on_step(self, k: int, episode: EpisodeState, env: Any, obs: Any,
                action: np.ndarray, reward: float) -> None:
        """Nothing."""

    def on_end(self, k: int, episode: EpisodeState) -> Mapping[str, Any]:
        """No fields."""
        return {}


ObserverFactory = Callable[[EvalManifest, Any], "EpisodeObserver | None"]
"""``factory(manifest, policy)``: the observer a worker of ``manifest`` with the loaded
``policy`` uses, or None when the run does not need it."""

OBSERVERS: Registry[ObserverFactory] = Registry("episode observer")
"""Registered observer factories (:func:`register_observer`), built in registration order."""

WORKER_FIELDS = ("video_path",)
"""Optional record fields an observer does not fill (failure videos set ``video_path``)."""

OBSERVED_FIELDS: frozenset[str] = frozenset(
    f.name for f in dataclasses.fields(EpisodeResult)
    if f.default is not dataclasses.MISSING and f.name not in WORKER_FIELDS)
"""Record fields an observer may fill from ``on_end``: every optional (defaulted)
:class:`~robogen.types.EpisodeResult` field but :data:`WORKER_FIELDS` (``policy_latency_ms``,
the safety metrics); the required ones are the worker's."""

BAD_FIELD = ("episode observer {name!r} returned the record field {field!r} from on_end; "
             "an observer fills only {allowed}: return those, or keep other values on the "
             "observer itself")
"""Message when an observer's ``on_end`` names a field it may not fill (tests reuse it)."""


def register_observer(name: str) -> Callable[[ObserverFactory], ObserverFactory]:
    """Decorator registering an observer factory under ``name`` (snake_case).

    Raises:
        ValueError: If ``name`` is already registered.
    """
    return OBSERVERS.register(name)


def build_observers(manifest: EvalManifest, policy: Any) -> list[tuple[str, EpisodeObserver]]:
    """The ``(name, observer)`` pairs a worker of ``manifest`` with ``policy`` runs, in
    registration order (factories that return None are left out)."""
    out: list[tuple[str, EpisodeObserver]] = []
    for name, factory in OBSERVERS.items():
        observer = factory(manifest, policy)
        if observer is not None:
            out.append((name, observer))
    return out


def end_fields(observers: list[tuple[str, EpisodeObserver]], k: int,
               episode: EpisodeState) -> dict[str, Any]:
    """Every observer's ``on_end`` fields of the episode in slot ``k``, merged in order.

    Raises:
        RobogenError: If an observer returns a field outside :data:`OBSERVED_FIELDS`.
    """
    out: dict[str, Any] = {}
    for name, observer in observers:
        fields = observer.on_end(k, episode)
        for key in fields:
            if key not in OBSERVED_FIELDS:
                raise RobogenError(BAD_FIELD.format(name=name, field=key,
                                                    allowed=sorted(OBSERVED_FIELDS)))
        out.update(fields)
    return out


# ---- built-in observers ------------------------------------------------------------------


class SafetyObserver(Observer):
    """:mod:`robogen.rollout.safety`'s metrics of every episode (``manifest.safety``): one
    :class:`~robogen.rollout.safety.SafetyMonitor` per env slot, reused across episodes."""

    def __init__(self) -> None:
        self._monitors: list[Any] = []
        self._started: dict[int, tuple[EpisodeState, Any]] = {}
        """Slot -> the episode its monitor follows (an aborted unit leaves stale ones)."""

    def on_reset(self, k: int, episode: EpisodeState, env: Any) -> None:
        """Start slot ``k``'s monitor on the scene as reset."""
        from robogen.rollout.safety import SafetyMonitor

        while len(self._monitors) <= k:
            self._monitors.append(SafetyMonitor())
        monitor = self._monitors[k]
        self._started[k] = (episode, monitor)
        monitor.start(env.scene)

    def on_step(self, k: int, episode: EpisodeState, env: Any, obs: Any,
                action: np.ndarray, reward: float) -> None:
        """Read the step's contacts, limits and action."""
        self._started[k][1].step(action)

    def on_end(self, k: int, episode: EpisodeState) -> Mapping[str, Any]:
        """The episode's safety metrics (none for an episode whose reset failed)."""
        started = self._started.pop(k, None)
        if started is None or started[0] is not episode:  # not started in this unit
            return {}
        return started[1].metrics()


class PromptObserver(Observer):
    """Gives a prompted policy (:class:`~robogen.policies.base.Prompted`) each slot's
    instruction of the episode (the ``language`` axis rewrites it) before its ``reset``, and
    records a rewritten one as the language record's ``applied.prompt``."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def on_reset(self, k: int, episode: EpisodeState, env: Any) -> None:
        """Tell the policy slot ``k``'s instruction."""
        base = self.policy.prompt
        text = env.edit_prompt(base)
        if text != base and not episode.done:
            records = json.loads(episode.perturbations)
            for rec in records:
                if rec.get("axis") == "language":
                    rec["applied"] = {**rec.get("applied", {}), "prompt": text}
            episode.perturbations = json.dumps(records)
        self.policy.set_prompts({k: text})


class LatencyObserver(Observer):
    """A policy server's mean round-trip time of each episode
    (:class:`~robogen.policies.base.LatencyReporting`), as ``policy_latency_ms``."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def on_end(self, k: int, episode: EpisodeState) -> Mapping[str, Any]:
        """``policy_latency_ms`` (None: the episode made no request)."""
        latency = float(self.policy.episode_latency_ms(k))
        return {"policy_latency_ms": latency if math.isfinite(latency) else None}


@register_observer("safety")
def _safety(manifest: EvalManifest, policy: Any) -> EpisodeObserver | None:
    return SafetyObserver() if manifest.safety else None


@register_observer("prompts")
def _prompts(manifest: EvalManifest, policy: Any) -> EpisodeObserver | None:
    from robogen.policies.base import Prompted

    return PromptObserver(policy) if isinstance(policy, Prompted) and policy.prompt else None


@register_observer("latency")
def _latency(manifest: EvalManifest, policy: Any) -> EpisodeObserver | None:
    from robogen.policies.base import LatencyReporting

    return LatencyObserver(policy) if isinstance(policy, LatencyReporting) else None


FrameHook = Callable[[int, Any], None]
"""``hook(episode_index, env)``: a frame hook (videos)."""
TransitionHook = Callable[[int, Any, np.ndarray, float], None]
"""``hook(episode_index, obs, action, reward)``: a transition hook (demonstrations)."""


class HookObserver(Observer):
    """The worker's caller-set hooks (``EpisodeWorker.frame_hook``, ``transition_hook``):
    frames for videos, transitions for demonstrations; runs after the registered observers."""

    def __init__(self) -> None:
        self.frame_hook: FrameHook | None = None
        self.transition_hook: TransitionHook | None = None

    @property
    def hooked(self) -> bool:
        """Whether a hook is set (else the worker leaves this observer out)."""
        return self.frame_hook is not None or self.transition_hook is not None

    def on_reset(self, k: int, episode: EpisodeState, env: Any) -> None:
        """The reset frame (videos start with it)."""
        if self.frame_hook is not None and not episode.done:
            self.frame_hook(episode.episode_index, env)

    def on_step(self, k: int, episode: EpisodeState, env: Any, obs: Any,
                action: np.ndarray, reward: float) -> None:
        """The transition, then the step's frame."""
        if self.transition_hook is not None:
            self.transition_hook(episode.episode_index, obs, action, reward)
        if self.frame_hook is not None:
            self.frame_hook(episode.episode_index, env)
