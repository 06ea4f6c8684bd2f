"""The ``texture`` axis: appearance of the table, the floor/background, the objects and the robot.

Each surface group (``table``, ``floor``, ``object``, ``robot`` of the scene roles) gets a
*look*: a procedural pattern (``flat``, ``checker``, ``gradient``, ``noise``)
in a two-colour palette. Where a group's geom has a textured material the
pattern is written into the texture's pixels (``model.tex_data``; the wrapper
then re-uploads it to the renderer) and the material's colour is moved toward
white so the pattern shows unmodulated; where it has no texture only its
colour changes (``geom_rgba``, or ``mat_rgba`` when the material colour is in
use), to the palette's first colour. The floor group also re-paints skybox
textures, the scene's background.

Severity is the blend weight between the nominal and the sampled look
(pixel-wise for textures, per channel for colours): 0 is nominal, 1 the full
look.

Splits (Factor-World style): the palette's first hue comes from alternating
30 deg hue sectors (train: even, test: odd) and the second hue is its
complement (180 deg away, the same sector parity), so no (pattern, palette)
value of ``train`` occurs in ``test``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import mujoco
import numpy as np

from robogen.perturbations import helpers as u
from robogen.perturbations.base import Axis, Perturbation, register_axis

if TYPE_CHECKING:
    from robogen.envs.base import MujocoScene

PATTERNS = ("flat", "checker", "gradient", "noise")
"""Procedural patterns a look may use."""
GROUPS = ("table", "floor", "object", "robot")
"""Surface groups, from ``roles.table_geoms``, ``roles.floor_geoms``, ``roles.object_geoms``,
``roles.robot_geoms`` (drawn in this order; a scene without a group draws nothing for it, so
``robot``, added last, leaves the looks of scenes without robot geoms as they were)."""
CELLS = (2, 4, 8)
"""Checker cells / noise lattice cells per texture side."""
_DEFAULT_RGBA = np.array([0.5, 0.5, 0.5, 1.0], dtype=np.float32)
_RGB_ROLE = int(mujoco.mjtTextureRole.mjTEXROLE_RGB)


@dataclass(frozen=True, slots=True)
class SurfaceLook:
    """The look of one surface group.

    Attributes:
        group: ``table``, ``floor``, ``object`` or ``robot``.
        geoms: Names of the group's geoms (from the scene roles).
        pattern: One of :data:`PATTERNS`.
        rgb1: First palette colour, channels in [0, 1] (the colour of untextured geoms).
        rgb2: Second palette colour.
        cells: Checker cells / noise lattice cells per texture side.
        angle_rad: Direction of a gradient in texture space [rad].
        noise_seed: Seed of the noise lattice.
    """

    group: str
    geoms: tuple[str, ...]
    pattern: str
    rgb1: tuple[float, float, float]
    rgb2: tuple[float, float, float]
    cells: int
    angle_rad: float
    noise_seed: int

    def image(self, height: int, width: int) -> np.ndarray:
        """The pattern as ``(height, width, 3) float64`` RGB in [0, 1]."""
        return self.image_rows(height, width, 0, height)

    def second_colour_rows(self, height: int, width: int, start: int, stop: int
                           ) -> np.ndarray:
        """For a two-colour pattern (``flat``, ``checker``): ``(stop - start, width) bool``,
        True where rows ``start:stop`` of :meth:`image` are ``rgb2`` (else ``rgb1``)."""
        if self.pattern == "flat":
            return np.zeros((stop - start, width), dtype=bool)
        x = np.linspace(0.0, 1.0, width, endpoint=False)[None, :]
        y = np.linspace(0.0, 1.0, height, endpoint=False)[start:stop, None]
        return (np.floor(x * self.cells) + np.floor(y * self.cells)) % 2 != 0

    def image_rows(self, height: int, width: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of :meth:`image` (the same values bit for bit), computed
        without the rest: ``(stop - start, width, 3) float64`` (read-only for ``flat``)."""
        ys = np.linspace(0.0, 1.0, height, endpoint=False)
        x = np.linspace(0.0, 1.0, width, endpoint=False)[None, :]
        y = ys[start:stop, None]
        c1, c2 = np.asarray(self.rgb1), np.asarray(self.rgb2)
        # two-valued patterns: c1 (1 - w) + c2 w is exactly c1 at w = 0 and c2 at w = 1
        if self.pattern == "flat":
            return np.broadcast_to(c1, (stop - start, width, 3))
        if self.pattern == "checker":
            return np.where(self.second_colour_rows(height, width, start, stop)[..., None],
                            c2, c1)
        if self.pattern == "gradient":
            c, s = math.cos(self.angle_rad), math.sin(self.angle_rad)
            xc, ys_ = x * c, ys * s
            # x c + y s rounds monotonically in each term: its extremes over the whole
            # image are those of the terms' sums, so rows need not see the rest
            lo = xc.min() + ys_.min()
            span = (xc.max() + ys_.max()) - lo
            w = ((xc + y * s) - lo) / max(float(span), 1e-12)
        else:  # noise: bilinear value noise on a cells x cells lattice
            n = self.cells + 1
            lattice = np.random.default_rng(self.noise_seed).random((n, n))
            gy, gx = y * self.cells, x * self.cells
            i0, j0 = np.floor(gy).astype(int), np.floor(gx).astype(int)
            fy, fx = gy - i0, gx - j0
            w = ((1 - fy) * (1 - fx) * lattice[i0, j0] + (1 - fy) * fx * lattice[i0, j0 + 1]
                 + fy * (1 - fx) * lattice[i0 + 1, j0] + fy * fx * lattice[i0 + 1, j0 + 1])
        return c1 * (1.0 - w[..., None]) + c2 * w[..., None]


