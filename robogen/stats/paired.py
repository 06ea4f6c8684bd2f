"""Paired estimators shared by interactions, policy comparisons and breaking points.

* :func:`bounded_mean_interval`: interval of the mean of bounded per-episode
  values (differences of paired outcomes) that never collapses to zero width
  (defined in :mod:`robogen.stats.intervals`, which interactions use, and re-exported here).
* :func:`sign_flip_pvalue`: exact (or Monte Carlo) paired randomization test
  that the per-episode differences are centred at 0.
* :func:`mcnemar_exact_pvalue`: exact McNemar test of two paired success rates.
* :func:`holm_adjust`: Holm's step-down adjustment of a family of p-values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from robogen.stats.intervals import (
    METHOD_AUGMENTED,
    METHOD_BOOTSTRAP,
    MIN_NONZERO_FOR_BOOTSTRAP,
    augmented_wald_interval,
    bounded_mean_interval,
    one_d_values,
)

__all__ = [
    "METHOD_AUGMENTED", "METHOD_BOOTSTRAP", "MIN_NONZERO_FOR_BOOTSTRAP",
    "augmented_wald_interval", "bounded_mean_interval", "holm_adjust", "mcnemar_exact_pvalue",
    "sign_flip_pvalue",
]

EXACT_SIGN_FLIP_MAX = 16
"""Up to this many non-zero differences the sign-flip test enumerates all 2^k
sign patterns (exact); above it, :data:`SIGN_FLIP_RESAMPLES` random flips."""
SIGN_FLIP_RESAMPLES = 20_000


def sign_flip_pvalue(values: ArrayLike, *, seed: int = 0,
                     alternative: str = "two-sided") -> float:
    """Paired randomization (sign-flip) test of a zero mean difference (two-sided, or
    ``alternative="greater"``: against a positive mean).

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
        alternative: ``two-sided`` or ``greater``.

    Returns:
        The p-value in (0, 1]; 1.0 when at most one difference is non-zero.
    """
    from scipy.stats import permutation_test

    v = one_d_values(values)
    nz = v[v != 0]
    if nz.size <= 1:  # no difference, or one: both of its sign patterns are as extreme
        return 1.0
    n_res = 2**nz.size if nz.size <= EXACT_SIGN_FLIP_MAX else SIGN_FLIP_RESAMPLES
    res = permutation_test(
        (nz,), np.sum, permutation_type="samples", n_resamples=n_res,
        alternative=alternative, random_state=np.random.default_rng(seed),
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
