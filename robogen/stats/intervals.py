"""Interval estimates for success rates and paired generalization gaps.

Three estimators, all pure functions of boolean outcome arrays:

* :func:`wilson_interval`: the score interval of one success rate.
* :func:`paired_gap`: nominal minus perturbed success on the *same* episode
  indices, with a percentile bootstrap interval over episodes.
* :func:`interaction`: the gap of a combined condition against the sum of its
  single-axis gaps, bootstrapped on the same resampled episodes.

and the intervals they build on: :func:`bootstrap_mean_interval`,
:func:`augmented_wald_interval` and :func:`bounded_mean_interval` (an interval of
the mean of bounded paired differences that never has zero width; also exported by
:mod:`robogen.stats.paired`, which builds on this module).

Pairing: episode ``i`` starts from the same initial state in every condition
(common random numbers, Law & Kelton, *Simulation Modeling and Analysis*,
ch. 11), so per-episode differences cancel the episode-to-episode variation
shared by both conditions and the paired interval is narrower than an
unpaired one whenever outcomes are positively correlated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robogen.errors import MUST_BE_IN_RANGE, MUST_BE_POSITIVE, InvalidSpecError

DEFAULT_N_BOOT = 10_000
"""Bootstrap resamples used by default; the Monte Carlo error of a 95% percentile
bound is then about 0.002 for n = 100 episodes."""

_CHUNK = 1_000  # resamples drawn per block, bounds memory at _CHUNK * n indices

SHAPE_MISMATCH = (
    "{what} must be 1-D boolean arrays of the same length (one entry per paired episode), "
    "got shapes {shapes}; align them by episode_index first"
)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial success rate.

    Wilson, E. B. (1927). Probable inference, the law of succession, and
    statistical inference. *JASA* 22(158), 209-212. Unlike the normal (Wald)
    interval it stays inside [0, 1] and keeps near-nominal coverage at rates
    close to 0 and 1 and for small n (Brown, Cai & DasGupta, 2001).

    The bounds are exact at the edges: ``successes == 0`` gives a lower bound of
    exactly 0.0 and ``successes == n`` an upper bound of exactly 1.0 (the closed
    form reaches them only up to rounding).

    Args:
        successes: Number of successes k, in [0, n].
        n: Number of trials (episodes), >= 0.
        confidence: Two-sided confidence level, in (0, 1).

    Returns:
        ``(low, high)`` with ``0 <= low <= k/n <= high <= 1``. With ``n == 0``
        there is no information and the whole range ``(0.0, 1.0)`` is returned.

    Raises:
        InvalidSpecError: If ``n < 0``, ``successes`` is outside [0, n] or
            ``confidence`` is outside (0, 1).
    """
    _check_confidence(confidence)
    if n < 0:
        raise InvalidSpecError(MUST_BE_IN_RANGE.format(field="n", low=0, high="inf", value=n))
    if not 0 <= successes <= n:
        raise InvalidSpecError(
            MUST_BE_IN_RANGE.format(field="successes", low=0, high=n, value=successes)
        )
    if n == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


@dataclass(frozen=True, slots=True)
class PairedGap:
    """Paired generalization gap between two conditions on the same episodes.

    Attributes:
        gap: ``mean(nominal) - mean(perturbed)`` over the n pairs [-]; positive
            when the perturbation costs success. NaN when n is 0.
        ci_low: Lower percentile-bootstrap bound of ``gap``.
        ci_high: Upper percentile-bootstrap bound of ``gap``.
        n: Number of paired episodes.
        n10: Discordant pairs where nominal succeeded and perturbed failed.
        n01: Discordant pairs where nominal failed and perturbed succeeded.
            ``gap == (n10 - n01) / n`` exactly.
        nominal_rate: Nominal success rate over the pairs.
        perturbed_rate: Perturbed success rate over the pairs.
        relative_drop: ``gap / nominal_rate``; NaN when ``nominal_rate`` is 0.
        confidence: Two-sided confidence level of the interval.
        ci_method: ``bootstrap`` or ``agresti-min`` (used when there are fewer
            than :data:`MIN_DISCORDANT_FOR_BOOTSTRAP` discordant pairs).
    """

    gap: float
    ci_low: float
    ci_high: float
    n: int
    n10: int
    n01: int
    nominal_rate: float
    perturbed_rate: float
    relative_drop: float
    confidence: float
    ci_method: str = "bootstrap"


