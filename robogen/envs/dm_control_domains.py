"""The ``dm_control`` family's table of domains: what robogen knows about each suite domain
(its robot, floor, objects, distractor area and pose dofs), the family's task names, and the
helpers that read a domain's MJCF and a suite observation.

:mod:`robogen.envs.dm_control_env` (the env itself) re-exports every public name here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import mujoco
import numpy as np

from robogen.envs.base import PoseDof
from robogen.errors import InvalidSpecError, SceneError, UnknownNameError

SUITE_STEPS = 1000
"""Control steps of every listed suite task's episode (its time limit / control step)."""
DEFAULT_THRESHOLD = 500.0
"""Default success threshold on the episode return at the suite's horizon [-]."""
BAD_ACTION_REPEAT = "action_repeat must be an integer >= 1, got {value!r}"
"""Message of the InvalidSpecError for a bad ``action_repeat`` (tests reuse it)."""
OBS_SIZE_CHANGED = (
    "the installed model changes dm_control/{env}'s (nq, nv, nu) from {expected} to {got}; "
    "add distractors as static (jointless) world geoms, not bodies with joints"
)

Vec4 = tuple[float, float, float, float]


@dataclasses.dataclass(frozen=True, slots=True)
class DMControlDomain:
    """What robogen knows about one dm_control domain.

    Attributes:
        domain: The suite's domain name (``cheetah``).
        tasks: Its task names robogen lists (``dm_control/<domain>-<task>``).
        robot_roots: Root bodies of the robot; their subtrees are ``roles.robot_bodies``.
        floor_geoms: The floor plane (texture axis; distractors rest on it).
        object_geoms: Task objects and targets (texture axis).
        object_bodies: Task object bodies (physics axis: mass).
        distractor_xy: ``(xmin, xmax, ymin, ymax)`` [m] on the floor where distractors go
            (in view of camera 0); None: no distractors.
        hinge_offset: Largest ``object_pose`` offset of every actuated joint [rad or m];
            None: the actuated joints are not pose dofs.
        pose_dofs: Further ``object_pose`` dofs (object joints).
        look_at: Point the camera axis orbits [m]; None: the first robot root's position.
        model_fn: Function of the domain's module that returns ``(xml, assets)``.
        model_args: Its positional arguments (manipulator's ``make_model(use_peg, insert)``).
    """

    domain: str
    tasks: tuple[str, ...]
    robot_roots: tuple[str, ...]
    floor_geoms: tuple[str, ...]
    object_geoms: tuple[str, ...] = ()
    object_bodies: tuple[str, ...] = ()
    distractor_xy: Vec4 | None = None
    hinge_offset: float | None = None
    pose_dofs: tuple[PoseDof, ...] = ()
    look_at: tuple[float, float, float] | None = None
    model_fn: str = "get_model_and_assets"
    model_args: tuple[bool, ...] = ()


_LOCO_XY: Vec4 = (-1.5, 1.5, -0.7, 0.7)
_DOMAINS: tuple[DMControlDomain, ...] = (
    DMControlDomain("cheetah", ("run",), ("torso",), ("ground",), distractor_xy=_LOCO_XY,
                    hinge_offset=0.2),
    DMControlDomain("walker", ("walk", "stand", "run"), ("torso",), ("floor",),
                    distractor_xy=_LOCO_XY, hinge_offset=0.1),
    DMControlDomain("hopper", ("stand", "hop"), ("torso",), ("floor",),
                    distractor_xy=_LOCO_XY, hinge_offset=0.1),
    DMControlDomain("cartpole", ("swingup", "balance"), ("cart",), ("floor",),
                    distractor_xy=(-1.8, 1.8, -0.8, 0.8),
                    pose_dofs=(PoseDof("slider", 0, 0.3, -1.5, 1.5),
                               PoseDof("hinge_1", 0, 0.3))),
    DMControlDomain("finger", ("spin", "turn_easy", "turn_hard"), ("proximal",), ("ground",),
                    object_geoms=("cap1", "cap2"), object_bodies=("spinner",),
                    distractor_xy=(-0.5, 0.5, -0.15, 0.15), hinge_offset=0.2,
                    pose_dofs=(PoseDof("hinge", 0, 0.5),), look_at=(0.0, 0.0, 0.4)),
    DMControlDomain("reacher", ("easy", "hard"), ("arm",), ("ground",),
                    object_geoms=("target",), distractor_xy=(-0.25, 0.25, -0.25, 0.25),
                    hinge_offset=0.3),
    DMControlDomain("ball_in_cup", ("catch",), ("cup",), ("ground",),
                    object_geoms=("ball",), object_bodies=("ball",),
                    distractor_xy=(-0.5, 0.5, -0.15, 0.15), hinge_offset=0.05,
                    pose_dofs=(PoseDof("ball_x", 0, 0.05, -0.2, 0.2),
                               PoseDof("ball_z", 0, 0.05)), look_at=(0.0, 0.0, 0.4)),
    DMControlDomain("manipulator", ("bring_ball",), ("upper_arm",), ("floor",),
                    object_geoms=("ball", "target_ball"), object_bodies=("ball",),
                    distractor_xy=(-0.7, 0.7, -0.2, 0.2), hinge_offset=0.1,
                    pose_dofs=(PoseDof("ball_x", 0, 0.05, -0.38, 0.38),),
                    look_at=(0.0, 0.0, 0.4), model_fn="make_model", model_args=(False, False)),
    DMControlDomain("pendulum", ("swingup",), ("pole",), ("floor",),
                    distractor_xy=(-1.0, 1.0, -0.5, 0.5), hinge_offset=0.3),
    DMControlDomain("point_mass", ("easy",), ("pointmass",), ("ground",),
                    object_geoms=("target",), hinge_offset=0.05),  # the mass reaches the whole
    # arena (slide joints over it): nowhere on its floor keeps clear of it, so no distractors
    DMControlDomain("acrobot", ("swingup",), ("upper_arm",), ("floor",),
                    distractor_xy=(-1.5, 1.5, -0.5, 0.5), hinge_offset=0.2,
                    pose_dofs=(PoseDof("shoulder", 0, 0.2),)),
)
DOMAINS: dict[str, DMControlDomain] = {d.domain: d for d in _DOMAINS}
"""Domain name -> its :class:`DMControlDomain`, in the order ``robogen list`` shows."""
TASKS: tuple[str, ...] = tuple(f"{d.domain}-{t}" for d in _DOMAINS for t in d.tasks)
"""Names of this family (robogen ids ``dm_control/<domain>-<task>``)."""


