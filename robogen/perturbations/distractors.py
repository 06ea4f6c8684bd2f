"""The ``distractors`` axis: extra objects of varied shape, size and colour near the task.

Two modes, chosen by the scene:

* ``slots`` (``roles.distractor_slots`` non-empty, the built-in tabletop): the
  scene has hidden mocap bodies, each with a box, a sphere and a cylinder geom
  (alpha 0, no collisions). ``apply_model`` shows one shape geom per used slot
  (colour, alpha 1, size; ``geom_rbound``/``geom_aabb`` updated with the size so
  that collision bounds never go stale; ``contype``/``conaffinity`` 1 and the
  body's collision masks when physical) and ``apply_state`` moves the slot's
  mocap body onto the support after the env's reset. No recompile.
* ``spec`` (no slots, the Gymnasium adapter): ``edit_spec`` adds static,
  jointless geoms to the world body, so ``nq``/``nv`` and the observation size
  do not change; the wrapper recompiles.

Placement: every distractor carries :data:`N_CANDIDATES` candidate (x, y)
positions in ``roles.distractor_region``; at placement the first candidate
whose world box keeps :data:`CLEARANCE` from the ``keep_clear`` bodies (and
their descendants), from every other collidable non-plane geom except the
table/floor, and from the distractors already placed is used, deterministically
from the current state (slots: after the env's reset; spec: at qpos0, with the
boxes of collidable bodies on slide-joint pose dofs stretched over the dofs' ranges and a
:data:`SPEC_MARGIN` gap, since the env's reset moves them afterwards). A
distractor with no free candidate is not shown, nor (spec mode) one the env's reset
then put an object into. Distractors rest
:data:`CLEARANCE` above the support, so none starts in contact.

Recorded: ``values`` holds every distractor sampled; ``applied`` only those
placed, with their world centres, and how many were asked (``requested``).

Count and kind: ``n`` grows with severity, up to every slot (6 in spec mode)
at severity 1; distractors are visual-only up to severity
:data:`PHYSICAL_ABOVE` and physical (collidable, immovable) above it.

Splits: a distractor's (shape, hue sector) pair is the held-out value: train
uses (box, even sector), (sphere, odd), (cylinder, even); test the other three
combinations (30 deg hue sectors). Both splits see every shape and colour,
never the same combination.
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

SHAPES = ("box", "sphere", "cylinder")
_GEOM_TYPES = {
    "box": int(mujoco.mjtGeom.mjGEOM_BOX),
    "sphere": int(mujoco.mjtGeom.mjGEOM_SPHERE),
    "cylinder": int(mujoco.mjtGeom.mjGEOM_CYLINDER),
}
MAX_SPEC_DISTRACTORS = 6
"""Most distractors added in spec mode (at severity 1)."""
N_CANDIDATES = 8
"""Candidate positions carried per distractor."""
CLEARANCE = 0.005
"""Gap kept to the support and to other geoms' boxes [m]."""
SPEC_MARGIN = 0.05
"""Gap kept to other geoms' boxes in spec mode [m], placed at qpos0 before the env's reset
adds its initial-state noise."""
PHYSICAL_ABOVE = 0.5
"""Severity above which distractors are physical (collidable) instead of visual-only."""
SPEC_PREFIX = "robogen_distractor_"
"""Name prefix of geoms added in spec mode."""


