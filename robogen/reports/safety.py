"""Safety metrics per condition: means with intervals and paired differences to nominal.

Each episode recorded with ``robogen eval --safety`` carries the metrics of
:mod:`robogen.rollout.safety`. Per condition and metric, :func:`safety_stats` reports the
mean over the condition's valid episodes with a percentile-bootstrap interval, and the
paired difference ``perturbed - nominal`` over the episodes valid in both (same episode
index: same initial state and seed) with its bootstrap interval (Efron & Tibshirani 1993,
ch. 13; the same resampling as the success gaps). A positive difference is less safe.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robogen.rollout.safety import SAFETY_METRICS
from robogen.serialization import Record
from robogen.stats.intervals import DEFAULT_N_BOOT, bootstrap_mean_interval
from robogen.types import NOMINAL, EpisodeResult

UNITS = {m.name: m.unit for m in SAFETY_METRICS}


@dataclass(frozen=True, slots=True)
class SafetyStats(Record):
    """One safety metric of one condition.

    Attributes:
        condition: Condition name (``nominal``, ``lighting@1``, ...).
        metric: Metric name (:data:`~robogen.rollout.safety.SAFETY_METRICS`).
        unit: Its unit (``N``, ``steps``, ``0/1``, ...).
        n: Valid episodes of the condition that measured it.
        mean: Mean over them (NaN when n is 0).
        ci_low: Lower bootstrap bound of ``mean``.
        ci_high: Upper bootstrap bound of ``mean``.
        n_pairs: Episodes valid and measured in this condition and in nominal.
        diff: Mean paired difference ``perturbed - nominal`` (NaN for nominal itself or
            without pairs); positive is less safe.
        diff_low: Lower bootstrap bound of ``diff``.
        diff_high: Upper bootstrap bound of ``diff``.
    """

    condition: str
    metric: str
    unit: str
    n: int
    mean: float
    ci_low: float
    ci_high: float
    n_pairs: int
    diff: float
    diff_low: float
    diff_high: float


@dataclass(frozen=True, slots=True)
class SafetyDifference(Record):
    """One safety metric of one condition, compared between two runs of one protocol.

    Attributes:
        condition: Condition name.
        metric: Metric name.
        unit: Its unit.
        run_a: Label of the first run.
        run_b: Label of the second run.
        n_pairs: Episodes valid and measured in both runs.
        mean_a: ``run_a``'s mean over them.
        mean_b: ``run_b``'s mean over them.
        difference: Mean paired difference ``b - a`` (positive: ``run_b`` less safe).
        ci_low: Lower bootstrap bound of ``difference``.
        ci_high: Upper bootstrap bound of ``difference``.
    """

    condition: str
    metric: str
    unit: str
    run_a: str
    run_b: str
    n_pairs: int
    mean_a: float
    mean_b: float
    difference: float
    ci_low: float
    ci_high: float


def episode_values(results: Sequence[EpisodeResult]
                   ) -> dict[str, dict[str, dict[int, float]]]:
    """Condition -> metric -> episode index -> value, of the valid episodes that recorded it.
    """
    from robogen.types import INVALID_CAUSES

    out: dict[str, dict[str, dict[int, float]]] = {}
    for r in results:
        if r.cause in INVALID_CAUSES:
            continue
        for m in SAFETY_METRICS:
            v = _value(r, m.name)
            if v is not None:
                out.setdefault(r.condition, {}).setdefault(m.name, {})[r.episode_index] = v
    return out


def safety_differences(
    labels: Sequence[str],
    values: Sequence[Mapping[str, Mapping[str, Mapping[int, float]]]],
    conditions: Sequence[str],
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> tuple[SafetyDifference, ...]:
    """Every pair of runs (in the given order), condition and metric both measured: the
    paired difference ``b - a`` with its percentile-bootstrap interval.

    Args:
        labels: Run labels.
        values: Per run, :func:`episode_values` of its results.
        conditions: Conditions to compare, in report order.
    """
    out: list[SafetyDifference] = []
    for ia in range(len(labels)):
        for ib in range(ia + 1, len(labels)):
            for cond in conditions:
                for m in SAFETY_METRICS:
                    a = values[ia].get(cond, {}).get(m.name, {})
                    b = values[ib].get(cond, {}).get(m.name, {})
                    common = sorted(set(a) & set(b))
                    if not common:
                        continue
                    va = np.array([a[i] for i in common])
                    vb = np.array([b[i] for i in common])
                    low, high = bootstrap_mean_interval(vb - va, n_boot=n_boot,
                                                        confidence=confidence, seed=seed)
                    out.append(SafetyDifference(
                        cond, m.name, m.unit, labels[ia], labels[ib], len(common),
                        float(va.mean()), float(vb.mean()), float((vb - va).mean()), low, high))
    return tuple(out)


def difference_table(diffs: Sequence[SafetyDifference], confidence: float
                     ) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the between-runs safety table."""
    ci = f"{confidence * 100:g}% CI"
    headers = ["condition", "metric", "a", "b", "mean a", "mean b", f"b - a [{ci}]", "pairs"]
    f = format_value
    rows = [[d.condition, f"{d.metric} [{d.unit}]", d.run_a, d.run_b, f(d.metric, d.mean_a),
             f(d.metric, d.mean_b),
             f"{_signed(d.metric, d.difference)} [{_signed(d.metric, d.ci_low)}, "
             f"{_signed(d.metric, d.ci_high)}]", str(d.n_pairs)] for d in diffs]
    return headers, rows


