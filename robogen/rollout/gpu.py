"""GPU placement of a rollout worker: its CUDA device, the EGL device that renders on it,
and the memory share its frameworks may take.

A Ray actor that requests ``num_gpus`` gets ``CUDA_VISIBLE_DEVICES`` set to its GPU(s), so
CUDA (torch, JAX) sees its GPU as device 0. EGL does not read that variable: it enumerates
every GPU of the node (plus Mesa's software device), in an order of its own, so without help
every worker renders on EGL device 0 -- the wrong GPU, or the CPU when the NVIDIA EGL vendor
library is missing (MuJoCo issues 461, 3245). This module

* parses ``CUDA_VISIBLE_DEVICES`` (indices, ``GPU-`` UUIDs, ``MIG-`` instances),
* lists the EGL devices with the CUDA ordinal each drives (``EGL_EXT_device_enumeration``,
  ``EGL_EXT_device_query`` and ``EGL_NV_device_cuda``'s ``EGL_CUDA_DEVICE_NV``), read with
  ctypes from ``libEGL`` before MuJoCo creates its first context,
* picks the EGL device of the worker's CUDA device 0 and the ``MUJOCO_EGL_DEVICE_ID`` value
  that selects it for the installed MuJoCo (3.x indexes EGL's own order; 4.x indexes the
  visible CUDA devices when the driver maps them),
* sets JAX's and torch's memory share to the worker's GPU share (``share x 0.9``), keeping
  any value the user set,
* and checks, after the first context exists, that ``GL_RENDERER`` is not a software
  rasterizer (llvmpipe) when the worker was meant to render on its GPU.

Everything here (and in :mod:`~robogen.rollout.gpu_devices`, which reads the node's devices;
its names are re-exported here) but :func:`query_egl_devices`, :func:`gl_renderer` and
:func:`query_gpu` is a pure function of its arguments, so the mapping is tested on machines
without a GPU with injected device lists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from robogen.errors import RobogenError
from robogen.rollout.gpu_devices import (  # noqa: F401 - re-exported: the node's GPUs
    DEFAULT_VENDOR_DIRS,
    EGL_CUDA_DEVICE_NV,
    EGL_DRM_DEVICE_FILE_EXT,
    EGL_EXTENSIONS,
    SOFTWARE_RENDERERS,
    CudaDeviceId,
    EglChoice,
    EglDevice,
    choose_egl_device,
    describe_vendors,
    egl_vendor_files,
    gl_renderer,
    gpu_of,
    is_software_renderer,
    mujoco_egl_device_id,
    mujoco_orders_by_cuda,
    parse_cuda_visible_devices,
    parse_nvidia_smi,
    query_egl_devices,
    query_gpu,
)

RenderDevice = Literal["auto", "gpu", "cpu"]
"""Where a worker renders: ``gpu`` requires its GPU (a software renderer is an error),
``cpu`` renders with Mesa on the CPU whatever the worker's GPU share, ``auto`` renders on
the GPU when the worker holds one (and fails like ``gpu`` if it cannot)."""

RENDER_DEVICES: tuple[str, ...] = ("auto", "gpu", "cpu")

MEMORY_HEADROOM = 0.9
"""Fraction of its GPU share a worker's frameworks may allocate (the rest: EGL, CUDA
contexts, fragmentation)."""
MIN_WORKER_GPU_MEMORY_MIB = 512.0
"""A GPU share that leaves a worker less memory than this [MiB] is refused."""
JAX_MEMORY_VARS = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_PREALLOCATE",
                   "XLA_PYTHON_CLIENT_ALLOCATOR")

WORKERS = "workers.jsonl"
"""Per run directory: one :class:`WorkerPlacement` per worker start, as JSON lines."""

SOFTWARE_RENDERING = (
    "worker {worker} holds a GPU share ({share:g}) but renders on the CPU: OpenGL renderer "
    "{renderer!r}. The NVIDIA EGL vendor library was not found or not chosen: {vendors}. "
    "Install the NVIDIA driver's EGL/GLVND parts (libEGL_nvidia.so.0 and its vendor file "
    "10_nvidia.json under {dirs}), or pass --render-device cpu to render with Mesa on purpose."
)
NO_EGL_FOR_GPU = (
    "worker {worker} holds a GPU share ({share:g}) but no EGL device drives its CUDA device "
    "({visible}): {reason}. Pass --render-device cpu to render with Mesa on purpose."
)
SHARE_TOO_SMALL = (
    "--num-gpus-per-worker {share:g} leaves each worker {mib:.0f} MiB of the {total:.0f} MiB "
    "of {gpu}; expected at least {need:.0f} MiB. Use a larger share (fewer workers per GPU)."
)


class GpuPlacementError(RobogenError, RuntimeError):
    """A worker's GPU placement is unusable: rendering fell back to the CPU, no EGL device
    drives its GPU, or its memory share is too small. A set-up error (exit 2)."""


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """The memory share a worker's frameworks take of its GPU.

    Attributes:
        env: Variables to set before JAX initializes (only those the user did not set).
        jax: What JAX will do, as recorded (``"mem_fraction=0.225"``, ``"user: ..."``).
        torch_fraction: For ``torch.cuda.set_per_process_memory_fraction``; None: not set.
        user_set: The variables the user set themselves (their values win).
    """

    env: dict[str, str] = field(default_factory=dict)
    jax: str = "default"
    torch_fraction: float | None = None
    user_set: tuple[str, ...] = ()


def memory_settings(share: float, environ: Mapping[str, str]) -> MemorySettings:
    """JAX and torch memory settings for a worker holding ``share`` of one GPU.

    JAX preallocates 75% of its GPU at first use, so a second worker on the same GPU would
    find none left: each worker gets ``XLA_PYTHON_CLIENT_MEM_FRACTION = share x 0.9``
    (a preallocated pool of its share). torch allocates on demand; its cap is the same
    fraction. A whole GPU or more per worker changes nothing.

    Args:
        share: GPUs per worker (Ray's ``num_gpus``), > 0.
        environ: The worker's environment (the user's own settings win).

    Returns:
        The settings.
    """
    user = tuple(v for v in JAX_MEMORY_VARS if v in environ)
    if share <= 0 or share >= 1:
        jax = "user: " + ", ".join(f"{v}={environ[v]}" for v in user) if user else "default"
        return MemorySettings(jax=jax, user_set=user)
    fraction = round(share * MEMORY_HEADROOM, 4)
    if user:
        jax = "user: " + ", ".join(f"{v}={environ[v]}" for v in user)
        return MemorySettings(jax=jax, torch_fraction=fraction, user_set=user)
    return MemorySettings(env={"XLA_PYTHON_CLIENT_MEM_FRACTION": f"{fraction:g}"},
                          jax=f"mem_fraction={fraction:g}", torch_fraction=fraction)


def resolve_gpu_share(requested: float | str, cluster_gpus: float, workers: int) -> float:
    """GPUs per worker for ``--num-gpus-per-worker`` (a number, or ``auto``).

    ``auto``: no GPU when the cluster has none; else the cluster's GPUs split evenly over
    the workers (at most one each), rounded down to Ray's granularity (1e-4).

    Args:
        requested: A share >= 0, or ``"auto"``.
        cluster_gpus: GPUs in the cluster.
        workers: Workers that will run (>= 1).

    Returns:
        The share per worker.

    Raises:
        ValueError: ``requested`` is neither a number >= 0 nor ``"auto"``.
    """
    if isinstance(requested, str):
        if requested.strip().lower() != "auto":
            try:
                requested = float(requested)
            except ValueError:
                raise ValueError(f"--num-gpus-per-worker must be a number >= 0 or 'auto', got "
                                 f"{requested!r}") from None
        else:
            if cluster_gpus <= 0:
                return 0.0
            return min(1.0, int(cluster_gpus / max(1, workers) * 1e4) / 1e4)
    if not requested >= 0:
        raise ValueError(f"--num-gpus-per-worker must be a number >= 0 or 'auto', got "
                         f"{requested!r}")
    return float(requested)


def fixed_share(requested: float | str) -> float:
    """The share a request fixes before a cluster is known: the number, or 0 for ``auto``
    (resolved by the Ray backend from the cluster's GPUs: :func:`resolve_gpu_share`)."""
    if isinstance(requested, str):
        return 0.0 if requested.strip().lower() == "auto" else float(requested)
    return float(requested)


def check_share_memory(share: float, total_mib: float, gpu: str) -> None:
    """Refuse a GPU share that leaves a worker less than :data:`MIN_WORKER_GPU_MEMORY_MIB`.

    Args:
        share: GPUs per worker.
        total_mib: The GPU's memory [MiB].
        gpu: The GPU's name (for the message).

    Raises:
        GpuPlacementError: The share's memory is too small.
    """
    mib = min(share, 1.0) * MEMORY_HEADROOM * total_mib
    if 0 < share and mib < MIN_WORKER_GPU_MEMORY_MIB:
        raise GpuPlacementError(SHARE_TOO_SMALL.format(
            share=share, mib=mib, total=total_mib, gpu=gpu, need=MIN_WORKER_GPU_MEMORY_MIB))


def require_gpu_renderer(renderer: str, *, share: float, render: RenderDevice, worker: str,
                         environ: Mapping[str, str]) -> None:
    """Fail when a worker meant to render on its GPU renders on a CPU rasterizer.

    Args:
        renderer: ``GL_RENDERER`` of the worker's first context.
        share: The worker's GPU share (0: a CPU worker, nothing to check).
        render: The requested render device; ``cpu`` disables the check.
        worker: The worker's name (for the message).
        environ: The worker's environment (vendor-file lookup).

    Raises:
        GpuPlacementError: :data:`SOFTWARE_RENDERING`.
    """
    wants_gpu = render == "gpu" or (render == "auto" and share > 0)
    if wants_gpu and is_software_renderer(renderer):
        vendors, dirs = describe_vendors(environ)
        raise GpuPlacementError(SOFTWARE_RENDERING.format(
            worker=worker, share=share, renderer=renderer, vendors=vendors, dirs=dirs))


@dataclass(frozen=True, slots=True)
class WorkerPlacement:
    """Where one worker ran: recorded per worker in the run directory.

    Attributes:
        worker: The worker's name (``serial`` or Ray's actor id).
        node: Ray node id, or the host name for the serial backend.
        host: Host name.
        pid: Process id.
        gpu_share: GPUs it held.
        cuda_visible_devices: Its ``CUDA_VISIBLE_DEVICES`` (None: unset).
        gpu_name: Its GPU's name (``nvidia-smi``), None without one.
        gpu_uuid: Its GPU's UUID, None without one.
        gpu_memory_mib: Its GPU's memory [MiB], None without one.
        egl_device: ``MUJOCO_EGL_DEVICE_ID`` it rendered with (None: MuJoCo's default).
        egl_reason: How the EGL device was chosen.
        gl_renderer: ``GL_RENDERER`` of its first context (None: it rendered nothing).
        render: The requested render device.
        jax_memory: JAX's memory setting (:class:`MemorySettings`).
        torch_memory_fraction: torch's per-process cap, None if not set.
        user_set: Memory variables the user set (their values were kept).
    """

    worker: str
    node: str
    host: str
    pid: int
    gpu_share: float = 0.0
    cuda_visible_devices: str | None = None
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    gpu_memory_mib: float | None = None
    egl_device: str | None = None
    egl_reason: str = ""
    gl_renderer: str | None = None
    render: str = "auto"
    jax_memory: str = "default"
    torch_memory_fraction: float | None = None
    user_set: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (one line of ``workers.jsonl``)."""
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in ((f, getattr(self, f)) for f in self.__slots__)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkerPlacement:
        """Inverse of :meth:`to_dict` (unknown keys ignored)."""
        known = {k: d[k] for k in cls.__slots__ if k in d}
        if "user_set" in known:
            known["user_set"] = tuple(known["user_set"])
        return cls(**known)

    @property
    def renders_on_gpu(self) -> bool | None:
        """True/False once a context existed; None if it rendered nothing."""
        if self.gl_renderer is None:
            return None
        return not is_software_renderer(self.gl_renderer)


def prepare_worker(share: float, render: RenderDevice, *, worker: str, node: str,
                   environ: dict[str, str] | None = None,
                   egl_devices: Sequence[EglDevice] | None = None,
                   gpu: Mapping[str, Any] | None = None) -> WorkerPlacement:
    """Set a worker's GPU placement up before its frameworks and MuJoCo's first context.

    Call it first thing in the worker process. It writes ``MUJOCO_EGL_DEVICE_ID`` (unless the
    user set it) and the JAX memory variables (unless the user set any) into ``environ``,
    and returns the record (``gl_renderer`` filled later by :func:`finish_placement`).

    Args:
        share: GPUs the worker holds (0: a CPU worker).
        render: Requested render device.
        worker: The worker's name.
        node: Its node id.
        environ: The environment to edit (default ``os.environ``).
        egl_devices: Injected EGL devices (default: :func:`query_egl_devices`).
        gpu: Injected ``nvidia-smi`` row (default: :func:`query_gpu`).

    Returns:
        The placement.

    Raises:
        GpuPlacementError: A GPU worker rendering on its GPU whose GPU no EGL device drives,
            or whose share leaves too little memory.
    """
    env = os.environ if environ is None else environ
    import socket

    base = WorkerPlacement(worker=worker, node=node, host=socket.gethostname(), pid=os.getpid(),
                           gpu_share=share, cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
                           render=render)
    if share <= 0:
        return base
    visible = parse_cuda_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    row = gpu if gpu is not None else query_gpu(visible)
    if row is not None:
        base = replace(base, gpu_name=str(row.get("name")), gpu_uuid=str(row.get("uuid")),
                       gpu_memory_mib=float(row.get("memory_mib", float("nan"))))
        if base.gpu_memory_mib == base.gpu_memory_mib:  # not NaN
            check_share_memory(share, float(base.gpu_memory_mib or 0.0), str(base.gpu_name))
    mem = memory_settings(share, env)
    env.update(mem.env)
    base = replace(base, jax_memory=mem.jax, torch_memory_fraction=mem.torch_fraction,
                   user_set=mem.user_set)
    if render == "cpu":
        return replace(base, egl_reason="CPU rendering requested")
    if "MUJOCO_EGL_DEVICE_ID" in env:
        return replace(base, egl_device=env["MUJOCO_EGL_DEVICE_ID"],
                       egl_reason="MUJOCO_EGL_DEVICE_ID set by the user")
    devices = query_egl_devices() if egl_devices is None else tuple(egl_devices)
    choice = choose_egl_device(devices, visible)
    value = mujoco_egl_device_id(choice, devices, cuda_ordered=mujoco_orders_by_cuda())
    if value is None:
        raise GpuPlacementError(NO_EGL_FOR_GPU.format(
            worker=worker, share=share, visible=env.get("CUDA_VISIBLE_DEVICES", "unset"),
            reason=choice.reason))
    env["MUJOCO_EGL_DEVICE_ID"] = value
    return replace(base, egl_device=value, egl_reason=choice.reason)


def finish_placement(placement: WorkerPlacement, *, renderer: str | None = None,
                     environ: Mapping[str, str] | None = None) -> WorkerPlacement:
    """Record the worker's OpenGL renderer (made here unless given) and check it.

    Also caps torch's memory share on the worker's GPU when torch is already imported with
    CUDA available.

    Args:
        placement: From :func:`prepare_worker`.
        renderer: Injected ``GL_RENDERER`` (default: :func:`gl_renderer`).
        environ: The environment (vendor-file lookup; default ``os.environ``).

    Returns:
        The placement with ``gl_renderer``.

    Raises:
        GpuPlacementError: A GPU worker renders on the CPU (:func:`require_gpu_renderer`).
    """
    env = os.environ if environ is None else environ
    if renderer is None:
        try:
            renderer = gl_renderer()
        except Exception as e:  # noqa: BLE001 - recorded: a state-only worker may have no GL
            renderer = f"unavailable ({type(e).__name__}: {e})"
    require_gpu_renderer(renderer, share=placement.gpu_share,
                         render=placement.render,  # type: ignore[arg-type]
                         worker=placement.worker, environ=env)
    if placement.torch_memory_fraction is not None:
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.set_per_process_memory_fraction(placement.torch_memory_fraction, 0)
    return replace(placement, gl_renderer=renderer)


def hardware_summary(placements: Sequence[WorkerPlacement]) -> str:
    """One line for a report header: ``"8 workers on 1x NVIDIA H200, rendering on the GPU"``.

    Args:
        placements: One per worker of the run (the latest per worker name).

    Returns:
        The line; ``""`` for no placements.
    """
    if not placements:
        return ""
    n = len(placements)
    who = f"{n} worker{'s' if n != 1 else ''}"
    gpus = {p.gpu_uuid or p.cuda_visible_devices: p.gpu_name for p in placements
            if p.gpu_share > 0}
    if gpus:
        names: dict[str, int] = {}
        for name in gpus.values():
            names[str(name or "GPU")] = names.get(str(name or "GPU"), 0) + 1
        where = " on " + ", ".join(f"{k}x {name}" for name, k in names.items())
    else:
        where = " on CPUs"
    nodes = {p.node for p in placements}
    if len(nodes) > 1:
        where += f" ({len(nodes)} nodes)"
    seen = [p.renders_on_gpu for p in placements if p.renders_on_gpu is not None]
    if not seen:
        render = ""
    elif all(seen):
        render = ", rendering on the GPU"
    elif not any(seen):
        kinds = sorted({(p.gl_renderer or "").split(" (")[0] for p in placements
                        if p.renders_on_gpu is False})
        render = f", rendering on the CPU ({', '.join(kinds)})"
    else:
        render = f", {sum(seen)} of {len(seen)} rendering on the GPU"
    return who + where + render


PlacementSink = Callable[[WorkerPlacement], None]


def append_placement(run_dir: str | Path, record: WorkerPlacement) -> None:
    """Append ``record`` as one JSON line to ``run_dir/workers.jsonl`` (flushed at once)."""
    with open(Path(run_dir) / WORKERS, "a", encoding="utf-8") as f:
        f.write(json.dumps(record.to_dict(), sort_keys=True) + "\n")
        f.flush()


def read_placements(run_dir: str | Path) -> list[WorkerPlacement]:
    """The placements of ``run_dir/workers.jsonl``, the latest per worker (a resumed run's
    workers come after the first run's), oldest first; unreadable lines are skipped."""
    path = Path(run_dir) / WORKERS
    if not path.is_file():
        return []
    latest: dict[str, WorkerPlacement] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            p = WorkerPlacement.from_dict(json.loads(line))
        except (ValueError, TypeError):
            continue
        latest.pop(p.worker, None)
        latest[p.worker] = p
    return list(latest.values())
