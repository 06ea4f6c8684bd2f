"""Allocate a demonstration budget across factors from their fitted scaling curves.

Each curve (a factor such as ``texture``, or a combination such as
``lighting+texture``) predicts the held-out success after ``n`` more
demonstrations that vary it (:class:`~robogen.scaling.curves.CurveFit`).
Collecting one demonstration for curve ``f`` costs ``cost_f`` (default 1; a
combination without its own cost uses the largest cost of its factors). An
allocation ``n_f`` respects ``sum_f cost_f * n_f <= budget`` and uses all that
fits: afterwards no curve's cost fits in what is left.

Methods (the objective is the mean predicted success over the curves):

``greedy``
    Repeatedly give ``step`` demonstrations to the curve with the largest
    predicted gain per unit cost, ``(v_f(n_f + step) - v_f(n_f)) / (cost_f * step)``.
    ``v_f`` is the fitted curve, or with ``lcb=c`` its pointwise lower
    confidence bound: the ``1 - c`` quantile of the bootstrap curves, which
    favours gains the data support. Greedy is optimal for a separable concave
    objective: the fitted power laws are concave in ``n`` (greedy ranks gains
    on the unclipped law; predictions shown are clipped to [0, 1]).
``fsc_topk``
    The proportional top-k rule of Factored Scaling Curves (Zha et al. 2025,
    arXiv:2505.07728) as implemented here: each curve's predicted gain is
    ``g_f = v_f(budget / (k * cost_f)) - v_f(0)`` (what an equal share of the
    budget among k curves would buy); the ``k`` curves with the largest gains
    split the budget in proportion to ``g_f`` (equally if all gains are 0);
    the rounding remainder is filled greedily, top-k curves first.
``equal``
    The same number of demonstrations for every curve; the remainder goes one
    demonstration per curve in curve order while it fits.
``worst_first``
    Repeatedly give ``step`` demonstrations to the curve with the lowest
    current predicted success (water-filling; with one very weak curve it
    gets everything).

Does a plan beat the equal split? (:func:`compare_with_equal`)
    A plan's predicted gain over ``equal`` on the fitted curves is optimistic:
    the plan was tuned to those very curves, noise included (the optimizer's
    curse, Smith & Winkler 2006, *Management Science* 52(3)). The comparison
    therefore bootstraps the whole procedure with the curves' bootstrap
    samples: for sample ``j`` every method plans on the curves of sample ``j``
    and every plan (``equal``'s too) is judged on sample ``j + 1`` (another
    resample, standing for the unknown truth; the same judge for every method,
    so differences are paired). The percentile interval of ``success(plan) -
    success(equal)`` over the ``j`` covers both the curves' uncertainty and the
    plan's sensitivity to it. Plans with ``lcb`` are judged as fixed
    allocations (their rule needs the bands of a whole bootstrap, which one
    sample lacks). The interval has zero width only if every sample gives every
    method the allocation of ``equal`` and all judges agree.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robogen.errors import MUST_BE_POSITIVE, InvalidSpecError
from robogen.scaling.curves import CurveFit, CurvesFile, FactorCurve, predict

METHODS = ("greedy", "fsc_topk", "equal", "worst_first")
DEFAULT_COMPARE_SAMPLES = 200
"""Bootstrap pairs used by :func:`compare_with_equal` (percentile bounds of a 95% interval
then have a Monte Carlo error of about a tenth of the interval's width)."""
NEEDS_SAMPLES = (
    "comparing plans with the equal split needs the curves' bootstrap samples, but curves "
    "{names} have {have}; fit them with n_boot >= 2 (robogen scale --n-boot 500)"
)
UNKNOWN_COST_NAME = (
    "cost given for {name!r}, which is neither a curve nor a factor of one; curves: {choices}{hint}"
)
BAD_COST = (
    "cost of {name!r} must be a finite number > 0 (cost units per demonstration), got {value!r}"
)
_EPS = 1e-9


@dataclass(frozen=True)
class FactorAllocation:
    """The demonstrations planned for one curve.

    Attributes:
        factor: Curve name (``texture``, ``lighting+texture``).
        demos: Demonstrations to collect.
        unit_cost: Cost of one demonstration [cost units].
        cost: ``demos * unit_cost``.
        success_now: Predicted success with no new demonstrations.
        success: Predicted success after ``demos`` demonstrations (fitted curve).
        low: Lower bound of the bootstrap band at ``demos`` (equal to ``success`` without
            bootstrap samples).
        high: Upper bound of the band.
    """

    factor: str
    demos: int
    unit_cost: float
    cost: float
    success_now: float
    success: float
    low: float
    high: float


@dataclass(frozen=True)
class Allocation:
    """A planned split of the budget.

    Attributes:
        method: ``greedy``, ``fsc_topk``, ``equal`` or ``worst_first``.
        budget: The budget [cost units].
        total_cost: Cost of the plan, ``<= budget``.
        factors: One :class:`FactorAllocation` per curve, in curve order.
        confidence: Level of the reported bands.
        lcb: Lower-bound level the ``greedy``/``fsc_topk`` rules used, or None (fitted curves).
        k: Curves funded by ``fsc_topk`` (None for other methods).
    """

    method: str
    budget: float
    total_cost: float
    factors: tuple[FactorAllocation, ...]
    confidence: float = 0.95
    lcb: float | None = None
    k: int | None = None

    @property
    def demos(self) -> dict[str, int]:
        """Curve name -> demonstrations."""
        return {f.factor: f.demos for f in self.factors}

    @property
    def mean_success(self) -> float:
        """Mean predicted success over the curves after the plan."""
        return float(np.mean([f.success for f in self.factors]))

    @property
    def remaining(self) -> float:
        """Budget left unspent (smaller than every curve's unit cost)."""
        return self.budget - self.total_cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        return {
            "method": self.method, "budget": self.budget, "total_cost": self.total_cost,
            "confidence": self.confidence, "lcb": self.lcb, "k": self.k,
            "mean_success": self.mean_success,
            "factors": [dataclasses.asdict(f) for f in self.factors],
        }

    def table(self) -> str:
        """A Markdown table: curve, demonstrations, cost, predicted success with its band."""
        pct = round(self.confidence * 100)
        lines = [f"| factor | demos | cost | success now | predicted success ({pct}% band) |",
                 "|---|---:|---:|---:|---|"]
        for f in self.factors:
            lines.append(f"| {f.factor} | {f.demos} | {f.cost:g} | {f.success_now:.3f} | "
                         f"{f.success:.3f} [{f.low:.3f}, {f.high:.3f}] |")
        lines.append(f"| **total** | {sum(f.demos for f in self.factors)} | "
                     f"{self.total_cost:g} / {self.budget:g} | | mean {self.mean_success:.3f} |")
        return "\n".join(lines)


@dataclass(frozen=True)
class EqualSplitComparison:
    """A method's mean predicted success minus that of the equal split.

    Attributes:
        method: The method compared.
        predicted: Difference on the fitted curves (the plans' own prediction; optimistic
            for methods that optimize the curves) [success rate].
        difference: Mean difference over the bootstrap pairs (module docstring).
        low: Lower percentile bound of the difference.
        high: Upper percentile bound.
        n_samples: Bootstrap pairs used.
        confidence: Two-sided level of ``[low, high]``.
    """

    method: str
    predicted: float
    difference: float
    low: float
    high: float
    n_samples: int
    confidence: float

    @property
    def better(self) -> bool:
        """Whether the method beats equal with confidence (``low > 0``)."""
        return self.low > 0.0

    @property
    def worse(self) -> bool:
        """Whether equal beats the method with confidence (``high < 0``)."""
        return self.high < 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        return {**dataclasses.asdict(self), "better": self.better, "worse": self.worse}


def compare_with_equal(
    curves: CurvesFile | Mapping[str, CurveFit | FactorCurve],
    budget: float,
    methods: Sequence[str] = METHODS,
    *,
    costs: Mapping[str, float] | None = None,
    lcb: float | None = None,
    k: int = 2,
    step: int = 1,
    confidence: float = 0.95,
    n_samples: int = DEFAULT_COMPARE_SAMPLES,
) -> dict[str, EqualSplitComparison]:
    """Each method's difference from the equal split, with a paired bootstrap interval.

    The procedure (plan on bootstrap sample ``j``, judge on sample ``j + 1``, the same
    judge for every method) is in the module docstring. Success is the mean over the
    curves of the clipped predicted success, as in :attr:`Allocation.mean_success`.

    Args:
        curves: A loaded ``curves.json`` or a mapping curve name -> fit; every curve needs
            at least 2 bootstrap samples.
        budget: Budget [cost units], > 0.
        methods: Methods to compare (``equal`` itself gives a difference of exactly 0).
        costs: Cost per demonstration (as :func:`plan_budget`).
        lcb: Lower-bound level of the ``greedy``/``fsc_topk`` plans (judged as fixed
            allocations), or None.
        k: Curves funded by ``fsc_topk``.
        step: Demonstrations per greedy increment.
        confidence: Two-sided level of the interval.
        n_samples: Bootstrap pairs (at most the smallest number of samples of a curve).

    Returns:
        Method name -> :class:`EqualSplitComparison`, in the order of ``methods``.

    Raises:
        InvalidSpecError: On curves without bootstrap samples, ``n_samples < 2``, or any
            error :func:`plan_budget` raises.
    """
    fits = _fits(curves)
    counts = {n: 0 if f.samples is None else len(f.samples) for n, f in fits.items()}
    few = {n: c for n, c in counts.items() if c < 2}
    if few:
        raise InvalidSpecError(NEEDS_SAMPLES.format(
            names=sorted(few), have=", ".join(f"{c} samples" for c in few.values())))
    if not (isinstance(n_samples, int) and n_samples >= 2):
        raise InvalidSpecError(f"n_samples must be an integer >= 2, got {n_samples!r}")
    plans = {m: plan_budget(fits, budget, costs=costs, method=m, lcb=lcb, k=k, step=step,
                            confidence=confidence) for m in dict.fromkeys([*methods, "equal"])}
    names = list(fits)
    unit = {f.factor: f.unit_cost for f in plans["equal"].factors}
    s = min(n_samples, *counts.values())
    params = np.stack([fits[n].samples[:s] for n in names])  # (F, S, 3)

    def judged(demos: NDArray[np.float64], j: NDArray[np.int64]) -> NDArray[np.float64]:
        """Mean success over curves of allocations ``demos`` (S, F) under samples ``j``."""
        a, b, n0 = (params[:, j, i].T for i in range(3))  # (S, F) each
        return np.clip(1.0 - a * np.power(demos + n0, b), 0.0, 1.0).mean(axis=1)

    judge = (np.arange(s) + 1) % s
    fixed = {m: np.tile([float(p.demos[n]) for n in names], (s, 1)) for m, p in plans.items()}
    base = judged(fixed["equal"], judge)
    alpha = (1.0 - confidence) / 2.0
    out = {}
    for m in methods:
        if m == "equal" or (lcb is not None and m in ("greedy", "fsc_topk")):
            demos = fixed[m]
        else:
            demos = np.empty((s, len(names)))
            for j in range(s):
                value = {n: _power_law(*params[i, j]) for i, n in enumerate(names)}
                got = _allocate(m, names, value, unit, float(budget), k, step)
                demos[j] = [got[n] for n in names]
        diff = judged(demos, judge) - base
        low, high = np.quantile(diff, [alpha, 1.0 - alpha])
        out[m] = EqualSplitComparison(
            m, plans[m].mean_success - plans["equal"].mean_success, float(diff.mean()),
            float(low), float(high), int(s), confidence)
    return out


def _power_law(a: float, b: float, n0: float) -> Callable[[float], float]:
    return lambda x: float(1.0 - a * (x + n0) ** b)


def plan_budget(
    curves: CurvesFile | Mapping[str, CurveFit | FactorCurve],
    budget: float,
    *,
    costs: Mapping[str, float] | None = None,
    method: str = "greedy",
    lcb: float | None = None,
    k: int = 2,
    confidence: float = 0.95,
    step: int = 1,
) -> Allocation:
    """Split ``budget`` across the curves.

    Args:
        curves: A loaded ``curves.json`` or a mapping curve name -> fit (or FactorCurve).
        budget: Budget [cost units], > 0.
        costs: Cost per demonstration by curve or factor name (default 1; a combination
            ``a+b`` without its own entry costs ``max(cost_a, cost_b)``).
        method: ``greedy``, ``fsc_topk``, ``equal`` or ``worst_first`` (module docstring).
        lcb: For ``greedy`` and ``fsc_topk``: maximize the one-sided lower confidence bound
            at this level (e.g. 0.8) from the bootstrap samples instead of the fitted curve.
        k: Curves funded by ``fsc_topk`` (clipped to the number of curves).
        confidence: Level of the reported bands.
        step: Demonstrations per increment of the ``greedy``/``worst_first`` loops (raise it
            for very large budgets).

    Returns:
        The :class:`Allocation`.

    Raises:
        InvalidSpecError: On a budget <= 0, a cost for an unknown name, a non-positive cost,
            an unknown method, ``k < 1``, ``step < 1``, a bad level, no curves, or ``lcb``
            with curves that have no bootstrap samples.
    """
    fits = _fits(curves)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not (
            math.isfinite(budget) and budget > 0):
        raise InvalidSpecError(
            f"budget must be a finite number > 0, got {budget!r} (cost units; with default "
            "costs, demonstrations)")
    if method not in METHODS:
        raise InvalidSpecError(f"planning method must be one of {METHODS}, got {method!r}")
    if not (isinstance(k, int) and k >= 1):
        raise InvalidSpecError(MUST_BE_POSITIVE.format(field="k", value=k))
    if not (isinstance(step, int) and step >= 1):
        raise InvalidSpecError(MUST_BE_POSITIVE.format(field="step", value=step))
    if not 0 < confidence < 1:
        raise InvalidSpecError(f"confidence must be in (0, 1), got {confidence!r}")
    if lcb is not None:
        if not 0 < lcb < 1:
            raise InvalidSpecError(f"lcb must be in (0, 1) or None, got {lcb!r}")
        bare = [n for n, f in fits.items() if f.samples is None or len(f.samples) == 0]
        if bare:
            raise InvalidSpecError(f"lcb={lcb} needs bootstrap samples, but curves {bare} have "
                                   "none; fit them with fit_curve_bootstrap or drop lcb")
    unit = _unit_costs(fits, costs or {})
    names = list(fits)
    use_lcb = lcb if method in ("greedy", "fsc_topk") else None
    value = {n: _value_fn(fits[n], use_lcb) for n in names}
    demos = _allocate(method, names, value, unit, float(budget), k, step)
    rows = []
    for n in names:
        mean, low, high = predict(fits[n], [float(demos[n]), 0.0], confidence)
        rows.append(FactorAllocation(n, int(demos[n]), unit[n], demos[n] * unit[n],
                                     float(mean[1]), float(mean[0]), float(low[0]),
                                     float(high[0])))
    total = float(sum(r.cost for r in rows))
    assert total <= budget + _EPS
    return Allocation(method, float(budget), total, tuple(rows), confidence, use_lcb,
                      min(k, len(names)) if method == "fsc_topk" else None)


def _allocate(method: str, names: Sequence[str], value: Mapping[str, Callable[[float], float]],
              unit: Mapping[str, float], budget: float, k: int, step: int) -> dict[str, int]:
    if method == "greedy":
        return _greedy(names, value, unit, budget, step, {n: 0 for n in names})
    if method == "fsc_topk":
        return _fsc_topk(names, value, unit, budget, min(k, len(names)))
    if method == "equal":
        return _equal(names, unit, budget)
    return _worst_first(names, value, unit, budget, step)


def _fits(curves: Any) -> dict[str, CurveFit]:
    if isinstance(curves, CurvesFile):
        fits = curves.fits()
    elif isinstance(curves, Mapping):
        fits = {str(n): c.fit if isinstance(c, FactorCurve) else c for n, c in curves.items()}
    else:
        raise InvalidSpecError(f"curves must be a CurvesFile or a mapping name -> CurveFit, got "
                               f"{type(curves).__name__}")
    if not fits:
        raise InvalidSpecError("no curves to plan with; fit at least one factor first")
    bad = [n for n, f in fits.items() if not isinstance(f, CurveFit)]
    if bad:
        raise InvalidSpecError(f"curves {bad} are not CurveFit objects")
    return fits


def _unit_costs(fits: Mapping[str, CurveFit], costs: Mapping[str, float]) -> dict[str, float]:
    known = set(fits) | {part for n in fits for part in n.split("+")}
    for name, value in costs.items():
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.5)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise InvalidSpecError(UNKNOWN_COST_NAME.format(
                name=name, choices=", ".join(fits), hint=hint))
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value > 0):
            raise InvalidSpecError(BAD_COST.format(name=name, value=value))
    unit = {}
    for n in fits:
        if n in costs:
            unit[n] = float(costs[n])
        else:
            unit[n] = max(float(costs.get(part, 1.0)) for part in n.split("+"))
    return unit


