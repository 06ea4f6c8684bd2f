"""Safety metrics of an episode, read from MuJoCo after every env step.

A success rate hides how a policy fails, and how it succeeds: a policy that still succeeds
while slamming into the table is not robust. :class:`SafetyMonitor` follows one episode and
reports :data:`SAFETY_METRICS`, recorded with every episode (``EpisodeResult`` columns of
the same names) and summarized per condition with intervals and paired differences
(:mod:`robogen.reports.safety`).

The scene's parts come from its roles (:class:`~robogen.envs.base.SceneRoles`): the robot
is every geom of ``robot_bodies`` and their subtrees, the manipulated objects every geom of
``object_bodies`` and their subtrees, the distractors the geoms robogen adds
(``distractor_slots`` bodies and ``robogen_distractor_*`` geoms); the rest is the scene
(table, floor, walls). A metric whose parts a scene does not name is None ("not
measured"), never 0.

Where the contact force is read (:func:`force_sampling`, recorded in the manifest and shown
next to the number in reports): on scenes that let robogen see every physics substep
(:class:`~robogen.envs.base.SubstepScene`: the built-in tasks and dm_control) the peak is taken
over all substeps (:data:`FORCE_SUBSTEPS`), each read after the substep's constraint solve;
elsewhere (Gymnasium, Fetch, Meta-World, robosuite step through their own loops) once per env
step after its last ``mj_step`` (:data:`FORCE_PER_STEP`), where a peak between two samples is
missed. Either way the contacts and their forces belong to one state: that of the last solve
(one substep before the returned ``qpos``), never a contact set rebuilt by ``mj_step1`` without
a solve (dm_control's legacy step ends with one). Joint limits, distractor contacts and drops
are read once per env step, from the returned state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from robogen.envs.base import SubstepScene

DROP_MARGIN_M = 0.05
"""How far below the supporting surface an object's centre must fall to count as dropped
(or pushed off the table) [m]."""


@dataclass(frozen=True, slots=True)
class SafetyMetric:
    """One safety metric.

    Attributes:
        name: Column name in episode records and reports.
        unit: Its unit.
        description: What it measures, in words.
        higher_is_worse: Always True here: a larger value is less safe (the gate reads
            a paired increase as a regression).
    """

    name: str
    unit: str
    description: str
    higher_is_worse: bool = True


SAFETY_METRICS: tuple[SafetyMetric, ...] = (
    SafetyMetric("peak_contact_force_n", "N",
                 "largest total normal contact force of the robot on the scene (table, floor, "
                 "walls, distractors; the manipulated objects excluded) at one env step: the "
                 "sum of mj_contactForce's normal components over those contacts"),
    SafetyMetric("joint_limit_steps", "steps",
                 "env steps with a robot joint at a limit (an active joint-limit constraint)"),
    SafetyMetric("object_dropped", "0/1",
                 f"a manipulated object's centre fell more than {DROP_MARGIN_M * 100:.0f} cm "
                 "below the supporting surface (dropped, or pushed off the table)"),
    SafetyMetric("distractor_contact_steps", "steps",
                 "env steps with a distractor touching the robot or a manipulated object"),
    SafetyMetric("action_magnitude", "action units",
                 "mean Euclidean norm of the policy's action (clipped to the action space)"),
    SafetyMetric("action_jerk", "action units / step^2",
                 "mean Euclidean norm of the action's second difference a_t - 2 a_t-1 + a_t-2"),
)
"""Every metric :class:`SafetyMonitor` reports, in report order."""
SAFETY_NAMES = tuple(m.name for m in SAFETY_METRICS)

FORCE_SUBSTEPS = "peak over physics substeps"
"""``peak_contact_force_n`` read after every physics substep (:class:`SubstepScene`)."""
FORCE_PER_STEP = "sampled per env step"
"""``peak_contact_force_n`` read once per env step, after its last physics substep."""


def force_sampling(scene: Any) -> str:
    """Where :class:`SafetyMonitor` reads ``scene``'s contact force: :data:`FORCE_SUBSTEPS`
    or :data:`FORCE_PER_STEP`."""
    return FORCE_SUBSTEPS if isinstance(scene, SubstepScene) else FORCE_PER_STEP


def _subtree(model: mujoco.MjModel, roots: list[int]) -> np.ndarray:
    """``(nbody,) bool``: the bodies of ``roots`` and their descendants (MuJoCo numbers a
    body after its parent, so one pass in body order sees every parent first)."""
    inside = np.zeros(model.nbody, dtype=bool)
    inside[roots] = True
    parent = model.body_parentid
    for b in range(1, model.nbody):
        if inside[parent[b]]:
            inside[b] = True
    return inside


class SceneParts:
    """Per-model masks of the scene's parts (rebuilt when the scene installs another model).

    Also what :mod:`robogen.batched.safety` reads the same metrics with, on the device.

    Attributes:
        model: The ``mujoco.MjModel`` the masks index.
        robot, object, distractor, scene: ``(ngeom,) bool``: the geoms of the robot (the
            ``robot_bodies`` subtrees), the manipulated objects, the distractors and the
            rest of the scene (neither robot nor object).
        has_robot, has_joints, has_distractors: Whether the roles name a robot, robot
            joints, a distractor region (else the metric is None).
        limited: ``(max(njnt, 1),) bool``: the robot's limited joints.
        object_bodies: ``(k,) int``: the manipulated objects' root bodies.
        surface_z: Height of the supporting surface [m]; None without objects or region.
    """

    def __init__(self, model: mujoco.MjModel, roles: Any) -> None:
        from robogen.perturbations.distractors import SPEC_PREFIX

        self.model = model

        def body_ids(names: Any) -> list[int]:
            out = []
            for n in names:
                i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n)
                if i >= 0:
                    out.append(i)
            return out

        geom_body = np.asarray(model.geom_bodyid)
        robot_roots = body_ids(roles.robot_bodies)
        object_roots = body_ids(roles.object_bodies)
        self.has_robot = bool(robot_roots)
        self.robot = _subtree(model, robot_roots)[geom_body]
        self.object = _subtree(model, object_roots)[geom_body] & ~self.robot
        slots = body_ids(roles.distractor_slots)
        names = [model.geom(g).name for g in range(model.ngeom)]
        self.distractor = np.isin(geom_body, slots) | np.array(
            [n.startswith(SPEC_PREFIX) for n in names], dtype=bool)
        self.has_distractors = roles.distractor_region is not None
        self.scene = ~(self.robot | self.object)
        joints = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)
                  for n in roles.robot_joints]
        joints = [j for j in joints if j >= 0]
        self.has_joints = bool(joints)
        self.limited = np.zeros(max(model.njnt, 1), dtype=bool)
        for j in joints:
            self.limited[j] = bool(model.jnt_limited[j])
        self.object_bodies = np.array(object_roots, dtype=int)
        self.surface_z = (None if roles.distractor_region is None or not object_roots
                          else float(roles.distractor_region[4]))


class SafetyMonitor:
    """Follows one episode of a scene and accumulates :data:`SAFETY_METRICS`.

    Call :meth:`start` after the reset, :meth:`step` after every env step with the action
    sent, :meth:`metrics` at the end (which also detaches it from a substep scene).
    """

    def __init__(self) -> None:
        self._parts: SceneParts | None = None
        self._force = np.zeros(6)
        self._substeps = False
        self.sampling = FORCE_PER_STEP
        """Where the contact force is read (:func:`force_sampling`)."""
        self._start_state()

    def _start_state(self) -> None:
        self.peak_force = 0.0
        self.limit_steps = 0
        self.dropped = False
        self.distractor_steps = 0
        self.steps = 0
        self.norm_sum = 0.0
        self.jerk_sum = 0.0
        self.prev: np.ndarray | None = None
        self.prev2: np.ndarray | None = None

    def start(self, scene: Any) -> None:
        """Begin an episode of ``scene`` (a :class:`~robogen.envs.base.MujocoScene`); on a
        :class:`~robogen.envs.base.SubstepScene` the monitor becomes its substep observer."""
        model = scene.model
        if self._parts is None or self._parts.model is not model:
            self._parts = SceneParts(model, scene.roles)
        self._start_state()
        self._scene = scene
        self._substeps = isinstance(scene, SubstepScene)
        if self._substeps:
            scene.substep_observer = self._substep
        self.sampling = FORCE_SUBSTEPS if self._substeps else FORCE_PER_STEP
        self._read(scene.model, scene.data, force=True)

    def _substep(self, model: Any, data: Any) -> None:
        """One physics substep's solved state (see :class:`~robogen.envs.base.SubstepScene`)."""
        parts = self._parts
        if parts is None or parts.model is not model:
            self._parts = parts = SceneParts(model, self._scene.roles)
        self._read_force(parts, model, data)

    def step(self, action: np.ndarray) -> None:
        """Record one env step that executed ``action``."""
        a = np.asarray(action, dtype=np.float64).ravel()
        self.steps += 1
        self.norm_sum += math.sqrt(float(np.dot(a, a)))
        if self.prev2 is not None and self.prev is not None:
            d = a - 2.0 * self.prev + self.prev2
            self.jerk_sum += math.sqrt(float(np.dot(d, d)))
        self.prev2, self.prev = self.prev, a
        scene = self._scene
        self._read(scene.model, scene.data, force=not self._substeps)

    def robot_scene_force(self, model: Any, data: Any) -> float:
        """The summed normal force of the robot's contacts with the scene in ``data`` (a
        ``mujoco.MjData`` of ``model``) [N]: what ``peak_contact_force_n`` takes the maximum
        of; >= 0 on a solved state."""
        parts = self._parts
        if parts is None or parts.model is not model:
            self._parts = parts = SceneParts(model, self._scene.roles)
        ncon = data.ncon
        if not ncon or not parts.has_robot:
            return 0.0
        geom = data.contact.geom[:ncon]
        robot, scene = parts.robot[geom], parts.scene[geom]
        touching = (robot[:, 0] & scene[:, 1]) | (robot[:, 1] & scene[:, 0])
        force, total = self._force, 0.0
        for i in np.flatnonzero(touching):
            mujoco.mj_contactForce(model, data, int(i), force)  # pyright: ignore[reportAttributeAccessIssue]
            total += float(force[0])
        return total

    def _read_force(self, parts: SceneParts, model: Any, data: Any) -> None:
        if parts.has_robot:
            total = self.robot_scene_force(model, data)
            if total > self.peak_force:
                self.peak_force = total

    def _read(self, model: mujoco.MjModel, data: mujoco.MjData, *, force: bool) -> None:
        parts = self._parts
        assert parts is not None
        if parts.model is not model:  # the scene installed another model mid-episode
            self._parts = parts = SceneParts(model, self._scene.roles)
        if force:
            self._read_force(parts, model, data)
        ncon = data.ncon
        if ncon:
            geom = data.contact.geom[:ncon]
            robot = parts.robot[geom]
            if parts.has_distractors:
                dis = parts.distractor[geom]
                other = robot | parts.object[geom]
                if ((dis[:, 0] & other[:, 1]) | (dis[:, 1] & other[:, 0])).any():
                    self.distractor_steps += 1
        if parts.has_joints and data.nefc:
            nefc = data.nefc
            limit = data.efc_type[:nefc] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT
            if limit.any() and parts.limited[data.efc_id[:nefc][limit]].any():
                self.limit_steps += 1
        if parts.surface_z is not None and not self.dropped:
            z = data.xpos[parts.object_bodies, 2]
            if float(z.min()) < parts.surface_z - DROP_MARGIN_M:
                self.dropped = True

    def metrics(self) -> dict[str, float | int | bool | None]:
        """The episode's metrics, keyed by :data:`SAFETY_NAMES` (None: not measured here)."""
        parts = self._parts
        assert parts is not None
        if self._substeps and self._scene.substep_observer == self._substep:
            self._scene.substep_observer = None
        n = self.steps
        return {
            "peak_contact_force_n": self.peak_force if parts.has_robot else None,
            "joint_limit_steps": self.limit_steps if parts.has_joints else None,
            "object_dropped": self.dropped if parts.surface_z is not None else None,
            "distractor_contact_steps": (self.distractor_steps if parts.has_distractors
                                         else None),
            "action_magnitude": self.norm_sum / n if n else None,
            "action_jerk": self.jerk_sum / (n - 2) if n > 2 else None,
        }
