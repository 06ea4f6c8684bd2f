"""The optional-suite families (Meta-World, Fetch, dm_control, robosuite): every axis's identity and
effect, expert success pinned (the env checker, seeding and pickling:
tests/envs/test_env_contract.py). Skipped (with the install command) when a suite is not
installed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest

from robogen.envs import ENV_FAMILIES, make
from robogen.envs.base import find_scene
from robogen.perturbations import AXES, PerturbedEnv
from robogen.policies import LoadContext, load_policy
from robogen.types import AxisLevel

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

SUITES = tuple(p for p in ENV_FAMILIES.names() if ENV_FAMILIES.get(p).requires)
"""Families that wrap an optional suite (gymnasium-robotics, metaworld), from the registry."""
FAST_IDS = ("gymnasium-robotics/FetchPickAndPlace-v4", "metaworld/pick-place-v3",
            "dm_control/cartpole-swingup", "robosuite/Lift")
"""One env per suite in the fast tests; every other id runs in the slow ones."""
SLOW_IDS = tuple(i for p in SUITES for i in ENV_FAMILIES.get(p).ids() if i not in FAST_IDS)
_REBUILT = ("gymnasium-robotics/FetchPush-v4", "gymnasium-robotics/FetchPickAndPlace-v4",
            "gymnasium-robotics/FetchSlide-v4")
"""The suite envs whose object ``object_shape`` rebuilds (the others' code refers to their
objects' geoms, or they have none)."""
NOT_APPLICABLE: dict[str, frozenset[str]] = {
    **{i: frozenset({"object_shape"}) for p in SUITES for i in ENV_FAMILIES.get(p).ids()
       if i not in _REBUILT},
    "dm_control/point_mass-easy": frozenset({"distractors", "object_shape"}),
    "robosuite/PickPlaceCan": frozenset({"distractors", "object_shape"}),
}
"""Axes whose scene roles an env lacks (point_mass: the mass reaches its whole floor;
PickPlaceCan: bins, no table top; object_shape: see ``_REBUILT``); every other axis must
apply to every suite env."""
MODEL_ONLY: dict[str, frozenset[str]] = {
    f"dm_control/finger-{t}": frozenset({"physics"}) for t in ("spin", "turn_easy", "turn_hard")}
"""Axes that change the model but not the first steps' trajectory: finger's XML disables
gravity, and its spinner's mass and the contact friction act once the finger touches it."""
MIN_PIXEL_DIFF: dict[str, dict[str, float]] = {
    "dm_control/manipulator-bring_ball": {"distractors": 0.1}}
"""Lower bounds for scenes where distractors fill few pixels at 32x32 (measured 0.2); 0.3
elsewhere."""


def _need(env_id: str) -> None:
    fam = ENV_FAMILIES.get(env_id.split("/", 1)[0])
    why = fam.missing()
    if why is not None:
        pytest.skip(f"{fam.prefix} suite not installed: {why}")


def _ids(fast: tuple[str, ...], slow: tuple[str, ...]) -> list:
    return [*fast, *(pytest.param(i, marks=pytest.mark.slow) for i in slow)]


def _rollout(env, seed: int, steps: int = 6):
    obs, _ = env.reset(seed=seed, options={"perturbation_seed": 0})
    out = [np.asarray(obs).copy()]
    scene = find_scene(env)
    qpos = [scene.data.qpos.copy()]
    shape = env.action_space.shape
    for a in np.random.default_rng(0).uniform(-1, 1, (steps, *shape)).astype(np.float32):
        obs, *_ = env.step(a)
        out.append(np.asarray(obs).copy())
        qpos.append(scene.data.qpos.copy())
    return out, qpos


@pytest.mark.parametrize("env_id", _ids(FAST_IDS, SLOW_IDS))
def test_every_axis_identity_and_effect(env_id: str) -> None:
    """Severity 0 equals the nominal env bit for bit; severity 1 changes the scene."""
    _need(env_id)
    nominal = make(env_id)
    wrapped = PerturbedEnv(make(env_id))
    try:
        n_obs, n_q = _rollout(nominal, 3)
        n_img = find_scene(nominal).render_frame(width=32, height=32).astype(float)
        n_model = find_scene(nominal).model
        for axis in AXES.names():
            if axis in NOT_APPLICABLE.get(env_id, ()):
                assert AXES.get(axis)().missing_roles(wrapped.scene) is not None, axis
                continue
            assert AXES.get(axis)().missing_roles(wrapped.scene) is None, axis
            wrapped.set_levels([AxisLevel(axis, 0.0)])
            w_obs, w_q = _rollout(wrapped, 3)
            assert all(np.array_equal(x, y) for x, y in zip(w_obs, n_obs, strict=True)), axis
            assert all(np.array_equal(x, y) for x, y in zip(w_q, n_q, strict=True)), axis
            wrapped.set_levels([AxisLevel(axis, 1.0)])
            w_obs, w_q = _rollout(wrapped, 3)
            scene = wrapped.scene
            img = scene.render_frame(width=32, height=32).astype(float)
            if AXES.get(axis).kind == "visual":
                bound = MIN_PIXEL_DIFF.get(env_id, {}).get(axis, 0.3)
                assert np.abs(img - n_img).mean() > bound, axis
            elif AXES.get(axis).kind == "sensor":  # the policy's input changes, not the motion
                assert any(not np.array_equal(x, y) for x, y in zip(w_obs, n_obs, strict=True))
                assert all(np.array_equal(x, y) for x, y in zip(w_q, n_q, strict=True)), axis
            elif AXES.get(axis).kind == "language":  # a prompted policy's instruction only
                assert all(np.array_equal(x, y) for x, y in zip(w_obs, n_obs, strict=True))
                assert all(np.array_equal(x, y) for x, y in zip(w_q, n_q, strict=True)), axis
            elif AXES.get(axis).kind == "actuation":  # the motion changes, not the model
                assert any(not np.allclose(x, y) for x, y in zip(w_q, n_q, strict=True)), axis
            elif axis == "object_shape":  # the object's geoms change; it may rest still
                m = scene.model
                assert m.ngeom != n_model.ngeom or not np.array_equal(m.geom_size,
                                                                      n_model.geom_size)
            elif axis == "object_pose":  # objects move at once; a mocap target over steps
                assert any(not np.allclose(x, y) for x, y in zip(w_q, n_q, strict=True)), axis
            else:
                m = scene.model
                changed = any(
                    getattr(m, f).shape != getattr(n_model, f).shape
                    or not np.array_equal(getattr(m, f), getattr(n_model, f))
                    for f in ("body_mass", "dof_damping", "geom_friction", "actuator_gainprm",
                              "body_pos", "geom_size"))
                assert changed or not np.allclose(m.opt.gravity, n_model.opt.gravity), axis
                if axis not in MODEL_ONLY.get(env_id, ()):
                    assert any(not np.allclose(x, y) for x, y in zip(w_q, n_q, strict=True)), \
                        axis
            assert w_obs[0].shape == n_obs[0].shape
    finally:
        wrapped.close()
        nominal.close()


def _expert_successes(env_id: str, seeds, **kwargs) -> list[bool]:
    env = make(env_id, **kwargs)
    ctx = LoadContext(env_id=env_id, observation_space=env.observation_space,
                      action_space=env.action_space)
    policy = load_policy(f"expert:{env_id}", ctx)
    policy.attach([find_scene(env)])
    out = []
    try:
        for s in seeds:
            obs, _ = env.reset(seed=s)
            policy.reset([0])
            while True:
                obs, _, term, trunc, info = env.step(policy.act(obs[None])[0])
                # Meta-World: success at any step; stop at the first one to keep the test short
                if info.get("robogen", {}).get("first_success_step", -1) > 0:
                    out.append(True)
                    break
                if term or trunc:
                    out.append(bool(info["success"]))
                    break
    finally:
        env.close()
    return out


def _model_arrays(model) -> dict[str, np.ndarray]:
    out = {}
    for name in dir(model):
        value = None if name.startswith("_") else getattr(model, name, None)
        if isinstance(value, np.ndarray):
            out[name] = value.copy()
    return out


@pytest.mark.parametrize(("env_id", "axis"), [
    ("metaworld/door-open-v3", "embodiment"),
    *(pytest.param(i, a, marks=pytest.mark.slow)
      for i in (*FAST_IDS, *SLOW_IDS) for a in AXES.names()
      if (i, a) != ("metaworld/door-open-v3", "embodiment")),
])
def test_applying_an_axis_twice_equals_once(env_id: str, axis: str) -> None:
    """Two resets with the same seeds give the same model, state and observation. Meta-World
    moves bodies through ``model.body_pos`` at reset; derived constants (``cam_poscom0``,
    ``light_poscom0``) were computed from the previous episode's placement (door-open:
    0.54 mm apart) until ``set_const`` took the nominal placement."""
    _need(env_id)
    wrapped = PerturbedEnv(make(env_id))
    try:
        wrapped.set_levels([AxisLevel(axis, 1.0)])
        seen = []
        for _ in range(2):
            obs, _ = wrapped.reset(seed=3, options={"perturbation_seed": 0})
            scene = find_scene(wrapped)
            seen.append((_model_arrays(scene.model), np.asarray(obs).copy(),
                         scene.data.qpos.copy()))
        (m1, o1, q1), (m2, o2, q2) = seen
        assert [k for k in m1 if not np.array_equal(m1[k], m2[k])] == []
        assert np.array_equal(o1, o2) and np.array_equal(q1, q2)
    finally:
        wrapped.close()


@pytest.mark.parametrize("env_id", _ids(FAST_IDS, SLOW_IDS))
def test_distractors_never_start_inside_an_object(env_id: str) -> None:
    """The suites' resets draw object positions over wide ranges after the distractors are
    placed (Fetch's object0, a free joint, landed in one at seed 3 / perturbation seed 2);
    every distractor shown at reset has a signed distance >= 0 to every non-world geom."""
    from robogen.perturbations.distractors import SPEC_PREFIX

    _need(env_id)
    if "distractors" in NOT_APPLICABLE.get(env_id, ()):
        pytest.skip(f"{env_id} has no distractor region (NOT_APPLICABLE)")
    wrapped = PerturbedEnv(make(env_id))
    try:
        wrapped.set_levels([AxisLevel("distractors", 1.0)])
        shown_total = 0
        for pseed in range(6):
            _, info = wrapped.reset(seed=3, options={"perturbation_seed": pseed})
            m, d = find_scene(wrapped).model, find_scene(wrapped).data
            spec = [g for g in range(m.ngeom) if m.geom(g).name.startswith(SPEC_PREFIX)]
            shown = [g for g in spec if m.geom_rgba[g, 3] > 0]
            assert info["robogen"]["perturbations"][0]["applied"]["placed"] == len(shown)
            others = [g for g in range(m.ngeom) if g not in spec and m.geom_bodyid[g] != 0]
            mujoco.mj_kinematics(m, d)
            assert all(mujoco.mj_geomDistance(m, d, g, o, 1.0, None) >= 0
                       for g in shown for o in others)
            shown_total += len(shown)
        assert shown_total >= 6
    finally:
        wrapped.close()


@pytest.mark.parametrize(("env_id", "seeds", "expected"), [
    ("gymnasium-robotics/FetchReach-v4", range(5), 5),
    ("gymnasium-robotics/FetchPickAndPlace-v4", range(5), 5),
    pytest.param("gymnasium-robotics/FetchPush-v4", range(10), 4, marks=pytest.mark.slow),
])
def test_fetch_expert_success_pinned(env_id: str, seeds, expected: int) -> None:
    _need(env_id)
    assert sum(_expert_successes(env_id, seeds)) == expected


def test_metaworld_pick_place_expert_on_mt1_tasks_fast() -> None:
    _need("metaworld/pick-place-v3")
    for k in (0, 1):
        assert _expert_successes("metaworld/pick-place-v3", [0], task_index=k) == [True]


@pytest.mark.slow
def test_metaworld_pick_place_expert_10_of_10_on_mt1_first_10_tasks() -> None:
    _need("metaworld/pick-place-v3")
    got = [_expert_successes("metaworld/pick-place-v3", [0], task_index=k)[0]
           for k in range(10)]
    assert got == [True] * 10


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [f"metaworld/{t}" for t in (
    "reach-v3", "push-v3", "door-open-v3", "drawer-open-v3", "button-press-v3",
    "window-open-v3", "peg-insert-side-v3")])