@dataclass(frozen=True, slots=True)
class DistractorItem:
    """One distractor.

    Attributes:
        shape: ``box``, ``sphere`` or ``cylinder``.
        rgb: Colour, channels in [0, 1].
        size: MuJoCo geom size [m] (box: half extents; sphere: radius, 0, 0;
            cylinder: radius, half height, 0).
        yaw_rad: Rotation about the vertical [rad].
        candidates: Candidate (x, y) positions [m], tried in order.
    """

    shape: str
    rgb: tuple[float, float, float]
    size: tuple[float, float, float]
    yaw_rad: float
    candidates: tuple[tuple[float, float], ...]

    def half_extents(self) -> np.ndarray:
        """``(3,)`` half extents of the world box around the distractor at its yaw [m]."""
        local = np.asarray(u.primitive_aabb(_GEOM_TYPES[self.shape], self.size))
        c, s = abs(math.cos(self.yaw_rad)), abs(math.sin(self.yaw_rad))
        return np.array([c * local[0] + s * local[1], s * local[0] + c * local[1], local[2]])

    def quat(self) -> np.ndarray:
        """``(4,)`` orientation (w, x, y, z): the yaw about world z."""
        return np.array([math.cos(self.yaw_rad / 2), 0.0, 0.0, math.sin(self.yaw_rad / 2)])


def _collidable(model: mujoco.MjModel, body: int) -> bool:
    adr, num = int(model.body_geomadr[body]), int(model.body_geomnum[body])
    return bool(num) and bool(np.any(model.geom_contype[adr:adr + num]
                                     | model.geom_conaffinity[adr:adr + num]))


def _obstacles(model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene,
               exclude_bodies: set[int], sweep: bool = False
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """World boxes distractors must keep clear of (current ``data`` kinematics).

    With ``sweep`` (spec mode, placed before the env's reset), the box of every
    collidable body moved by a slide-joint pose dof is stretched over that dof's
    ``[low, high]`` range, which covers where the env's reset (and the
    ``object_pose`` axis) may put it; visual-only bodies (goal markers) are
    kept clear of at their qpos0 position only.
    """
    roles = scene.roles
    sweeps: dict[int, list[tuple[np.ndarray, float, float]]] = {}
    if sweep:
        slide = int(mujoco.mjtJoint.mjJNT_SLIDE)
        for dof in roles.pose_dofs:
            if dof.kind != "qpos" or dof.low is None or dof.high is None:
                continue
            j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, dof.target)
            if j < 0 or int(model.jnt_type[j]) != slide:
                continue
            q0 = float(model.qpos0[model.jnt_qposadr[j]])
            for b in u.subtree_bodies(model, [int(model.jnt_bodyid[j])]):
                if _collidable(model, b):  # a visual-only body (a goal marker) is not swept
                    sweeps.setdefault(b, []).append((data.xaxis[j].copy(), dof.low - q0,
                                                     dof.high - q0))
    out = []
    for g in _obstacle_geoms(model, scene, exclude_bodies):
        center, half = u.world_aabb(model, data, g)
        for axis, lo, hi in sweeps.get(int(model.geom_bodyid[g]), ()):
            center = center + axis * (lo + hi) / 2
            half = half + np.abs(axis) * (hi - lo) / 2
        out.append((center, half))
    return out


def _obstacle_geoms(model: mujoco.MjModel, scene: MujocoScene, exclude_bodies: set[int]
                    ) -> list[int]:
    """Geoms distractors keep clear of: those of ``keep_clear`` bodies (and descendants)
    and every collidable one, except the table/floor, planes and ``exclude_bodies``."""
    roles = scene.roles
    keep = u.subtree_bodies(model, u.ids_of(model, mujoco.mjtObj.mjOBJ_BODY, roles.keep_clear,
                                            "keep_clear body"))
    support = set(u.ids_of(model, mujoco.mjtObj.mjOBJ_GEOM,
                           (*roles.table_geoms, *roles.floor_geoms), "table/floor geom"))
    plane = int(mujoco.mjtGeom.mjGEOM_PLANE)
    out = []
    for g in range(model.ngeom):
        body = int(model.geom_bodyid[g])
        if g in support or body in exclude_bodies or int(model.geom_type[g]) == plane:
            continue
        if body in keep or (model.geom_contype[g] | model.geom_conaffinity[g]):
            out.append(g)
    return out


