"""Backends that run work units: the :class:`Backend` protocol, its options, and the serial one.

A backend takes units and calls ``on_unit(unit, results)`` in the calling thread as each
finishes; :class:`~robogen.rollout.session.EvalSession` stores them. Two implementations:

* :class:`SerialBackend` (``--backend serial``): one :class:`EpisodeWorker` in this
  process, run on a watchdog thread so that a unit past its wall-clock budget is abandoned
  and retried on a fresh worker instead of hanging the run.
* :class:`~robogen.rollout.ray_backend.RayBackend` (``--backend ray``): long-lived actors
  on a Ray cluster, one shared queue of units, dead or hung actors replaced.

Both give identical :class:`EpisodeResult`s for the same plan (a unit is one lockstep batch
whichever worker runs it). Neither ever hangs: every unit has a wall-clock budget
(:func:`unit_budget_s`); a unit past it is retried up to :data:`MAX_UNIT_ATTEMPTS` times,
then its episodes are recorded as ``infra_timeout``. A unit whose worker died is retried
the same way, then recorded as ``worker_died``. Every loss and retry is a
:class:`~robogen.rollout.faults.FaultRecord` passed to the backend's ``fault_sink``.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from robogen.errors import InvalidSpecError, RobogenError
from robogen.rollout.faults import FaultRecord, FaultSink, UnitPlacement
from robogen.rollout.gpu import RENDER_DEVICES, PlacementSink, WorkerPlacement
from robogen.types import EpisodeResult, EvalManifest, WorkUnit

OnUnit = Callable[[WorkUnit, list[EpisodeResult]], None]
"""Called in the driver as ``on_unit(unit, results)`` for each finished unit."""

MAX_UNIT_ATTEMPTS = 2
"""Times a unit is started before its episodes are recorded as ``worker_died`` or
``infra_timeout`` (one retry)."""

STEP_BUDGET_S = 0.2
"""Wall-clock budget of one env step of one episode [s] (a generous bound: a MuJoCo step
plus a policy call and a rendered frame take milliseconds)."""

UNIT_SETUP_BUDGET_S = 60.0
"""Wall-clock allowance of a unit on top of its steps [s]: resets, scene recompiles,
first frames, lazy JIT compilation of a policy."""

BACKEND_KINDS: tuple[str, ...] = ("ray", "serial", "batched")
"""The backends ``--backend`` names. ``batched`` is built by :mod:`robogen.batched` (a layer
above this one), which registers it in :data:`robogen.rollout.backends.BACKENDS` on import."""

DEFAULT_STARTUP_TIMEOUT_S = 300.0
"""How long a worker may take to start (import, create its envs, load the policy) [s]."""


def unit_budget_s(manifest: EvalManifest, unit: WorkUnit, unit_timeout_s: float | None = None
                  ) -> float:
    """Wall-clock budget of ``unit`` [s].

    ``unit_timeout_s`` (``--unit-timeout``) when given, else
    ``UNIT_SETUP_BUDGET_S + STEP_BUDGET_S * max_steps * len(unit.episode_indices)``
    (the episodes of a unit are stepped in lockstep on one core).
    """
    return _budget_s(manifest, len(unit.episode_indices), unit_timeout_s)


def load_budget_s(manifest: EvalManifest, unit_timeout_s: float | None = None) -> float:
    """Wall-clock budget [s] of a worker's policy load: that of a full unit
    (:func:`unit_budget_s` of ``batch_size`` episodes), so a replacement worker whose policy
    server hangs is bounded like the unit it replaces, not by the start-up timeout."""
    return _budget_s(manifest, manifest.batch_size, unit_timeout_s)


def _budget_s(manifest: EvalManifest, n_episodes: int, unit_timeout_s: float | None) -> float:
    if unit_timeout_s is not None:
        return float(unit_timeout_s)
    return UNIT_SETUP_BUDGET_S + STEP_BUDGET_S * manifest.max_steps * n_episodes


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """How to run an evaluation's units (not what to run: that is the manifest).

    Attributes:
        kind: ``ray`` or ``serial``.
        workers: Ray actors wanted; None: the CPUs the cluster has free.
        address: Address of an existing Ray cluster; None starts an embedded one.
        num_gpus_per_worker: GPUs each Ray actor requests (policies then run on ``cuda``);
            ``"auto"``: the cluster's GPUs split evenly over the workers, none without GPUs
            (:func:`robogen.rollout.gpu.resolve_gpu_share`; the serial backend takes 0).
        unit_timeout_s: Wall-clock budget of every unit [s]; None derives it from the
            unit's steps (:func:`unit_budget_s`).
        startup_timeout_s: How long a worker may take to start [s].
        render_device: Where workers render: ``auto`` (on their GPU when they hold one),
            ``gpu`` (a worker rendering on a CPU rasterizer is a set-up error) or ``cpu``
            (Mesa, whatever the GPU share) (:mod:`robogen.rollout.gpu`).
        worlds: Worlds of the batched backend (None: its default for the device).
        sim_device: warp device of the batched backend (None: ``cuda:0`` if visible, else
            ``cpu``).
    """

    kind: Literal["ray", "serial", "batched"] = "ray"
    workers: int | None = None
    address: str | None = None
    num_gpus_per_worker: float | str = 0.0
    unit_timeout_s: float | None = None
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    render_device: str = "auto"
    worlds: int | None = None
    sim_device: str | None = None

    def __post_init__(self) -> None:
        if self.render_device not in RENDER_DEVICES:
            raise InvalidSpecError(f"--render-device must be one of {', '.join(RENDER_DEVICES)}, "
                                   f"got {self.render_device!r}")
        if self.kind not in BACKEND_KINDS:
            raise InvalidSpecError(f"backend must be one of {', '.join(BACKEND_KINDS)}, got "
                                   f"{self.kind!r}")
        if self.worlds is not None and (isinstance(self.worlds, bool) or self.worlds < 1):
            raise InvalidSpecError(f"--worlds must be an integer >= 1, got {self.worlds!r}; "
                                   "give e.g. --worlds 64, or run with --backend ray")
        if self.unit_timeout_s is not None and not self.unit_timeout_s > 0:
            raise InvalidSpecError(
                f"--unit-timeout must be > 0 seconds, got {self.unit_timeout_s!r}")
        if not self.startup_timeout_s > 0:
            raise InvalidSpecError(
                f"the worker start-up timeout must be > 0 seconds, got {self.startup_timeout_s!r}")


class WorkerSetupError(RobogenError, RuntimeError):
    """A worker could not start: loading the policy or creating the envs failed there, or it
    did not start in time. Raised before any episode is stored."""


class Backend(Protocol):
    """Runs work units of one manifest and reports each finished unit.

    ``fault_sink`` (an attribute) receives every worker loss and unit retry;
    ``placement_sink`` each worker's placement (node, GPU, EGL device, renderer) as it starts;
    ``ran_on`` (an attribute) holds where each unit reported to ``on_unit`` ran (its last
    attempt), set before ``on_unit`` is called.
    """

    fault_sink: FaultSink | None
    ran_on: dict[int, UnitPlacement]

    @property
    def placement_sink(self) -> PlacementSink | None:
        """Receives each worker's placement as it starts."""
        ...

    @placement_sink.setter
    def placement_sink(self, sink: PlacementSink | None) -> None: ...

    def start(self) -> None:
        """Start the workers now, so set-up errors surface before anything is stored.

        Raises:
            WorkerSetupError: If a worker cannot load the policy or create its envs.
        """
        ...

    def run(self, units: Sequence[WorkUnit], on_unit: OnUnit) -> None:
        """Run ``units``, calling ``on_unit(unit, results)`` in this thread as each ends.

        Every unit is reported exactly once; a unit that could not be run has its
        episodes recorded with an invalid cause (``worker_died``, ``infra_timeout``).
        """
        ...

    def close(self) -> None:
        """Stop the workers (and what the backend started)."""
        ...


