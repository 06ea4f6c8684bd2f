"""Built-in tabletop tasks: Gymnasium contract, determinism, naming, pixels, MujocoScene hooks."""

from __future__ import annotations

import pickle

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from robogen.envs import EnvOptions, tabletop
from robogen.envs import scene as sc
from robogen.envs.base import MujocoScene, find_scene
from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.types import RenderSettings

TASK_IDS = tabletop.TASK_IDS
MAX_STEPS = {"robogen/Reach-v0": 100, "robogen/Push-v0": 150, "robogen/PickPlace-v0": 200}


def _rollout(env: gym.Env, seed: int, n: int = 15) -> list:
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = [(obs, info)]
    for _ in range(n):
        out.append(env.step(env.action_space.sample()))
    return out


def _same(a, b) -> bool:
    return gym.utils.env_checker.data_equivalence(a, b, exact=True)


def test_task_ids_registered():
    assert TASK_IDS == ("robogen/Reach-v0", "robogen/Push-v0", "robogen/PickPlace-v0")
    for env_id in TASK_IDS:
        assert gym.spec(env_id).max_episode_steps == MAX_STEPS[env_id]
    tabletop.register_tasks()  # a second registration is a no-op, not an error


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_check_env(env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)


def test_check_env_state_pixels():
    env = gym.make("robogen/PickPlace-v0", obs_mode="state+pixels", width=32, height=32)
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_same_seed_same_rollout(env_id):
    a, b = _rollout(gym.make(env_id), seed=7), _rollout(gym.make(env_id), seed=7)
    assert _same(a, b)
    assert all("success" in step[-1] and isinstance(step[-1]["success"], bool) for step in a)


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_pickle_round_trip(env_id):
    env = gym.make(env_id)
    env.reset(seed=3)
    for _ in range(5):
        env.step(env.action_space.sample())
    clone = pickle.loads(pickle.dumps(env))
    actions = np.random.default_rng(0).uniform(-1, 1, (10, 6)).astype(np.float32)
    for a in actions:
        assert _same(env.step(a), clone.step(a))
    assert _same(env.reset(), clone.reset())  # the env's RNG travels too


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_every_element_named(env_id):
    model = gym.make(env_id).unwrapped.model
    kinds = {
        "body": model.nbody, "geom": model.ngeom, "joint": model.njnt, "actuator": model.nu,
        "light": model.nlight, "camera": model.ncam, "material": model.nmat,
        "texture": model.ntex, "site": model.nsite,
    }
    for kind, count in kinds.items():
        names = [getattr(model, kind)(i).name for i in range(count)]
        assert count > 0 and all(names), f"unnamed {kind}: {names}"
        assert len(set(names)) == count, f"duplicate {kind} names: {names}"


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_observations_vary_over_random_steps(env_id):
    steps = _rollout(gym.make(env_id), seed=1, n=20)
    obs = np.stack([steps[0][0]] + [s[0] for s in steps[1:]])
    assert obs.shape == (21, tabletop.STATE_DIM) and obs.dtype == np.float32
    assert (obs.std(axis=0) > 1e-6).sum() >= 10  # joints, velocities, end-effector move


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_consecutive_resets_differ(env_id):
    env = gym.make(env_id)
    first, _ = env.reset(seed=0)
    second, _ = env.reset()
    assert not np.allclose(first, second)
    obj, target = slice(14, 17), slice(21, 24)
    assert np.linalg.norm(first[obj] - second[obj]) > 1e-3
    assert np.linalg.norm(first[target] - second[target]) > 1e-3


def test_state_layout_matches_sim():
    env = gym.make("robogen/PickPlace-v0")
    obs, _ = env.reset(seed=5)
    data = env.unwrapped.data
    assert sum(n for _, n, _ in tabletop.STATE_LAYOUT) == 30 == obs.shape[0]
    np.testing.assert_allclose(obs[11:14], data.site(sc.GRIP_SITE).xpos, atol=1e-6)
    np.testing.assert_allclose(obs[14:17], data.body(sc.OBJECT_BODY).xpos, atol=1e-6)
    np.testing.assert_allclose(obs[21:24], data.body(sc.TARGET_BODY).xpos, atol=1e-6)
    assert obs[16] == pytest.approx(sc.TABLE_TOP_Z + sc.OBJECT_HALF_SIZE, abs=1e-6)
    assert obs[10] == pytest.approx(2 * sc.FINGER_RANGE[1])  # gripper open at reset


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_pixel_observation(env_id):
    env = gym.make(env_id, obs_mode="pixels")
    obs, _ = env.reset(seed=2)
    assert obs.shape == (84, 84, 3) and obs.dtype == np.uint8
    assert obs.std() > 10  # an image, not a blank frame
    assert obs in env.observation_space
    moved, *_ = env.step(np.ones(6, np.float32))
    assert np.abs(moved.astype(int) - obs).sum() > 0