def split_name(name: str) -> tuple[str, str]:
    """``"ball_in_cup-catch"`` -> ``("ball_in_cup", "catch")``.

    Raises:
        UnknownNameError: If ``name`` is not one of :data:`TASKS` (lists close matches).
    """
    if name not in TASKS:
        raise UnknownNameError("dm_control <domain>-<task>", name, TASKS)
    domain, task = name.split("-", 1)
    return domain, task


def check_action_repeat(action_repeat: object) -> int:
    """Return ``action_repeat`` if it is an int >= 1.

    Raises:
        InvalidSpecError: Otherwise (message :data:`BAD_ACTION_REPEAT`).
    """
    if isinstance(action_repeat, bool) or not isinstance(action_repeat, int) \
            or action_repeat < 1:
        raise InvalidSpecError(BAD_ACTION_REPEAT.format(value=action_repeat))
    return action_repeat


def default_steps(action_repeat: int) -> int:
    """Env steps of a suite episode with ``action_repeat``: ``ceil(1000 / action_repeat)``."""
    return math.ceil(SUITE_STEPS / action_repeat)


def inline_includes(xml: str | bytes, assets: dict[str, bytes]) -> str:
    """The MJCF ``xml`` with every ``<include file=...>`` replaced by that asset's elements.

    ``MjSpec.from_string(xml, assets=...)`` does not resolve includes from the assets
    (mujoco 3.17: "Error opening file 'common/skybox.xml'"), while ``MjModel`` does; the
    suite's domains include ``./common/{skybox,visual,materials}.xml``.

    Raises:
        SceneError: If an included file is not among ``assets``.
    """
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    by_name = {k.removeprefix("./"): v for k, v in assets.items()}
    for parent in list(root.iter()):
        for k, child in reversed(list(enumerate(parent))):
            if child.tag != "include":
                continue
            name = str(child.get("file", "")).removeprefix("./")
            if name not in by_name:
                raise SceneError(f"the suite's XML includes {name!r}, which is not among its "
                                 f"assets {sorted(by_name)}")
            parent.remove(child)
            for j, element in enumerate(ET.fromstring(by_name[name])):
                parent.insert(k + j, element)
    return ET.tostring(root, encoding="unicode")


def actuated_joints(model: mujoco.MjModel) -> tuple[str, ...]:
    """Names of the joints the actuators drive, in actuator order, each once: a joint
    transmission's joint, or the joints a fixed tendon transmission couples (point_mass)."""
    out: list[str] = []
    for a in range(model.nu):
        target = int(model.actuator_trnid[a, 0])
        kind = int(model.actuator_trntype[a])
        if kind == int(mujoco.mjtTrn.mjTRN_JOINT):
            ids = [target]
        elif kind == int(mujoco.mjtTrn.mjTRN_TENDON):
            adr, num = int(model.tendon_adr[target]), int(model.tendon_num[target])
            ids = [int(model.wrap_objid[w]) for w in range(adr, adr + num)
                   if int(model.wrap_type[w]) == int(mujoco.mjtWrap.mjWRAP_JOINT)]
        else:
            ids = []
        out += [model.joint(j).name for j in ids if model.joint(j).name not in out]
    return tuple(out)


def _flatten(observation: Any) -> np.ndarray:
    """The suite's observation dict as one float64 vector, in the dict's order (each value
    flattened by ``axis=None``: half the time of a ``ravel`` per value)."""
    return np.concatenate(tuple(observation.values()), axis=None, dtype=np.float64)
