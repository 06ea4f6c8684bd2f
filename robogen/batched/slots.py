"""Packing a run's episodes into world slots, refilling finished slots, reporting whole units.

The batched backend holds N worlds; each world (a *slot*) runs one episode of one condition
at a time. :class:`SlotBook` keeps the (unit, episode) pairs still to run in plan order,
hands them to free slots (:meth:`SlotBook.fill`), takes each finished episode's result
(:meth:`SlotBook.finish`) and gives a unit back once all of its episodes have a result, so
the store writes whole units exactly as with the serial and Ray backends (a run killed
mid-unit loses that unit's finished episodes and reruns them on ``--resume``; nothing is
stored twice). Plain Python: no simulator, no device.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from robogen.types import EpisodeResult, WorkUnit

BAD_RESULT = "slot {row} holds no episode (it is free); only a filled slot can finish"


@dataclass(frozen=True, slots=True)
class SlotEpisode:
    """One episode placed in a world slot.

    Attributes:
        unit: The work unit the episode belongs to.
        position: Its position in ``unit.episode_indices``.
    """

    unit: WorkUnit
    position: int

    @property
    def episode_index(self) -> int:
        """The episode index ``i`` (pairs episodes across conditions)."""
        return self.unit.episode_indices[self.position]


class SlotBook:
    """Which episode each of ``worlds`` slots runs, and which units are complete.

    Args:
        units: The units to run, in plan order (their episodes are handed out in order).
        worlds: Number of slots N (>= 1).

    Raises:
        ValueError: On ``worlds`` < 1.
    """

    def __init__(self, units: Sequence[WorkUnit], worlds: int) -> None:
        if worlds < 1:
            raise ValueError(f"worlds must be >= 1, got {worlds!r}")
        self.slots: list[SlotEpisode | None] = [None] * worlds
        """The episode in each slot (None: free)."""
        self._pending: deque[SlotEpisode] = deque(
            SlotEpisode(u, k) for u in units for k in range(len(u.episode_indices)))
        self._results: dict[int, list[EpisodeResult | None]] = {
            u.unit_id: [None] * len(u.episode_indices) for u in units}
        self._left: dict[int, int] = {u.unit_id: len(u.episode_indices) for u in units}

    @property
    def pending(self) -> int:
        """Episodes not yet placed in a slot."""
        return len(self._pending)

    @property
    def running(self) -> list[int]:
        """The filled slots, in slot order."""
        return [r for r, s in enumerate(self.slots) if s is not None]

    def done(self) -> bool:
        """True once every episode has a result (no pending, none running)."""
        return not self._pending and all(s is None for s in self.slots)

    def next_episode(self) -> SlotEpisode | None:
        """Take the next pending episode (None when none is left) without placing it."""
        return self._pending.popleft() if self._pending else None

    def place(self, row: int, episode: SlotEpisode) -> None:
        """Put ``episode`` into the free slot ``row``."""
        if self.slots[row] is not None:
            raise ValueError(f"slot {row} already runs episode "
                             f"{self.slots[row].episode_index}")  # type: ignore[union-attr]
        self.slots[row] = episode

    def fill(self) -> list[tuple[int, SlotEpisode]]:
        """Place pending episodes into every free slot (lowest slot first).

        Returns:
            ``(row, episode)`` for each slot filled, in slot order.
        """
        out = []
        for row, s in enumerate(self.slots):
            if s is None and self._pending:
                episode = self._pending.popleft()
                self.slots[row] = episode
                out.append((row, episode))
        return out

    def finish(self, row: int, result: EpisodeResult
               ) -> tuple[WorkUnit, list[EpisodeResult]] | None:
        """Record the result of slot ``row``'s episode and free the slot.

        Returns:
            ``(unit, results)`` (results in the unit's episode order) if that was the
            unit's last episode, else None.

        Raises:
            ValueError: If the slot is free.
        """
        episode = self.slots[row]
        if episode is None:
            raise ValueError(BAD_RESULT.format(row=row))
        self.slots[row] = None
        return self.record(episode, result)

    def record(self, episode: SlotEpisode, result: EpisodeResult
               ) -> tuple[WorkUnit, list[EpisodeResult]] | None:
        """Record ``result`` for ``episode`` (one that never occupied a slot, e.g. its
        reset failed); returns the unit and its results if it is now complete."""
        uid = episode.unit.unit_id
        results = self._results[uid]
        if results[episode.position] is not None:
            raise ValueError(f"episode {episode.episode_index} of unit {uid} already has a result")
        results[episode.position] = result
        self._left[uid] -= 1
        if self._left[uid]:
            return None
        del self._results[uid], self._left[uid]
        return episode.unit, [r for r in results if r is not None]
