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

Ray is imported only in this module (an optional edge of the package).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import tempfile
import time
import traceback
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from robogen._console import reclaim_sigterm
from robogen.errors import DependencyMissingError
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
from robogen.rollout.gpu import WorkerPlacement, fixed_share, resolve_gpu_share
from robogen.rollout.nodes import NodeWatch
from robogen.types import EpisodeResult, EvalManifest, WorkUnit, to_dict

_XLA_CPU_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
"""``XLA_FLAGS`` of Ray workers (before the user's own): XLA:CPU's intra-op thread pool off, so
a flax policy's compiled code runs on one thread, not spread over cores its worker shares."""
_WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "LP_NUM_THREADS": "0",
    "PYTHONWARNINGS": "ignore",
}

NO_CLUSTER = (
    "no Ray cluster answers at {source} {address!r} ({why}); start one with "
    "`ray start --head --port PORT` and pass its address, or drop {source} to run on an "
    "embedded local cluster"
)
AUTH_REQUIRED = (
    "the Ray cluster at {address!r} refused the connection: it has token authentication on "
    "({why}); export the cluster's token before running robogen (RAY_AUTH_MODE=token and "
    "RAY_AUTH_TOKEN=<token>, as printed by `ray start`), or start the cluster with "
    "RAY_AUTH_MODE=disabled on a trusted network"
)
NO_GPUS = (
    "--num-gpus-per-worker {want:g} asks for GPUs, but the Ray cluster has {have:g} GPU(s); "
    "drop --num-gpus-per-worker or use a cluster with GPUs"
)
NO_ROOM = (
    "the Ray cluster has no room for a worker: each needs {need}, the cluster has {free} free "
    "({total} in all); free resources or add a node"
)
TOO_MANY = (
    "--workers {asked} asks for more workers than the Ray cluster has room for ({free}); "
    "running {fit}"
)
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


