# pyright: reportAttributeAccessIssue=false
# (mujoco's compiled bindings ship no stubs for these attributes)
"""Pixel observations of N worlds at once: MJWarp's batch ray tracer at the policy's camera.

:class:`BatchRenderer` draws every world of a :class:`~robogen.batched.worlds.BatchedWorlds`
from one camera at one size (a pixel policy's ``front`` camera at 84x84) and returns the
frames as one ``(worlds, height, width, 3) uint8`` torch tensor on the worlds' device,
unpacked from MJWarp's packed pixel buffer by torch ops on that device (DLPack view, no host
copy); frames reach the host only through :meth:`BatchRenderer.render_numpy`.

MJWarp renders by ray casting (``mujoco_warp.render``: one primary ray per pixel through a
bounding-volume hierarchy of the worlds' geoms, refit at every frame), not by OpenGL
rasterization, so a frame differs from robogen's OpenGL frame (``envs/render.py``) of the
same state by a small image distance (``tests/batched/test_batch_render.py`` pins it;
``docs/benchmarks.md`` has the numbers). What it shares with the OpenGL path and what not:

* **Geometry, colours, materials**: primitives and meshes, ``geom_rgba``/``mat_rgba`` (the
  same material rule as ``mjv``: a material's colour when the geom's is MuJoCo's default),
  emission, and no specular highlights by default (:data:`SPECULAR`); geoms with alpha 0
  are not drawn (distractor slots); alpha between 0 and 1 is drawn opaque (OpenGL blends
  it). Geom groups 0-2 are drawn.
* **Textures**: 2D textures sampled bilinearly (OpenGL: mipmapped), and the skybox on rays
  that hit nothing when the model has one (else black, as OpenGL's clear colour). Texture
  pixels are not MJWarp model fields: per-world textures (the ``texture`` and
  ``background`` axes) are extra textures of this renderer selected per world through
  ``mat_texid`` and the skybox id (:meth:`BatchRenderer.set_textures`).
* **Lights**: each light's position, direction, ambient, diffuse, specular (drawn with
  ``specular=True``), attenuation and cutoff are per-world fields (the ``lighting`` axis);
  the headlight is one constant of the render kernel, the same in every world (a lighting
  draw on the headlight is refused: :func:`~robogen.batched.fields.check_batchable`).
  Not drawn: reflections (``mat_reflectance``: OpenGL mirrors the scene into reflective
  planes, e.g. the Gymnasium envs' floors) and fog.
* **Shadows**: ray-traced hard shadows from lights whose ``light_castshadow`` is set,
  when the model asks for shadows (``vis.quality.shadowsize > 0``, as the OpenGL renderer
  decides); an occluded point keeps 30 % of the light's direct term (OpenGL's shadow map
  darkens it similarly, with soft filtered edges).
* **Cameras**: ``cam_pos``/``cam_quat``/``cam_fovy`` per world (the ``camera`` axis); rays
  are computed per frame from each world's field of view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
from numpy.typing import NDArray

from robogen.batched.fields import install_world_fields
from robogen.batched.worlds import load_mjwarp
from robogen.errors import InvalidSpecError

if TYPE_CHECKING:
    from robogen.batched.worlds import BatchedWorlds

BAD_CAMERA = ("camera {camera!r} is not in the model; expected one of {names} (a name or an "
              "id in 0..{last})")
BAD_SIZE = "{what} must be an int >= 1, got {value!r}; pass the policy's image size in pixels"
BAD_TEXTURES = ("tex_data must have shape {expected} (one row of model.tex_data per world), "
                "got {got}")

SPECULAR = False
"""Whether specular highlights are drawn by default: no. robogen's OpenGL frames show
almost none of the lights' specular term, while MJWarp's per-pixel highlights brighten the
tabletop frames by 3.2 levels on average; without them the batch frame is 4x closer to the
OpenGL frame of the same state (mean |diff| 0.9-1.1 levels instead of 3.5-3.7 on Push,
Reach, PickPlace; ``benchmarks/bench_batched_render.py --distance ... --batch-specular 0``).
The lighting axis's ``light_specular`` change is then not drawn (nor visible in OpenGL's)."""

SHADOW_FRACTION = 0.3
"""Fraction of a light's direct term that reaches a shadowed point (MJWarp's default)."""


class BatchRenderer:
    """Frames of every world of ``worlds`` from one camera.

    Args:
        worlds: The worlds to draw (their current ``Data``: render after a step or
            :meth:`~BatchedWorlds.set_state`).
        camera: Camera name or id (the policy's observation camera).
        width: Image width [px].
        height: Image height [px].
        shadows: Trace shadows of lights with ``light_castshadow`` (None: when the model
            asks for them, ``vis.quality.shadowsize > 0``, as the OpenGL renderer does).
        specular: Draw specular highlights (:data:`SPECULAR`).

    Raises:
        InvalidSpecError: On an unknown camera or a size < 1.
        DependencyMissingError: Without the ``batched`` extra.
    """

    def __init__(self, worlds: BatchedWorlds, camera: str | int, width: int = 84,
                 height: int = 84, *, shadows: bool | None = None,
                 specular: bool = SPECULAR) -> None:
        for what, value in (("width", width), ("height", height)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidSpecError(BAD_SIZE.format(what=what, value=value))
        model = worlds.model
        self.worlds = worlds
        self.camera = _camera_id(model, camera)
        self.width, self.height = int(width), int(height)
        self.shadows = bool(model.vis.quality.shadowsize > 0) if shadows is None else shadows
        self._wp, self._mjw = load_mjwarp()
        skyboxes = [t for t in range(model.ntex)
                    if int(model.tex_type[t]) == int(mujoco.mjtTexture.mjTEXTURE_SKYBOX)]
        with self._wp.ScopedDevice(worlds.device):
            self.rc: Any = self._mjw.create_render_context(
                model, worlds.worlds, cam_res=(self.width, self.height), render_rgb=True,
                render_depth=False, render_seg=False, cam_active=[self.camera],
                use_textures=True, use_shadows=self.shadows, render_skybox=bool(skyboxes),
                use_precomputed_rays=False,  # per-world cam_fovy (the camera axis)
                shadow_light_fraction=SHADOW_FRACTION, enable_specular=specular)
        self._base_textures = list(self.rc.textures_registry)
        # the model's pixels now (the worlds' model may be a host env's, edited later)
        self._tex_data = np.array(model.tex_data)
        self._variants: list[NDArray[np.uint8]] = []  # pixels of the extra textures
        self._texture_ids = np.tile(np.arange(model.ntex), (worlds.worlds, 1))
        self._skybox = skyboxes[0] if skyboxes else -1
        self._textured = False  # per-world textures installed

    # ------------------------------------------------------------------ frames

    def render(self) -> Any:
        """Draw every world's current state.

        Returns:
            ``torch.Tensor (worlds, height, width, 3) uint8`` RGB on the worlds' device,
            row 0 at the top (the layout of robogen's OpenGL frames); a new tensor per call.
        """
        import torch

        wp, mjw, w = self._wp, self._mjw, self.worlds
        with wp.ScopedDevice(w.device):
            mjw.refit_bvh(w.m, w.d, self.rc)
            mjw.render(w.m, w.d, self.rc)
        packed = wp.to_torch(self.rc.rgb_data).view(torch.int32)  # 0xAARRGGBB per pixel
        if packed.device.type == "cuda":  # torch's stream waits for warp's render, on the GPU
            torch.cuda.current_stream(packed.device).wait_stream(
                wp.stream_to_torch(wp.get_stream(w.device)))
        rgb = torch.stack(((packed >> 16) & 0xFF, (packed >> 8) & 0xFF, packed & 0xFF), dim=-1)
        return rgb.to(torch.uint8).view(w.worlds, self.height, self.width, 3)

    def render_numpy(self) -> NDArray[np.uint8]:
        """:meth:`render` copied to the host: ``(worlds, height, width, 3) uint8``."""
        return self.render().cpu().numpy()

    # ------------------------------------------------------------------ per-world fields

    def install(self, fields: Mapping[str, NDArray[Any]]) -> tuple[str, ...]:
        """Install a :func:`~robogen.batched.fields.world_fields` result, textures included.

        Model fields go to the worlds (:func:`~robogen.batched.fields.install_world_fields`);
        :data:`~robogen.batched.fields.RENDER_FIELDS` (``tex_data``) to this renderer
        (:meth:`set_textures`). Install before the worlds' next ``set_state`` (which
        recomputes light and camera poses from the new fields).

        Returns:
            The paths installed.
        """
        done = install_world_fields(self.worlds, fields)
        if "tex_data" in fields:
            self.set_textures(fields["tex_data"])
            done = (*done, "tex_data")
        elif self._textured:  # every world back to the model's textures
            self.set_textures(None)
        return done

    def set_textures(self, tex_data: NDArray[Any] | None) -> None:
        """Give each world its own texture pixels.

        A texture whose pixels in world ``i`` differ from the model's becomes an extra
        texture of this renderer (one per distinct image), which world ``i``'s materials
        (``mat_texid``, a per-world field) and skybox select; worlds with the model's pixels
        keep the model's textures.

        Args:
            tex_data: ``(worlds, model.ntexdata)`` pixel bytes per world (``world_fields``'
                ``tex_data`` rows), or None for the model's textures in every world.

        Raises:
            InvalidSpecError: On a wrong shape.
        """
        model, w = self.worlds.model, self.worlds
        if model.ntex == 0:
            return
        remap = np.tile(np.arange(model.ntex), (w.worlds, 1))
        registry = list(self._base_textures)
        self._variants = []
        if tex_data is not None:
            rows = np.asarray(tex_data)
            expected = (w.worlds, int(model.ntexdata))
            if rows.shape != expected:
                raise InvalidSpecError(BAD_TEXTURES.format(expected=expected, got=rows.shape))
            seen: dict[tuple[int, bytes], int] = {}
            with self._wp.ScopedDevice(w.device):
                for t in range(model.ntex):
                    self._texture_variants(t, rows, remap, registry, seen)
        was_textured, self._textured = self._textured, bool(np.any(remap != np.arange(model.ntex)))
        self._texture_ids = remap
        with self._wp.ScopedDevice(w.device):
            self.rc.textures_registry = registry
            self.rc.textures = self._wp.array(registry, dtype=self._wp.Texture2D)
            if self._skybox >= 0:
                self.rc.skybox_tex_id = self._wp.array(remap[:, self._skybox], dtype=int)
        texid = np.asarray(model.mat_texid)
        if model.nmat and (self._textured or was_textured):
            rows_id = np.where(texid[None] >= 0, remap[:, np.maximum(texid, 0)], texid[None])
            w.set_fields({"mat_texid": rows_id})

    def _texture_variants(self, t: int, rows: NDArray[Any], remap: NDArray[np.int64],
                          registry: list[Any], seen: dict[tuple[int, bytes], int]) -> None:
        """Register texture ``t``'s per-world images that differ from the model's."""
        model = self.worlds.model
        adr = int(model.tex_adr[t])
        if adr < 0:  # by reference (a file): not in tex_data, nothing to vary
            return
        h, wd, nch = int(model.tex_height[t]), int(model.tex_width[t]), int(model.tex_nchannel[t])
        block = rows[:, adr:adr + h * wd * nch]
        nominal = self._tex_data[adr:adr + h * wd * nch]
        for i in np.flatnonzero(np.any(block != nominal, axis=1)):
            pixels = block[i].astype(np.uint8).reshape(h, wd, nch)
            key = (t, pixels.tobytes())
            if key not in seen:
                seen[key] = len(registry)
                registry.append(_texture(self._wp, pixels))
                self._variants.append(pixels)
            remap[i, t] = seen[key]

    def texture_ids(self) -> NDArray[np.int64]:
        """``(worlds, ntex)``: the renderer texture each world samples for each model
        texture (the model's own id, or an extra texture's id >= ``ntex``)."""
        return self._texture_ids.copy()

    def texture_pixels(self, world: int, texture: int) -> NDArray[np.uint8]:
        """The source pixels world ``world`` samples for model texture ``texture``:
        ``(height, width, nchannel) uint8`` (a copy)."""
        model = self.worlds.model
        tid = int(self._texture_ids[world, texture])
        if tid >= model.ntex:
            return self._variants[tid - model.ntex].copy()
        h, wd, nch = int(model.tex_height[tid]), int(model.tex_width[tid]), int(
            model.tex_nchannel[tid])
        adr = int(model.tex_adr[tid])
        return self._tex_data[adr:adr + h * wd * nch].reshape(h, wd, nch).copy()


def _texture(wp: Any, pixels: NDArray[np.uint8]) -> Any:
    """A warp texture of ``(h, w, nchannel) uint8`` pixels, as MJWarp uploads a model's:
    RGBA float32 in [0, 1] (alpha 1 without a fourth channel), bilinear filtering."""
    h, w, nch = pixels.shape
    rgba = np.zeros((h, w, 4), dtype=np.float32)
    rgba[..., 3] = 1.0
    rgba[..., :min(nch, 4)] = pixels[..., :4].astype(np.float32) * np.float32(1.0 / 255.0)
    return wp.Texture2D(rgba, filter_mode=wp.TextureFilterMode.LINEAR)


def _camera_id(model: mujoco.MjModel, camera: str | int) -> int:
    names = [model.camera(i).name for i in range(model.ncam)]
    if isinstance(camera, str):
        cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    else:
        cid = int(camera) if 0 <= int(camera) < model.ncam else -1
    if cid < 0:
        raise InvalidSpecError(BAD_CAMERA.format(camera=camera, names=names,
                                                 last=model.ncam - 1))
    return int(cid)


__all__ = ["BAD_CAMERA", "SHADOW_FRACTION", "BatchRenderer"]
