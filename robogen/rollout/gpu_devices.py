"""What a node's GPUs look like to a worker: ``CUDA_VISIBLE_DEVICES`` parsed, the EGL devices
with the CUDA ordinal each drives (read with ctypes from ``libEGL``), the EGL device of a CUDA
device and MuJoCo's ``MUJOCO_EGL_DEVICE_ID`` for it, the GLVND vendor files, ``nvidia-smi``'s
rows and the OpenGL renderer.

Everything here but :func:`query_egl_devices`, :func:`gl_renderer` and :func:`query_gpu` is a
pure function of its arguments. Part of :mod:`robogen.rollout.gpu` (a worker's placement),
which re-exports these names.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

EGL_CUDA_DEVICE_NV = 0x323A
EGL_EXTENSIONS = 0x3055
EGL_DRM_DEVICE_FILE_EXT = 0x3233
SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swiftshader", "software rasterizer", "swrast")
DEFAULT_VENDOR_DIRS = ("/etc/glvnd/egl_vendor.d", "/usr/share/glvnd/egl_vendor.d")


@dataclass(frozen=True, slots=True)
class CudaDeviceId:
    """One entry of ``CUDA_VISIBLE_DEVICES``.

    Attributes:
        kind: ``index`` (``"3"``), ``uuid`` (``"GPU-8e1f..."``) or ``mig`` (``"MIG-..."``,
            a MIG instance: CUDA only, no graphics).
        value: The entry as written.
    """

    kind: Literal["index", "uuid", "mig"]
    value: str


def parse_cuda_visible_devices(value: str | None) -> tuple[CudaDeviceId, ...] | None:
    """Parse ``CUDA_VISIBLE_DEVICES`` as the CUDA driver reads it.

    Args:
        value: The variable's value; None when unset.

    Returns:
        None when unset (every GPU is visible), else the entries up to the first invalid
        one (CUDA ignores the rest); ``()`` for ``""``, ``"-1"`` or ``"NoDevFiles"``.
    """
    if value is None:
        return None
    out: list[CudaDeviceId] = []
    for raw in value.split(","):
        entry = raw.strip()
        if entry.startswith("MIG-"):
            out.append(CudaDeviceId("mig", entry))
        elif entry.startswith("GPU-"):
            out.append(CudaDeviceId("uuid", entry))
        elif entry.isdigit():
            out.append(CudaDeviceId("index", entry))
        else:  # "-1", "NoDevFiles", "" or garbage: CUDA stops here
            break
    return tuple(out)


@dataclass(frozen=True, slots=True)
class EglDevice:
    """One EGL device as ``eglQueryDevicesEXT`` lists it.

    Attributes:
        index: Position in EGL's own enumeration.
        cuda_ordinal: ``EGL_CUDA_DEVICE_NV`` (the CUDA device it drives, numbered as this
            process's CUDA sees them), None when the driver does not say (Mesa, or a GPU
            hidden by ``CUDA_VISIBLE_DEVICES``).
        extensions: The device's extension string, split.
        drm_file: ``EGL_DRM_DEVICE_FILE_EXT`` (``/dev/dri/cardN``), None if unknown.
    """

    index: int
    cuda_ordinal: int | None = None
    extensions: tuple[str, ...] = ()
    drm_file: str | None = None

    @property
    def is_software(self) -> bool:
        """Mesa's software device (llvmpipe)."""
        return "EGL_MESA_device_software" in self.extensions


@dataclass(frozen=True, slots=True)
class EglChoice:
    """The EGL device a worker should render on.

    Attributes:
        egl_index: Its index in EGL's enumeration; None when none drives the worker's GPU.
        reason: How it was chosen, or why none could be.
    """

    egl_index: int | None
    reason: str


