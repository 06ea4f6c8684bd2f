"""Evaluation plans: conditions, work units and the seeds of every episode.

Seeds (common random numbers): one run seed spawns everything through
``numpy.random.SeedSequence``. Episode ``i``'s reset seed and perturbation
seed depend only on ``(run_seed, i)``, never on the condition, so the nominal
and every perturbed condition start episode ``i`` from the same initial state
and gaps are paired differences. Each axis then draws its values from its own
stream (see :class:`robogen.perturbations.wrapper.PerturbedEnv`), so an axis
gets the same values for episode ``i`` alone and in the combined condition.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robogen.types import COMBINED, NOMINAL, AxisLevel, Condition, Split, WorkUnit, split_of

_RESET_STREAM = 0
_PERTURBATION_STREAM = 1


def episode_seed(run_seed: int, episode_index: int) -> int:
    """Seed passed to ``env.reset`` for episode ``episode_index`` (uint32 as int)."""
    ss = np.random.SeedSequence(run_seed, spawn_key=(episode_index, _RESET_STREAM))
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def perturbation_seed(run_seed: int, episode_index: int) -> int:
    """Seed from which each axis's stream for episode ``episode_index`` is spawned."""
    ss = np.random.SeedSequence(run_seed, spawn_key=(episode_index, _PERTURBATION_STREAM))
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def build_conditions(
    axes: Sequence[str],
    severities: Sequence[float],
    splits: Sequence[str] = (),
    combined: bool = True,
    pairs: Sequence[tuple[str, str]] = (),
) -> tuple[Condition, ...]:
    """Nominal first, then each axis alone, then all axes combined, then pairs of axes.

    Args:
        axes: Axis names, in the order they are reported.
        severities: Severities in (0, 1]; 0 would duplicate nominal and is dropped.
        splits: ``train``/``test`` levels (at severity 1) per axis, in addition.
        combined: Add one condition per severity with every axis at that severity
            (only when there are at least two axes).
        pairs: Pairs of axes (each in ``axes``) to run together at each severity
            and split (``lighting+texture@1``), on the same episodes; a pair that
            repeats the combined condition (two axes in all) is not added twice.

    Returns:
        Conditions with unique names.

    Raises:
        InvalidSpecError: If a split is not one of :data:`~robogen.types.SPLITS`.
    """
    conds = [Condition(NOMINAL, ())]
    sevs = [float(s) for s in severities if float(s) > 0.0]
    checked: list[Split] = [split_of(sp) for sp in splits]
    for axis in axes:
        for s in sevs:
            lv = AxisLevel(axis, s)
            conds.append(Condition(lv.label, (lv,)))
        for sp in checked:
            lv = AxisLevel(axis, 1.0, sp)
            conds.append(Condition(lv.label, (lv,)))
    if combined and len(axes) >= 2:
        for s in sevs:
            conds.append(Condition(f"{COMBINED}@{s:g}", tuple(AxisLevel(a, s) for a in axes)))
        for sp in checked:
            conds.append(Condition(f"{COMBINED}@{sp}", tuple(AxisLevel(a, 1.0, sp) for a in axes)))
    if combined and len(axes) == 2:
        pairs = [p for p in pairs if set(p) != set(axes)]
    for a, b in pairs:
        for s in sevs:
            conds.append(Condition(f"{a}+{b}@{s:g}", (AxisLevel(a, s), AxisLevel(b, s))))
        for sp in checked:
            conds.append(Condition(f"{a}+{b}@{sp}", (AxisLevel(a, 1.0, sp), AxisLevel(b, 1.0, sp))))
    return tuple(conds)


def pairs_of(conditions: Sequence[Condition]) -> list[str]:
    """The ``a+b`` pairs of axes that ``conditions`` run (from :func:`build_conditions`)."""
    out: list[str] = []
    for c in conditions:
        if len(c.levels) == 2 and not c.name.startswith(COMBINED):
            name = "+".join(c.axes)
            if name not in out:
                out.append(name)
    return out


def make_units(
    conditions: Sequence[Condition], n_episodes: int, batch_size: int
) -> tuple[WorkUnit, ...]:
    """Split every condition's episodes ``0..n_episodes-1`` into units of ``batch_size``.

    Unit ids are assigned in order, so the same plan always yields the same
    units (a resumed run recognises finished ones by id).
    """
    units = []
    uid = 0
    for cond in conditions:
        for start in range(0, n_episodes, batch_size):
            idx = tuple(range(start, min(start + batch_size, n_episodes)))
            units.append(WorkUnit(uid, cond, idx))
            uid += 1
    return tuple(units)
