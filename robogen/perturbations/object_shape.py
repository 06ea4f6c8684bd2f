"""The ``object_shape`` axis: the manipulated object replaced by a composition of primitives.

The geoms of the scene's first object body (``roles.object_bodies[0]``) are removed from a
fresh nominal spec and a shape composed of MuJoCo primitives is added in their place (a
structural edit: the scene is recompiled). Grasping policies trained on random
compositions of primitives transfer to real objects (Tobin et al. 2018, "Domain
Randomization and Generative Models for Robotic Grasping"); here the compositions are the
held-out objects a policy meets.

Shapes, with ``w`` the half-width and ``h`` the half-height (all sizes in m):

=========  ========================================================================
shape      primitives (body frame; the composition stands on the old bottom)
=========  ========================================================================
box        one box ``(w, w, h)``
cylinder   one upright cylinder, radius ``w``, half-height ``h``
sphere     one ellipsoid ``(w, w, h)`` (a sphere when ``h = w``)
l_shape    two boxes: a bar ``(w, w/2, h)`` along x and a bar ``(w/2, w, h)`` at its end
capsule    one capsule lying along x, radius ``h``, cylinder half-length ``w``
ring       a torus of 8 capsules lying flat, major radius ``1.2 w``, minor radius
           ``min(h, 0.45 w)``
t_shape    two boxes: a bar ``(w, w/3, h)`` along x and a stem ``(w/3, w, h)`` from its middle
dumbbell   a capsule along x, radius ``h/2``, half-length ``w``, and a sphere of radius ``h``
           at each end
=========  ========================================================================

Size and proportions scale with severity: ``w = w0 * 1.5^(+-m)`` and ``h = w * 2^(+-m')``
(``w0``: the nominal object's half-width; ``m, m'`` drawn in ``[severity / 2, severity]``),
so at severity 1 the object is 1/1.5 to 1.5 times as wide and half to twice as tall as it
is wide. The shape itself is not graded by severity: any severity draws any shape of the
split.

Splits: train draws box, cylinder, sphere or l_shape; test capsule, ring, t_shape or
dumbbell (disjoint shape sets; ``all`` any of the eight).

Mass and inertia come from the geometry: every primitive gets the density of the nominal
object (its mass over its volume), and MuJoCo computes the body's mass, centre of mass and
inertia from the geoms. The new geoms keep the first old geom's contact and look
(``contype``, ``conaffinity``, ``condim``, friction, ``solref``, ``solimp``, material,
colour, group); the first is named like it (so roles that name it, e.g. the texture axis's
object geoms, still find it).

Recorded: ``values`` holds the shape, ``size_factor = w / w0`` and ``aspect = h / w``;
``applied`` the installed primitives (type, size, centre), the composition's extents
(half-sizes of its bounding box) and the compiled body's mass [kg].

Scene support: the env must find its object by body, joint and site only
(``rebuildable_objects``: the built-in tasks, Gymnasium's Pusher, Fetch Push, PickAndPlace
and Slide); robosuite, Meta-World and dm_control refer to their objects' geoms by name, so
the axis reports "not applied" there.

Scripted experts (``robogen eval --policy expert:... --axes object_shape``, 64 episodes,
seed 0; successes per shape drawn): PickPlace at severity 0.5: box 7/7, cylinder 11/11,
l_shape 9/9, ring 6/6, t_shape 10/10, dumbbell 9/10, sphere 6/8, capsule 2/3; at severity 1
(larger and more stretched): box 6/7, cylinder 8/11, l_shape 6/9, ring 6/6, t_shape 9/10,
dumbbell 7/10, sphere 5/8, capsule 1/3. Push at severity 1: box 6/7, cylinder 10/11,
l_shape 6/9, ring 6/6, t_shape 10/10, dumbbell 7/10, sphere 6/8, capsule 2/3. The experts
fail on the rolling shapes (sphere, capsule, dumbbell) and the largest, tallest ones;
every shape of nominal size is grasped and placed (``tests/perturbations/test_object_shape.py``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import numpy as np

from robogen.perturbations import helpers as u
from robogen.perturbations.base import Axis, Perturbation, register_axis

if TYPE_CHECKING:
    from robogen.envs.base import MujocoScene

SHAPE_SETS = {"train": ("box", "cylinder", "sphere", "l_shape"),
              "test": ("capsule", "ring", "t_shape", "dumbbell")}
"""Shapes of each split (disjoint); ``all`` draws from both."""
MAX_SIZE_FACTOR = 1.5
"""Half-width factor range at severity 1: ``[1/1.5, 1.5]``."""
MAX_ASPECT_FACTOR = 2.0
"""Height-to-width ratio range at severity 1: ``[1/2, 2]``."""
RING_SEGMENTS = 8
"""Capsules of a ring."""
PRIMITIVE_TYPES = ("box", "cylinder", "ellipsoid", "capsule", "sphere")
_VOLUME_TYPES = set(PRIMITIVE_TYPES)


@dataclass(frozen=True, slots=True)
class Primitive:
    """One geom of a composition.

    Attributes:
        type: MuJoCo geom type name: ``box``, ``cylinder``, ``ellipsoid``, ``capsule``,
            ``sphere``.
        size: MuJoCo ``size`` of that type [m].
        pos: Centre in the composition frame (x, y on the old centre, z = 0 on the old
            bottom) [m].
        yaw: Rotation about z [rad]; a capsule or cylinder with ``lying`` is first turned
            from z onto x.
        lying: True for a capsule/cylinder whose axis lies along the rotated x axis.
    """

    type: str
    size: tuple[float, ...]
    pos: tuple[float, float, float]
    yaw: float = 0.0
    lying: bool = False

    def quat(self) -> list[float]:
        """Orientation (w, x, y, z) in the body frame."""
        rot = u.rotation((0.0, 0.0, 1.0), self.yaw)
        if self.lying:
            rot = rot @ u.rotation((0.0, 1.0, 0.0), math.pi / 2)
        return [float(x) for x in u.mat_to_quat(rot)]

    def volume(self) -> float:
        """Volume [m^3]."""
        s = self.size
        if self.type == "box":
            return 8.0 * s[0] * s[1] * s[2]
        if self.type == "cylinder":
            return 2.0 * math.pi * s[0] ** 2 * s[1]
        if self.type == "ellipsoid":
            return 4.0 / 3.0 * math.pi * s[0] * s[1] * s[2]
        if self.type == "sphere":
            return 4.0 / 3.0 * math.pi * s[0] ** 3
        return 2.0 * math.pi * s[0] ** 2 * s[1] + 4.0 / 3.0 * math.pi * s[0] ** 3  # capsule


def compose(shape: str, w: float, h: float) -> tuple[Primitive, ...]:
    """The primitives of ``shape`` (module table), standing on z = 0, centred on x = y = 0.

    Raises:
        ValueError: On an unknown shape.
    """
    r6 = lambda x: round(float(x), 6)  # noqa: E731 - a local rounding helper
    if shape == "box":
        return (Primitive("box", (r6(w), r6(w), r6(h)), (0.0, 0.0, r6(h))),)
    if shape == "cylinder":
        return (Primitive("cylinder", (r6(w), r6(h)), (0.0, 0.0, r6(h))),)
    if shape == "sphere":
        return (Primitive("ellipsoid", (r6(w), r6(w), r6(h)), (0.0, 0.0, r6(h))),)
    if shape == "l_shape":
        return (Primitive("box", (r6(w), r6(w / 2), r6(h)), (0.0, r6(-w / 2), r6(h))),
                Primitive("box", (r6(w / 2), r6(w), r6(h)), (r6(w / 2), r6(w / 2), r6(h))))
    if shape == "capsule":
        return (Primitive("capsule", (r6(h), r6(w)), (0.0, 0.0, r6(h)), lying=True),)
    if shape == "ring":
        minor, major = min(h, 0.45 * w), 1.2 * w
        half_len = major * math.sin(math.pi / RING_SEGMENTS)
        return tuple(
            Primitive("capsule", (r6(minor), r6(half_len)),
                      (r6(major * math.cos(a)), r6(major * math.sin(a)), r6(minor)),
                      yaw=r6(a + math.pi / 2), lying=True)
            for a in (2 * math.pi * (k + 0.5) / RING_SEGMENTS for k in range(RING_SEGMENTS)))
    if shape == "t_shape":
        return (Primitive("box", (r6(w), r6(w / 3), r6(h)), (0.0, r6(2 * w / 3), r6(h))),
                Primitive("box", (r6(w / 3), r6(w), r6(h)), (0.0, r6(-w / 3), r6(h))))
    if shape == "dumbbell":
        return (Primitive("capsule", (r6(h / 2), r6(w)), (0.0, 0.0, r6(h)), lying=True),
                Primitive("sphere", (r6(h),), (r6(-w), 0.0, r6(h))),
                Primitive("sphere", (r6(h),), (r6(w), 0.0, r6(h))))
    raise ValueError(f"object shape must be one of {[*SHAPE_SETS['train'], *SHAPE_SETS['test']]}"
                     f", got {shape!r}")


def _geom_type(name: str) -> mujoco.mjtGeom:
    return getattr(mujoco.mjtGeom, f"mjGEOM_{name.upper()}")


def _body_box(model: mujoco.MjModel, body: int) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)``, each ``(3,)``: the bounding box of ``body``'s geoms in the body frame
    [m] (each geom's own bounding box, rotated by its orientation)."""
    adr, num = int(model.body_geomadr[body]), int(model.body_geomnum[body])
    lows, highs = [], []
    for g in range(adr, adr + num):
        rot = u.quat_to_mat(model.geom_quat[g])
        centre = np.asarray(model.geom_pos[g]) + rot @ np.asarray(model.geom_aabb[g][:3])
        half = np.abs(rot) @ np.asarray(model.geom_aabb[g][3:6])
        lows.append(centre - half)
        highs.append(centre + half)
    return np.min(lows, axis=0), np.max(highs, axis=0)


