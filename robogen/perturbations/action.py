"""The ``action`` axis: what the robot executes differs from what the policy chose.

One actuation fault is drawn per episode and applied in the wrapper to every action before
the env steps (Robust-Gymnasium's action perturbations, Gu et al. 2025; sticky actions,
Machado et al. 2018). ``half_range_d`` is half the action space's width per dimension (1
where the space is unbounded); ``m`` is the episode's magnitude in ``[severity / 2, severity]``;
every executed action is clipped to the action space.

===========  ==============================================================================
kind         the action executed at step ``t``
===========  ==============================================================================
noise        ``a_t + N(0, (0.3 m half_range_d)^2)``, fresh per step
latency      ``a_{t-k}`` with ``k = ceil(4 m)`` steps (1 to 4); the first ``k`` steps
             execute the no-op action (0, clipped to the space)
repeat       with probability ``0.5 m`` the previous executed action again (sticky actions)
bias         ``a_t + 0.3 m half_range_d s_d``, one sign ``s_d = +-1`` per dimension for the
             episode (a miscalibrated actuator)
===========  ==============================================================================

Splits: train draws ``noise`` or ``latency``, test ``repeat`` or ``bias`` (held-out fault
kinds, disjoint); ``all`` any of the four.

Negative or fractional latencies cannot be asked for: the axis is set by its severity alone
(``k`` grows with it).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from robogen.perturbations import helpers as u
from robogen.perturbations.base import (
    Axis,
    FilterContext,
    Perturbation,
    StepFilter,
    register_axis,
)

ACTION_KINDS = {"train": ("noise", "latency"), "test": ("repeat", "bias")}
"""Fault kinds of each split (disjoint); ``all`` draws from both."""
ACTION_NOISE_STD = 0.3
"""Action noise standard deviation at magnitude 1, as a fraction of the half range."""
MAX_LATENCY_STEPS = 4
"""Delay at magnitude 1 [steps]."""
MAX_REPEAT = 0.5
"""Probability that the previous action is executed again at magnitude 1."""
MAX_BIAS = 0.3
"""Constant offset at magnitude 1, as a fraction of the half range."""


@dataclass(frozen=True, slots=True)
class ActionPerturbation(Perturbation):
    """The actuation fault of one episode.

    Attributes:
        kind: ``noise``, ``latency``, ``repeat`` or ``bias``.
        magnitude: ``m`` in [0, 1] (see the module table).
        latency_steps: ``k`` for ``latency`` (0 otherwise) [steps].
        stream_seed: Seed of the episode's stream (noise, repeats, bias signs).
    """

    axis: ClassVar[str] = "action"

    kind: str
    magnitude: float
    latency_steps: int
    stream_seed: int

    def step_filter(self, context: FilterContext) -> StepFilter | None:
        """An :class:`ActionFilter` (None at magnitude 0)."""
        if self.magnitude <= 0:
            return None
        return ActionFilter(self, context)


class ActionFilter(StepFilter):
    """Applies an :class:`ActionPerturbation` to every action of one episode."""

    def __init__(self, p: ActionPerturbation, context: FilterContext) -> None:
        self.p = p
        self.rng = np.random.default_rng(p.stream_seed)
        low, high = context.action_low, context.action_high
        self.low, self.high = low, high
        bounded = low is not None and high is not None
        shape = context.action_shape
        half = (np.where(np.isfinite(high - low), (high - low) / 2.0, 1.0)  # type: ignore[operator]
                if bounded else np.ones(shape))
        self.half = np.broadcast_to(half, shape).astype(np.float64)
        noop = np.zeros(shape, np.float32)
        if bounded:
            noop = np.clip(noop, low, high).astype(np.float32)  # type: ignore[arg-type]
        self.queue: deque[np.ndarray] = deque([noop] * p.latency_steps)
        self.previous: np.ndarray | None = None
        self.offset = (MAX_BIAS * p.magnitude * self.half
                       * self.rng.choice((-1.0, 1.0), size=shape)) if p.kind == "bias" else None
        if self.offset is not None:
            self.applied = {"offset": [round(float(x), 6) for x in self.offset.ravel()]}

    def action(self, action: np.ndarray) -> np.ndarray:
        """The action executed (see the module table)."""
        p = self.p
        a = np.asarray(action)
        if p.kind == "latency":
            self.queue.append(a.copy())
            return self.queue.popleft()
        if p.kind == "repeat":
            if self.previous is not None and self.rng.random() < MAX_REPEAT * p.magnitude:
                return self.previous
            self.previous = a.copy()
            return a
        if p.kind == "noise":
            out = a + self.rng.normal(size=a.shape) * (ACTION_NOISE_STD * p.magnitude * self.half)
        else:
            out = a + self.offset  # type: ignore[operator]
        if self.low is not None and self.high is not None:
            out = np.clip(out, self.low, self.high)
        return np.asarray(out, dtype=a.dtype)


@register_axis("action")
class ActionAxis(Axis):
    """Actuation faults: action noise, latency (k-step delay), sticky repeats, bias."""

    kind: ClassVar[str] = "actuation"
    distinct_values: ClassVar[str] = ""  # a per-step process / an instruction, not a scene
    description: ClassVar[str] = (
        "actuation fault per step: action noise, k-step latency, sticky repeats, bias")

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The kind of fault (held-out kinds)."""
        return frozenset({values["kind"]})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: Any
               ) -> ActionPerturbation:
        """Draw a kind from the split's set, a magnitude and the episode's seed."""
        m = u.check_and_magnitude(rng, severity, split)
        kinds = ACTION_KINDS.get(split) or (*ACTION_KINDS["train"], *ACTION_KINDS["test"])
        kind = kinds[int(rng.integers(len(kinds)))]
        k = max(1, math.ceil(round(MAX_LATENCY_STEPS * m, 9))) if kind == "latency" else 0
        return ActionPerturbation(kind=kind, magnitude=round(m, 6), latency_steps=k,
                                  stream_seed=int(rng.integers(2**63)))
