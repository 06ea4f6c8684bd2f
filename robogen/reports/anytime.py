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

:class:`StopRule` and :func:`stop_decision` turn an interval into "stop or
run another batch": stop when the half-width reaches the target (``width``),
when the interval excludes a user's gap threshold (``decided``), or at the cap
(``cap``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
STOP_REASONS = ("width", "decided", "cap")

BAD_BOUNDS = "low and high must be finite numbers with low < high, got low={low!r}, high={high!r}"
OUT_OF_BOUNDS = (
    "values must lie in [{low}, {high}] (the bounds the interval is valid for), got {bad!r}; "
    "pass per-episode differences of 0/1 successes for a paired gap"
)
MAX_BELOW_BATCH = (
    "max_episodes ({max_episodes}) is below the batch size ({batch_size}); "
    "raise max_episodes or lower the batch size"
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
        if not (isinstance(n_streams, int | np.integer) and n_streams >= 1):
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(field="n_streams", low=1, high="inf",
                                                           value=n_streams))
        if not 0.0 < confidence < 1.0:
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(
                field="confidence", low="0 (exclusive)", high="1 (exclusive)", value=confidence))
        if horizon is not None and not (isinstance(horizon, int | np.integer) and horizon >= 1):
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(field="horizon", low=1, high="inf",
                                                           value=horizon))
        span = float(high) - float(low)
        if target_halfwidth is not None:
            _check_halfwidth(target_halfwidth, span / 2.0)
        if not (isinstance(grid, int | np.integer) and grid >= 3):
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(field="grid", low=3, high="inf",
                                                           value=grid))
        if not 0.0 < truncation < 1.0:
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(
                field="truncation", low="0 (exclusive)", high="1 (exclusive)", value=truncation))
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


def mean_sequence(
    values: ArrayLike,
    *,
    low: float,
    high: float,
    confidence: float = 0.95,
    horizon: int | None = None,
    target_halfwidth: float | None = None,
    grid: int = DEFAULT_GRID,
) -> AnytimeInterval:
    """Anytime-valid interval of the mean of a stream of bounded values, after all of them.

    Waudby-Smith & Ramdas (2024, JRSS-B 86(1)) hedged-capital CS (module docstring). The
    result is a deterministic function of the values *in order*, the bounds and the
    tuning arguments, so a resumed run that replays the same values gets the same
    interval; keep ``horizon``/``target_halfwidth`` fixed over a run.

    Args:
        values: ``(n,)`` float observations in ``[low, high]``, in the order observed.
        low: Lower bound of the observations.
        high: Upper bound.
        confidence: ``1 - alpha``.
        horizon: Observations the bets are tuned for (e.g. the cap), or None.
        target_halfwidth: Tune the bets for the time this half-width is predicted.
        grid: Candidate means.

    Returns:
        The :class:`AnytimeInterval`; ``[low, high]`` with NaN estimate when ``n == 0``.

    Raises:
        InvalidSpecError: On values outside ``[low, high]``, a non-1-D input or bad
            arguments (see :class:`BettingConfidenceSequence`).
    """
    v = np.asarray(values, np.float64)
    if v.ndim != 1:
        raise InvalidSpecError(f"values must be 1-D (one value per episode), got shape {v.shape}")
    cs = BettingConfidenceSequence(1, low=low, high=high, confidence=confidence,
                                   horizon=horizon, target_halfwidth=target_halfwidth, grid=grid)
    cs.update(v[None, :])
    return cs.interval(0)


def paired_gap_sequence(
    nominal: ArrayLike,
    perturbed: ArrayLike,
    *,
    confidence: float = 0.95,
    horizon: int | None = None,
    target_halfwidth: float | None = None,
    grid: int = DEFAULT_GRID,
) -> AnytimeInterval:
    """Anytime-valid interval of the paired gap ``P(nominal) - P(perturbed)``.

    The observations are the per-episode differences ``d_i = y_nom,i - y_pert,i`` in
    ``{-1, 0, 1}`` on the same episode indices (common random numbers), in episode order,
    bounded in ``[-1, 1]``; the CS is that of Waudby-Smith & Ramdas (2024, JRSS-B 86(1))
    (module docstring). Valid whatever rule chose ``n`` from the data seen so far.

    Args:
        nominal: ``(n,)`` bool success of episodes ``0..n-1`` under the nominal condition.
        perturbed: ``(n,)`` bool success of the same episodes under the perturbation.
        confidence: ``1 - alpha``.
        horizon: Pairs the bets are tuned for (e.g. the cap), or None.
        target_halfwidth: Tune the bets for the time this half-width is predicted, in
            (0, 1).
        grid: Candidate means.

    Returns:
        The :class:`AnytimeInterval` of the gap; ``[-1, 1]`` when ``n == 0``.

    Raises:
        InvalidSpecError: If the arrays are not 1-D 0/1 arrays of equal length, or on
            bad arguments.
    """
    from robogen.reports.stats import _as_outcomes

    nom, per = _as_outcomes("nominal and perturbed", nominal, perturbed)
    d = nom.astype(np.float64) - per.astype(np.float64)
    return mean_sequence(d, low=-1.0, high=1.0, confidence=confidence, horizon=horizon,
                         target_halfwidth=target_halfwidth, grid=grid)