def _nominal_object(model: mujoco.MjModel, body: int) -> tuple[float, float, float, float]:
    """(half-width, bottom z and centre x, y in the body frame) of ``body``'s geoms [m]."""
    low, high = _body_box(model, body)
    width = float(max(high[0] - low[0], high[1] - low[1])) / 2.0
    return width, float(low[2]), float(low[0] + high[0]) / 2, float(low[1] + high[1]) / 2


@dataclass(frozen=True, slots=True)
class ObjectShapePerturbation(Perturbation):
    """The object of one episode.

    Attributes:
        body: Name of the object body whose geoms are replaced; empty when the scene has
            none the axis can rebuild (:meth:`ObjectShapeAxis.missing_roles`): no edit.
        shape: Shape name (module table).
        size_factor: ``w / w0``, the half-width relative to the nominal object's [-].
        aspect: ``h / w``, half-height over half-width [-].
    """

    axis: ClassVar[str] = "object_shape"

    body: str
    shape: str
    size_factor: float
    aspect: float

    @property
    def has_spec_edit(self) -> bool:
        """True unless the scene has no object to rebuild (``body`` empty)."""
        return bool(self.body)

    def edit_spec(self, spec: mujoco.MjSpec, scene: MujocoScene) -> bool:
        """Replace the object body's geoms by the composition (module docstring).

        The nominal object's half-width, bottom, centre and density are read from a compile
        of ``spec`` before the edit (a fresh nominal spec: ~0.5 ms for the tabletop scene).
        """
        nominal = u.compile_spec(spec)
        bid = int(nominal.body(self.body).id)
        w0, bottom, cx, cy = _nominal_object(nominal, bid)
        density = _density(nominal, bid)
        w = w0 * self.size_factor
        body = spec.body(self.body)
        old = list(body.geoms)
        first = old[0]
        keep = {k: getattr(first, k) for k in ("contype", "conaffinity", "condim", "friction",
                                                "solref", "solimp", "priority", "group",
                                                "material", "rgba", "margin", "gap")}
        name = first.name
        for g in old:
            spec.delete(g)
        body.explicitinertial = False  # mass and inertia from the new geoms
        for k, p in enumerate(compose(self.shape, w, w * self.aspect)):
            geom = body.add_geom()
            geom.name = name if k == 0 else f"{name}_part{k}"
            geom.type = _geom_type(p.type)
            geom.size = [*p.size, *([0.0] * (3 - len(p.size)))]
            geom.pos = [cx + p.pos[0], cy + p.pos[1], bottom + p.pos[2]]
            geom.quat = p.quat()
            geom.density = density  # the mass is left unset (NaN): MuJoCo uses the density
            for key, value in keep.items():
                setattr(geom, key, value)
        return True

    def apply_state_and_record(
        self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene
    ) -> tuple[bool, dict[str, Any]]:
        """Record the installed composition (no state edit; nothing without a body).

        Returns:
            ``(False, applied)``, ``applied = {"primitives": [{"type", "size", "pos"}],
            "extents_m": [x, y, z], "mass_kg": m}``: each geom's type, size [m] and centre in
            the body frame [m], the half-sizes of the composition's bounding box (body axes)
            [m] and the compiled body's mass [kg].
        """
        if not self.body:
            return False, {}
        bid = int(model.body(self.body).id)
        adr, num = int(model.body_geomadr[bid]), int(model.body_geomnum[bid])
        prims = []
        for g in range(adr, adr + num):
            kind = mujoco.mjtGeom(int(model.geom_type[g])).name[len("mjGEOM_"):].lower()
            prims.append({"type": kind, "size": [round(float(x), 6) for x in model.geom_size[g]],
                          "pos": [round(float(x), 6) for x in model.geom_pos[g]]})
        low, high = _body_box(model, bid)
        ext = (high - low) / 2.0
        return False, {"primitives": prims, "extents_m": [round(float(x), 6) for x in ext],
                       "mass_kg": round(float(model.body_mass[bid]), 6)}


