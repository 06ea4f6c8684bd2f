"""The ``object_shape`` axis (issue 24 §1) on the built-in tabletop scene: the nominal-size box
is the nominal object, mass comes from the geometry, every shape stands on the table, and the
scripted PickPlace expert still grasps and places each shape of nominal size."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from robogen.envs import make
from robogen.envs import scene as sc
from robogen.envs.base import find_scene
from robogen.perturbations import PerturbedEnv
from robogen.perturbations.object_shape import (
    SHAPE_SETS,
    ObjectShapePerturbation,
    compose,
)
from robogen.policies import LoadContext, load_policy
from robogen.types import AxisLevel

SHAPES = (*SHAPE_SETS["train"], *SHAPE_SETS["test"])
DENSITY = sc.OBJECT_MASS / (2 * sc.OBJECT_HALF_SIZE) ** 3
"""The nominal box's density [kg/m^3]: every primitive gets it."""


def install(env, shape: str, size_factor: float = 1.0, aspect: float = 1.0):
    """Install the scene with ``shape`` (what the wrapper does for one episode)."""
    scene = find_scene(env)
    p = ObjectShapePerturbation(sc.OBJECT_BODY, shape, size_factor, aspect)
    spec = scene.nominal_spec()
    assert p.edit_spec(spec, scene)
    scene.install_model(spec.compile())
    return scene, p


def object_bottom(scene) -> float:
    """Lowest point of the object's geoms in the world [m]."""
    m, d = scene.model, scene.data
    body = m.body(sc.OBJECT_BODY).id
    low = math.inf
    for g in range(m.body_geomadr[body], m.body_geomadr[body] + m.body_geomnum[body]):
        rot = d.geom_xmat[g].reshape(3, 3)
        half = np.abs(rot) @ m.geom_aabb[g][3:]
        low = min(low, float(d.geom_xpos[g][2] - half[2]))
    return low


def test_a_nominal_size_box_is_the_nominal_object():
    env = make("robogen/PickPlace-v0")
    nominal = find_scene(env).model
    body = nominal.body(sc.OBJECT_BODY).id
    mass, inertia = float(nominal.body_mass[body]), nominal.body_inertia[body].copy()
    scene, _ = install(env, "box")
    m = scene.model
    g = m.geom(sc.OBJECT_GEOM).id
    assert m.body_geomnum[body] == 1 and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX
    assert np.allclose(m.geom_size[g], sc.OBJECT_HALF_SIZE) and np.allclose(m.geom_pos[g], 0)
    assert m.body_mass[body] == pytest.approx(mass, rel=1e-9)
    assert np.allclose(m.body_inertia[body], inertia, rtol=1e-9)
    env.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_mass_is_the_nominal_density_times_the_volume(shape):
    env = make("robogen/PickPlace-v0")
    scene, p = install(env, shape, 1.3, 0.7)
    w = sc.OBJECT_HALF_SIZE * 1.3
    volume = sum(q.volume() for q in compose(shape, w, w * 0.7))
    body = scene.model.body(sc.OBJECT_BODY).id
    assert scene.model.body_mass[body] == pytest.approx(DENSITY * volume, rel=1e-6)
    assert scene.model.geom(sc.OBJECT_GEOM).id >= 0  # the first part keeps the geom's name
    env.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_stands_on_the_table_and_stays_there(shape):
    env = make("robogen/PickPlace-v0")
    scene, _ = install(env, shape, 1.4, 1.6)
    env.reset(seed=3)
    assert object_bottom(scene) == pytest.approx(sc.TABLE_TOP_Z, abs=1e-6)
    z0 = float(scene.data.xpos[scene.model.body(sc.OBJECT_BODY).id][2])
    for _ in range(50):  # the arm holds still above the table
        env.step(np.zeros(env.action_space.shape, np.float32))
    z1 = float(scene.data.xpos[scene.model.body(sc.OBJECT_BODY).id][2])
    if shape != "sphere":  # a tall ellipsoid on its tip topples (its origin moves): physics
        assert abs(z1 - z0) < 0.005, (shape, z0, z1)
    # resting on the table: neither sinking into it nor lifted off it (signed distances)
    m, d = scene.model, scene.data
    body, table = m.body(sc.OBJECT_BODY).id, m.geom(sc.TABLE_GEOM).id
    gap = min(mujoco.mj_geomDistance(m, d, g, table, 0.05, None)
              for g in range(m.body_geomadr[body], m.body_geomadr[body] + m.body_geomnum[body]))
    assert -0.003 < gap < 0.002, (shape, gap)
    env.close()


EXPERT_FAILS: dict[str, int] = {}
"""Shapes of nominal size the PickPlace expert fails on, out of 3 seeds (measured: none)."""


@pytest.mark.parametrize("shape", SHAPES)
def test_the_pick_place_expert_still_places_every_shape_of_nominal_size(shape):
    env = make("robogen/PickPlace-v0")
    scene, _ = install(env, shape)
    ctx = LoadContext(env_id="robogen/PickPlace-v0", observation_space=env.observation_space,
                      action_space=env.action_space)
    expert = load_policy("expert:pick_place", ctx)
    expert.attach([scene])
    wins = 0
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        expert.reset([0])
        while True:
            obs, _, term, trunc, info = env.step(expert.act(obs[None])[0])
            if term or trunc:
                wins += bool(info["success"])
                break
    assert 3 - wins == EXPERT_FAILS.get(shape, 0), (shape, wins)
    env.close()


def test_the_wrapper_records_the_composition_and_restores_the_box():
    env = PerturbedEnv(make("robogen/PickPlace-v0"))
    env.set_levels([AxisLevel("object_shape", 1.0, "test")])
    seen = set()
    for ps in range(12):
        _, info = env.reset(seed=3, options={"perturbation_seed": ps})
        (rec,) = info["robogen"]["perturbations"]
        v, a = rec["values"], rec["applied"]
        assert rec["changed"] and v["shape"] in SHAPE_SETS["test"]
        assert 1 / 1.5 <= v["size_factor"] <= 1.5 and 0.5 <= v["aspect"] <= 2.0
        assert len(a["primitives"]) == len(compose(v["shape"], 0.02, 0.02))
        w = sc.OBJECT_HALF_SIZE * v["size_factor"]
        volume = sum(q.volume() for q in compose(v["shape"], w, w * v["aspect"]))
        assert a["mass_kg"] == pytest.approx(DENSITY * volume, rel=1e-4)
        assert all(x > 0 for x in a["extents_m"])
        seen.add(v["shape"])
    assert seen == set(SHAPE_SETS["test"])
    env.set_levels([])
    env.reset(seed=3)
    m = env.scene.model
    assert m.body_geomnum[m.body(sc.OBJECT_BODY).id] == 1  # the nominal box is back
    env.close()


def test_an_unknown_shape_is_refused():
    with pytest.raises(ValueError, match="object shape must be one of"):
        compose("torus_knot", 0.02, 0.02)
