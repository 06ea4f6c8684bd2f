"""The report of a sequential run: anytime-valid intervals in place of the fixed-n ones.

After a data-dependent stop, a fixed-n interval recomputed on the episodes used is not
valid. For an ``--episodes auto`` run, :func:`apply_sequential` therefore replaces

* each gap's interval by its paired-gap confidence sequence at the stop (the interval the
  stop rule decided on; ``ci_method`` :data:`~robogen.types.SEQUENTIAL_METHOD`), and
* each condition's success-rate interval by the success-rate confidence sequence of its
  valid episodes in index order (same method, on [0, 1]),

both from Waudby-Smith & Ramdas (2024), JRSS-B 86(1) (:mod:`robogen.stats.anytime`),
valid at any stopping time. Pair interactions keep their bootstrap interval, labelled as
not adjusted for the sequential stopping (:func:`label_fixed_n`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from robogen.reports.records import AxisGap, ConditionStats, InteractionStats
from robogen.stats.anytime import success_rate_sequence
from robogen.stats.sequential import (
    Outcomes,
    SequentialSummary,
    replay_manifest,
    summarize,
)
from robogen.types import INVALID_CAUSES, SEQUENTIAL_METHOD, EpisodeResult, EvalManifest

FIXED_N_LABEL = "fixed-n, not adjusted for sequential stopping"
"""Appended to the ``ci_method`` of intervals of an auto run that are not anytime-valid."""


def outcomes_by_condition(by_cond: Mapping[str, Sequence[EpisodeResult]],
                          ) -> dict[str, Outcomes]:
    """Episode index -> success (None: invalid episode) per condition."""
    return {name: {r.episode_index: (None if r.cause in INVALID_CAUSES else r.success)
                   for r in rs} for name, rs in by_cond.items()}


def apply_sequential(
    manifest: EvalManifest,
    by_cond: Mapping[str, Sequence[EpisodeResult]],
    conditions: Sequence[ConditionStats],
    singles: Sequence[AxisGap],
    multis: Sequence[AxisGap],
) -> tuple[tuple[ConditionStats, ...], list[AxisGap], list[AxisGap], SequentialSummary]:
    """Swap a sequential run's fixed-n intervals for the anytime-valid ones; add its stops.

    Args:
        manifest: The run's manifest (``sequential`` set).
        by_cond: Stored episodes by condition.
        conditions: Per-condition stats with Wilson intervals.
        singles: Single-axis gaps with fixed-n intervals.
        multis: Multi-axis gaps with fixed-n intervals.

    Returns:
        ``(conditions, singles, multis, summary)`` with the intervals replaced.

    Raises:
        ValueError: If the manifest has no sequential rule.
    """
    rule = manifest.sequential
    if rule is None:
        raise ValueError("the manifest has no sequential rule (a fixed-n run)")
    outcomes = outcomes_by_condition(by_cond)
    stops = replay_manifest(manifest, outcomes)
    by_name = {s.condition: s for s in stops}

    def gap(g: AxisGap) -> AxisGap:
        s = by_name.get(g.condition)
        if s is None or not math.isfinite(g.gap) or s.n_pairs == 0:
            return g  # hidden (not applied, no data, invalid): nothing to replace
        return dataclasses.replace(g, gap=s.estimate, ci_low=s.ci_low, ci_high=s.ci_high,
                                   ci_method=SEQUENTIAL_METHOD)

    def rate(c: ConditionStats) -> ConditionStats:
        ys = [o for _, o in sorted(outcomes.get(c.condition, {}).items()) if o is not None]
        if not ys:
            return c
        iv = success_rate_sequence(ys, confidence=rule.confidence, horizon=rule.max_episodes)
        return dataclasses.replace(c, ci_low=iv.low, ci_high=iv.high)

    return (tuple(rate(c) for c in conditions), [gap(g) for g in singles],
            [gap(g) for g in multis], summarize(rule, stops))


def label_fixed_n(interactions: Sequence[InteractionStats]) -> tuple[InteractionStats, ...]:
    """Mark interaction intervals of an auto run as fixed-n (:data:`FIXED_N_LABEL`)."""
    return tuple(dataclasses.replace(i, ci_method=f"{i.ci_method}, {FIXED_N_LABEL}")
                 for i in interactions)
