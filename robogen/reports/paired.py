"""Paired estimators shared by interactions, policy comparisons and breaking points.

* :func:`bounded_mean_interval`: interval of the mean of bounded per-episode
  values (differences of paired outcomes) that never collapses to zero width.
* :func:`sign_flip_pvalue`: exact (or Monte Carlo) paired randomization test
  that the per-episode differences are centred at 0.
* :func:`mcnemar_exact_pvalue`: exact McNemar test of two paired success rates.
* :func:`holm_adjust`: Holm's step-down adjustment of a family of p-values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

from robogen.errors import MUST_BE_POSITIVE, InvalidSpecError
from robogen.reports.stats import DEFAULT_N_BOOT, bootstrap_mean_interval

MIN_NONZERO_FOR_BOOTSTRAP = 10
"""Below this many non-zero per-episode differences the percentile bootstrap
is degenerate (with none, every resample has mean 0 and the interval has zero
width), so :func:`bounded_mean_interval` uses :func:`augmented_wald_interval`."""

METHOD_BOOTSTRAP = "bootstrap"
METHOD_AUGMENTED = "augmented-wald"

EXACT_SIGN_FLIP_MAX = 16
"""Up to this many non-zero differences the sign-flip test enumerates all 2^k
sign patterns (exact); above it, :data:`SIGN_FLIP_RESAMPLES` random flips."""
SIGN_FLIP_RESAMPLES = 20_000


def augmented_wald_interval(
    values: ArrayLike, bound: float, confidence: float = 0.95
) -> tuple[float, float]:
    """Wald interval of a mean after adding pseudo-episodes, so it always has width.

    Adds weight 1/2 at ``+bound``, 1/2 at ``-bound`` and 1 at 0 (two pseudo
    episodes in total) to the ``n`` values, then takes ``mean ± z * sd / sqrt(n + 2)``
    of the augmented sample, clipped to ``[-bound, bound]``. For a difference of
    two paired binary outcomes (``bound = 1``) this is exactly the Agresti & Min
    (2005, *Statistics in Medicine* 24(5)) interval, which adds 0.5 to each cell
    of the paired 2x2 table; for other bounded differences it is the same
    add-pseudo-observation idea (Agresti & Caffo 2000, *Am. Stat.* 54(4)).

    Args:
        values: (n,) float per-episode values in ``[-bound, bound]``.
        bound: Largest possible ``|value|``, > 0.
        confidence: Two-sided level in (0, 1).

    Returns:
        ``(low, high)`` with ``low < high``.

    Raises:
        InvalidSpecError: If ``bound <= 0`` or the values are not 1-D.
    """
    if not bound > 0:
        raise InvalidSpecError(MUST_BE_POSITIVE.format(field="bound", value=bound))
    v = _one_d(values)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    m = v.shape[0] + 2.0
    mean = float(v.sum()) / m  # pseudo-episodes at +b and -b cancel, the one at 0 adds nothing
    second = (float((v * v).sum()) + bound * bound) / m
    sd = math.sqrt(max(second - mean * mean, 0.0))
    half = z * sd / math.sqrt(m)
    return max(-bound, mean - half), min(bound, mean + half)


def bounded_mean_interval(
    values: ArrayLike,
    bound: float,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, str]:
    """Interval of the mean of paired per-episode differences, never of zero width.

    With at least :data:`MIN_NONZERO_FOR_BOOTSTRAP` non-zero differences: the
    percentile bootstrap over episodes (Efron & Tibshirani 1993, ch. 13). With
    fewer (few discordant episodes, or none), or when every value is the same
    (every resample would have the same mean): :func:`augmented_wald_interval`.

    Args:
        values: (n,) float per-episode differences in ``[-bound, bound]``.
        bound: Largest possible ``|value|`` (1 for a paired gap, 2 for a
            difference of two paired gaps or an interaction of two axes).
        n_boot: Bootstrap resamples, > 0.
        confidence: Two-sided level in (0, 1).
        seed: Resampling seed.

    Returns:
        ``(low, high, method)``, method :data:`METHOD_BOOTSTRAP` or
        :data:`METHOD_AUGMENTED`; ``(nan, nan, method)`` when n is 0.
    """
    v = _one_d(values)
    if v.shape[0] == 0:
        return math.nan, math.nan, METHOD_AUGMENTED
    if np.count_nonzero(v) < MIN_NONZERO_FOR_BOOTSTRAP or np.ptp(v) == 0:
        low, high = augmented_wald_interval(v, bound, confidence)
        return low, high, METHOD_AUGMENTED
    low, high = bootstrap_mean_interval(v, n_boot=n_boot, confidence=confidence, seed=seed)
    return low, high, METHOD_BOOTSTRAP


def sign_flip_pvalue(values: ArrayLike, *, seed: int = 0) -> float:
    """Two-sided paired randomization (sign-flip) test of a zero mean difference.

    Under the null hypothesis each episode's difference is as likely to have
    either sign (Fisher 1935, *The Design of Experiments*, §21; the paired
    permutation test). Zero differences carry no sign and are dropped; up to
    :data:`EXACT_SIGN_FLIP_MAX` non-zero values every sign pattern is
    enumerated (exact), above it :data:`SIGN_FLIP_RESAMPLES` random patterns
    are drawn (``scipy.stats.permutation_test``). For binary paired outcomes
    this is the exact McNemar test.

    Args:
        values: (n,) float per-episode differences.
        seed: Seed of the random sign patterns (only used above the exact limit).

    Returns:
        The p-value in (0, 1]; 1.0 when every difference is 0.
    """
    from scipy.stats import permutation_test

    v = _one_d(values)
    nz = v[v != 0]
    if nz.size == 0:
        return 1.0
    n_res = 2**nz.size if nz.size <= EXACT_SIGN_FLIP_MAX else SIGN_FLIP_RESAMPLES
    res = permutation_test(
        (nz,), np.sum, permutation_type="samples", n_resamples=n_res,
        alternative="two-sided", random_state=np.random.default_rng(seed),
    )
    return float(min(1.0, res.pvalue))


def mcnemar_exact_pvalue(n10: int, n01: int) -> float:
    """Exact McNemar (1947) test: two-sided binomial test of ``n10`` in ``n10 + n01`` at 1/2.

    Returns:
        The p-value; 1.0 when there is no discordant pair.
    """
    from scipy.stats import binomtest

    if n10 + n01 == 0:
        return 1.0
    return float(binomtest(int(n10), int(n10 + n01), 0.5).pvalue)


def holm_adjust(pvalues: Sequence[float]) -> tuple[float, ...]:
    """Holm (1979, *Scand. J. Statist.* 6(2)) step-down adjusted p-values.

    Controls the family-wise error rate of the whole family at level alpha
    when each adjusted p-value is compared with alpha. NaN entries are left
    NaN and not counted in the family.

    Args:
        pvalues: The family's raw p-values.

    Returns:
        Adjusted p-values, in input order, each in [raw, 1].
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    running = 0.0
    for rank, i in enumerate(ok[np.argsort(p[ok], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return tuple(float(x) for x in out)


def _one_d(values: ArrayLike) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise InvalidSpecError(f"values must be 1-D (one value per episode), got shape {v.shape}")
    return v
