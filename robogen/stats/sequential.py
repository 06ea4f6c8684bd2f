"""Where each condition of a sequential run (``robogen eval --episodes auto``) stops, and why.

A condition's stops are *replayed* from its stored outcomes: start at 0 episode indices;
at each batch boundary ``n`` take the anytime-valid interval of the paired gap over the
valid pairs among indices ``0..n-1`` (its episodes paired with nominal's same indices;
a pair drops when either episode is invalid, as in the fixed-n gap), ask
:func:`~robogen.stats.stopping.stop_decision`, and move to the next boundary it gives.
Each decision is a function of the outcomes before its boundary only, so the replay is
the same for a run that was killed and resumed, and for the serial and Ray backends: the
run stops every condition at the same episode count.

Method: the hedged-capital betting confidence sequence of Waudby-Smith, I. & Ramdas, A.
(2024), "Estimating means of bounded random variables by betting", *JRSS-B* 86(1): 1-27
(:mod:`robogen.stats.anytime`). The reported gap interval of an auto run is that
sequence's interval at the stop, which stays valid under this data-dependent stopping; a
fixed-n interval recomputed at the stop would not be.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from robogen.serialization import Record
from robogen.stats.anytime import CITATION, AnytimeInterval, BettingConfidenceSequence
from robogen.stats.stopping import StopRule, stop_decision
from robogen.types import NOMINAL, EvalManifest, SequentialRule

REASON_NOMINAL = "paired"
"""Stop reason of the nominal condition: it ran the indices the perturbed conditions needed."""
REASON_RUNNING = "running"
"""Stop reason of a condition whose run is unfinished (killed; resume it)."""
REASON_TEXT = {
    "width": "half-width reached the target",
    "decided": "gap decided against the threshold",
    "cap": "reached max_episodes",
    REASON_NOMINAL: "paired with the perturbed conditions' episodes",
    REASON_RUNNING: "unfinished (resume the run)",
}
"""Words for each stop reason, as the report shows them."""

Outcomes = Mapping[int, bool | None]
"""Episode index -> success of one condition's stored episodes (None: invalid episode)."""


@dataclass(frozen=True, slots=True)
class ConditionTarget:
    """What the planner asks of one condition after a round.

    Attributes:
        episodes: Episode indices ``0..episodes-1`` the condition needs stored.
        stopped: Whether it needs no more (its stop rule fired).
        priority: Half-width relative to the target (larger runs first); ``inf`` for
            nominal and for conditions without a pair yet.
    """

    episodes: int
    stopped: bool
    priority: float


Planner = Callable[[Mapping[str, Outcomes]], Mapping[str, ConditionTarget]]
"""Stored outcomes by condition -> the target of every condition of the manifest."""


@dataclass(frozen=True, slots=True)
class ConditionStop(Record):
    """Where one condition of a sequential run stands.

    Attributes:
        condition: Condition name.
        episodes: Episode indices ``0..episodes-1`` the decisions covered (stored and
            paired); for a stopped condition, the episodes it used.
        n_pairs: Valid pairs in the interval (``episodes`` minus dropped pairs).
        reason: ``width``, ``decided``, ``cap``, :data:`REASON_NOMINAL` or
            :data:`REASON_RUNNING`.
        target: Episode indices the condition needs next (``episodes`` when stopped).
        estimate: Gap estimate (NaN for nominal or before any pair).
        ci_low: Lower bound of the anytime-valid gap interval (NaN for nominal).
        ci_high: Upper bound (NaN for nominal).
    """

    condition: str
    episodes: int
    n_pairs: int
    reason: str
    target: int
    estimate: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan

    @property
    def stopped(self) -> bool:
        """Whether the condition needs no more episodes."""
        return self.reason != REASON_RUNNING

    @property
    def halfwidth(self) -> float:
        """Half-width of the gap interval (NaN for nominal)."""
        return (self.ci_high - self.ci_low) / 2.0


@dataclass(frozen=True, slots=True)
class SequentialSummary(Record):
    """The sequential part of a report: the rule, the method, and each condition's stop.

    Attributes:
        rule: The run's :class:`~robogen.types.SequentialRule`.
        citation: Source of the interval method.
        stops: One :class:`ConditionStop` per condition, in manifest order (nominal first).
    """

    rule: SequentialRule
    citation: str
    stops: tuple[ConditionStop, ...]

    def stop(self, condition: str) -> ConditionStop:
        """The stop of ``condition`` (KeyError if absent)."""
        for s in self.stops:
            if s.condition == condition:
                return s
        raise KeyError(f"no condition {condition!r} in the sequential summary")


def stop_rule(rule: SequentialRule) -> StopRule:
    """The :class:`~robogen.stats.stopping.StopRule` of a manifest's sequential rule."""
    return StopRule(target_halfwidth=rule.target_halfwidth, max_episodes=rule.max_episodes,
                    batch_size=rule.batch_size, gap_threshold=rule.gap_threshold,
                    confidence=rule.confidence)


