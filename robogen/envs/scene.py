"""The shared tabletop scene of robogen's built-in tasks, built with ``mujoco.MjSpec``.

One scene serves every built-in task (Reach, Push, PickPlace): a floor, a
table, a five-joint arm with a parallel gripper mounted on the table, a small
box with a free joint (the manipulated object), a target (mocap body with a
visual-only sphere), two named lights, two named cameras and
:data:`NUM_DISTRACTOR_SLOTS` hidden distractor slots. No XML is written by
hand: :func:`build_spec` returns a fresh :class:`mujoco.MjSpec` each call, so
structural perturbations (link lengths, added geoms) edit a spec and recompile.

Frames and units: world z is up, metres, radians, kilograms. The table top is
at ``z = TABLE_TOP_Z``; the arm base stands at ``ARM_BASE_POS`` and reaches
towards +x. Seen from the ``front`` camera (at +x, looking back at the arm)
the workspace is the table area in front of the arm.

Arm kinematic chain (bodies, root first; joint in brackets)::

    arm_base (fixed pedestal)
      turret     [base_yaw: hinge about z]
        upper_arm  [shoulder_pitch: hinge about y]   link length ARM_LINK_LENGTHS[0]
          forearm    [elbow_pitch: hinge about y]    link length ARM_LINK_LENGTHS[1]
            wrist      [wrist_pitch: hinge about y]  link length ARM_LINK_LENGTHS[2]
              hand       [wrist_roll: hinge about z]  carries grip_site
                finger_left  [finger_left: slide along +y]
                finger_right [finger_right: slide along -y]

At zero joint angles the arm points straight up. Each link's child body sits
at ``(0, 0, length)`` in the link frame and the link geom is a z-aligned
capsule with ``pos = (0, 0, length / 2)`` and ``size = (radius, length / 2)``,
so a link length is scaled by scaling the child's ``pos`` and the capsule's
``pos`` and half-length together.

Actuators (one per joint, same names as the joints) are position servos:
``gainprm[0] = kp`` and ``biasprm[:3] = (0, -kp, -kv)``, so force =
``kp * (ctrl - q) - kv * qdot``. Scaling an actuator's gain must scale
``biasprm[1:3]`` by the same factor, or the servo turns into positive
feedback. ``ctrlrange`` equals the joint range.

Render settings are chosen for CPU speed (software EGL rendering): a shadow
map sized to the image (:func:`shadow_size_for`: 256 px for 84x84 frames, at most
``SHADOW_SIZE``, instead of MuJoCo's 4096) and ``OFFSAMPLES = 0`` (no multisample
anti-aliasing); nominal lights cast no shadow (the lighting axis may switch shadows
on, so the map size changes only shadowed frames). An 84x84 frame then costs about
1.4 ms instead of 20-35 ms (measured: one shadow-casting light costs ~9 ms per frame
with the 1024 map, ~4 ms with 256, ~45 ms with 4096; a lighting@1 Push step with an
84x84 observation 14.4 ms with the 1024 map, 8.7 ms with 256).

Physics: ``TIMESTEP = 0.002`` s with the ``implicitfast`` integrator (stable
with the servos' velocity feedback) and elliptic friction cones (pyramidal
cones let the finger pads sink ~1 cm into the box when friction is scaled up
x3, so grasps failed); finger pads and the box use a stiffer contact
``solref = (0.01, 1)``. Tasks step ``FRAME_SKIP = 10`` physics steps per
control step, i.e. a control rate of 50 Hz.
"""

from __future__ import annotations

import robogen._gl  # noqa: F401  (choose MUJOCO_GL before mujoco is imported)

# isort: split
from typing import Any

import mujoco
import numpy as np

from robogen.envs.camera_geometry import look_at_quat

# ---- physics and render settings -------------------------------------------------------------
TIMESTEP = 0.002
"""Physics time step [s]."""
FRAME_SKIP = 10
"""Physics steps per control step: control period 0.02 s, rate 50 Hz."""
SHADOW_SIZE = 1024
"""Largest shadow map side [px] :func:`shadow_size_for` picks (MuJoCo's default is 4096)."""
MIN_SHADOW_SIZE = 256
"""Smallest shadow map side [px] :func:`shadow_size_for` picks."""
OFFSAMPLES = 0
"""Multisample anti-aliasing samples of offscreen rendering (0: off, for CPU speed)."""
NUMSLICES = 12
"""Slices of capsules, cylinders and spheres around their axis (MuJoCo's default 28): with
:data:`NUMSTACKS` an 84x84 frame 2.1-2.5 -> 1.4 ms, a frame with a shadow-casting light
6.3 -> 3.5 ms (CPU, llvmpipe; software rendering is mostly geometry)."""
NUMSTACKS = 8
"""Stacks of capsules, cylinders and spheres along their axis (MuJoCo's default 16)."""
OFFSCREEN_SIZE = (640, 480)
"""Offscreen framebuffer (width, height) [px]: the largest frame render_frame can make."""

