"""Helpers shared by the perturbation axes: field access, splits, colours, geometry.

Nothing here holds state. Value-set helpers (:func:`split_hue`,
:func:`split_signs`) implement the Factor-World style ``train``/``test``
splits as *disjoint* sets; :func:`magnitude` turns a severity into a shift size.
"""

from __future__ import annotations

import colorsys
import math
import threading
import warnings
from collections.abc import Iterable, Sequence
from functools import reduce
from typing import Any

import mujoco
import numpy as np
from numpy.typing import ArrayLike

from robogen.errors import SceneError
from robogen.perturbations.base import check_level

HUE_SECTORS = 12
"""The colour wheel is cut into this many equal hue sectors (30 deg each);
``train`` draws hues from the even sectors, ``test`` from the odd ones."""

SET_CONST_FIELDS: tuple[str, ...] = (
    "body_subtreemass", "body_invweight0", "dof_invweight0", "dof_M0", "tendon_length0",
    "tendon_invweight0", "actuator_acc0", "actuator_length0", "cam_pos0", "cam_poscom0",
    "cam_mat0", "light_pos0", "light_poscom0", "light_dir0", "flexedge_length0",
    "flexedge_invweight0", "stat.meaninertia", "stat.meanmass", "stat.meansize",
)
"""Derived ``MjModel`` fields :func:`mujoco.mj_setConst` recomputes from the qpos0
configuration (inertial weights, camera/light offsets of tracking modes). A
perturbation whose edits need them recomputed lists them in MODEL_FIELDS so the
wrapper restores them from nominal before every reset."""


# ----------------------------------------------------------------------------- levels


def check_and_magnitude(rng: np.random.Generator, severity: float, split: str) -> float:
    """Validate a level and draw one shift size in ``[severity / 2, severity]``.

    Raises:
        InvalidPerturbationError: On a severity outside [0, 1] or an unknown split.
    """
    check_level(severity, split)
    return magnitude(rng, severity)


def magnitude(rng: np.random.Generator, severity: float) -> float:
    """Shift size in ``[severity / 2, severity]``: grows with severity, jittered per episode."""
    return float(severity) * float(rng.uniform(0.5, 1.0))


def split_signs(rng: np.random.Generator, n: int, split: str) -> np.ndarray:
    """``n`` random directions (+1/-1) from the value set of ``split``.

    ``train`` sign vectors have an even number of -1 entries, ``test`` an odd
    number, ``all`` any: the two sets are disjoint and each is uniform over its
    vectors, so every component still takes both signs in both splits.

    Returns:
        ``(n,) float64`` of +-1.
    """
    signs = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    if split in ("train", "test") and n > 0:
        want = 0 if split == "train" else 1
        if int(np.sum(signs < 0)) % 2 != want:
            signs[int(rng.integers(n))] *= -1.0
    return signs


def split_hue(rng: np.random.Generator, split: str) -> float:
    """A hue in [0, 1) from the sectors of ``split`` (even sectors: train, odd: test)."""
    half = HUE_SECTORS // 2
    if split == "train":
        sector = 2 * int(rng.integers(half))
    elif split == "test":
        sector = 2 * int(rng.integers(half)) + 1
    else:
        sector = int(rng.integers(HUE_SECTORS))
    return (sector + float(rng.uniform(0.0, 1.0))) / HUE_SECTORS


def hue_sector(rgb: Sequence[float]) -> int:
    """The hue sector (0 .. :data:`HUE_SECTORS` - 1) of an RGB colour in [0, 1]: even
    sectors hold the ``train`` hues of :func:`split_hue`, odd ones the ``test`` hues."""
    r, g, b = (float(c) for c in rgb)
    return int(math.floor(colorsys.rgb_to_hsv(r, g, b)[0] * HUE_SECTORS)) % HUE_SECTORS


def sign_parity(values: Iterable[float]) -> int:
    """How many of ``values`` are negative, modulo 2: 0 for the ``train`` sign vectors of
    :func:`split_signs`, 1 for the ``test`` ones."""
    return sum(1 for v in values if v < 0) % 2


def hsv(h: float, s: float, v: float) -> tuple[float, float, float]:
    """HSV in [0, 1] to an RGB tuple of floats in [0, 1] (rounded to 6 digits)."""
    return tuple(round(float(c), 6) for c in colorsys.hsv_to_rgb(h % 1.0, s, v))  # type: ignore[return-value]


def log_factor(sign: float, size: float, max_factor: float) -> float:
    """``max_factor ** (sign * size)``: a multiplicative change, symmetric in log space."""
    return float(math.exp(sign * size * math.log(max_factor)))