def failed_unit_results(manifest: EvalManifest, unit: WorkUnit, cause: str, error: str
                        ) -> list[EpisodeResult]:
    """One failed :class:`EpisodeResult` per episode of ``unit``, each with ``cause`` and
    ``error`` (return 0, length 0, nothing applied): a unit that never ran to its end."""
    from robogen.rollout.worker import unit_result

    return [
        unit_result(manifest, unit, i, episode_return=0.0, length_steps=0, success=False,
                    cause=cause, error=error, perturbations_json="[]", changed_axes=(),
                    wall_time_s=0.0)
        for i in unit.episode_indices
    ]


TIMED_OUT = ("unit ran past its wall-clock budget of {budget:g} s on worker {worker} "
             "({attempts} attempts); raise --unit-timeout if the policy is just slow")
DIED = "worker {worker} died running this unit ({attempts} attempts): {error}"


class _Emitter:
    """Buffers fault and placement records until a sink is attached, then forwards them;
    keeps where each unit ran (``ran_on``)."""

    def __init__(self) -> None:
        self.fault_sink: FaultSink | None = None
        self._placement_sink: PlacementSink | None = None
        self._pending: list[FaultRecord] = []
        self._placements: list[WorkerPlacement] = []
        self.ran_on: dict[int, UnitPlacement] = {}

    @property
    def placement_sink(self) -> PlacementSink | None:
        """Receives each worker's placement; the ones recorded before it was attached (the
        workers start before the run directory exists) are handed over on attaching."""
        return self._placement_sink

    @placement_sink.setter
    def placement_sink(self, sink: PlacementSink | None) -> None:
        self._placement_sink = sink
        self._flush_placements()

    def _placement(self, record: WorkerPlacement) -> None:
        self._placements.append(record)
        self._flush_placements()

    def _flush_placements(self) -> None:
        if self._placement_sink is not None:
            for r in self._placements:
                self._placement_sink(r)
            self._placements.clear()

    def _fault(self, record: FaultRecord) -> None:
        self._pending.append(record)
        if self.fault_sink is not None:
            for r in self._pending:
                self.fault_sink(r)
            self._pending.clear()