# ---- layout ----------------------------------------------------------------------------------
TABLE_HALF_SIZE = (0.45, 0.40, 0.20)
"""Table box half sizes (x, y, z) [m]; the table is centred at the world origin in x, y."""
TABLE_TOP_Z = 2 * TABLE_HALF_SIZE[2]
"""Height of the table top [m]."""
ARM_BASE_POS = (-0.30, 0.0, TABLE_TOP_Z)
"""Where the arm pedestal stands on the table [m]."""
PEDESTAL_HEIGHT = 0.08
"""Height of the fixed pedestal; the turret (base_yaw joint) sits on top of it [m]."""
SHOULDER_OFFSET = 0.04
"""Height of the shoulder joint above the turret joint [m]."""
ARM_LINK_LENGTHS = (0.28, 0.26, 0.05)
"""Lengths of upper_arm, forearm and wrist links [m]."""
ARM_LINK_RADII = (0.025, 0.022, 0.02)
"""Capsule radii of upper_arm, forearm and wrist links [m]."""
GRIP_SITE_OFFSET = 0.075
"""Distance from the hand frame (wrist_roll joint) to grip_site along the hand z axis [m]."""
FINGER_RANGE = (0.0, 0.04)
"""Travel of each finger slide joint [m]; the gap between the pads is the sum of both."""
OBJECT_HALF_SIZE = 0.02
"""Half edge of the manipulated box [m]."""
OBJECT_MASS = 0.05
"""Mass of the manipulated box [kg]."""
TARGET_RADIUS = 0.025
"""Radius of the target's visual sphere [m]."""
LOOK_AT = (0.0, 0.0, TABLE_TOP_Z + 0.05)
"""Workspace centre that cameras look at and the camera axis orbits [m]."""
DISTRACTOR_REGION = (-0.12, 0.40, -0.36, 0.36, TABLE_TOP_Z)
"""(xmin, xmax, ymin, ymax, z) of table area where distractors may be placed [m]."""
DISTRACTOR_PARK_Z = -1.0
"""Height below the floor where hidden distractor slots are parked [m]."""

# ---- names -----------------------------------------------------------------------------------
NUM_DISTRACTOR_SLOTS = 6
ROBOT_BODIES = (
    "arm_base", "turret", "upper_arm", "forearm", "wrist", "hand", "finger_left", "finger_right",
)
ARM_JOINTS = ("base_yaw", "shoulder_pitch", "elbow_pitch", "wrist_pitch", "wrist_roll")
FINGER_JOINTS = ("finger_left", "finger_right")
ROBOT_JOINTS = ARM_JOINTS + FINGER_JOINTS
ROBOT_ACTUATORS = ROBOT_JOINTS  # one position servo per joint, named like its joint
GRIPPER_BODIES = ("hand", "finger_left", "finger_right")
GRIP_SITE = "grip_site"
OBJECT_BODY = "object"
OBJECT_JOINT = "object_joint"
OBJECT_GEOM = "object_geom"
TARGET_BODY = "target"
TARGET_GEOM = "target_geom"
FLOOR_GEOM = "floor"
FLOOR_GRID = 0.5
"""Spacing of the floor plane's render grid [m] (``size[2]`` of a MuJoCo plane): the plane
is drawn as (6 m / spacing)^2 quads in every pass. Lit by directional lights and seen by a
non-local viewer, a flat plane shades the same at any spacing, so frames without shadows
are identical to the former 0.05 m grid (14,400 quads), which cost ~28% of an 84x84 frame
and ~32% of a frame with two shadow-casting lights in software rendering."""
TABLE_GEOM = "table_top"
LIGHTS = ("key_light", "fill_light")
CAMERAS = ("front", "top", "side")
DISTRACTOR_SHAPES = ("box", "sphere", "cylinder")
DISTRACTOR_SLOTS = tuple(f"distractor_{k}" for k in range(NUM_DISTRACTOR_SLOTS))
TEXTURE_SIZE = 64
"""Width and height of the floor, table and object textures [px] (rgb, 2D)."""

