# pyright: reportAttributeAccessIssue=false
# (mujoco's compiled bindings ship no stubs for these attributes)
"""N worlds of one compiled ``MjModel`` on a warp device, stepped together by MJWarp.

MJWarp (``mujoco_warp``) keeps one ``Model`` whose array fields have a leading world
axis of size 1 (shared) or N (one row per world; world ``i`` reads row ``i % rows``),
and one ``Data`` with ``nworld`` rows. :class:`BatchedWorlds` wraps that pair: per-world
states and model fields in, an action batch per step, ``qpos``/``qvel`` out. Arrays
cross to the host as float64 copies; on the device MJWarp computes in float32, so a
batched trajectory matches C MuJoCo (float64) only within a float32 tolerance
(``tests/batched/test_parity.py`` pins it).

warp compiles its kernels at the first step of a model it has not seen (tens of seconds
to minutes on a CPU; cached in ``~/.cache/warp`` or ``$WARP_CACHE_PATH``), so the first
:meth:`BatchedWorlds.step` of a process is slow and later ones are not.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import mujoco
import numpy as np
from numpy.typing import NDArray

from robogen.errors import DependencyMissingError, InvalidSpecError

MJWARP_EXTRA = "batched"
"""The pyproject extra that installs MJWarp (``pip install "robogen[batched]"``)."""

MJWARP_WHAT = "the batched backend (MuJoCo Warp; in a robogen checkout: make setup-batched)"

BAD_WORLDS = "worlds must be an int >= 1, got {value!r}; pass the number of parallel worlds"
BAD_SHAPE = "{what} must have shape {expected}, got {got}; pass one row per world"
NOT_BATCHABLE_FIELD = (
    "MJWarp has no per-world field {name!r} (batchable fields lead with a world axis); "
    "this edit cannot vary across worlds: run it with --backend ray"
)

NCONMAX = 64
"""Default contacts allocated per world. MJWarp's own default (48 for robogen's tabletop
tasks) is sized from the state it is given; the tabletop tasks reach 17 contacts under
random actions (C MuJoCo, 4 x 300 env steps)."""

NJMAX = 256
"""Default constraint rows per world. MJWarp's own default (64) overflows on the tabletop
tasks, which reach 65 rows (elliptic cones: 3 per contact, plus joint limits) under random
actions; an overflowing world silently drops constraints (MJWarp prints a warning)."""

_STATE_FIELDS = ("qpos", "qvel", "act", "mocap_pos", "mocap_quat", "ctrl")


def load_mjwarp() -> tuple[ModuleType, ModuleType]:
    """Import ``warp`` (logging warnings only) and ``mujoco_warp``.

    warp caches compiled kernels in ``$WARP_CACHE_PATH`` if set, else ``~/.cache/warp``.

    Returns:
        ``(warp, mujoco_warp)``.

    Raises:
        DependencyMissingError: If the ``batched`` extra is not installed; the message
            names ``pip install "robogen[batched]"`` and ``make setup-batched``.
    """
    # imported by name: the type checker runs where the extra is not installed (CI)
    try:
        warp = importlib.import_module("warp")
        # warnings only (no start-up banner, no "Module ... took N ms" line per kernel module)
        warp.config.log_level = warp.LOG_WARNING
        _init_quietly(warp)
        mujoco_warp = importlib.import_module("mujoco_warp")
    except ImportError as e:
        raise DependencyMissingError(MJWARP_WHAT, "mujoco_warp", MJWARP_EXTRA) from e
    return warp, mujoco_warp


def _init_quietly(warp: ModuleType) -> None:
    """``warp.init()``; on a Linux machine without the NVIDIA driver library, without the
    line warp's native code prints there ("Warp CUDA warning: Could not find or load the
    NVIDIA CUDA driver"): expected on a CPU machine, it says nothing a user can act on.
    Where the driver library exists, warp's messages pass through unchanged."""
    import ctypes
    import os
    import sys

    if not sys.platform.startswith("linux"):
        warp.init()
        return
    for name in ("libcuda.so", "libcuda.so.1"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        warp.init()
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            warp.init()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _array_fields(cls: type) -> dict[str, bool]:
    """Array fields of an MJWarp dataclass -> whether their leading axis is per world."""
    out: dict[str, bool] = {}
    for f in dataclasses.fields(cls):
        shape = getattr(f.type, "shape", None)
        if isinstance(shape, tuple) and shape:
            out[f.name] = shape[0] == "*"
    return out


class BatchedWorlds:
    """N worlds of one scene in MJWarp on one warp device.

    Args:
        model: The compiled scene (host); its nominal fields are shared by all worlds
            until :meth:`set_fields` gives a field one row per world.
        worlds: Number of worlds N (>= 1).
        device: warp device (``"cpu"``, ``"cuda:0"``).
        data: Host state every world starts from (None: ``MjData(model)`` after
            ``mj_forward``).
        nconmax: Contacts allocated per world (:data:`NCONMAX`).
        njmax: Constraint rows allocated per world (:data:`NJMAX`).

    Raises:
        InvalidSpecError: On ``worlds`` < 1.
        DependencyMissingError: Without the ``batched`` extra.
        NotImplementedError: From MJWarp, for a model feature it does not implement.
    """

    def __init__(self, model: mujoco.MjModel, worlds: int, *, device: str = "cpu",
                 data: mujoco.MjData | None = None, nconmax: int = NCONMAX,
                 njmax: int = NJMAX) -> None:
        if isinstance(worlds, bool) or not isinstance(worlds, (int, np.integer)) or worlds < 1:
            raise InvalidSpecError(BAD_WORLDS.format(value=worlds))
        self._wp, self._mjw = load_mjwarp()
        self.model = model
        self.worlds = int(worlds)
        self.device = device
        if data is None:
            data = mujoco.MjData(model)
            mujoco.mj_forward(model, data)
        self._model_batched = _array_fields(self._mjw.Model)
        self._opt_batched = _array_fields(self._mjw.Option)
        with self._wp.ScopedDevice(device):
            self.m: Any = self._mjw.put_model(model)
            self.d: Any = self._mjw.put_data(model, data, nworld=self.worlds,
                                             nconmax=nconmax, njmax=njmax)

    # ------------------------------------------------------------------ model fields

    def has_field(self, path: str) -> bool:
        """True if MJWarp's model has ``path`` (``body_mass``, ``opt.gravity``) per world."""
        if path.startswith("opt."):
            return self._opt_batched.get(path[4:], False)
        return self._model_batched.get(path, False)

    def known_field(self, path: str) -> bool:
        """True if MJWarp's model stores ``path`` at all (per world or shared)."""
        if path.startswith("opt."):
            return path[4:] in self._opt_batched
        return path in self._model_batched

    def set_fields(self, fields: Mapping[str, NDArray[np.floating[Any]]]) -> None:
        """Give each named model field one row per world.

        Args:
            fields: ``MjModel`` path -> ``(worlds, *host_shape)`` values (host shape as
                ``getattr(model, path)``; cast to the device field's dtype: float32 for
                real-valued fields).

        Raises:
            InvalidSpecError: On a field MJWarp does not batch or a wrong shape.
        """
        for path, values in fields.items():
            if not self.has_field(path):
                raise InvalidSpecError(NOT_BATCHABLE_FIELD.format(name=path))
            owner, name = (self.m.opt, path[4:]) if path.startswith("opt.") else (self.m, path)
            old = getattr(owner, name)
            host = np.asarray(getattr(self.model.opt, name) if owner is self.m.opt
                              else getattr(self.model, name))
            expected = (self.worlds, *host.shape)
            arr = np.asarray(values)
            if arr.shape != expected:
                raise InvalidSpecError(BAD_SHAPE.format(what=path, expected=expected,
                                                        got=arr.shape))
            new = self._wp.array(arr, dtype=old.dtype, device=old.device,
                                 shape=(self.worlds, *old.shape[1:]))
            setattr(owner, name, new)

    def field(self, path: str) -> NDArray[np.float64]:
        """A model field as every world sees it: ``(worlds, *host_shape)`` float64 copy."""
        owner, name = (self.m.opt, path[4:]) if path.startswith("opt.") else (self.m, path)
        host = np.asarray(getattr(self.model.opt, name) if owner is self.m.opt
                          else getattr(self.model, name))
        arr = getattr(owner, name)
        if host.size == 0:
            return np.zeros((self.worlds, *host.shape))
        rows = arr.numpy().reshape(arr.shape[0], *host.shape).astype(np.float64)
        return rows[np.arange(self.worlds) % rows.shape[0]]

    # ------------------------------------------------------------------ state

    def set_state(self, **state: NDArray[np.floating[Any]]) -> None:
        """Overwrite state rows of every world, then recompute derived quantities.

        Args:
            **state: Any of ``qpos (worlds, nq)``, ``qvel (worlds, nv)``, ``act (worlds, na)``,
                ``mocap_pos (worlds, nmocap, 3)``, ``mocap_quat (worlds, nmocap, 4)``,
                ``ctrl (worlds, nu)``; float64 or float32.

        Raises:
            InvalidSpecError: On an unknown name or a wrong shape.
        """
        for name, values in state.items():
            if name not in _STATE_FIELDS:
                raise InvalidSpecError(f"unknown state field {name!r}; expected one of "
                                       f"{list(_STATE_FIELDS)}")
            self._write(name, values)
        self.d.overflow.zero_()
        with self._wp.ScopedDevice(self.device):
            self._mjw.forward(self.m, self.d)

    def set_states_from(self, datas: Sequence[mujoco.MjData]) -> None:
        """Copy each host ``MjData``'s state into its world (one per world, in order)."""
        if len(datas) != self.worlds:
            raise InvalidSpecError(BAD_SHAPE.format(what="datas", expected=(self.worlds,),
                                                    got=(len(datas),)))
        self.set_state(**{f: np.stack([getattr(d, f) for d in datas]) for f in _STATE_FIELDS})

    def step(self, ctrl: NDArray[np.floating[Any]], nstep: int = 1) -> None:
        """Set ``ctrl`` (worlds, nu) and advance every world by ``nstep`` physics steps."""
        self._write("ctrl", ctrl)
        self.advance(nstep)

    def advance(self, nstep: int = 1) -> None:
        """Advance every world by ``nstep`` physics steps with the ``ctrl`` already on the
        device (written by a :class:`~robogen.batched.tasks.BatchedTask`'s ``apply_action``)."""
        with self._wp.ScopedDevice(self.device):
            for _ in range(nstep):
                self._mjw.step(self.m, self.d)

    def overflows(self) -> NDArray[np.int64]:
        """Each world's buffer overflows since the last :meth:`set_state`: ``(worlds,)`` int.

        A bitmask of ``mujoco_warp.OverflowType`` (``NEFC``: more constraint rows than
        ``njmax``; ``NARROWPHASE``: more contacts than allocated; ...), without the
        solver-iteration bits (C MuJoCo stops at its iteration limit silently too). A world
        with a nonzero entry dropped contacts or constraints: its trajectory is wrong.
        """
        ignore = int(self._mjw.OverflowType.ITERATIONS | self._mjw.OverflowType.LS_ITERATIONS)
        return self.d.overflow.numpy().astype(np.int64) & ~ignore

    def synchronize(self) -> None:
        """Wait for the device to finish the queued steps (for timing)."""
        self._wp.synchronize_device(self.device)

    def tensor(self, name: str) -> Any:
        """A zero-copy torch view of a device array (DLPack through ``warp.to_torch``).

        Args:
            name: A ``Data`` field (``qpos``, ``qvel``, ``ctrl``, ``xpos``, ``site_xpos``,
                ``sensordata``, ...) or ``"m."`` + a ``Model`` field (``m.body_mass``).

        Returns:
            ``torch.Tensor`` on the worlds' device sharing memory with MJWarp's array:
            ``(worlds, *shape)`` for ``Data`` fields, ``(rows, *shape)`` for model fields
            (rows 1 when shared); warp vector dtypes add their trailing dimension
            (``xpos``: ``(worlds, nbody, 3)``); float32 for real-valued fields. Writing into
            it writes the worlds' state.

        Raises:
            InvalidSpecError: On an unknown field name.
        """
        owner, field = (self.m, name[2:]) if name.startswith("m.") else (self.d, name)
        arr = getattr(owner, field, None)
        if arr is None or not hasattr(arr, "dtype"):
            raise InvalidSpecError(f"MJWarp has no array {name!r}; expected a Data field "
                                   "(qpos, qvel, ctrl, xpos, site_xpos, ...) or 'm.<Model field>'")
        return self._wp.to_torch(arr)

    @property
    def qpos(self) -> NDArray[np.float64]:
        """Joint positions ``(worlds, nq)`` float64 (copy)."""
        return self.d.qpos.numpy().astype(np.float64)

    @property
    def qvel(self) -> NDArray[np.float64]:
        """Joint velocities ``(worlds, nv)`` float64 (copy)."""
        return self.d.qvel.numpy().astype(np.float64)

    def _write(self, name: str, values: NDArray[np.floating[Any]]) -> None:
        arr = getattr(self.d, name)
        expected = (self.worlds, *arr.shape[1:], *getattr(arr.dtype, "_shape_", ()))
        v = np.asarray(values)
        if v.shape != expected:
            raise InvalidSpecError(BAD_SHAPE.format(what=name, expected=expected, got=v.shape))
        arr.assign(self._wp.array(v, dtype=arr.dtype, device=arr.device, shape=arr.shape))