@register_axis("object_shape")
class ObjectShapeAxis(Axis):
    """The manipulated object rebuilt from primitives (box, cylinder, sphere, L, capsule,
    ring, T, dumbbell), sized and stretched with severity."""

    kind: ClassVar[str] = "structural"
    description: ClassVar[str] = (
        "manipulated object replaced by a composition of primitives, sized with severity")
    required_roles: ClassVar[Mapping[str, str]] = {"object_bodies": "manipulated object bodies"}

    def missing_roles(self, scene: MujocoScene) -> str | None:
        """The default, and: the env says its objects may be rebuilt (a scene's
        ``capabilities.rebuildable_objects``; robosuite, Meta-World and dm_control refer to
        their objects' geoms), and the object's geoms are all primitives (a mesh object has no
        volume to take a density from)."""
        why = super().missing_roles(scene)
        if why is not None:
            return why
        if not scene.capabilities.rebuildable_objects:
            return ("the env's own code refers to its object's geoms, so they are not rebuilt "
                    "(rebuildable_objects is False)")
        model = scene.model
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, scene.roles.object_bodies[0])
        if bid < 0:
            return f"the scene has no body {scene.roles.object_bodies[0]!r}"
        adr, num = int(model.body_geomadr[bid]), int(model.body_geomnum[bid])
        types = {mujoco.mjtGeom(int(model.geom_type[g])).name[len("mjGEOM_"):].lower()
                 for g in range(adr, adr + num)}
        if not num or not types <= _VOLUME_TYPES:
            return f"the object body's geoms are not all primitives ({sorted(types)})"
        return None

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The shape (held-out shapes)."""
        return frozenset({values["shape"]})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> ObjectShapePerturbation:
        """Draw a shape of the split, its size and its proportions."""
        m_size = u.check_and_magnitude(rng, severity, split)
        m_aspect = u.magnitude(rng, severity)
        signs = rng.choice((-1.0, 1.0), size=2)
        shapes = SHAPE_SETS.get(split) or (*SHAPE_SETS["train"], *SHAPE_SETS["test"])
        shape = shapes[int(rng.integers(len(shapes)))]
        return ObjectShapePerturbation(
            body=scene.roles.object_bodies[0] if self.missing_roles(scene) is None else "",
            shape=shape,
            size_factor=round(u.log_factor(float(signs[0]), m_size, MAX_SIZE_FACTOR), 6),
            aspect=round(u.log_factor(float(signs[1]), m_aspect, MAX_ASPECT_FACTOR), 6))


def _density(model: mujoco.MjModel, body: int) -> float:
    """The nominal object's mass over its geoms' volume [kg/m^3]."""
    adr, num = int(model.body_geomadr[body]), int(model.body_geomnum[body])
    volume = 0.0
    for g in range(adr, adr + num):
        t = mujoco.mjtGeom(int(model.geom_type[g])).name[len("mjGEOM_"):].lower()
        s = [float(x) for x in model.geom_size[g]]
        size = {"box": s[:3], "ellipsoid": s[:3], "cylinder": s[:2], "capsule": s[:2],
                "sphere": s[:1]}[t]
        volume += Primitive(t, tuple(size), (0.0, 0.0, 0.0)).volume()
    return float(model.body_mass[body]) / volume if volume > 0 else 1000.0