# ----------------------------------------------------------------------------- model fields


def has_field(model: mujoco.MjModel, path: str) -> bool:
    """True if the dotted attribute path exists on ``model``."""
    try:
        get_field(model, path)
    except AttributeError:
        return False
    return True


def get_field(model: mujoco.MjModel, path: str) -> Any:
    """Value of a dotted attribute path (``"opt.gravity"``, ``"vis.headlight.diffuse"``)."""
    return reduce(getattr, path.split("."), model)


def copy_field(dst: mujoco.MjModel, src: mujoco.MjModel, path: str) -> None:
    """Copy the dotted field ``path`` from ``src`` into ``dst`` in place.

    Array fields are copied into the existing buffer; scalar fields (``stat.meanmass``,
    ``vis.headlight.active``) are set on their parent struct.
    """
    parts = path.split(".")
    dparent = reduce(getattr, parts[:-1], dst)
    sparent = reduce(getattr, parts[:-1], src)
    value = getattr(sparent, parts[-1])
    if isinstance(value, np.ndarray):
        target = getattr(dparent, parts[-1])
        if target.shape != value.shape:
            raise SceneError(
                f"cannot restore {path}: shape {target.shape} differs from nominal {value.shape}; "
                "the installed model and the remembered nominal have different structures"
            )
        np.copyto(target, value)
    else:
        setattr(dparent, parts[-1], value)


def compile_spec(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """Compile ``spec`` (silences the ``settotalmass`` deprecation of half_cheetah.xml)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*settotalmass.*")
        return spec.compile()


SET_CONST_GEOMETRY = ("body_pos", "body_quat", "geom_pos", "geom_quat", "geom_size")
"""Placement and size fields an env may rewrite at reset and ``mj_setConst`` reads (Meta-World
moves its door, drawer, button, window and peg bodies through ``model.body_pos``; dm_control's
reacher moves and resizes its target geom, ``geom_pos``/``geom_size``, which the bounding
volumes ``bvh_aabb`` are computed from)."""
_SCRATCH = threading.local()
_SCRATCH_MODELS = 16
"""Scratch ``MjData`` kept per thread for this many models (a worker's env slots)."""


def set_const(model: mujoco.MjModel, geometry: mujoco.MjModel | None = None) -> None:
    """Recompute derived constants (:data:`SET_CONST_FIELDS`) using a scratch ``MjData``.

    The scratch data is kept per thread and model: allocating an ``MjData`` costs about
    a millisecond (300x ``mj_setConst`` itself on Reacher), and ``mj_setConst`` overwrites
    the state it reads (``qpos`` from ``qpos0``), so the constants are the same as with a
    fresh one (``tests/perturbations/test_set_const.py``).

    Args:
        model: Model whose derived constants are recomputed in place.
        geometry: If given, the constants are computed with its body placements
            (:data:`SET_CONST_GEOMETRY`), so they never depend on where an earlier
            reset left a body; ``model``'s own placements are kept afterwards.
    """
    cache: dict[int, tuple[mujoco.MjModel, mujoco.MjData]] = _SCRATCH.__dict__.setdefault(
        "by_model", {})
    hit = cache.get(id(model))
    if hit is None or hit[0] is not model:
        if len(cache) >= _SCRATCH_MODELS:
            cache.pop(next(iter(cache)))
        hit = cache[id(model)] = (model, mujoco.MjData(model))
    if geometry is None:
        mujoco.mj_setConst(model, hit[1])
        return
    saved = {f: getattr(model, f).copy() for f in SET_CONST_GEOMETRY}
    for f in SET_CONST_GEOMETRY:
        getattr(model, f)[:] = getattr(geometry, f)
    try:
        mujoco.mj_setConst(model, hit[1])
    finally:
        for f, value in saved.items():
            getattr(model, f)[:] = value


# ----------------------------------------------------------------------------- names


def ids_of(model: mujoco.MjModel, obj: mujoco.mjtObj, names: Iterable[str], what: str) -> list[int]:
    """Ids of named elements.

    Raises:
        SceneError: If a name is not in the model (the scene's roles are stale).
    """
    out = []
    for name in names:
        i = mujoco.mj_name2id(model, obj, name)
        if i < 0:
            raise SceneError(
                f"scene role names {what} {name!r}, which the model does not have; "
                "the env's SceneRoles must name elements of its compiled model"
            )
        out.append(int(i))
    return out


def subtree_bodies(model: mujoco.MjModel, roots: Iterable[int]) -> set[int]:
    """Body ids of ``roots`` and all their descendants."""
    roots = set(roots)
    out = set()
    for b in range(model.nbody):
        c = b
        while True:
            if c in roots:
                out.add(b)
                break
            if c == 0:
                break
            c = int(model.body_parentid[c])
    return out


def joint_dofs(model: mujoco.MjModel, joint_ids: Iterable[int]) -> list[int]:
    """Dof indices of the given joints."""
    width = {int(mujoco.mjtJoint.mjJNT_FREE): 6, int(mujoco.mjtJoint.mjJNT_BALL): 3}
    out: list[int] = []
    for j in joint_ids:
        adr = int(model.jnt_dofadr[j])
        out.extend(range(adr, adr + width.get(int(model.jnt_type[j]), 1)))
    return out


# ----------------------------------------------------------------------------- geometry


def rotation(axis: ArrayLike, angle: float) -> np.ndarray:
    """``(3, 3) float64`` rotation by ``angle`` [rad] about ``axis`` (``(3,)`` array-like, any
    nonzero length; right-hand rule)."""
    a = np.asarray(axis, dtype=float)
    n = np.linalg.norm(a)
    if n < 1e-12 or angle == 0.0:
        return np.eye(3)
    quat = np.zeros(4)
    mujoco.mju_axisAngle2Quat(quat, a / n, float(angle))
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, quat)
    return mat.reshape(3, 3)


def mat_to_quat(mat: np.ndarray) -> np.ndarray:
    """``(4,) float64`` unit quaternion (w, x, y, z) of a ``(3, 3)`` rotation matrix."""
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(mat, dtype=float).reshape(-1))
    return quat


