"""Split a budget into (distinct values, demonstrations per value) per factor.

From a diversity run (:mod:`robogen.scaling.diversity`), each factor ``f`` has a diversity
curve ``f:k@m<M>`` (failure ``a_D k^b_D`` at ``M`` demonstrations per value, ``M`` the grid's
largest) and per grid value ``k_i`` a quantity curve ``f:m@k<k_i>`` with exponent
``b_Q(k_i)``. They combine into

    success_f(k, m) = 1 - a_D k^b_D (m / M)^b_Q(k),

which equals the diversity curve at ``m = M`` and changes with ``m`` as the quantity curve
at ``k`` does: ``b_Q(k)`` is interpolated linearly in ``log k`` between the grid's values
(held constant beyond them). The quantity exponent does depend on ``k``: on Reach it went
from about -0.2 at one value to about -1.8 at 32 (docs/benchmarks.md), and a model with
one quantity exponent (the largest ``k``'s) predicted gains from more demonstrations per
value at few values that the validation did not find.

Collecting ``k`` values with ``m`` demonstrations each costs ``k * (value_cost_f + m)``
demonstration units (a new scene, object or body usually costs more than one more
demonstration in it).

:func:`plan_values` (``optimal``): the (k, m) of every factor maximizing the mean predicted
success under the budget, exactly, by dynamic programming over the budget (costs rounded
up to :func:`cost_step` units). ``equal``: each factor gets the same share of the budget,
spent on values of ``M`` demonstrations each (what the grid measured most).

:func:`compare_values_with_equal`: the plan's difference from the equal split with a
percentile interval, by the procedure bootstrap of
:func:`robogen.scaling.planner.compare_with_equal`: the plan is made on bootstrap sample
``j`` of the curves and both plans are judged on sample ``j + 1`` (paired).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robogen.errors import InvalidSpecError
from robogen.scaling.curves import CurveFit, CurvesFile

VALUE_METHODS = ("optimal", "equal")
MAX_COST_STEPS = 2000
"""Budget resolution of the dynamic program (costs round up to ``budget / 2000`` units)."""
NOT_DIVERSITY = (
    "{path} holds quantity curves, not diversity curves; --value-cost applies to the curves "
    "of `robogen scale --vary values`"
)
BAD_VALUE_COST = (
    "--value-cost must be a number >= 0 (demonstrations' worth per new value) or "
    "factor=number pairs such as texture=5,embodiment=20; {why}"
)
_CURVE = re.compile(r"^(?P<factor>[a-z_]+):(?P<x>[km])@(?P<at>[km])(?P<n>\d+)$")


def exponent_interval(fit: CurveFit, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the exponent ``b`` over the fit's bootstrap samples (NaNs
    without samples)."""
    if fit.samples is None or len(fit.samples) < 2:
        return math.nan, math.nan
    a = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(fit.samples[:, 1], [a, 1.0 - a])
    return float(lo), float(hi)


@dataclass(frozen=True)
class DiversityModel:
    """``success(k, m)`` of one factor (module docstring).

    Attributes:
        factor: The factor.
        diversity: The diversity curve at ``per_value`` demonstrations per value.
        quantities: ``(k_i, quantity curve at k_i values)`` for every grid value, sorted.
        values: ``K``, the grid's largest number of values.
        per_value: ``M``, the grid's largest demonstrations per value.
    """

    factor: str
    diversity: CurveFit
    quantities: tuple[tuple[int, CurveFit], ...]
    values: int
    per_value: int

    def params(self, j: int | None = None) -> tuple[float, float, NDArray[np.float64]]:
        """``(a_D, b_D, b_Q per grid k)`` of the fits (``j`` None) or bootstrap sample ``j``."""
        if j is None:
            return self.diversity.a, self.diversity.b, np.array(
                [q.b for _, q in self.quantities])
        d = self.diversity.samples
        assert d is not None
        return float(d[j, 0]), float(d[j, 1]), np.array(
            [q.samples[j, 1] for _, q in self.quantities if q.samples is not None])

    @property
    def n_samples(self) -> int:
        """Bootstrap samples every curve has."""
        fits = [self.diversity, *(q for _, q in self.quantities)]
        return min(0 if f.samples is None else len(f.samples) for f in fits)

    def success(self, k: Any, m: Any, j: int | None = None) -> NDArray[np.float64]:
        """Predicted success at ``k`` values x ``m`` demonstrations per value (0 at k = 0)."""
        a, bd, bqs = self.params(j)
        k, m = np.asarray(k, np.float64), np.asarray(m, np.float64)
        grid = np.log([kk for kk, _ in self.quantities])
        with np.errstate(divide="ignore", invalid="ignore"):
            bq = np.interp(np.log(np.maximum(k, 1.0)), grid, bqs)
            fail = a * np.power(np.maximum(k, 1e-300), bd) * np.power(
                np.maximum(m, 1e-300) / self.per_value, bq)
        return np.where((k > 0) & (m > 0), np.clip(1.0 - fail, 0.0, 1.0), 0.0)