def replay_condition(name: str, rule: SequentialRule, nominal: Outcomes,
                     perturbed: Outcomes) -> ConditionStop:
    """Replay a perturbed condition's stop decisions on its stored outcomes.

    Args:
        name: Condition name.
        rule: The run's stop rule.
        nominal: Nominal's stored outcomes by episode index (None: invalid).
        perturbed: The condition's stored outcomes by episode index (None: invalid).

    Returns:
        The :class:`ConditionStop`: stopped (``width``/``decided``/``cap``) at the first
        boundary whose decision says so, or :data:`REASON_RUNNING` with the ``target``
        the next decision needs when some index below it is not stored in either
        condition.
    """
    sr = stop_rule(rule)
    cs = sr.sequence(1)
    cap = rule.max_episodes
    n = fed = 0
    last = fed
    while True:
        missing = [i for i in range(fed, n) if i not in nominal or i not in perturbed]
        if missing:
            return _stop(name, last, cs, REASON_RUNNING, n)
        pairs = [float(nominal[i]) - float(perturbed[i]) for i in range(fed, n)  # type: ignore[arg-type]
                 if nominal[i] is not None and perturbed[i] is not None]
        if pairs:
            cs.update(np.array(pairs)[None, :])
        fed = last = n
        dec = stop_decision(cs.interval(0), sr)
        if dec.stop or n >= cap:
            return _stop(name, n, cs, dec.reason if dec.stop and dec.reason else "cap", n)
        n = min(n + dec.next_batch, cap)


def _stop(name: str, n: int, cs: BettingConfidenceSequence, reason: str,
          target: int) -> ConditionStop:
    iv: AnytimeInterval = cs.interval(0)
    return ConditionStop(name, n, int(iv.n), reason, target, iv.estimate, iv.low, iv.high)


def replay_run(rule: SequentialRule, nominal_name: str, outcomes: Mapping[str, Outcomes],
               ) -> tuple[ConditionStop, ...]:
    """Every condition's :class:`ConditionStop`, nominal first (then in ``outcomes`` order).

    Nominal's ``target`` is the most indices any perturbed condition has used or needs
    (pairing: nominal runs at least as many); it is :data:`REASON_NOMINAL` once every
    perturbed condition stopped and nominal holds its target.

    Args:
        rule: The run's stop rule.
        nominal_name: Name of the nominal condition (a key of ``outcomes``).
        outcomes: Stored outcomes by condition name.
    """
    nom = outcomes[nominal_name]
    stops = [replay_condition(c, rule, nom, o) for c, o in outcomes.items() if c != nominal_name]
    target = max((s.target for s in stops), default=rule.batch_size)
    have = 0
    while have < target and have in nom:
        have += 1
    done = all(s.stopped for s in stops) and have >= target
    nominal = ConditionStop(nominal_name, min(have, target), min(have, target),
                            REASON_NOMINAL if done else REASON_RUNNING, target)
    return (nominal, *stops)


def summarize(rule: SequentialRule, stops: tuple[ConditionStop, ...]) -> SequentialSummary:
    """The :class:`SequentialSummary` of a run's stops."""
    return SequentialSummary(rule, CITATION, stops)


def priority(stop: ConditionStop, rule: SequentialRule) -> float:
    """How far a condition is from its target: half-width / target (inf before any pair).

    The scheduler runs the batches of the widest conditions (relative to the target)
    first.
    """
    hw = stop.halfwidth
    if not math.isfinite(hw):
        return math.inf
    return hw / rule.target_halfwidth


def nominal_name(manifest: EvalManifest) -> str:
    """Name of the manifest's nominal condition (``nominal``, else the first unperturbed one)."""
    for c in manifest.conditions:
        if c.name == NOMINAL:
            return c.name
    return next(c.name for c in manifest.conditions if c.is_nominal)


def replay_manifest(manifest: EvalManifest, outcomes: Mapping[str, Outcomes],
                    ) -> tuple[ConditionStop, ...]:
    """:func:`replay_run` over the manifest's conditions, in manifest order (nominal first).

    Raises:
        ValueError: If the manifest has no sequential rule.
    """
    if manifest.sequential is None:
        raise ValueError("the manifest has no sequential rule (a fixed-n run)")
    nom = nominal_name(manifest)
    ordered = {nom: outcomes.get(nom, {})}
    ordered.update({c.name: outcomes.get(c.name, {}) for c in manifest.conditions
                    if c.name != nom})
    stops = {s.condition: s for s in replay_run(manifest.sequential, nom, ordered)}
    return tuple(stops[c.name] for c in manifest.conditions)


def sequential_planner(manifest: EvalManifest) -> Planner:
    """The :data:`Planner` of a sequential run's manifest (stored outcomes -> targets).

    :func:`robogen.rollout.sequential.run_sequential` asks it after every round.

    Raises:
        ValueError: If the manifest has no sequential rule.
    """
    if manifest.sequential is None:
        raise ValueError("the manifest has no sequential rule (a fixed-n run)")
    rule = manifest.sequential

    def plan(outcomes: Mapping[str, Outcomes]) -> dict[str, ConditionTarget]:
        nom = nominal_name(manifest)
        out = {}
        for s in replay_manifest(manifest, outcomes):
            pr = math.inf if s.condition == nom else priority(s, rule)
            out[s.condition] = ConditionTarget(s.target, s.stopped, pr)
        return out

    return plan
