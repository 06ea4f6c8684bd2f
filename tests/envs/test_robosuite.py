"""The ``robosuite`` family: the nominal env is robosuite's own bit for bit, pixels upright
and with robosuite's look, the scripted experts' success pinned over 40 seeded episodes, the
narrow mujoco fixes, bad input, and real evaluations (serial = Ray, kill + resume). Runs on
the MuJoCo 3.x track (``make setup-suites``); elsewhere it skips, and the missing-suite
error is checked instead. The env contract and every axis's identity/effect are
parametrized over the family in tests/envs/test_env_contract.py and test_suites.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from robogen.envs import ENV_FAMILIES, find_scene, make
from robogen.errors import InvalidSpecError, UnknownNameError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

HAVE_RS = importlib.util.find_spec("robosuite") is not None
needs_rs = pytest.mark.skipif(not HAVE_RS, reason="robosuite not installed: make setup-suites")
IDS = ENV_FAMILIES.get("robosuite").ids()


def _robosuite(task: str, **kw):
    import robosuite

    from robogen.envs.robosuite_env import SCENE_SEED, patch_robosuite

    patch_robosuite()  # robosuite itself fails on this mujoco without robogen's fixes
    return robosuite.make(task, robots="Panda", seed=SCENE_SEED, hard_reset=False,
                          has_renderer=False, **kw)


def test_the_family_lists_the_issue_tasks_even_without_the_suite() -> None:
    assert IDS == ("robosuite/Lift", "robosuite/Stack", "robosuite/Door",
                   "robosuite/PickPlaceCan", "robosuite/NutAssemblySquare")


@pytest.mark.skipif(HAVE_RS, reason="robosuite is installed here")
def test_a_missing_suite_names_the_install_command() -> None:
    from robogen.envs import SuiteMissingError

    with pytest.raises(SuiteMissingError) as e:
        make("robosuite/Lift")
    assert "make setup-suites" in str(e.value) and "'robosuite'" in str(e.value)


@pytest.mark.skipif(HAVE_RS, reason="robosuite is installed here")
def test_collect_on_a_missing_suite_names_the_install_command_and_writes_nothing(
        tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "robogen.cli", "collect", "--task", "robosuite/Stack", "--n", "2",
         "--out", str(tmp_path / "d")], capture_output=True, text=True, timeout=300,
        env={**os.environ, "MUJOCO_GL": "egl"}, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "make setup-suites" in proc.stdout + proc.stderr
    assert not (tmp_path / "d").exists()


def test_an_unknown_task_is_refused_with_close_matches() -> None:
    with pytest.raises(UnknownNameError) as e:
        make("robosuite/Lfit")
    assert "Lfit" in str(e.value) and "Lift" in str(e.value)


@needs_rs
def test_an_unsupported_robot_is_refused_before_the_env_is_built(tmp_path) -> None:
    from robogen.envs.robosuite_env import ROBOT_REFUSED, SUPPORTED_ROBOTS

    with pytest.raises(InvalidSpecError) as e:
        make("robosuite/Lift", robots="Spot")
    assert str(e.value) == ROBOT_REFUSED.format(task="Lift", robot="Spot",
                                                choices=list(SUPPORTED_ROBOTS))
    spec = tmp_path / "eval.toml"
    out = tmp_path / "run"
    spec.write_text('env = "robosuite/Lift"\npolicy = "random"\nepisodes = 2\n'
                    'backend = "serial"\n[env_kwargs]\nrobots = "Spot"\n')
    proc = subprocess.run([sys.executable, "-m", "robogen.cli", "eval", "--spec", str(spec),
                           "--out", str(out)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert "does not support robot 'Spot'" in proc.stderr
    assert not out.exists()


@needs_rs
@pytest.mark.parametrize("task", ["Lift", pytest.param("PickPlaceCan", marks=pytest.mark.slow)])
def test_the_nominal_env_is_robosuites_own_bit_for_bit(task: str) -> None:
    """Same seed: the same qpos, rewards and observations as ``robosuite.make(seed=0)``."""
    ref = _robosuite(task, has_offscreen_renderer=False, use_camera_obs=False)
    env = make(f"robosuite/{task}")
    try:
        for seed in (0, 5):
            obs, _ = env.reset(seed=seed)
            ref.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
            ro = ref.reset()
            want = np.concatenate([ro["robot0_proprio-state"], ro["object-state"]])
            assert np.array_equal(obs, want.astype(np.float32))
            scene = find_scene(env)
            for a in np.random.default_rng(seed).uniform(-1, 1, (10, 7)):
                obs, reward, *_ = env.step(a.astype(np.float32))
                ro, rr, _, _ = ref.step(a.astype(np.float32))
                assert reward == rr
            assert np.array_equal(scene.data.qpos, ref.sim.data.qpos)
    finally:
        env.close()
        ref.close()


@needs_rs
def test_pixels_are_upright_with_robosuites_look() -> None:
    """robosuite's own agentview image flipped upright (its "opengl" convention) is within a
    mean 3/255 of robogen's (robosuite draws shadows and MSAA; measured 1.06); the image
    as robosuite returns it (upside down) is far from it."""
    ref = _robosuite("Lift", has_offscreen_renderer=True, use_camera_obs=True,
                     camera_names="agentview", camera_heights=84, camera_widths=84)
    env = make("robosuite/Lift", obs_mode="pixels")
    try:
        obs, _ = env.reset(seed=0)
        ref.rng.bit_generator.state = np.random.default_rng(0).bit_generator.state
        theirs = ref.reset()["agentview_image"]
        assert np.abs(obs.astype(float) - theirs[::-1]).mean() < 3.0
        assert np.abs(obs.astype(float) - theirs).mean() > 15.0
    finally:
        env.close()
        ref.close()


def _expert_successes(task: str, episodes: int) -> list[bool]:
    from robogen.policies import LoadContext, load_policy

    env = make(f"robosuite/{task}")
    ctx = LoadContext(env_id=f"robosuite/{task}", observation_space=env.observation_space,
                      action_space=env.action_space)
    policy = load_policy(f"expert:robosuite/{task}", ctx)
    policy.attach([find_scene(env)])
    out = []
    try:
        for s in range(episodes):
            obs, _ = env.reset(seed=s)
            policy.reset([0])
            done, info = False, {}
            while not done:
                obs, _, term, trunc, info = env.step(policy.act(obs[None])[0])
                done = term or trunc
            out.append(bool(info["success"]))
    finally:
        env.close()
    return out


@needs_rs
@pytest.mark.parametrize(("task", "expected"), [
    ("Lift", 40),
    pytest.param("Stack", 39, marks=pytest.mark.slow),
    pytest.param("PickPlaceCan", 40, marks=pytest.mark.slow),
])
def test_expert_nominal_success_is_pinned_over_40_seeded_episodes(task: str, expected: int
                                                                   ) -> None:
    """Seeds 0-39, nominal: the count is exact (the episodes are deterministic) and at least
    90% (95% Wilson intervals: 40/40 [0.91, 1.00], 39/40 [0.87, 1.00])."""
    got = _expert_successes(task, 40)
    assert sum(got) == expected and sum(got) / len(got) >= 0.9


@needs_rs
def test_the_mujoco_fixes_are_applied_only_where_needed() -> None:
    import mujoco
    from robosuite.controllers.parts import controller
    from robosuite.utils import binding_utils

    from robogen.envs import robosuite_env
    from robogen.envs.fetch_env import enum_comparison_broken

    make("robosuite/Lift").close()
    patched = binding_utils.MjModel.get_joint_qpos_addr is robosuite_env._get_joint_qpos_addr
    assert patched == enum_comparison_broken()
    full_m = controller.Controller.update is robosuite_env._controller_update
    assert full_m == (not hasattr(mujoco.MjData, "qM"))


# ---------------------------------------------------------------------------- evaluations


def _strip(results):
    return sorted((dataclasses.replace(r, wall_time_s=0.0) for r in results),
                  key=lambda r: (r.condition, r.episode_index))


@needs_rs
def test_collect_records_expert_demonstrations_from_robosuites_agentview(tmp_path) -> None:
    """``robogen collect`` (and so ``scale`` / ``plan``) takes robosuite tasks: the expert's
    demonstrations, recorded from the family's default camera, first frame = the env's own."""
    from robogen.reports.video import decode_png
    from robogen.rollout.plan import episode_seed
    from robogen.scaling.demos import EXPERT_TASKS, collect, demo_episode_index
    from robogen.types import RenderSettings

    assert EXPERT_TASKS["robosuite/Lift"] == "robosuite/Lift"
    store = collect("robosuite/Lift", ["none", "lighting"], 2, tmp_path / "d", batch_size=2)
    assert store.collection.camera == "agentview"
    assert store.collection.policy == "expert:robosuite/Lift"
    eps = store.episodes()
    assert list(eps.groupby("factor").size()) == [2, 2] and eps["success"].all()
    import pandas as pd

    df = pd.read_feather(store.chunks()[("none", 0)])
    first = df[(df.episode == demo_episode_index("none", 0)) & (df.step == 0)].iloc[0]
    env = make("robosuite/Lift", obs_mode="state+pixels",
               render=RenderSettings(width=84, height=84))
    obs, _ = env.reset(seed=episode_seed(0, demo_episode_index("none", 0)))
    assert np.array_equal(decode_png(first.pixels_png), obs["pixels"])
    assert np.allclose(np.asarray(first.state, np.float32), obs["state"])
    env.close()


@needs_rs
@pytest.mark.slow
def test_scale_measures_curves_on_robosuite_lift(tmp_path) -> None:
    """``robogen scale`` end to end on a robosuite task (small: states, 3 points, 1 seed)."""
    import json

    proc = subprocess.run(
        [sys.executable, "-m", "robogen.cli", "scale", "--task", "robosuite/Lift",
         "--factors", "object_pose", "--points", "0,2,4", "--base", "4", "--seeds", "1",
         "--eval-episodes", "6", "--steps", "300", "--n-boot", "50", "--out",
         str(tmp_path / "s")], capture_output=True, text=True, timeout=1200,
        env={**os.environ, "MUJOCO_GL": "egl"}, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    curves = json.loads((tmp_path / "s" / "curves.json").read_text())
    assert curves["task"] == "robosuite/Lift" and curves["factors"] == ["object_pose"]
    # the robosuite expert's demonstrations: every one a success, on both factors
    assert curves["meta"]["expert_demos"] == {"none": {"episodes": 4, "successes": 4},
                                              "object_pose": {"episodes": 4, "successes": 4}}
    points = curves["curves"]["object_pose"]["points"]
    assert [(p["x"], p["n"]) for p in points] == [(0, 6), (2, 6), (4, 6)]
    assert (tmp_path / "s" / "scaling.html").is_file()


@needs_rs
def test_serial_and_ray_give_identical_robosuite_episodes(tmp_path) -> None:
    from robogen.configs import load_eval_config
    from robogen.rollout.store import ResultStore
    from robogen.runs.evaluation import evaluate

    def cfg(backend: str, **kw):
        return load_eval_config(
            None, env="robosuite/Lift", policy="expert:robosuite/Lift",
            axes=["lighting", "physics"], severities=[1.0], episodes=2, batch_size=2,
            seed=1, backend=backend, out=tmp_path / backend, videos=0, max_steps=80,
            obs_mode="state+pixels", **kw)

    serial = evaluate(cfg("serial"))
    # the Ray run in a process of its own: a driver that imported the suite and ran an
    # embedded cluster broke a later test's loopback-cluster actors (left for a later issue)
    subprocess.run(
        [sys.executable, "-m", "robogen.cli", "eval", "--env", "robosuite/Lift", "--policy",
         "expert:robosuite/Lift", "--axes", "lighting,physics", "--severities", "1",
         "--episodes", "2",
         "--batch-size", "2", "--seed", "1", "--max-steps", "80", "--obs-mode",
         "state+pixels", "--backend", "ray", "--workers", "2", "--videos", "0", "--out",
         str(tmp_path / "ray")], check=True, capture_output=True, timeout=600,
        env={**os.environ, "MUJOCO_GL": "egl"})
    a = _strip(ResultStore.open(serial.run_dir).load_results())
    b = _strip(ResultStore.open(tmp_path / "ray").load_results())
    assert len(a) == 2 * 4 and a == b
    assert sum(r.success for r in a if r.condition == "nominal") == 2


@needs_rs
@pytest.mark.slow
def test_a_killed_robosuite_run_resumes_without_lost_or_repeated_episodes(tmp_path) -> None:
    from robogen.rollout.runner import plan_units
    from robogen.rollout.store import ResultStore
    from robogen.runs.evaluation import resume
    from tests.fixtures.interrupt import sigint_inherited

    out = tmp_path / "run"
    args = ["--env", "robosuite/Lift", "--policy", "expert:robosuite/Lift", "--axes",
            "texture,object_pose", "--severities", "1", "--episodes", "4", "--batch-size", "2",
            "--seed", "2", "--max-steps", "80", "--backend", "serial", "--videos", "0"]
    with sigint_inherited():
        proc = subprocess.Popen([sys.executable, "-m", "robogen.cli", "eval", *args,
                                 "--out", str(out)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**os.environ, "MUJOCO_GL": "egl"})
    parts = out / "episodes"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if parts.is_dir() and len(list(parts.glob("unit-*.parquet"))) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ResultStore.open(out)
    done = store.done_units()
    assert 0 < len(done) < len(plan_units(store.manifest)), "the kill should land mid-run"
    before = {u: store.part_path(u).read_bytes() for u in done}
    resume(out, backend="serial", videos=0)
    results = ResultStore.open(out).load_results()
    keys = [(r.condition, r.episode_index) for r in results]
    assert len(keys) == len(set(keys)) == 4 * len(store.manifest.conditions)
    assert all(store.part_path(u).read_bytes() == b for u, b in before.items())
    full = tmp_path / "full"
    subprocess.run([sys.executable, "-m", "robogen.cli", "eval", *args, "--out", str(full)],
                   check=True, capture_output=True, env={**os.environ, "MUJOCO_GL": "egl"})
    assert _strip(results) == _strip(ResultStore.open(full).load_results())


@needs_rs
@pytest.mark.slow
def test_the_shipped_lift_pixel_policy_succeeds_as_measured_and_the_camera_costs_it(
        tmp_path) -> None:
    """robogen/assets/policies/lift_pixels_plain on the README's protocol (seed 0, 30
    episodes, 150 steps): nominal 21/30, and the camera gap's interval excludes 0
    (+0.33 [+0.13, +0.53])."""
    from tests.fixtures.shipped import assert_shipped_policy

    assert_shipped_policy(tmp_path, "robosuite/Lift", "lift_pixels_plain", "camera", 21,
                          max_steps=150)
