"""Paired estimators: never-zero-width intervals, sign-flip and McNemar tests, Holm."""

from __future__ import annotations

import numpy as np
import pytest

from robogen.stats.intervals import agresti_min_interval
from robogen.stats.paired import (
    augmented_wald_interval,
    bounded_mean_interval,
    holm_adjust,
    mcnemar_exact_pvalue,
    sign_flip_pvalue,
)


@pytest.mark.parametrize(("n10", "n01", "n"), [(0, 0, 30), (3, 1, 30), (7, 0, 12)])
def test_augmented_wald_is_agresti_min_for_binary_differences(n10, n01, n) -> None:
    diff = np.zeros(n)
    diff[:n10] = 1.0
    diff[n10:n10 + n01] = -1.0
    assert augmented_wald_interval(diff, 1.0) == pytest.approx(agresti_min_interval(n10, n01, n))


def test_all_zero_differences_give_an_interval_with_width_around_zero() -> None:
    low, high, method = bounded_mean_interval(np.zeros(30), 2.0)
    assert method == "augmented-wald"
    assert low < 0.0 < high and high == pytest.approx(-low)
    # 1.96 * sd / sqrt(32) with sd^2 = 4 / 32
    assert high == pytest.approx(1.959964 * 2.0 / 32)


def test_many_nonzero_differences_use_the_bootstrap() -> None:
    v = np.r_[np.ones(15), -np.ones(5), np.zeros(20)]
    low, high, method = bounded_mean_interval(v, 1.0, n_boot=2000, seed=1)
    assert method == "bootstrap" and low < 0.25 < high


def test_sign_flip_is_exact_mcnemar_for_binary_differences() -> None:
    v = np.r_[np.ones(8), -np.ones(2), np.zeros(10)]
    assert sign_flip_pvalue(v) == pytest.approx(mcnemar_exact_pvalue(8, 2))
    # exact binomial: 2 * P(X <= 2 | n=10, p=1/2) = 2 * 56 / 1024
    assert mcnemar_exact_pvalue(8, 2) == pytest.approx(112 / 1024)
    assert sign_flip_pvalue(np.zeros(5)) == 1.0 and mcnemar_exact_pvalue(0, 0) == 1.0
    # one discordant pair (an 8-episode compare): both sign patterns are as extreme
    one = np.r_[np.zeros(7), -1.0]
    assert sign_flip_pvalue(one) == 1.0 == pytest.approx(mcnemar_exact_pvalue(0, 1))


def test_holm_matches_a_hand_computation() -> None:
    # sorted 0.01, 0.02, 0.04, (nan) -> 3*0.01, max(.03, 2*.02), max(.04, 1*.04)
    assert holm_adjust([0.04, 0.01, float("nan"), 0.02]) == pytest.approx(
        (0.04, 0.03, float("nan"), 0.04), nan_ok=True
    )
    assert holm_adjust([0.9, 0.8]) == (1.0, 1.0)