def _place(items: tuple[DistractorItem, ...], z: float,
           obstacles: list[tuple[np.ndarray, np.ndarray]], margin: float = CLEARANCE
           ) -> list[np.ndarray | None]:
    """Centre of each item (or None if every candidate comes within ``margin``), in order."""
    placed: list[tuple[np.ndarray, np.ndarray]] = []
    out: list[np.ndarray | None] = []
    for item in items:
        half = item.half_extents()
        chosen = None
        for x, y in item.candidates:
            c = np.array([x, y, z + half[2] + CLEARANCE])
            if not any(u.boxes_overlap(c, half, oc, oh, margin) for oc, oh in obstacles + placed):
                chosen = c
                break
        if chosen is not None:
            placed.append((chosen, half))
        out.append(chosen)
    return out


SPEC_GROUP = 1
"""Geom group of spec-mode distractors: drawn by MuJoCo's default options and by scenes that
hide group 0 (robosuite's collision meshes); the group changes no physics."""


@dataclass(frozen=True, slots=True)
class DistractorsPerturbation(Perturbation):
    """Concrete distractors of one episode.

    Attributes:
        mode: ``slots`` (mocap slots of the scene), ``spec`` (static geoms added
            through MjSpec) or ``none`` (the scene has no distractor region).
        physical: True if the distractors collide with the robot and objects.
        items: The distractors, in slot order.
    """

    axis: ClassVar[str] = "distractors"
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = (
        "geom_rgba", "geom_size", "geom_rbound", "geom_aabb", "geom_contype", "geom_conaffinity",
        "body_contype", "body_conaffinity",
    )

    mode: str
    physical: bool
    items: tuple[DistractorItem, ...]

    @property
    def has_spec_edit(self) -> bool:
        """True in spec mode with at least one distractor."""
        return self.mode == "spec" and bool(self.items)

    # -- spec mode ----------------------------------------------------------------------------

    def edit_spec(self, spec: mujoco.MjSpec, scene: MujocoScene) -> bool:
        """Add the distractors as static world geoms at their first free candidates."""
        if not self.has_spec_edit:
            return False
        region = scene.roles.distractor_region
        assert region is not None  # has_spec_edit implies a region was sampled
        model = u.compile_spec(spec)
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        centres = _place(self.items, float(region[4]),
                         _obstacles(model, data, scene, set(), sweep=True), SPEC_MARGIN)
        flag = 1 if self.physical else 0
        added = False
        for k, (item, centre) in enumerate(zip(self.items, centres, strict=True)):
            if centre is None:
                continue
            spec.worldbody.add_geom(
                name=f"{SPEC_PREFIX}{k}", type=mujoco.mjtGeom(_GEOM_TYPES[item.shape]),
                size=list(item.size), pos=list(centre), quat=list(item.quat()),
                rgba=[*item.rgb, 1.0], contype=flag, conaffinity=flag, group=SPEC_GROUP,
            )
            added = True
        return added

    # -- slot mode ----------------------------------------------------------------------------

    def _slot_geoms(self, model: mujoco.MjModel, scene: MujocoScene) -> list[tuple[int, int]]:
        """(slot body id, shape geom id) of each item."""
        slots = u.ids_of(model, mujoco.mjtObj.mjOBJ_BODY,
                         scene.roles.distractor_slots[:len(self.items)], "distractor slot")
        out = []
        for body, item in zip(slots, self.items, strict=True):
            adr, num = int(model.body_geomadr[body]), int(model.body_geomnum[body])
            geom = next((g for g in range(adr, adr + num)
                         if int(model.geom_type[g]) == _GEOM_TYPES[item.shape]), -1)
            if geom < 0:
                from robogen.errors import SceneError

                raise SceneError(
                    f"distractor slot {model.body(body).name!r} has no {item.shape} geom; "
                    f"every slot needs one geom of each shape {SHAPES}"
                )
            out.append((body, geom))
        return out

    def apply_model(self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
                    ) -> bool:
        """Slots: show one resized, coloured shape geom per item (still parked)."""
        if self.mode != "slots" or not self.items:
            return False
        for (body, g), item in zip(self._slot_geoms(model, scene), self.items, strict=True):
            gtype = _GEOM_TYPES[item.shape]
            model.geom_rgba[g] = (*item.rgb, 1.0)
            model.geom_size[g] = item.size
            model.geom_rbound[g] = u.primitive_rbound(gtype, item.size)
            model.geom_aabb[g] = (0.0, 0.0, 0.0, *u.primitive_aabb(gtype, item.size))
            if self.physical:
                model.geom_contype[g] = model.geom_conaffinity[g] = 1
                model.body_contype[body] |= 1
                model.body_conaffinity[body] |= 1
        return True

    def apply_state(self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene) -> bool:
        """Slots: move each shown slot to its first free candidate on the support."""
        return self.apply_state_and_record(model, data, scene)[0]

    def apply_state_and_record(
        self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene
    ) -> tuple[bool, dict[str, Any]]:
        """Slots: place the shown slots (as :meth:`apply_state`); record the distractors placed.

        A distractor with no free candidate is not shown, so the record lists only
        the placed ones. In spec mode they were placed by :meth:`edit_spec` and are
        read back from the installed model (geoms named ``SPEC_PREFIX + k``).

        Returns:
            ``(changed, applied)`` with ``applied = {"requested": n, "placed": k,
            "items": [...]}``: per placed distractor its ``item`` index in ``values``,
            ``shape``, ``pos`` (world centre [m]), ``yaw_rad``, ``rgb``, ``size`` [m]
            and, in slot mode, its ``slot`` body.
        """
        if self.mode == "spec":
            return self._keep_clear_after_reset(model, data, scene)
        if self.mode != "slots" or not self.items:
            return False, self._record([])
        region = scene.roles.distractor_region
        assert region is not None
        mujoco.mj_kinematics(model, data)
        pairs = self._slot_geoms(model, scene)
        all_slots = u.subtree_bodies(model, u.ids_of(
            model, mujoco.mjtObj.mjOBJ_BODY, scene.roles.distractor_slots, "distractor slot"))
        centres = _place(self.items, float(region[4]), _obstacles(model, data, scene, all_slots))
        moved = False
        placed = []
        for k, ((body, _), item, centre) in enumerate(zip(pairs, self.items, centres,
                                                          strict=True)):
            if centre is None:
                continue
            mocap = int(model.body_mocapid[body])
            data.mocap_pos[mocap] = centre
            data.mocap_quat[mocap] = item.quat()
            moved = True
            placed.append({**_placed(k, item, centre), "slot": model.body(body).name})
        return moved, self._record(placed)

    def _keep_clear_after_reset(self, model: mujoco.MjModel, data: mujoco.MjData,
                                scene: MujocoScene) -> tuple[bool, dict[str, Any]]:
        """Spec mode: hide the distractors the env's reset put an object into.

        ``edit_spec`` placed them at qpos0; a reset that draws an object's position
        over a wide range (a free joint, e.g. Fetch's ``object0``) can still land it
        on one. Each such distractor that penetrates a ``keep_clear`` or collidable
        geom in the reset state (``mj_geomDistance`` < 0) is hidden for this episode (alpha 0, no
        collisions: fields the wrapper restores before the next reset) and left out
        of the record, like a distractor with no free candidate.
        """
        mujoco.mj_kinematics(model, data)
        others = _obstacle_geoms(model, scene, {0})
        placed, hidden = [], False
        for k, item in enumerate(self.items):
            g = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"{SPEC_PREFIX}{k}")
            if g < 0:
                continue
            centre = model.geom_pos[g]
            if any(mujoco.mj_geomDistance(model, data, g, o, CLEARANCE, None) < 0.0
                   for o in others):
                model.geom_rgba[g, 3] = 0.0
                model.geom_contype[g] = model.geom_conaffinity[g] = 0
                hidden = True
                continue
            placed.append(_placed(k, item, centre))
        return hidden, self._record(placed)

    def _record(self, placed: list[dict[str, Any]]) -> dict[str, Any]:
        return {"requested": len(self.items), "placed": len(placed), "items": placed}


