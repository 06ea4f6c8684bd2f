"""The ``embodiment`` axis: link lengths, link masses, joint damping and actuator gains.

Four factors are drawn per episode, each a multiplicative change symmetric in
log space (severity 1: lengths x[0.8, 1.25], masses x[1/2, 2], damping
x[1/3, 3], gains x[1/1.5, 1.5]):

* link lengths (structural, through MjSpec and a recompile): every local
  offset inside ``roles.robot_bodies`` scales by the factor: child body
  positions, geom ``pos``/``fromto``, capsule/cylinder half-lengths given by
  ``size``, site and joint positions and explicit inertial frames. Radii and
  box/sphere sizes keep their nominal size. A floating-base robot (root with a
  free joint or a vertical slide joint) has its height shifted after the env's
  reset so its lowest geom keeps its nominal height above the ground
  (longer legs would otherwise start inside the floor).
* link masses: ``body_mass`` and ``body_inertia`` of the robot bodies scaled
  together (derived constants recomputed with ``mj_setConst``);
* joint damping: ``dof_damping`` of ``roles.robot_joints``;
* actuator gains: ``actuator_gainprm[:, 0]`` of ``roles.robot_actuators`` and,
  for affine-bias actuators (position/velocity servos: ``biasprm[1] = -kp``,
  ``biasprm[2] = -kv``), ``biasprm[0:3]`` by the same factor, so the actuator's
  whole force scales and a servo never turns into positive feedback.

Splits: the four directions (longer/shorter, heavier/lighter, ...) form sign
vectors of even (train) or odd (test) parity: disjoint value sets.

Distinct values (``robogen scale --vary values``): procedural bodies
(:mod:`robogen.perturbations.bodies`), each with a stable id; they also set per-link
lengths, joint armature and actuator gear. Topology (number of links or joints) never
changes: that would change the action space.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import numpy as np

from robogen.errors import SceneError
from robogen.perturbations import helpers as u
from robogen.perturbations.base import Axis, Perturbation, register_axis
from robogen.perturbations.bodies import body_count, body_id, body_values

if TYPE_CHECKING:
    from robogen.envs.base import MujocoScene

MAX_LENGTH_FACTOR = 1.25
MAX_MASS_FACTOR = 2.0
MAX_DAMPING_FACTOR = 3.0
MAX_GAIN_FACTOR = 1.5
_LINE_GEOMS = (int(mujoco.mjtGeom.mjGEOM_CAPSULE), int(mujoco.mjtGeom.mjGEOM_CYLINDER))


def _scale_body(body: mujoco.MjsBody, f: float) -> None:
    """Scale the local offsets inside one body by ``f`` (see the module docstring)."""
    for child in body.bodies:
        child.pos = np.asarray(child.pos) * f
    for geom in body.geoms:
        geom.pos = np.asarray(geom.pos) * f
        fromto = np.asarray(geom.fromto, dtype=float)
        if not np.isnan(fromto[0]):
            geom.fromto = fromto * f
        elif int(geom.type) in _LINE_GEOMS:
            size = np.asarray(geom.size, dtype=float)
            size[1] *= f
            geom.size = size
    for site in body.sites:
        site.pos = np.asarray(site.pos) * f
        fromto = np.asarray(site.fromto, dtype=float)
        if not np.isnan(fromto[0]):
            site.fromto = fromto * f
    for joint in body.joints:
        joint.pos = np.asarray(joint.pos) * f
    if body.explicitinertial:
        body.ipos = np.asarray(body.ipos) * f


def _floating_root_dof(model: mujoco.MjModel, root: int) -> int:
    """qpos address of the root's vertical position, or -1 for a fixed-base robot."""
    first = int(model.body_jntadr[root])
    for j in range(first, first + int(model.body_jntnum[root])):
        jtype = int(model.jnt_type[j])
        if jtype == int(mujoco.mjtJoint.mjJNT_FREE):
            return int(model.jnt_qposadr[j]) + 2
        if jtype == int(mujoco.mjtJoint.mjJNT_SLIDE) and abs(abs(model.jnt_axis[j, 2]) - 1) < 1e-9:
            return int(model.jnt_qposadr[j])
    return -1