def success_rate_sequence(
    outcomes: ArrayLike,
    *,
    confidence: float = 0.95,
    horizon: int | None = None,
    target_halfwidth: float | None = None,
    grid: int = DEFAULT_GRID,
) -> AnytimeInterval:
    """Anytime-valid interval of one success rate from ``(n,)`` bool outcomes in order.

    Same method and arguments as :func:`paired_gap_sequence`, on ``[0, 1]``; the target
    half-width must be in (0, 0.5).
    """
    from robogen.reports.stats import _as_outcomes

    (y,) = _as_outcomes("outcomes", outcomes)
    return mean_sequence(y.astype(np.float64), low=0.0, high=1.0, confidence=confidence,
                         horizon=horizon, target_halfwidth=target_halfwidth, grid=grid)


@dataclass(frozen=True, slots=True)
class StopRule:
    """When a sequentially evaluated condition stops.

    Attributes:
        target_halfwidth: Stop once the interval's half-width is at most this, in (0, 1)
            [success-rate points as a fraction, e.g. 0.05].
        max_episodes: Cap on episodes (pairs) per condition, >= ``batch_size``.
        batch_size: Episodes per batch (the scheduling unit), >= 1.
        gap_threshold: Optional: stop as soon as the interval lies wholly above or
            below this gap (``decided``), in (-1, 1).
        confidence: Level of the interval.

    Raises:
        InvalidSpecError: On a target outside (0, 1), ``batch_size < 1``, ``max_episodes
            < batch_size``, a threshold outside (-1, 1) or a bad level.
    """

    target_halfwidth: float = 0.05
    max_episodes: int = 1000
    batch_size: int = 10
    gap_threshold: float | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _check_halfwidth(self.target_halfwidth, 1.0)
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(field="batch_size", low=1,
                                                           high="inf", value=self.batch_size))
        if not (isinstance(self.max_episodes, int) and self.max_episodes >= self.batch_size):
            raise InvalidSpecError(MAX_BELOW_BATCH.format(max_episodes=self.max_episodes,
                                                          batch_size=self.batch_size))
        if self.gap_threshold is not None and not (
                isinstance(self.gap_threshold, int | float) and -1.0 < self.gap_threshold < 1.0):
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(
                field="gap_threshold", low="-1 (exclusive)", high="1 (exclusive)",
                value=self.gap_threshold))
        if not 0.0 < self.confidence < 1.0:
            raise InvalidSpecError(MUST_BE_IN_RANGE.format(
                field="confidence", low="0 (exclusive)", high="1 (exclusive)",
                value=self.confidence))

    def sequence(self, n_streams: int = 1, *, low: float = -1.0, high: float = 1.0,
                 grid: int = DEFAULT_GRID) -> BettingConfidenceSequence:
        """A :class:`BettingConfidenceSequence` tuned for this rule (target and cap)."""
        return BettingConfidenceSequence(n_streams, low=low, high=high,
                                         confidence=self.confidence,
                                         horizon=self.max_episodes,
                                         target_halfwidth=min(self.target_halfwidth,
                                                              (high - low) / 2.0 * 0.999),
                                         grid=grid)

    def interval(self, nominal: ArrayLike, perturbed: ArrayLike) -> AnytimeInterval:
        """:func:`paired_gap_sequence` with the bets tuned for this rule."""
        return paired_gap_sequence(nominal, perturbed, confidence=self.confidence,
                                   horizon=self.max_episodes,
                                   target_halfwidth=self.target_halfwidth)


@dataclass(frozen=True, slots=True)
class StopDecision:
    """Outcome of :func:`stop_decision`.

    Attributes:
        stop: Whether the condition stops now.
        reason: ``width`` (half-width <= target), ``decided`` (interval wholly above or
            below the gap threshold), ``cap`` (``max_episodes`` reached), or None.
        n: Episodes (pairs) seen.
        next_batch: Episodes to run next (0 when stopping): a multiple of the batch size
            (the last one may be cut at the cap), about half the episodes the current
            width predicts are still needed, at most ``n`` (the count at most doubles),
            at least one batch.
        interval: The interval the decision was taken on.
    """

    stop: bool
    reason: str | None
    n: int
    next_batch: int
    interval: AnytimeInterval


