"""Every registered axis on real scenes: identity at severity 0, a measurable shift at 1,
no compounding, disjoint splits, and the MuJoCo traps (derived constants, texture upload,
kinematics after a recompile, state edits surviving the reset, distractor penetration)."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from robogen.envs import ENV_FAMILIES, make
from robogen.errors import MUST_BE_IN_RANGE, InvalidPerturbationError
from robogen.perturbations import AXES, PerturbedEnv, make_axis
from robogen.perturbations.base import BAD_SPLIT
from robogen.perturbations.distractors import SHAPES, SPEC_PREFIX
from robogen.types import SPLITS, AxisLevel

CORE_FAMILIES = tuple(p for p in ENV_FAMILIES.names() if not ENV_FAMILIES.get(p).requires)
"""Families without an optional suite (robogen, gymnasium; a new one joins by registering)."""
ENV_IDS = tuple(i for p in CORE_FAMILIES for i in ENV_FAMILIES.get(p).ids())
"""Every id of the core families. The optional-suite families (Fetch, Meta-World: mocap-driven
arms, which the velocity kick below would throw off) run every axis in
tests/envs/test_suites.py, parametrized over the families that name a suite."""
OBJECTLESS = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Reacher", "Swimmer",
              "InvertedPendulum", "InvertedDoublePendulum")
"""Gymnasium envs without a manipulated object (no ``object_shape``)."""
NOT_APPLICABLE: dict[str, frozenset[str]] = {
    **{f"gymnasium/{n}-v5": frozenset({"object_shape"}) for n in OBJECTLESS},
    "gymnasium/InvertedPendulum-v5": frozenset({"distractors", "texture", "background",
                                                "object_shape"}),
    "gymnasium/InvertedDoublePendulum-v5": frozenset({"distractors", "object_shape"}),
    "gymnasium/Pusher-v5": frozenset({"background"}),
}
"""Axes whose scene roles an env lacks (no surface near the cart; no textured floor; no floor
under Pusher's table; no object); every other axis must apply to every env (``missing_roles``
is None)."""
AXIS_NAMES = AXES.names()
SIZE = 32  # rendered test images are SIZE x SIZE
STEPS = 8  # fixed-action rollout length
MIN_PIXEL_DIFF = {"camera": 5.0, "texture": 10.0, "lighting": 5.0, "distractors": 0.5,
                  "background": 5.0}
"""Smallest mean |pixel difference| (0-255 scale) a visual axis at severity 1 must make with
perturbation seed 0. Measured on these scenes at 32x32: camera 13-44, texture 19-75, lighting
18-72, distractors 0.9-3.5, background 7.8 (tabletop: the floor behind the table) to 85."""
SPARSE_MIN_PIXEL_DIFF: dict[str, dict[str, float]] = {
    "gymnasium/InvertedPendulum-v5": {"camera": 1.0, "lighting": 0.5},
    "gymnasium/InvertedDoublePendulum-v5": {"texture": 3.0},
}
"""Lower bounds for scenes where the robot fills few pixels of the frame and there is little
(InvertedPendulum: no) floor. Measured: camera 2.6, lighting 1.1 (InvertedPendulum), texture
7.5 (InvertedDoublePendulum)."""
SEED, PSEED = 3, 0


@pytest.fixture(scope="module")
def pool():
    """``get(env_id) -> (PerturbedEnv, nominal env)``, created once per module."""
    cache: dict[str, tuple[PerturbedEnv, object]] = {}

    def get(env_id: str):
        if env_id not in cache:
            cache[env_id] = (PerturbedEnv(make(env_id)), make(env_id))
        return cache[env_id]

    yield get
    for wrapped, nominal in cache.values():
        wrapped.close()
        nominal.close()


def model_arrays(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    """Copies of every array field of ``model`` plus the option, headlight and statistic structs."""
    out = {}
    for name in dir(model):
        if name.startswith("_"):
            continue
        try:
            value = getattr(model, name)
        except Exception:  # noqa: BLE001 - some properties raise on empty models
            continue
        if isinstance(value, np.ndarray):
            out[name] = value.copy()
    out["opt.gravity"] = model.opt.gravity.copy()
    for f in ("ambient", "diffuse", "specular"):
        out[f"vis.headlight.{f}"] = np.array(getattr(model.vis.headlight, f))
    for f in ("meaninertia", "meanmass", "meansize", "extent"):
        out[f"stat.{f}"] = np.array(getattr(model.stat, f))
    return out


def differing(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[str]:
    """Names of fields that differ (shape or value)."""
    return sorted(k for k in a.keys() | b.keys()
                  if k not in a or k not in b or a[k].shape != b[k].shape
                  or not np.array_equal(a[k], b[k]))


def scene_of(env):
    from robogen.envs.base import find_scene

    return find_scene(env)


def rollout(env, reset_kwargs: dict, steps: int = STEPS, kick: float = 0.0
            ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Reset, add ``kick`` to every joint velocity, step fixed actions; (observations, qpos)."""
    obs, _ = env.reset(**reset_kwargs)
    data = scene_of(env).data
    data.qvel[:] += kick
    obs_list, qpos = [np.asarray(obs).copy()], [data.qpos.copy()]
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, *env.action_space.shape))
    for a in actions:
        obs, *_ = env.step(a.astype(np.float32))
        obs_list.append(np.asarray(obs).copy())
        qpos.append(scene_of(env).data.qpos.copy())
    return obs_list, qpos