def diversity_models(curves: CurvesFile, path: str = "the curves file"
                     ) -> dict[str, DiversityModel]:
    """The :class:`DiversityModel` of every factor of a diversity run's ``curves.json``.

    Raises:
        InvalidSpecError: If the file holds quantity curves or lacks an anchor curve.
    """
    meta = curves.meta or {}
    if meta.get("kind") != "diversity":
        raise InvalidSpecError(NOT_DIVERSITY.format(path=path))
    anchor = meta.get("anchor") or {}
    big_k, big_m = int(anchor.get("values", 0)), int(anchor.get("per_value", 0))
    factors = list(dict.fromkeys(m["factor"] for n in curves.names
                                 if (m := _CURVE.match(n)) is not None))
    out = {}
    for f in factors:
        d = f"{f}:k@m{big_m}"
        qs = sorted((int(mt["n"]), curves.curves[n].fit) for n in curves.names
                    if (mt := _CURVE.match(n)) is not None and mt["factor"] == f
                    and mt["x"] == "m")
        if d not in curves.curves or not qs or qs[-1][0] != big_k:
            raise InvalidSpecError(f"{path} lacks the curves {d!r} and '{f}:m@k<k>' up to "
                                   f"k = {big_k}; re-run robogen scale --vary values")
        out[f] = DiversityModel(f, curves.curves[d].fit, tuple(qs), big_k, big_m)
    if not out:
        raise InvalidSpecError(f"{path} holds no diversity curves")
    return out


@dataclass(frozen=True)
class ValueAllocation:
    """The (values, demonstrations per value) planned for one factor.

    Attributes:
        factor: The factor.
        values: Distinct values to collect.
        per_value: Demonstrations per value.
        value_cost: Cost of one new value [demonstration units].
        cost: ``values * (value_cost + per_value)``.
        success: Predicted held-out success (fitted curves).
        low: Lower bound of the bootstrap band.
        high: Upper bound of the band.
    """

    factor: str
    values: int
    per_value: int
    value_cost: float
    cost: float
    success: float
    low: float
    high: float

    @property
    def demos(self) -> int:
        """Demonstrations in all: ``values * per_value``."""
        return self.values * self.per_value


@dataclass(frozen=True)
class ValuePlan:
    """A budget split into (values, demonstrations per value) per factor."""

    method: str
    budget: float
    total_cost: float
    factors: tuple[ValueAllocation, ...]
    confidence: float = 0.95

    @property
    def mean_success(self) -> float:
        """Mean predicted success over the factors."""
        return float(np.mean([f.success for f in self.factors]))

    @property
    def split(self) -> dict[str, tuple[int, int]]:
        """Factor -> (values, demonstrations per value)."""
        return {f.factor: (f.values, f.per_value) for f in self.factors}

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        return {"method": self.method, "budget": self.budget, "total_cost": self.total_cost,
                "confidence": self.confidence, "mean_success": self.mean_success,
                "factors": [asdict(f) | {"demos": f.demos} for f in self.factors]}


def cost_step(budget: float) -> float:
    """The dynamic program's cost unit: 1 demonstration, or ``budget / MAX_COST_STEPS``."""
    return max(1.0, budget / MAX_COST_STEPS)


def _value_costs(models: Mapping[str, DiversityModel], value_cost: float | Mapping[str, float]
                 ) -> dict[str, float]:
    costs = dict(value_cost) if isinstance(value_cost, Mapping) else {
        f: value_cost for f in models}
    for f, c in costs.items():
        if f not in models:
            raise InvalidSpecError(BAD_VALUE_COST.format(
                why=f"{f!r} is not a factor of these curves ({', '.join(models)})"))
        if isinstance(c, bool) or not isinstance(c, int | float) or not (
                math.isfinite(c) and c >= 0):
            raise InvalidSpecError(BAD_VALUE_COST.format(why=f"got {f}={c!r}"))
    return {f: float(costs.get(f, 0.0)) for f in models}