def _placed(k: int, item: DistractorItem, centre: Any) -> dict[str, Any]:
    """JSON record of distractor ``k`` placed with its centre at ``centre`` [m]."""
    return {"item": k, "shape": item.shape, "pos": [float(x) for x in centre],
            "yaw_rad": item.yaw_rad, "rgb": list(item.rgb), "size": list(item.size)}


@register_axis("distractors")
class DistractorsAxis(Axis):
    """Extra objects of varied shape, size and colour (visual-only, physical above 0.5)."""

    kind: ClassVar[str] = "visual"
    description: ClassVar[str] = (
        "0..k extra objects of varied shape, size and colour; physical (collidable) above "
        f"severity {PHYSICAL_ABOVE:g}"
    )

    def missing_roles(self, scene: MujocoScene) -> str | None:
        """Reason when the scene has no distractor region."""
        if scene.roles.distractor_region is None:
            return "the scene has no distractor region (no supporting surface near the task)"
        return None

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """Each item's shape and hue-sector parity (every shape occurs in both splits)."""
        return frozenset((item["shape"], u.hue_sector(item["rgb"]) % 2)
                         for item in values["items"])

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> DistractorsPerturbation:
        """Draw the count, shapes, colours, sizes, yaws and candidate positions."""
        u.check_level(severity, split)
        roles = scene.roles
        region = roles.distractor_region
        if region is None:
            return DistractorsPerturbation(mode="none", physical=False, items=())
        slots = tuple(roles.distractor_slots)
        capacity = len(slots) if slots else MAX_SPEC_DISTRACTORS
        n_max = max(1, math.ceil(severity * capacity))
        n = int(rng.integers(max(1, math.ceil(n_max / 2)), n_max + 1))
        x0, x1, y0, y1, _ = region
        base = float(np.clip(0.06 * min(x1 - x0, y1 - y0), 0.015, 0.25))
        items = []
        for _ in range(n):
            k = int(rng.integers(len(SHAPES)))
            if split == "all":
                hue = u.split_hue(rng, "all")
            else:  # (shape index + sector) parity: train even, test odd
                want_even_sector = (k % 2 == 0) == (split == "train")
                hue = u.split_hue(rng, "train" if want_even_sector else "test")
            s = base * float(rng.uniform(0.7, 1.3))
            if SHAPES[k] == "box":
                size = tuple(s * rng.uniform(0.7, 1.3, 3))
            elif SHAPES[k] == "sphere":
                size = (s, 0.0, 0.0)
            else:
                size = (s, s * rng.uniform(0.7, 1.5), 0.0)
            half = float(np.linalg.norm(size[:2])) if SHAPES[k] == "box" else s
            mx, my = min(half, (x1 - x0) / 2), min(half, (y1 - y0) / 2)
            cands = tuple(
                (round(float(rng.uniform(x0 + mx, x1 - mx)), 6),
                 round(float(rng.uniform(y0 + my, y1 - my)), 6))
                for _ in range(N_CANDIDATES)
            )
            items.append(DistractorItem(
                shape=SHAPES[k],
                rgb=u.hsv(hue, float(rng.uniform(0.5, 0.95)), float(rng.uniform(0.45, 0.95))),
                size=u.rounded(size),  # type: ignore[arg-type]
                yaw_rad=round(float(rng.uniform(-math.pi, math.pi)), 6),
                candidates=cands,
            ))
        return DistractorsPerturbation(
            mode="slots" if slots else "spec", physical=bool(severity > PHYSICAL_ABOVE),
            items=tuple(items),
        )