CLOSE_JOIN_S = 30.0
"""How long :meth:`SerialBackend.close` waits for its worker thread to stop [s] (a policy
hung inside one step is left behind, as after a unit timeout)."""


def _serial_placement(name: str, manifest: EvalManifest, render_device: str
                      ) -> WorkerPlacement | None:
    """The serial worker's placement (this process; its renderer when it renders pixels).
    Never fails the run: the driver process chose its GL device before any worker existed."""
    import socket

    from robogen.rollout.gpu import finish_placement, prepare_worker

    try:
        placement = prepare_worker(0.0, render_device,  # type: ignore[arg-type]
                                   worker=name, node=socket.gethostname())
        if "pixels" in manifest.obs_mode:
            placement = finish_placement(placement)
    except Exception:  # noqa: BLE001 - a record, not a requirement
        return None
    return placement


class _UnitThread:
    """A daemon thread that owns one :class:`EpisodeWorker` and runs units on it.

    An abandoned thread (its unit hung) is left to finish or block on its own; being a
    daemon it never keeps the process alive, and it touches nothing but its own worker.
    """

    def __init__(self, manifest: EvalManifest, device: str, load_budget: float | None = None,
                 render_device: str = "auto") -> None:
        self._jobs: queue.SimpleQueue[tuple[WorkUnit | None, float | None, Future[Any]]] = (
            queue.SimpleQueue())
        self._ready: Future[None] = Future()
        self._render_device = render_device
        self.placement: WorkerPlacement | None = None
        self._abort = threading.Event()  # the worker's: stops its unit between two steps
        self.name = f"serial:{os.getpid()}"
        self._thread = threading.Thread(target=self._main, args=(manifest, device, load_budget),
                                        name="robogen-serial-worker", daemon=True)
        self._thread.start()

    def _main(self, manifest: EvalManifest, device: str, load_budget: float | None) -> None:
        from robogen.rollout.worker import EpisodeWorker, serial_render_lanes

        try:
            worker = EpisodeWorker(manifest, device=device, worker_index=0,
                                   render_lanes=serial_render_lanes(), load_budget_s=load_budget)
        except BaseException as e:  # noqa: BLE001 - handed to the driver thread
            self._ready.set_exception(e)
            return
        worker.abort = self._abort
        self.placement = _serial_placement(self.name, manifest, self._render_device)
        self._ready.set_result(None)
        try:
            while True:
                unit, budget_s, fut = self._jobs.get()
                if unit is None:
                    fut.set_result(None)
                    return
                if not fut.set_running_or_notify_cancel():
                    continue  # queued ahead, then given to another worker
                try:
                    fut.set_result(worker.run_unit(unit, budget_s=budget_s))
                except BaseException as e:  # noqa: BLE001 - handed to the driver thread
                    fut.set_exception(e)
        finally:
            worker.close()

    def wait_ready(self, timeout: float) -> None:
        self._ready.result(timeout=timeout)

    def submit(self, unit: WorkUnit, budget_s: float | None = None
               ) -> Future[list[EpisodeResult]]:
        """Queue ``unit`` (its wall-clock budget [s]: the worker's own deadline derives from
        it); its future gets the results (cancel it to skip a queued unit)."""
        fut: Future[list[EpisodeResult]] = Future()
        self._jobs.put((unit, budget_s, fut))
        return fut

    def stop(self, *, abort: bool = False, join_s: float = 0.0) -> None:
        """End the thread after its unit (``abort``: stop that unit between two steps),
        then wait for it at most ``join_s`` [s]."""
        if abort:
            self._abort.set()
        self._jobs.put((None, None, Future()))
        if join_s > 0:
            self._thread.join(join_s)