@dataclass(frozen=True, slots=True)
class Interaction:
    """Gap of a combined condition against the sum of its single-axis gaps.

    ``interaction = gap_combined - sum(single_gaps)``. Positive: the axes
    together cost more than their separate costs add up to (they compound);
    negative: less (they overlap, or the combined gap saturates at the nominal
    success rate, which bounds any gap from above).

    Attributes:
        interaction: The estimate [-]; NaN when n is 0.
        ci_low: Lower percentile-bootstrap bound.
        ci_high: Upper percentile-bootstrap bound.
        combined_gap: Paired gap of the combined condition.
        single_gaps: Paired gap of each single-axis condition, in input order.
        n: Episodes present in the nominal, combined and every single condition.
        confidence: Two-sided confidence level of the interval.
        ci_method: ``bootstrap``, or ``augmented-wald`` when fewer than 10
            episodes have a non-zero interaction term (see
            :func:`robogen.stats.paired.bounded_mean_interval`).
    """

    interaction: float
    ci_low: float
    ci_high: float
    combined_gap: float
    single_gaps: tuple[float, ...]
    n: int
    confidence: float
    ci_method: str = "bootstrap"

    @property
    def sum_single_gaps(self) -> float:
        """Sum of the single-axis gaps (the additive prediction of ``combined_gap``)."""
        return float(sum(self.single_gaps))


