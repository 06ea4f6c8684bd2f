"""Factored scaling curves: success against demonstrations per factor, with bootstrap uncertainty.

Method (Factored Scaling Curves, Zha et al. 2025, "Guiding Data Collection
via Factored Scaling Curves", arXiv:2505.07728): for a factor of variation
(or a pair such as ``lighting+texture``), ``x`` demonstrations that vary only
that factor are added to a base dataset, a policy is trained per ``x`` and
evaluated on held-out values of the factor. The success rate is modelled as

    success(x) = 1 - a * (x + n0) ** b,      a > 0, b < 0, n0 > 0,

a straight line in ``log(1 - success)`` against ``log(x + n0)``: the failure
rate decays as a power law of the demonstrations, offset by ``n0``, the
demonstrations' worth of the base dataset for this factor. Predictions are
clipped to [0, 1].

Fitting (:func:`fit_curve`):
    ``binomial`` (default): maximum likelihood with ``successes_i ~
    Binomial(n_i, success(x_i))``. Rates of exactly 0 or 1 need no epsilon:
    the likelihood stays finite; the predicted failure rate is clipped to
    ``[1e-12, 1 - 1e-12]`` inside the log.
    ``log_ls``: weighted least squares of ``log(1 - s_i)`` on ``log(x_i + n0)``
    (closed form in ``(log a, b)`` for each ``n0``, bounded search over
    ``log n0``). The empirical failure rate is continuity-corrected,
    ``(n_i - k_i + 0.5) / (n_i + 1)``, so a point with every episode
    successful still has a finite log; weights ``n f / (1 - f)`` are the
    inverse delta-method variances of ``log f``.
    Both search ``n0`` in ``n0_bounds`` and ``b`` in ``b_bounds``; the binomial
    fit starts from the best ``log_ls`` solutions on a grid of ``n0``.

Uncertainty (:func:`fit_curve_bootstrap`): a nonparametric bootstrap over
evaluation episodes (resampled with replacement within each point; when every
point has the same number of episodes, the same episode indices are drawn for
all points, which keeps the common-random-numbers pairing of the evaluation)
and, where several training seeds share an ``x``, over seeds (points are
resampled within each ``x``). Each resample is refitted; the ``(a, b, n0)``
samples give percentile prediction bands (:func:`predict`).

Files: :func:`write_curves` / :func:`load_curves` (``curves.json``, schema
``robogen.curves`` version 1; see :func:`write_curves`). Plots:
:mod:`robogen.scaling.curves_plot`. The numerical part lives in
:mod:`robogen.scaling.curve_fit` and is re-exported here.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from robogen._atomic import write_atomic
from robogen.errors import InvalidSpecError
from robogen.scaling.curve_fit import (
    B_BOUNDS,
    DEFAULT_N_BOOT,
    FIT_METHODS,
    N0_BOUNDS,
    CurveFit,
    _check_points,
    fit_curve,
    fit_curve_bootstrap,
    fixed_n0_bounds,
    predict,
)
from robogen.stats.intervals import wilson_interval

__all__ = [
    "B_BOUNDS",
    "CURVES_SCHEMA",
    "CURVES_VERSION",
    "DEFAULT_N_BOOT",
    "FIT_METHODS",
    "N0_BOUNDS",
    "CurveFit",
    "CurvePoint",
    "CurvesFile",
    "FactorCurve",
    "build_curve",
    "fit_curve",
    "fit_curve_bootstrap",
    "load_curves",
    "predict",
    "write_curves",
]

CURVES_SCHEMA = "robogen.curves"
CURVES_VERSION = 1
CURVES_MISSING = "curves file {path} does not exist; write it with `robogen scale` first"
CURVES_CORRUPT = "curves file {path} cannot be read ({why}); re-run `robogen scale` to rewrite it"
CURVES_WRONG_SCHEMA = (
    "{path} is not a robogen curves file (schema {got!r}, expected {want!r}); pass the "
    "curves.json written by `robogen scale`"
)
CURVES_WRONG_VERSION = (
    "curves file {path} has schema version {got!r} but this robogen reads version {want}; "
    "re-run `robogen scale` with this robogen"
)
CURVES_WRONG_TASK = (
    "curves file {path} holds curves of task {got!r}, not {want!r}; pass the curves.json of "
    "{want!r} (or plan for --task {got})"
)
UNKNOWN_CURVE = "no curve named {name!r} in {where}; available: {choices}{hint}"


@dataclass(frozen=True)
class CurvePoint:
    """One evaluated point of a scaling curve.

    Attributes:
        x: Demonstrations added for the factor.
        successes: Successful evaluation episodes.
        n: Evaluation episodes.
        ci_low: Wilson lower bound of the success rate.
        ci_high: Wilson upper bound.
        seed: Training seed of the evaluated policy, if known.
    """

    x: int
    successes: int
    n: int
    ci_low: float
    ci_high: float
    seed: int | None = None

    @property
    def rate(self) -> float:
        """Success rate ``successes / n``."""
        return self.successes / self.n if self.n else math.nan

    @classmethod
    def from_counts(cls, x: int, successes: int, n: int, *, seed: int | None = None,
                    confidence: float = 0.95) -> CurvePoint:
        """A point with its Wilson interval (:func:`robogen.stats.intervals.wilson_interval`)."""
        low, high = wilson_interval(int(successes), int(n), confidence)
        return cls(int(x), int(successes), int(n), low, high, seed)


@dataclass(frozen=True)
class FactorCurve:
    """The scaling curve of one factor or combination of factors.

    Attributes:
        name: Curve name: the factor (``lighting``) or factors joined by ``+``.
        points: Evaluated points, in order of ``x``.
        fit: The fitted curve (with bootstrap samples when available).
    """

    name: str
    points: tuple[CurvePoint, ...]
    fit: CurveFit

    @property
    def factors(self) -> tuple[str, ...]:
        """The factors varied together (``("lighting", "texture")`` for ``lighting+texture``)."""
        return tuple(self.name.split("+"))


def build_curve(
    name: str,
    x: ArrayLike,
    outcomes: Sequence[ArrayLike] | None = None,
    *,
    successes: ArrayLike | None = None,
    n: ArrayLike | None = None,
    seeds: Sequence[int | None] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "binomial",
    n0: float | None = None,
) -> FactorCurve:
    """Points with Wilson intervals plus a bootstrapped fit (:func:`fit_curve_bootstrap`).

    Args:
        name: Curve name (factor, or factors joined by ``+``).
        x: ``(P,)`` demonstrations added per point.
        outcomes: Per-point boolean episode outcomes (or give ``successes`` and ``n``).
        successes: ``(P,)`` success counts.
        n: ``(P,)`` episodes per point.
        seeds: Training seed per point (stored with the points).
        n_boot: Bootstrap refits (0: no bootstrap).
        seed: Bootstrap seed.
        confidence: Level of the Wilson intervals.
        method: Fitting method.
        n0: Fix the offset ``n0`` to this many demonstrations (the base dataset
            the points add to, as in Factored Scaling Curves); None fits it.

    Returns:
        The :class:`FactorCurve`.
    """
    if not name or any(not part for part in name.split("+")):
        raise InvalidSpecError(f"curve name must be a factor or factors joined by '+', got "
                               f"{name!r}")
    if outcomes is not None:
        successes = [int(np.asarray(o).astype(bool).sum()) for o in outcomes]
        n = [int(np.asarray(o).size) for o in outcomes]
    xs, k, nn = _check_points(x, successes, n)
    bounds = N0_BOUNDS if n0 is None else fixed_n0_bounds(n0)
    if n_boot:
        fit = fit_curve_bootstrap(xs, outcomes, successes=None if outcomes is not None else k,
                                  n=None if outcomes is not None else nn, n_boot=n_boot,
                                  seed=seed, method=method, n0_bounds=bounds)
    else:
        fit = fit_curve(xs, k, nn, method=method, n0_bounds=bounds)
    seeds_l = list(seeds) if seeds is not None else [None] * len(xs)
    if len(seeds_l) != len(xs):
        raise InvalidSpecError(f"seeds must have one entry per point ({len(xs)}), got {seeds!r}")
    order = np.argsort(xs, kind="stable")
    points = tuple(CurvePoint.from_counts(int(xs[i]), int(round(k[i])), int(nn[i]),
                                          seed=seeds_l[i], confidence=confidence) for i in order)
    return FactorCurve(name, points, fit)


@dataclass(frozen=True)
class CurvesFile:
    """The contents of a ``curves.json``.

    Attributes:
        task: Env id the curves were measured on (``robogen/PickPlace-v0``).
        curves: Curve name -> :class:`FactorCurve`, in file order.
        confidence: Level of the stored Wilson intervals.
        meta: Free-form provenance (base dataset size, BC config, evaluation settings, ...).
        version: Schema version.
    """

    task: str
    curves: Mapping[str, FactorCurve]
    confidence: float = 0.95
    meta: Mapping[str, Any] = field(default_factory=dict)
    version: int = CURVES_VERSION

    @property
    def names(self) -> tuple[str, ...]:
        """Curve names in file order."""
        return tuple(self.curves)

    def get(self, name: str) -> FactorCurve:
        """The curve ``name``.

        Raises:
            InvalidSpecError: If there is none; lists the names and close matches.
        """
        if name not in self.curves:
            raise InvalidSpecError(_unknown_curve(name, self.curves, f"task {self.task!r}"))
        return self.curves[name]

    def fits(self) -> dict[str, CurveFit]:
        """Curve name -> fit (what :func:`robogen.scaling.planner.plan_budget` takes)."""
        return {name: c.fit for name, c in self.curves.items()}


def write_curves(
    path: str | os.PathLike[str],
    task: str,
    curves: Sequence[FactorCurve] | Mapping[str, FactorCurve],
    *,
    confidence: float = 0.95,
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``curves.json`` atomically (temporary file + rename).

    Schema (``schema: "robogen.curves"``, ``version: 1``)::

        {"schema", "version", "task", "confidence", "factors": [names...], "meta": {...},
         "curves": {name: {"factors": [...],
                           "points": [{"x", "successes", "n", "rate", "ci_low", "ci_high",
                                       "seed"}, ...],
                           "fit": {"a", "b", "n0", "method", "deviance",
                                   "samples": [[a, b, n0], ...] | null}}}}

    Args:
        path: File to write (parent directories are created).
        task: Env id the curves belong to.
        curves: The curves (names must be unique).
        confidence: Level of the stored Wilson intervals.
        meta: JSON-serializable provenance.

    Returns:
        The path written.

    Raises:
        InvalidSpecError: On duplicate names, an empty task or non-JSON ``meta``.
    """
    items = list(curves.values()) if isinstance(curves, Mapping) else list(curves)
    names = [c.name for c in items]
    if len(set(names)) != len(names):
        raise InvalidSpecError(f"curve names must be unique, got {names}")
    if not task:
        raise InvalidSpecError("task must be the env id the curves were measured on, got ''")
    doc = {
        "schema": CURVES_SCHEMA, "version": CURVES_VERSION, "task": task,
        "confidence": confidence, "factors": names, "meta": dict(meta or {}),
        "curves": {c.name: {
            "factors": list(c.factors),
            "points": [{"x": p.x, "successes": p.successes, "n": p.n, "rate": p.rate,
                        "ci_low": p.ci_low, "ci_high": p.ci_high, "seed": p.seed}
                       for p in c.points],
            "fit": c.fit.to_dict(),
        } for c in items},
    }
    try:
        text = json.dumps(doc, indent=1, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidSpecError(f"curves cannot be written as JSON ({e}); meta must hold "
                               "JSON-serializable, finite values") from e
    return write_atomic(path, text)


def load_curves(path: str | os.PathLike[str], *, task: str | None = None) -> CurvesFile:
    """Read a ``curves.json`` written by :func:`write_curves`.

    Args:
        path: The file.
        task: If given, the env id the curves must belong to.

    Returns:
        The :class:`CurvesFile`.

    Raises:
        InvalidSpecError: If the file is missing, not JSON, of another schema or version,
            has missing/malformed fields, or belongs to another task.
    """
    p = Path(path)
    if not p.is_file():
        raise InvalidSpecError(CURVES_MISSING.format(path=p))
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InvalidSpecError(CURVES_CORRUPT.format(path=p, why=f"{type(e).__name__}: {e}")
                               ) from e
    got = doc.get("schema") if isinstance(doc, dict) else None
    if got != CURVES_SCHEMA:
        raise InvalidSpecError(CURVES_WRONG_SCHEMA.format(path=p, got=got, want=CURVES_SCHEMA))
    if doc.get("version") != CURVES_VERSION:
        raise InvalidSpecError(CURVES_WRONG_VERSION.format(path=p, got=doc.get("version"),
                                                           want=CURVES_VERSION))
    try:
        curves = {}
        for name, c in doc["curves"].items():
            pts = tuple(CurvePoint(int(q["x"]), int(q["successes"]), int(q["n"]),
                                   float(q["ci_low"]), float(q["ci_high"]),
                                   None if q.get("seed") is None else int(q["seed"]))
                        for q in c["points"])
            fit = CurveFit.from_dict(c["fit"])
            if not (fit.a > 0 and fit.b < 0 and fit.n0 > 0):
                raise ValueError(f"curve {name!r} has a={fit.a}, b={fit.b}, n0={fit.n0}; "
                                 "expected a > 0, b < 0, n0 > 0")
            curves[str(name)] = FactorCurve(str(name), pts, fit)
        out = CurvesFile(str(doc["task"]), curves, float(doc.get("confidence", 0.95)),
                         dict(doc.get("meta") or {}), int(doc["version"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InvalidSpecError(CURVES_CORRUPT.format(path=p, why=f"{type(e).__name__}: {e}")
                               ) from e
    if task is not None and out.task != task:
        raise InvalidSpecError(CURVES_WRONG_TASK.format(path=p, got=out.task, want=task))
    return out



def _unknown_curve(name: str, choices: Mapping[str, Any] | Sequence[str], where: str) -> str:
    names = sorted(choices)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    return UNKNOWN_CURVE.format(name=name, where=where, choices=", ".join(names) or "none",
                                hint=hint)