# Joint ranges [rad] / [m], servo gains kp [N·m/rad or N/m] and kv [N·m·s/rad or N·s/m].
JOINT_RANGES = {
    "base_yaw": (-1.7, 1.7),
    "shoulder_pitch": (-1.0, 1.9),
    "elbow_pitch": (-0.3, 2.8),
    "wrist_pitch": (-2.8, 2.8),
    "wrist_roll": (-1.7, 1.7),
    "finger_left": FINGER_RANGE,
    "finger_right": FINGER_RANGE,
}
SERVO_GAINS = {
    "base_yaw": (300.0, 10.0),
    "shoulder_pitch": (500.0, 16.0),
    "elbow_pitch": (350.0, 10.0),
    "wrist_pitch": (120.0, 3.0),
    "wrist_roll": (40.0, 1.5),
    "finger_left": (300.0, 20.0),
    "finger_right": (300.0, 20.0),
}
JOINT_DAMPING = 1.0
"""Passive damping of the arm hinge joints [N·m·s/rad]."""
JOINT_ARMATURE = 0.01
"""Rotor inertia added to every robot joint [kg·m²] (numerical stability)."""

HOME_QPOS = {
    "base_yaw": 0.0,
    "shoulder_pitch": 0.077,
    "elbow_pitch": 1.992,
    "wrist_pitch": 1.073,
    "wrist_roll": 0.0,
    "finger_left": FINGER_RANGE[1],
    "finger_right": FINGER_RANGE[1],
}
"""Home configuration: gripper open, pointing down, 0.15 m above the table at x = -0.05."""

# Appearance (rgb in [0, 1]).
FLOOR_RGB = ((0.30, 0.33, 0.36), (0.42, 0.45, 0.48))
TABLE_RGB = (0.62, 0.48, 0.34)
OBJECT_RGB = (0.85, 0.20, 0.15)
ARM_RGBA = (0.75, 0.75, 0.78, 1.0)
GRIPPER_RGBA = (0.25, 0.25, 0.28, 1.0)
TARGET_RGBA = (0.15, 0.80, 0.25, 0.5)

_ROBOT_CONTYPE, _ROBOT_CONAFFINITY = 2, 1  # robot links collide with the world, not each other


def _add_texture(spec: mujoco.MjSpec, name: str, builtin: mujoco.mjtBuiltin, rgb1,
                 rgb2=None) -> None:
    tex = spec.add_texture()
    tex.name = name
    tex.type = mujoco.mjtTexture.mjTEXTURE_2D
    tex.builtin = builtin
    tex.width = TEXTURE_SIZE
    tex.height = TEXTURE_SIZE
    tex.nchannel = 3
    tex.rgb1 = list(rgb1)
    tex.rgb2 = list(rgb2 if rgb2 is not None else rgb1)


def _add_material(spec: mujoco.MjSpec, name: str, texture: str, repeat=(1.0, 1.0),
                  uniform: bool = False) -> None:
    mat = spec.add_material()
    mat.name = name
    mat.textures[int(mujoco.mjtTextureRole.mjTEXROLE_RGB)] = texture
    mat.texrepeat = list(repeat)
    mat.texuniform = uniform
    mat.specular = 0.2
    mat.shininess = 0.2


def _robot_geom(body, name: str, gtype: mujoco.mjtGeom, size, pos=(0, 0, 0), rgba=ARM_RGBA) -> None:
    geom = body.add_geom()
    geom.name = name
    geom.type = gtype
    geom.size = list(size) + [0.0] * (3 - len(size))
    geom.pos = list(pos)
    geom.rgba = list(rgba)
    geom.contype = _ROBOT_CONTYPE
    geom.conaffinity = _ROBOT_CONAFFINITY


def _hinge(body, name: str, axis) -> None:
    joint = body.add_joint()
    joint.name = name
    joint.type = mujoco.mjtJoint.mjJNT_HINGE
    joint.axis = list(axis)
    joint.range = list(JOINT_RANGES[name])
    joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE
    joint.damping = [JOINT_DAMPING, 0.0, 0.0]
    joint.armature = JOINT_ARMATURE


