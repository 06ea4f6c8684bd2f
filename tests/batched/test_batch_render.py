"""Batch-rendered pixel observations and the visual axes as per-world fields.

The references are robogen's CPU path: ``PerturbedEnv.reset`` with each world's
``perturbation_seed`` gives the perturbed ``MjModel`` (fields, texture pixels) and the reset
state (distractor placement), and robogen's OpenGL renderer (``SceneFrames``,
``MUJOCO_GL=egl``) draws the reference frame of a state.
"""

from __future__ import annotations

import copy
from typing import Any

import mujoco
import numpy as np
import pytest

from robogen.envs import find_scene, make
from robogen.envs.frames import SceneFrames
from robogen.errors import InvalidSpecError
from robogen.perturbations.base import make_axis
from robogen.perturbations.wrapper import PerturbedEnv
from robogen.types import AxisLevel
from tests.batched.states import HAVE_MJWARP, NO_MJWARP

pytestmark = pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP)

PUSH = "robogen/Push-v0"
SIZE = 84
VISUAL = ("lighting", "camera", "texture", "background", "distractors")
# world 0 and the last are nominal (severity 0, different seeds); world k perturbs VISUAL[k-1]
# (distractors at 0.5: visual-only, the batchable kind)
WORLDS: tuple[tuple[tuple[AxisLevel, ...], int], ...] = (
    ((AxisLevel("lighting", 0.0),), 7),
    *(((AxisLevel(axis, 0.5 if axis == "distractors" else 1.0),), 11 + k)
      for k, axis in enumerate(VISUAL)),
    ((AxisLevel("texture", 0.0), AxisLevel("camera", 0.0)), 30),
)

OPENGL_MAD = 1.5
"""Largest mean absolute difference [0-255 levels per channel] between the batch renderer's
nominal frame and the OpenGL frame of the same state (tabletop 84x84; measured 0.91-1.05 on
Push, Reach and PickPlace: docs/benchmarks.md)."""
PERTURBED_OPENGL_MAD = 8.0
"""The same for the perturbed worlds here vs OpenGL on their CPU models (measured 0.73
camera, 1.05 distractors, 1.77 texture, 3.76 background: bilinear vs mipmapped textures,
5.92 lighting: this draw turns shadows on, ray-traced vs OpenGL's shadow map)."""
OPENGL_TOL = 16
"""A pixel 'agrees' when no channel differs by more than this many levels."""
OPENGL_AGREE = 0.985
"""Smallest fraction of agreeing pixels (measured 0.992-0.997 on the tabletop tasks)."""
GYM_OPENGL_MAD = 32.0
"""The same bound on HalfCheetah (measured 18.4-20.2 from the nominal camera, 26.5 from
the perturbed one here, which sees more floor: its reflective checker plane, which OpenGL
mirrors the scene into and MJWarp's renderer does not)."""


def _cpu_episode(levels: tuple[AxisLevel, ...], pseed: int
                 ) -> tuple[mujoco.MjModel, mujoco.MjData, list[dict[str, Any]]]:
    """The serial backend's episode 0 of this condition: model, reset state, records."""
    env = PerturbedEnv(make(PUSH), levels)
    _, info = env.reset(seed=0, options={"perturbation_seed": pseed})
    scene = find_scene(env)
    return copy.copy(scene.model), copy.copy(scene.data), info["robogen"]["perturbations"]


def _texture(model: mujoco.MjModel, t: int) -> np.ndarray:
    h, w, c = int(model.tex_height[t]), int(model.tex_width[t]), int(model.tex_nchannel[t])
    adr = int(model.tex_adr[t])
    return np.asarray(model.tex_data[adr:adr + h * w * c]).reshape(h, w, c)


