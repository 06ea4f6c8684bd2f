"""Perturbation axes (factors of variation) and the wrapper that applies them at reset.

Importing this package registers the twelve axes in :data:`AXES`:

=============  ==========  ==================================================================
axis           kind        what changes
=============  ==========  ==================================================================
lighting       visual      light direction, intensity, colour, ambient, specular, shadows
texture        visual      table / floor+background / object colours and procedural textures
background     visual      skybox / floor / walls replaced by a dead-leaves image (DMC-GB video)
distractors    visual      extra objects (visual-only; physical above severity 0.5)
camera         visual      observation camera azimuth, elevation, distance, fovy
embodiment     structural  link lengths (recompile), link masses, joint damping, gains
physics        physical    friction, object mass, gravity magnitude and tilt
object_pose    physical    object/target placement offsets after the env's reset
object_shape   structural  the manipulated object rebuilt from primitives (8 shapes, sized)
sensor         sensor      observation corruption per step: noise, JPEG/quantization, blur/lag,
                           dropped frames (the policy's input only; the scene is untouched)
action         actuation   action noise, k-step latency, sticky repeats, bias per step
language       language    a prompted policy's instruction paraphrased, with distractor clauses
=============  ==========  ==================================================================

Use :class:`PerturbedEnv` to apply a condition (a sequence of
:class:`~robogen.types.AxisLevel`) to an env made by :func:`robogen.envs.make`.
"""

from __future__ import annotations

from robogen.perturbations import (  # noqa: F401  (importing registers the axes)
    action,
    background,
    camera,
    distractors,
    embodiment,
    language,
    lighting,
    object_pose,
    object_shape,
    physics,
    sensor,
    texture,
)
from robogen.perturbations.action import ActionAxis, ActionPerturbation
from robogen.perturbations.background import BackgroundAxis, BackgroundPerturbation
from robogen.perturbations.base import (
    AXES,
    AXIS_KINDS,
    Axis,
    Perturbation,
    check_level,
    make_axis,
    register_axis,
)
from robogen.perturbations.camera import CameraAxis, CameraPerturbation
from robogen.perturbations.distractors import DistractorsAxis, DistractorsPerturbation
from robogen.perturbations.embodiment import EmbodimentAxis, EmbodimentPerturbation
from robogen.perturbations.language import LanguageAxis, LanguagePerturbation
from robogen.perturbations.lighting import LightingAxis, LightingPerturbation
from robogen.perturbations.object_pose import ObjectPoseAxis, ObjectPosePerturbation
from robogen.perturbations.object_shape import ObjectShapeAxis, ObjectShapePerturbation
from robogen.perturbations.physics import PhysicsAxis, PhysicsPerturbation
from robogen.perturbations.sensor import SensorAxis, SensorPerturbation
from robogen.perturbations.texture import TextureAxis, TexturePerturbation
from robogen.perturbations.wrapper import PerturbedEnv, SimulationUnstableError, axis_rng

__all__ = [
    "AXES", "AXIS_KINDS", "ActionAxis", "ActionPerturbation", "Axis", "BackgroundAxis",
    "BackgroundPerturbation", "CameraAxis", "CameraPerturbation", "DistractorsAxis",
    "DistractorsPerturbation", "EmbodimentAxis", "EmbodimentPerturbation", "LanguageAxis",
    "LanguagePerturbation", "LightingAxis",
    "LightingPerturbation", "ObjectPoseAxis", "ObjectPosePerturbation", "ObjectShapeAxis",
    "ObjectShapePerturbation", "Perturbation", "PerturbedEnv", "PhysicsAxis",
    "PhysicsPerturbation", "SensorAxis", "SensorPerturbation", "SimulationUnstableError",
    "TextureAxis", "TexturePerturbation", "axis_rng", "check_level", "make_axis",
    "register_axis",
]
