"""One-sided non-inferiority tests of a candidate's success rate against a baseline's.

Hypotheses, with ``delta = p_candidate - p_baseline`` and a margin ``m``::

    H0: delta <= -m     (the candidate is worse than the baseline by at least m)
    H1: delta >  -m     (non-inferior: at most m worse)

``m`` may be negative (a superiority test); :mod:`robogen.check.gate` tests
the opposite direction (a *regression*: ``delta < -m``) with the same
functions by swapping the roles of candidate and baseline and negating ``m``.

Two designs, both with *exact unconditional* p-values: the sup over the
nuisance parameter, on the boundary ``delta = -m`` of H0, of the probability
of a test statistic at least as extreme as the observed one (Barnard's
approach; the boundary carries the supremum for these monotone statistics,
Röhmel & Mansmann 1999, Biometrical Journal 41(2):149-170). The size is then
at most alpha for every n, unlike the asymptotic normal tests whose ordering
statistic they use:

* **paired** (same episode indices, hence same initial states, in both runs):
  the discordant pairs carry the information; ordering statistic is Tango's
  (1998) restricted-MLE score statistic for the difference of paired
  proportions (Tango, T. "Equivalence test and confidence interval for the
  difference in proportions for the paired-sample design", Statistics in
  Medicine 17:891-908), and the exact unconditional p-value follows Hsueh,
  Liu & Chen (2001), "Unconditional exact tests for equivalence or
  noninferiority for paired binary endpoints", Biometrics 57(2):478-483 (see
  also Liu, Hsueh, Hsieh & Chen 2002, Statistics in Medicine 21:231-245).
  For a margin on the *difference*, the conditional (McNemar) binomial law of
  the discordant pairs still depends on the discordance rate, so the exact
  test here is unconditional on it.
* **unpaired** (independent episodes): Farrington & Manning's (1990) score
  statistic ("Test statistics and sample size formulae for comparative binomial
  trials with null hypothesis of non-zero risk difference or non-unity relative
  risk", Statistics in Medicine 9:1447-1454; restricted MLE of Miettinen &
  Nurminen 1985) with the exact unconditional p-value of Chan (1998), "Exact
  tests of equivalence and efficacy with a non-zero lower bound for comparative
  studies", Statistics in Medicine 17:1403-1413.

Intervals shown next to the tests: Tango's score interval (paired) and
Newcombe's (1998) hybrid score interval (unpaired; "Interval estimation for
the difference between independent proportions: comparison of eleven
methods", Statistics in Medicine 17:873-890, method 10). Verdicts are taken
from the exact p-values, never from the intervals.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

from robogen.errors import MUST_BE_IN_RANGE, InvalidSpecError
from robogen.stats.intervals import wilson_interval

NUISANCE_GRID = 200
"""Grid points over the nuisance parameter before a bounded local refinement."""

_TIE = 1e-9  # statistics within this of the observed one count as "as extreme"

BAD_COUNTS = (
    "{what}: counts must be integers with {rule}, got {got}; pass success counts "
    "and episode numbers of one condition"
)


@dataclass(frozen=True, slots=True)
class TestResult:
    """A one-sided non-inferiority test of ``delta = p_candidate - p_baseline > -margin``.

    Attributes:
        statistic: Observed score statistic (Tango or Farrington-Manning) [-].
        p_value: Exact unconditional p-value, in [0, 1].
        margin: The margin m tested [-].
        method: ``paired-exact-tango`` or ``unpaired-exact-fm``.
    """

    statistic: float
    p_value: float
    margin: float
    method: str


# --------------------------------------------------------------------------------------------
# score statistics (vectorized over numpy arrays)

Counts = NDArray[np.floating[Any]] | NDArray[np.integer[Any]] | float
"""Outcome counts: a scalar, or an array of int or float counts (converted to float64)."""


def tango_statistic(
    b: Counts, c: Counts, n: int, margin: float
) -> NDArray[np.float64]:
    """Tango's (1998) score statistic for ``H0: p_C - p_B = -margin`` on paired outcomes.

    Args:
        b: Discordant pairs where the candidate succeeded and the baseline failed.
        c: Discordant pairs where the baseline succeeded and the candidate failed.
        n: Number of pairs.
        margin: The margin m; the null difference is ``-m``, in (-1, 1).

    Returns:
        ``Z = (b - c + n m) / sqrt(n (2 q~ - m (1 + m)))`` where ``q~`` is the
        restricted MLE of the probability of ``c``-type pairs under the null;
        large values favour the candidate. 0 when both numerator and variance
        vanish, +-inf when only the variance does.
    """
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    d0 = -float(margin)
    qa = 2.0 * n
    qb = -b - c + (2.0 * n - b + c) * d0
    qc = -c * d0 * (1.0 - d0)
    disc = np.maximum(qb * qb - 4.0 * qa * qc, 0.0)
    q21 = np.maximum((np.sqrt(disc) - qb) / (2.0 * qa), 0.0)
    var = n * (2.0 * q21 + d0 * (1.0 - d0))
    num = b - c - n * d0
    return _ratio(num, var)


def fm_statistic(
    x_c: Counts,
    n_c: int,
    x_b: Counts,
    n_b: int,
    margin: float,
) -> NDArray[np.float64]:
    """Farrington & Manning's (1990) score statistic for ``H0: p_C - p_B = -margin``.

    The restricted MLE under the null is the closed-form root of the cubic of
    Miettinen & Nurminen (1985), as given by Farrington & Manning (1990).

    Args:
        x_c: Candidate successes (array or scalar).
        n_c: Candidate episodes, > 0.
        x_b: Baseline successes.
        n_b: Baseline episodes, > 0.
        margin: The margin m, in (-1, 1).

    Returns:
        ``Z = (p^_C - p^_B + m) / sqrt(p~_C (1 - p~_C)/n_C + p~_B (1 - p~_B)/n_B)``;
        large values favour the candidate.
    """
    p1 = np.asarray(x_c, dtype=np.float64) / n_c
    p2 = np.asarray(x_b, dtype=np.float64) / n_b
    s = -float(margin)
    p1t, p2t = _fm_rmle(p1, p2, n_c, n_b, s)
    var = p1t * (1.0 - p1t) / n_c + p2t * (1.0 - p2t) / n_b
    return _ratio(p1 - p2 - s, var)


def _fm_rmle(
    p1: NDArray[np.float64], p2: NDArray[np.float64], n1: int, n2: int, s: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Restricted MLE ``(p1~, p2~)`` under ``p1 - p2 = s`` (Farrington & Manning 1990, eq. 3)."""
    theta = n2 / n1
    a = 1.0 + theta
    b = -(1.0 + theta + p1 + theta * p2 + s * (theta + 2.0))
    c = s * s + s * (2.0 * p1 + theta + 1.0) + p1 + theta * p2
    d = -p1 * s * (1.0 + s)
    v = b**3 / (27.0 * a**3) - b * c / (6.0 * a * a) + d / (2.0 * a)
    u = np.sign(v) * np.sqrt(np.maximum(b * b / (9.0 * a * a) - c / (3.0 * a), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        cosarg = np.where(u == 0.0, 0.0, v / np.where(u == 0.0, 1.0, u**3))
    w = (math.pi + np.arccos(np.clip(cosarg, -1.0, 1.0))) / 3.0
    p1t = np.clip(2.0 * u * np.cos(w) - b / (3.0 * a), max(0.0, s), min(1.0, 1.0 + s))
    return p1t, p1t - s


def _ratio(num: NDArray[np.float64], var: NDArray[np.float64]) -> NDArray[np.float64]:
    num = np.asarray(num, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    tiny = var <= 1e-15
    with np.errstate(divide="ignore", invalid="ignore"):
        z = num / np.sqrt(np.where(tiny, 1.0, var))
    edge = np.where(np.abs(num) <= 1e-12, 0.0, np.copysign(np.inf, num))
    return np.where(tiny, edge, z)


# --------------------------------------------------------------------------------------------
# exact unconditional p-values


def _thresholds(stat, rows: NDArray[np.int64], top: NDArray[np.int64], z_obs: float
                ) -> NDArray[np.int64]:
    """Per row r, the smallest k in [0, top[r]] with ``stat(k, r) >= z_obs`` (top[r]+1 if none).

    Relies on ``stat`` being non-decreasing in k within a row (true for both
    score statistics; checked on grids in tests/check/test_noninferiority.py).
    """
    lo = np.zeros_like(top)
    hi = top + 1  # invariant: answer in [lo, hi]
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        active = lo < hi
        ok = np.zeros_like(active)
        ok[active] = stat(mid[active], rows[active]) >= z_obs - _TIE
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid + 1, lo)
    return lo


def _sup_over_nuisance(prob, t_lo: float, t_hi: float) -> float:
    """``sup_t prob(t)`` on [t_lo, t_hi]: a grid, then a bounded refinement near its best point."""
    if t_hi - t_lo < 1e-12:
        return float(prob(np.array([t_lo]))[0])
    grid = np.linspace(t_lo, t_hi, NUISANCE_GRID + 1)
    vals = prob(grid)
    k = int(np.argmax(vals))
    best = float(vals[k])
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(
        lambda t: -float(prob(np.array([t]))[0]), bounds=(a, b), method="bounded",
        options={"xatol": 1e-7},
    )
    return float(min(1.0, max(best, -cast(Any, res).fun)))  # scipy's stub: object


@functools.lru_cache(maxsize=65536)
def paired_noninferiority(b: int, c: int, n: int, margin: float) -> TestResult:
    """Exact unconditional non-inferiority test on paired outcomes (Hsueh, Liu & Chen 2001).

    Tests ``H0: p_C - p_B <= -margin`` against ``H1: p_C - p_B > -margin``
    where the n pairs are independent and each pair shares an episode's initial
    state. The p-value is ``sup P(Z >= z_obs)`` over the discordance rate on
    the boundary ``p_C - p_B = -margin``, with ``Z`` Tango's score statistic
    and the pairs' (b, c, rest) multinomial law.

    Args:
        b: Pairs where the candidate succeeded and the baseline failed.
        c: Pairs where the baseline succeeded and the candidate failed.
        n: Number of pairs, >= b + c.
        margin: Margin m in (-1, 1) (negative: superiority by |m|).

    Returns:
        The :class:`TestResult`; ``p_value == 1`` when ``n == 0``. Results are
        cached by arguments (pass plain ints and floats).

    Raises:
        InvalidSpecError: On negative counts, ``b + c > n`` or a margin outside (-1, 1).
    """
    _check_counts("paired test", b >= 0 and c >= 0 and b + c <= n, "0 <= b, c and b + c <= n",
                  f"b={b}, c={c}, n={n}")
    _check_margin(margin)
    if n == 0:
        return TestResult(0.0, 1.0, margin, "paired-exact-tango")
    z_obs = float(tango_statistic(b, c, n, margin))
    m_all = np.arange(n + 1)

    def stat(k: NDArray[np.int64], m: NDArray[np.int64]) -> NDArray[np.float64]:
        return tango_statistic(k, m - k, n, margin)

    kstar = _thresholds(stat, m_all, m_all, z_obs)
    d0 = -margin
    # boundary: q21 = t, q12 = t + d0; psi = q12 + q21, theta = q12 / psi
    t_lo, t_hi = max(0.0, -d0), (1.0 - d0) / 2.0

    def prob(t: NDArray[np.float64]) -> NDArray[np.float64]:
        t = t[:, None]
        psi = np.clip(2.0 * t + d0, 0.0, 1.0)
        theta = np.where(psi > 0, np.clip((t + d0) / np.where(psi > 0, psi, 1.0), 0.0, 1.0), 0.5)
        w = stats.binom.pmf(m_all[None, :], n, psi)
        tail = stats.binom.sf(kstar[None, :] - 1, m_all[None, :], theta)
        return np.sum(w * tail, axis=1)

    return TestResult(z_obs, _sup_over_nuisance(prob, t_lo, t_hi), margin, "paired-exact-tango")


@functools.lru_cache(maxsize=65536)
def unpaired_noninferiority(x_c: int, n_c: int, x_b: int, n_b: int, margin: float) -> TestResult:
    """Exact unconditional non-inferiority test on independent outcomes (Chan 1998).

    Tests ``H0: p_C - p_B <= -margin``; the p-value is ``sup P(Z >= z_obs)``
    over the baseline rate on the boundary ``p_C = p_B - margin``, with ``Z``
    the Farrington-Manning statistic and two independent binomial laws.

    Args:
        x_c: Candidate successes, in [0, n_c].
        n_c: Candidate episodes.
        x_b: Baseline successes, in [0, n_b].
        n_b: Baseline episodes.
        margin: Margin m in (-1, 1).

    Returns:
        The :class:`TestResult`; ``p_value == 1`` when either n is 0.

    Raises:
        InvalidSpecError: On counts outside their ranges or a margin outside (-1, 1).
    """
    _check_counts("unpaired test", 0 <= x_c <= n_c and 0 <= x_b <= n_b,
                  "0 <= successes <= episodes", f"x_c={x_c}, n_c={n_c}, x_b={x_b}, n_b={n_b}")
    _check_margin(margin)
    if n_c == 0 or n_b == 0:
        return TestResult(0.0, 1.0, margin, "unpaired-exact-fm")
    z_obs = float(fm_statistic(x_c, n_c, x_b, n_b, margin))
    xb_all = np.arange(n_b + 1)

    def stat(k: NDArray[np.int64], xb: NDArray[np.int64]) -> NDArray[np.float64]:
        return fm_statistic(k, n_c, xb, n_b, margin)

    kstar = _thresholds(stat, xb_all, np.full(n_b + 1, n_c), z_obs)
    s = -margin  # boundary p_C = p_B + s
    t_lo, t_hi = max(0.0, -s), min(1.0, 1.0 - s)

    def prob(t: NDArray[np.float64]) -> NDArray[np.float64]:
        t = t[:, None]
        w = stats.binom.pmf(xb_all[None, :], n_b, t)
        tail = stats.binom.sf(kstar[None, :] - 1, n_c, np.clip(t + s, 0.0, 1.0))
        return np.sum(w * tail, axis=1)

    return TestResult(z_obs, _sup_over_nuisance(prob, t_lo, t_hi), margin, "unpaired-exact-fm")


# --------------------------------------------------------------------------------------------
# intervals of the difference p_C - p_B


def tango_interval(b: int, c: int, n: int, confidence: float = 0.90) -> tuple[float, float]:
    """Tango's (1998) score interval of ``p_C - p_B`` from paired counts.

    Inverts the two one-sided score tests: the bounds are the nulls ``d0``
    where Tango's statistic equals ``+-z`` with ``z = Phi^-1((1 + confidence)/2)``.

    Args:
        b: Pairs where only the candidate succeeded.
        c: Pairs where only the baseline succeeded.
        n: Number of pairs.
        confidence: Two-sided level in (0, 1); 0.90 gives one-sided 95% bounds.

    Returns:
        ``(low, high)`` within [-1, 1]; ``(-1, 1)`` when n is 0.
    """
    _check_counts("paired interval", b >= 0 and c >= 0 and b + c <= n,
                  "0 <= b, c and b + c <= n", f"b={b}, c={c}, n={n}")
    _check_confidence(confidence)
    if n == 0:
        return -1.0, 1.0
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    est = (b - c) / n

    def f(d0: float, target: float) -> float:  # Tango's Z at null difference d0, minus target
        return float(tango_statistic(b, c, n, -d0)) - target

    eps = 1e-9
    # brentq returns the root alone (full_output=False); its stub also allows (root, info)
    low = -1.0 if f(-1.0 + eps, z) <= 0 else cast(
        float, optimize.brentq(f, -1.0 + eps, est, args=(z,)))
    high = 1.0 if f(1.0 - eps, -z) >= 0 else cast(
        float, optimize.brentq(f, est, 1.0 - eps, args=(-z,)))
    return float(low), float(high)


def newcombe_interval(
    x_c: int, n_c: int, x_b: int, n_b: int, confidence: float = 0.90
) -> tuple[float, float]:
    """Newcombe's (1998, method 10) hybrid score interval of ``p_C - p_B`` (independent samples).

    Combines the Wilson intervals of both rates
    (:func:`robogen.stats.intervals.wilson_interval`).

    Args:
        x_c: Candidate successes.
        n_c: Candidate episodes.
        x_b: Baseline successes.
        n_b: Baseline episodes.
        confidence: Two-sided level in (0, 1).

    Returns:
        ``(low, high)`` within [-1, 1]; ``(-1, 1)`` when either n is 0.
    """
    _check_confidence(confidence)
    if n_c == 0 or n_b == 0:
        return -1.0, 1.0
    p1, p2 = x_c / n_c, x_b / n_b
    l1, u1 = wilson_interval(x_c, n_c, confidence)
    l2, u2 = wilson_interval(x_b, n_b, confidence)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


# --------------------------------------------------------------------------------------------
# multiplicity


def holm_adjust(p_values: NDArray[np.float64] | list[float]) -> NDArray[np.float64]:
    """Holm's (1979) step-down adjusted p-values.

    Holm, S. "A simple sequentially rejective multiple test procedure",
    Scandinavian Journal of Statistics 6:65-70. Rejecting every hypothesis
    whose adjusted p-value is <= alpha controls the family-wise error rate at
    alpha under any dependence between the tests.

    Args:
        p_values: (K,) float raw p-values.

    Returns:
        (K,) float adjusted p-values in the input order, each in [0, 1].
    """
    p = np.asarray(p_values, dtype=np.float64)
    k = p.size
    if k == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = (k - np.arange(k)) * p[order]
    adj_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    out = np.empty(k)
    out[order] = adj_sorted
    return out


def _check_counts(what: str, ok: bool, rule: str, got: str) -> None:
    if not ok:
        raise InvalidSpecError(BAD_COUNTS.format(what=what, rule=rule, got=got))


def _check_margin(margin: float) -> None:
    if not (math.isfinite(margin) and -1.0 < margin < 1.0):
        raise InvalidSpecError(
            MUST_BE_IN_RANGE.format(field="margin", low="-1 (exclusive)", high="1 (exclusive)",
                                    value=margin)
        )


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise InvalidSpecError(
            MUST_BE_IN_RANGE.format(field="confidence", low="0 (exclusive)",
                                    high="1 (exclusive)", value=confidence)
        )
