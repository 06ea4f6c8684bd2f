"""Fitting factored scaling curves: ``success(x) = 1 - a * (x + n0) ** b`` with bootstrap bands.

See :mod:`robogen.scaling.curves` for the method, its source and the fitting choices; this
module holds the numerical part (:func:`fit_curve`, :func:`fit_curve_bootstrap`,
:func:`predict`) and :mod:`robogen.scaling.curves` re-exports it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from robogen.errors import InvalidSpecError

FIT_METHODS = ("binomial", "log_ls")
DEFAULT_N_BOOT = 500
"""Bootstrap refits by default (percentile bands of 95% have Monte Carlo error ~0.01)."""
N0_BOUNDS = (1e-2, 1e4)
B_BOUNDS = (-5.0, -1e-4)
_LOG_A_BOUNDS = (-30.0, 30.0)
_P_CLIP = 1e-12
_GRID = 48

BAD_POINTS = "{what}; expected x, successes and n as 1-D arrays of equal length P >= 3"
TOO_FEW_X = (
    "a scaling curve has 3 parameters (a, b, n0) and needs at least 3 distinct demonstration "
    "counts, got x = {x}; add points (e.g. --points 0,10,20,40)"
)


@dataclass(frozen=True, eq=False)
class CurveFit:
    """A fitted scaling curve ``success(x) = 1 - a * (x + n0) ** b``.

    Attributes:
        a: Scale of the failure rate [-], > 0.
        b: Power-law exponent [-], < 0 (more negative: steeper).
        n0: Offset [demonstrations], > 0.
        method: ``binomial`` or ``log_ls``.
        deviance: Binomial deviance of the point estimate (2 x log-likelihood ratio against
            the per-point rates; about the number of points minus 3 for a good fit).
        samples: ``(S, 3) float64`` bootstrap samples of ``(a, b, n0)``, or None.
    """

    a: float
    b: float
    n0: float
    method: str = "binomial"
    deviance: float = math.nan
    samples: NDArray[np.float64] | None = field(default=None, repr=False)

    def success(self, x: ArrayLike) -> NDArray[np.float64]:
        """Predicted success rate in [0, 1] at ``x`` demonstrations (any shape)."""
        return _success(np.asarray(x, np.float64), self.a, self.b, self.n0)

    def sample_success(self, x: ArrayLike) -> NDArray[np.float64]:
        """``(S, *x.shape)`` success curves of the bootstrap samples (``(0, ...)`` without)."""
        xs = np.asarray(x, np.float64)
        if self.samples is None or len(self.samples) == 0:
            return np.zeros((0, *xs.shape))
        a, b, n0 = (self.samples[:, i].reshape((-1,) + (1,) * xs.ndim) for i in range(3))
        return _success(xs[None], a, b, n0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form (samples as a list of ``[a, b, n0]``)."""
        return {
            "a": self.a, "b": self.b, "n0": self.n0, "method": self.method,
            "deviance": None if not math.isfinite(self.deviance) else self.deviance,
            "samples": None if self.samples is None else self.samples.tolist(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CurveFit:
        """Inverse of :meth:`to_dict`."""
        samples = d.get("samples")
        arr = None if samples is None else np.asarray(samples, np.float64).reshape(-1, 3)
        dev = d.get("deviance")
        return cls(float(d["a"]), float(d["b"]), float(d["n0"]), str(d.get("method", "binomial")),
                   math.nan if dev is None else float(dev), arr)


def predict(fit: CurveFit, x: ArrayLike, confidence: float = 0.95
            ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Predicted success at ``x`` with a percentile bootstrap band.

    Args:
        fit: The curve.
        x: Demonstration counts, any shape.
        confidence: Two-sided band level, in (0, 1).

    Returns:
        ``(mean, low, high)`` arrays shaped like ``x``: the point-estimate curve and the
        band of the bootstrap curves. Without bootstrap samples ``low == high == mean``.
    """
    _check_confidence(confidence)
    mean = fit.success(x)
    curves = fit.sample_success(x)
    if len(curves) == 0:
        return mean, mean.copy(), mean.copy()
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(curves, [alpha, 1.0 - alpha], axis=0)
    return mean, np.minimum(low, mean), np.maximum(high, mean)


def fixed_n0_bounds(n0: float) -> tuple[float, float]:
    """``n0_bounds`` that pin ``n0`` (a relative width of 1e-9, which the bounded search needs).

    Raises:
        InvalidSpecError: If ``n0`` is not a positive finite number.
    """
    if not (isinstance(n0, (int, float)) and 0 < n0 < math.inf):
        raise InvalidSpecError(f"n0 must be a positive number of demonstrations, got {n0!r}")
    return (float(n0), float(n0) * (1 + 1e-9))


def fit_curve(
    x: ArrayLike,
    successes: ArrayLike,
    n: ArrayLike,
    *,
    method: str = "binomial",
    n0_bounds: tuple[float, float] = N0_BOUNDS,
    b_bounds: tuple[float, float] = B_BOUNDS,
) -> CurveFit:
    """Fit ``success(x) = 1 - a (x + n0)^b`` to per-point success counts.

    Args:
        x: ``(P,)`` demonstrations added at each point (>= 0; repeats allowed, e.g. one point
            per training seed).
        successes: ``(P,)`` successful episodes per point (may be fractional, e.g. expected
            counts), in [0, n].
        n: ``(P,)`` evaluated episodes per point, > 0.
        method: ``binomial`` (maximum likelihood) or ``log_ls`` (see the module docstring).
        n0_bounds: Search range of ``n0`` [demonstrations].
        b_bounds: Search range of ``b`` (both < 0).

    Returns:
        The :class:`CurveFit` (no bootstrap samples).

    Raises:
        InvalidSpecError: On malformed points, fewer than 3 distinct ``x``, an unknown method or
            bad bounds.
    """
    xs, k, nn = _check_points(x, successes, n)
    _check_fit_args(method, n0_bounds, b_bounds)
    theta = _fit(xs, k, nn, method, n0_bounds, b_bounds)
    return _to_fit(theta, method, xs, k, nn)


def fit_curve_bootstrap(
    x: ArrayLike,
    outcomes: Sequence[ArrayLike] | None = None,
    *,
    successes: ArrayLike | None = None,
    n: ArrayLike | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    resample_seeds: bool = True,
    method: str = "binomial",
    n0_bounds: tuple[float, float] = N0_BOUNDS,
    b_bounds: tuple[float, float] = B_BOUNDS,
) -> CurveFit:
    """Fit a curve and bootstrap its parameters over episodes (and seeds).

    Give either ``outcomes`` (per-point episode outcomes) or ``successes`` and ``n``.

    Args:
        x: ``(P,)`` demonstrations added at each point; repeated values are points of
            different training seeds.
        outcomes: ``P`` 1-D boolean arrays, one outcome per evaluated episode. When all have
            the same length, episode ``i`` is taken to be the same initial state at every
            point and the same indices are resampled for all points.
        successes: ``(P,)`` success counts (instead of ``outcomes``; episodes are then
            resampled independently per point, i.e. binomially).
        n: ``(P,)`` episodes per point (with ``successes``).
        n_boot: Bootstrap refits, > 0.
        seed: Seed of the resampling generator.
        resample_seeds: Also resample the points that share an ``x`` (training seeds).
        method: Fitting method (see :func:`fit_curve`).
        n0_bounds: Search range of ``n0``.
        b_bounds: Search range of ``b``.

    Returns:
        The point-estimate :class:`CurveFit` with ``samples`` of shape ``(n_boot, 3)``.

    Raises:
        InvalidSpecError: On malformed inputs (as :func:`fit_curve`), both or neither of
            ``outcomes`` and ``successes``/``n``, or ``n_boot <= 0``.
    """
    if (outcomes is None) == (successes is None and n is None):
        raise InvalidSpecError("give either outcomes (per-point episode outcomes) or "
                               "successes and n, not both or neither")
    if not (isinstance(n_boot, int | np.integer) and n_boot > 0):
        raise InvalidSpecError(f"n_boot must be a positive integer, got {n_boot!r}")
    paired: NDArray[np.bool_] | None = None
    outs: list[NDArray[np.bool_]] = []
    if outcomes is not None:
        outs = [np.asarray(o).astype(bool).reshape(-1) for o in outcomes]
        successes = [int(o.sum()) for o in outs]
        n = [len(o) for o in outs]
        if len({len(o) for o in outs}) == 1:
            paired = np.stack(outs)
    xs, k, nn = _check_points(x, successes, n)
    _check_fit_args(method, n0_bounds, b_bounds)
    theta = _fit(xs, k, nn, method, n0_bounds, b_bounds)
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(xs == v) for v in np.unique(xs)]
    samples = np.empty((n_boot, 3))
    for r in range(n_boot):
        pick = np.concatenate([
            rng.choice(g, size=len(g)) if resample_seeds and len(g) > 1 else g for g in groups])
        if paired is not None:
            idx = rng.integers(0, paired.shape[1], size=paired.shape[1])
            k_r = paired[pick][:, idx].sum(axis=1).astype(np.float64)
        elif outs:
            k_r = np.array([rng.choice(outs[p], size=len(outs[p])).sum() for p in pick], float)
        else:
            k_r = rng.binomial(nn[pick].astype(np.int64), k[pick] / nn[pick]).astype(np.float64)
        th = _fit(xs[pick], k_r, nn[pick], method, n0_bounds, b_bounds, start=theta)
        samples[r] = np.exp(th[0]), th[1], np.exp(th[2])
    fit = _to_fit(theta, method, xs, k, nn)
    return CurveFit(fit.a, fit.b, fit.n0, fit.method, fit.deviance, samples)


# ---- fitting internals -----------------------------------------------------------------------


def _success(x: NDArray[np.float64], a: Any, b: Any, n0: Any) -> NDArray[np.float64]:
    return np.clip(1.0 - a * np.power(x + n0, b), 0.0, 1.0)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise InvalidSpecError(f"confidence must be in (0, 1), got {confidence!r}")


def _check_points(x: Any, successes: Any, n: Any
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    try:
        xs, k, nn = (np.asarray(v, np.float64) for v in (x, successes, n))
    except (TypeError, ValueError) as e:
        raise InvalidSpecError(BAD_POINTS.format(what=f"got non-numeric values ({e})")) from e
    if not (xs.ndim == k.ndim == nn.ndim == 1 and len(xs) == len(k) == len(nn)):
        raise InvalidSpecError(BAD_POINTS.format(
            what=f"got shapes x {xs.shape}, successes {k.shape}, n {nn.shape}"))
    if not (np.all(np.isfinite(xs)) and np.all(xs >= 0)):
        raise InvalidSpecError(BAD_POINTS.format(what=f"x must be finite and >= 0, got {xs}"))
    if not np.all(nn > 0):
        raise InvalidSpecError(BAD_POINTS.format(what=f"n must be > 0 episodes, got {nn}"))
    if not (np.all(np.isfinite(k)) and np.all(k >= 0) and np.all(k <= nn)):
        raise InvalidSpecError(BAD_POINTS.format(
            what=f"successes must be in [0, n], got successes {k} for n {nn}"))
    if len(np.unique(xs)) < 3:
        raise InvalidSpecError(TOO_FEW_X.format(x=xs.tolist()))
    return xs, k, nn


def _check_fit_args(method: str, n0_bounds: tuple[float, float],
                    b_bounds: tuple[float, float]) -> None:
    if method not in FIT_METHODS:
        raise InvalidSpecError(f"fit method must be one of {FIT_METHODS}, got {method!r}")
    lo, hi = n0_bounds
    if not 0 < lo < hi < math.inf:
        raise InvalidSpecError(f"n0_bounds must satisfy 0 < low < high, got {n0_bounds}")
    lo, hi = b_bounds
    if not -math.inf < lo < hi < 0:
        raise InvalidSpecError(f"b_bounds must satisfy low < high < 0, got {b_bounds}")


def _nll(theta: NDArray[np.float64], x: NDArray[np.float64], k: NDArray[np.float64],
         n: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """Binomial negative log-likelihood per episode and its gradient; theta = (log a, b, log n0).
    """
    n0 = math.exp(theta[2])
    log_xn = np.log(x + n0)
    raw = np.exp(theta[0] + theta[1] * log_xn)
    fail = np.clip(raw, _P_CLIP, 1.0 - _P_CLIP)
    total = np.sum(n)
    value = -float(np.sum(k * np.log1p(-fail) + (n - k) * np.log(fail))) / total
    d_fail = np.where(raw == fail, (k / (1.0 - fail) - (n - k) / fail) / total, 0.0) * fail
    grad = np.array([d_fail.sum(), (d_fail * log_xn).sum(),
                     (d_fail * theta[1] * n0 / (x + n0)).sum()])
    return value, grad


def _nll_many(cands: NDArray[np.float64], x: NDArray[np.float64], k: NDArray[np.float64],
              n: NDArray[np.float64]) -> NDArray[np.float64]:
    """_nll values for ``(G, 3)`` candidate thetas."""
    fail = np.clip(np.exp(cands[:, :1] + cands[:, 1:2] * np.log(x + np.exp(cands[:, 2:]))),
                   _P_CLIP, 1.0 - _P_CLIP)
    return -(k * np.log1p(-fail) + (n - k) * np.log(fail)).sum(1) / np.sum(n)


def _grid_log_ls(x: NDArray[np.float64], k: NDArray[np.float64], n: NDArray[np.float64],
                 log_n0: NDArray[np.float64], b_bounds: tuple[float, float]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Weighted LS of log(fail) on log(x + n0) for each n0: (log_a, b, sse) arrays."""
    f = (n - k + 0.5) / (n + 1.0)
    y = np.log(f)
    w = n * f / (1.0 - f)
    z = np.log(x[None, :] + np.exp(log_n0)[:, None])  # (G, P)
    sw = w.sum()
    zbar = (z * w).sum(1) / sw
    ybar = (y * w).sum() / sw
    dz = z - zbar[:, None]
    b = np.clip((w * dz * (y - ybar)).sum(1) / np.maximum((w * dz * dz).sum(1), 1e-300),
                *b_bounds)
    log_a = ybar - b * zbar
    sse = (w * (y - log_a[:, None] - b[:, None] * z) ** 2).sum(1)
    return log_a, b, sse


def _feasible_grid(x: NDArray[np.float64], log_n0: NDArray[np.float64],
                   b_bounds: tuple[float, float], size: int = 24) -> NDArray[np.float64]:
    """``(G, 3)`` starts whose failure rate lies inside (0, 1) at every ``x``.

    The likelihood is flat where ``a (x + n0)^b`` leaves (0, 1) (the prediction is
    clipped there), so a search started there stops at once: the log-space least
    squares start lands there when the curve is steep near ``x = 0``. These starts
    set the failure rate at the smallest ``x`` to values in [0.02, 0.995] for a
    spread of ``b`` and ``n0``.
    """
    n0s = np.unique(log_n0[:: max(1, len(log_n0) // 8)])
    bs = np.linspace(max(b_bounds[0], -3.0), b_bounds[1], size)
    f0 = np.log(np.linspace(0.02, 0.995, size))
    g_n0, g_b, g_f = np.meshgrid(n0s, bs, f0, indexing="ij")
    g_n0, g_b, g_f = g_n0.ravel(), g_b.ravel(), g_f.ravel()
    log_a = g_f - g_b * np.log(x.min() + np.exp(g_n0))  # fail(x_min) = exp(g_f)
    return np.stack([np.clip(log_a, *_LOG_A_BOUNDS), g_b, g_n0], axis=1)


def _fit(x: NDArray[np.float64], k: NDArray[np.float64], n: NDArray[np.float64], method: str,
         n0_bounds: tuple[float, float], b_bounds: tuple[float, float],
         start: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Best theta = (log a, b, log n0)."""
    lo, hi = math.log(n0_bounds[0]), math.log(n0_bounds[1])
    grid = np.linspace(lo, hi, _GRID)
    log_a, b, sse = _grid_log_ls(x, k, n, grid, b_bounds)
    if method == "log_ls":
        i = int(np.argmin(sse))
        left, right = grid[max(i - 1, 0)], grid[min(i + 1, _GRID - 1)]

        def profile(t: float) -> float:
            return float(_grid_log_ls(x, k, n, np.array([t]), b_bounds)[2][0])

        t = optimize.minimize_scalar(profile, bounds=(left, right), method="bounded",
                                     options={"xatol": 1e-8}).x
        la, bb, _ = _grid_log_ls(x, k, n, np.array([t]), b_bounds)
        return np.array([float(la[0]), float(bb[0]), float(t)])
    cands = np.concatenate([np.stack([log_a, b, grid], axis=1),
                            _feasible_grid(x, grid, b_bounds)])
    nll = _nll_many(cands, x, k, n)
    order = np.argsort(nll)
    starts = [cands[i] for i in order[:3]]
    ftol, gtol = 1e-15, 1e-10
    if start is not None:  # a bootstrap refit: one start, the better of grid and warm start
        warm = np.asarray(start, np.float64)
        starts = [warm if _nll(warm, x, k, n)[0] <= nll[order[0]] else cands[order[0]]]
        ftol, gtol = 1e-10, 1e-8
    bounds = [_LOG_A_BOUNDS, b_bounds, (lo, hi)]
    best, best_val = starts[0], math.inf
    for s0 in starts:
        s0 = np.clip(s0, [bd[0] for bd in bounds], [bd[1] for bd in bounds])
        res = optimize.minimize(_nll, s0, args=(x, k, n), jac=True, method="L-BFGS-B",
                                bounds=bounds,
                                options={"ftol": ftol, "gtol": gtol, "maxiter": 2000})
        if res.fun < best_val:
            best, best_val = np.asarray(res.x, np.float64), float(res.fun)
    return best


def _to_fit(theta: NDArray[np.float64], method: str, x: NDArray[np.float64],
            k: NDArray[np.float64], n: NDArray[np.float64]) -> CurveFit:
    a, b, n0 = float(np.exp(theta[0])), float(theta[1]), float(np.exp(theta[2]))
    p = np.clip(_success(x, a, b, n0), _P_CLIP, 1.0 - _P_CLIP)
    rate = k / n
    with np.errstate(divide="ignore", invalid="ignore"):
        ll = k * np.log(p) + (n - k) * np.log1p(-p)
        sat = np.where(k > 0, k * np.log(np.where(k > 0, rate, 1.0)), 0.0) + np.where(
            n - k > 0, (n - k) * np.log(np.where(n - k > 0, 1.0 - rate, 1.0)), 0.0)
    return CurveFit(a, b, n0, method, float(2.0 * np.sum(sat - ll)))
