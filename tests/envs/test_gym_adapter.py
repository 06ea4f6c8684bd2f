"""The Gymnasium MuJoCo v5 adapter: spaces, seeding, model swaps, rendering, success, roles."""

from __future__ import annotations

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from robogen.envs import EnvOptions, make
from robogen.envs.base import MujocoScene, find_scene
from robogen.envs.gym_adapter import (
    SUPPORTED,
    GymMujocoAdapter,
    family_ids,
    make_adapted,
    success_rule,
)
from robogen.envs.gym_catalog import (
    GYM_ENVS,
    AddedCamera,
    GymEnvRecord,
    SuccessRule,
    gym_env_record,
    register_gym_env,
)
from robogen.errors import InvalidSpecError, SceneError, UnknownNameError
from robogen.types import RenderSettings

pytestmark = pytest.mark.filterwarnings("ignore:.*settotalmass.*")


def _actions(env: gym.Env, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    return rng.uniform(low, high, size=(n, *low.shape)).astype(np.float32)


@pytest.fixture(params=family_ids(), ids=family_ids())
def gym_id(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.mark.parametrize("obs_mode", ["state", "pixels", "state+pixels"])
def test_obs_modes(gym_id: str, obs_mode: str) -> None:
    env = make("gymnasium/" + gym_id, obs_mode=obs_mode)
    try:
        assert isinstance(find_scene(env), MujocoScene)
        obs, info = env.reset(seed=0)
        assert info["success"] is False and info["episode_return"] == 0.0
        obs, _, _, _, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        stock_dim = gym.make(gym_id).observation_space.shape
        if obs_mode == "state":
            assert obs.dtype == np.float32 and obs.shape == stock_dim
        if obs_mode == "pixels":
            assert obs.shape == (84, 84, 3) and obs.dtype == np.uint8
        if obs_mode == "state+pixels":
            assert obs["state"].shape == stock_dim and obs["pixels"].shape == (84, 84, 3)
        assert isinstance(info["success"], bool) and "episode_return" in info
    finally:
        env.close()


def test_seeds_reproduce_and_match_stock_env(gym_id: str) -> None:
    """Same seed -> identical episodes; the named nominal model steps exactly like Gymnasium's."""
    a, b, stock = make_adapted(gym_id), make_adapted(gym_id), gym.make(gym_id)
    oa, _ = a.reset(seed=3)
    ob, _ = b.reset(seed=3)
    os_, _ = stock.reset(seed=3)
    np.testing.assert_array_equal(oa, ob)
    np.testing.assert_array_equal(oa, os_.astype(np.float32))
    for act in _actions(a, 15):
        ra, rb, rs = a.step(act), b.step(act), stock.step(act)
        np.testing.assert_array_equal(ra[0], rb[0])
        np.testing.assert_array_equal(ra[0], rs[0].astype(np.float32))
        assert ra[1] == rb[1] == rs[1] and ra[2:4] == rb[2:4]
        assert ra[4]["episode_return"] == rb[4]["episode_return"]
    o4, _ = a.reset(seed=4)
    assert not np.array_equal(o4, oa)  # another seed, another start
    a.close()
    b.close()


def test_install_nominal_model_keeps_stepping(gym_id: str) -> None:
    env = make_adapted(gym_id, EnvOptions(obs_mode="state+pixels"))
    env.reset(seed=1)
    for act in _actions(env, 3):
        env.step(act)
    qpos = env.data.qpos.copy()
    old = env.model
    env.install_model(env.nominal_spec().compile())
    assert env.model is not old and env.unwrapped.model is env.model
    np.testing.assert_array_equal(env.data.qpos, qpos)  # state carried over
    assert env.model.vis.quality.shadowsize == env.render_settings.shadowsize == 0
    obs, *_ = env.step(env.action_space.sample())
    assert obs["state"].shape == env.observation_space["state"].shape
    assert obs["pixels"].std() > 0
    env.close()


def test_static_geom_keeps_obs_size(gym_id: str) -> None:
    env = make_adapted(gym_id)
    obs0, _ = env.reset(seed=0)
    spec = env.nominal_spec()
    region = env.roles.distractor_region
    x, y, z = (region[0], region[2], region[4]) if region else env.roles.look_at
    spec.worldbody.add_geom(name="distractor0", type=mujoco.mjtGeom.mjGEOM_BOX,
                            size=[0.03, 0.03, 0.03], pos=[x, y, z + 0.03], rgba=[1, 0, 0, 1])
    ngeom = env.model.ngeom
    env.install_model(spec.compile())
    assert env.model.ngeom == ngeom + 1
    obs, _ = env.reset(seed=0)
    assert obs.shape == obs0.shape == env.observation_space.shape
    env.step(env.action_space.sample())
    env.close()


def test_jointed_body_is_refused_and_model_kept() -> None:
    env = make_adapted("Hopper-v5")
    env.reset(seed=0)
    spec = env.nominal_spec()
    body = spec.worldbody.add_body(name="box", pos=[1, 1, 0.2])
    body.add_freejoint()
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1, 0.1, 0.1])
    old = env.model
    with pytest.raises(SceneError, match="static world geoms"):
        env.install_model(spec.compile())
    assert env.model is old
    env.step(env.action_space.sample())


