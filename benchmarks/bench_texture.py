"""What one reset under ``texture@1`` costs on a scene with large textures, before and after
the texture axis paints in blocks of rows, side by side.

The suites' textures are large (dm_control: up to 1450x1450 plus a 512x3072 skybox), and
the axis repaints every texture of its surfaces at every reset. ``before`` is the former
painter (the whole texture as float64 arrays: the pattern's meshgrids, a copy of the
nominal pixels and of the result); ``after`` is robogen's (rows in blocks of
:data:`~robogen.perturbations.texture.ROWS_PER_BLOCK`, in place; the same pixels, checked
bit for bit every episode). Each reset restores the model from nominal, samples the
episode's looks, paints and, where an offscreen GL context can be made, re-uploads the
painted textures (the same cost on both sides).

Scenes: ``mjspec`` (built here with MjSpec: a 1450x1450 table texture, a 1024x1024 floor
texture, a 512x512 object texture and a 512x3072 skybox, as large as dm_control's) and,
where dm_control is installed (``.venv-suites``), ``dm_control/walker-walk`` through
``PerturbedEnv.reset`` (state observations).

Run: ``.venv/bin/python benchmarks/bench_texture.py [--resets 10] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from robogen.envs.base import SceneRoles  # noqa: E402
from robogen.perturbations import texture  # noqa: E402
from robogen.perturbations.wrapper import axis_rng  # noqa: E402

TEXTURES = {"table": (1450, 1450), "floor": (1024, 1024), "box": (512, 512)}
SKYBOX = (512, 3072)


def big_texture_model() -> mujoco.MjModel:
    """A table, floor and box with large textured materials and a large skybox."""
    spec = mujoco.MjSpec()
    for name, (w, h) in TEXTURES.items():
        spec.add_texture(name=f"{name}_tex", type=mujoco.mjtTexture.mjTEXTURE_2D,
                         builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, width=w, height=h,
                         rgb1=[0.2, 0.3, 0.4], rgb2=[0.8, 0.7, 0.6])
        mat = spec.add_material(name=f"{name}_mat")
        mat.textures[int(mujoco.mjtTextureRole.mjTEXROLE_RGB)] = f"{name}_tex"
    spec.add_texture(name="sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
                     builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT, width=SKYBOX[0],
                     height=SKYBOX[1], rgb1=[0.3, 0.5, 0.7], rgb2=[0.0, 0.0, 0.0])
    world = spec.worldbody
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.1],
                   material="floor_mat")
    world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.5, 0.5, 0.02],
                   pos=[0, 0, 0.4], material="table_mat")
    body = world.add_body(name="box_body", pos=[0, 0, 0.5])
    body.add_geom(name="box", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.05, 0.05, 0.05],
                  material="box_mat")
    world.add_light(name="light", pos=[0, 0, 3])
    world.add_camera(name="cam", pos=[0, -2, 1.5], xyaxes=[1, 0, 0, 0, 0.6, 0.8])
    return spec.compile()


# ----------------------------------------------------------------------------- before


def image_before(look: Any, height: int, width: int) -> np.ndarray:
    """The former ``SurfaceLook.image``: full meshgrids."""
    y, x = np.meshgrid(np.linspace(0.0, 1.0, height, endpoint=False),
                       np.linspace(0.0, 1.0, width, endpoint=False), indexing="ij")
    if look.pattern == "flat":
        w = np.zeros_like(x)
    elif look.pattern == "checker":
        w = ((np.floor(x * look.cells) + np.floor(y * look.cells)) % 2).astype(float)
    elif look.pattern == "gradient":
        proj = x * math.cos(look.angle_rad) + y * math.sin(look.angle_rad)
        w = (proj - proj.min()) / max(float(np.ptp(proj)), 1e-12)
    else:
        n = look.cells + 1
        lattice = np.random.default_rng(look.noise_seed).random((n, n))
        gy, gx = y * look.cells, x * look.cells
        i0, j0 = np.floor(gy).astype(int), np.floor(gx).astype(int)
        fy, fx = gy - i0, gx - j0
        w = ((1 - fy) * (1 - fx) * lattice[i0, j0] + (1 - fy) * fx * lattice[i0, j0 + 1]
             + fy * (1 - fx) * lattice[i0 + 1, j0] + fy * fx * lattice[i0 + 1, j0 + 1])
    c1, c2 = np.asarray(look.rgb1), np.asarray(look.rgb2)
    return c1 * (1.0 - w[..., None]) + c2 * w[..., None]


def paint_before(model: Any, base: Any, amount: float, targets: Any) -> bool:
    """The former ``paint_surfaces``: each texture whole, as float64 copies."""
    a = float(amount)
    changed = False
    for look, geoms, mats, texs in targets:
        for g in geoms:
            mat = int(model.geom_matid[g])
            has_tex = mat >= 0 and texture._texture_of(model, mat) >= 0  # noqa: SLF001
            goal = np.ones(3) if has_tex else np.asarray(look.rgb1)
            model.geom_rgba[g, :3] = (1 - a) * base.geom_rgba[g, :3] + a * goal
            changed = True
        for m in mats:
            goal = np.ones(3) if texture._texture_of(model, m) >= 0 else np.asarray(look.rgb1)  # noqa: SLF001
            model.mat_rgba[m, :3] = (1 - a) * base.mat_rgba[m, :3] + a * goal
            changed = True
        for t in texs:
            adr, h, w = int(model.tex_adr[t]), int(model.tex_height[t]), int(model.tex_width[t])
            nch = int(model.tex_nchannel[t])
            n = h * w * nch
            nom = base.tex_data[adr:adr + n].reshape(h, w, nch).astype(float)
            img = nom.copy()
            k = min(nch, 3)
            img[..., :k] = (1 - a) * nom[..., :k] + a * 255.0 * image_before(look, h, w)[..., :k]
            model.tex_data[adr:adr + n] = np.clip(np.rint(img), 0, 255).astype(np.uint8).ravel()
            changed = True
    return changed


PAINTERS: dict[str, Callable[..., bool]] = {"before": paint_before,
                                            "after": texture.paint_surfaces}


# ----------------------------------------------------------------------------- scenes


def mjspec_resets(painter: str, resets: int, upload: Any) -> tuple[float, list[bytes]]:
    """Seconds per reset of the MjSpec scene, and each episode's texture bytes."""
    model = big_texture_model()
    pristine = copy.copy(model)
    scene = SimpleNamespace(roles=SceneRoles(table_geoms=("table",), floor_geoms=("floor",),
                                             object_geoms=("box",)))
    axis = texture.TextureAxis()
    texture.paint_surfaces = PAINTERS[painter]
    out = []
    try:
        start = time.perf_counter()
        for ep in range(resets):
            for f in texture.TexturePerturbation.MODEL_FIELDS:
                getattr(model, f)[:] = getattr(pristine, f)
            p = axis.sample(axis_rng(ep, "texture"), 1.0, "all", scene)
            p.apply_model(model, pristine, scene)
            if upload is not None:
                upload(model, p.textures_touched(model))
            out.append(bytes(model.tex_data))
        return (time.perf_counter() - start) / resets, out
    finally:
        texture.paint_surfaces = PAINTERS["after"]


