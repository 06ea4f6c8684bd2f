"""The ``lighting`` axis: light direction, intensity, colour, ambient, specular and shadows.

Acts on the lights named in ``roles.lights``; a scene without named lights gets
its headlight (``model.vis.headlight``) perturbed instead. One global change is
drawn per episode and applied to every target light, like a sun that moved,
dimmed and changed colour:

* direction: each light's ``light_dir`` is tilted by up to 35 deg about a
  horizontal axis and turned by up to 90 deg about the vertical; a light of
  the world body also has its position rotated about ``roles.look_at``;
* diffuse intensity: x[1/3, 3] at severity 1, times a colour tint toward a
  random hue (up to 60 % saturation);
* ambient: +-0.25 added; specular: x[1/3, 3];
* shadows: ``light_castshadow`` toggled with probability ``severity / 2``
  (visible only if the scene renders shadows: ``vis.quality.shadowsize > 0``
  and the renderer's shadow flag on; the Gymnasium adapter renders without
  shadows, the tabletop scene with a 1024 px map).

Splits: the tint hue comes from alternating 30 deg hue sectors (train: even,
test: odd), so the two value sets are disjoint; directions and sizes are drawn
alike in both.
Lights in ``trackcom``/``track`` mode get their derived ``light_pos0``/``light_dir0``
recomputed (``mj_setConst``).
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

MAX_TILT_DEG = 35.0
"""Tilt of the light direction at severity 1 [deg]."""
MAX_YAW_DEG = 90.0
"""Turn of the light direction about the vertical at severity 1 [deg]."""
MAX_INTENSITY_FACTOR = 3.0
"""Diffuse intensity factor range at severity 1: [1/3, 3]."""
MAX_SPECULAR_FACTOR = 3.0
"""Specular factor range at severity 1: [1/3, 3]."""
MAX_AMBIENT_DELTA = 0.25
"""Ambient change at severity 1 (added to each channel, clipped to [0, 1])."""
MAX_TINT = 0.6
"""Saturation of the diffuse colour tint at severity 1."""
HEADLIGHT_FIELDS = ("vis.headlight.ambient", "vis.headlight.diffuse", "vis.headlight.specular")


@dataclass(frozen=True, slots=True)
class LightingPerturbation(Perturbation):
    """Concrete lighting change of one episode.

    Attributes:
        lights: Names of the lights edited (empty: none).
        headlight: True if the headlight is edited (scene without named lights).
        yaw_rad: Turn of light directions about the world vertical [rad].
        tilt_rad: Tilt of light directions about a horizontal axis [rad].
        tilt_azimuth_rad: Azimuth of that horizontal axis [rad].
        diffuse_scale: Factor on nominal diffuse intensity [-].
        tint_rgb: Colour multiplier of diffuse light, each channel in [0, 1] [-].
        ambient_delta: Added to each nominal ambient channel [-].
        specular_scale: Factor on nominal specular intensity [-].
        toggle_shadows: If True, ``castshadow`` of each edited light is flipped.
    """

    axis: ClassVar[str] = "lighting"
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = (
        "light_pos", "light_dir", "light_diffuse", "light_ambient", "light_specular",
        "light_castshadow", *HEADLIGHT_FIELDS, *u.SET_CONST_FIELDS,
    )

    lights: tuple[str, ...]
    headlight: bool
    yaw_rad: float
    tilt_rad: float
    tilt_azimuth_rad: float
    diffuse_scale: float
    tint_rgb: tuple[float, float, float]
    ambient_delta: float
    specular_scale: float
    toggle_shadows: bool

    def rotation(self) -> np.ndarray:
        """``(3, 3)`` world rotation applied to light directions."""
        axis = (math.cos(self.tilt_azimuth_rad), math.sin(self.tilt_azimuth_rad), 0.0)
        return u.rotation((0.0, 0.0, 1.0), self.yaw_rad) @ u.rotation(axis, self.tilt_rad)

    def apply_model(self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
                    ) -> bool:
        """Write rotated, rescaled, tinted nominal light values into ``model``."""
        tint = np.asarray(self.tint_rgb)
        rot = self.rotation()
        look_at = np.asarray(scene.roles.look_at, dtype=float)
        ids = u.ids_of(model, mujoco.mjtObj.mjOBJ_LIGHT, self.lights, "light")
        tracking = False
        for i in ids:
            d = rot @ nominal.light_dir[i]
            model.light_dir[i] = d / max(np.linalg.norm(d), 1e-12)
            if int(model.light_bodyid[i]) == 0:
                model.light_pos[i] = look_at + rot @ (nominal.light_pos[i] - look_at)
            model.light_diffuse[i] = np.clip(nominal.light_diffuse[i] * self.diffuse_scale * tint,
                                             0.0, None)
            model.light_ambient[i] = np.clip(nominal.light_ambient[i] + self.ambient_delta, 0, 1)
            model.light_specular[i] = np.clip(nominal.light_specular[i] * self.specular_scale, 0, 1)
            if self.toggle_shadows:
                model.light_castshadow[i] = not bool(nominal.light_castshadow[i])
            tracking |= int(model.light_mode[i]) != int(mujoco.mjtCamLight.mjCAMLIGHT_FIXED)
        if tracking:
            u.set_const(model, nominal)
        if self.headlight:
            hl, nhl = model.vis.headlight, nominal.vis.headlight
            hl.diffuse[:] = np.clip(np.asarray(nhl.diffuse) * self.diffuse_scale * tint, 0, None)
            hl.ambient[:] = np.clip(np.asarray(nhl.ambient) + self.ambient_delta, 0, 1)
            hl.specular[:] = np.clip(np.asarray(nhl.specular) * self.specular_scale, 0, 1)
        return bool(ids) or self.headlight


@register_axis("lighting")
class LightingAxis(Axis):
    """Light direction, diffuse intensity and colour, ambient, specular and shadows.

    Acts on every scene: one without named lights has its headlight perturbed.
    """

    kind: ClassVar[str] = "visual"
    description: ClassVar[str] = (
        "light direction, intensity, colour, ambient, specular and shadows (headlight if no lights)"
    )

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The tint's hue-sector parity."""
        return frozenset({u.hue_sector(values["tint_rgb"]) % 2})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> LightingPerturbation:
        """Draw one lighting change; see the module docstring for ranges and splits."""
        size = u.check_and_magnitude(rng, severity, split)
        turn, bright, spec = u.split_signs(rng, 3, "all")
        hue = u.split_hue(rng, split)
        tint = u.hsv(hue, MAX_TINT * size, 1.0)
        lights = tuple(scene.roles.lights)
        return LightingPerturbation(
            lights=lights,
            headlight=not lights,
            yaw_rad=round(float(turn) * size * math.radians(MAX_YAW_DEG), 6),
            tilt_rad=round(size * math.radians(MAX_TILT_DEG), 6),
            tilt_azimuth_rad=round(float(rng.uniform(-math.pi, math.pi)), 6),
            diffuse_scale=round(u.log_factor(bright, size, MAX_INTENSITY_FACTOR), 6),
            tint_rgb=tint,
            ambient_delta=round(float(bright) * size * MAX_AMBIENT_DELTA, 6),
            specular_scale=round(u.log_factor(spec, size, MAX_SPECULAR_FACTOR), 6),
            toggle_shadows=bool(rng.random() < severity / 2),
        )