def _texture_of(model: mujoco.MjModel, matid: int) -> int:
    texid = model.mat_texid[matid]
    return int(texid[_RGB_ROLE] if np.ndim(texid) else texid)


def _skyboxes(model: mujoco.MjModel) -> list[int]:
    return [t for t in range(model.ntex)
            if int(model.tex_type[t]) == int(mujoco.mjtTexture.mjTEXTURE_SKYBOX)]


class Look(Protocol):
    """What :func:`surface_targets` / :func:`paint_surfaces` read of a look."""

    @property
    def group(self) -> str:
        """The surface group painted: one of :data:`GROUPS` (``table``, ``floor``, ...)."""
        ...

    @property
    def geoms(self) -> tuple[str, ...]:
        """Names of the group's geoms (from the scene roles); empty: the group is absent."""
        ...

    @property
    def rgb1(self) -> tuple[float, float, float]:
        """The colour of the group's untextured geoms, RGB channels in [0, 1]."""
        ...

    def image(self, height: int, width: int) -> np.ndarray:
        """The texture to paint as ``(height, width, 3) float64`` RGB in [0, 1]."""
        ...

    def image_rows(self, height: int, width: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of :meth:`image`, ``(stop - start, width, 3) float64``."""
        ...


SKYBOX_GROUPS = ("floor", "background")
"""Look groups that also paint the model's skybox textures (the scene's background)."""

Targets = list[tuple[Look, list[int], list[int], list[int]]]
"""Per look: (look, geoms coloured by ``geom_rgba``, materials, textures) to edit."""


def surface_targets(model: mujoco.MjModel, nominal: mujoco.MjModel,
                    looks: Sequence[Look]) -> Targets:
    """Per look: the geoms, materials and textures that show it (see the module docstring).

    Raises:
        InvalidPerturbationError: If a look names a geom the model lacks.
    """
    out: Targets = []
    for look in looks:
        geoms: list[int] = []
        mats: list[int] = []
        texs: list[int] = []
        for g in u.ids_of(model, mujoco.mjtObj.mjOBJ_GEOM, look.geoms, f"{look.group} geom"):
            mat = int(model.geom_matid[g])
            tex = _texture_of(model, mat) if mat >= 0 else -1
            if mat < 0 or not np.array_equal(nominal.geom_rgba[g], _DEFAULT_RGBA):
                geoms.append(g)  # the renderer uses geom_rgba (see mjv's material rule)
            elif mat not in mats:
                mats.append(mat)
            if tex >= 0 and tex not in texs:
                texs.append(tex)
        if look.group in SKYBOX_GROUPS and look.geoms:
            texs.extend(t for t in _skyboxes(model) if t not in texs)
        out.append((look, geoms, mats, texs))
    return out


def paint_surfaces(model: mujoco.MjModel, base: mujoco.MjModel, amount: float,
                   targets: Targets) -> bool:
    """Blend ``base``'s colours and texture pixels toward the looks by ``amount`` in [0, 1],
    writing ``model``; ``base`` may be ``model`` itself (a look painted over what the
    earlier axes of the condition drew). Returns True if anything was written."""
    a = float(amount)
    changed = False
    for look, geoms, mats, texs in targets:
        for g in geoms:
            mat = int(model.geom_matid[g])
            has_tex = mat >= 0 and _texture_of(model, mat) >= 0
            goal = np.ones(3) if has_tex else np.asarray(look.rgb1)
            model.geom_rgba[g, :3] = (1 - a) * base.geom_rgba[g, :3] + a * goal
            changed = True
        for m in mats:
            goal = np.ones(3) if _texture_of(model, m) >= 0 else np.asarray(look.rgb1)
            model.mat_rgba[m, :3] = (1 - a) * base.mat_rgba[m, :3] + a * goal
            changed = True
        for t in texs:
            _paint_texture(model, base, t, a, look)
            changed = True
    return changed


ROWS_PER_BLOCK = 128
"""Texture rows blended at a time: the float temporaries of a block stay in the CPU's cache
and the cost per reset grows with the texture's pixels only, never with copies of it."""