def test_state_pixels_dict_and_custom_size():
    env = gym.make("robogen/Reach-v0", obs_mode="state+pixels", width=64, height=48, camera="top")
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"state", "pixels"}
    assert obs["pixels"].shape == (48, 64, 3) and obs["state"].shape == (30,)
    assert find_scene(env).roles.cameras[0] == "top"


def test_render_rgb_array():
    env = gym.make("robogen/Reach-v0", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (84, 84, 3) and frame.dtype == np.uint8


@pytest.mark.parametrize("env_id", TASK_IDS, ids=TASK_IDS)
def test_install_nominal_model_keeps_working(env_id):
    env = gym.make(env_id, obs_mode="state+pixels")
    scene = find_scene(env)
    before, _ = env.reset(seed=4)
    old_model = scene.model
    scene.install_model(scene.nominal_spec().compile())
    assert scene.model is not old_model
    after, _ = env.reset(seed=4)
    assert _same(before, after)
    obs, _, _, _, info = env.step(env.action_space.sample())
    assert np.isfinite(obs["state"]).all() and "success" in info


def test_scene_protocol_and_roles():
    env = gym.make("robogen/PickPlace-v0")
    scene = find_scene(env)
    assert isinstance(scene, MujocoScene)
    roles, model = scene.roles, scene.model
    bodies = roles.object_bodies + roles.robot_bodies + roles.distractor_slots + roles.keep_clear
    for body in bodies:
        assert model.body(body).name == body
    geoms = roles.floor_geoms + roles.table_geoms + roles.object_geoms
    mats = [int(model.geom(g).matid[0]) for g in geoms]
    tex = [int(model.mat_texid[m, int(mujoco.mjtTextureRole.mjTEXROLE_RGB)]) for m in mats]
    assert min(mats) >= 0 and min(tex) >= 0
    assert len(set(mats)) == len(set(tex)) == 3  # each its own material and texture
    assert all(model.tex_width[t] == model.tex_height[t] == 64 for t in tex)
    assert roles.robot_bodies[0] == "arm_base" and roles.cameras[0] == "front"
    assert set(roles.lights) == {"key_light", "fill_light"}
    assert not model.light_castshadow.any()
    assert model.vis.quality.shadowsize == 256 and model.vis.quality.offsamples == 0  # 84x84
    assert len(roles.distractor_slots) == sc.NUM_DISTRACTOR_SLOTS == 6
    for slot in roles.distractor_slots:
        assert model.body(slot).mocapid[0] >= 0
        for shape in ("box", "sphere", "cylinder"):
            g = model.geom(f"{slot}_{shape}")
            assert g.rgba[3] == 0 and g.contype[0] == 0 and g.conaffinity[0] == 0
    for dof in roles.pose_dofs:
        assert dof.max_offset > 0 and dof.low < dof.high
    assert [a for a in roles.robot_actuators] == [model.actuator(i).name for i in range(model.nu)]
    bias = model.actuator_biasprm[:, 1]
    np.testing.assert_allclose(bias, -model.actuator_gainprm[:, 0])  # position servos


def test_textures_changed_reaches_renderer():
    env = gym.make("robogen/Push-v0", obs_mode="pixels")
    scene = find_scene(env)
    nominal, _ = env.reset(seed=0)
    model = scene.model
    tex = int(model.mat_texid[int(model.geom("table_top").matid[0]), 1])
    adr, size = model.tex_adr[tex], model.tex_width[tex] * model.tex_height[tex] * 3
    saved = model.tex_data[adr:adr + size].copy()
    model.tex_data[adr:adr + size] = 20
    assert _same(scene.observe(), nominal)  # not uploaded yet: the renderer still has the old one
    scene.textures_changed((int(tex),))
    assert np.abs(scene.observe().astype(int) - nominal).mean() > 5
    model.tex_data[adr:adr + size] = saved
    scene.textures_changed((int(tex),))
    assert _same(scene.observe(), nominal)


def test_embodiment_change_reaches_the_arm():
    """Longer links (spec recompile) and weaker servos change what the same actions do."""
    env = gym.make("robogen/Reach-v0")
    scene = find_scene(env)
    nominal = _rollout(env, seed=0, n=10)
    spec = scene.nominal_spec()
    forearm = spec.body("forearm")
    forearm.pos = list(np.asarray(forearm.pos) * 1.15)
    model = spec.compile()
    model.actuator_gainprm[:, 0] *= 0.7
    model.actuator_biasprm[:, 1:3] *= 0.7
    scene.install_model(model)
    perturbed = _rollout(env, seed=0, n=10)
    ee = slice(11, 14)
    assert np.linalg.norm(nominal[0][0][ee] - perturbed[0][0][ee]) > 0.01
    assert np.linalg.norm(nominal[-1][0][:5] - perturbed[-1][0][:5]) > 1e-3


def test_success_terminates_and_is_reported():
    env = gym.make("robogen/Reach-v0")
    scene = find_scene(env)
    env.reset(seed=0)
    scene.data.mocap_pos[0] = scene.data.site(sc.GRIP_SITE).xpos  # put the target on the gripper
    _, reward, terminated, truncated, info = env.step(np.zeros(6, np.float32))
    assert info["success"] and terminated and not truncated
    assert reward > 0.9  # -distance + success bonus 1


def test_make_via_robogen_envs():
    from robogen.envs import make

    env = make("robogen/Push-v0", obs_mode="pixels", max_steps=7,
               render=RenderSettings(width=40, height=30, camera="side", shadowsize=512))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (30, 40, 3)
    scene = find_scene(env)
    assert scene.model.vis.quality.shadowsize == 512 == scene.render_settings.shadowsize
    default = find_scene(make("robogen/Push-v0", obs_mode="pixels", render=RenderSettings()))
    assert default.render_settings.shadowsize == 256  # 0 means "the scene's own": 84x84 -> 256
    for _ in range(7):
        *_, terminated, truncated, _ = env.step(np.zeros(6, np.float32))
    assert truncated or terminated
    with pytest.raises(InvalidSpecError, match="own success predicate"):
        tabletop.make_task("robogen/Push-v0", EnvOptions(success_threshold=10.0))
    with pytest.raises(UnknownNameError, match="Reach"):
        tabletop.make_task("robogen/Reech-v0")


def test_bad_constructor_arguments():
    with pytest.raises(InvalidSpecError, match="obs_mode"):
        tabletop.ReachEnv(obs_mode="rgb")
    with pytest.raises(UnknownNameError, match="front"):
        tabletop.ReachEnv(camera="frnt")
    with pytest.raises(InvalidSpecError, match="width"):
        tabletop.ReachEnv(width=0)


def test_scene_builder_is_fresh_and_deterministic():
    a, b = sc.build_spec(), sc.build_spec()
    assert a is not b
    ma, mb = a.compile(), b.compile()
    assert ma.nbody == mb.nbody and np.array_equal(ma.tex_data, mb.tex_data)
    assert sc.TIMESTEP == ma.opt.timestep == 0.002
    assert int(ma.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST)
    assert int(ma.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC)


def test_the_shadow_map_is_sized_to_the_image():
    assert [sc.shadow_size_for(w, h) for w, h in ((84, 84), (32, 48), (128, 128), (129, 64),
                                                  (256, 200), (640, 480))] == [
        256, 256, 256, 512, 512, 1024]


def test_the_shadow_map_size_changes_only_shadowed_frames():
    """Nominal lights cast no shadow: the nominal frame is the same with any map size, so a
    policy trained on the 1024 map sees the same nominal images; a shadow-casting light
    (the lighting axis) shows in both."""
    from robogen.envs import make

    frames = {}
    for size in (256, 1024):
        scene = find_scene(make("robogen/Push-v0", obs_mode="pixels",
                                render=RenderSettings(shadowsize=size)))
        scene.reset(seed=4)
        nominal = scene.render_frame(None, 84, 84)
        scene.model.light_castshadow[:] = 1
        frames[size] = (nominal, scene.render_frame(None, 84, 84))
    assert np.array_equal(frames[256][0], frames[1024][0])
    for size in (256, 1024):
        assert not np.array_equal(frames[size][0], frames[size][1])  # shadows drawn


@pytest.mark.parametrize("axis", ["none", "texture", "camera", "distractors", "embodiment"])
def test_the_floor_grid_changes_no_frame_without_shadows(axis):
    """The floor's render grid (``FLOOR_GRID`` 0.5 m) draws the same frames as the former
    0.05 m grid, which the shipped pixel policies were trained on: only shadows differ."""
    import mujoco

    from robogen.envs import make
    from robogen.perturbations.wrapper import PerturbedEnv
    from robogen.types import AxisLevel

    env = PerturbedEnv(make("robogen/Push-v0", obs_mode="pixels"))
    env.set_levels(() if axis == "none" else (AxisLevel(axis, 1.0),))
    env.reset(seed=7, options={"perturbation_seed": 11})
    for _ in range(5):
        env.step(env.action_space.sample())
    scene = find_scene(env)
    floor = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_GEOM, sc.FLOOR_GEOM)
    assert scene.model.geom_size[floor, 2] == sc.FLOOR_GRID == 0.5
    def frames() -> tuple[np.ndarray, np.ndarray]:
        now = scene.render_frame(None, 84, 84)
        scene.model.geom_size[floor, 2] = 0.05
        scene.close()  # the plane's grid is built with the renderer's context
        before = scene.render_frame(None, 84, 84)
        scene.model.geom_size[floor, 2] = sc.FLOOR_GRID
        scene.close()
        return now, before

    now, before = frames()
    assert np.array_equal(now, before)
    scene.model.light_castshadow[:] = 1  # shadows on the floor do depend on its grid
    now, before = frames()
    env.close()
    assert not np.array_equal(now, before)
