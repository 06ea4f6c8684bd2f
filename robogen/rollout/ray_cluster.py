"""Ray clusters: join one (``--address`` / ``$RAY_ADDRESS``) or start an embedded one.

The embedded cluster listens on 127.0.0.1 only (:data:`LOOPBACK`) and starts no dashboard; its
workers get the driver's ``PYTHONPATH`` and working directory and one thread per math library
(:func:`worker_env`). Joining fails in seconds with a message naming the fix when nothing
answers or the cluster wants a token. :func:`run_tasks` runs module-level functions as tasks.

Part of the Ray backend (:mod:`robogen.rollout.ray_backend`): Ray is imported only in the
``rollout/ray_*.py`` modules (an optional edge of the package).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from robogen._console import reclaim_sigterm
from robogen.errors import DependencyMissingError
from robogen.rollout.backend import BackendOptions, WorkerSetupError
from robogen.rollout.gpu import fixed_share, resolve_gpu_share

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


class ClusterWarning(UserWarning):
    """The cluster cannot give what was asked (robogen runs with what it has)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is a core dependency
        raise DependencyMissingError("the ray backend", "ray", "ray") from e
    return ray


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
    _remember_env()
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


_ENV_KEYS = ("RAY_", "PYTHONBREAKPOINT")
"""Environment variables ``ray.init`` sets in the driver's process (``RAY_AUTH_MODE``,
``RAY_CLIENT_MODE``, ...): restored by :func:`shutdown_ray`."""
_env_before: dict[str, str] | None = None


def _ray_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(_ENV_KEYS)}


def _remember_env() -> None:
    global _env_before
    if _env_before is None:
        _env_before = _ray_env()


def shutdown_ray() -> None:
    """Disconnect from Ray (stopping an embedded cluster), and put back the environment
    variables ``ray.init`` set in this process: an embedded run leaves, e.g.,
    ``RAY_AUTH_MODE=token`` behind, with which a later join of a cluster started without
    authentication could start no worker."""
    global _env_before
    if ray_is_up():
        _ray().shutdown()
    if _env_before is not None:
        for key in set(_ray_env()) - set(_env_before):
            os.environ.pop(key, None)
        os.environ.update(_env_before)
        _env_before = None


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


def pool_size(options: BackendOptions, max_workers: int | None = None, adopted: int = 0) -> int:
    """Workers to run: what ``options`` asks, at most what fits in the cluster's free CPUs (and
    GPUs) plus the ``adopted`` actors' (which hold theirs already), at most ``max_workers``.

    Warns :class:`ClusterWarning` when more workers are asked than fit.

    Raises:
        WorkerSetupError: If a worker asks for GPUs the cluster lacks, or no worker fits.
    """
    ray = _ray()
    total, free = ray.cluster_resources(), ray.available_resources()
    gpus = fixed_share(options.num_gpus_per_worker)
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
    asked = options.workers or fit
    if asked > fit:
        warnings.warn(TOO_MANY.format(asked=asked, free=fit, fit=fit), ClusterWarning,
                      stacklevel=3)
    n = min(asked, fit)
    if max_workers is not None:
        n = min(n, max(1, max_workers))
    return n


def resolve_share(options: BackendOptions, max_workers: int | None = None) -> BackendOptions:
    """``options`` with ``--num-gpus-per-worker auto`` replaced by the cluster's GPUs over the
    workers that will run (0 when it has none): :func:`~robogen.rollout.gpu.resolve_gpu_share`.
    """
    ray = _ray()
    gpus = float(ray.cluster_resources().get("GPU", 0.0))
    workers = options.workers or max(1, math.floor(
        float(ray.available_resources().get("CPU", 1.0)) + 1e-9))
    if max_workers is not None:
        workers = min(workers, max(1, max_workers))
    share = resolve_gpu_share(options.num_gpus_per_worker, gpus, workers)
    return replace(options, num_gpus_per_worker=share)
