"""Estimators of generalization: intervals, paired tests, anytime-valid sequences, stop rules.

Pure functions of outcome arrays (NumPy in, frozen records out): no episode runs here and
no file is read or written, so the scheduler (:mod:`robogen.rollout`), the report
(:mod:`robogen.reports`), the CI gate (:mod:`robogen.check`), the scaling fits
(:mod:`robogen.scaling`) and users' notebooks share one implementation::

    from robogen.stats import paired_gap, wilson_interval

    gap = paired_gap(nominal_success, perturbed_success)     # (n,) bool each, same episodes
    low, high = wilson_interval(successes=42, n=50)

Modules (each cites the paper its method comes from):

* :mod:`~robogen.stats.intervals`: Wilson, percentile bootstrap, Agresti-Min and
  bounded-mean intervals; the paired gap and the interaction of two axes.
* :mod:`~robogen.stats.paired`: sign-flip and exact McNemar p-values, Holm's step-down.
* :mod:`~robogen.stats.anytime`: betting confidence sequences (Waudby-Smith & Ramdas 2024).
* :mod:`~robogen.stats.stopping`: when a sequentially evaluated condition stops.
* :mod:`~robogen.stats.sequential`: each condition's stop, replayed from its outcomes, and
  the :data:`~robogen.stats.sequential.Planner` of ``robogen eval --episodes auto``.
* :mod:`~robogen.stats.sweep`: severity bisection and the breaking point of an axis.
"""

from __future__ import annotations

from robogen.stats.anytime import (
    AnytimeInterval,
    BettingConfidenceSequence,
    mean_sequence,
    paired_gap_sequence,
    success_rate_sequence,
)
from robogen.stats.intervals import (
    DEFAULT_N_BOOT,
    Interaction,
    PairedGap,
    agresti_min_interval,
    augmented_wald_interval,
    bootstrap_mean_interval,
    bounded_mean_interval,
    interaction,
    paired_gap,
    wilson_interval,
)
from robogen.stats.paired import holm_adjust, mcnemar_exact_pvalue, sign_flip_pvalue
from robogen.stats.sequential import (
    ConditionStop,
    ConditionTarget,
    Outcomes,
    Planner,
    SequentialSummary,
    replay_manifest,
    sequential_planner,
)
from robogen.stats.stopping import StopDecision, StopRule, simulate_stop_rule, stop_decision
from robogen.stats.sweep import BreakingPoint, breaking_point, crossing, next_severities

__all__ = [
    "DEFAULT_N_BOOT",
    "AnytimeInterval",
    "BettingConfidenceSequence",
    "BreakingPoint",
    "ConditionStop",
    "ConditionTarget",
    "Interaction",
    "Outcomes",
    "PairedGap",
    "Planner",
    "SequentialSummary",
    "StopDecision",
    "StopRule",
    "agresti_min_interval",
    "augmented_wald_interval",
    "bootstrap_mean_interval",
    "bounded_mean_interval",
    "breaking_point",
    "crossing",
    "holm_adjust",
    "interaction",
    "mcnemar_exact_pvalue",
    "mean_sequence",
    "next_severities",
    "paired_gap",
    "paired_gap_sequence",
    "replay_manifest",
    "sequential_planner",
    "sign_flip_pvalue",
    "simulate_stop_rule",
    "stop_decision",
    "success_rate_sequence",
    "wilson_interval",
]