@dataclass(frozen=True, slots=True)
class EmbodimentPerturbation(Perturbation):
    """Concrete embodiment change of one episode.

    Attributes:
        length_scale: Factor on link lengths (local offsets of robot bodies) [-].
        mass_scale: Factor on robot link masses and inertias [-].
        damping_scale: Factor on robot joint damping [-].
        gain_scale: Factor on robot actuator gains (and affine bias terms) [-].
        link_scales: Per-body factors on the local offsets of ``roles.robot_bodies`` (in
            that order, on top of ``length_scale``); empty: all 1 [-].
        armature_scale: Factor on robot joint armature (rotor inertia) [-].
        gear_scale: Factor on robot actuator gear; for affine-bias (servo) actuators the
            bias terms are divided by it, so a position servo still holds ``ctrl`` in joint
            coordinates and its stiffness scales by ``gear_scale * gain_scale`` [-].
        body_id: Stable id of a procedural body (:mod:`robogen.perturbations.bodies`), or
            ``""`` for a per-episode draw.
    """

    axis: ClassVar[str] = "embodiment"
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = (
        "body_mass", "body_inertia", "dof_damping", "dof_armature", "actuator_gainprm",
        "actuator_biasprm", "actuator_gear", *u.SET_CONST_FIELDS,
    )
    NEEDS_SET_CONST: ClassVar[bool] = True

    length_scale: float
    mass_scale: float
    damping_scale: float
    gain_scale: float
    link_scales: tuple[float, ...] = ()
    armature_scale: float = 1.0
    gear_scale: float = 1.0
    body_id: str = ""

    @property
    def has_spec_edit(self) -> bool:
        """True when link lengths change."""
        return self.length_scale != 1.0 or any(f != 1.0 for f in self.link_scales)

    def edit_spec(self, spec: mujoco.MjSpec, scene: MujocoScene) -> bool:
        """Scale the link lengths of the robot bodies in the nominal spec."""
        if not self.has_spec_edit:
            return False
        for i, name in enumerate(scene.roles.robot_bodies):
            body = spec.body(name)
            if body is None:
                raise SceneError(f"scene role names robot body {name!r}, which the spec lacks")
            link = self.link_scales[i] if i < len(self.link_scales) else 1.0
            _scale_body(body, self.length_scale * link)
        return bool(scene.roles.robot_bodies)

    def apply_model(self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
                    ) -> bool:
        """Scale link masses/inertias, joint damping and actuator gains from nominal."""
        roles = scene.roles
        bodies = u.ids_of(model, mujoco.mjtObj.mjOBJ_BODY, roles.robot_bodies, "robot body")
        model.body_mass[bodies] = nominal.body_mass[bodies] * self.mass_scale
        model.body_inertia[bodies] = nominal.body_inertia[bodies] * self.mass_scale
        joints = u.ids_of(model, mujoco.mjtObj.mjOBJ_JOINT, roles.robot_joints, "robot joint")
        dofs = u.joint_dofs(model, joints)
        model.dof_damping[dofs] = nominal.dof_damping[dofs] * self.damping_scale
        model.dof_armature[dofs] = nominal.dof_armature[dofs] * self.armature_scale
        acts = u.ids_of(model, mujoco.mjtObj.mjOBJ_ACTUATOR, roles.robot_actuators,
                        "robot actuator")
        affine = int(mujoco.mjtBias.mjBIAS_AFFINE)
        for a in acts:
            model.actuator_gainprm[a, 0] = nominal.actuator_gainprm[a, 0] * self.gain_scale
            model.actuator_gear[a, 0] = nominal.actuator_gear[a, 0] * self.gear_scale
            if int(model.actuator_biastype[a]) == affine:
                model.actuator_biasprm[a, :3] = nominal.actuator_biasprm[a, :3] * self.gain_scale
                model.actuator_biasprm[a, 1:3] /= self.gear_scale
        return bool(
            (bodies and self.mass_scale != 1.0 and np.any(nominal.body_mass[bodies] > 0))
            or (dofs and self.damping_scale != 1.0 and np.any(nominal.dof_damping[dofs] != 0))
            or (dofs and self.armature_scale != 1.0 and np.any(nominal.dof_armature[dofs] != 0))
            or (acts and (self.gain_scale != 1.0 or self.gear_scale != 1.0))
        )

    def apply_state_and_record(self, model: Any, data: Any, scene: MujocoScene
                               ) -> tuple[bool, dict[str, Any]]:
        """:meth:`apply_state` (``model``: ``mujoco.MjModel``, ``data``: ``mujoco.MjData``);
        a procedural body records ``{"body_id": ...}`` as applied."""
        changed = self.apply_state(model, data, scene)
        return changed, ({"body_id": self.body_id} if self.body_id else {})

    def apply_state(self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene) -> bool:
        """Floating base: shift the root height so the lowest geom keeps its nominal height."""
        roles = scene.roles
        if self.length_scale == 1.0 or not roles.robot_bodies:  # link_scales: fixed-base arms
            return False
        (root,) = u.ids_of(model, mujoco.mjtObj.mjOBJ_BODY, roles.robot_bodies[:1], "robot body")
        adr = _floating_root_dof(model, root)
        if adr < 0:
            return False
        mujoco.mj_kinematics(model, data)
        bodies = u.subtree_bodies(model, [root])
        geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in bodies]
        if not geoms:
            return False
        span = float(data.xpos[root, 2] - np.min(data.geom_xpos[geoms, 2]))
        # the scaled span is f times the nominal one: restore the nominal span's lowest height
        dz = span * (self.length_scale - 1.0) / self.length_scale
        data.qpos[adr] += dz
        return dz != 0.0