def choose_egl_device(devices: Sequence[EglDevice],
                      visible: tuple[CudaDeviceId, ...] | None) -> EglChoice:
    """The EGL device that drives the worker's first visible CUDA device.

    The NVIDIA driver reports ``EGL_CUDA_DEVICE_NV`` relative to ``CUDA_VISIBLE_DEVICES``
    (the worker's GPU is ordinal 0 and hidden GPUs report none); drivers that report every
    GPU's physical ordinal are recognized by reporting more ordinals than GPUs are visible,
    and then an index entry is matched by its number.

    Args:
        devices: The node's EGL devices (:func:`query_egl_devices`).
        visible: The worker's ``CUDA_VISIBLE_DEVICES`` (:func:`parse_cuda_visible_devices`).

    Returns:
        The choice; ``egl_index`` is None when no device drives the worker's GPU (no
        NVIDIA EGL, a MIG instance, no visible GPU).
    """
    if visible is not None and not visible:
        return EglChoice(None, "CUDA_VISIBLE_DEVICES hides every GPU")
    first = visible[0] if visible else None
    if first is not None and first.kind == "mig":
        return EglChoice(None, f"{first.value} is a MIG instance; MIG instances have no "
                               "graphics (EGL renders only on whole GPUs)")
    mapped = [d for d in devices if d.cuda_ordinal is not None]
    if not mapped:
        soft = [d.index for d in devices if d.is_software]
        return EglChoice(None, f"none of the {len(devices)} EGL device(s) reports a CUDA "
                               f"device (EGL_NV_device_cuda); software devices: {soft}")
    ordinals = [d.cuda_ordinal for d in mapped]
    dup = next((o for o in ordinals if ordinals.count(o) > 1), None)
    if dup is not None:
        return EglChoice(None, f"{ordinals.count(dup)} EGL devices report CUDA ordinal {dup} "
                               "(ambiguous)")
    n_visible = len(visible) if visible is not None else None
    physical = n_visible is not None and len(mapped) > n_visible
    if physical and first is not None and first.kind == "index":
        want, how = int(first.value), f"physical CUDA ordinal {first.value}"
    elif physical:
        return EglChoice(None, f"the driver reports physical CUDA ordinals and {first} is "
                               "not an index")
    else:
        want, how = 0, "CUDA ordinal 0 (the worker's first visible GPU)"
    hits = [d for d in mapped if d.cuda_ordinal == want]
    if len(hits) != 1:
        return EglChoice(None, f"{len(hits)} EGL devices report {how}")
    return EglChoice(hits[0].index, f"EGL device {hits[0].index} drives {how}")


def mujoco_egl_device_id(choice: EglChoice, devices: Sequence[EglDevice], *,
                         cuda_ordered: bool) -> str | None:
    """The ``MUJOCO_EGL_DEVICE_ID`` value that makes MuJoCo render on ``choice``.

    Args:
        choice: The chosen device (:func:`choose_egl_device`).
        devices: The EGL devices.
        cuda_ordered: Whether the installed MuJoCo orders EGL devices by CUDA device when the
            driver maps them (MuJoCo >= 4.0; :func:`mujoco_orders_by_cuda`): then the value
            indexes the visible CUDA devices (0: the worker's GPU); before, it indexes EGL's
            own enumeration.

    Returns:
        The value, or None when there is nothing to choose.
    """
    if choice.egl_index is None:
        return None
    if cuda_ordered and any(d.cuda_ordinal is not None for d in devices):
        return "0"
    return str(choice.egl_index)


def mujoco_orders_by_cuda() -> bool:
    """Whether the installed MuJoCo's EGL module orders devices by CUDA device (>= 4.0)."""
    try:
        import mujoco

        major = int(str(mujoco.__version__).split(".")[0])
    except (ImportError, ValueError):  # pragma: no cover - mujoco is a dependency
        return False
    return major >= 4


def is_software_renderer(renderer: str) -> bool:
    """Whether an OpenGL ``GL_RENDERER`` string names a CPU rasterizer (llvmpipe, ...)."""
    low = renderer.lower()
    return any(s in low for s in SOFTWARE_RENDERERS)