def test_ant_body_added_changes_obs_and_is_refused() -> None:
    """Ant-v5 observes one contact-force row per body: even a jointless body changes it."""
    env = make_adapted("Ant-v5")
    env.reset(seed=0)
    spec = env.nominal_spec()
    spec.worldbody.add_body(name="static", pos=[2, 2, 0.1]).add_geom(size=[0.1, 0, 0])
    with pytest.raises(SceneError, match="observation"):
        env.install_model(spec.compile())


def test_pixels_vary_with_pose(gym_id: str) -> None:
    env = make_adapted(gym_id, EnvOptions(obs_mode="pixels"))
    img0, _ = env.reset(seed=0)
    assert img0.std() > 5.0  # not a constant image
    for name in env.roles.robot_joints:
        j = env.model.joint(name)
        env.data.qpos[env.model.jnt_qposadr[j.id]] += 0.4
    img1 = env.observe()
    assert img1.shape == img0.shape
    assert np.abs(img1.astype(int) - img0.astype(int)).mean() > 0.2
    big = env.render_frame(width=128, height=96)  # larger than the observation buffer
    assert big.shape == (96, 128, 3)
    env.close()


def test_textures_changed_reaches_renderer() -> None:
    env = make_adapted("HalfCheetah-v5", EnvOptions(obs_mode="pixels"))
    img0, _ = env.reset(seed=0)
    m = env.model
    tex = m.texture("texplane").id
    adr, n = m.tex_adr[tex], m.tex_height[tex] * m.tex_width[tex] * m.tex_nchannel[tex]
    m.tex_data[adr:adr + n] = 255 - m.tex_data[adr:adr + n]
    np.testing.assert_array_equal(env.observe(), img0)  # stale until re-uploaded
    env.textures_changed((tex,))
    assert np.abs(env.observe().astype(int) - img0.astype(int)).mean() > 5.0
    env.close()


def test_render_settings_default_and_custom() -> None:
    env = make_adapted("Hopper-v5")
    s = env.render_settings
    assert (s.width, s.height, s.camera, s.shadowsize, s.offsamples) == (84, 84, "track", 0, 0)
    assert env.model.vis.quality.offsamples == 0
    env2 = make_adapted("Reacher-v5", EnvOptions(
        obs_mode="pixels", render=RenderSettings(width=32, height=48, shadowsize=1024)))
    obs, _ = env2.reset(seed=0)
    assert obs.shape == (48, 32, 3) and env2.render_settings.camera == "robogen_cam"
    assert env2.model.vis.quality.shadowsize == 1024
    with pytest.raises(SceneError, match="no camera"):
        make_adapted("Reacher-v5", EnvOptions(render=RenderSettings(camera="nope")))


def test_reacher_success_when_target_is_reached() -> None:
    """Success is decided at the last step: fingertip within 0.02 m of the target."""
    env = make_adapted("Reacher-v5", EnvOptions(max_steps=2))
    env.reset(seed=0)
    m, d = env.model, env.data
    tip = d.body("fingertip").xpos[:2].copy()
    for axis, name in enumerate(("target_x", "target_y")):  # qpos of a slide joint is the
        j = m.joint(name)  # displacement from its body's nominal position
        d.qpos[m.jnt_qposadr[j.id]] = tip[axis] - m.body("target").pos[axis] + m.qpos0[
            m.jnt_qposadr[j.id]]
    env.observe()
    assert np.linalg.norm(d.body("target").xpos[:2] - tip) < 1e-9
    zero = np.zeros(2, dtype=np.float32)
    _, _, _, trunc, info = env.step(zero)
    assert not trunc and info["success"] is False  # never before the last step
    _, _, _, trunc, info = env.step(zero)
    assert trunc and info["success"] is True and info["robogen"]["success_metric"] < 0.02
    env.reset(seed=0)  # the random target is > 0.02 m away for this seed
    env.step(zero)
    _, _, _, _, info = env.step(zero)
    assert info["success"] is False and info["robogen"]["success_metric"] > 0.02


