"""The catalog of adapted Gymnasium MuJoCo envs: one :class:`GymEnvRecord` per env id.

:mod:`robogen.envs.gym_adapter` is generic; everything it knows about one env (how
success is decided, which camera observes, which bodies and geoms play which scene
role) is in that env's record here. Adding a Gymnasium MuJoCo env to robogen is one
:func:`register_gym_env` call (or one entry of ``_BUILTIN``): ``robogen list``, the
``gymnasium`` env family, the CLI help and the parametrized tests derive from
:data:`GYM_ENVS`.

Success, decided when the episode ends (``terminated`` or ``truncated``);
``info["success"]`` is False on every earlier step:

=========================  ==========  ================================================
env                        kind        rule
=========================  ==========  ================================================
Reacher-v5                 distance    final fingertip-target distance (xy) < 0.02 m
Pusher-v5                  distance    final object-goal distance (xy) < 0.10 m
HalfCheetah-v5             return      return >= 1500 (over 1000 steps)
Hopper-v5                  return      return >= 1500 and not fallen
Walker2d-v5                return      return >= 1500 and not fallen
Ant-v5                     return      return >= 1500 and not fallen
Swimmer-v5                 return      return >= 100
InvertedPendulum-v5        return      return >= 950 and not fallen
InvertedDoublePendulum-v5  return      return >= 9100 and not fallen
=========================  ==========  ================================================

Reacher's 0.02 m is the fingertip sphere (radius 0.01 m) touching the target
(radius 0.009 m); the shipped PPO checkpoint meets it in 69% of nominal episodes.
Pusher's 0.10 m is the object cylinder (radius 0.05 m) overlapping the goal disc
(radius 0.08 m). Locomotion thresholds sit well above standing still (about 1000
from the healthy reward) and well below the envs' "solved" reward thresholds.
A return rule needs the episode to end by the time limit: a termination before
it (the robot fell, the pole dropped) is never a success. Return thresholds are
for the registered step limit; the adapter scales them for other limits.

Cameras: locomotion envs observe through their own ``track`` camera (MuJoCo
``trackcom`` mode: fixed orientation, follows the robot's centre of mass), so the
robot stays in view while it runs. Reacher, Pusher and the inverted pendulums get
``robogen_cam`` (:class:`AddedCamera`), a fixed camera at the listed azimuth,
elevation and distance around a ``look_at`` point.
"""

from __future__ import annotations

from dataclasses import dataclass

from robogen.envs.base import PoseDof
from robogen.errors import UnknownNameError
from robogen.registry import caller_module

Vec3 = tuple[float, float, float]

SUCCESS_KINDS = ("distance", "return")


@dataclass(frozen=True, slots=True)
class SuccessRule:
    """How an adapted env decides success at the end of an episode.

    Attributes:
        kind: ``distance`` (two bodies closer than ``threshold`` [m] in the xy
            plane at the last step) or ``return`` (episode return >= ``threshold``
            and the episode was not terminated early).
        threshold: Distance [m] or return [-].
        body_a: First body of a distance rule.
        body_b: Second body of a distance rule.

    Raises:
        ValueError: On an unknown ``kind`` or a distance rule without both bodies.
    """

    kind: str
    threshold: float
    body_a: str = ""
    body_b: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SUCCESS_KINDS:
            raise ValueError(f"success rule kind must be one of {SUCCESS_KINDS}, "
                             f"got {self.kind!r}")
        if self.kind == "distance" and not (self.body_a and self.body_b):
            raise ValueError("a distance success rule names body_a and body_b")

    def describe(self) -> str:
        """One line for reports and metadata."""
        if self.kind == "distance":
            return (f"final {self.body_a}-{self.body_b} distance (xy) < {self.threshold:g} m")
        return f"episode return >= {self.threshold:g} without early termination"


@dataclass(frozen=True, slots=True)
class AddedCamera:
    """A fixed camera ``robogen_cam`` added to an env that has none aimed at its scene.

    Attributes:
        look_at: Point the camera looks at [m] (world frame).
        distance: Distance from ``look_at`` [m].
        azimuth_deg: Azimuth [deg] (MuJoCo's free-camera convention).
        elevation_deg: Elevation [deg]; negative looks down.
        fovy_deg: Vertical field of view [deg].
    """

    look_at: Vec3
    distance: float
    azimuth_deg: float
    elevation_deg: float
    fovy_deg: float = 45.0


