"""SlotBook (robogen.batched.slots): episodes packed into world slots, refilled, units whole.

Plain Python (no MJWarp): runs without the batched extra.
"""

from __future__ import annotations

import pytest

from robogen.batched.slots import SlotBook
from robogen.rollout.plan import make_units
from robogen.types import AxisLevel, Condition, EpisodeResult, WorkUnit


def _units() -> tuple[WorkUnit, ...]:
    conds = (Condition("nominal", ()), Condition("physics@1", (AxisLevel("physics", 1.0),)))
    return make_units(conds, 5, 2)  # 3 units per condition: (0, 1), (2, 3), (4,)


def _result(unit: WorkUnit, i: int) -> EpisodeResult:
    return EpisodeResult(env_id="e", policy_id="p", condition=unit.condition.name,
                         axes=unit.condition.axes, severity=unit.condition.severity,
                         split=unit.condition.split, episode_index=i, seed=i,
                         episode_return=float(i), length_steps=1, success=True, cause=None,
                         error=None, perturbations_json="[]", changed_axes=(), wall_time_s=0.0,
                         unit_id=unit.unit_id)


def test_slots_fill_in_plan_order_refill_and_units_complete_once() -> None:
    units = _units()
    book = SlotBook(units, 3)
    placed = book.fill()
    assert [(r, e.unit.unit_id, e.episode_index) for r, e in placed] == [
        (0, 0, 0), (1, 0, 1), (2, 1, 2)]
    assert book.fill() == []  # every slot is taken
    assert book.finish(0, _result(units[0], 0)) is None  # unit 0 still runs episode 1
    # the freed slot gets the next pending episode
    assert [(r, e.unit.unit_id, e.episode_index) for r, e in book.fill()] == [(0, 1, 3)]
    done = book.finish(1, _result(units[0], 1))
    assert done is not None and done[0] == units[0]
    assert [r.episode_index for r in done[1]] == [0, 1]
    reported: list[int] = [units[0].unit_id]
    while not book.done():
        book.fill()
        for row in book.running:
            episode = book.slots[row]
            assert episode is not None
            out = book.finish(row, _result(episode.unit, episode.episode_index))
            if out is not None:
                reported.append(out[0].unit_id)
                assert [r.episode_index for r in out[1]] == list(out[0].episode_indices)
    assert sorted(reported) == [u.unit_id for u in units]  # each unit exactly once


def test_results_in_unit_order_whatever_order_slots_finish() -> None:
    units = _units()[:1]
    book = SlotBook(units, 4)  # more slots than episodes: two stay free
    assert [r for r, _ in book.fill()] == [0, 1]
    assert book.running == [0, 1]
    assert book.finish(1, _result(units[0], 1)) is None
    done = book.finish(0, _result(units[0], 0))
    assert done is not None and [r.episode_index for r in done[1]] == [0, 1]
    assert book.done()


def test_a_failed_reset_is_recorded_without_a_slot_and_misuse_raises() -> None:
    units = _units()[2:3]  # one episode (index 4)
    book = SlotBook(units, 1)
    episode = book.next_episode()
    assert episode is not None and episode.episode_index == 4
    out = book.record(episode, _result(units[0], 4))
    assert out is not None and out[0] == units[0]
    assert book.done()
    with pytest.raises(ValueError, match="holds no episode"):
        book.finish(0, _result(units[0], 4))
    with pytest.raises(ValueError, match="worlds must be >= 1"):
        SlotBook(units, 0)
