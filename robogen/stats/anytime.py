"""Anytime-valid intervals for bounded means: confidence sequences by betting, and a stop rule.

A *confidence sequence* (CS) at level ``1 - alpha`` is a sequence of intervals
``C_1, C_2, ...`` with ``P(exists t: mu not in C_t) <= alpha``: it covers the
mean at *every* number of episodes at once, so it stays valid when the number
of episodes is chosen by looking at the data (optional stopping: "stop when the
interval is narrow enough", "stop when the gap is decided"). A fixed-n interval
recomputed after such a data-dependent stop is not valid; this one is.

Method: the hedged-capital betting CS of Waudby-Smith, I. & Ramdas, A. (2024),
"Estimating means of bounded random variables by betting", *JRSS-B* 86(1):
1-27, section 4 (Theorem 3) with the predictable plug-in bets of its eq. (26)
("hedged capital process"). For observations ``x_i`` in ``[0, 1]`` (values in
``[low, high]`` are mapped there linearly) and a candidate mean ``m``::

    K+_t(m) = prod_{i<=t} (1 + l+_i(m) (x_i - m)),   l+_i(m) = min(lam_i, c / m)
    K-_t(m) = prod_{i<=t} (1 - l-_i(m) (x_i - m)),   l-_i(m) = min(lam_i, c / (1 - m))
    C_t = {m : max(theta K+_t(m), (1 - theta) K-_t(m)) < 1 / alpha},   theta = 1/2

Under ``mu = m`` both capitals are nonnegative martingales, so by Ville's
inequality ``C_t`` is a CS. ``K+`` decreases and ``K-`` increases in ``m``,
so ``C_t`` is an interval; it is computed on a grid of candidate means and
reported conservatively (outward to the next rejected grid point), and the
running intersection over time is kept (valid, and it never widens). The bet
``lam_i`` must depend on ``x_1..x_{i-1}`` only (predictable)::

    lam_i = sqrt(2 log(2/alpha) / (n*_i  s2_{i-1}))

with the regularised running variance ``s2_{i-1}`` (prior 1/4, one fake
observation at 1/2, as in the paper) and the horizon ``n*_i``: fixed when a
``horizon`` is given, ``i log(1 + i)`` by default (the paper's choice: tight
at every time), or, with a ``target_halfwidth``, the episodes the
empirical-Bernstein width formula predicts for that target from the past data
(``2 s2_{i-1} log(2/alpha) / w^2``, clipped to ``[i, horizon]``): the bets are
then tuned for the time the stopping rule will stop, which is still predictable,
so validity is untouched (it is tighter there, a little looser elsewhere).

For a paired generalization gap the observations are ``d_i = y_nom,i -
y_pert,i`` in ``[-1, 1]`` (:func:`paired_gap_sequence`); for one success rate
they are the 0/1 outcomes in ``[0, 1]`` (:func:`success_rate_sequence`).

:mod:`robogen.stats.stopping` turns an interval into "stop or run another
batch" (:class:`~robogen.stats.stopping.StopRule`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robogen.errors import MUST_BE_IN_RANGE, InvalidSpecError

METHOD = "betting-hedged-capital"
"""Name of the method recorded with every :class:`AnytimeInterval`."""
CITATION = (
    "Waudby-Smith & Ramdas (2024), Estimating means of bounded random variables by betting, "
    "JRSS-B 86(1): hedged capital confidence sequence with predictable plug-in bets"
)
DEFAULT_GRID = 1001
"""Candidate means on ``[0, 1]`` (after scaling); bounds are conservative by at most one
grid step, ``(high - low) / (DEFAULT_GRID - 1)`` (0.002 for a gap in [-1, 1])."""
DEFAULT_TRUNCATION = 0.5
"""``c`` of the bets ``min(lam, c / m)``: the capital can lose at most half per step."""

BAD_BOUNDS = "low and high must be finite numbers with low < high, got low={low!r}, high={high!r}"
OUT_OF_BOUNDS = (
    "values must lie in [{low}, {high}] (the bounds the interval is valid for), got {bad!r}; "
    "pass per-episode differences of 0/1 successes for a paired gap"
)


@dataclass(frozen=True, slots=True)
class AnytimeInterval:
    """An anytime-valid interval for a bounded mean after ``n`` observations.

    Attributes:
        estimate: Sample mean of the observations (NaN when ``n == 0``) [same unit as the
            observations: success rate, or paired gap].
        low: Lower bound; ``low`` itself at ``n == 0``.
        high: Upper bound; ``high`` itself at ``n == 0``.
        n: Observations (episodes, or episode pairs) so far.
        confidence: ``1 - alpha``: the probability that the sequence covers the mean at
            every ``n`` simultaneously is at least this.
        method: :data:`METHOD`.
    """

    estimate: float
    low: float
    high: float
    n: int
    confidence: float
    method: str = METHOD

    @property
    def halfwidth(self) -> float:
        """``(high - low) / 2``."""
        return (self.high - self.low) / 2.0

    def contains(self, value: float) -> bool:
        """Whether ``low <= value <= high``."""
        return self.low <= value <= self.high


class BettingConfidenceSequence:
    """Hedged-capital betting confidence sequences for ``S`` streams at once (vectorized).

    Waudby-Smith & Ramdas (2024, JRSS-B 86(1)), Theorem 3 with predictable plug-in bets;
    see the module docstring for the construction and the choice of bets. Each stream
    is a sequence of observations in ``[low, high]``; :meth:`update` appends observations
    (in order: the sequence depends on their order), :meth:`interval` / :meth:`bounds`
    give the current interval. Memory and time per observation are ``O(S * grid)``.

    Args:
        n_streams: ``S``, independent streams, >= 1.
        low: Lower bound of every observation.
        high: Upper bound of every observation (> low).
        confidence: ``1 - alpha``, in (0, 1).
        horizon: Number of observations the bets are tuned for (e.g. the cap), or None.
        target_halfwidth: Tune the bets for the time this half-width is predicted to be
            reached (clipped to ``horizon``); in the observations' unit, in
            ``(0, (high - low) / 2)``.
        grid: Candidate means, >= 3.
        truncation: ``c`` in (0, 1).

    Raises:
        InvalidSpecError: On bad bounds, level, horizon, target, grid or truncation.
    """

    def __init__(
        self,
        n_streams: int = 1,
        *,
        low: float = -1.0,
        high: float = 1.0,
        confidence: float = 0.95,
        horizon: int | None = None,
        target_halfwidth: float | None = None,
        grid: int = DEFAULT_GRID,
        truncation: float = DEFAULT_TRUNCATION,
    ) -> None:
        _check_bounds(low, high)
        _check_int_at_least("n_streams", n_streams, 1)
        _check_open_unit("confidence", confidence)
        if horizon is not None:
            _check_int_at_least("horizon", horizon, 1)
        span = float(high) - float(low)
        if target_halfwidth is not None:
            check_halfwidth(target_halfwidth, span / 2.0)
        _check_int_at_least("grid", grid, 3)
        _check_open_unit("truncation", truncation)
        self.low, self.high, self.confidence = float(low), float(high), float(confidence)
        self.horizon = None if horizon is None else int(horizon)
        self.target_halfwidth = None if target_halfwidth is None else float(target_halfwidth)
        self._span = span
        self._alpha = 1.0 - self.confidence
        self._log_thresh = math.log(2.0 / self._alpha)  # theta = 1/2 on each side
        self._log_bet = 2.0 * self._log_thresh
        self._m = np.linspace(0.0, 1.0, int(grid))
        with np.errstate(divide="ignore"):
            self._cap_pos = np.where(self._m > 0, truncation / self._m, np.inf)
            self._cap_neg = np.where(self._m < 1, truncation / (1.0 - self._m), np.inf)
        s = int(n_streams)
        self.n = np.zeros(s, np.int64)
        self._sum = np.zeros(s)
        self._ss = np.full(s, 0.25)  # prior variance 1/4 times one fake observation
        self._logk_pos = np.zeros((s, int(grid)))
        self._logk_neg = np.zeros((s, int(grid)))
        self._lo_i = np.zeros(s, np.int64)  # running intersection, as grid indices
        self._hi_i = np.full(s, int(grid) - 1, np.int64)

    @property
    def n_streams(self) -> int:
        """Number of streams ``S``."""
        return int(self.n.shape[0])

    def update(self, values: ArrayLike, active: ArrayLike | None = None) -> None:
        """Append observations to the streams.

        Args:
            values: ``(S,)`` one observation per stream, or ``(S, k)`` k observations per
                stream in order; float in ``[low, high]``. Streams not in ``active`` ignore
                their entries.
            active: ``(S,)`` bool, the streams to update (default all).

        Raises:
            InvalidSpecError: On a wrong shape, NaN, or values outside ``[low, high]``.
        """
        v = np.asarray(values, np.float64)
        if v.ndim == 1:
            v = v[:, None]
        if v.ndim != 2 or v.shape[0] != self.n_streams:
            raise InvalidSpecError(f"values must have shape ({self.n_streams},) or "
                                   f"({self.n_streams}, k), got {np.shape(values)}")
        idx = (np.arange(self.n_streams) if active is None
               else np.flatnonzero(np.asarray(active, bool)))
        v = v[idx]
        bad = v[~((v >= self.low) & (v <= self.high))]
        if bad.size:
            raise InvalidSpecError(OUT_OF_BOUNDS.format(low=self.low, high=self.high,
                                                        bad=bad[:5].tolist()))
        if idx.size == 0 or v.shape[1] == 0:
            return
        x = np.clip((v - self.low) / self._span, 0.0, 1.0)
        for j in range(x.shape[1]):  # intersect after every observation: the result does
            self._step(idx, x[:, j])  # not depend on how the stream was cut into updates
            self._intersect(idx)

    def _step(self, idx: NDArray[np.int64], x: NDArray[np.float64]) -> None:
        t = self.n[idx] + 1  # index of this observation, 1-based
        s2 = self._ss[idx] / t  # regularised variance of the first t-1 observations
        lam = np.sqrt(self._log_bet / (self._horizon(t, s2) * s2))[:, None]
        # Grid points outside a stream's running interval are excluded for good, so only
        # the union of the streams' windows is updated.
        a, b = int(self._lo_i[idx].min()), int(self._hi_i[idx].max()) + 1
        dx = x[:, None] - self._m[None, a:b]
        rows = idx[:, None]
        self._logk_pos[rows, np.arange(a, b)] += np.log1p(
            np.minimum(lam, self._cap_pos[None, a:b]) * dx)
        self._logk_neg[rows, np.arange(a, b)] += np.log1p(
            -np.minimum(lam, self._cap_neg[None, a:b]) * dx)
        self.n[idx] = t
        self._sum[idx] += x
        mu = (0.5 + self._sum[idx]) / (t + 1)
        self._ss[idx] += (x - mu) ** 2

    def _horizon(self, t: NDArray[np.int64], s2: NDArray[np.float64]) -> NDArray[np.float64]:
        tf = t.astype(np.float64)
        if self.target_halfwidth is not None:
            w = self.target_halfwidth / self._span  # half-width in [0, 1] units
            pred = self._log_bet * s2 / (w * w)
            n_star = np.maximum(pred, tf)
            if self.horizon is not None:
                n_star = np.minimum(n_star, float(self.horizon))
            return np.maximum(n_star, 1.0)
        if self.horizon is not None:
            return np.full_like(tf, float(self.horizon))
        return tf * np.log1p(tf)

    def _intersect(self, idx: NDArray[np.int64]) -> None:
        a, b = int(self._lo_i[idx].min()), int(self._hi_i[idx].max()) + 1
        cols = np.arange(a, b)[None, :]
        lo_i, hi_i = self._lo_i[idx][:, None], self._hi_i[idx][:, None]
        window = (cols >= lo_i) & (cols <= hi_i)
        keep_pos = (self._logk_pos[idx, a:b] < self._log_thresh) & window  # m not rejected
        keep_neg = (self._logk_neg[idx, a:b] < self._log_thresh) & window
        ok = keep_pos.any(1) & keep_neg.any(1)  # else: the alpha event; keep the interval
        # K+ falls with m: its first kept point bounds from below; one grid step outward
        # keeps the bound conservative (the exact crossing lies inside that step).
        first = a + keep_pos.argmax(1) - 1
        last = a + (b - a - 1) - keep_neg[:, ::-1].argmax(1) + 1
        new_lo = np.maximum(self._lo_i[idx], first)
        new_hi = np.minimum(self._hi_i[idx], last)
        ok &= new_lo < new_hi
        self._lo_i[idx] = np.where(ok, new_lo, self._lo_i[idx])
        self._hi_i[idx] = np.where(ok, new_hi, self._hi_i[idx])

    def bounds(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(low, high)``, each ``(S,) float64``, in the observations' unit."""
        return (self.low + self._span * self._m[self._lo_i],
                self.low + self._span * self._m[self._hi_i])

    def estimates(self) -> NDArray[np.float64]:
        """``(S,) float64`` sample means (NaN where no observation yet)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            mean01 = np.where(self.n > 0, self._sum / np.maximum(self.n, 1), np.nan)
        return self.low + self._span * mean01

    def interval(self, stream: int = 0) -> AnytimeInterval:
        """The current :class:`AnytimeInterval` of one stream."""
        lo, hi = self.bounds()
        return AnytimeInterval(float(self.estimates()[stream]), float(lo[stream]),
                               float(hi[stream]), int(self.n[stream]), self.confidence)


class BetTuning(TypedDict, total=False):
    """How the bets of a :class:`BettingConfidenceSequence` are tuned (its keyword arguments;
    defaults there): ``confidence``, ``horizon``, ``target_halfwidth``, ``grid``."""

    confidence: float
    horizon: int | None
    target_halfwidth: float | None
    grid: int


def mean_sequence(values: ArrayLike, *, low: float, high: float,
                  **tuning: Unpack[BetTuning]) -> AnytimeInterval:
    """Anytime-valid interval of the mean of a stream of bounded values, after all of them.

    Waudby-Smith & Ramdas (2024, JRSS-B 86(1)) hedged-capital CS (module docstring). The
    result is a deterministic function of the values *in order*, the bounds and the
    tuning arguments, so a resumed run that replays the same values gets the same
    interval; keep ``horizon``/``target_halfwidth`` fixed over a run.

    Args:
        values: ``(n,)`` float observations in ``[low, high]``, in the order observed.
        low: Lower bound of the observations.
        high: Upper bound.
        **tuning: :class:`BetTuning`: ``confidence`` (``1 - alpha``), ``horizon``
            (observations the bets are tuned for, e.g. the cap), ``target_halfwidth`` (tune
            the bets for the time this half-width is predicted), ``grid`` (candidate means).

    Returns:
        The :class:`AnytimeInterval`; ``[low, high]`` with NaN estimate when ``n == 0``.

    Raises:
        InvalidSpecError: On values outside ``[low, high]``, a non-1-D input or bad
            arguments (see :class:`BettingConfidenceSequence`).
    """
    v = np.asarray(values, np.float64)
    if v.ndim != 1:
        raise InvalidSpecError(f"values must be 1-D (one value per episode), got shape {v.shape}")
    cs = BettingConfidenceSequence(1, low=low, high=high, **tuning)
    cs.update(v[None, :])
    return cs.interval(0)


def paired_gap_sequence(nominal: ArrayLike, perturbed: ArrayLike,
                        **tuning: Unpack[BetTuning]) -> AnytimeInterval:
    """Anytime-valid interval of the paired gap ``P(nominal) - P(perturbed)``.

    The observations are the per-episode differences ``d_i = y_nom,i - y_pert,i`` in
    ``{-1, 0, 1}`` on the same episode indices (common random numbers), in episode order,
    bounded in ``[-1, 1]``; the CS is that of Waudby-Smith & Ramdas (2024, JRSS-B 86(1))
    (module docstring). Valid whatever rule chose ``n`` from the data seen so far.

    Args:
        nominal: ``(n,)`` bool success of episodes ``0..n-1`` under the nominal condition.
        perturbed: ``(n,)`` bool success of the same episodes under the perturbation.
        **tuning: As :func:`mean_sequence` (``horizon`` counts pairs; ``target_halfwidth``
            in (0, 1)).

    Returns:
        The :class:`AnytimeInterval` of the gap; ``[-1, 1]`` when ``n == 0``.

    Raises:
        InvalidSpecError: If the arrays are not 1-D 0/1 arrays of equal length, or on
            bad arguments.
    """
    from robogen.stats.intervals import _as_outcomes

    nom, per = _as_outcomes("nominal and perturbed", nominal, perturbed)
    d = nom.astype(np.float64) - per.astype(np.float64)
    return mean_sequence(d, low=-1.0, high=1.0, **tuning)


def success_rate_sequence(outcomes: ArrayLike, **tuning: Unpack[BetTuning]) -> AnytimeInterval:
    """Anytime-valid interval of one success rate from ``(n,)`` bool outcomes in order.

    Same method and arguments as :func:`paired_gap_sequence`, on ``[0, 1]``; the target
    half-width must be in (0, 0.5).
    """
    from robogen.stats.intervals import _as_outcomes

    (y,) = _as_outcomes("outcomes", outcomes)
    return mean_sequence(y.astype(np.float64), low=0.0, high=1.0, **tuning)


def _check_int_at_least(field: str, value: object, low: int) -> None:
    if not (isinstance(value, int | np.integer) and value >= low):
        raise InvalidSpecError(MUST_BE_IN_RANGE.format(field=field, low=low, high="inf",
                                                       value=value))


def _check_open_unit(field: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise InvalidSpecError(MUST_BE_IN_RANGE.format(
            field=field, low="0 (exclusive)", high="1 (exclusive)", value=value))


def _check_bounds(low: float, high: float) -> None:
    ok = all(isinstance(v, int | float | np.floating) and math.isfinite(v) for v in (low, high))
    if not ok or not low < high:
        raise InvalidSpecError(BAD_BOUNDS.format(low=low, high=high))


def check_halfwidth(value: float, upper: float) -> None:
    """Raise :class:`InvalidSpecError` unless ``0 < value < upper`` (a finite number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and 0.0 < value < upper):
        raise InvalidSpecError(MUST_BE_IN_RANGE.format(
            field="target_halfwidth", low="0 (exclusive)", high=f"{upper:g} (exclusive)",
            value=value))