@pytest.fixture(scope="module")
def batch() -> dict[str, Any]:
    """One batch of Push worlds: nominal, one per visual axis, nominal; fields installed,
    states copied from the CPU resets, frames rendered."""
    from robogen.batched import (
        BatchedWorlds,
        BatchRenderer,
        sample_perturbations,
        world_fields,
    )

    scene = find_scene(make(PUSH))
    nominal = copy.copy(scene.model)
    per_world = [sample_perturbations(scene, levels, ps) for levels, ps in WORLDS]
    cpu = [_cpu_episode(levels, ps) for levels, ps in WORLDS]
    fields = world_fields(nominal, scene, per_world)
    worlds = BatchedWorlds(nominal, len(WORLDS), data=cpu[0][1])
    renderer = BatchRenderer(worlds, "front", SIZE, SIZE)
    installed = renderer.install(fields)
    worlds.set_states_from([data for _, data, _ in cpu])
    frames = renderer.render()
    return {"nominal": nominal, "per_world": per_world, "cpu": cpu, "fields": fields,
            "worlds": worlds, "renderer": renderer, "installed": installed, "frames": frames}


def test_visual_worlds_get_the_cpu_axis_fields_and_nothing_leaks(batch: dict[str, Any]
                                                                   ) -> None:
    from robogen.batched import get_field

    nominal, cpu, worlds = batch["nominal"], batch["cpu"], batch["worlds"]
    # the same draws as the serial backend's wrapper; severity 0 draws nothing
    for perts, (_, _, records) in zip(batch["per_world"], cpu, strict=True):
        assert [p.to_record() for p in perts] == [
            {k: v for k, v in r.items() if k not in ("changed", "applied")} for r in records]
    assert batch["per_world"][0] == () and batch["per_world"][-1] == ()
    assert {"light_diffuse", "light_dir", "cam_pos", "cam_quat", "cam_fovy", "geom_size",
            "geom_rgba", "geom_rbound", "geom_aabb", "tex_data"} <= set(batch["installed"])
    checked = 0
    paths = {f for axis in VISUAL for f in type(make_axis(axis).sample(
        np.random.default_rng(0), 1.0, "all", find_scene(make(PUSH)))).MODEL_FIELDS}
    for path in sorted(paths):
        if not worlds.has_field(path):
            # shared by all worlds (geom_contype: physical distractors are refused) or not an
            # MJWarp field (stat.*, tex_data: the renderer's): no batched draw changes it
            if path != "tex_data":
                assert all(np.array_equal(get_field(m, path), get_field(nominal, path))
                           for m, _, _ in cpu), path
            continue
        rows = worlds.field(path)
        for i, (model, _, _) in enumerate(cpu):
            want = get_field(model, path).astype(np.float32).astype(np.float64)
            assert np.array_equal(rows[i], want), (path, i)
            checked += 1
        for i in (0, len(cpu) - 1):  # the nominal worlds hold the nominal values exactly
            assert np.array_equal(rows[i], get_field(nominal, path).astype(np.float32)), path
    assert checked >= 15 * len(cpu)
    # each axis's world differs from nominal in its own fields
    for k, path in ((1, "light_diffuse"), (2, "cam_pos"), (5, "geom_size")):
        changed = [i for i in range(len(cpu)) if not np.array_equal(
            worlds.field(path)[i], worlds.field(path)[0])]
        assert changed == [k], path
    # texture pixels: each world samples exactly the CPU model's pixels
    renderer = batch["renderer"]
    ids = renderer.texture_ids()
    for i, (model, _, _) in enumerate(cpu):
        for t in range(nominal.ntex):
            assert np.array_equal(renderer.texture_pixels(i, t), _texture(model, t)), (i, t)
    painted = {i for i in range(len(cpu)) if (ids[i] >= nominal.ntex).any()}
    assert painted == {3, 4}  # texture (table, floor, object) and background (floor)


def test_each_visual_axis_changes_its_frame_and_nominal_frames_are_equal(
        batch: dict[str, Any]) -> None:
    import torch

    frames = batch["frames"]
    assert isinstance(frames, torch.Tensor)
    assert frames.dtype == torch.uint8 and tuple(frames.shape) == (len(WORLDS), SIZE, SIZE, 3)
    assert torch.equal(frames[0], frames[-1])  # unperturbed worlds: the nominal frame exactly
    f = frames.numpy().astype(np.int64)
    for k, axis in enumerate(VISUAL, start=1):
        assert not np.array_equal(f[k], f[0]), axis
        mad = np.abs(f[k] - f[0]).mean()
        assert mad > 0.5, (axis, mad)  # measured 1.13 (distractors) to 67 (lighting)
    # a perturbed world's frame is close to the OpenGL frame of its own CPU model and state
    draw = SceneFrames()
    for k, (model, data, _) in enumerate(batch["cpu"]):
        gl = draw.draw(model, data, draw.camera_id(model, "front"), SIZE, SIZE)
        assert np.abs(gl.astype(np.int64) - f[k]).mean() < PERTURBED_OPENGL_MAD, k
    draw.close()