def stop_decision(interval: AnytimeInterval, rule: StopRule) -> StopDecision:
    """Stop now or run another batch, given the anytime-valid interval so far.

    The checks run in the order ``decided``, ``width``, ``cap``, so a run that
    reaches the cap with a decided gap says ``decided``. The stop is a function of the
    interval only, which is a function of the outcomes in episode order: a resumed
    run that replays the same episodes stops at the same place.

    Next batch: with half-width ``h`` after ``n`` episodes, the width shrinks about as
    ``1 / sqrt(n)``, so ``n (h / target)^2`` episodes are predicted in all; half of what
    is left is run next (to avoid overshooting), at most ``n`` (early widths predict
    poorly, so the count at most doubles per step), rounded up to whole batches, at least
    one batch, at most up to the cap.

    Args:
        interval: The current interval (e.g. from :meth:`StopRule.interval`).
        rule: The :class:`StopRule`.

    Returns:
        The :class:`StopDecision`.
    """
    n = interval.n
    thr = rule.gap_threshold
    reason = None
    if n > 0 and thr is not None and (interval.low > thr or interval.high < thr):
        reason = "decided"
    elif n > 0 and interval.halfwidth <= rule.target_halfwidth:
        reason = "width"
    elif n >= rule.max_episodes:
        reason = "cap"
    if reason is not None:
        return StopDecision(True, reason, n, 0, interval)
    b = rule.batch_size
    if n == 0:
        want = b
    else:
        predicted = n * (interval.halfwidth / rule.target_halfwidth) ** 2
        want = max(b, math.ceil(min(max(predicted - n, 0.0) / 2.0, n) / b) * b)
    return StopDecision(False, None, n, int(min(want, rule.max_episodes - n)), interval)


def simulate_stop_rule(
    values: ArrayLike,
    rule: StopRule,
    *,
    low: float = -1.0,
    high: float = 1.0,
    grid: int = DEFAULT_GRID,
) -> tuple[NDArray[np.int64], tuple[str, ...], NDArray[np.float64], NDArray[np.float64]]:
    """Run :func:`stop_decision` on ``S`` pre-drawn streams, batch by batch (vectorized).

    Each stream is consumed exactly as a sequential evaluation would: start with one
    batch, ask :func:`stop_decision`, run its ``next_batch``, and so on. Used by the
    tests and ``benchmarks/bench_sequential.py`` to measure coverage *under the stopping
    rule itself*.

    Args:
        values: ``(S, N) float`` observations in ``[low, high]``; ``N >= rule.max_episodes``.
        rule: The :class:`StopRule`.
        low: Lower bound of the observations.
        high: Upper bound.
        grid: Candidate means.

    Returns:
        ``(n, reasons, lows, highs)``: ``(S,) int64`` episodes used, the stop reason per
        stream, and ``(S,) float64`` bounds at the stop.

    Raises:
        InvalidSpecError: If ``values`` is not 2-D with at least ``max_episodes`` columns.
    """
    v = np.asarray(values, np.float64)
    if v.ndim != 2 or v.shape[1] < rule.max_episodes:
        raise InvalidSpecError(f"values must have shape (S, N) with N >= max_episodes "
                               f"({rule.max_episodes}), got {v.shape}")
    s = v.shape[0]
    cs = rule.sequence(s, low=low, high=high, grid=grid)
    reasons: list[str | None] = [None] * s
    pending = np.zeros(s, np.int64)
    while True:
        lo, hi = cs.bounds()
        est = cs.estimates()
        for i in np.flatnonzero(pending == 0):
            if reasons[i] is not None:
                continue
            dec = stop_decision(AnytimeInterval(float(est[i]), float(lo[i]), float(hi[i]),
                                                int(cs.n[i]), rule.confidence), rule)
            reasons[i] = dec.reason
            pending[i] = dec.next_batch
        if not pending.any():
            break
        while pending.any():
            act = pending > 0
            pos = np.minimum(cs.n, v.shape[1] - 1)
            cs.update(v[np.arange(s), pos], act)
            pending[act] -= 1
    lo, hi = cs.bounds()
    return cs.n.copy(), tuple(str(r) for r in reasons), lo, hi


def _check_bounds(low: float, high: float) -> None:
    ok = all(isinstance(v, int | float | np.floating) and math.isfinite(v) for v in (low, high))
    if not ok or not low < high:
        raise InvalidSpecError(BAD_BOUNDS.format(low=low, high=high))


def _check_halfwidth(value: float, upper: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and 0.0 < value < upper):
        raise InvalidSpecError(MUST_BE_IN_RANGE.format(
            field="target_halfwidth", low="0 (exclusive)", high=f"{upper:g} (exclusive)",
            value=value))