def _add_arm(spec: mujoco.MjSpec) -> None:
    capsule = mujoco.mjtGeom.mjGEOM_CAPSULE
    base = spec.worldbody.add_body()
    base.name = "arm_base"
    base.pos = list(ARM_BASE_POS)
    _robot_geom(base, "arm_base_geom", mujoco.mjtGeom.mjGEOM_CYLINDER,
                (0.06, PEDESTAL_HEIGHT / 2), pos=(0, 0, PEDESTAL_HEIGHT / 2), rgba=GRIPPER_RGBA)

    turret = base.add_body()
    turret.name = "turret"
    turret.pos = [0.0, 0.0, PEDESTAL_HEIGHT]
    _hinge(turret, "base_yaw", (0, 0, 1))
    _robot_geom(turret, "turret_geom", mujoco.mjtGeom.mjGEOM_CYLINDER,
                (0.045, SHOULDER_OFFSET / 2), pos=(0, 0, SHOULDER_OFFSET / 2))

    parent, pos = turret, (0.0, 0.0, SHOULDER_OFFSET)
    links = zip(("upper_arm", "forearm", "wrist"), ("shoulder_pitch", "elbow_pitch", "wrist_pitch"),
                ARM_LINK_LENGTHS, ARM_LINK_RADII, strict=True)
    for link, joint, length, radius in links:
        body = parent.add_body()
        body.name = link
        body.pos = list(pos)
        _hinge(body, joint, (0, 1, 0))
        _robot_geom(body, f"{link}_geom", capsule, (radius, length / 2), pos=(0, 0, length / 2))
        parent, pos = body, (0.0, 0.0, length)

    hand = parent.add_body()
    hand.name = "hand"
    hand.pos = list(pos)
    _hinge(hand, "wrist_roll", (0, 0, 1))
    _robot_geom(hand, "palm_geom", mujoco.mjtGeom.mjGEOM_BOX, (0.02, 0.055, 0.01),
                pos=(0, 0, 0.01), rgba=GRIPPER_RGBA)
    site = hand.add_site()
    site.name = GRIP_SITE
    site.pos = [0.0, 0.0, GRIP_SITE_OFFSET]
    site.size = [0.005, 0.005, 0.005]
    site.rgba = [1.0, 1.0, 0.0, 0.0]  # invisible marker of the grasp point

    for name, sign in (("finger_left", 1.0), ("finger_right", -1.0)):
        finger = hand.add_body()
        finger.name = name
        finger.pos = [0.0, 0.0, 0.02]
        joint = finger.add_joint()
        joint.name = name
        joint.type = mujoco.mjtJoint.mjJNT_SLIDE
        joint.axis = [0.0, sign, 0.0]
        joint.range = list(FINGER_RANGE)
        joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE
        joint.armature = JOINT_ARMATURE
        joint.damping = [0.5, 0.0, 0.0]
        _robot_geom(finger, f"{name}_pad", mujoco.mjtGeom.mjGEOM_BOX, (0.012, 0.005, 0.035),
                    pos=(0, sign * 0.005, 0.035), rgba=GRIPPER_RGBA)
        pad = finger.first_geom()
        pad.condim = 4
        pad.friction = [1.5, 0.01, 0.001]
        pad.solref = [0.01, 1.0]

    for name in ROBOT_JOINTS:
        kp, kv = SERVO_GAINS[name]
        act = spec.add_actuator()
        act.name = name
        act.target = name
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.gainprm[0] = kp
        act.biasprm[0] = 0.0
        act.biasprm[1] = -kp
        act.biasprm[2] = -kv
        act.ctrlrange = list(JOINT_RANGES[name])
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE


def _add_distractor_slots(spec: mujoco.MjSpec) -> None:
    shapes = {
        "box": (mujoco.mjtGeom.mjGEOM_BOX, (0.02, 0.02, 0.02)),
        "sphere": (mujoco.mjtGeom.mjGEOM_SPHERE, (0.02, 0.0, 0.0)),
        "cylinder": (mujoco.mjtGeom.mjGEOM_CYLINDER, (0.02, 0.02, 0.0)),
    }
    for k, slot in enumerate(DISTRACTOR_SLOTS):
        body = spec.worldbody.add_body()
        body.name = slot
        body.mocap = True
        body.pos = [0.3 * k - 0.75, 0.0, DISTRACTOR_PARK_Z]
        for shape in DISTRACTOR_SHAPES:
            gtype, size = shapes[shape]
            geom = body.add_geom()
            geom.name = f"{slot}_{shape}"
            geom.type = gtype
            geom.size = list(size)
            geom.rgba = [0.5, 0.5, 0.5, 0.0]
            geom.contype = 0
            geom.conaffinity = 0
            geom.mass = 0.01