@dataclass(frozen=True, slots=True)
class GymEnvRecord:
    """Everything env-specific the adapter needs for one Gymnasium MuJoCo env.

    Names refer to the nominal model after the adapter filled in missing names
    (unnamed geoms ``<body>_geom``, lights ``light0``..., see
    :func:`robogen.envs.gym_adapter.build_nominal_spec`).

    Attributes:
        gym_id: Gymnasium id (``Hopper-v5``); the robogen id is ``gymnasium/<gym_id>``.
        success: Success rule at the registered step limit.
        camera: Observation camera: the name of one of the env's own cameras
            (``track``), or an :class:`AddedCamera` the adapter adds as ``robogen_cam``.
        robot_root: Root body of the robot; its subtree is ``roles.robot_bodies``.
        robot_bodies: The robot's bodies, listed (when ``robot_root`` is empty).
        floor_geoms: Floor geoms (texture axis; distractor surface if no table).
        table_geoms: Table geoms (texture axis; distractor surface).
        object_geoms: Manipulated object and goal geoms (texture axis).
        object_bodies: Manipulated object bodies (physics axis: mass).
        keep_clear: Bodies distractors must not overlap, besides the robot's.
        look_at: Point the camera axis orbits [m]; None: the added camera's
            ``look_at``, or ``(0, 0, z)`` of ``robot_root``'s nominal position for
            an env camera.
        distractor_xy: ``(xmin, xmax, ymin, ymax)`` [m] where distractors go on the
            first table (else floor) geom, at that geom's height; None: no region
            (no distractors).
        hinge_offset: If set, every actuated joint is an ``object_pose`` dof with this
            largest offset [rad or m], within the joint's range if it is limited.
        pose_dofs: Further ``object_pose`` dofs.

    Raises:
        ValueError: If neither or both of ``robot_root`` and ``robot_bodies`` are
            given, or a distractor region has no surface geom.
    """

    gym_id: str
    success: SuccessRule
    camera: str | AddedCamera
    robot_root: str = ""
    robot_bodies: tuple[str, ...] = ()
    floor_geoms: tuple[str, ...] = ()
    table_geoms: tuple[str, ...] = ()
    object_geoms: tuple[str, ...] = ()
    object_bodies: tuple[str, ...] = ()
    keep_clear: tuple[str, ...] = ()
    look_at: Vec3 | None = None
    distractor_xy: tuple[float, float, float, float] | None = None
    hinge_offset: float | None = None
    pose_dofs: tuple[PoseDof, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.robot_root) == bool(self.robot_bodies):
            raise ValueError(f"{self.gym_id}: give exactly one of robot_root and robot_bodies")
        if self.distractor_xy is not None and not (self.table_geoms or self.floor_geoms):
            raise ValueError(f"{self.gym_id}: a distractor region needs a table or floor geom")


_LOCO_XY = (-1.5, 1.5, -1.0, 1.5)

