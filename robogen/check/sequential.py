"""Group-sequential stopping for the regression gate: looks and alpha spending.

The candidate (and an evaluated baseline) run in batches of episodes; after
each batch ("look") every undecided condition is tested, and a condition
stops as soon as it is decided (``pass`` or ``regression``). The type I error
over all looks stays at most alpha by *alpha spending*:

* A spending function ``a(t)`` (Lan, K. K. G. & DeMets, D. L. 1983, "Discrete
  sequential boundaries for clinical trials", Biometrika 70(3):659-663) gives
  the error allowed up to information fraction ``t = n_k / n_max``;
  look k may spend ``a(t_k) - a(t_{k-1})``.
* Look k tests the undecided conditions with Holm's procedure at that
  increment. By the union bound (Bonferroni over looks) the probability of
  any false decision over all looks and conditions is at most
  ``sum_k (a(t_k) - a(t_{k-1})) = a(1) = alpha``, whatever the correlation
  between looks; this needs no normal approximation of the joint law, so it
  stays valid with the exact discrete tests of
  :mod:`robogen.check.noninferiority` (it is conservative against boundaries
  computed from the joint law, e.g. Jennison & Turnbull 2000, *Group
  Sequential Methods with Applications to Clinical Trials*, ch. 7).

Spending functions:

* ``obrien-fleming``: ``a(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))``
  (Lan & DeMets 1983): spends almost nothing early, keeps most of alpha for
  the last look, so the final test loses little power.
* ``pocock``: ``a(t) = alpha ln(1 + (e - 1) t)`` (Lan & DeMets 1983): spends
  evenly, stops clear cases earlier but leaves less for the last look.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import stats

from robogen.check.records import DEFAULT_LOOKS, DEFAULT_SPENDING  # noqa: F401 (re-export)
from robogen.errors import MUST_BE_IN_RANGE, InvalidSpecError, UnknownNameError


def _obrien_fleming(t: float, alpha: float) -> float:
    if t <= 0.0:
        return 0.0
    z = float(stats.norm.ppf(1.0 - alpha / 2.0))
    return float(2.0 - 2.0 * stats.norm.cdf(z / math.sqrt(min(t, 1.0))))


def _pocock(t: float, alpha: float) -> float:
    return alpha * math.log(1.0 + (math.e - 1.0) * min(max(t, 0.0), 1.0))


SPENDING_FUNCTIONS: dict[str, Callable[[float, float], float]] = {
    "obrien-fleming": _obrien_fleming,
    "pocock": _pocock,
}
"""Alpha-spending functions ``a(t, alpha)`` by name; each has ``a(0) = 0`` and ``a(1) = alpha``."""



def spent_alpha(spending: str, t: float, alpha: float) -> float:
    """Cumulative type I error ``a(t)`` allowed at information fraction ``t`` in [0, 1].

    Raises:
        UnknownNameError: On an unknown spending function.
    """
    if spending not in SPENDING_FUNCTIONS:
        raise UnknownNameError("spending function", spending, SPENDING_FUNCTIONS)
    return SPENDING_FUNCTIONS[spending](t, alpha)


def look_schedule(n_max: int, looks: int, batch_size: int = 1) -> tuple[int, ...]:
    """Episode counts per condition at each look: ``n_max * k / looks`` rounded up to batches.

    Args:
        n_max: Episodes per condition at the last look (the manifest's ``n_episodes``).
        looks: Planned number of looks, >= 1.
        batch_size: Episodes per work unit; looks land on unit boundaries so that
            no unit is split.

    Returns:
        Strictly increasing counts ending at ``n_max`` (fewer than ``looks`` when
        rounding merges looks).

    Raises:
        InvalidSpecError: If ``n_max``, ``looks`` or ``batch_size`` is below 1.
    """
    for name, v in (("n_max", n_max), ("looks", looks), ("batch_size", batch_size)):
        if v < 1:
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(field=name, low=1, high="inf", value=v))
    out: list[int] = []
    for k in range(1, looks + 1):
        n = min(n_max, math.ceil(n_max * k / looks / batch_size) * batch_size)
        if not out or n > out[-1]:
            out.append(n)
    if out[-1] != n_max:
        out.append(n_max)
    return tuple(out)


def look_levels(schedule: tuple[int, ...], alpha: float, spending: str) -> tuple[float, ...]:
    """Alpha spent at each look: ``a(t_k) - a(t_{k-1})``, summing to ``alpha``.

    Args:
        schedule: Episode counts per look (:func:`look_schedule`), last = n_max.
        alpha: Total type I error, in (0, 0.5).
        spending: Name in :data:`SPENDING_FUNCTIONS`.

    Returns:
        One level per look; the last look gets the remainder so the sum is alpha.
    """
    n_max = schedule[-1]
    cum = [spent_alpha(spending, n / n_max, alpha) for n in schedule]
    cum[-1] = alpha
    levels = [cum[0]] + [max(0.0, cum[k] - cum[k - 1]) for k in range(1, len(cum))]
    return tuple(levels)
