"""The ``background`` axis: what lies behind the task replaced by a natural-statistics image.

The anchors are the DMControl Generalization Benchmark's ``video_easy`` / ``video_hard``
backgrounds (Hansen & Wang 2021, "Generalization in Reinforcement Learning by Soft Data
Augmentation") and the Distracting Control Suite's background images (Stone et al. 2021,
"The Distracting Control Suite"). Both paste natural video frames (DAVIS, RealEstate10K)
behind the scene; nothing can be downloaded here, so robogen draws **dead-leaves images**
instead: overlapping discs with power-law radii (density ~ r^-3) in random colours, the
occlusion model of natural images (Lee, Mumford & Huang 2001, "Occlusion Models for Natural
Images"), which has their scale invariance (a ~1/f^2 power spectrum) and sharp occlusion
edges, unlike the texture axis's smooth two-colour patterns.

The image is painted on the **skybox** textures, the **floor** (``roles.floor_geoms``) and
any further **background geoms** (``roles.background_geoms``: robosuite's arena walls),
each texture in its own pixels; an untextured geom gets the image's mean colour. Severity
is the blend weight from what the scene shows toward the image (0: nominal, 1: the image
alone, DMC-GB's ``video_hard`` where the floor is gone too). The image is painted over the
condition's earlier axes (a ``texture`` look on the floor, then this background), and
each reset starts from the nominal model, so nothing compounds.

Static per episode, like DCS's ``dynamic=False`` setting (a video background would re-upload
textures every step).

Splits (Factor-World style): the palette's hues come from alternating 30 deg hue sectors
(train: even, test: odd), as the texture axis's, so no palette of ``train`` occurs in
``test``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from robogen.perturbations import helpers as u
from robogen.perturbations.base import Axis, Perturbation, register_axis
from robogen.perturbations.texture import paint_surfaces, surface_targets, textures_of

if TYPE_CHECKING:
    import mujoco

    from robogen.envs.base import MujocoScene

LEAVES = 300
"""Discs per square image of side ``min(height, width)`` (more on elongated skybox strips)."""
RADII = (0.03, 0.4)
"""Smallest and largest disc radius, as fractions of the image's shorter side [-]."""
HUES = 4
"""Hues in an image's palette."""
RESOLUTION = 128
"""Shorter side of the drawn image [px]; larger textures get it upsampled (nearest)."""