def shadow_size_for(width: int, height: int) -> int:
    """The scene's shadow map side [px] for ``width`` x ``height`` [px] frames.

    The smallest power of two at least twice the larger image side, clamped to
    [``MIN_SHADOW_SIZE``, ``SHADOW_SIZE``]: 256 up to 128 px frames, 512 up to 256 px,
    1024 beyond. A shadow-casting light costs a depth pass and a lit pass per frame, and
    a map much finer than the image only adds to them (see the module docstring).
    """
    side = 2 * max(int(width), int(height), 1)
    return max(MIN_SHADOW_SIZE, min(SHADOW_SIZE, 1 << (side - 1).bit_length()))


def build_spec(*, shadowsize: int = SHADOW_SIZE, offsamples: int = OFFSAMPLES,
               numslices: int = NUMSLICES, numstacks: int = NUMSTACKS) -> mujoco.MjSpec:
    """Build the nominal tabletop scene.

    Args:
        shadowsize: Shadow map size [px] (0: no shadow map).
        offsamples: Offscreen multisample anti-aliasing samples.
        numslices: Tessellation of round geoms around their axis (``vis.quality``).
        numstacks: Tessellation of round geoms along their axis.

    Returns:
        A new, uncompiled :class:`mujoco.MjSpec` (every element named).
    """
    spec = mujoco.MjSpec()
    spec.modelname = "robogen_tabletop"
    spec.compiler.degree = False  # every angle in this module is in radians
    spec.option.timestep = TIMESTEP
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.visual.quality.shadowsize = int(shadowsize)
    spec.visual.quality.offsamples = int(offsamples)
    spec.visual.quality.numslices = int(numslices)
    spec.visual.quality.numstacks = int(numstacks)
    spec.visual.global_.offwidth, spec.visual.global_.offheight = OFFSCREEN_SIZE
    # Nominal light adds up to about 1.0 on the table top (key 0.5 + fill 0.2 + headlight 0.1
    # diffuse, 0.2 ambient), so brighter lighting draws show instead of saturating.
    spec.visual.headlight.ambient = [0.2, 0.2, 0.2]
    spec.visual.headlight.diffuse = [0.1, 0.1, 0.1]
    spec.visual.headlight.specular = [0.0, 0.0, 0.0]
    spec.stat.center = list(LOOK_AT)
    spec.stat.extent = 1.5

    checker, flat = mujoco.mjtBuiltin.mjBUILTIN_CHECKER, mujoco.mjtBuiltin.mjBUILTIN_FLAT
    _add_texture(spec, "floor_tex", checker, *FLOOR_RGB)
    _add_texture(spec, "table_tex", flat, TABLE_RGB)
    _add_texture(spec, "object_tex", flat, OBJECT_RGB)
    _add_material(spec, "floor_mat", "floor_tex", repeat=(2.0, 2.0), uniform=True)
    _add_material(spec, "table_mat", "table_tex")
    _add_material(spec, "object_mat", "object_tex")

    world = spec.worldbody
    for name, pos, direction, diffuse in (
        ("key_light", (0.8, -0.6, 2.2), (-0.35, 0.25, -1.0), 0.5),
        ("fill_light", (-0.6, 0.8, 1.8), (0.3, -0.4, -1.0), 0.2),
    ):
        light = world.add_light()
        light.name = name
        light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
        light.pos = list(pos)
        light.dir = list(np.asarray(direction) / np.linalg.norm(direction))
        light.diffuse = [diffuse] * 3
        light.specular = [0.15] * 3
        light.ambient = [0.05] * 3
        light.castshadow = False

    for name, pos, fovy in (
        ("front", (0.50, 0.0, 0.98), 50.0),
        ("top", (0.0, 0.0, 1.75), 45.0),
        ("side", (0.05, -1.05, 0.95), 45.0),
    ):
        cam = world.add_camera()
        cam.name = name
        cam.pos = list(pos)
        cam.quat = list(look_at_quat(pos, LOOK_AT))
        cam.fovy = fovy

    floor = world.add_geom()
    floor.name = FLOOR_GEOM
    floor.type = mujoco.mjtGeom.mjGEOM_PLANE
    floor.size = [3.0, 3.0, FLOOR_GRID]
    floor.material = "floor_mat"

    table = world.add_body()
    table.name = "table"
    table.pos = [0.0, 0.0, TABLE_HALF_SIZE[2]]
    top = table.add_geom()
    top.name = TABLE_GEOM
    top.type = mujoco.mjtGeom.mjGEOM_BOX
    top.size = list(TABLE_HALF_SIZE)
    top.material = "table_mat"

    _add_arm(spec)

    obj = world.add_body()
    obj.name = OBJECT_BODY
    obj.pos = [0.05, 0.0, TABLE_TOP_Z + OBJECT_HALF_SIZE]
    joint = obj.add_freejoint()
    joint.name = OBJECT_JOINT
    geom = obj.add_geom()
    geom.name = OBJECT_GEOM
    geom.type = mujoco.mjtGeom.mjGEOM_BOX
    geom.size = [OBJECT_HALF_SIZE] * 3
    geom.mass = OBJECT_MASS
    geom.material = "object_mat"
    geom.friction = [1.0, 0.01, 0.001]
    geom.condim = 4
    geom.solref = [0.01, 1.0]

    target = world.add_body()
    target.name = TARGET_BODY
    target.mocap = True
    target.pos = [0.1, 0.1, TABLE_TOP_Z + 0.1]
    tgeom = target.add_geom()
    tgeom.name = TARGET_GEOM
    tgeom.type = mujoco.mjtGeom.mjGEOM_SPHERE
    tgeom.size = [TARGET_RADIUS, 0.0, 0.0]
    tgeom.rgba = list(TARGET_RGBA)
    tgeom.contype = 0
    tgeom.conaffinity = 0
    tgeom.mass = 0.01

    _add_distractor_slots(spec)
    return spec


