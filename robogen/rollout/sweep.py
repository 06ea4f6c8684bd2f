"""Severity sweeps, the planning half: which severities to run next on the success curve.

A sweep (``--severities sweep``) starts from :data:`SWEEP_GRID` and bisects the
bracket around each breaking level's crossing (:func:`next_severities`) until it is
:data:`SWEEP_RESOLUTION` wide. The crossing is that of the success curve made
non-increasing in severity by isotonic regression (pool-adjacent-violators; Barlow
et al. 1972, *Statistical Inference under Order Restrictions*), interpolated linearly.
The breaking point and its interval (the reporting half) are in
:mod:`robogen.reports.sweep`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

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