def _value_fn(fit: CurveFit, lcb: float | None) -> Callable[[float], float]:
    if lcb is None:
        # The unclipped power law ``1 - a (x + n0)^b`` is concave and increasing, so greedy
        # marginal gains are optimal; the clipped success (0 below some x) would be flat
        # there and stall greedy on a curve that starts below 0.
        return lambda x: float(1.0 - fit.a * (x + fit.n0) ** fit.b)

    def lower(x: float) -> float:
        return float(np.quantile(fit.sample_success(np.asarray([x]))[:, 0], 1.0 - lcb))

    return lower


def _greedy(names: Sequence[str], value: Mapping[str, Callable[[float], float]],
            unit: Mapping[str, float], budget: float, step: int, start: dict[str, int],
            order: Sequence[str] | None = None) -> dict[str, int]:
    """Marginal gain per unit cost; ``order`` restricts which curves may receive demos."""
    demos = dict(start)
    pool = list(order or names)
    left = budget - sum(demos[n] * unit[n] for n in names)
    cur = {n: value[n](demos[n]) for n in pool}
    nxt: dict[str, tuple[int, float]] = {}
    while True:
        best, best_key = None, None
        for n in pool:
            s = min(step, int((left + _EPS) // unit[n]))
            if s < 1:
                continue
            if n not in nxt or nxt[n][0] != s:
                nxt[n] = (s, value[n](demos[n] + s))
            gain = (nxt[n][1] - cur[n]) / (unit[n] * s)
            key = (gain, -cur[n], -pool.index(n))
            if best_key is None or key > best_key:
                best, best_key = n, key
        if best is None:
            return demos
        s = nxt.pop(best)[0]
        demos[best] += s
        left -= s * unit[best]
        cur[best] = value[best](demos[best])


def _fsc_topk(names: Sequence[str], value: Mapping[str, Callable[[float], float]],
              unit: Mapping[str, float], budget: float, k: int) -> dict[str, int]:
    gains = {n: max(0.0, value[n](math.floor(budget / (k * unit[n]))) - value[n](0))
             for n in names}
    top = sorted(names, key=lambda n: (-gains[n], names.index(n)))[:k]
    total = sum(gains[n] for n in top)
    share = {n: budget * (gains[n] / total if total > 0 else 1.0 / k) for n in top}
    demos = {n: 0 for n in names}
    for n in top:
        demos[n] = int((share[n] + _EPS) // unit[n])
    demos = _greedy(names, value, unit, budget, 1, demos, order=top)
    return _greedy(names, value, unit, budget, 1, demos)


def _equal(names: Sequence[str], unit: Mapping[str, float], budget: float) -> dict[str, int]:
    each = int((budget + _EPS) // sum(unit.values()))
    demos = {n: each for n in names}
    left = budget - each * sum(unit.values())
    placed = True
    while placed:
        placed = False
        for n in names:
            if unit[n] <= left + _EPS:
                demos[n] += 1
                left -= unit[n]
                placed = True
    return demos


def _worst_first(names: Sequence[str], value: Mapping[str, Callable[[float], float]],
                 unit: Mapping[str, float], budget: float, step: int) -> dict[str, int]:
    demos = {n: 0 for n in names}
    cur = {n: value[n](0) for n in names}
    left = budget
    while True:
        fits = [n for n in names if unit[n] <= left + _EPS]
        if not fits:
            return demos
        worst = min(fits, key=lambda n: (cur[n], names.index(n)))
        s = min(step, int((left + _EPS) // unit[worst]))
        demos[worst] += s
        left -= s * unit[worst]
        cur[worst] = value[worst](demos[worst])
