"""The exact tests, score statistics, intervals and Holm's procedure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from robogen.check.noninferiority import (
    _fm_rmle,
    fm_statistic,
    holm_adjust,
    newcombe_interval,
    paired_noninferiority,
    tango_interval,
    tango_statistic,
    unpaired_noninferiority,
)
from robogen.errors import InvalidSpecError


def _multinomial_logpmf(n: int, b: np.ndarray, c: np.ndarray, q12: float, q21: float
                        ) -> np.ndarray:
    r = n - b - c
    out = stats.multinomial.logpmf(np.stack([b, c, r], axis=1), n, [q12, q21, 1 - q12 - q21])
    return out


def _exact_size_paired(n: int, margin: float, alpha: float) -> float:
    """Largest probability of the exact rejection region on the null boundary."""
    pairs = [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]
    region = np.array([(b, c) for b, c in pairs
                       if paired_noninferiority(b, c, n, margin).p_value <= alpha])
    d0 = -margin
    best = 0.0
    for t in np.linspace(max(0.0, -d0) + 1e-9, (1 - d0) / 2 - 1e-9, 300):
        best = max(best, float(np.exp(_multinomial_logpmf(n, region[:, 0], region[:, 1],
                                                          t + d0, t)).sum()))
    return best


def _exact_size_unpaired(n_c: int, n_b: int, margin: float, alpha: float) -> float:
    grid = [(x, y) for x in range(n_c + 1) for y in range(n_b + 1)]
    region = np.array([(x, y) for x, y in grid
                       if unpaired_noninferiority(x, n_c, y, n_b, margin).p_value <= alpha])
    ts = np.linspace(margin, 1.0, 300)[:, None]
    probs = stats.binom.pmf(region[None, :, 0], n_c, ts - margin) * stats.binom.pmf(
        region[None, :, 1], n_b, ts)
    return float(probs.sum(axis=1).max())


@pytest.mark.parametrize(("n", "margin"), [(20, 0.05), (20, 0.1), (24, 0.0)])
def test_paired_exact_test_size_is_at_most_alpha_and_not_wasteful(n: int, margin: float) -> None:
    size = _exact_size_paired(n, margin, 0.05)
    assert size <= 0.05 + 1e-9
    assert size >= 0.03  # an exact test that is not needlessly conservative


def test_unpaired_exact_test_size_is_at_most_alpha() -> None:
    size = _exact_size_unpaired(20, 20, 0.1, 0.05)
    assert 0.03 <= size <= 0.05 + 1e-9


def test_tango_rmle_maximizes_the_constrained_likelihood() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 50))
        b = int(rng.integers(0, n + 1))
        c = int(rng.integers(0, n - b + 1))
        d0 = float(rng.uniform(-0.8, 0.8))
        lo, hi = max(0.0, -d0) + 1e-12, (1 - d0) / 2 - 1e-12

        def nll(x: float, b: int = b, c: int = c, n: int = n, d0: float = d0) -> float:
            terms = [(b, x + d0), (c, x), (n - b - c, 1 - 2 * x - d0)]
            return -sum(k * math.log(max(p, 1e-300)) for k, p in terms if k)

        best = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded",
                                        options={"xatol": 1e-12})
        qa, qb, qc = 2 * n, -b - c + (2 * n - b + c) * d0, -c * d0 * (1 - d0)
        x = (math.sqrt(max(qb * qb - 4 * qa * qc, 0)) - qb) / (2 * qa)
        assert nll(min(max(x, lo), hi)) <= best.fun + 1e-6


def test_fm_rmle_maximizes_the_constrained_likelihood() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        n1, n2 = (int(v) for v in rng.integers(1, 60, 2))
        x1, x2 = int(rng.integers(0, n1 + 1)), int(rng.integers(0, n2 + 1))
        s = float(rng.uniform(-0.8, 0.8))

        def nll(q: float, x1: int = x1, x2: int = x2, n1: int = n1, n2: int = n2,
                s: float = s) -> float:
            terms = [(x1, q), (n1 - x1, 1 - q), (x2, q - s), (n2 - x2, 1 - q + s)]
            return -sum(k * math.log(max(p, 1e-300)) for k, p in terms if k)

        best = optimize.minimize_scalar(nll, bounds=(max(0, s) + 1e-12, min(1, 1 + s) - 1e-12),
                                        method="bounded", options={"xatol": 1e-12})
        p1t, p2t = _fm_rmle(np.array(x1 / n1), np.array(x2 / n2), n1, n2, s)
        assert abs(float(p1t) - float(p2t) - s) < 1e-12
        assert nll(float(p1t)) <= best.fun + 1e-6


@pytest.mark.parametrize("margin", [-0.05, 0.0, 0.05, 0.2])
def test_statistics_increase_with_candidate_successes(margin: float) -> None:
    """The exact p-values rely on this ordering (thresholds per row)."""
    for n in (7, 40, 150):
        for m in range(n + 1):
            k = np.arange(m + 1)
            assert np.all(np.diff(tango_statistic(k, m - k, n, margin)) >= -1e-9)
        for n_b in (n, n // 2 + 1):
            for x_b in range(n_b + 1):
                z = fm_statistic(np.arange(n + 1), n, x_b, n_b, margin)
                assert np.all(np.diff(z) >= -1e-9)


def test_exact_p_values_match_the_normal_approximation_for_large_n() -> None:
    z = float(tango_statistic(40, 60, 2000, 0.05))
    assert paired_noninferiority(40, 60, 2000, 0.05).p_value == pytest.approx(
        stats.norm.sf(z), abs=1e-3)
    z = float(fm_statistic(1500, 2000, 1560, 2000, 0.05))
    assert unpaired_noninferiority(1500, 2000, 1560, 2000, 0.05).p_value == pytest.approx(
        stats.norm.sf(z), abs=0.005)


def test_no_discordant_pairs_p_value_is_the_all_baseline_only_probability() -> None:
    """With b = c = 0 the supremum sits where every discordant pair favours the baseline."""
    for n, m in ((32, 0.1), (64, 0.05)):
        p = paired_noninferiority(0, 0, n, m).p_value
        assert p == pytest.approx((1 - m) ** n, rel=0.05)
    assert paired_noninferiority(0, 0, 48, 0.1).p_value < 0.05 / 3  # passes Holm over 3


def test_regression_direction_is_the_mirror_test() -> None:
    """p(non-inferior) + p(regression) >= 1: both verdicts can never hold together."""
    for b, c in ((0, 0), (3, 9), (10, 2)):
        ni = paired_noninferiority(b, c, 60, 0.05).p_value
        reg = paired_noninferiority(c, b, 60, -0.05).p_value
        assert ni + reg >= 1 - 1e-9
    # baseline-only 20, candidate-only 0: the regression test (roles swapped) rejects
    assert paired_noninferiority(20, 0, 60, -0.05).p_value < 1e-3


def test_newcombe_interval_reproduces_newcombe_1998_example() -> None:
    """Newcombe (1998), Table II, 56/70 vs 48/80: method 10 gives 0.0524 to 0.3339."""
    low, high = newcombe_interval(56, 70, 48, 80, confidence=0.95)
    assert low == pytest.approx(0.0524, abs=1e-4)
    assert high == pytest.approx(0.3339, abs=1e-4)


def test_tango_interval_inverts_the_score_test() -> None:
    low, high = tango_interval(3, 9, 80, confidence=0.90)
    z = stats.norm.ppf(0.95)
    assert float(tango_statistic(3, 9, 80, -low)) == pytest.approx(z, abs=1e-6)
    assert float(tango_statistic(3, 9, 80, -high)) == pytest.approx(-z, abs=1e-6)
    assert low < (3 - 9) / 80 < high
    assert tango_interval(0, 0, 0) == (-1.0, 1.0)


def test_holm_adjustment() -> None:
    adj = holm_adjust([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adj, [0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([]).size == 0


def test_bad_counts_and_margins_raise() -> None:
    with pytest.raises(InvalidSpecError, match="b \\+ c <= n"):
        paired_noninferiority(5, 6, 10, 0.05)
    with pytest.raises(InvalidSpecError, match="margin must be in"):
        unpaired_noninferiority(1, 2, 1, 2, 1.5)
    assert paired_noninferiority(0, 0, 0, 0.05).p_value == 1.0