_BUILTIN: tuple[GymEnvRecord, ...] = (
    GymEnvRecord(
        "HalfCheetah-v5", SuccessRule("return", 1500.0), "track", robot_root="torso",
        floor_geoms=("floor",), distractor_xy=_LOCO_XY, hinge_offset=0.2),
    GymEnvRecord(
        "Hopper-v5", SuccessRule("return", 1500.0), "track", robot_root="torso",
        floor_geoms=("floor",), distractor_xy=_LOCO_XY, hinge_offset=0.1),
    GymEnvRecord(
        "Walker2d-v5", SuccessRule("return", 1500.0), "track", robot_root="torso",
        floor_geoms=("floor",), distractor_xy=_LOCO_XY, hinge_offset=0.1),
    GymEnvRecord(
        "Ant-v5", SuccessRule("return", 1500.0), "track", robot_root="torso",
        floor_geoms=("floor",), distractor_xy=(-3.0, 3.0, -3.0, 3.0), hinge_offset=0.2),
    GymEnvRecord(
        "Reacher-v5", SuccessRule("distance", 0.02, "fingertip", "target"),
        AddedCamera((0.0, 0.0, 0.0), 0.75, 90.0, -70.0),
        robot_bodies=("body0", "body1", "fingertip"), floor_geoms=("ground",),
        object_geoms=("target",), keep_clear=("target",),
        distractor_xy=(-0.27, 0.27, -0.27, 0.27),
        pose_dofs=(PoseDof("target_x", 0, 0.1, -0.2, 0.2),
                   PoseDof("target_y", 0, 0.1, -0.2, 0.2))),
    GymEnvRecord(
        "Pusher-v5", SuccessRule("distance", 0.10, "object", "goal"),
        AddedCamera((0.4, -0.3, -0.3), 1.5, 180.0, -45.0),
        robot_root="r_shoulder_pan_link", table_geoms=("table",),
        object_geoms=("object_geom", "goal_geom"), object_bodies=("object",),
        keep_clear=("object", "goal"), distractor_xy=(0.05, 0.85, -0.55, 0.35),
        pose_dofs=(
            # object: reset draws slidey in [-0.3, 0], slidex in [-0.2, 0.2]
            PoseDof("obj_slidey", 0, 0.1, -0.35, 0.05),
            PoseDof("obj_slidex", 0, 0.1, -0.25, 0.25),
            PoseDof("goal_slidey", 0, 0.1, -0.1, 0.1),
            PoseDof("goal_slidex", 0, 0.1, -0.1, 0.1),
        )),
    GymEnvRecord(
        "Swimmer-v5", SuccessRule("return", 100.0), "track", robot_root="torso",
        floor_geoms=("floor",), look_at=(0.0, 0.0, 0.0), distractor_xy=_LOCO_XY,
        hinge_offset=0.3, pose_dofs=(PoseDof("free_body_rot", 0, 0.3),)),
    # inverted pendulums: no supporting surface near the cart -> no distractor region
    GymEnvRecord(
        "InvertedPendulum-v5", SuccessRule("return", 950.0),
        AddedCamera((0.0, 0.0, 0.2), 2.4, 90.0, -10.0), robot_root="cart",
        pose_dofs=(PoseDof("slider", 0, 0.3, -0.9, 0.9), PoseDof("hinge", 0, 0.1, -0.19, 0.19))),
    GymEnvRecord(
        "InvertedDoublePendulum-v5", SuccessRule("return", 9100.0),
        AddedCamera((0.0, 0.0, 0.5), 3.6, 90.0, -10.0), robot_root="cart",
        floor_geoms=("floor",),
        pose_dofs=(PoseDof("slider", 0, 0.3, -0.9, 0.9), PoseDof("hinge", 0, 0.1, -0.19, 0.19))),
)

GYM_ENVS: dict[str, GymEnvRecord] = {}
"""Gymnasium id -> its record, in registration order (the order ``robogen list`` shows)."""
_REGISTERED_BY: dict[str, str] = {}
"""Gymnasium id -> the module that registered its record (a plug-in's, or this one)."""


def register_gym_env(record: GymEnvRecord) -> GymEnvRecord:
    """Add ``record`` to the catalog: ``gymnasium/<record.gym_id>`` becomes a robogen env.

    Raises:
        ValueError: If the id is already in the catalog.
    """
    if record.gym_id in GYM_ENVS:
        raise ValueError(f"Gymnasium env {record.gym_id!r} is already in the catalog")
    GYM_ENVS[record.gym_id] = record
    _REGISTERED_BY[record.gym_id] = caller_module()
    return record


def gym_env_module(gym_id: str) -> str:
    """The module that called :func:`register_gym_env` for ``gym_id`` (``""``: unknown)."""
    return _REGISTERED_BY.get(gym_id, "")


def gym_env_record(gym_id: str) -> GymEnvRecord:
    """The record of ``gym_id``.

    Raises:
        UnknownNameError: If ``gym_id`` is not in the catalog (lists close matches).
    """
    try:
        return GYM_ENVS[gym_id]
    except KeyError:
        raise UnknownNameError("Gymnasium MuJoCo env", gym_id, tuple(GYM_ENVS)) from None


for _record in _BUILTIN:
    register_gym_env(_record)