def quat_to_mat(quat: Sequence[float]) -> np.ndarray:
    """``(3, 3) float64`` rotation matrix of a quaternion (w, x, y, z)."""
    mat = np.zeros(9)
    q = np.asarray(quat, dtype=float)
    mujoco.mju_quat2Mat(mat, q / np.linalg.norm(q))
    return mat.reshape(3, 3)


def world_aabb(model: mujoco.MjModel, data: mujoco.MjData, geom: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """World axis-aligned box of a geom from ``geom_aabb`` and the current ``geom_xpos/xmat``.

    Returns:
        ``(center, half)``: two ``(3,) float64`` arrays [m].
    """
    rot = data.geom_xmat[geom].reshape(3, 3)
    box = model.geom_aabb[geom]
    center = data.geom_xpos[geom] + rot @ box[:3]
    half = np.abs(rot) @ box[3:]
    return center, half


def boxes_overlap(c1: np.ndarray, h1: np.ndarray, c2: np.ndarray, h2: np.ndarray,
                  margin: float) -> bool:
    """True if two axis-aligned boxes come closer than ``margin`` [m] on every axis."""
    return bool(np.all(np.abs(c1 - c2) < h1 + h2 + margin))


def primitive_aabb(gtype: int, size: Sequence[float]) -> tuple[float, float, float]:
    """Local half extents of a box, sphere or cylinder of MuJoCo ``size`` [m]."""
    if gtype == int(mujoco.mjtGeom.mjGEOM_BOX):
        return float(size[0]), float(size[1]), float(size[2])
    if gtype == int(mujoco.mjtGeom.mjGEOM_SPHERE):
        return float(size[0]), float(size[0]), float(size[0])
    if gtype == int(mujoco.mjtGeom.mjGEOM_CYLINDER):
        return float(size[0]), float(size[0]), float(size[1])
    raise SceneError(f"distractor geoms must be box, sphere or cylinder, got geom type {gtype}")


def primitive_rbound(gtype: int, size: Sequence[float]) -> float:
    """Bounding-sphere radius MuJoCo's compiler gives a box, sphere or cylinder [m]."""
    if gtype == int(mujoco.mjtGeom.mjGEOM_BOX):
        return float(np.linalg.norm(np.asarray(size[:3], dtype=float)))
    if gtype == int(mujoco.mjtGeom.mjGEOM_SPHERE):
        return float(size[0])
    if gtype == int(mujoco.mjtGeom.mjGEOM_CYLINDER):
        return float(math.hypot(size[0], size[1]))
    raise SceneError(f"distractor geoms must be box, sphere or cylinder, got geom type {gtype}")


def rounded(values: Iterable[float], digits: int = 6) -> tuple[float, ...]:
    """A tuple of floats rounded to ``digits`` (stable, compact records)."""
    return tuple(round(float(v), digits) for v in values)