def render(env) -> np.ndarray:
    return scene_of(env).render_frame(width=SIZE, height=SIZE).astype(np.float64)


def applies(axis: str, env_id: str, scene) -> bool:
    """Whether ``axis`` acts on ``env_id``; checks it against :data:`NOT_APPLICABLE`."""
    why = make_axis(axis).missing_roles(scene)
    expected = axis not in NOT_APPLICABLE.get(env_id, frozenset())
    assert (why is None) == expected, f"{axis} on {env_id}: missing_roles={why!r}"
    return why is None


def assert_unchanged(wrapped, axis: str) -> None:
    """An axis without its roles is recorded as not changed at severity 1."""
    wrapped.set_levels([AxisLevel(axis, 1.0)])
    _, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    (record,) = info["robogen"]["perturbations"]
    assert record["changed"] is False and info["robogen"]["changed_axes"] == []


def assert_nominal(wrapped, nominal) -> None:
    """Wrapped env (just reset) equals the unwrapped nominal env: model, image, rollout."""
    nominal.reset(seed=SEED)
    nominal_model = model_arrays(scene_of(nominal).model)
    assert differing(model_arrays(scene_of(wrapped).model), nominal_model) == []
    assert np.array_equal(render(wrapped), render(nominal))
    w_obs, w_q = rollout(wrapped, {"seed": SEED})
    n_obs, n_q = rollout(nominal, {"seed": SEED})
    assert all(np.array_equal(a, b) for a, b in zip(w_obs, n_obs, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(w_q, n_q, strict=True))


# ----------------------------------------------------------------------------- identity


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("axis", AXIS_NAMES)
def test_severity_zero_equals_nominal(pool, axis, env_id):
    wrapped, nominal = pool(env_id)
    wrapped.set_levels([AxisLevel(axis, 0.0)])
    _, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    assert info["robogen"]["perturbations"] == [] and info["robogen"]["changed_axes"] == []
    assert_nominal(wrapped, nominal)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("axis", AXIS_NAMES)
def test_severity_one_then_zero_restores_nominal(pool, axis, env_id):
    wrapped, nominal = pool(env_id)
    wrapped.set_levels([AxisLevel(axis, 1.0)])
    wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    wrapped.set_levels([AxisLevel(axis, 0.0)])
    wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    assert_nominal(wrapped, nominal)


# ----------------------------------------------------------------------------- severity 1


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("axis", AXIS_NAMES)
def test_severity_one_changes_something_measurable(pool, axis, env_id):
    wrapped, nominal = pool(env_id)
    nominal.reset(seed=SEED)
    nominal_image = render(nominal)
    nominal_model = model_arrays(scene_of(nominal).model)
    if not applies(axis, env_id, wrapped.scene):
        assert_unchanged(wrapped, axis)
        return
    wrapped.set_levels([AxisLevel(axis, 1.0)])
    _, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    (record,) = info["robogen"]["perturbations"]
    assert record["changed"] is True and info["robogen"]["changed_axes"] == [axis]
    kind = AXES.get(axis).kind
    if kind == "visual":
        diff = float(np.mean(np.abs(render(wrapped) - nominal_image)))
        low = SPARSE_MIN_PIXEL_DIFF.get(env_id, {}).get(axis, MIN_PIXEL_DIFF[axis])
        assert diff >= low, f"{axis} on {env_id}: mean pixel diff {diff:.2f}"
        return
    if kind == "language":  # the instruction only: the scene, observations and motion stay
        w_obs, w_q = rollout(wrapped, {"seed": SEED, "options": {"perturbation_seed": PSEED}})
        n_obs, n_q = rollout(nominal, {"seed": SEED})
        assert differing(model_arrays(scene_of(wrapped).model), nominal_model) == []
        assert all(np.array_equal(a, b) for a, b in zip(w_obs, n_obs, strict=True))
        assert all(np.array_equal(a, b) for a, b in zip(w_q, n_q, strict=True))
        assert wrapped.edit_prompt("pick the red block") != "pick the red block"
        return
    if kind in ("sensor", "actuation"):  # per step, between the policy and the scene: the
        # model stays nominal; a sensor changes what the policy sees, not the motion; an
        # actuation fault changes the motion, not the first observation
        w_obs, w_q = rollout(wrapped, {"seed": SEED, "options": {"perturbation_seed": PSEED}})
        n_obs, n_q = rollout(nominal, {"seed": SEED})
        assert differing(model_arrays(scene_of(wrapped).model), nominal_model) == []
        pairs = list(zip(w_obs, n_obs, strict=True)), list(zip(w_q, n_q, strict=True))
        if kind == "sensor":
            assert any(not np.array_equal(a, b) for a, b in pairs[0])
            assert all(np.array_equal(a, b) for a, b in pairs[1])
        else:
            assert np.array_equal(w_obs[0], n_obs[0])
            assert any(not np.allclose(a, b) for a, b in pairs[1])
        return
    # the initial velocity kick makes contact parameters matter at once (Pusher-v5 has zero
    # gravity: its friction and object mass act only through contact)
    w_obs, w_q = rollout(wrapped, {"seed": SEED, "options": {"perturbation_seed": PSEED}}, kick=0.5)
    n_obs, n_q = rollout(nominal, {"seed": SEED}, kick=0.5)
    if axis == "object_pose":  # a state edit: the model stays nominal, the initial state moves
        assert differing(model_arrays(scene_of(wrapped).model), nominal_model) == []
        assert not np.array_equal(w_q[0], n_q[0]) and not np.array_equal(w_obs[0], n_obs[0])
    else:
        assert differing(model_arrays(scene_of(wrapped).model), nominal_model) != []
    assert any(not np.allclose(a, b) for a, b in zip(w_q[1:], n_q[1:], strict=True))


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("axis", AXIS_NAMES)
def test_applying_twice_equals_once(pool, axis, env_id):
    wrapped, _ = pool(env_id)
    wrapped.set_levels([AxisLevel(axis, 1.0)])
    seen = []
    for _ in range(2):
        obs, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
        seen.append((model_arrays(wrapped.scene.model), np.asarray(obs).copy(),
                     wrapped.scene.data.qpos.copy(), render(wrapped),
                     info["robogen"]["perturbations"]))
    (m1, o1, q1, i1, r1), (m2, o2, q2, i2, r2) = seen
    assert differing(m1, m2) == []
    assert np.array_equal(o1, o2) and np.array_equal(q1, q2) and np.array_equal(i1, i2)
    assert r1 == r2


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("axis", AXIS_NAMES)
def test_bad_levels_raise_the_constant_message(pool, axis):
    scene = pool("robogen/PickPlace-v0")[0].scene
    ax = make_axis(axis)
    rng = np.random.default_rng(0)
    for severity in (1.5, -0.1, float("nan")):
        with pytest.raises(InvalidPerturbationError) as err:
            ax.sample(rng, severity, "all", scene)
        assert str(err.value) == MUST_BE_IN_RANGE.format(field="severity", low=0, high=1,
                                                         value=severity)
    with pytest.raises(InvalidPerturbationError) as err:
        ax.sample(rng, 0.5, "foo", scene)
    assert str(err.value) == BAD_SPLIT.format(choices=SPLITS, value="foo")
    with pytest.raises(InvalidPerturbationError, match="severity must be in"):
        PerturbedEnv(make("robogen/Reach-v0"), [AxisLevel(axis, 1.5)])


# ----------------------------------------------------------------------------- splits


def split_keys(ax, p) -> frozenset:
    """The discrete value classes a perturbation draws from (what a split holds out), as
    its axis declares them from the recorded values."""
    return ax.split_keys(p.to_record()["values"])


@pytest.mark.parametrize("axis", AXIS_NAMES)
def test_train_and_test_value_sets_are_disjoint(pool, axis):
    scene = pool("robogen/PickPlace-v0")[0].scene
    ax = make_axis(axis)
    keys = {}
    for split in ("train", "test", "all"):
        rng = np.random.default_rng(1)
        keys[split] = set().union(*(split_keys(ax, ax.sample(rng, 1.0, split, scene))
                                    for _ in range(150)))
    assert keys["train"] and keys["test"]
    assert keys["train"].isdisjoint(keys["test"])
    assert keys["train"] | keys["test"] == keys["all"]
    if axis == "distractors":  # every shape occurs in both splits, never with the same colours
        assert {s for s, _ in keys["train"]} == {s for s, _ in keys["test"]} == set(SHAPES)


# ----------------------------------------------------------------------------- MuJoCo traps


def test_mass_edits_update_derived_constants(pool):
    wrapped, nominal = pool("robogen/PickPlace-v0")
    nominal.reset(seed=SEED)
    obj = scene_of(nominal).model.body("object").id
    wrapped.set_levels([AxisLevel("physics", 1.0)])
    _, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    scale = info["robogen"]["perturbations"][0]["values"]["object_mass_scale"]
    m, m0 = wrapped.scene.model, scene_of(nominal).model
    assert m.body_mass[obj] == pytest.approx(m0.body_mass[obj] * scale)
    assert m.body_subtreemass[obj] == pytest.approx(m.body_mass[obj])  # follows the edit
    assert m.body_subtreemass[0] == pytest.approx(m.body_mass.sum())
    assert not np.array_equal(m.dof_invweight0, m0.dof_invweight0)

    wrapped, nominal = pool("gymnasium/Hopper-v5")
    wrapped.set_levels([AxisLevel("embodiment", 1.0)])
    _, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    m = wrapped.scene.model
    torso = m.body("torso").id
    assert info["robogen"]["perturbations"][0]["values"]["mass_scale"] != 1.0
    assert m.body_subtreemass[torso] == pytest.approx(m.body_mass[1:].sum())
    nominal_subtree = scene_of(nominal).model.body_subtreemass[torso]
    assert m.body_subtreemass[torso] != pytest.approx(nominal_subtree)


def test_texture_edits_reach_the_renderer():
    wrapped = PerturbedEnv(make("robogen/PickPlace-v0"))
    try:
        wrapped.reset(seed=SEED)
        before = render(wrapped)  # the scene's GL context now holds the nominal textures
        wrapped.set_levels([AxisLevel("texture", 1.0)])
        wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
        scene = wrapped.scene
        assert scene.model.tex_data.tobytes() != wrapped.nominal_model.tex_data.tobytes()
        # a renderer built now uploads every texture from the model: the scene's own context,
        # created before the edit, must show the same image (re-uploaded, not stale)
        fresh = mujoco.Renderer(scene.model, SIZE, SIZE)
        try:
            fresh.update_scene(scene.data, camera=scene.roles.cameras[0])
            reference = fresh.render().astype(np.float64)
        finally:
            fresh.close()
        image = render(wrapped)
        assert np.mean(np.abs(image - before)) >= MIN_PIXEL_DIFF["texture"]
        assert np.mean(np.abs(image - reference)) < 1.0
        # back to nominal: the restored pixels are uploaded again
        wrapped.set_levels([])
        wrapped.reset(seed=SEED)
        assert np.array_equal(render(wrapped), before)
    finally:
        wrapped.close()


@pytest.mark.parametrize(("env_id", "body"), [("robogen/PickPlace-v0", "hand"),
                                              ("gymnasium/Hopper-v5", "foot")])
def test_link_length_changes_kinematics(pool, env_id, body):
    wrapped, nominal = pool(env_id)
    nominal.reset(seed=SEED)
    wrapped.set_levels([AxisLevel("embodiment", 1.0)])
    wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    m, d = wrapped.scene.model, wrapped.scene.data
    m0, d0 = scene_of(nominal).model, scene_of(nominal).data
    assert m is not wrapped.nominal_model and m.nbody == m0.nbody
    d.qpos[:] = d0.qpos  # same joint configuration
    mujoco.mj_kinematics(m, d)
    mujoco.mj_kinematics(m0, d0)
    root = m.body(wrapped.scene.roles.robot_bodies[0]).id
    reach = np.linalg.norm(d.xpos[m.body(body).id] - d.xpos[root])
    reach0 = np.linalg.norm(d0.xpos[m0.body(body).id] - d0.xpos[root])
    scale = wrapped.perturbations[0].length_scale
    assert scale != 1.0 and reach == pytest.approx(scale * reach0, rel=1e-9)


def test_object_pose_survives_the_reset(pool):
    wrapped, nominal = pool("robogen/PickPlace-v0")
    obs0, _ = nominal.reset(seed=SEED)
    wrapped.set_levels([AxisLevel("object_pose", 1.0)])
    obs, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    values = info["robogen"]["perturbations"][0]["values"]
    offsets = {(o["target"], o["index"]): o for o in values["offsets"]}
    # obs layout: object_pos at 14:17, target_pos at 21:24
    for (target, index), start in ((("object_joint", 0), 14), (("object_joint", 1), 15),
                                   (("target", 0), 21), (("target", 1), 22)):
        o = offsets[(target, index)]
        expected = np.clip(obs0[start] + o["offset"], o["low"], o["high"])
        assert obs[start] == pytest.approx(expected, abs=1e-6)
    assert not np.allclose(obs[14:16], obs0[14:16])
    assert np.allclose(obs[14:17], wrapped.scene.data.body("object").xpos)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_distractors_start_without_penetration(pool, env_id):
    wrapped, nominal = pool(env_id)
    if not applies("distractors", env_id, wrapped.scene):
        assert_unchanged(wrapped, "distractors")
        return
    obs0, _ = nominal.reset(seed=SEED)
    wrapped.set_levels([AxisLevel("distractors", 1.0)])  # physical above severity 0.5
    for pseed in range(3):
        obs, info = wrapped.reset(seed=SEED, options={"perturbation_seed": pseed})
        values = info["robogen"]["perturbations"][0]["values"]
        assert values["physical"] is True and len(values["items"]) >= 1
        m, d = wrapped.scene.model, wrapped.scene.data
        shown = [g for g in range(m.ngeom) if m.geom_rgba[g, 3] > 0 and (
            m.geom(g).name.startswith("distractor_") or m.geom(g).name.startswith(SPEC_PREFIX))]
        assert shown and all(m.geom_contype[g] == 1 for g in shown)
        mujoco.mj_forward(m, d)
        touching = [c for c in d.contact[: d.ncon] if c.geom1 in shown or c.geom2 in shown]
        assert touching == []
        assert np.shape(obs) == np.shape(obs0)


def test_spec_distractors_an_env_reset_lands_on_are_hidden(pool):
    """Spec-mode distractors are placed at qpos0; Swimmer's reset (seed 19) then puts the
    body into two of six. Those two are hidden for the episode and left out of the record;
    no shown distractor penetrates anything (signed distance >= 0, visual ones too)."""
    wrapped, _ = pool("gymnasium/Swimmer-v5")
    wrapped.set_levels([AxisLevel("distractors", 1.0)])
    _, info = wrapped.reset(seed=19, options={"perturbation_seed": 19})
    m, d = wrapped.scene.model, wrapped.scene.data
    spec = [g for g in range(m.ngeom) if m.geom(g).name.startswith(SPEC_PREFIX)]
    shown = [g for g in spec if m.geom_rgba[g, 3] > 0]
    applied = info["robogen"]["perturbations"][0]["applied"]
    assert (len(spec), len(shown)) == (6, 4)
    assert (applied["requested"], applied["placed"]) == (6, 4)
    assert sorted(it["pos"][0] for it in applied["items"]) == sorted(
        float(m.geom_pos[g][0]) for g in shown)
    hidden = set(spec) - set(shown)
    assert all(m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0 for g in hidden)
    others = [g for g in range(m.ngeom) if g not in spec and m.geom_bodyid[g] != 0]
    mujoco.mj_kinematics(m, d)
    assert min(mujoco.mj_geomDistance(m, d, g, o, 1.0, None) for g in shown for o in others) >= 0
    # the next episode starts from the pristine model: nothing stays hidden
    wrapped.reset(seed=0, options={"perturbation_seed": 0})
    assert all(wrapped.scene.model.geom_rgba[g, 3] == 1.0 for g in spec
               if wrapped.scene.model.geom(g).name.startswith(SPEC_PREFIX))


def test_resized_physical_slot_has_valid_collision_bounds(pool):
    wrapped, _ = pool("robogen/PickPlace-v0")
    wrapped.set_levels([AxisLevel("distractors", 1.0)])
    wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    m, d = wrapped.scene.model, wrapped.scene.data
    item = wrapped.perturbations[0].items[0]
    g = m.geom(f"distractor_0_{item.shape}").id
    assert np.allclose(m.geom_size[g], item.size)
    # the run-time bounds equal what MuJoCo's compiler derives for that size
    spec = wrapped.scene.nominal_spec()
    spec.geom(f"distractor_0_{item.shape}").size = list(item.size)
    compiled = spec.compile()
    assert m.geom_rbound[g] == pytest.approx(compiled.geom_rbound[g], rel=1e-12)
    assert np.allclose(m.geom_aabb[g], compiled.geom_aabb[g], rtol=1e-12, atol=1e-15)
    assert m.geom_rbound[g] != pytest.approx(wrapped.nominal_model.geom_rbound[g])
    # moved onto the object, the resized slot geom must collide with it (bounds not stale)
    slot = m.body("distractor_0")
    d.mocap_pos[slot.mocapid[0]] = d.body("object").xpos + [0.0, 0.0, 0.9 * m.geom_aabb[g, 5]]
    mujoco.mj_forward(m, d)
    obj_geom = m.geom("object_geom").id
    assert any({c.geom1, c.geom2} == {g, obj_geom} for c in d.contact[: d.ncon])


def test_axes_without_roles_are_not_applied():
    wrapped = PerturbedEnv(make("gymnasium/InvertedPendulum-v5"))
    try:
        for axis in ("distractors", "texture"):
            assert isinstance(make_axis(axis).missing_roles(wrapped.scene), str)
            wrapped.set_levels([AxisLevel(axis, 1.0)])
            _, info = wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
            (record,) = info["robogen"]["perturbations"]
            assert record["changed"] is False and info["robogen"]["changed_axes"] == []
    finally:
        wrapped.close()


@pytest.mark.parametrize("env_id", ["robogen/PickPlace-v0", "gymnasium/Hopper-v5"])
def test_camera_orbits_the_look_at_point(pool, env_id):
    """Fixed (tabletop) and trackcom (Hopper) cameras: distance scales, view angle is kept."""
    from robogen.perturbations.camera import camera_pose_at_qpos0

    wrapped, nominal = pool(env_id)
    nominal.reset(seed=SEED)
    wrapped.set_levels([AxisLevel("camera", 1.0)])
    wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    p = wrapped.perturbations[0]
    look_at = np.asarray(wrapped.scene.roles.look_at)
    m, m0 = wrapped.scene.model, scene_of(nominal).model
    cam = m.camera(p.camera).id
    pos, mat, _, _ = camera_pose_at_qpos0(m, cam)
    pos0, mat0, _, _ = camera_pose_at_qpos0(m0, cam)
    v, v0 = pos - look_at, pos0 - look_at
    assert np.linalg.norm(v) == pytest.approx(p.distance_scale * np.linalg.norm(v0))
    turn = math.atan2(v[1], v[0]) - math.atan2(v0[1], v0[0])
    assert math.remainder(turn - p.azimuth_rad, 2 * math.pi) == pytest.approx(0.0, abs=1e-9)
    # the angle between the viewing axis (-z) and the direction to look_at is unchanged
    def angle(pos, mat):
        d = look_at - pos
        return math.acos(float(-mat[:, 2] @ d / np.linalg.norm(d)))
    assert angle(pos, mat) == pytest.approx(angle(pos0, mat0), abs=1e-9)
    assert m.cam_fovy[cam] == pytest.approx(m0.cam_fovy[cam] + p.fovy_delta_deg)
    # the camera used for rendering after the reset sits where the orbit put it (trackcom:
    # offset from the subtree centre of mass recomputed, not stale)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert np.allclose(d.cam_xpos[cam], pos, atol=1e-9)


def test_gain_scaling_keeps_position_servos_stable(pool):
    wrapped, nominal = pool("robogen/PickPlace-v0")
    nominal.reset(seed=SEED)
    wrapped.set_levels([AxisLevel("embodiment", 1.0)])
    wrapped.reset(seed=SEED, options={"perturbation_seed": PSEED})
    g = wrapped.perturbations[0].gain_scale
    m, m0 = wrapped.scene.model, scene_of(nominal).model
    assert g != 1.0
    assert np.allclose(m.actuator_gainprm[:, 0], g * m0.actuator_gainprm[:, 0])
    # kp and kv scale with the gain: still a servo (biasprm[1] = -kp), never positive feedback
    assert np.allclose(m.actuator_biasprm[:, :3], g * m0.actuator_biasprm[:, :3])
    assert np.allclose(m.actuator_biasprm[:, 1], -m.actuator_gainprm[:, 0])
    damping = wrapped.perturbations[0].damping_scale
    arm = [m.joint(j).dofadr[0] for j in wrapped.scene.roles.robot_joints]
    assert np.allclose(m.dof_damping[arm], damping * m0.dof_damping[arm])