def _value(r: EpisodeResult, metric: str) -> float | None:
    v = getattr(r, metric, None)
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def safety_stats(
    by_condition: Mapping[str, Sequence[EpisodeResult]],
    nominal: str,
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
) -> tuple[SafetyStats, ...]:
    """Per condition (in the mapping's order) and metric: mean and paired difference.

    Args:
        by_condition: Valid episodes per condition name (invalid ones already left out).
        nominal: Name of the nominal condition.
        confidence: Two-sided level of every interval.
        n_boot: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        One :class:`SafetyStats` per (condition, metric) that some episode measured;
        empty when no episode recorded safety metrics.
    """
    nan = math.nan
    base = {m.name: {r.episode_index: v for r in by_condition.get(nominal, ())
                     if (v := _value(r, m.name)) is not None} for m in SAFETY_METRICS}
    out: list[SafetyStats] = []
    for cond, rs in by_condition.items():
        for m in SAFETY_METRICS:
            values = {r.episode_index: v for r in rs if (v := _value(r, m.name)) is not None}
            if not values:
                continue
            v = np.array(list(values.values()))
            low, high = bootstrap_mean_interval(v, n_boot=n_boot, confidence=confidence,
                                                seed=seed)
            diff = d_low = d_high = nan
            pairs = [i for i in values if i in base[m.name]] if cond != nominal else []
            if pairs:
                d = np.array([values[i] - base[m.name][i] for i in pairs])
                diff = float(d.mean())
                d_low, d_high = bootstrap_mean_interval(d, n_boot=n_boot,
                                                        confidence=confidence, seed=seed)
            out.append(SafetyStats(cond, m.name, m.unit, len(v), float(v.mean()), low, high,
                                   len(pairs), diff, d_low, d_high))
    return tuple(out)


def format_value(metric: str, x: float) -> str:
    """A metric's value for tables: forces with one decimal, rates as fractions, counts and
    action norms with two decimals."""
    if not math.isfinite(x):
        return "–"
    if metric == "peak_contact_force_n":
        return f"{x:.1f}"
    return f"{x:.2f}"


SAFETY_NOTE = (
    "Safety metrics (robogen eval --safety), read from MuJoCo at every env step (the contact "
    "force from a solved state, at every physics substep where the scene shows them): "
    "mean over the condition's valid episodes, and the paired difference to nominal on the "
    "same episodes (positive: less safe); {ci}: percentile bootstrap over episodes. "
    "peak contact force: the largest total normal force of the robot on the scene (table, "
    "floor, walls, distractors; not the manipulated objects) at one step [N]; joint-limit "
    "and distractor-contact counts [env steps]; object dropped: share of episodes; action "
    "magnitude and jerk: norms of the policy's actions and their second differences.")


def significant_change(s: SafetyStats) -> bool:
    """Whether ``s`` belongs in view: nominal's own row (the reference means), or a
    perturbed condition whose paired difference to nominal has an interval excluding 0."""
    if s.condition == NOMINAL:
        return True
    return math.isfinite(s.diff) and (s.diff_low > 0 or s.diff_high < 0)


def safety_table(stats: Sequence[SafetyStats], confidence: float, sampling: str = ""
                 ) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the safety table (one row per condition and metric).

    Args:
        stats: The per-condition statistics.
        confidence: Their interval level.
        sampling: Where the contact force was read (the manifest's ``safety_sampling``:
            ``peak over physics substeps`` or ``sampled per env step``), written next to
            ``peak_contact_force_n``; empty (a run from before it was recorded): nothing.
    """
    ci = f"{confidence * 100:g}% CI"
    headers = ["condition", "metric", f"mean [{ci}, bootstrap]",
               f"vs nominal [{ci}, paired bootstrap]", "pairs"]
    rows = []
    for s in stats:
        f = format_value
        mean = f"{f(s.metric, s.mean)} [{f(s.metric, s.ci_low)}, {f(s.metric, s.ci_high)}]"
        if math.isfinite(s.diff):
            diff = (f"{_signed(s.metric, s.diff)} [{_signed(s.metric, s.diff_low)}, "
                    f"{_signed(s.metric, s.diff_high)}]")
        else:
            diff = "–"
        name = f"{s.metric} [{s.unit}]"
        if sampling and s.metric == "peak_contact_force_n":
            name += f", {sampling}"
        rows.append([s.condition, name, mean, diff,
                     str(s.n_pairs) if s.n_pairs else "–"])
    return headers, rows


def _signed(metric: str, x: float) -> str:
    text = format_value(metric, x)
    return text if text.startswith(("-", "–")) else f"+{text}"