class ClusterWarning(UserWarning):
    """The cluster cannot give what was asked (robogen runs with what it has)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is a core dependency
        raise DependencyMissingError("the ray backend", "ray", "ray") from e
    return ray


def _describe(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    msg = f"{type(e).__name__}: {e}"
    msg = msg if len(msg) <= 800 else msg[:797] + "..."
    return msg + where


KEEP_WORKERS = 2
"""Episode workers (envs and policy) a Ray actor keeps for the manifests it ran last."""


class _WorkerActor:
    """Ray actor body wrapping :class:`~robogen.rollout.worker.EpisodeWorker`.

    A set-up exception is kept and returned by :meth:`ping` (the driver raises it as a
    :class:`WorkerSetupError`), instead of killing the actor with Ray's own wrapper.
    A later backend of the same process can adopt the actor (:func:`reuse_workers`): it then
    loads that backend's manifest (:meth:`load`). The actor keeps the workers of the last
    :data:`KEEP_WORKERS` manifests it used, so that a run's videos are filmed with the policy
    and envs its episodes ran on (:meth:`call`); older ones are closed (memory).
    """

    def __init__(self, manifest: dict[str, Any], device: str, worker_index: int = 0,
                 load_budget_s: float | None = None, gpu_share: float = 0.0,
                 render_device: str = "auto") -> None:
        self._device = device
        self._load_budget_s = load_budget_s
        self._workers: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._worker: Any = None
        self._error: str | None = None
        self._plugin: str | None = None
        self._placement: dict[str, Any] | None = None
        try:
            import ray

            from robogen.rollout.gpu import prepare_worker

            # before any framework or MuJoCo context exists in this process
            placement = prepare_worker(gpu_share, render_device,  # type: ignore[arg-type]
                                       worker=f"pid:{os.getpid()}",
                                       node=ray.get_runtime_context().get_node_id())
            import robogen._gl  # noqa: F401
            from robogen._console import route_mujoco_warnings

            route_mujoco_warnings()
        except Exception as e:  # noqa: BLE001 - reported to the driver as a set-up error
            self._error = _describe(e)
            return
        self.load(manifest, worker_index)
        if self._error is None:
            self._finish_placement(placement, manifest)

    def _finish_placement(self, placement: Any, manifest: dict[str, Any]) -> None:
        """Record the OpenGL renderer of a worker that renders (pixels, or a GPU share) and
        refuse a GPU worker that renders on the CPU."""
        from robogen.rollout.gpu import finish_placement

        try:
            if placement.gpu_share > 0 or "pixels" in str(manifest.get("obs_mode", "")):
                placement = finish_placement(placement)
        except Exception as e:  # noqa: BLE001 - reported to the driver as a set-up error
            self._error = _describe(e)
        self._placement = placement.to_dict()

    def _worker_of(self, manifest: dict[str, Any], worker_index: int) -> Any:
        from robogen.rollout.worker import EpisodeWorker

        key = (json.dumps(manifest, sort_keys=True), worker_index)
        if key in self._workers:
            self._workers.move_to_end(key)
            return self._workers[key]
        worker = EpisodeWorker(EvalManifest.from_dict(manifest), device=self._device,
                               worker_index=worker_index, load_budget_s=self._load_budget_s)
        self._workers[key] = worker
        while len(self._workers) > KEEP_WORKERS:  # the least recently used, never the current
            old_key = next(k for k in self._workers if self._workers[k] is not self._worker)
            self._workers.pop(old_key).close()
        return worker

    def load(self, manifest: dict[str, Any], worker_index: int,
             load_budget_s: float | None = None) -> dict[str, Any]:
        """Run ``manifest``'s units from now on (its worker made unless this process has it);
        answers like :meth:`ping`."""
        from robogen.errors import PluginError

        self._plugin = None
        if load_budget_s is not None:
            self._load_budget_s = load_budget_s
        try:
            self._worker, self._error = self._worker_of(manifest, worker_index), None
        except PluginError as e:  # the plug-in's own error, named as such by the driver
            self._error, self._plugin = str(e.__cause__ or e), e.module
        except Exception as e:  # noqa: BLE001 - reported to the driver as a set-up error
            self._error = _describe(e)
        return self.ping()

    def ping(self) -> dict[str, Any]:
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "error": self._error, "plugin": self._plugin, "placement": self._placement}

    def run_unit(self, unit: dict[str, Any], budget_s: float | None = None
                 ) -> list[dict[str, Any]]:
        results = self._worker.run_unit(WorkUnit.from_dict(unit), budget_s=budget_s)
        return [to_dict(r) for r in results]

    def call(self, fn: Callable[..., Any], manifest: dict[str, Any], *args: Any) -> Any:
        """``fn(*args, worker=W)``, W this process's worker of ``manifest`` (made if needed)."""
        text = json.dumps(manifest, sort_keys=True)
        index = next((i for t, i in self._workers if t == text), 0)
        return fn(*args, worker=self._worker_of(manifest, index))


def _check_reachable(address: str, source: str = "--address") -> None:
    """Fail in seconds, not after Ray's ~14 minutes of retries, if nothing listens there."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise WorkerSetupError(NO_CLUSTER.format(address=address, source=source,
                                                 why="expected HOST:PORT"))
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except OSError as e:
        raise WorkerSetupError(NO_CLUSTER.format(address=address, source=source,
                                                 why=e.strerror or e)) from None


def cluster_address(address: str | None) -> str | None:
    """The cluster to join: ``address``, else ``$RAY_ADDRESS``, else None (embedded)."""
    return address or os.environ.get("RAY_ADDRESS") or None


_AUTH_MARKS = ("invalidauthtoken", "unauthenticated", "authentication token")


@contextlib.contextmanager
def _stderr_captured() -> Iterator[Callable[[], str]]:
    """Send file descriptor 2 to a temporary file for the block (Ray's C++ core logs its
    connection retries there, ~one line a second); yields a function returning the text.

    Only around joining a cluster: no process is started then that would inherit the file.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)

        def text() -> str:
            tmp.seek(0)
            return tmp.read().decode(errors="replace")

        try:
            yield text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _worker_env() -> dict[str, str]:
    env = dict(_WORKER_ENV)
    env["MUJOCO_GL"] = os.environ.get("MUJOCO_GL", "egl")
    # XLA:CPU on one thread per worker (its envs' render thread and the other workers use the
    # other cores): the same actions bit for bit, 47-51 s against 50-51 s of episodes for 216
    # pixel episodes of the shipped Push CNN on 2 cores; the user's own flags come after ours
    env["XLA_FLAGS"] = " ".join(f for f in (_XLA_CPU_ONE_THREAD, os.environ.get("XLA_FLAGS"))
                                if f)
    # the user's modules: the driver's PYTHONPATH and working directory, made absolute
    paths = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p]
    paths.append(os.getcwd())
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


