"""Severity sweeps: where to look next on the success curve, and the breaking point.

The **breaking point** of an axis at level ``L`` is the severity at which the
success rate falls to ``L`` times the nominal success rate (``L = 0.5``: half
of nominal). The success curve is first made non-increasing in severity by
isotonic regression (pool-adjacent-violators; Barlow et al. 1972, *Statistical
Inference under Order Restrictions*), then the crossing of ``L * nominal`` is
interpolated linearly between the two severities around it. Its interval is
the percentile bootstrap over episodes: every severity of the axis ran the same
episode indices (common random numbers), so whole episodes are resampled
across the curve (Efron & Tibshirani 1993, ch. 13). A resample whose curve
never falls to the level counts as "beyond severity 1", so the upper bound can
be "not reached".

A sweep (``--severities sweep``) starts from :data:`SWEEP_GRID` and bisects the
bracket around each level's crossing (:func:`next_severities`) until it is
:data:`SWEEP_RESOLUTION` wide. Pure math on success arrays: the scheduler
(:func:`robogen.rollout.runner.run_sweep`) feeds it stored outcomes, the report reads
:func:`breaking_point`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from robogen.serialization import null_as
from robogen.stats.intervals import DEFAULT_N_BOOT

__all__ = [
    "HALF", "SWEEP_GRID", "SWEEP_RESOLUTION", "BreakingPoint", "breaking_point", "crossing",
    "monotone_fit", "next_severities",
]

SWEEP_GRID: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
"""Coarse severities every sweep runs first."""
SWEEP_RESOLUTION = 1.0 / 32
"""Bisection stops when the bracket of a crossing is this narrow (three halvings of 0.25)."""
HALF = 0.5
"""The level of the breaking point every sweep reports (success half of nominal)."""


def monotone_fit(rates: NDArray[np.float64]) -> NDArray[np.float64]:
    """(k,) float64 non-increasing least-squares fit of ``rates`` (isotonic regression)."""
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(rates, increasing=False).x, dtype=np.float64)


def crossing(severities: Sequence[float], rates: NDArray[np.float64], level: float) -> float:
    """Severity where the non-increasing fit of ``rates`` first falls to ``level * rates[0]``.

    Args:
        severities: (k,) increasing severities, the first 0 (nominal).
        rates: (k,) success rates at those severities.
        level: Fraction of the nominal rate, in (0, 1).

    Returns:
        The linearly interpolated crossing, or +inf when the fit stays above the
        target up to the last severity (or the nominal rate is 0).
    """
    fit = monotone_fit(np.asarray(rates, dtype=np.float64))
    target = level * fit[0]
    if fit[0] <= 0:
        return math.inf
    below = np.flatnonzero(fit <= target)
    if below.size == 0:
        return math.inf
    j = int(below[0])
    x0, x1, y0, y1 = severities[j - 1], severities[j], fit[j - 1], fit[j]
    return float(x1 if y0 == y1 else x0 + (y0 - target) * (x1 - x0) / (y0 - y1))


def next_severities(
    points: Mapping[float, NDArray[np.bool_]],
    levels: Sequence[float],
    resolution: float = SWEEP_RESOLUTION,
) -> list[float]:
    """Severities to run next on one axis: the midpoint of each level's crossing bracket.

    Args:
        points: Severity (0 = nominal) -> (n,) bool success per episode index.
        levels: Breaking levels (fractions of nominal success).
        resolution: Stop bisecting a bracket this narrow.

    Returns:
        New severities (sorted, not yet in ``points``); empty when the sweep is done.
    """
    sevs = sorted(points)
    rates = np.array([np.mean(points[s]) for s in sevs], dtype=np.float64)
    new: set[float] = set()
    for level in levels:
        x = crossing(sevs, rates, level)
        if not math.isfinite(x):
            continue
        j = next(k for k, s in enumerate(sevs) if s >= x)
        lo, hi = sevs[max(j - 1, 0)], sevs[j]
        if x == hi and j > 0:
            lo = sevs[j - 1]
        if hi - lo > resolution + 1e-12:
            mid = round((lo + hi) / 2, 6)
            if mid not in points:
                new.add(mid)
    return sorted(new)


@dataclass(frozen=True, slots=True)
class BreakingPoint:
    """Severity at which an axis takes success down to ``level`` x nominal.

    Attributes:
        axis: Axis name.
        level: Fraction of nominal success, in (0, 1).
        severity: Interpolated crossing, in (0, 1]; NaN when not reached at severity 1.
        ci_low: Lower percentile-bootstrap bound; NaN when not reached.
        ci_high: Upper bound; +inf when some resamples do not reach the level by severity 1
            (strict JSON writes it ``null``, which reads back as +inf).
        target_rate: ``level * nominal success rate``.
        severities: Severities the estimate used, increasing, starting at 0.
    """

    axis: str
    level: float
    severity: float
    ci_low: float
    ci_high: float = field(metadata=null_as(math.inf))
    target_rate: float
    severities: tuple[float, ...]

    @property
    def reached(self) -> bool:
        """Whether success fell to the level at some severity <= 1."""
        return math.isfinite(self.severity)


def breaking_point(
    axis: str,
    points: Mapping[float, NDArray[np.bool_]],
    level: float,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    confidence: float = 0.95,
    seed: int = 0,
) -> BreakingPoint:
    """The breaking point of ``axis`` at ``level`` with a bootstrap interval over episodes.

    Args:
        axis: Axis name.
        points: Severity (0 = nominal) -> (n,) bool success of episode indices
            0..n-1, the same indices at every severity.
        level: Fraction of nominal success, in (0, 1).
        n_boot: Bootstrap resamples.
        confidence: Two-sided level.
        seed: Resampling seed.

    Returns:
        The :class:`BreakingPoint`.
    """
    sevs = sorted(points)
    y = np.stack([np.asarray(points[s], dtype=np.float64) for s in sevs], axis=1)  # (n, k)
    est = crossing(sevs, y.mean(axis=0), level)
    rng = np.random.default_rng(seed)
    n = y.shape[0]
    boot = np.array([crossing(sevs, y[rng.integers(0, n, n)].mean(axis=0), level)
                     for _ in range(n_boot)])
    alpha = (1.0 - confidence) / 2.0
    low, high = (np.quantile(boot, [alpha, 1.0 - alpha], method="inverted_cdf")
                 if n else (math.nan, math.nan))
    reached = math.isfinite(est)
    return BreakingPoint(
        axis=axis, level=level,
        severity=est if reached else math.nan,
        ci_low=float(low) if reached and math.isfinite(low) else math.nan,
        ci_high=float(high),
        target_rate=level * float(monotone_fit(y.mean(axis=0))[0]),
        severities=tuple(float(s) for s in sevs),
    )