def gl_uploader(model: mujoco.MjModel) -> Any:
    """``upload(model, texture_ids)`` through an offscreen context, or None without GL."""
    try:
        renderer = mujoco.Renderer(model, 64, 64)
    except Exception as e:  # noqa: BLE001 - no GL here: paint costs only
        print(f"(no offscreen GL context: {type(e).__name__}; timing painting alone)")
        return None
    con = renderer._mjr_context  # noqa: SLF001 - mujoco.Renderer keeps its context private

    def upload(m: mujoco.MjModel, ids: tuple[int, ...]) -> None:
        for t in ids:
            mujoco.mjr_uploadTexture(m, con, int(t))

    upload.renderer = renderer  # type: ignore[attr-defined]  # keep the context alive
    return upload


def dm_control_resets(painter: str, resets: int) -> tuple[float, list[bytes]]:
    """Seconds per ``PerturbedEnv.reset`` of dm_control/walker-walk under texture@1."""
    from robogen.envs import make
    from robogen.perturbations import PerturbedEnv
    from robogen.types import AxisLevel

    env = PerturbedEnv(make("dm_control/walker-walk"), [AxisLevel("texture", 1.0)])
    texture.paint_surfaces = PAINTERS[painter]
    out = []
    try:
        env.reset(seed=0, options={"perturbation_seed": 0})  # first reset: set-up costs
        start = time.perf_counter()
        for ep in range(resets):
            env.reset(seed=ep, options={"perturbation_seed": ep + 1})
            out.append(bytes(env.scene.model.tex_data))
        return (time.perf_counter() - start) / resets, out
    finally:
        texture.paint_surfaces = PAINTERS["after"]
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resets", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    model = big_texture_model()
    sizes = ", ".join(f"{model.tex_width[t]}x{model.tex_height[t]}" for t in range(model.ntex))
    print(f"mjspec scene textures: {sizes} ({model.ntexdata / 1e6:.1f} MB)")
    upload = gl_uploader(model)
    scenes: dict[str, Callable[[str], tuple[float, list[bytes]]]] = {
        "mjspec": lambda side: mjspec_resets(side, args.resets, upload)}
    if importlib.util.find_spec("dm_control") is not None:
        scenes["dm_control/walker-walk"] = lambda side: dm_control_resets(side, args.resets)
    else:
        print("(dm_control not installed: the mjspec scene only; run it in .venv-suites too)")
    for name, run in scenes.items():
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.repeats):  # alternate the sides
            for side in ("before", "after"):
                t, pixels = run(side)
                times[side].append(t)
                if side == "before":
                    reference = pixels
                elif pixels != reference:
                    raise AssertionError(f"{name}: the painters disagree on the pixels")
        b, a = statistics.median(times["before"]), statistics.median(times["after"])
        print(f"{name}: per texture@1 reset before {b * 1e3:.1f} ms, after {a * 1e3:.1f} ms "
              f"(medians of {args.repeats} x {args.resets} resets); ratio before/after "
              f"{b / a:.2f}x; pixels identical")


if __name__ == "__main__":
    main()
