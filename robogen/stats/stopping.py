"""When a sequentially evaluated condition stops: a stop rule on an anytime-valid interval.

Episodes of a condition run in batches; after each batch the paired-gap
confidence sequence of :mod:`robogen.stats.anytime` (Waudby-Smith & Ramdas
2024, JRSS-B 86(1)) is updated and :func:`stop_decision` says whether to stop:

* ``decided``: the interval lies wholly above or below a gap threshold the user
  gave ("is this axis costing more than 10 points?");
* ``width``: its half-width is at most the target;
* ``cap``: ``max_episodes`` are reached.

Because the interval covers the gap at every number of episodes at once, the
interval reported at the stop is valid whatever the rule saw on the way.
:func:`simulate_stop_rule` runs the rule on many pre-drawn streams (tests and
``benchmarks/bench_sequential.py`` measure coverage under the rule itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robogen.errors import MUST_BE_IN_RANGE, InvalidSpecError
from robogen.stats.anytime import (
    DEFAULT_GRID,
    AnytimeInterval,
    BettingConfidenceSequence,
    check_halfwidth,
    paired_gap_sequence,
)

STOP_REASONS = ("width", "decided", "cap")
MAX_BELOW_BATCH = (
    "max_episodes ({max_episodes}) is below the batch size ({batch_size}); "
    "raise max_episodes or lower the batch size"
)


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
        check_halfwidth(self.target_halfwidth, 1.0)
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
