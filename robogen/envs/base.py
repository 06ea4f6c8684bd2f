"""The contract between scenes and perturbation axes.

Every env robogen perturbs (built-in tabletop tasks and adapted third-party
MuJoCo envs) exposes a :class:`MujocoScene`: its compiled model and data, the
*scene roles* an axis needs (which geoms are the floor, which bodies are the
robot, ...), a fresh nominal :class:`mujoco.MjSpec` for structural edits, and
hooks to install a recompiled model, re-upload edited textures and recompute
the observation after a state edit. :func:`find_scene` finds it in a wrapper
stack.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import gymnasium as gym
    import mujoco
    import numpy as np

    from robogen.types import RenderSettings

from robogen.errors import SceneError


@dataclass(frozen=True, slots=True)
class PoseDof:
    """One degree of freedom the ``object_pose`` axis may displace after reset.

    Attributes:
        target: Joint name (``kind="qpos"``) or mocap body name (``kind="mocap"``).
        index: Component inside the joint's qpos (free joint: 0..2 = x, y, z)
            or inside the mocap position (0..2).
        max_offset: Displacement at severity 1 [m for slide/position, rad for hinge].
        low: Lower clip bound of the displaced value (same unit), or None.
        high: Upper clip bound, or None.
        kind: ``qpos`` or ``mocap``.
    """

    target: str
    index: int
    max_offset: float
    low: float | None = None
    high: float | None = None
    kind: str = "qpos"


@dataclass(frozen=True, slots=True)
class SceneRoles:
    """Names of the scene elements that perturbation axes act on.

    An empty role means the scene has no such element; an axis that needs it is
    then reported as "not applied" for this env instead of showing a 0.00 gap.

    Attributes:
        floor_geoms: Floor / background geoms (texture axis).
        table_geoms: Table-top geoms (texture axis; distractors rest on them).
        object_geoms: Geoms of manipulated objects (texture axis).
        object_bodies: Manipulated object bodies (physics axis: mass).
        robot_bodies: Robot link bodies, root first (embodiment: masses, lengths).
        robot_geoms: Robot geoms the texture axis recolours (its ``robot`` group, as
            DMC-GB's ``color_hard`` recolours the robot); empty: the robot keeps its look
            (built-in tasks and the Gymnasium, Fetch and Meta-World adapters).
        background_geoms: Geoms behind the task besides the floor that the background axis
            paints (robosuite's arena walls); the floor and skyboxes are always painted.
        robot_joints: Robot joints (embodiment: damping).
        robot_actuators: Robot actuators (embodiment: gains and biases).
        cameras: Camera names; the first is the observation camera.
        lights: Light names (lighting axis). May be empty: the axis then edits
            the headlight.
        look_at: World point the camera axis orbits [m].
        distractor_region: ``(xmin, xmax, ymin, ymax, z)`` where distractors are
            placed: an area of the supporting surface and its height [m].
        distractor_slots: Mocap bodies pre-allocated as hidden distractor slots
            (built-in scenes). Empty: distractors are added through MjSpec as
            static geoms (third-party envs), which keeps the observation size.
        pose_dofs: Degrees of freedom the ``object_pose`` axis displaces.
        keep_clear: Body names distractors must not overlap at reset.
    """

    floor_geoms: tuple[str, ...] = ()
    table_geoms: tuple[str, ...] = ()
    object_geoms: tuple[str, ...] = ()
    object_bodies: tuple[str, ...] = ()
    robot_bodies: tuple[str, ...] = ()
    robot_geoms: tuple[str, ...] = ()
    background_geoms: tuple[str, ...] = ()
    robot_joints: tuple[str, ...] = ()
    robot_actuators: tuple[str, ...] = ()
    cameras: tuple[str, ...] = ()
    lights: tuple[str, ...] = ()
    look_at: tuple[float, float, float] = (0.0, 0.0, 0.0)
    distractor_region: tuple[float, float, float, float, float] | None = None
    distractor_slots: tuple[str, ...] = ()
    pose_dofs: tuple[PoseDof, ...] = ()
    keep_clear: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SceneCapabilities:
    """What a scene (an env family's env) declares about itself, as
    :class:`~robogen.policies.base.PolicyCapabilities` does for a policy.

    Attributes:
        step_checks_state: True if every ``step`` ends with MuJoCo's own checks of the
            state it returns (``mj_step1`` after the integration, as dm_control's legacy
            step does), so that a non-finite ``qpos``/``qvel``/``qacc`` always shows as a
            bad-state warning; :class:`~robogen.perturbations.wrapper.PerturbedEnv` then
            skips its own finiteness check. Leave it False for an env that steps with
            ``mj_step`` (the state it returns is checked only at the next step).
        rebuildable_objects: True if the env's own code finds its manipulated objects
            through their bodies, joints and sites only, never a geom by name or id, so
            the ``object_shape`` axis may replace the geoms of ``roles.object_bodies[0]``
            (built-in tasks, the Gymnasium and Fetch adapters). False: the axis reports
            "not applied" (robosuite, Meta-World and dm_control refer to object geoms).
    """

    step_checks_state: bool = False
    rebuildable_objects: bool = False


@runtime_checkable
class MujocoScene(Protocol):
    """What a perturbable env exposes (implemented by built-in tasks and adapters).

    Attributes:
        model: The compiled model currently simulated.
        data: Its data.
        roles: The scene roles of this env.
        render_settings: Offscreen settings of pixel observations in effect (recorded in
            the evaluation manifest).
        success_rule: The success predicate in words (shown in reports).
        defer_frames: When True, pixel observations are
            :class:`~robogen.envs.render.PendingFrame` objects drawn on the render thread
            (resolve them with :func:`~robogen.envs.render.resolve_frames`); the rollout
            worker sets it for pixel modes.
        render_lane: Render lane (thread and GL context, :mod:`robogen.envs.render`) that
            draws this env's frames (default 0; the rollout worker spreads a batch of envs
            over its lanes).
        capabilities: What the scene declares about itself (:class:`SceneCapabilities`;
            a class attribute for most scenes).
    """

    defer_frames: bool
    render_lane: int

    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model currently simulated (replaced by :meth:`install_model`)."""
        ...

    @property
    def render_settings(self) -> RenderSettings:
        """Offscreen settings of pixel observations in effect (width, height [px], camera,
        shadow map and mesh quality), recorded in the evaluation manifest."""
        ...

    @property
    def success_rule(self) -> str:
        """The success predicate in words, with its thresholds and units (shown in reports)."""
        ...

    @property
    def capabilities(self) -> SceneCapabilities:
        """What the scene declares about itself (:class:`SceneCapabilities`)."""
        ...

    @property
    def data(self) -> mujoco.MjData:
        """The ``MjData`` of :attr:`model` (state, contacts and sensors of the running
        episode)."""
        ...

    @property
    def roles(self) -> SceneRoles:
        """Which bodies, geoms, lights and cameras of the model play which part
        (:class:`SceneRoles`), read by the perturbation axes."""
        ...

    def nominal_spec(self) -> mujoco.MjSpec:
        """A fresh, unedited MjSpec of the nominal scene (a new object each call)."""
        ...

    def install_model(self, model: mujoco.MjModel) -> None:
        """Simulate ``model`` from now on (after a structural edit or to restore nominal).

        Replaces model and data (a new ``MjData``), keeps the observation and
        action spaces, and makes the renderer use the new model.
        """
        ...

    def textures_changed(self, texture_ids: tuple[int, ...]) -> None:
        """Re-upload edited textures (``model.tex_data``) to the renderer, if one exists."""
        ...

    def observe(self) -> Any:
        """The observation of the current ``data`` (after a state edit at reset)."""
        ...

    def render_frame(
        self, camera: str | None = None, width: int = 84, height: int = 84
    ) -> np.ndarray:
        """Render ``(height, width, 3) uint8`` from ``camera`` (default: roles.cameras[0])."""
        ...


SubstepObserver = Callable[[Any, Any], None]
"""``fn(model: mujoco.MjModel, data: mujoco.MjData)``: sees one physics substep's solved state."""


@runtime_checkable
class SubstepScene(Protocol):
    """A scene that steps its physics itself and lets an observer see every physics substep
    at a consistent state (the built-in tasks, dm_control).

    Attributes:
        substep_observer: None, or ``fn(model, data)`` called after every physics substep
            of ``step`` at a point where ``data``'s contacts and constraint forces belong to
            one state (after ``mj_step``, or after the legacy step's ``mj_step2``: the
            solve's state, one substep before the integrated ``qpos``), never after a
            trailing ``mj_step1`` (contacts rebuilt without a solve). The safety monitor
            sets it to read the peak contact force over substeps; envs that step through a
            suite's own loop (Gymnasium, Fetch, Meta-World, robosuite) are read once per env
            step instead.
    """

    substep_observer: SubstepObserver | None


def find_scene(env: gym.Env[Any, Any]) -> MujocoScene:
    """Return the first object in ``env``'s wrapper stack that is a :class:`MujocoScene`.

    Raises:
        SceneError: If no wrapper nor the base env implements the protocol.
    """
    current: Any = env
    seen = []
    while current is not None:
        if isinstance(current, MujocoScene):
            return current
        seen.append(type(current).__name__)
        current = getattr(current, "env", None)
    raise SceneError(
        f"env {env!r} exposes no MujocoScene (looked through {' -> '.join(seen)}); "
        "create it with robogen.envs.make(env_id) so that axes can act on it"
    )