def _paint_texture(model: Any, base: Any, t: int, a: float, look: Look) -> None:
    """Write texture ``t`` of ``model`` (a ``mujoco.MjModel``; ``base`` its nominal or itself)
    as ``rint((1 - a) base + a 255 look)``, clipped to uint8, block by block of rows in place
    (the alpha channel stays ``base``'s)."""
    adr, h, w = int(model.tex_adr[t]), int(model.tex_height[t]), int(model.tex_width[t])
    nch = int(model.tex_nchannel[t])
    n = h * w * nch
    dst = model.tex_data[adr:adr + n].reshape(h, w, nch)
    src = base.tex_data[adr:adr + n].reshape(h, w, nch)
    k = min(nch, 3)
    scale = a * 255.0
    if a == 1.0 and isinstance(look, SurfaceLook) and look.pattern in ("flat", "checker"):
        # the full look of two colours: each pixel is one of two uint8 values
        q1, q2 = (np.clip(np.rint(scale * np.asarray(c)), 0, 255).astype(np.uint8)[:k]
                  for c in (look.rgb1, look.rgb2))
        if nch > k and base is not model:
            dst[..., k:] = src[..., k:]
        if look.pattern == "flat":
            dst[..., :k] = q1
            return
        for r0 in range(0, h, ROWS_PER_BLOCK):
            r1 = min(h, r0 + ROWS_PER_BLOCK)
            second = look.second_colour_rows(h, w, r0, r1)
            dst[r0:r1, :, :k] = np.where(second[..., None], q2, q1)
        return
    for r0 in range(0, h, ROWS_PER_BLOCK):
        r1 = min(h, r0 + ROWS_PER_BLOCK)
        out = scale * look.image_rows(h, w, r0, r1)[..., :k]
        if a != 1.0:  # at 1 the nominal term is +0.0 exactly
            out += (1 - a) * src[r0:r1, :, :k]
        np.rint(out, out=out)
        np.clip(out, 0, 255, out=out)
        dst[r0:r1, :, :k] = out
        if nch > k and base is not model:
            dst[r0:r1, :, k:] = src[r0:r1, :, k:]


def textures_of(targets: Targets) -> tuple[int, ...]:
    """Sorted ids of the textures ``targets`` paint."""
    return tuple(sorted({t for _, _, _, texs in targets for t in texs}))


@dataclass(frozen=True, slots=True)
class TexturePerturbation(Perturbation):
    """Concrete surface looks of one episode.

    Attributes:
        amount: Blend weight from the nominal toward the sampled looks, in [0, 1] [-].
        looks: One look per surface group the scene has.
    """

    axis: ClassVar[str] = "texture"
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = ("geom_rgba", "mat_rgba", "tex_data")

    amount: float
    looks: tuple[SurfaceLook, ...]

    def apply_model(self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
                    ) -> bool:
        """Blend colours and texture pixels toward the looks; see the module docstring."""
        return paint_surfaces(model, nominal, self.amount,
                              surface_targets(model, nominal, self.looks))

    def textures_touched(self, model: mujoco.MjModel) -> tuple[int, ...]:
        """Ids of the textures whose pixels :meth:`apply_model` writes."""
        return textures_of(surface_targets(model, model, self.looks))


@register_axis("texture")
class TextureAxis(Axis):
    """Table, floor/background, object and robot appearance: colours and procedural textures."""

    kind: ClassVar[str] = "visual"
    description: ClassVar[str] = (
        "table, floor/background, object and robot colours and procedural textures "
        "(checker, gradient, noise)"
    )

    required_roles: ClassVar[Mapping[str, str]] = {
        "table_geoms": "table", "floor_geoms": "floor", "object_geoms": "object geoms",
        "robot_geoms": "robot geoms"}

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """Each look's group, pattern and hue-sector parity."""
        return frozenset((look["group"], look["pattern"], u.hue_sector(look["rgb1"]) % 2)
                         for look in values["looks"])

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> TexturePerturbation:
        """Draw one look per surface group the scene has."""
        u.check_level(severity, split)
        looks = []
        for group in GROUPS:
            names = tuple(getattr(scene.roles, f"{group}_geoms"))
            if not names:
                continue
            hue = u.split_hue(rng, split)
            sat = float(rng.uniform(0.45, 0.9))
            looks.append(SurfaceLook(
                group=group,
                geoms=names,
                pattern=PATTERNS[int(rng.integers(len(PATTERNS)))],
                rgb1=u.hsv(hue, sat, float(rng.uniform(0.55, 0.95))),
                rgb2=u.hsv(hue + 0.5, sat, float(rng.uniform(0.15, 0.5))),
                cells=int(CELLS[int(rng.integers(len(CELLS)))]),
                angle_rad=round(float(rng.uniform(0.0, 2.0 * math.pi)), 6),
                noise_seed=int(rng.integers(2**31 - 1)),
            ))
        return TexturePerturbation(amount=round(float(severity), 6), looks=tuple(looks))
