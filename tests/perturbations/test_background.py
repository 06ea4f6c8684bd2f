"""The ``background`` axis: dead-leaves images with natural-image statistics, painted behind the
scene over what the texture axis drew, in whatever order the axes are named. (Identity at
severity 0, effect at 1, splits, no compounding: parametrized with every axis in
test_axes.py and, for the suites, tests/envs/test_suites.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from robogen.envs import find_scene, make
from robogen.perturbations import PerturbedEnv
from robogen.perturbations.background import BackgroundLook, dead_leaves
from robogen.perturbations.texture import _skyboxes
from robogen.types import AxisLevel

HUES = (0.1, 0.35, 0.6, 0.85)


def _spectrum_slope(img: np.ndarray) -> float:
    """Slope of the radially averaged power spectrum of the grey image on log-log axes."""
    g = img.mean(axis=-1)
    g = g - g.mean()
    power = np.abs(np.fft.fftshift(np.fft.fft2(g))) ** 2
    n = g.shape[0]
    y, x = np.indices(power.shape)
    r = np.hypot(y - n // 2, x - n // 2).astype(int)
    profile = np.bincount(r.ravel(), power.ravel()) / np.bincount(r.ravel())
    k = np.arange(2, n // 4)
    return float(np.polyfit(np.log(k), np.log(profile[k]), 1)[0])


def test_dead_leaves_images_are_deterministic_and_scale_invariant() -> None:
    a = dead_leaves(128, 128, HUES, 7)
    assert a.shape == (128, 128, 3) and a.dtype == np.float64
    assert 0.0 <= a.min() and a.max() <= 1.0
    assert np.array_equal(a, dead_leaves(128, 128, HUES, 7))
    assert not np.array_equal(a, dead_leaves(128, 128, HUES, 8))
    # many distinct colours with sharp occlusion edges, unlike the texture axis's two-colour
    # patterns
    assert len(np.unique(a.reshape(-1, 3), axis=0)) > 50
    # natural images' power spectra fall as 1/f^alpha with alpha near 2 (van der Schaaf &
    # van Hateren 1996: 1.88 +- 0.43); white noise is flat (alpha 0)
    slopes = [_spectrum_slope(dead_leaves(128, 128, HUES, s)) for s in range(4)]
    assert all(-3.0 < s < -1.5 for s in slopes), slopes
    assert abs(_spectrum_slope(np.random.default_rng(0).random((128, 128, 3)))) < 0.3


def test_large_textures_are_upsampled_and_cube_skyboxes_show_one_image_per_face() -> None:
    big = dead_leaves(512, 512, HUES, 1)
    small = dead_leaves(128, 128, HUES, 1)
    assert np.array_equal(big[::4, ::4], small)  # drawn at 128 px, nearest-upsampled
    strip = dead_leaves(6 * 100, 100, HUES, 1)
    assert strip.shape == (600, 100, 3)
    assert all(np.array_equal(strip[100 * f:100 * (f + 1)], strip[:100]) for f in range(6))


def test_an_untextured_geom_gets_the_images_mean_colour() -> None:
    look = BackgroundLook("background", ("floor",), HUES, 3)
    assert np.allclose(look.rgb1, dead_leaves(64, 64, HUES, 3).reshape(-1, 3).mean(axis=0),
                       atol=1e-6)


def _model_after(env_id: str, axes):
    env = PerturbedEnv(make(env_id, obs_mode="pixels"), [AxisLevel(a, 1.0) for a in axes])
    env.reset(seed=0, options={"perturbation_seed": 4})
    return find_scene(env).model


def _pixels(model, t: int) -> np.ndarray:
    adr = int(model.tex_adr[t])
    return model.tex_data[adr:adr + int(model.tex_height[t] * model.tex_width[t]
                                        * model.tex_nchannel[t])]


@pytest.mark.parametrize("order", [("texture", "background"), ("background", "texture")])
@pytest.mark.parametrize(("env_id", "surface"), [
    ("robogen/Push-v0", "floor"),  # the floor behind the table (no skybox)
    ("gymnasium/HalfCheetah-v5", "skybox"),
])
def test_the_background_is_painted_over_the_texture_looks_in_either_order(
        env_id, surface, order) -> None:
    both, alone = _model_after(env_id, order), _model_after(env_id, ["background"])
    texture = _model_after(env_id, ["texture"])
    if surface == "floor":
        t = int(both.mat_texid[both.geom("floor").matid[0]][1])
    else:
        (t,) = _skyboxes(both)
    # the surface shows the background, not the texture axis's look
    assert np.array_equal(_pixels(both, t), _pixels(alone, t))
    assert not np.array_equal(_pixels(both, t), _pixels(texture, t))
    if env_id == "robogen/Push-v0":  # the table keeps the texture axis's look
        table = int(both.mat_texid[both.geom("table_top").matid[0]][1])
        assert np.array_equal(_pixels(both, table), _pixels(texture, table))
        assert not np.array_equal(_pixels(both, table), _pixels(alone, table))
    reverse = _model_after(env_id, order[::-1])
    assert np.array_equal(both.tex_data, reverse.tex_data)
    assert np.array_equal(both.mat_rgba, reverse.mat_rgba)