class SerialBackend(_Emitter):
    """Runs units one after another in this process (debugging, tests, small runs).

    The worker runs on a watchdog thread: the driver waits for each unit at most its
    budget (:func:`unit_budget_s`); on expiry the hung worker is abandoned, a fresh one
    loaded, and the unit retried (at most :data:`MAX_UNIT_ATTEMPTS` starts), then its
    episodes are recorded as ``infra_timeout``.

    Args:
        manifest: The evaluation manifest.
        options: Timeouts (``kind``/``workers``/``address`` are not used here).
        device: Device of the policy (``cpu`` or ``cuda``).
    """

    def __init__(self, manifest: EvalManifest, options: BackendOptions | None = None,
                 device: str = "cpu") -> None:
        super().__init__()
        self.manifest = manifest
        self.options = options or BackendOptions(kind="serial")
        self._device = device
        self._worker: _UnitThread | None = None

    def start(self) -> None:
        """Load the policy and envs (exceptions of the set-up propagate unchanged)."""
        if self._worker is not None:
            return
        worker = _UnitThread(self.manifest, self._device,
                             load_budget_s(self.manifest, self.options.unit_timeout_s),
                             self.options.render_device)
        try:
            worker.wait_ready(self.options.startup_timeout_s)
        except FutureTimeout:
            raise WorkerSetupError(
                f"the serial worker did not finish loading the policy and envs within "
                f"{self.options.startup_timeout_s:g} s") from None
        self._worker = worker
        if worker.placement is not None:
            self._placement(worker.placement)

    def run(self, units: Sequence[WorkUnit], on_unit: OnUnit) -> None:
        """Run ``units`` in order (see :class:`SerialBackend`).

        The next unit is queued on the worker before this one's results are stored, so
        the worker never waits for the driver thread (on a loaded machine every such
        hand-over waits for the scheduler); results are still stored in unit order.
        """
        ahead: Future[list[EpisodeResult]] | None = None  # units[i] queued while i - 1 ran
        for i, unit in enumerate(units):
            budget = unit_budget_s(self.manifest, unit, self.options.unit_timeout_s)
            results: list[EpisodeResult] | None = None
            for attempt in range(1, MAX_UNIT_ATTEMPTS + 1):
                self.start()
                assert self._worker is not None
                name = self._worker.name
                fut = ahead if ahead is not None else self._worker.submit(unit, budget)
                ahead = (self._worker.submit(units[i + 1], unit_budget_s(
                    self.manifest, units[i + 1], self.options.unit_timeout_s))
                    if i + 1 < len(units) else None)
                try:
                    results = fut.result(timeout=budget)
                    break
                except FutureTimeout:
                    if ahead is not None:
                        ahead.cancel()  # the next worker runs it
                        ahead = None
                    self._worker.stop()  # it ends if the unit ever returns
                    self._worker = None
                    last = attempt == MAX_UNIT_ATTEMPTS
                    self._fault(FaultRecord.now(
                        "unit_timeout", unit_id=unit.unit_id, attempt=attempt, worker=name,
                        cause="infra_timeout", action="recorded" if last else "retried",
                        error=f"no result after {budget:g} s"))
            if results is None:
                results = failed_unit_results(
                    self.manifest, unit, "infra_timeout",
                    TIMED_OUT.format(budget=budget, worker=name, attempts=MAX_UNIT_ATTEMPTS))
            self.ran_on[unit.unit_id] = UnitPlacement(name)
            on_unit(unit, results)

    def close(self) -> None:
        """Stop the worker thread: its unit (if any, e.g. after Ctrl-C) is stopped between two
        steps, and the thread is waited for (at most :data:`CLOSE_JOIN_S`), so that it is not
        inside MuJoCo when the interpreter exits."""
        if self._worker is not None:
            self._worker.stop(abort=True, join_s=CLOSE_JOIN_S)
            self._worker = None
