"""Choosing a backend, and the Ray cluster of this process, without importing Ray here.

:func:`make_backend` builds the backend an evaluation asks for; the cluster
helpers let ``robogen check`` share one embedded cluster between its two
sides. Ray itself is imported only in :mod:`robogen.rollout.ray_backend`, and
only when a Ray backend or cluster is used. (These live apart from
:mod:`robogen.rollout.backend` so that the Ray backend, which builds on that
module, is not imported back by it.)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from robogen.errors import InvalidSpecError
from robogen.registry import Registry
from robogen.rollout.backend import Backend, BackendOptions, SerialBackend
from robogen.rollout.gpu import fixed_share
from robogen.types import BackendInfo, EvalManifest

BackendFactory = Callable[[EvalManifest, BackendOptions, int | None], Backend]
"""``factory(manifest, options, max_units)``: a backend built outside this package
(``max_units``: at most this many units will run, None: unknown)."""

BACKENDS: Registry[BackendFactory] = Registry("backend")
"""Backends that live above this layer, by ``--backend`` name: :mod:`robogen.batched`
registers ``batched`` when imported (``robogen.runs`` imports it for such a run)."""

NOT_REGISTERED = (
    "backend {kind!r} is not loaded in this process: import {module} first (robogen eval "
    "does), or run with --backend ray"
)
_MODULES = {"batched": "robogen.batched.backend"}


@runtime_checkable
class DescribesBackend(Protocol):
    """A backend that says where it steps the episodes (the batched backend: device, worlds,
    precision, versions), recorded in the run's manifest."""

    def describe(self) -> BackendInfo:
        """Where this backend steps the episodes."""
        ...


def describe_backend(backend: Backend, kind: str) -> BackendInfo:
    """The manifest's :class:`BackendInfo` of ``backend`` (its ``--backend`` name ``kind``):
    its own description when it gives one, else C MuJoCo on the CPU (float64)."""
    if isinstance(backend, DescribesBackend):
        return backend.describe()
    return BackendInfo(kind=kind, device="cpu", float_precision="float64")


def make_backend(manifest: EvalManifest, options: BackendOptions, *,
                 max_workers: int | None = None, keep_cluster: bool = False) -> Backend:
    """The backend ``options.kind`` names, for ``manifest``.

    Args:
        manifest: The evaluation manifest.
        options: Backend options.
        max_workers: At most this many workers (e.g. the number of units to run).
        keep_cluster: Leave a Ray cluster this backend started running on close (several
            backends of one process share it).
    """
    if options.kind in BACKENDS:
        return BACKENDS.get(options.kind)(manifest, options, max_workers)
    if options.kind in _MODULES:
        raise InvalidSpecError(NOT_REGISTERED.format(kind=options.kind,
                                                     module=_MODULES[options.kind]))
    device = "cuda" if fixed_share(options.num_gpus_per_worker) > 0 else "cpu"
    if options.kind == "serial":
        return SerialBackend(manifest, options, device=device)
    from robogen.rollout.ray_backend import RayBackend

    return RayBackend(manifest, options, max_workers=max_workers, shutdown=not keep_cluster)


def ray_cluster_is_up() -> bool:
    """Whether this process is connected to a Ray cluster (without importing Ray)."""
    if "ray" not in sys.modules:
        return False
    from robogen.rollout.ray_backend import ray_is_up

    return ray_is_up()


def start_ray_cluster(address: str | None, num_cpus: int | None) -> None:
    """Join ``address`` or start an embedded cluster of ``num_cpus`` CPUs, shared by several
    Ray backends of this process (e.g. both sides of ``robogen check``)."""
    from robogen.rollout.ray_backend import init_ray

    init_ray(address, num_cpus=num_cpus)


def stop_ray_cluster() -> None:
    """Disconnect from Ray (stopping an embedded cluster)."""
    if ray_cluster_is_up():
        from robogen.rollout.ray_backend import shutdown_ray

        shutdown_ray()


def map_calls(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
              on_ray: bool) -> list[Any]:
    """``[fn(*args) for args in calls]``, results in call order.

    Args:
        fn: A module-level function (Ray imports it by name in the worker).
        calls: The argument tuples.
        on_ray: Run the calls as parallel one-CPU Ray tasks on the cluster this process is
            connected to (use it for an embedded cluster only when the calls read or write
            local files); else one after another in this process.

    Raises:
        Exception: What a call raised.
    """
    if on_ray and ray_cluster_is_up() and len(calls) > 1:
        from robogen.rollout.ray_backend import run_tasks

        return run_tasks(fn, calls)
    return [fn(*args) for args in calls]


def reuse_ray_workers(on: bool) -> AbstractContextManager[None]:
    """Within, Ray backends that follow one another hand their workers on instead of
    starting new ones (:func:`robogen.rollout.ray_backend.reuse_workers`); a no-op if not
    ``on``."""
    if not on:
        return contextlib.nullcontext()
    from robogen.rollout.ray_backend import reuse_workers

    return reuse_workers()


def map_on_ray_workers(fn: Callable[..., Any],
                       calls: Sequence[tuple[EvalManifest, tuple[Any, ...]]]) -> list[Any] | None:
    """``[fn(*args, worker=W) ...]`` on the Ray workers :func:`reuse_ray_workers` kept, W the
    worker of the call's manifest; None when none is kept
    (:func:`robogen.rollout.ray_backend.map_on_workers`)."""
    if "robogen.rollout.ray_backend" not in sys.modules:
        return None
    from robogen.rollout.ray_backend import map_on_workers

    return map_on_workers(fn, calls)