def test_nominal_frames_match_the_opengl_renderer(batch: dict[str, Any]) -> None:
    """The batch renderer's nominal frame vs robogen's OpenGL frame of the same state."""
    from robogen.batched import BatchedWorlds, BatchRenderer

    env = make(PUSH)
    scene = find_scene(env)
    model = scene.model
    datas = []
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(5 * seed):
            env.step(env.action_space.sample())
        datas.append(copy.copy(scene.data))
    worlds = BatchedWorlds(model, len(datas), data=datas[0])
    worlds.set_states_from(datas)
    frames = BatchRenderer(worlds, "front", SIZE, SIZE).render_numpy()
    draw = SceneFrames()
    for i, data in enumerate(datas):
        gl = draw.draw(model, data, draw.camera_id(model, "front"), SIZE, SIZE)
        diff = np.abs(gl.astype(np.int64) - frames[i])
        assert diff.mean() <= OPENGL_MAD, (i, diff.mean())
        assert (diff.max(axis=-1) <= OPENGL_TOL).mean() >= OPENGL_AGREE, i
    draw.close()


def test_textures_reset_and_bad_input(batch: dict[str, Any]) -> None:
    from robogen.batched import BatchRenderer

    renderer, worlds = batch["renderer"], batch["worlds"]
    renderer.set_textures(None)  # every world back to the model's textures
    assert (renderer.texture_ids() == np.arange(worlds.model.ntex)).all()
    frames = renderer.render_numpy()
    assert np.array_equal(frames[3], renderer.render_numpy()[3])
    assert not np.array_equal(frames[3], batch["frames"][3].numpy())  # the look is gone
    renderer.install(batch["fields"])  # and back
    assert np.array_equal(renderer.render_numpy(), batch["frames"].numpy())
    with pytest.raises(InvalidSpecError, match="tex_data must have shape"):
        renderer.set_textures(np.zeros((1, 3), dtype=np.uint8))
    with pytest.raises(InvalidSpecError, match="camera 'nope' is not in the model"):
        BatchRenderer(worlds, "nope")
    with pytest.raises(InvalidSpecError, match="width must be an int >= 1"):
        BatchRenderer(worlds, "front", 0, SIZE)


def test_tracking_camera_of_a_gymnasium_env_moves_per_world() -> None:
    """HalfCheetah's ``track`` camera (``trackcom``): the camera axis's pose and the derived
    ``cam_pos0``/``cam_poscom0``/``cam_mat0`` per world, as the CPU wrapper writes them, and
    the frame follows the robot from the new viewpoint."""
    from robogen.batched import (
        BatchedWorlds,
        BatchRenderer,
        get_field,
        sample_perturbations,
        world_fields,
    )

    env_id = "gymnasium/HalfCheetah-v5"
    scene = find_scene(make(env_id))
    nominal = copy.copy(scene.model)
    levels = ((AxisLevel("camera", 0.0),), (AxisLevel("camera", 1.0),))
    per_world = [sample_perturbations(scene, lv, 5) for lv in levels]
    cpu = []
    for lv in levels:
        env = PerturbedEnv(make(env_id), lv)
        env.reset(seed=0, options={"perturbation_seed": 5})
        cpu.append((copy.copy(find_scene(env).model), copy.copy(find_scene(env).data)))
    fields = world_fields(nominal, scene, per_world)
    assert {"cam_pos", "cam_quat", "cam_fovy", "cam_pos0", "cam_poscom0", "cam_mat0"} <= set(
        fields)
    worlds = BatchedWorlds(nominal, 2, data=cpu[0][1])
    renderer = BatchRenderer(worlds, "track", SIZE, SIZE)
    renderer.install(fields)
    worlds.set_states_from([d for _, d in cpu])
    for path in ("cam_pos", "cam_quat", "cam_fovy", "cam_pos0", "cam_poscom0", "cam_mat0"):
        rows = worlds.field(path)
        for i, (model, _) in enumerate(cpu):
            assert np.array_equal(rows[i], get_field(model, path).astype(np.float32)), path
    frames = renderer.render_numpy().astype(np.int64)
    assert np.abs(frames[1] - frames[0]).mean() > 5.0
    draw = SceneFrames()
    for i, (model, data) in enumerate(cpu):  # the reflective floor: see docs/benchmarks.md
        gl = draw.draw(model, data, draw.camera_id(model, "track"), SIZE, SIZE)
        assert np.abs(gl.astype(np.int64) - frames[i]).mean() < GYM_OPENGL_MAD, i
    draw.close()


