"""Tests of robogen.stats.intervals: Wilson interval, paired gap, interaction."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from robogen.errors import InvalidSpecError
from robogen.stats.intervals import (
    bootstrap_mean_interval,
    interaction,
    paired_gap,
    wilson_interval,
)


def test_wilson_pinned_values() -> None:
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.236593, abs=1e-4)
    assert high == pytest.approx(0.763407, abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert high == pytest.approx(0.277533, abs=1e-4)


@pytest.mark.parametrize("n", [1, 2, 7, 50, 1000])
def test_wilson_exact_at_edges(n: int) -> None:
    assert wilson_interval(0, n)[0] == 0.0
    assert wilson_interval(n, n)[1] == 1.0
    assert 0.0 < wilson_interval(0, n)[1] < 1.0
    assert 0.0 < wilson_interval(n, n)[0] < 1.0


@pytest.mark.parametrize(
    ("k", "n", "conf"), [(1, 3, 0.9), (7, 20, 0.95), (99, 100, 0.99), (40, 50, 0.8)]
)
def test_wilson_matches_scipy(k: int, n: int, conf: float) -> None:
    ref = binomtest(k, n).proportion_ci(confidence_level=conf, method="wilson")
    assert wilson_interval(k, n, conf) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_wilson_no_data_and_bad_input() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(InvalidSpecError, match="successes"):
        wilson_interval(11, 10)
    with pytest.raises(InvalidSpecError, match="confidence"):
        wilson_interval(1, 10, confidence=1.0)


NOM = np.array([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], dtype=bool)
PER = np.array([1, 1, 1, 0, 0, 0, 1, 1, 0, 1], dtype=bool)


def test_paired_gap_constructed_example() -> None:
    g = paired_gap(NOM, PER, n_boot=2000, seed=3)
    assert g.gap == 0.2  # (n10 - n01) / n = (3 - 1) / 10
    assert (g.n, g.n10, g.n01) == (10, 3, 1)
    assert g.nominal_rate == 0.8 and g.perturbed_rate == 0.6
    assert g.relative_drop == pytest.approx(0.25)
    assert g.ci_low < g.gap < g.ci_high
    # 4 discordant pairs (< 10): Agresti-Min adjusted Wald, 0.5 added to each cell:
    # d = (3.5 - 1.5) / 12, se = sqrt((5 / 12 - d**2) / 12) -> [-0.1862, 0.5195]
    assert g.ci_method == "agresti-min"
    assert g.ci_low == pytest.approx(-0.18620, abs=1e-4)
    assert g.ci_high == pytest.approx(0.51953, abs=1e-4)


def test_paired_gap_uses_bootstrap_with_enough_discordant_pairs() -> None:
    nom = np.tile(NOM, 4)
    per = np.tile(PER, 4)  # 12 / 4 discordant pairs
    g = paired_gap(nom, per, n_boot=4000, seed=3)
    assert g.ci_method == "bootstrap" and g.gap == pytest.approx(0.2)
    # normal approximation: 0.2 +- 1.96 * sqrt((0.4 - 0.2**2) / 40) = [0.014, 0.386]
    assert g.ci_low == pytest.approx(0.014, abs=0.05)
    assert g.ci_high == pytest.approx(0.386, abs=0.05)
    # bootstrap means of differences in {-1, 0, 1} over 40 episodes lie on the 1/40 grid
    for bound in (g.ci_low, g.ci_high):
        assert bound * 40 == pytest.approx(round(bound * 40))


def test_paired_gap_is_deterministic_given_seed() -> None:
    a = paired_gap(NOM, PER, n_boot=2000, seed=7)
    b = paired_gap(NOM.tolist(), PER.astype(int), n_boot=2000, seed=7)
    assert a == b
    rng = np.random.default_rng(0)
    x, y = rng.random(300) < 0.7, rng.random(300) < 0.5
    assert paired_gap(x, y, seed=1) == paired_gap(x, y, seed=1)
    assert paired_gap(x, y, seed=1).ci_low != paired_gap(x, y, seed=2).ci_low


def test_paired_interval_narrower_than_unpaired_on_correlated_outcomes() -> None:
    rng = np.random.default_rng(0)
    difficulty = rng.random(200)  # shared by both conditions: common random numbers
    nominal, perturbed = difficulty > 0.3, difficulty > 0.6
    g = paired_gap(nominal, perturbed, n_boot=4000, seed=0)
    n_boot = 4000
    i = rng.integers(0, 200, size=(n_boot, 200))
    j = rng.integers(0, 200, size=(n_boot, 200))
    unpaired = nominal[i].mean(axis=1) - perturbed[j].mean(axis=1)
    u_low, u_high = np.quantile(unpaired, [0.025, 0.975])
    assert g.ci_low < g.gap < g.ci_high
    assert g.ci_high - g.ci_low < 0.8 * (u_high - u_low)


def test_paired_gap_degenerate_and_empty() -> None:
    same = np.ones(12, dtype=bool)
    g = paired_gap(same, same)
    assert (g.gap, g.n10, g.n01) == (0.0, 0, 0)
    # no discordant pair: the bootstrap would collapse to [0, 0]; Agresti-Min keeps a width:
    # 0 +- 1.96 * sqrt((1 / 14) / 14) = +-0.140
    assert g.ci_method == "agresti-min"
    assert g.ci_low == pytest.approx(-0.13999, abs=1e-4) and g.ci_high == pytest.approx(
        0.13999, abs=1e-4
    )
    empty = paired_gap(np.zeros(0, bool), np.zeros(0, bool))
    assert empty.n == 0 and np.isnan(empty.gap) and np.isnan(empty.ci_low)
    zero_nominal = paired_gap(np.zeros(4, bool), np.array([0, 1, 0, 0], bool))
    assert zero_nominal.gap == -0.25 and np.isnan(zero_nominal.relative_drop)


def test_paired_gap_rejects_misaligned_input() -> None:
    with pytest.raises(InvalidSpecError, match="same length"):
        paired_gap(np.ones(5, bool), np.ones(4, bool))
    with pytest.raises(InvalidSpecError, match="success flags"):
        paired_gap(np.array([0.5, 1.0]), np.array([1, 0]))
    with pytest.raises(InvalidSpecError, match="n_boot"):
        bootstrap_mean_interval([1.0, 2.0], n_boot=0)


def test_interaction_additive_and_compounding() -> None:
    n = 40
    nominal = np.ones(n, dtype=bool)
    a = np.ones(n, dtype=bool)
    a[:10] = False  # axis A alone fails episodes 0-9
    b = np.ones(n, dtype=bool)
    b[10:15] = False  # axis B alone fails 10-14
    additive = a & b
    it = interaction(nominal, [a, b], additive, n_boot=1000)
    assert it.single_gaps == (0.25, 0.125)
    assert it.combined_gap == 0.375 and it.interaction == 0.0
    # every episode contributes exactly 0: the bootstrap would be [0, 0]; the add-pseudo-episode
    # Wald interval keeps width: 1.96 * sqrt(4 / 42) / sqrt(42) = 1.96 * 2 / 42 on each side
    assert it.ci_method == "augmented-wald"
    assert it.ci_low == pytest.approx(-1.959964 * 2 / 42) and it.ci_high == -it.ci_low
    compounding = additive.copy()
    compounding[20:30] = False  # fails 10 more episodes only when A and B act together
    it = interaction(nominal, [a, b], compounding, n_boot=2000, seed=4)
    assert it.interaction == pytest.approx(0.25)
    assert it.sum_single_gaps == pytest.approx(0.375)
    assert 0.0 < it.ci_low < 0.25 < it.ci_high and it.ci_method == "bootstrap"
    assert it == interaction(nominal, [a, b], compounding, n_boot=2000, seed=4)
    with pytest.raises(InvalidSpecError):
        interaction(nominal, [], compounding)