@register_axis("embodiment")
class EmbodimentAxis(Axis):
    """Robot link lengths, link masses, joint damping and actuator gains."""

    kind: ClassVar[str] = "structural"
    description: ClassVar[str] = (
        "robot link lengths (recompiled), link masses, joint damping and actuator gains/biases"
    )

    required_roles: ClassVar[Mapping[str, str]] = {"robot_bodies": "robot bodies",
                                                   "robot_actuators": "actuators"}

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The parity of the scales shrunk (below 1)."""
        return frozenset({u.sign_parity(math.log(values[k]) for k in (
            "length_scale", "mass_scale", "damping_scale", "gain_scale"))})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> EmbodimentPerturbation:
        """Draw the four factors; see the module docstring for ranges and splits."""
        size = u.check_and_magnitude(rng, severity, split)
        signs = u.split_signs(rng, 4, split)
        sizes = [size] + [u.magnitude(rng, severity) for _ in range(3)]
        maxes = (MAX_LENGTH_FACTOR, MAX_MASS_FACTOR, MAX_DAMPING_FACTOR, MAX_GAIN_FACTOR)
        f = [round(u.log_factor(float(s), m, x), 6) for s, m, x in zip(signs, sizes, maxes,
                                                                        strict=True)]
        return EmbodimentPerturbation(length_scale=f[0], mass_scale=f[1], damping_scale=f[2],
                                      gain_scale=f[3])

    distinct_values: ClassVar[str] = (
        "a procedural body (per-link lengths, masses, damping, armature, gear, gains) with a "
        "stable id, robogen.perturbations.bodies")

    def value_count(self, split: str) -> int | None:
        """Procedural bodies in ``split`` (:data:`~robogen.perturbations.bodies.BODY_COUNTS`)."""
        return body_count(split)

    def value_id(self, index: int, split: str) -> str:
        """``body-<split>-<index>`` (:func:`~robogen.perturbations.bodies.body_id`)."""
        return body_id(index, split)

    def sample_value(self, index: int, severity: float, split: str, scene: MujocoScene
                     ) -> EmbodimentPerturbation:
        """Procedural body ``index`` of ``split`` (:func:`procedural_body`)."""
        self.check_value(index, split)
        return procedural_body(index, split, severity, len(scene.roles.robot_bodies))


def procedural_body(index: int, split: str, severity: float = 1.0, n_links: int = 0
                    ) -> EmbodimentPerturbation:
    """Procedural body ``index`` of ``split`` (:mod:`robogen.perturbations.bodies`).

    Args:
        index: Body index in ``[0, body_count(split))``.
        split: ``train``, ``test`` or ``all``.
        severity: Shift size in (0, 1].
        n_links: One per-body length factor for each of this many robot bodies.

    Raises:
        InvalidPerturbationError: On an index outside the split or a bad severity.
    """
    return EmbodimentPerturbation(**body_values(index, split, severity, n_links))