def dead_leaves(height: int, width: int, hues: tuple[float, ...], seed: int) -> np.ndarray:
    """A dead-leaves image (Lee, Mumford & Huang 2001).

    Discs fall on the image one after another, each hiding what lies under it; centres are
    uniform, radii follow a density ~ r^-3 between :data:`RADII` (inverse-CDF sampled), and
    each disc takes one of ``hues`` with its own saturation and value.

    Args:
        height: Image height [px].
        width: Image width [px].
        hues: Palette hues in [0, 1).
        seed: Seed of the discs' positions, radii and colours.

    Returns:
        ``(height, width, 3) float64`` RGB in [0, 1]; drawn with the shorter side at most
        :data:`RESOLUTION` px and upsampled (nearest) to the size asked for. A strip whose
        height is a multiple ``k`` of its width (a cube skybox's six faces, stacked) shows
        one square image on each face.
    """
    if height > width and height % width == 0:
        return np.tile(dead_leaves(width, width, hues, seed), (height // width, 1, 1))
    scale = max(1.0, min(height, width) / RESOLUTION)
    h, w = max(1, round(height / scale)), max(1, round(width / scale))
    img = _drawn(h, w, hues, seed)
    if (h, w) != (height, width):
        rows = np.minimum((np.arange(height) * h) // height, h - 1)
        cols = np.minimum((np.arange(width) * w) // width, w - 1)
        img = img[rows[:, None], cols[None, :]]
    return img


def dead_leaves_rows(height: int, width: int, hues: tuple[float, ...], seed: int, start: int,
                     stop: int) -> np.ndarray:
    """Rows ``start:stop`` of :func:`dead_leaves` (bit for bit), indexed from the cached
    drawing: ``(stop - start, width, 3) float64``."""
    rows = np.arange(start, stop)
    if height > width and height % width == 0:  # a skybox strip: the square on every face
        height, rows = width, rows % width
    scale = max(1.0, min(height, width) / RESOLUTION)
    h, w = max(1, round(height / scale)), max(1, round(width / scale))
    img = _drawn(h, w, hues, seed)
    r = np.minimum((rows * h) // height, h - 1)
    cols = np.minimum((np.arange(width) * w) // width, w - 1)
    return img[r[:, None], cols[None, :]]


@lru_cache(maxsize=8)
def _drawn(h: int, w: int, hues: tuple[float, ...], seed: int) -> np.ndarray:
    """:func:`dead_leaves` at its drawing size (cached: a reset paints the skybox and the
    floor, and ``rgb1`` asks again; read-only)."""
    from matplotlib.colors import hsv_to_rgb  # here: importing the axes must stay light

    rng = np.random.default_rng(seed)
    s = min(h, w)
    n = int(LEAVES * h * w / (s * s))
    lo, hi = RADII[0] * s, RADII[1] * s
    r = (lo ** -2 - rng.random(n) * (lo ** -2 - hi ** -2)) ** -0.5
    cy, cx = rng.random(n) * h, rng.random(n) * w
    hue = np.asarray(hues)[rng.integers(len(hues), size=n)]
    sat, val = rng.uniform(0.25, 0.9, n), rng.uniform(0.15, 0.95, n)
    rgb = hsv_to_rgb(np.stack([hue % 1.0, sat, val], axis=-1))
    img = np.empty((h, w, 3))
    img[:] = rgb[0]
    for k in range(n):
        y0, y1 = max(0, int(cy[k] - r[k])), min(h, int(cy[k] + r[k]) + 1)
        x0, x1 = max(0, int(cx[k] - r[k])), min(w, int(cx[k] + r[k]) + 1)
        if y0 >= y1 or x0 >= x1:
            continue
        yy, xx = np.ogrid[y0:y1, x0:x1]
        inside = (yy + 0.5 - cy[k]) ** 2 + (xx + 0.5 - cx[k]) ** 2 <= r[k] ** 2
        img[y0:y1, x0:x1][inside] = rgb[k]
    img.setflags(write=False)
    return img


@dataclass(frozen=True, slots=True)
class BackgroundLook:
    """The background image of one episode.

    Attributes:
        group: ``background`` (the look's group name in errors).
        geoms: Floor and background geoms it is painted on (skyboxes too).
        hues: Palette hues in [0, 1).
        seed: Seed of the dead-leaves discs.
    """

    group: str
    geoms: tuple[str, ...]
    hues: tuple[float, ...]
    seed: int

    def image(self, height: int, width: int) -> np.ndarray:
        """The image as ``(height, width, 3) float64`` RGB in [0, 1]."""
        return dead_leaves(height, width, self.hues, self.seed)

    def image_rows(self, height: int, width: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of :meth:`image`, the same values, upsampled from the cached
        drawing without the other rows."""
        return dead_leaves_rows(height, width, self.hues, self.seed, start, stop)

    @property
    def rgb1(self) -> tuple[float, float, float]:
        """Mean colour of the image (the colour of untextured geoms)."""
        mean = self.image(64, 64).reshape(-1, 3).mean(axis=0)
        return (round(float(mean[0]), 6), round(float(mean[1]), 6), round(float(mean[2]), 6))


@dataclass(frozen=True, slots=True)
class BackgroundPerturbation(Perturbation):
    """Concrete background of one episode.

    Attributes:
        amount: Blend weight toward the image, in [0, 1] [-].
        look: The image and where it is painted.
    """

    axis: ClassVar[str] = "background"
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = ("geom_rgba", "mat_rgba", "tex_data")
    MODEL_ORDER: ClassVar[int] = 1  # after texture: painted over its looks

    amount: float
    look: BackgroundLook

    def apply_model(self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
                    ) -> bool:
        """Blend the background surfaces toward the image, over what the model shows now."""
        return paint_surfaces(model, model, self.amount,
                              surface_targets(model, nominal, (self.look,)))

    def textures_touched(self, model: mujoco.MjModel) -> tuple[int, ...]:
        """Ids of the textures whose pixels :meth:`apply_model` writes."""
        return textures_of(surface_targets(model, model, (self.look,)))


@register_axis("background")
class BackgroundAxis(Axis):
    """Skybox, floor and background surfaces replaced by a dead-leaves image (DMC-GB video
    backgrounds, DCS backgrounds)."""

    kind: ClassVar[str] = "visual"
    description: ClassVar[str] = (
        "skybox, floor and walls replaced by a dead-leaves image (natural image statistics; "
        "DMC-GB video / DCS backgrounds)"
    )
    required_roles: ClassVar[Mapping[str, str]] = {
        "floor_geoms": "floor", "background_geoms": "background geoms"}

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The hue-sector parity of each hue."""
        return frozenset(int(math.floor(h * u.HUE_SECTORS)) % 2
                         for h in values["look"]["hues"])

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> BackgroundPerturbation:
        """Draw a palette and a disc seed."""
        u.check_level(severity, split)
        geoms = (*scene.roles.floor_geoms, *scene.roles.background_geoms)
        hues = tuple(round(u.split_hue(rng, split), 6) for _ in range(HUES))
        look = BackgroundLook(group="background", geoms=geoms, hues=hues,
                              seed=int(rng.integers(2**31 - 1)))
        return BackgroundPerturbation(amount=round(float(severity), 6), look=look)
