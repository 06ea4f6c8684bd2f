"""How many episodes would decide an inconclusive condition: a planning estimate.

A condition is inconclusive when neither one-sided test (non-inferiority, regression) rejects.
Both tests use a score statistic ``Z`` whose numerator grows like ``n`` and whose standard
deviation grows like ``sqrt(n)`` at fixed observed proportions (Tango 1998 for pairs,
Farrington & Manning 1990 for independent runs). If the proportions observed so far held, ``n'``
episodes would give ``Z' = Z sqrt(n' / n)``, and a test at level ``a`` rejects once
``|Z'| >= z_{1-a}`` (the normal approximation to the exact tests). Hence

    ``n' = ceil(n (z_{1-a} / Z)^2)``

with ``a = alpha / k``: Holm's strictest step over the ``k`` tested conditions, so the estimate
holds whichever step a condition ends up at. It is a planning number (the usual sample-size
formula for a one-sided z test, e.g. Chow, Shao & Wang 2008, *Sample Size Calculations in
Clinical Research*, sec. 4.2, with the power term left out: it is the size at which the
*observed* effect would be significant, so a rerun of that size decides about half the time
when the truth equals the estimate). It is not a guarantee: the exact tests and new episodes
can need more.
"""

from __future__ import annotations

import math

from scipy import stats

PLANNING_NOTE = (
    "planning estimate, not a guarantee: episodes per run at which the observed success "
    "rates would decide (normal approximation to the score test at level alpha / {k}, "
    "Holm's strictest step over {k} tested conditions)"
)
"""How check.md labels the estimate (formatted with ``k``)."""


def episodes_to_decide(statistic: float, n: int, level: float) -> int:
    """Episodes per condition at which the observed proportions would reach ``level``.

    Args:
        statistic: Observed score statistic ``Z`` of the non-inferiority test (Tango for pairs,
            Farrington-Manning for independent runs) on ``n`` episodes; its sign says which
            test the data lean to (> 0: non-inferiority, < 0: regression).
        n: Episodes per condition the statistic was computed on (pairs when paired), >= 1.
        level: One-sided significance level, in (0, 0.5).

    Returns:
        ``ceil(n (z_{1-level} / Z)^2)``, at least ``n + 1`` (the ``n`` run did not decide);
        ``-1`` when ``Z`` is 0 or not finite (the observed difference sits on the margin: no
        number of episodes decides at this estimate) or ``n < 1``.

    Raises:
        ValueError: If ``level`` is not in (0, 0.5).
    """
    if not 0.0 < level < 0.5:
        raise ValueError(f"level must be in (0, 0.5), got {level!r}")
    if n < 1 or not math.isfinite(statistic) or statistic == 0.0:
        return -1
    z = float(stats.norm.isf(level))
    need = math.ceil(n * (z / abs(statistic)) ** 2 - 1e-9)
    return max(need, n + 1)