def build_model(**kwargs: int) -> mujoco.MjModel:
    """Compile :func:`build_spec` (keyword arguments are passed through)."""
    return build_spec(**kwargs).compile()


def table_top_z(model: Any) -> float:
    """Height of the table top in ``model`` (a ``mujoco.MjModel``) [m], read from the model (not
    :data:`TABLE_TOP_Z`), so tasks and experts follow an edited table: the ``table``
    body's height plus the :data:`TABLE_GEOM` box's offset and half height (the table
    hangs from the world body, unrotated).

    Raises:
        KeyError: If ``model`` has no ``table`` body or :data:`TABLE_GEOM` geom.
    """
    body, geom = model.body("table"), model.geom(TABLE_GEOM)
    return float(body.pos[2] + geom.pos[2] + geom.size[2])


class SceneIds:
    """Ids and addresses of the named scene elements in one compiled model.

    Holders keep the instance next to the model object it was built from and
    rebuild it when the model is replaced (``ids.model is not scene.model``),
    so ids never go stale after a recompile.

    Args:
        model: A model compiled from :func:`build_spec` (possibly edited).
    """

    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = model
        self.arm_qadr = np.array([model.joint(j).qposadr[0] for j in ARM_JOINTS])
        self.arm_dadr = np.array([model.joint(j).dofadr[0] for j in ARM_JOINTS])
        self.finger_qadr = np.array([model.joint(j).qposadr[0] for j in FINGER_JOINTS])
        self.arm_act = np.array([model.actuator(j).id for j in ARM_JOINTS])
        self.finger_act = np.array([model.actuator(j).id for j in FINGER_JOINTS])
        self.grip_site = int(model.site(GRIP_SITE).id)
        self.object_body = int(model.body(OBJECT_BODY).id)
        self.object_qadr = int(model.joint(OBJECT_JOINT).qposadr[0])
        self.target_mocap = int(model.body_mocapid[model.body(TARGET_BODY).id])
        self.table_top_z = table_top_z(model)
        """Height of the table top [m] (:func:`table_top_z`)."""


__all__ = [
    "ARM_JOINTS", "CAMERAS", "DISTRACTOR_REGION", "DISTRACTOR_SLOTS", "FINGER_JOINTS", "FRAME_SKIP",
    "HOME_QPOS", "LIGHTS", "LOOK_AT", "NUM_DISTRACTOR_SLOTS", "OFFSAMPLES", "ROBOT_ACTUATORS",
    "ROBOT_BODIES", "ROBOT_JOINTS", "SHADOW_SIZE", "TABLE_TOP_Z", "TIMESTEP", "build_model",
    "FLOOR_GRID", "MIN_SHADOW_SIZE", "shadow_size_for",
    "build_spec", "look_at_quat", "SceneIds", "table_top_z",
]