def bootstrap_mean_interval(
    values: ArrayLike, *, n_boot: int = DEFAULT_N_BOOT, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-episode values.

    Efron, B. & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*,
    ch. 13 (percentile interval). Episodes are resampled with replacement; for a
    paired design the caller passes per-episode *differences*, so every
    resample keeps each episode's conditions together.

    When all values are equal (e.g. no discordant pairs) every resample has the
    same mean and the interval has zero width; the discordant counts in
    :class:`PairedGap` show when that is the case.

    Args:
        values: (n,) float per-episode values.
        n_boot: Number of bootstrap resamples, > 0.
        confidence: Two-sided confidence level, in (0, 1).
        seed: Seed of the resampling generator; equal inputs and seed give equal bounds.

    Returns:
        ``(low, high)``; ``(nan, nan)`` when n is 0.

    Raises:
        InvalidSpecError: On a bad ``n_boot``/``confidence`` or non-1-D values.
    """
    _check_confidence(confidence)
    if n_boot <= 0:
        raise InvalidSpecError(MUST_BE_POSITIVE.format(field="n_boot", value=n_boot))
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise InvalidSpecError(f"values must be 1-D (one value per episode), got shape {v.shape}")
    n = v.shape[0]
    if n == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot, dtype=np.float64)
    for start in range(0, n_boot, _CHUNK):
        stop = min(start + _CHUNK, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = v[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


MIN_NONZERO_FOR_BOOTSTRAP = 10
"""Below this many non-zero per-episode differences the percentile bootstrap
is degenerate (with none, every resample has mean 0 and the interval has zero
width), so :func:`bounded_mean_interval` uses :func:`augmented_wald_interval`."""

METHOD_BOOTSTRAP = "bootstrap"
METHOD_AUGMENTED = "augmented-wald"


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
    v = one_d_values(values)
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
    v = one_d_values(values)
    if v.shape[0] == 0:
        return math.nan, math.nan, METHOD_AUGMENTED
    if np.count_nonzero(v) < MIN_NONZERO_FOR_BOOTSTRAP or np.ptp(v) == 0:
        low, high = augmented_wald_interval(v, bound, confidence)
        return low, high, METHOD_AUGMENTED
    low, high = bootstrap_mean_interval(v, n_boot=n_boot, confidence=confidence, seed=seed)
    return low, high, METHOD_BOOTSTRAP


def one_d_values(values: ArrayLike) -> np.ndarray:
    """``values`` as a (n,) float64 array.

    Raises:
        InvalidSpecError: If the values are not 1-D.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise InvalidSpecError(f"values must be 1-D (one value per episode), got shape {v.shape}")
    return v


MIN_DISCORDANT_FOR_BOOTSTRAP = 10
"""Below this many discordant pairs the percentile bootstrap of a paired
difference undercovers (with none it collapses to a zero-width interval), so
:func:`paired_gap` uses the Agresti-Min adjusted Wald interval instead."""


def agresti_min_interval(
    n10: int, n01: int, n: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Adjusted Wald interval of a paired difference of proportions (Agresti & Min 2005).

    Adds 0.5 to each cell of the 2x2 paired table, which keeps a positive width
    when no discordant pair was seen; recommended among closed-form intervals
    by Fagerland, Lydersen & Laake (2014, Stat. Methods Med. Res. 23(3)).

    Args:
        n10: Pairs with nominal success and perturbed failure.
        n01: Pairs with nominal failure and perturbed success.
        n: Number of pairs (> 0).
        confidence: Two-sided level in (0, 1).

    Returns:
        ``(low, high)`` of ``p(nominal) - p(perturbed)``, clipped to [-1, 1].
    """
    _check_confidence(confidence)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    m = n + 2.0
    p10, p01 = (n10 + 0.5) / m, (n01 + 0.5) / m
    d = p10 - p01
    se = math.sqrt(max(p10 + p01 - d * d, 0.0) / m)
    return max(-1.0, d - z * se), min(1.0, d + z * se)


def paired_gap(
    nominal: ArrayLike,
    perturbed: ArrayLike,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedGap:
    """Paired gap ``mean(nominal) - mean(perturbed)`` with a bootstrap interval.

    Entry ``i`` of both arrays must be the same episode index (same initial
    state, common random numbers); the caller aligns them by ``episode_index``.
    The interval is the percentile bootstrap of the mean per-episode difference
    (Efron & Tibshirani 1993, ch. 13), resampling episodes, not outcomes, so the
    pairing is kept. With fewer than :data:`MIN_DISCORDANT_FOR_BOOTSTRAP`
    discordant pairs, or when every pair is discordant the same way, the
    bootstrap is degenerate (every resample has the same few differences, or
    the same mean), so the Agresti-Min interval is used and ``ci_method``
    says so. The discordant counts ``n10``/``n01`` are the sufficient
    statistics of McNemar's (1947) test of equal rates.

    Args:
        nominal: (n,) bool success of each episode under the nominal condition.
        perturbed: (n,) bool success of the same episodes under the perturbation.
        n_boot: Bootstrap resamples, > 0.
        confidence: Two-sided confidence level, in (0, 1).
        seed: Resampling seed; the result is a deterministic function of the inputs and seed.

    Returns:
        The :class:`PairedGap`; gap and bounds are NaN when n is 0.

    Raises:
        InvalidSpecError: If the arrays are not 1-D of equal length, or on a
            bad ``n_boot``/``confidence``.
    """
    nom, per = _as_outcomes("nominal and perturbed", nominal, perturbed)
    n = nom.shape[0]
    n10 = int(np.count_nonzero(nom & ~per))
    n01 = int(np.count_nonzero(~nom & per))
    if n == 0:
        _check_confidence(confidence)
        nan = math.nan
        return PairedGap(nan, nan, nan, 0, 0, 0, nan, nan, nan, confidence)
    diff = nom.astype(np.float64) - per.astype(np.float64)
    method = "bootstrap"
    if n10 + n01 < MIN_DISCORDANT_FOR_BOOTSTRAP or max(n10, n01) == n:  # few, or all alike
        method = "agresti-min"
        low, high = agresti_min_interval(n10, n01, n, confidence)
    else:
        low, high = bootstrap_mean_interval(
            diff, n_boot=n_boot, confidence=confidence, seed=seed
        )
    gap = (n10 - n01) / n
    nominal_rate = float(nom.mean())
    rel = gap / nominal_rate if nominal_rate > 0 else math.nan
    return PairedGap(
        gap=gap,
        ci_low=low,
        ci_high=high,
        n=n,
        n10=n10,
        n01=n01,
        nominal_rate=nominal_rate,
        perturbed_rate=float(per.mean()),
        relative_drop=rel,
        confidence=confidence,
        ci_method=method,
    )


def interaction(
    nominal: ArrayLike,
    singles: Sequence[ArrayLike],
    combined: ArrayLike,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interaction:
    """Interaction of axes: combined gap minus the sum of the single-axis gaps.

    With per-episode outcomes ``y0`` (nominal), ``y_j`` (axis j alone) and
    ``y_c`` (all axes together) on the same episode index, the interaction is
    the mean of ``(y0 - y_c) - sum_j (y0 - y_j)``; its percentile bootstrap
    interval resamples whole episodes, so the combined and single gaps of one
    resample use the same episode indices (Efron & Tibshirani 1993, ch. 13).
    This is the additive-model interaction contrast of a factorial design.
    With fewer than 10 episodes whose interaction term is non-zero the
    bootstrap is degenerate (zero width when all terms are 0), so the
    add-pseudo-episode Wald interval of
    :func:`robogen.stats.paired.bounded_mean_interval` is used instead; it
    always has positive width.

    Args:
        nominal: (n,) bool nominal success per episode.
        singles: One (n,) bool array per axis: success with that axis alone, at
            the level it has in the combined condition.
        combined: (n,) bool success with all axes applied together.
        n_boot: Bootstrap resamples, > 0.
        confidence: Two-sided confidence level, in (0, 1).
        seed: Resampling seed.

    Returns:
        The :class:`Interaction`; NaN estimate and bounds when n is 0.

    Raises:
        InvalidSpecError: If ``singles`` is empty, arrays differ in length or
            are not 1-D, or on a bad ``n_boot``/``confidence``.
    """
    if len(singles) == 0:
        raise InvalidSpecError("interaction needs at least one single-axis outcome array, got none")
    arrays = _as_outcomes("nominal, singles and combined", nominal, *singles, combined)
    nom = arrays[0].astype(np.float64)
    comb = arrays[-1].astype(np.float64)
    single_arrays = [a.astype(np.float64) for a in arrays[1:-1]]
    n = nom.shape[0]
    if n == 0:
        _check_confidence(confidence)
        nan = math.nan
        return Interaction(nan, nan, nan, nan, tuple(nan for _ in singles), 0, confidence)
    combined_diff = nom - comb
    single_diffs = [nom - s for s in single_arrays]
    per_episode = combined_diff - np.sum(single_diffs, axis=0)
    # each term is (1 - k) y0 - y_c + sum_j y_j, so |term| <= k for k single axes
    low, high, method = bounded_mean_interval(
        per_episode, float(len(singles)), n_boot=n_boot, confidence=confidence, seed=seed
    )
    return Interaction(
        interaction=float(per_episode.mean()),
        ci_low=low,
        ci_high=high,
        combined_gap=float(combined_diff.mean()),
        single_gaps=tuple(float(d.mean()) for d in single_diffs),
        n=n,
        confidence=confidence,
        ci_method=method,
    )


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise InvalidSpecError(
            MUST_BE_IN_RANGE.format(
                field="confidence", low="0 (exclusive)", high="1 (exclusive)", value=confidence
            )
        )


def _as_outcomes(what: str, *arrays: ArrayLike) -> list[NDArray[np.bool_]]:
    out = [np.asarray(a) for a in arrays]
    shapes = [a.shape for a in out]
    if any(a.ndim != 1 for a in out) or len({s[0] for s in shapes}) > 1:
        raise InvalidSpecError(SHAPE_MISMATCH.format(what=what, shapes=shapes))
    for a in out:
        if a.dtype != np.bool_ and a.size and not np.isin(a, (0, 1)).all():
            raise InvalidSpecError(
                f"{what} must hold success flags (bool or 0/1), got values {np.unique(a)[:5]!r}"
            )
    return [a.astype(np.bool_) for a in out]