def test_return_rule_needs_time_limit_and_threshold() -> None:
    for threshold, expected in ((-1e9, True), (1e9, False)):
        env = make_adapted("HalfCheetah-v5",
                           EnvOptions(max_steps=3, success_threshold=threshold))
        env.reset(seed=0)
        infos = [env.step(a)[4] for a in _actions(env, 3)]
        assert [i["success"] for i in infos] == [False, False, expected]
        assert infos[-1]["episode_return"] == pytest.approx(infos[-1]["robogen"]["success_metric"])
    hopper = make_adapted("Hopper-v5", EnvOptions(max_steps=50, success_threshold=-1e9))
    hopper.reset(seed=0)
    hopper.data.qpos[1] = 0.5  # torso far below the healthy height: the hopper fell
    _, _, term, _, info = hopper.step(np.zeros(3, dtype=np.float32))
    assert term and info["success"] is False


def test_success_rule_scaling_and_override() -> None:
    assert success_rule("HalfCheetah-v5").threshold == 1500.0
    assert success_rule("HalfCheetah-v5", max_steps=500).threshold == 750.0
    assert success_rule("Reacher-v5", max_steps=10).threshold == 0.02  # distances don't scale
    r = success_rule("Reacher-v5", success_threshold=-5.0)
    assert (r.kind, r.threshold) == ("return", -5.0)


_ROLE_TYPES = {
    "floor_geoms": mujoco.mjtObj.mjOBJ_GEOM, "table_geoms": mujoco.mjtObj.mjOBJ_GEOM,
    "object_geoms": mujoco.mjtObj.mjOBJ_GEOM, "object_bodies": mujoco.mjtObj.mjOBJ_BODY,
    "robot_bodies": mujoco.mjtObj.mjOBJ_BODY, "robot_joints": mujoco.mjtObj.mjOBJ_JOINT,
    "robot_actuators": mujoco.mjtObj.mjOBJ_ACTUATOR, "cameras": mujoco.mjtObj.mjOBJ_CAMERA,
    "lights": mujoco.mjtObj.mjOBJ_LIGHT, "keep_clear": mujoco.mjtObj.mjOBJ_BODY,
    "distractor_slots": mujoco.mjtObj.mjOBJ_BODY,
}


def test_roles_name_existing_elements(gym_id: str) -> None:
    env = make_adapted(gym_id)
    roles, m = env.roles, env.model
    for field, objtype in _ROLE_TYPES.items():
        for name in getattr(roles, field):
            assert mujoco.mj_name2id(m, objtype, name) >= 0, (field, name)
    assert roles.robot_bodies and roles.robot_joints and roles.cameras and roles.pose_dofs
    assert len(roles.robot_actuators) == m.nu and roles.distractor_slots == ()
    for dof in roles.pose_dofs:
        assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, dof.target) >= 0
        assert dof.max_offset > 0
        if dof.low is not None and dof.high is not None:
            assert dof.low < dof.high
    if roles.distractor_region is not None:
        xmin, xmax, ymin, ymax, z = roles.distractor_region
        assert xmin < xmax and ymin < ymax
        surface = (roles.table_geoms or roles.floor_geoms)[0]
        assert z == pytest.approx(m.geom(surface).pos[2])


def test_unknown_ids_and_bad_modes() -> None:
    with pytest.raises(UnknownNameError, match="Hopper-v5"):
        make("gymnasium/Hoper-v5")
    with pytest.raises(UnknownNameError):
        make_adapted("Humanoid-v4")
    with pytest.raises(InvalidSpecError, match="obs_mode"):
        make_adapted("Hopper-v5", EnvOptions(obs_mode="rgb"))
    with pytest.raises(InvalidSpecError, match="max_steps"):
        make_adapted("Hopper-v5", EnvOptions(max_steps=0))