def _options(model: DiversityModel, vc: float, budget: float, step: float, j: int | None
             ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64],
                        NDArray[np.float64]]:
    """Every affordable (k, m): k, m, cost in steps (rounded up), predicted success."""
    ks, ms = [], []
    for k in range(1, int(budget // (vc + 1.0)) + 1):
        m = np.arange(1, int((budget / k - vc) // 1.0) + 1)
        ks.append(np.full(len(m), k))
        ms.append(m)
    k_arr = np.concatenate(ks) if ks else np.zeros(0, np.int64)
    m_arr = np.concatenate(ms) if ms else np.zeros(0, np.int64)
    units = np.ceil(k_arr * (vc + m_arr) / step - 1e-9).astype(np.int64)
    return k_arr, m_arr, units, model.success(k_arr, m_arr, j)


def _best_per_factor(models: Mapping[str, DiversityModel], vcs: Mapping[str, float],
                     budget: float, j: int | None) -> dict[str, dict[str, Any]]:
    """Per factor and budget level c (steps): the best success within c and its (k, m)."""
    step = cost_step(budget)
    c_max = int(budget / step + 1e-9)
    out = {}
    for f, model in models.items():
        k, m, units, s = _options(model, vcs[f], budget, step, j)
        keep = units <= c_max
        k, m, units, s = k[keep], m[keep], units[keep], s[keep]
        best = np.zeros(c_max + 1)
        arg = np.full(c_max + 1, -1)
        order = np.lexsort((-s, units))
        k, m, units, s = k[order], m[order], units[order], s[order]
        first = np.unique(units, return_index=True)[1]
        best[units[first]] = s[first]
        arg[units[first]] = first
        for c in range(1, c_max + 1):  # prefix maximum
            if best[c - 1] > best[c] or arg[c] < 0:
                best[c], arg[c] = best[c - 1], arg[c - 1]
        out[f] = {"best": best, "arg": arg, "k": k, "m": m}
    return out


def _optimal(models: Mapping[str, DiversityModel], vcs: Mapping[str, float], budget: float,
             j: int | None) -> dict[str, tuple[int, int]]:
    """The (k, m) per factor maximizing the summed success (knapsack over budget steps)."""
    tables = _best_per_factor(models, vcs, budget, j)
    names = list(models)
    c_max = len(next(iter(tables.values()))["best"]) - 1
    value = tables[names[0]]["best"].copy()
    spend: list[NDArray[np.int64]] = [np.arange(c_max + 1)]
    for f in names[1:]:
        b = tables[f]["best"]
        new = np.full(c_max + 1, -np.inf)
        take = np.zeros(c_max + 1, np.int64)
        for c2 in range(c_max + 1):
            cand = b[c2] + value[: c_max + 1 - c2]
            better = cand > new[c2:] + 1e-15
            new[c2:][better] = cand[better]
            take[c2:][better] = c2
        value = new
        spend.append(take)
    out: dict[str, tuple[int, int]] = {}
    c = c_max
    for i in range(len(names) - 1, -1, -1):
        f = names[i]
        c_f = int(spend[i][c]) if i > 0 else c
        t = tables[f]
        a = int(t["arg"][c_f])
        out[f] = (0, 0) if a < 0 else (int(t["k"][a]), int(t["m"][a]))
        c -= c_f
    return {f: out[f] for f in names}


def _equal(models: Mapping[str, DiversityModel], vcs: Mapping[str, float], budget: float
           ) -> dict[str, tuple[int, int]]:
    share = budget / len(models)
    return {f: (int(share // (vcs[f] + mod.per_value) + 1e-9), mod.per_value)
            for f, mod in models.items()}


def plan_values(curves: CurvesFile | Mapping[str, DiversityModel], budget: float, *,
                value_cost: float | Mapping[str, float] = 0.0, method: str = "optimal",
                confidence: float = 0.95) -> ValuePlan:
    """Split ``budget`` into (values, demonstrations per value) per factor.

    Args:
        curves: A diversity run's ``curves.json`` (loaded) or the factors' models.
        budget: Budget [demonstration units], > 0.
        value_cost: Cost of one new value in demonstration units, one number or per factor
            (default 0: only demonstrations cost).
        method: ``optimal`` or ``equal`` (module docstring).
        confidence: Level of the bands.

    Raises:
        InvalidSpecError: On quantity curves, a bad budget, value cost or method.
    """
    models = diversity_models(curves) if isinstance(curves, CurvesFile) else dict(curves)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not (
            math.isfinite(budget) and budget > 0):
        raise InvalidSpecError(f"budget must be a finite number > 0 (demonstrations), got "
                               f"{budget!r}")
    if method not in VALUE_METHODS:
        raise InvalidSpecError(f"method must be one of {VALUE_METHODS}, got {method!r}")
    vcs = _value_costs(models, value_cost)
    split = _optimal(models, vcs, float(budget), None) if method == "optimal" else \
        _equal(models, vcs, float(budget))
    alpha = (1.0 - confidence) / 2.0
    rows = []
    for f, (k, m) in split.items():
        mod = models[f]
        s = float(mod.success(k, m))
        draws = np.array([float(mod.success(k, m, j)) for j in range(mod.n_samples)])
        lo, hi = (np.quantile(draws, [alpha, 1 - alpha]) if len(draws) >= 2 else (s, s))
        rows.append(ValueAllocation(f, k, m, vcs[f], k * (vcs[f] + m), s,
                                    min(float(lo), s), max(float(hi), s)))
    return ValuePlan(method, float(budget), float(sum(r.cost for r in rows)), tuple(rows),
                     confidence)


def compare_values_with_equal(curves: CurvesFile | Mapping[str, DiversityModel], budget: float,
                              *, value_cost: float | Mapping[str, float] = 0.0,
                              confidence: float = 0.95, n_samples: int = 100
                              ) -> dict[str, float]:
    """The optimal plan's mean success minus the equal split's, with a paired interval.

    Returns:
        ``{"predicted", "difference", "low", "high", "n_samples", "confidence"}``: the
        difference on the fitted curves, its mean over bootstrap pairs and the percentile
        interval (module docstring).

    Raises:
        InvalidSpecError: On curves without bootstrap samples, or as :func:`plan_values`.
    """
    models = diversity_models(curves) if isinstance(curves, CurvesFile) else dict(curves)
    s = min([n_samples, *(m.n_samples for m in models.values())])
    if s < 2:
        raise InvalidSpecError("comparing with the equal split needs the curves' bootstrap "
                               "samples; run robogen scale --vary values with --n-boot >= 2")
    vcs = _value_costs(models, value_cost)
    plan = plan_values(models, budget, value_cost=vcs)
    equal = plan_values(models, budget, value_cost=vcs, method="equal")
    eq = equal.split

    def judged(split: Mapping[str, tuple[int, int]], j: int) -> float:
        return float(np.mean([float(models[f].success(*split[f], j)) for f in models]))

    diff = np.array([judged(_optimal(models, vcs, float(budget), j), (j + 1) % s)
                     - judged(eq, (j + 1) % s) for j in range(s)])
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(diff, [alpha, 1.0 - alpha])
    return {"predicted": plan.mean_success - equal.mean_success,
            "difference": float(diff.mean()), "low": float(lo), "high": float(hi),
            "n_samples": int(s), "confidence": confidence}


def diversity_verdict(model: DiversityModel, value_cost: float = 0.0,
                      confidence: float = 0.95) -> dict[str, Any]:
    """At the anchor (K values x M demos), the same extra cost spent on K new values vs on
    more demonstrations per value: predicted gains, their paired difference with a bootstrap
    interval, and one sentence saying which spends the budget better.
    """
    big_k, big_m = model.values, model.per_value
    extra = big_k * (value_cost + big_m)  # K new values of M demonstrations each
    m_qty = big_m + extra / big_k  # the same cost as more demonstrations per value
    now = float(model.success(big_k, big_m))
    g_div = float(model.success(2 * big_k, big_m)) - now
    g_qty = float(model.success(big_k, m_qty)) - now
    d = np.array([float(model.success(2 * big_k, big_m, j) - model.success(big_k, m_qty, j))
                  for j in range(model.n_samples)])
    alpha = (1.0 - confidence) / 2.0
    lo, hi = (np.quantile(d, [alpha, 1 - alpha]) if len(d) >= 2 else (math.nan, math.nan))
    winner = ("diversity (more values) spends the budget better" if lo > 0 else
              "quantity (more demonstrations per value) spends the budget better" if hi < 0
              else f"neither spends the budget better with {confidence:.0%} confidence")
    cost = f"{extra:g} demonstration units" if value_cost else f"{extra:g} demonstrations"
    sentence = (f"{model.factor}: from {big_k} values x {big_m} demonstrations, {cost} more "
                f"predict {g_div:+.3f} as {big_k} new values and {g_qty:+.3f} as "
                f"{m_qty - big_m:g} more demonstrations per value (difference "
                f"{g_div - g_qty:+.3f} [{lo:+.3f}, {hi:+.3f}]): {winner}.")
    return {"factor": model.factor, "gain_values": g_div, "gain_demos": g_qty,
            "difference": g_div - g_qty, "low": float(lo), "high": float(hi),
            "sentence": sentence}


__all__ = [
    "VALUE_METHODS", "DiversityModel", "ValueAllocation", "ValuePlan",
    "compare_values_with_equal", "cost_step", "diversity_models", "diversity_verdict",
    "exponent_interval", "plan_values",
]
