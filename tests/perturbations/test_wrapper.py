"""PerturbedEnv: records, seeding streams, condition switches, structure swaps, instability."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest

from robogen.envs import make
from robogen.errors import InvalidPerturbationError, RobogenError, UnknownNameError
from robogen.perturbations import AXES, PerturbedEnv, SimulationUnstableError
from robogen.perturbations.wrapper import BAD_PERTURBATION_SEED, axis_rng
from robogen.types import AxisLevel, RenderSettings

ALL_AT_ONE = [AxisLevel(a, 1.0) for a in AXES.names()]


@pytest.fixture(scope="module")
def pick_place():
    env = PerturbedEnv(make("robogen/PickPlace-v0"))
    yield env
    env.close()


@pytest.fixture(scope="module")
def hopper():
    env = PerturbedEnv(make("gymnasium/Hopper-v5"))
    yield env
    env.close()


def test_info_records_every_perturbation_as_json(pick_place):
    pick_place.set_levels(ALL_AT_ONE)
    _, info = pick_place.reset(seed=1, options={"perturbation_seed": 2})
    records = info["robogen"]["perturbations"]
    assert [r["axis"] for r in records] == list(AXES.names())
    assert all(set(r) - {"applied"} == {"axis", "type", "values", "changed"} for r in records)
    # what took effect is recorded where it can differ from what was sampled
    assert [r["axis"] for r in records if "applied" in r] == [
        "distractors", "object_pose", "object_shape"]
    assert json.loads(json.dumps(records)) == records  # JSON-serializable as is
    assert info["robogen"]["changed_axes"] == list(AXES.names())
    assert [type(p).__name__ for p in pick_place.perturbations] == [r["type"] for r in records]


def test_an_axis_draws_the_same_values_alone_and_combined(pick_place):
    pick_place.set_levels(ALL_AT_ONE)
    _, combined = pick_place.reset(seed=1, options={"perturbation_seed": 9})
    for record in combined["robogen"]["perturbations"]:
        pick_place.set_levels([AxisLevel(record["axis"], 1.0)])
        _, single = pick_place.reset(seed=1, options={"perturbation_seed": 9})
        assert single["robogen"]["perturbations"][0]["values"] == record["values"]
    # the stream is SeedSequence([perturbation_seed, crc32(axis)])
    sample = AXES.get("physics")().sample(axis_rng(9, "physics"), 1.0, "all", pick_place.scene)
    assert sample.to_record()["values"] == combined["robogen"]["perturbations"][
        AXES.names().index("physics")]["values"]


def test_different_perturbation_seeds_draw_different_values(pick_place):
    pick_place.set_levels([AxisLevel("physics", 1.0)])
    values = [pick_place.reset(seed=1, options={"perturbation_seed": s})[1]["robogen"]
              ["perturbations"][0]["values"]["friction_scale"] for s in range(5)]
    assert len(set(values)) == 5


def test_without_perturbation_seed_values_follow_the_reset_seed_and_states_stay_paired():
    wrapped = PerturbedEnv(make("robogen/PickPlace-v0"), [AxisLevel("lighting", 1.0)])
    nominal = make("robogen/PickPlace-v0")
    try:
        obs1, info1 = wrapped.reset(seed=11)
        obs2, info2 = wrapped.reset(seed=11)
        assert info1["robogen"]["perturbations"] == info2["robogen"]["perturbations"]
        obs_nominal, _ = nominal.reset(seed=11)
        # drawing the perturbation seed does not consume the env's stream: same initial state
        assert np.array_equal(obs1, obs_nominal) and np.array_equal(obs2, obs_nominal)
        _, info3 = wrapped.reset()  # unseeded: continues the wrapper's own stream
        assert info3["robogen"]["perturbations"] != info1["robogen"]["perturbations"]
    finally:
        wrapped.close()
        nominal.close()


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_perturbation_seed_is_rejected(pick_place, bad):
    pick_place.set_levels([AxisLevel("lighting", 1.0)])
    with pytest.raises(InvalidPerturbationError) as err:
        pick_place.reset(seed=0, options={"perturbation_seed": bad})
    assert str(err.value) == BAD_PERTURBATION_SEED.format(value=bad)


def test_bad_levels_are_rejected_before_any_episode(pick_place):
    with pytest.raises(UnknownNameError, match="did you mean 'lighting'"):
        pick_place.set_levels([AxisLevel("lightning", 1.0)])
    with pytest.raises(InvalidPerturbationError, match="appears more than once"):
        pick_place.set_levels([AxisLevel("camera", 0.5), AxisLevel("camera", 1.0)])
    with pytest.raises(InvalidPerturbationError, match="split must be one of"):
        pick_place.set_levels([AxisLevel("camera", 0.5, "foo")])
    with pytest.raises(InvalidPerturbationError, match=r"severity must be in \[0, 1\], got 1.5"):
        pick_place.set_levels([{"axis": "camera", "severity": 1.5}])


def test_structural_edits_install_and_nominal_reinstalls_the_original_model(hopper):
    hopper.set_levels([])
    hopper.reset(seed=0)
    base = hopper.scene.model
    hopper.set_levels([AxisLevel("embodiment", 1.0)])
    hopper.reset(seed=0, options={"perturbation_seed": 1})
    edited = hopper.scene.model
    assert edited is not base
    hopper.reset(seed=0, options={"perturbation_seed": 1})  # same structure: no recompile
    assert hopper.scene.model is edited
    hopper.reset(seed=0, options={"perturbation_seed": 2})  # new lengths: recompiled
    assert hopper.scene.model is not edited
    hopper.set_levels([AxisLevel("lighting", 1.0)])  # no structural edit: the original model
    hopper.reset(seed=0, options={"perturbation_seed": 1})
    assert hopper.scene.model is base


def test_combined_condition_steps_and_returns_exactly_to_nominal(hopper):
    hopper.set_levels([])
    hopper.reset(seed=4)
    nominal = {k: np.array(getattr(hopper.scene.model, k)) for k in
               ("geom_rgba", "body_mass", "cam_pos", "light_diffuse", "tex_data", "geom_friction")}
    image = hopper.scene.render_frame(width=32, height=32)
    hopper.set_levels(ALL_AT_ONE)
    obs, info = hopper.reset(seed=4, options={"perturbation_seed": 4})
    assert obs.shape == hopper.observation_space.shape
    for _ in range(20):
        obs, reward, terminated, truncated, _ = hopper.step(hopper.action_space.sample())
        assert np.all(np.isfinite(obs))
        if terminated or truncated:
            break
    hopper.set_levels([AxisLevel(a, 0.0) for a in AXES.names()])
    _, info = hopper.reset(seed=4, options={"perturbation_seed": 4})
    assert info["robogen"]["perturbations"] == []
    for k, v in nominal.items():
        assert np.array_equal(getattr(hopper.scene.model, k), v), k
    assert np.array_equal(hopper.scene.render_frame(width=32, height=32), image)


def test_divergence_raises_simulation_unstable(pick_place):
    pick_place.set_levels([])
    pick_place.reset(seed=0)
    pick_place.step(np.zeros(6, np.float32))  # fine at nominal
    pick_place.scene.data.qvel[:] = 1e30  # blow the state up: MuJoCo warns and resets MjData
    with pytest.raises(SimulationUnstableError, match="unstable at step 2") as err:
        pick_place.step(np.zeros(6, np.float32))
    assert isinstance(err.value, RobogenError) and isinstance(err.value, RuntimeError)
    pick_place.reset(seed=0)  # a reset recovers
    pick_place.step(np.zeros(6, np.float32))
    assert np.all(np.isfinite(pick_place.scene.data.qpos))


def test_constructor_arguments_are_recorded_for_the_spec():
    wrapped = PerturbedEnv(make("robogen/Reach-v0"), [AxisLevel("camera", 0.5, "test")])
    try:
        assert wrapped.spec is not None
        kwargs = wrapped.spec.additional_wrappers[-1].kwargs
        assert kwargs == {"levels": [{"axis": "camera", "severity": 0.5, "split": "test"}]}
        assert wrapped.levels == (AxisLevel("camera", 0.5, "test"),)
    finally:
        wrapped.close()


def test_instability_checks_every_bad_state_warning():
    from robogen.perturbations.wrapper import BAD_STATE_WARNINGS

    assert {w.name for w in BAD_STATE_WARNINGS} == {"mjWARN_BADQPOS", "mjWARN_BADQVEL",
                                                    "mjWARN_BADQACC"}
    assert all(isinstance(w, mujoco.mjtWarning) for w in BAD_STATE_WARNINGS)


@pytest.mark.parametrize("env_id", ["robogen/PickPlace-v0", "gymnasium/Reacher-v5"])
def test_pixel_observation_at_reset_shows_the_perturbations(env_id):
    settings = RenderSettings(width=32, height=32)
    wrapped = PerturbedEnv(make(env_id, obs_mode="pixels", render=settings))
    nominal = make(env_id, obs_mode="pixels", render=settings)
    try:
        obs0, _ = nominal.reset(seed=5)
        wrapped.set_levels([AxisLevel("texture", 1.0), AxisLevel("distractors", 0.5),
                            AxisLevel("object_pose", 1.0)])
        obs, _ = wrapped.reset(seed=5, options={"perturbation_seed": 5})
        assert obs.shape == obs0.shape == (32, 32, 3) and obs.dtype == np.uint8
        assert np.mean(np.abs(obs.astype(float) - obs0)) > 10.0
        # the observation is the final scene: state edits (distractors, object) included
        camera = wrapped.scene.roles.cameras[0]
        assert np.array_equal(obs, wrapped.scene.render_frame(camera, 32, 32))
    finally:
        wrapped.close()
        nominal.close()