LOOPBACK = "127.0.0.1"
"""The node address of an embedded cluster: every server of it (GCS, raylet and object
manager, the runtime-env agent, the autoscaler monitor's metrics, each worker's and the
driver's gRPC server) listens on loopback only, so a one-machine evaluation opens no port to
the machine's network."""


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """Let ``ray.init(_node_ip_address="127.0.0.1")`` keep the loopback address.

    ``ray.init`` replaces a loopback node address by the machine's routable one
    (``services.resolve_ip_for_localhost``) unless ``ray_constants.ENABLE_RAY_CLUSTER`` is
    off (what Ray does on macOS and Windows, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``); Ray's
    C++ servers then bind the node address instead of every interface. The constant is read
    only while the node starts; it is put back after.
    """
    import ray._private.ray_constants as ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join ``address`` (or ``$RAY_ADDRESS``), or start an embedded local cluster (idempotent).

    The embedded cluster listens on loopback only (:data:`LOOPBACK`, no dashboard); a
    joined cluster is used as it was started.

    Raises:
        WorkerSetupError: If nothing answers at the address, or it needs an auth token.
    """
    ray = _ray()
    if ray.is_initialized():
        return
    source = "--address" if address else "RAY_ADDRESS"
    address = cluster_address(address)
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": True,
        "runtime_env": {"env_vars": _worker_env()},
        "logging_level": "ERROR",
    }
    if not address:
        kwargs["address"] = "local"  # never a cluster some `ray start` left registered
        os.environ.pop("RAY_ADDRESS", None)
        if num_cpus is not None:
            kwargs["num_cpus"] = num_cpus
        with _loopback_only():
            ray.init(**kwargs, _node_ip_address=LOOPBACK)
        reclaim_sigterm()  # Ray's driver handler dumps its stack and aborts: ours ends cleanly
        return
    _check_reachable(address, source)
    kwargs["address"] = address
    with _stderr_captured() as logged:
        try:
            ray.init(**kwargs)
            failure: Exception | None = None
        except Exception as e:  # noqa: BLE001 - Ray raises several types on a failed connect
            failure = e
        log = logged()
    if failure is None:
        sys.stderr.write(log)  # nothing of a successful connect is hidden
        reclaim_sigterm()
        return
    text = str(failure)
    auth = next((ln for ln in log.splitlines() if any(m in ln.lower() for m in _AUTH_MARKS)),
                None)
    if auth is not None or any(m in text.lower() for m in _AUTH_MARKS):
        why = auth or text
        why = why[min(i for m in _AUTH_MARKS if (i := why.lower().find(m)) >= 0):]
        raise WorkerSetupError(AUTH_REQUIRED.format(address=address, why=why[:200])) from failure
    raise WorkerSetupError(NO_CLUSTER.format(address=address, source=source,
                                             why=text[:300])) from failure


def ray_is_up() -> bool:
    """Whether this process is connected to a Ray cluster."""
    return "ray" in sys.modules and bool(sys.modules["ray"].is_initialized())


def shutdown_ray() -> None:
    """Disconnect from Ray (stopping an embedded cluster)."""
    if ray_is_up():
        _ray().shutdown()


def run_tasks(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``[fn(*args) for args in calls]``, each call a Ray task of one CPU on the cluster this
    process is connected to (in parallel as far as its CPUs go), results in call order.

    ``fn`` must be a module-level function (Ray imports it by name in the worker).

    Raises:
        Exception: The first failed call's own exception (Ray's wrapper removed).
    """
    ray = _ray()
    remote = ray.remote(num_cpus=1, max_retries=0)(fn)
    refs = [remote.remote(*args) for args in calls]
    try:
        return list(ray.get(refs))
    except ray.exceptions.RayTaskError as e:
        raise e.as_instanceof_cause() from None


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
        """Workers to run: what was asked, at most what fits in the free resources plus the
        ``adopted`` actors' (which hold theirs already)."""
        ray = _ray()
        opts = self.options
        total, free = ray.cluster_resources(), ray.available_resources()
        gpus = fixed_share(opts.num_gpus_per_worker)
        if gpus > 0 and float(total.get("GPU", 0.0)) < gpus:
            raise WorkerSetupError(NO_GPUS.format(want=gpus, have=float(total.get("GPU", 0.0))))
        fit = math.floor(float(free.get("CPU", 0.0)) + 1e-9) + adopted
        if gpus > 0:
            fit = min(fit, math.floor(float(free.get("GPU", 0.0)) / gpus + 1e-9) + adopted)
        if fit < 1:
            need = "1 CPU" + (f" and {gpus:g} GPU" if gpus > 0 else "")
            shown = {k: v for k, v in free.items() if k in ("CPU", "GPU")}
            raise WorkerSetupError(NO_ROOM.format(
                need=need, free=shown, total={k: v for k, v in total.items()
                                             if k in ("CPU", "GPU")}))
        asked = opts.workers or fit
        if asked > fit:
            warnings.warn(TOO_MANY.format(asked=asked, free=fit, fit=fit), ClusterWarning,
                          stacklevel=2)
        n = min(asked, fit)
        if self._max_workers is not None:
            n = min(n, max(1, self._max_workers))
        return n

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
        """``--num-gpus-per-worker auto``: the cluster's GPUs over the workers that will run
        (none when it has none); a number stays as it is."""
        if not isinstance(opts.num_gpus_per_worker, str):
            return opts
        ray = _ray()
        gpus = float(ray.cluster_resources().get("GPU", 0.0))
        workers = opts.workers or max(1, math.floor(
            float(ray.available_resources().get("CPU", 1.0)) + 1e-9))
        if self._max_workers is not None:
            workers = min(workers, max(1, self._max_workers))
        share = resolve_gpu_share(opts.num_gpus_per_worker, gpus, workers)
        self._device = "cuda" if share > 0 else "cpu"
        return replace(opts, num_gpus_per_worker=share)

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


def _free() -> dict[str, float]:
    """The cluster's free CPUs and GPUs (infinite if Ray cannot tell: nothing to wait for)."""
    try:
        free = _ray().available_resources()
    except Exception:  # noqa: BLE001 - bookkeeping only (the cluster may be going away)
        return {"CPU": math.inf, "GPU": math.inf}
    return {k: float(free.get(k, 0.0)) for k in ("CPU", "GPU")}


def _await_free(want: dict[str, float], timeout: float) -> bool:
    """Poll until the cluster has ``want`` resources free (True) or ``timeout`` passed (False)."""
    deadline = time.monotonic() + timeout
    while any(have < want[k] - 1e-9 for k, have in _free().items()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    head = text[0] if text else type(e).__name__
    extra = next((ln.strip() for ln in text[1:] if "ip:" in ln or "pid:" in ln), "")
    return f"{type(e).__name__}: {head}" + (f" ({extra})" if extra else "")