def test_metaworld_experts_succeed_at_nominal(env_id: str) -> None:
    _need(env_id)
    assert sum(_expert_successes(env_id, range(3))) >= 2


def test_metaworld_horizon_capped_with_a_warning() -> None:
    from robogen.errors import RobogenWarning

    _need("metaworld/reach-v3")
    with pytest.warns(RobogenWarning, match="capped to 500"):
        env = make("metaworld/reach-v3", max_steps=800)
    assert env.spec.max_episode_steps == 500 and env.rule.horizon == 500
    assert "any step" in env.rule.describe()
    env.close()


def test_metaworld_horizon_one_warning_line_and_the_manifest_records_the_cap(tmp_path) -> None:
    """``--max-steps 800``: one ``warning:`` line (no file and line), the manifest and the
    report header say 500, and the episodes stop at 500 steps."""
    _need("metaworld/reach-v3")
    out = tmp_path / "run"
    res = subprocess.run(
        [sys.executable, "-m", "robogen.cli", "eval", "--env", "metaworld/reach-v3",
         "--policy", "random:0", "--axes", "lighting", "--severities", "1", "--episodes", "2",
         "--max-steps", "800", "--backend", "serial", "--videos", "0", "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    lines = [x for x in res.stderr.splitlines() if "capped to 500" in x]
    assert len(lines) == 1 and lines[0].startswith("warning: metaworld/reach-v3 episodes end")
    assert "UserWarning" not in res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["max_steps"] == 500
    header = (out / "report.md").read_text().splitlines()[2]
    assert "max 500 steps" in header and "800" not in header


@pytest.mark.slow
def test_metaworld_cli_eval_pick_place_expert(tmp_path) -> None:
    _need("metaworld/pick-place-v3")
    out = tmp_path / "run"
    subprocess.run(
        [sys.executable, "-m", "robogen.cli", "eval", "--env", "metaworld/pick-place-v3",
         "--policy", "expert:metaworld/pick-place-v3", "--axes", "lighting",
         "--severities", "1", "--episodes", "10", "--seed", "0", "--backend", "serial",
         "--out", str(out)], check=True, cwd=tmp_path)
    report = json.loads((out / "report.json").read_text())
    nominal = next(c for c in report["conditions"] if c["condition"] == "nominal")
    assert nominal["successes"] == 10


def test_fetch_fix_is_narrow() -> None:
    """The joint-type patch is applied only where mujoco breaks the enum comparison."""
    if importlib.util.find_spec("gymnasium_robotics") is None:
        pytest.skip("gymnasium-robotics not installed: make setup-fetch")
    from gymnasium_robotics.utils import mujoco_utils

    from robogen.envs import fetch_env

    make("gymnasium-robotics/FetchReach-v4").close()
    patched = mujoco_utils.set_joint_qpos is fetch_env._set_joint_qpos
    assert patched == fetch_env.enum_comparison_broken()
    assert mujoco.mjtJoint.mjJNT_FREE is not None


@pytest.mark.parametrize(("env_id", "how"), [
    ("gymnasium-robotics/FetchPickAndPlace-v4",
     "Fetch envs decide success by info['is_success'] (goal distance < 0.05 m)"),
    ("metaworld/pick-place-v3", "Meta-World envs decide success by info['success']"),
    ("robosuite/Lift", "robosuite envs decide success by _check_success()"),
])
def test_a_success_threshold_is_refused_by_a_suite_with_its_own_flag(env_id: str, how: str
                                                                      ) -> None:
    """The refusal names the suite's own rule, the value and the fix (one template)."""
    from robogen.envs.gym_adapter import THRESHOLD_REFUSED
    from robogen.errors import InvalidSpecError

    _need(env_id)
    want = f"{how}; --success-threshold 0.5 does not apply: leave it out"
    assert THRESHOLD_REFUSED.format(how=how, value=0.5) == want
    with pytest.raises(InvalidSpecError) as e:
        make(env_id, success_threshold=0.5)
    assert str(e.value) == want


@pytest.mark.parametrize("env_id", FAST_IDS)
@pytest.mark.parametrize("bad", [0, -3, 2.5, "100"])
def test_a_bad_step_limit_is_refused_before_the_suite_env_is_built(env_id: str, bad) -> None:
    """Every family checks ``max_steps`` with the same message (families.check_max_steps)."""
    from robogen.envs import EnvOptions
    from robogen.errors import InvalidSpecError

    _need(env_id)
    name = env_id.split("/", 1)[1]
    if env_id.startswith("gymnasium-robotics/"):
        from robogen.envs.fetch_env import make_fetch

        def direct() -> object:
            return make_fetch(name, EnvOptions(max_steps=bad))
    elif env_id.startswith("metaworld/"):
        from robogen.envs.metaworld_env import make_metaworld

        def direct() -> object:
            return make_metaworld(name, max_steps=bad)
    elif env_id.startswith("dm_control/"):
        from robogen.envs.dm_control_env import make_dm_control

        def direct() -> object:
            return make_dm_control(name, max_steps=bad)
    else:
        from robogen.envs.robosuite_env import make_robosuite

        def direct() -> object:
            return make_robosuite(name, max_steps=bad)
    want = f"max_steps must be a positive integer, got {bad!r}"
    for call in (lambda: make(env_id, max_steps=bad), direct):
        with pytest.raises(InvalidSpecError) as e:
            call()
        assert str(e.value) == want
