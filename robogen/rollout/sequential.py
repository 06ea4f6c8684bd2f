"""Sequential evaluation (``robogen eval --episodes auto``): run conditions in rounds of batches.

The manifest of an auto run holds every work unit up to the cap (``n_episodes`` is
``sequential.max_episodes``), so unit ids are those of a fixed-n run with that many
episodes and a resumed run recognises finished units by id. :func:`run_auto` (what
``run_evaluation`` and ``resume_run`` call) hands :func:`run_sequential` the run's stop
rule (:func:`robogen.stats.sequential_planner`), which then runs only the units the stop
rule asks for, in *rounds*:

1. read the stored outcomes (each round reads only the parts that are new);
2. ask the planner, for every condition, how many episode indices ``0..n-1`` it needs
   (a function of the stored outcomes only: :mod:`robogen.stats.sequential` replays
   the stop decisions batch boundary by batch boundary) and whether it has stopped;
   nominal needs the most indices any perturbed condition needs, so every pair exists;
3. run every missing unit below those counts as one backend call (the Ray backend runs
   them concurrently), the conditions whose interval is widest relative to the target
   first; repeat until every condition has stopped.

Since the counts depend only on stored outcomes, and an episode's outcome depends only on
(run seed, condition, index), a run killed at any moment and resumed, or run on another
backend, stops every condition at the same episode counts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Literal

import pyarrow.parquet as pq

from robogen.errors import RobogenError
from robogen.rollout.backend import Backend, BackendOptions
from robogen.rollout.backends import make_backend
from robogen.rollout.plan import make_units
from robogen.rollout.session import EvalSession
from robogen.rollout.store import ResultStore
from robogen.stats.sequential import ConditionTarget, Outcomes, Planner, sequential_planner
from robogen.types import INVALID_CAUSES, WorkUnit

ProgressFn = Callable[[int, int], None]
Order = Literal["widest", "plan"]
"""Order of a round's units: widest interval relative to the target first, or plan order."""

NO_PROGRESS = (
    "sequential run {run_dir!r}: conditions {conditions} have not stopped but need no "
    "unit that is not stored (a robogen bug; please report it with the run directory)"
)


class _OutcomeCache:
    """Stored outcomes by condition; each call reads only the parts written since the last."""

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self._seen: set[int] = set()
        self.outcomes: dict[str, dict[int, bool | None]] = {
            c.name: {} for c in store.manifest.conditions}

    def refresh(self) -> Mapping[str, Outcomes]:
        for uid in sorted(self._store.done_units() - self._seen):
            cols = pq.read_table(self._store.part_path(uid),
                                 columns=["condition", "episode_index", "success", "cause"])
            d = cols.to_pydict()
            for cond, i, ok, cause in zip(d["condition"], d["episode_index"], d["success"],
                                          d["cause"], strict=True):
                self.outcomes.setdefault(cond, {})[int(i)] = (
                    None if cause in INVALID_CAUSES else bool(ok))
            self._seen.add(uid)
        return self.outcomes


def round_units(units: Collection[WorkUnit], done: Collection[int],
                targets: Mapping[str, ConditionTarget], order: Order = "widest",
                ) -> list[WorkUnit]:
    """The units of one round: missing units below each condition's target, in run order.

    Args:
        units: Every unit of the manifest.
        done: Ids of stored units.
        targets: The planner's target per condition.
        order: ``widest``: conditions by priority (widest relative to target first),
            then plan order; ``plan``: plan order (round-robin over conditions by unit id).

    Returns:
        The units to run, in the order they are handed to the backend.
    """
    todo = [u for u in units if u.unit_id not in done
            and u.episode_indices[-1] < targets[u.condition.name].episodes]
    if order == "widest":
        todo.sort(key=lambda u: (-targets[u.condition.name].priority, u.unit_id))
    return todo


def run_sequential(
    store: ResultStore,
    backend: Backend,
    planner: Planner,
    *,
    progress: ProgressFn | None = None,
    rerun: Collection[int] = (),
    order: Order = "widest",
) -> int:
    """Run a sequential run's rounds until every condition has stopped; closes ``backend``.

    Args:
        store: The run's store (its manifest has ``sequential`` set).
        backend: Where units run.
        planner: Targets from stored outcomes (see :data:`Planner`).
        progress: Called with (episodes stored, episodes the current targets need).
        rerun: Ids of stored units to run again first (a resume's infrastructure failures).
        order: Order of each round's units (:data:`Order`).

    Returns:
        Number of rounds run.

    Raises:
        WorkerSetupError: If the backend's workers cannot start.
        RobogenError: If the planner asks for nothing new while a condition is unstopped
            (a bug; raised instead of looping forever).
    """
    m = store.manifest
    units = make_units(m.conditions, m.n_episodes, m.batch_size)
    rounds = 0
    with EvalSession(store, backend) as session:
        if rerun:
            session.run([u for u in units if u.unit_id in set(rerun)], rerun=rerun)
        cache = _OutcomeCache(store)
        while True:
            outcomes = cache.refresh()
            targets = planner(outcomes)
            todo = round_units(units, store.done_units(), targets, order)
            if not todo:
                running = [c for c, t in targets.items() if not t.stopped]
                if running:
                    raise RobogenError(NO_PROGRESS.format(run_dir=str(store.run_dir),
                                                          conditions=running))
                return rounds
            rounds += 1
            total = sum(t.episodes for t in targets.values())
            before = total - sum(len(u.episode_indices) for u in todo)

            def report(count: int, _: int, before: int = before, total: int = total) -> None:
                if progress:
                    progress(before + count, total)

            session.run(todo, progress=report)


def run_auto(store: ResultStore, options: BackendOptions, progress: ProgressFn | None = None,
             backend: Backend | None = None, rerun: frozenset[int] = frozenset()) -> None:
    """Run a sequential (``--episodes auto``) run's rounds until every condition stopped.

    :func:`run_sequential` with the stop rule of the run's manifest
    (:func:`robogen.stats.sequential_planner`: a function of the stored outcomes only,
    so a resumed run stops where an uninterrupted one does).

    Args:
        store: The run's store (its manifest has ``sequential`` set).
        options: Backend to start when ``backend`` is None (as many workers as a round
            can use: every condition's batches up to the cap).
        progress: Called with (episodes stored, episodes the current targets need).
        backend: A started backend to use (closed at the end).
        rerun: Ids of stored units to run again first.

    Raises:
        WorkerSetupError: If the workers cannot start.
    """
    m = store.manifest
    if backend is None:
        per_cond = -(-m.n_episodes // m.batch_size)
        backend = make_backend(m, options, max_workers=max(per_cond * len(m.conditions), 1))
    run_sequential(store, backend, sequential_planner(m), progress=progress, rerun=rerun)