def test_skybox_and_floor_textures_per_world_in_a_gymnasium_env() -> None:
    """HalfCheetah's background draw repaints its skybox and floor textures: world 1 samples
    the CPU model's new pixels (the skybox through the per-world skybox id), world 0 the
    model's own, and only world 1's frame changes."""
    from robogen.batched import BatchedWorlds, BatchRenderer, sample_perturbations, world_fields

    env_id = "gymnasium/HalfCheetah-v5"
    scene = find_scene(make(env_id))
    nominal = copy.copy(scene.model)
    levels = (AxisLevel("background", 1.0),)
    env = PerturbedEnv(make(env_id), levels)
    env.reset(seed=0, options={"perturbation_seed": 5})
    model, data = copy.copy(find_scene(env).model), copy.copy(find_scene(env).data)
    fields = world_fields(nominal, scene, [(), sample_perturbations(scene, levels, 5)])
    worlds = BatchedWorlds(nominal, 2, data=data)
    renderer = BatchRenderer(worlds, "track", SIZE, SIZE)
    worlds.set_states_from([data, data])
    before = renderer.render_numpy()
    renderer.install(fields)
    worlds.set_states_from([data, data])
    after = renderer.render_numpy()
    skybox = int(np.flatnonzero(nominal.tex_type == int(mujoco.mjtTexture.mjTEXTURE_SKYBOX))[0])
    ids = renderer.texture_ids()
    assert (ids[0] == np.arange(nominal.ntex)).all() and ids[1, skybox] >= nominal.ntex
    for t in range(nominal.ntex):
        assert np.array_equal(renderer.texture_pixels(0, t), _texture(nominal, t)), t
        assert np.array_equal(renderer.texture_pixels(1, t), _texture(model, t)), t
    assert np.array_equal(after[0], before[0])
    top = slice(0, SIZE // 3)  # the sky: the skybox variant is drawn
    assert np.abs(after[1, top].astype(np.int64) - before[1, top]).mean() > 10.0


def test_textures_compare_with_the_model_pixels_at_construction(batch: dict[str, Any]) -> None:
    """The worlds' model may be a host env's, which each host reset edits: rows equal to
    the pixels the renderer was built with keep the model's textures even after the model's
    ``tex_data`` changed (the batched backend's host env paints its textures per episode)."""
    renderer, worlds = batch["renderer"], batch["worlds"]
    model = worlds.model
    built = np.array(model.tex_data)
    try:
        model.tex_data[:] = 255 - built  # a host reset painted other pixels
        renderer.set_textures(np.tile(built, (worlds.worlds, 1)))
        assert (renderer.texture_ids() == np.arange(model.ntex)).all()
        painted = np.tile(built, (worlds.worlds, 1))
        painted[1] = 255 - built
        renderer.set_textures(painted)
        ids = renderer.texture_ids()
        assert (ids[1] >= model.ntex).all() and (np.delete(ids, 1, 0) < model.ntex).all()
    finally:
        model.tex_data[:] = built
        renderer.install(batch["fields"])
    assert np.array_equal(renderer.render_numpy(), batch["frames"].numpy())
