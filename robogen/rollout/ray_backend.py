"""Ray backend: long-lived actors serving one queue of work units.

``ray.init(address="local")`` starts an embedded cluster unless ``--address`` (or the
``RAY_ADDRESS`` environment variable) names an existing one, which is then joined. The
embedded cluster listens on 127.0.0.1 only and starts no dashboard. Each
actor creates its envs and loads the policy once, then runs whole units (never per-step
calls: inter-process cost per step would dominate).

Faults never hang a run (issue 8):

* Units wait in one queue; whichever actor is alive and idle takes the next. An actor that
  dies (segfault, OOM killer, its node lost) puts its unit back in the queue (at most
  :data:`~robogen.rollout.backend.MAX_UNIT_ATTEMPTS` starts, then the episodes are
  ``worker_died``) and a replacement is requested; a replacement the cluster cannot place
  within the start-up timeout is dropped, and the survivors finish the run.
* The pool is sized from the cluster's free CPUs (and GPUs); asking for more workers
  than fit warns and uses what fits.
* A unit past its wall-clock budget has its actor killed and replaced, and is retried,
  then recorded as ``infra_timeout``.
* An exception while an actor sets up (e.g. the policy's module is importable on the
  driver only) is a :class:`~robogen.rollout.backend.WorkerSetupError` naming the
  worker's own error, raised before any unit runs.

Every loss, retry and replacement is a :class:`~robogen.rollout.faults.FaultRecord`; a lost
node is one that died during this run (:class:`~robogen.rollout.nodes.NodeWatch`), and each
stored unit names the worker and node that ran it
(:class:`~robogen.rollout.faults.UnitPlacement`).

Joining or starting the cluster and sizing the pool live in
:mod:`~robogen.rollout.ray_cluster`, the actor's body in :mod:`~robogen.rollout.ray_actor`
(their public names are re-exported here). Ray is imported only in these ``rollout/ray_*.py``
modules (an optional edge of the package).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from robogen.rollout.backend import (
    DIED,
    MAX_UNIT_ATTEMPTS,
    TIMED_OUT,
    BackendOptions,
    OnUnit,
    WorkerSetupError,
    _Emitter,
    failed_unit_results,
    load_budget_s,
    unit_budget_s,
)
from robogen.rollout.faults import FaultRecord, UnitPlacement
from robogen.rollout.gpu import WorkerPlacement, fixed_share
from robogen.rollout.nodes import NodeWatch
from robogen.rollout.ray_actor import KEEP_WORKERS, _describe, _WorkerActor  # noqa: F401
from robogen.rollout.ray_cluster import (  # noqa: F401 - re-exported: the backend's public names
    AUTH_REQUIRED,
    LOOPBACK,
    NO_CLUSTER,
    NO_GPUS,
    NO_ROOM,
    TOO_MANY,
    ClusterWarning,
    _await_free,
    _free,
    _ray,
    _worker_env,
    cluster_address,
    init_ray,
    pool_size,
    ray_is_up,
    resolve_share,
    run_tasks,
    shutdown_ray,
)
from robogen.types import EpisodeResult, EvalManifest, WorkUnit, to_dict

SETUP_FAILED = (
    "a Ray worker failed to set up on node {node}: {error}; the driver built the env and "
    "loaded the policy, the worker could not: make every module the run needs (the policy's, "
    "the env's, their dependencies) importable there (robogen forwards the driver's "
    "PYTHONPATH and working directory to workers on this machine; on other machines install "
    "them or put them on their PYTHONPATH)"
)
PLUGIN_ON_WORKER = (
    "a Ray worker on node {node} cannot import the plug-in module {module!r} that the run "
    "uses ({error}); the driver has it, the worker does not: install it on every node or put "
    "its directory on PYTHONPATH (robogen forwards the driver's PYTHONPATH and working "
    "directory to workers on this machine, not a sys.path edit made in Python)"
)
NO_WORKER = (
    "no Ray worker could be started within {timeout:g} s ({n} unit(s) left to run); the "
    "finished units are stored, resume with robogen eval --resume RUN_DIR once the cluster "
    "has room"
)



@dataclass
class _Actor:
    handle: Any
    name: str
    started_at: float
    index: int = 0
    ping: Any = None
    node: str = ""
    pid: int = 0
    gpus: float = 0.0
    replaces: tuple[str, str, str] | None = None  # (fault kind, worker, node) of a lost one


def _actor_name(handle: Any) -> str:
    try:
        return f"ray:{handle._actor_id.hex()[:16]}"
    except AttributeError:  # pragma: no cover - Ray internals moved
        return "ray:?"


class RayBackend(_Emitter):
    """Long-lived Ray actors for one manifest serving one queue of units (see module doc).

    Args:
        manifest: The evaluation manifest (sent to each actor once).
        options: Workers wanted, address, GPUs per worker and timeouts.
        max_workers: At most this many actors (e.g. the units left to run).
        shutdown: Shut Ray down on :meth:`close` if this backend started it.
    """

    def __init__(self, manifest: EvalManifest, options: BackendOptions | None = None, *,
                 max_workers: int | None = None, shutdown: bool = True) -> None:
        super().__init__()
        self.manifest = manifest
        self.options = options or BackendOptions()
        self._max_workers = max_workers
        self._shutdown = shutdown
        self._started_here = False
        self._device = "cuda" if fixed_share(self.options.num_gpus_per_worker) > 0 else "cpu"
        self._mdict = to_dict(manifest)
        self._actor_cls: Any = None
        self.size = 0
        self.idle: deque[_Actor] = deque()
        self.starting: dict[Any, _Actor] = {}
        self._nodes: NodeWatch | None = None  # the nodes dead before the run are not its own
        self._lost: deque[tuple[str, str, str]] = deque()  # (kind, worker, node) to replace
        self._free_indices: set[int] = set()
        self._next_index = 0
        self._running: dict[Any, tuple[_Actor, WorkUnit, float, float]] = {}

    # ---- start-up ---------------------------------------------------------------------------

    def _pool_size(self, adopted: int = 0) -> int:
        """Workers to run (:func:`~robogen.rollout.ray_cluster.pool_size`)."""
        return pool_size(self.options, self._max_workers, adopted)

    def _take_index(self) -> int:
        """The lowest worker index no live actor holds (a replacement takes over the index of
        the actor it replaces: ``LoadContext.worker_index``)."""
        if self._free_indices:
            index = min(self._free_indices)
            self._free_indices.discard(index)
        else:
            index, self._next_index = self._next_index, self._next_index + 1
        return index

    def _spawn(self) -> None:
        """Start an actor (in place of the oldest lost one not replaced yet, if any: a
        ``replaced`` fault record once it is up)."""
        index = self._take_index()
        handle = self._actor_cls.remote(self._mdict, self._device, index, load_budget_s(
            self.manifest, self.options.unit_timeout_s), self.options.num_gpus_per_worker,
            self.options.render_device)
        actor = _Actor(handle, _actor_name(handle), time.monotonic(), index=index,
                       gpus=fixed_share(self.options.num_gpus_per_worker),
                       replaces=self._lost.popleft() if self._lost else None)
        actor.ping = handle.ping.remote()
        self.starting[actor.ping] = actor

    def _top_up(self, todo: deque[WorkUnit]) -> None:
        """Start actors up to the pool size while units wait (replacements of lost ones)."""
        alive = len(self.idle) + len(self._running) + len(self.starting)
        if todo and alive < self.size:
            for _ in range(self.size - alive):
                self._spawn()

    def _adopt(self, actor: _Actor) -> None:
        """Take over an actor a closed backend parked (:func:`reuse_workers`): it loads this
        manifest in its running process, and answers like a new actor's ping."""
        actor.index, actor.started_at = self._take_index(), time.monotonic()
        actor.ping = actor.handle.load.remote(self._mdict, actor.index, load_budget_s(
            self.manifest, self.options.unit_timeout_s))
        self.starting[actor.ping] = actor

    def start(self) -> None:
        """Connect (or start a cluster), size the pool, start the actors and wait for them.

        Raises:
            WorkerSetupError: Unreachable address, missing GPUs, no room, an actor's set-up
                exception, or no actor started within the start-up timeout.
        """
        if self._actor_cls is not None:
            return
        from robogen.plugins import SCRIPT, SCRIPT_PLUGIN

        if SCRIPT in self.manifest.plugins:
            raise WorkerSetupError(SCRIPT_PLUGIN)
        ray = _ray()
        self._started_here = not ray.is_initialized()
        opts = self.options
        embedded = cluster_address(opts.address) is None
        init_ray(opts.address,
                 num_cpus=max(opts.workers or 0, os.cpu_count() or 1) if embedded else None)
        opts = self.options = self._resolve_share(opts)
        self._actor_cls = ray.remote(num_cpus=1, num_gpus=opts.num_gpus_per_worker,
                                     max_restarts=0)(_WorkerActor)
        with contextlib.suppress(Exception):  # bookkeeping only
            self._nodes = NodeWatch(ray.nodes())
        deadline = time.monotonic() + opts.startup_timeout_s
        adopted = _take_parked(fixed_share(opts.num_gpus_per_worker))
        # they hold their resources: see which are alive, then size; each keeps its index
        for actor in sorted(adopted, key=lambda a: a.index):
            self._adopt(actor)
        self._settle(deadline)
        self.size = self._pool_size(adopted=len(self.idle))
        for actor in sorted(self.idle, key=lambda a: a.index)[self.size:]:  # more than asked
            self.idle.remove(actor)
            self._kill(actor)
        for _ in range(self.size - len(self.idle)):
            self._spawn()
        self._settle(deadline)
        if not self.idle:
            raise WorkerSetupError(NO_WORKER.format(timeout=opts.startup_timeout_s, n="all"))

    def _resolve_share(self, opts: BackendOptions) -> BackendOptions:
        """``--num-gpus-per-worker auto`` resolved on the cluster
        (:func:`~robogen.rollout.ray_cluster.resolve_share`); a number stays as it is."""
        if not isinstance(opts.num_gpus_per_worker, str):
            return opts
        opts = resolve_share(opts, self._max_workers)
        self._device = "cuda" if fixed_share(opts.num_gpus_per_worker) > 0 else "cpu"
        return opts

    def _settle(self, deadline: float) -> None:
        """Wait for the starting actors until ``deadline``; drop the ones still starting."""
        while self.starting and time.monotonic() < deadline:
            self._wait(list(self.starting), deadline - time.monotonic())
        self._drop_late_starters(force=True)

    def wait_ready(self) -> None:
        """Start the pool and block until its actors are ready (benchmarks)."""
        self.start()

    # ---- events -----------------------------------------------------------------------------

    def _wait(self, refs: list[Any], timeout: float) -> list[Any]:
        ray = _ray()
        if not refs:
            time.sleep(max(0.0, min(timeout, 0.5)))
            return []
        ready, _ = ray.wait(refs, num_returns=1, timeout=max(0.0, min(timeout, 5.0)))
        for ref in ready:
            if ref in self.starting:
                self._on_ping(ref)
        return ready

    def _on_ping(self, ref: Any) -> None:
        ray = _ray()
        actor = self.starting.pop(ref)
        try:
            info = ray.get(ref)
        except ray.exceptions.RayActorError as e:
            self._free_indices.add(actor.index)
            self._fault(FaultRecord.now("actor_died", action="dropped", worker=actor.name,
                                        cause="worker_died", error=_first_line(e)))
            self._note_lost_nodes()
            return
        actor.node, actor.pid = str(info["node"]), int(info["pid"])
        if info.get("placement"):
            placement = WorkerPlacement.from_dict(info["placement"])
            self._placement(replace(placement, worker=actor.name))
        if actor.replaces is not None and not info["error"]:
            kind, old, old_node = actor.replaces
            self._fault(FaultRecord.now(
                kind, action="replaced", worker=actor.name,  # type: ignore[arg-type]
                node=actor.node, error=f"in place of {old} on node {old_node[:12] or '?'}"))
        if info["error"]:
            self._kill(actor)
            node = actor.node[:12] or "?"
            if info.get("plugin"):
                raise WorkerSetupError(PLUGIN_ON_WORKER.format(
                    node=node, module=info["plugin"], error=info["error"]))
            raise WorkerSetupError(SETUP_FAILED.format(node=node, error=info["error"]))
        self.idle.append(actor)

    def _drop_late_starters(self, force: bool = False) -> None:
        now = time.monotonic()
        for ref, actor in list(self.starting.items()):
            if force or now - actor.started_at > self.options.startup_timeout_s:
                del self.starting[ref]
                self._kill(actor)
                self._fault(FaultRecord.now(
                    "actor_start_timeout", action="dropped", worker=actor.name,
                    error=f"not started within {self.options.startup_timeout_s:g} s "
                          "(the cluster could not place it)"))

    def _note_lost_nodes(self, suspect: str = "") -> None:
        """Record the nodes lost since the run started (:class:`NodeWatch`); ``suspect`` is
        the node of a worker that just died."""
        if self._nodes is None:
            return
        try:
            lost = self._nodes.lost(_ray().nodes(), suspect)
        except Exception:  # noqa: BLE001 - bookkeeping only
            return
        for node, why in lost:
            self._fault(FaultRecord.now("node_lost", action="dropped", node=node,
                                        cause="worker_died", error=why))

    def _kill(self, actor: _Actor) -> None:
        self._free_indices.add(actor.index)
        try:
            _ray().kill(actor.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - best effort (the actor may be gone already)
            pass

    # ---- the run ----------------------------------------------------------------------------

    def run(self, units: Sequence[WorkUnit], on_unit: OnUnit) -> None:
        """Run ``units`` on the pool, calling ``on_unit`` in the driver as each ends.

        Raises:
            WorkerSetupError: If an actor fails to set up, or no actor is alive and none
                could be started within the start-up timeout.
        """
        if not units:
            return
        self.start()
        ray = _ray()
        todo: deque[WorkUnit] = deque(units)
        attempts: dict[int, int] = {}
        running = self._running
        stalled_since: float | None = None

        def give_up_or_retry(actor: _Actor, unit: WorkUnit, kind: str, cause: str,
                             error: str, budget: float = 0.0) -> None:
            n = attempts[unit.unit_id]
            last = n >= MAX_UNIT_ATTEMPTS
            self._lost.append((kind, actor.name, actor.node))
            self._fault(FaultRecord.now(
                kind, action="recorded" if last else "retried",  # type: ignore[arg-type]
                unit_id=unit.unit_id, attempt=n, worker=actor.name, node=actor.node,
                cause=cause, error=error))
            if not last:
                todo.appendleft(unit)
                return
            worker = f"{actor.name} on node {actor.node[:12] or '?'}"
            msg = (TIMED_OUT.format(budget=budget, worker=worker, attempts=n)
                   if cause == "infra_timeout"
                   else DIED.format(worker=worker, attempts=n, error=error))
            self.ran_on[unit.unit_id] = UnitPlacement(actor.name, actor.node)
            on_unit(unit, failed_unit_results(self.manifest, unit, cause, msg))

        while todo or running:
            while self.idle and todo:
                actor, unit = self.idle.popleft(), todo.popleft()
                attempts[unit.unit_id] = attempts.get(unit.unit_id, 0) + 1
                budget = unit_budget_s(self.manifest, unit, self.options.unit_timeout_s)
                ref = actor.handle.run_unit.remote(to_dict(unit), budget)
                running[ref] = (actor, unit, time.monotonic(), budget)
            self._top_up(todo)
            if todo and not running and not self.idle:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > self.options.startup_timeout_s:
                    self._drop_late_starters(force=True)
                    raise WorkerSetupError(NO_WORKER.format(
                        timeout=self.options.startup_timeout_s, n=len(todo)))
            else:
                stalled_since = None
            now = time.monotonic()
            deadlines = [t0 + b - now for _, _, t0, b in running.values()]
            deadlines += [a.started_at + self.options.startup_timeout_s - now
                          for a in self.starting.values()]
            ready = self._wait(list(running) + list(self.starting),
                               min(deadlines, default=1.0))
            for ref in ready:
                if ref not in running:
                    continue
                actor, unit, _, _ = running.pop(ref)
                try:
                    rows = ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    self._free_indices.add(actor.index)
                    self._note_lost_nodes(suspect=actor.node)
                    give_up_or_retry(actor, unit, "actor_died", "worker_died", _first_line(e))
                    self._top_up(todo)  # the replacement starts while the others run
                    continue
                except ray.exceptions.RayTaskError as e:
                    self._kill(actor)
                    raise e.as_instanceof_cause() from None  # a setup error of the condition
                self.idle.append(actor)
                self.ran_on[unit.unit_id] = UnitPlacement(actor.name, actor.node)
                on_unit(unit, [EpisodeResult.from_dict(r) for r in rows])
            now = time.monotonic()
            for ref, (actor, unit, t0, budget) in list(running.items()):
                if now - t0 > budget:
                    del running[ref]
                    self._kill(actor)
                    give_up_or_retry(actor, unit, "unit_timeout", "infra_timeout",
                                     f"no result after {budget:g} s; actor killed", budget)
            self._drop_late_starters()
        if self.starting:  # replacements up by now are recorded (and kept for a next run)
            ready, _ = ray.wait(list(self.starting), num_returns=len(self.starting), timeout=0)
            for ref in ready:
                with contextlib.suppress(WorkerSetupError):  # every unit is stored already
                    self._on_ping(ref)

    def close(self, shutdown: bool | None = None) -> None:
        """Kill the actors; shut Ray down if this backend started it (and ``shutdown``).

        When the cluster stays up (shared with the next backend of this process, e.g. the
        next policy of ``robogen eval --policy A --policy B``), wait until it counts the
        killed actors' CPUs as free again (at most :data:`RELEASE_TIMEOUT_S`): Ray frees
        them asynchronously, and the next backend sizes its pool from the free CPUs.
        """
        stays_up = not ((self._shutdown if shutdown is None else shutdown) and self._started_here)
        if stays_up and _PARKED is not None:  # the next backend adopts them
            _PARKED.extend(self.idle)
            self.idle.clear()
        placed = [*self.idle, *(r[0] for r in self._running.values())]  # hold their resources
        actors = [*placed, *self.starting.values()]
        before = _free() if placed and stays_up and ray_is_up() else None
        for a in actors:
            self._kill(a)
        self.idle.clear()
        self.starting.clear()
        self._running.clear()
        self._actor_cls = None
        if not stays_up:
            self._started_here = False
            shutdown_ray()
        elif before is not None:
            per = {"CPU": 1.0, "GPU": self.options.num_gpus_per_worker}
            _await_free({k: before[k] + len(placed) * v for k, v in per.items()},
                        RELEASE_TIMEOUT_S)


_PARKED: list[_Actor] | None = None
"""Live idle actors that closed backends left for the next one (inside :func:`reuse_workers`)."""


def _take_parked(gpus: float) -> list[_Actor]:
    """The parked actors holding ``gpus`` GPUs each, taken out of the park."""
    if not _PARKED:
        return []
    taken = [a for a in _PARKED if a.gpus == gpus]
    _PARKED[:] = [a for a in _PARKED if a.gpus != gpus]
    return taken


@contextlib.contextmanager
def reuse_workers() -> Iterator[None]:
    """Within: a closing :class:`RayBackend` parks its idle actors instead of killing them,
    and the next backend adopts them (they load its manifest in their running processes: no
    process start or imports again; the new envs' renderers join the render context of an
    equal scene); on exit the
    parked actors are killed. For backends that follow one another on one cluster (the
    policies of ``robogen eval --policy A --policy B``); :func:`map_on_workers` runs calls
    on the parked actors.
    """
    global _PARKED
    if _PARKED is not None:  # nested: the outer context owns the park
        yield
        return
    _PARKED = []
    try:
        yield
    finally:
        parked, _PARKED = _PARKED, None
        for actor in parked:
            with contextlib.suppress(Exception):  # best effort (the cluster may be gone)
                _ray().kill(actor.handle, no_restart=True)


def map_on_workers(fn: Callable[..., Any],
                   calls: Sequence[tuple[EvalManifest, tuple[Any, ...]]]) -> list[Any] | None:
    """``[fn(*args, worker=W) for manifest, args in calls]`` on the parked actors (call i on
    actor ``i % n``, in parallel across actors), W the actor's
    :class:`~robogen.rollout.worker.EpisodeWorker` of ``manifest`` (the one its episodes ran
    on, or a new one); None when no actor is parked. A call whose actor died runs as a Ray
    task with ``fn(*args)`` instead.

    ``fn`` must be a module-level function (Ray imports it by name in the worker).

    Raises:
        Exception: The first failed call's own exception (Ray's wrapper removed).
    """
    if not _PARKED or not calls:
        return None
    ray = _ray()
    refs = [_PARKED[i % len(_PARKED)].handle.call.remote(fn, to_dict(m), *args)
            for i, (m, args) in enumerate(calls)]
    out: list[Any] = []
    for ref, (_, args) in zip(refs, calls, strict=True):
        try:
            out.append(ray.get(ref))
        except ray.exceptions.RayActorError:
            out.extend(run_tasks(fn, [args]))
        except ray.exceptions.RayTaskError as e:
            raise e.as_instanceof_cause() from None
    return out


RELEASE_TIMEOUT_S = 10.0
"""How long :meth:`RayBackend.close` waits for the cluster to free its killed actors' CPUs and
GPUs [s] (then it returns anyway: another job may have taken them)."""


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    head = text[0] if text else type(e).__name__
    extra = next((ln.strip() for ln in text[1:] if "ip:" in ln or "pid:" in ln), "")
    return f"{type(e).__name__}: {head}" + (f" ({extra})" if extra else "")