def test_max_steps_and_wrapper_record() -> None:
    env = make_adapted("Hopper-v5", EnvOptions(max_steps=7, obs_mode="pixels"))
    assert env.spec is not None and env.spec.max_episode_steps == 7
    assert isinstance(env, GymMujocoAdapter)
    assert env.rule.threshold == pytest.approx(1500.0 * 7 / 1000)
    env.reset(seed=0)
    steps = 0
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(np.zeros(3, dtype=np.float32))
        steps, done = steps + 1, term or trunc
    assert steps == 7


def test_destroying_one_env_leaves_another_renderer_intact() -> None:
    """A collected env must free its GL objects in its own context, not the current one."""
    import gc

    keep = make_adapted("Walker2d-v5", EnvOptions(obs_mode="pixels"))
    img, _ = keep.reset(seed=0)
    other = make_adapted("Hopper-v5", EnvOptions(obs_mode="pixels"))
    other.reset(seed=0)
    keep.render_frame()  # keep's context is current while `other` is collected
    del other
    gc.collect()
    np.testing.assert_array_equal(keep.render_frame(), img)
    keep.close()


def test_catalog_is_the_family() -> None:
    """The nine built-in records, in the order robogen list shows them."""
    assert family_ids() == SUPPORTED == tuple(GYM_ENVS) == (
        "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Reacher-v5", "Pusher-v5",
        "Swimmer-v5", "InvertedPendulum-v5", "InvertedDoublePendulum-v5")
    assert gym_env_record("Pusher-v5").success == SuccessRule("distance", 0.10, "object", "goal")
    assert gym_env_record("Hopper-v5").camera == "track"
    with pytest.raises(UnknownNameError, match="Hopper-v5"):
        gym_env_record("Hoper-v5")
    with pytest.raises(ValueError, match="already in the catalog"):
        register_gym_env(gym_env_record("Hopper-v5"))
    with pytest.raises(ValueError, match="exactly one of robot_root and robot_bodies"):
        GymEnvRecord("X-v5", SuccessRule("return", 1.0), "track")
    with pytest.raises(ValueError, match="kind must be one of"):
        SuccessRule("reward", 1.0)


@pytest.fixture
def humanoid_record():
    """Humanoid-v5 in the catalog for one test (removed afterwards)."""
    assert "Humanoid-v5" not in GYM_ENVS
    yield register_gym_env(GymEnvRecord(
        "Humanoid-v5", SuccessRule("return", 5000.0),
        AddedCamera((0.0, 0.0, 1.0), 4.0, 90.0, -15.0), robot_root="torso",
        floor_geoms=("floor",), distractor_xy=(-1.5, 1.5, -1.0, 1.5), hinge_offset=0.1))
    del GYM_ENVS["Humanoid-v5"]


def test_a_new_gymnasium_env_is_one_catalog_record(humanoid_record: GymEnvRecord) -> None:
    """Humanoid-v5 is not adapted; one record makes gymnasium/Humanoid-v5 a perturbable env
    that robogen.envs lists and makes, with roles, pixels, success and every axis."""
    from robogen.envs import list_env_ids
    from robogen.perturbations import AXES, PerturbedEnv, make_axis
    from robogen.types import AxisLevel

    assert "gymnasium/Humanoid-v5" in list_env_ids()
    env = make("gymnasium/Humanoid-v5", obs_mode="state+pixels", max_steps=500)
    try:
        scene = find_scene(env)
        assert scene.render_settings.camera == "robogen_cam"
        assert scene.rule.threshold == pytest.approx(2500.0)  # scaled to 500 of 1000 steps
        assert scene.roles.robot_bodies[0] == "torso" and len(scene.roles.pose_dofs) == 17
        assert scene.roles.distractor_region == (-1.5, 1.5, -1.0, 1.5, 0.0)
        obs, _ = env.reset(seed=0)
        assert obs["state"].shape == gym.make("Humanoid-v5").observation_space.shape
        assert obs["pixels"].std() > 5.0
        wrapped = PerturbedEnv(env)
        for axis in AXES.names():
            if axis == "object_shape":  # Humanoid manipulates no object
                assert "no manipulated object" in make_axis(axis).missing_roles(wrapped.scene)
                continue
            assert make_axis(axis).missing_roles(wrapped.scene) is None, axis
            wrapped.set_levels([AxisLevel(axis, 1.0)])
            _, info = wrapped.reset(seed=0, options={"perturbation_seed": 0})
            assert info["robogen"]["changed_axes"] == [axis]
            wrapped.step(np.zeros(env.action_space.shape, np.float32))
    finally:
        env.close()
