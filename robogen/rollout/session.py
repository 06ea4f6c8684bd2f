"""One evaluation session: the units of a stored run, run on a backend, stored as they end.

``robogen eval`` (new runs and ``--resume``), ``robogen check`` (look by look) and
``robogen scale`` all run their episodes through :class:`EvalSession`: plan the
manifest's units, skip those with a stored part, run the rest on a
:class:`~robogen.rollout.backend.Backend`, write each finished unit atomically (with the
worker and node that ran it in the part's metadata), append every worker loss, retry and
replacement to ``faults.jsonl`` (one line on the terminal each) and every worker's placement
(node, GPU, EGL device, OpenGL renderer) to ``workers.jsonl``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from types import TracebackType

from robogen._console import print_message
from robogen.rollout.backend import Backend
from robogen.rollout.faults import FaultRecord, append_fault, fault_line
from robogen.rollout.gpu import WorkerPlacement, append_placement
from robogen.rollout.plan import make_units
from robogen.rollout.store import ResultStore
from robogen.types import EpisodeResult, WorkUnit

ProgressFn = Callable[[int, int], None]


class EvalSession:
    """Runs a run directory's missing units on a backend.

    Args:
        store: The run's store (its manifest defines the units).
        backend: Where units run; closed by :meth:`close` (or on leaving ``with``).
    """

    def __init__(self, store: ResultStore, backend: Backend) -> None:
        self.store = store
        self.backend = backend
        backend.fault_sink = self._record_fault
        backend.placement_sink = self._record_placement

    def _record_fault(self, record: FaultRecord) -> None:
        append_fault(self.store.run_dir, record)
        print_message("warning", fault_line(record), style="bold yellow")

    def _record_placement(self, record: WorkerPlacement) -> None:
        append_placement(self.store.run_dir, record)

    def units(self) -> tuple[WorkUnit, ...]:
        """Every unit of the manifest, in plan order."""
        m = self.store.manifest
        return make_units(m.conditions, m.n_episodes, m.batch_size)

    def todo(self, units: Sequence[WorkUnit] | None = None) -> list[WorkUnit]:
        """The units of ``units`` (default: all) without a stored part."""
        done = self.store.done_units()
        return [u for u in (self.units() if units is None else units) if u.unit_id not in done]

    def run(self, units: Sequence[WorkUnit] | None = None, *,
            progress: ProgressFn | None = None, rerun: Collection[int] = ()) -> int:
        """Run the units of ``units`` (default: all) not stored yet; returns how many ran.

        Args:
            units: Units to run (others of the plan are left for later).
            progress: Called with (episodes stored, episodes of ``units``).
            rerun: Ids of stored units to run again (their parts are replaced atomically).

        Raises:
            WorkerSetupError: If the backend's workers cannot start.
        """
        wanted = list(self.units() if units is None else units)
        done = self.store.done_units() - set(rerun)
        todo = [u for u in wanted if u.unit_id not in done]
        total = sum(len(u.episode_indices) for u in wanted)
        count = total - sum(len(u.episode_indices) for u in todo)
        if progress:
            progress(count, total)
        if not todo:
            return 0

        def on_unit(unit: WorkUnit, results: list[EpisodeResult]) -> None:
            nonlocal count
            self.store.write_unit(unit.unit_id, results,
                                  ran_on=self.backend.ran_on.get(unit.unit_id))
            count += len(results)
            if progress:
                progress(count, total)

        self.backend.run(todo, on_unit)
        return len(todo)

    def close(self) -> None:
        """Close the backend."""
        self.backend.close()

    def __enter__(self) -> EvalSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
