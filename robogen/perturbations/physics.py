"""The ``physics`` axis: friction, object mass and gravity.

Drawn per episode (severity 1 ranges):

* friction: every geom's ``geom_friction`` row (sliding, torsional, rolling)
  scaled by one factor in x[1/3, 3] (explicit contact pairs keep their own
  friction);
* object mass: ``body_mass`` and ``body_inertia`` of ``roles.object_bodies``
  scaled together by x[1/3, 3] (derived constants recomputed with
  ``mj_setConst``); a scene without objects gets no mass change;
* gravity: ``opt.gravity`` magnitude x[1/1.3, 1.3] and tilted by up to 5 deg
  toward a random horizontal direction.

Splits: the (friction, mass, gravity) directions form sign vectors of even
(train) or odd (test) parity: disjoint value sets.
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

MAX_FRICTION_FACTOR = 3.0
MAX_OBJECT_MASS_FACTOR = 3.0
MAX_GRAVITY_FACTOR = 1.3
MAX_GRAVITY_TILT_DEG = 5.0


@dataclass(frozen=True, slots=True)
class PhysicsPerturbation(Perturbation):
    """Concrete physics change of one episode.

    Attributes:
        friction_scale: Factor on every geom's friction coefficients [-].
        object_mass_scale: Factor on object masses and inertias [-].
        objects: Names of the object bodies scaled (empty: none).
        gravity_scale: Factor on the gravity magnitude [-].
        gravity_tilt_rad: Angle between nominal and new gravity direction [rad].
        gravity_tilt_azimuth_rad: Horizontal direction gravity tilts toward [rad].
    """

    axis: ClassVar[str] = "physics"
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = (
        "geom_friction", "body_mass", "body_inertia", "opt.gravity", *u.SET_CONST_FIELDS,
    )
    NEEDS_SET_CONST: ClassVar[bool] = True

    friction_scale: float
    object_mass_scale: float
    objects: tuple[str, ...]
    gravity_scale: float
    gravity_tilt_rad: float
    gravity_tilt_azimuth_rad: float

    def apply_model(self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
                    ) -> bool:
        """Write scaled friction, object masses and the tilted, rescaled gravity."""
        model.geom_friction[:] = nominal.geom_friction * self.friction_scale
        bodies = u.ids_of(model, mujoco.mjtObj.mjOBJ_BODY, self.objects, "object body")
        model.body_mass[bodies] = nominal.body_mass[bodies] * self.object_mass_scale
        model.body_inertia[bodies] = nominal.body_inertia[bodies] * self.object_mass_scale
        g = np.asarray(nominal.opt.gravity, dtype=float)
        if np.linalg.norm(g) > 0:
            toward = np.array([math.cos(self.gravity_tilt_azimuth_rad),
                               math.sin(self.gravity_tilt_azimuth_rad), 0.0])
            axis = np.cross(g, toward)
            if np.linalg.norm(axis) < 1e-12:
                axis = np.array([0.0, 1.0, 0.0])
            tilt = u.rotation(axis, self.gravity_tilt_rad)
            model.opt.gravity[:] = self.gravity_scale * (tilt @ g)
        return bool(model.ngeom) or bool(bodies) or bool(np.linalg.norm(g) > 0)


@register_axis("physics")
class PhysicsAxis(Axis):
    """Friction, object mass and gravity.

    Acts on every scene: friction and gravity exist in all (object mass needs object bodies).
    """

    kind: ClassVar[str] = "physical"
    description: ClassVar[str] = "contact friction, object mass and gravity magnitude and tilt"

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The parity of the scales shrunk (below 1)."""
        return frozenset({u.sign_parity(math.log(values[k]) for k in (
            "friction_scale", "object_mass_scale", "gravity_scale"))})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> PhysicsPerturbation:
        """Draw one physics change; see the module docstring for ranges and splits."""
        u.check_level(severity, split)
        friction, mass, gravity = u.split_signs(rng, 3, split)
        sizes = [u.magnitude(rng, severity) for _ in range(4)]
        return PhysicsPerturbation(
            friction_scale=round(u.log_factor(friction, sizes[0], MAX_FRICTION_FACTOR), 6),
            object_mass_scale=round(u.log_factor(mass, sizes[1], MAX_OBJECT_MASS_FACTOR), 6),
            objects=tuple(scene.roles.object_bodies),
            gravity_scale=round(u.log_factor(gravity, sizes[2], MAX_GRAVITY_FACTOR), 6),
            gravity_tilt_rad=round(sizes[3] * math.radians(MAX_GRAVITY_TILT_DEG), 6),
            gravity_tilt_azimuth_rad=round(float(rng.uniform(-math.pi, math.pi)), 6),
        )