def egl_vendor_files(environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The GLVND EGL vendor files the EGL loader would read.

    Args:
        environ: The environment (``__EGL_VENDOR_LIBRARY_FILENAMES`` lists files and
            overrides the directories; ``__EGL_VENDOR_LIBRARY_DIRS`` replaces the defaults).

    Returns:
        ``(files found, directories searched)``.
    """
    names = environ.get("__EGL_VENDOR_LIBRARY_FILENAMES")
    if names:
        files = [f for f in names.split(":") if f]
        return [f for f in files if Path(f).is_file()], [str(Path(f).parent) for f in files]
    dirs = [d for d in environ.get("__EGL_VENDOR_LIBRARY_DIRS", "").split(":") if d] or list(
        DEFAULT_VENDOR_DIRS)
    found = sorted(str(p) for d in dirs if Path(d).is_dir() for p in Path(d).glob("*.json"))
    return found, dirs


def describe_vendors(environ: Mapping[str, str]) -> tuple[str, str]:
    """``(what was found, where it was looked for)`` for :data:`SOFTWARE_RENDERING`."""
    found, dirs = egl_vendor_files(environ)
    libs = []
    for f in found:
        try:
            lib = json.loads(Path(f).read_text())["ICD"]["library_path"]
            libs.append(f"{Path(f).name} -> {lib}")
        except (OSError, ValueError, KeyError, TypeError):
            libs.append(Path(f).name)
    nvidia = any("nvidia" in s.lower() for s in libs)
    what = ("vendor files " + ", ".join(libs) if libs else "no vendor file") + (
        "" if nvidia else " (no NVIDIA one)")
    return what, ", ".join(dirs)


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id
    --format=csv,noheader,nounits``.

    Returns:
        One dict per GPU: ``index`` (int), ``uuid``, ``name``, ``memory_mib`` (float),
        ``pci_bus_id``.
    """
    rows = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        try:
            mem = float(parts[3])
        except ValueError:
            mem = float("nan")
        rows.append({"index": int(parts[0]), "uuid": parts[1], "name": parts[2],
                     "memory_mib": mem, "pci_bus_id": parts[4]})
    return rows


def gpu_of(rows: Sequence[Mapping[str, Any]],
           visible: tuple[CudaDeviceId, ...] | None) -> Mapping[str, Any] | None:
    """The ``nvidia-smi`` row of the worker's first visible GPU (by index or UUID prefix;
    a MIG instance maps to no row)."""
    if visible is not None and not visible:
        return None
    first = visible[0] if visible else CudaDeviceId("index", "0")
    for row in rows:
        if first.kind == "index" and row["index"] == int(first.value):
            return row
        if first.kind == "uuid" and str(row["uuid"]).startswith(first.value):
            return row
    return None


def query_gpu(visible: tuple[CudaDeviceId, ...] | None) -> Mapping[str, Any] | None:
    """The worker's GPU as ``nvidia-smi`` describes it; None without ``nvidia-smi``."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,uuid,name,memory.total,pci.bus_id",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20,
            check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return gpu_of(parse_nvidia_smi(out), visible)


def query_egl_devices() -> tuple[EglDevice, ...]:
    """The EGL devices of this node, with the CUDA ordinal each drives (ctypes, libEGL).

    Returns:
        The devices; ``()`` when libEGL or the device-enumeration extension is missing.
    """
    name = ctypes.util.find_library("EGL")
    if name is None:
        return ()
    try:
        egl = ctypes.CDLL(name)
    except OSError:
        return ()
    egl.eglGetProcAddress.restype = ctypes.c_void_p
    egl.eglGetProcAddress.argtypes = [ctypes.c_char_p]

    def proc(fname: bytes, restype: Any, *argtypes: Any) -> Any:
        addr = egl.eglGetProcAddress(fname)
        return ctypes.CFUNCTYPE(restype, *argtypes)(addr) if addr else None

    query_devices = proc(b"eglQueryDevicesEXT", ctypes.c_uint, ctypes.c_int,
                         ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int))
    query_attrib = proc(b"eglQueryDeviceAttribEXT", ctypes.c_uint, ctypes.c_void_p,
                        ctypes.c_int, ctypes.POINTER(ctypes.c_ssize_t))
    query_string = proc(b"eglQueryDeviceStringEXT", ctypes.c_char_p, ctypes.c_void_p,
                        ctypes.c_int)
    if query_devices is None:
        return ()
    handles = (ctypes.c_void_p * 32)()
    n = ctypes.c_int(0)
    if not query_devices(32, handles, ctypes.byref(n)):
        return ()
    out = []
    for i in range(n.value):
        ordinal: int | None = None
        if query_attrib is not None:
            value = ctypes.c_ssize_t(-1)
            if query_attrib(handles[i], EGL_CUDA_DEVICE_NV, ctypes.byref(value)):
                ordinal = int(value.value)
        exts: tuple[str, ...] = ()
        drm: str | None = None
        if query_string is not None:
            raw = query_string(handles[i], EGL_EXTENSIONS)
            exts = tuple(raw.decode().split()) if raw else ()
            if "EGL_EXT_device_drm" in exts:
                raw = query_string(handles[i], EGL_DRM_DEVICE_FILE_EXT)
                drm = raw.decode() if raw else None
        out.append(EglDevice(i, ordinal, exts, drm))
    return tuple(out)


def gl_renderer() -> str:
    """``GL_RENDERER`` of a small offscreen MuJoCo context made in this process (the same EGL
    display MuJoCo's renderers use, so the same device).

    Raises:
        Exception: Whatever MuJoCo raises when no context can be made.
    """
    import importlib

    mujoco: Any = importlib.import_module("mujoco")  # compiled bindings ship no stubs
    model = mujoco.MjModel.from_xml_string("<mujoco><worldbody/></mujoco>")
    ctx = mujoco.GLContext(8, 8)
    ctx.make_current()
    try:
        from OpenGL import GL

        raw = GL.glGetString(GL.GL_RENDERER)
        del model
        return raw.decode() if isinstance(raw, bytes) else str(raw)
    finally:
        ctx.free()
