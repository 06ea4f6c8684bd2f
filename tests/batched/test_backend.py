"""``robogen eval --backend batched`` end to end (robogen.batched.backend), on warp's CPU device.

The shipped Reacher PPO (state observations) on nominal and ``physics@1``, a few worlds and a
short step limit: the run writes the serial backend's Parquet columns and manifest (plus where
it ran: backend, device, worlds, float32, MJWarp/warp versions), the report builds, and each
episode's outcome is the serial backend's (MJWarp's float32 trajectories stay within 1e-3 of
C MuJoCo's over 10 Reacher steps). Episode ``i`` starts from the serial initial state with the
serial axis values; a kill mid-run then ``--resume`` loses and repeats nothing; bad input exits
2 with nothing written. The success-rate parity on >= 200 episodes is ``slow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import robogen
from robogen.cli import app
from robogen.rollout.store import EPISODES_DIR, ResultStore
from tests.batched.runs import episodes_table as _table
from tests.batched.runs import eval_ok
from tests.batched.runs import run_eval as _eval
from tests.batched.states import HAVE_MJWARP, NO_MJWARP

pytestmark = [pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP), pytest.mark.timeout(600)]

runner = CliRunner()
CKPT = Path(robogen.__file__).parent / "assets" / "checkpoints"
REACHER = ["--env", "gymnasium/Reacher-v5", "--policy", f"sb3:{CKPT / 'ppo_reacher.zip'}",
           "--vecnormalize", str(CKPT / "ppo_reacher_vecnormalize.pkl")]
SMALL = ["--axes", "physics", "--severities", "1", "--episodes", "4", "--batch-size", "2",
         "--max-steps", "10"]
RETURN_ATOL = 1e-3
"""Largest |episode return difference| batched vs serial over 10 Reacher steps."""




@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {"batched": root / "batched", "serial": root / "serial"}
    eval_ok(*REACHER, *SMALL, "--backend", "batched", "--worlds", "3",
            "--out", str(out["batched"]))
    eval_ok(*REACHER, *SMALL, "--backend", "serial", "--videos", "0",
            "--out", str(out["serial"]))
    return out


def test_batched_run_has_the_serial_columns_manifest_report_and_outcomes(
        runs: dict[str, Path]) -> None:
    batched, serial = _table(runs["batched"]), _table(runs["serial"])
    assert list(batched.columns) == list(serial.columns)
    assert batched.dtypes.equals(serial.dtypes)
    assert len(batched) == 8
    same = ["condition", "episode_index", "seed", "success", "cause", "length_steps",
            "first_success_step", "perturbations_json", "changed_axes"]
    pd.testing.assert_frame_equal(batched[same], serial[same])
    assert np.abs(batched.episode_return - serial.episode_return).max() <= RETURN_ATOL
    mb = json.loads((runs["batched"] / "manifest.json").read_text())
    ms = json.loads((runs["serial"] / "manifest.json").read_text())
    assert mb["spec_hash"] == ms["spec_hash"]  # where it ran is recorded, not hashed
    assert mb["backend"]["kind"] == "batched" and ms["backend"]["kind"] == "serial"
    assert mb["backend"]["device"] == "cpu" and mb["backend"]["worlds"] == 3
    assert mb["backend"]["float_precision"] == "float32"
    assert set(mb["backend"]["versions"]) == {"mujoco-warp", "warp-lang"}
    report = json.loads((runs["batched"] / "report.json").read_text())
    assert [c["condition"] for c in report["conditions"]] == ["nominal", "physics@1"]
    assert report["manifest"]["backend"]["kind"] == "batched"
    header = (runs["batched"] / "report.md").read_text()
    assert "batched backend: 3 worlds on cpu (MuJoCo Warp 4.0.0, float32)" in header
    assert "worker" not in header.split("\n")[2]  # not "1 worker on CPUs"


def test_compare_takes_a_batched_and_a_serial_run(runs: dict[str, Path], tmp_path: Path) -> None:
    res = runner.invoke(app, ["compare", str(runs["batched"]), str(runs["serial"]),
                              "--out", str(tmp_path / "cmp")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cmp" / "compare.json").is_file()


def test_episode_i_starts_from_the_serial_state_with_the_serial_axis_values(
        runs: dict[str, Path]) -> None:
    from robogen.batched.backend import BatchedBackend
    from robogen.batched.fields import get_field
    from robogen.envs.base import find_scene
    from robogen.rollout.backend import BackendOptions
    from robogen.rollout.plan import episode_seed, make_units, perturbation_seed
    from robogen.rollout.worker import make_env

    m = ResultStore.open(runs["batched"]).manifest
    nominal, physics = (make_units((c,), m.n_episodes, m.batch_size)[1] for c in m.conditions)
    backend = BatchedBackend(m, BackendOptions(kind="batched", worlds=2))
    backend.start()
    env = make_env(m)
    try:
        lock = backend.lockstep
        assert lock is not None
        assert lock.load([(0, physics, 3), (1, nominal, 3)]) == []
        worlds, scene = lock.worlds, find_scene(env)
        for row, unit in ((0, physics), (1, nominal)):
            env.set_levels(unit.condition.levels)
            _, info = env.reset(seed=episode_seed(m.seed, 3),
                                options={"perturbation_seed": perturbation_seed(m.seed, 3)})
            np.testing.assert_allclose(worlds.qpos[row], scene.data.qpos, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(worlds.qvel[row], scene.data.qvel, rtol=1e-6, atol=1e-7)
            for path in ("geom_friction", "body_mass", "opt.gravity"):  # float32 on the device
                want = get_field(scene.model, path).astype(np.float32).astype(np.float64)
                np.testing.assert_array_equal(worlds.field(path)[row], want)
            episode = lock.episodes[row]
            assert episode is not None and episode.episode_index == 3
            assert episode.perturbations_json == json.dumps(info["robogen"]["perturbations"])
        for path in ("geom_friction", "opt.gravity"):  # the perturbed world differs
            assert not np.array_equal(worlds.field(path)[0], worlds.field(path)[1])
    finally:
        env.close()
        backend.close()


def test_kill_mid_run_then_resume_loses_and_repeats_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [*REACHER, "--axes", "physics", "--severities", "1", "--episodes", "8",
            "--batch-size", "1", "--max-steps", "10", "--backend", "batched", "--worlds", "2"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen([sys.executable, "-m", "robogen.cli", "eval", *args, "--out",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
    parts = out / EPISODES_DIR
    deadline = time.time() + 300
    while len(list(parts.glob("unit-*.parquet"))) < 2 and time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    before = {p.name: p.read_bytes() for p in parts.glob("unit-*.parquet")}
    done_before = ResultStore.open(out).done_units()
    assert 0 < len(before) == len(done_before) < 16
    eval_ok("--resume", str(out), "--backend", "batched")
    for name, data in before.items():  # stored before the kill: not run again
        assert (parts / name).read_bytes() == data
    results = ResultStore.open(out).load_results()
    assert sorted((r.condition, r.episode_index) for r in results) == sorted(
        (c, i) for c in ("nominal", "physics@1") for i in range(8))


@pytest.mark.parametrize(("args", "needle"), [
    ([*REACHER, "--worlds", "0"], "--worlds must be an integer >= 1 (the batched backend's "
     "parallel worlds), got 0; give e.g. --worlds 64, or run with --backend ray"),
    ([*REACHER, "--axes", "lighting"], "axis 'lighting' cannot run on the batched backend"),
    (["--env", "gymnasium/Reacher-v5", "--policy", "remote:ws://127.0.0.1:9"],
     "remote: policies ('remote:ws://127.0.0.1:9'"),
    (["--env", "robogen/Reach-v0", "--policy", "expert:reach", "--axes", "physics"],
     "reads the simulator of each env (a scripted expert)"),
    (["--env", "robogen/Push-v0", "--policy", "random"],  # the default axes: all named
     "axes 'action', 'language', 'object_pose', 'object_shape', 'sensor' cannot run on the "
     "batched backend (their edits are not per-world model fields yet; batchable axes: physics, "
     "embodiment, lighting, camera, texture, background, distractors); give --axes background,"
     "camera,distractors,embodiment,lighting,physics,texture (this run's batchable axes) or run "
     "with --backend ray"),
], ids=["worlds-0", "unbatchable-axis", "remote", "privileged", "default-axes"])
def test_bad_input_exits_2_names_the_value_and_the_ray_backend(
        tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "run"
    code, text = _eval(*args, "--backend", "batched", "--episodes", "2", "--max-steps", "5",
                       "--out", str(out))
    assert code == 2, text
    assert needle in text
    assert "--backend ray" in text
    assert not out.exists()


def test_batched_flags_need_the_batched_backend(tmp_path: Path) -> None:
    code, text = _eval(*REACHER, "--worlds", "8", "--backend", "serial", "--out",
                       str(tmp_path / "run"))
    assert code == 2
    assert "--worlds applies only to --backend batched, got --backend serial" in text
    assert not (tmp_path / "run").exists()


PARITY_EPISODES = 200
PARITY_ALPHA = 0.01
"""Significance level of the two-proportion test of batched vs serial success rates."""


@pytest.mark.slow
def test_success_rates_agree_with_the_serial_backend_on_200_episodes(tmp_path: Path) -> None:
    """The shipped Reacher PPO, nominal and physics@0.3, 200 episodes each at seed 0: per
    condition, a two-proportion z-test does not reject equal success rates (alpha 0.01)."""
    from scipy.stats import norm

    args = [*REACHER, "--axes", "physics", "--severities", "0.3", "--episodes",
            str(PARITY_EPISODES), "--batch-size", "8", "--seed", "0"]
    eval_ok(*args, "--backend", "batched", "--worlds", "64",
            "--out", str(tmp_path / "batched"))
    eval_ok(*args, "--backend", "serial", "--videos", "0",
            "--out", str(tmp_path / "serial"))
    batched, serial = _table(tmp_path / "batched"), _table(tmp_path / "serial")
    for cond in ("nominal", "physics@0.3"):
        b = batched[batched.condition == cond].success.to_numpy()
        s = serial[serial.condition == cond].success.to_numpy()
        assert len(b) == len(s) == PARITY_EPISODES
        pooled = (b.sum() + s.sum()) / (2 * PARITY_EPISODES)
        se = np.sqrt(pooled * (1 - pooled) * 2 / PARITY_EPISODES)
        z = 0.0 if se == 0 else (b.mean() - s.mean()) / se
        p = 2 * norm.sf(abs(z))
        assert p > PARITY_ALPHA, (cond, b.mean(), s.mean(), p)
        print(f"{cond}: batched {b.mean():.3f}, serial {s.mean():.3f}, p {p:.3f}, "
              f"same outcome {np.mean(b == s):.3f}")
    nominal = serial[serial.condition == "nominal"].success.mean()
    assert 0.2 < nominal < 0.95  # the test compares rates that can move


def test_overflowed_buffers_and_a_non_finite_state_are_simulator_faults(
        runs: dict[str, Path]) -> None:
    """A world whose MJWarp buffers overflowed, and one whose state went non-finite, end at
    that step as ``sim_unstable`` (never a policy outcome); a healthy world runs on."""
    from robogen.batched.backend import BatchedBackend
    from robogen.batched.worlds import load_mjwarp
    from robogen.rollout.backend import BackendOptions
    from robogen.rollout.plan import make_units

    m = ResultStore.open(runs["batched"]).manifest
    unit = make_units(m.conditions[:1], m.n_episodes, m.batch_size)[0]
    backend = BatchedBackend(m, BackendOptions(kind="batched", worlds=3))
    backend.start()
    try:
        lock = backend.lockstep
        assert lock is not None
        assert lock.load([(0, unit, 0), (1, unit, 1), (2, unit, 2)]) == []
        assert lock.step() == []
        _, mjw = load_mjwarp()
        lock.worlds.tensor("overflow")[0] = int(mjw.OverflowType.NEFC)
        lock.worlds.tensor("m.body_mass")[1, 1] = float("nan")  # its physics diverges
        ended = {e.row: e for e in lock.step()}
        assert set(ended) == {0, 1}
        assert ended[0].cause == ended[1].cause == "sim_unstable"
        assert not ended[0].success and not ended[1].success
        assert "buffers overflowed" in (ended[0].error or "")
        assert "unstable" in (ended[1].error or "")
        assert ended[0].length_steps == 1  # the step that overflowed does not count
        assert lock.running.tolist() == [False, False, True]
    finally:
        backend.close()


def test_policy_faults_fail_only_their_episodes_as_on_the_serial_backend(tmp_path: Path) -> None:
    """A policy that raises on some observations and returns NaN on others: the batch call
    raises, each row is asked alone, and exactly the serial backend's episodes end as
    ``policy_error`` (the others run to their step limit)."""
    args = ["--env", "gymnasium/Reacher-v5", "--policy",
            "python:tests/fixtures/batched_policies.py:picky", "--episodes", "8",
            "--batch-size", "4", "--max-steps", "5", "--axes", "physics", "--severities", "1"]
    code, text = _eval(*args, "--backend", "batched", "--worlds", "8",
                       "--out", str(tmp_path / "batched"))
    assert code in (0, 3), text
    code, text = _eval(*args, "--backend", "serial", "--videos", "0",
                       "--out", str(tmp_path / "serial"))
    assert code in (0, 3), text
    batched, serial = _table(tmp_path / "batched"), _table(tmp_path / "serial")
    cols = ["condition", "episode_index", "success", "cause", "length_steps"]
    pd.testing.assert_frame_equal(batched[cols], serial[cols])
    nominal = batched[batched.condition == "nominal"]
    assert nominal.cause.tolist() == ["timeout", "policy_error", "policy_error", "timeout",
                                      "policy_error", "policy_error", "timeout", "timeout"]
    errors = set(batched.error.dropna())
    assert any("target too far left" in e for e in errors)
    assert any("non-finite action" in e for e in errors)


def test_a_refill_leaves_the_other_worlds_as_their_last_step_left_them(
        runs: dict[str, Path]) -> None:
    """Loading an episode into one world (its reset state, then MJWarp's forward) changes no
    array of a world mid-episode: its next observation reads the kinematics ``mj_step``
    left, as the serial env's does."""
    from robogen.batched.backend import BatchedBackend
    from robogen.rollout.backend import BackendOptions
    from robogen.rollout.plan import make_units

    m = ResultStore.open(runs["batched"]).manifest
    unit = make_units(m.conditions[1:], m.n_episodes, m.batch_size)[0]
    backend = BatchedBackend(m, BackendOptions(kind="batched", worlds=2))
    backend.start()
    try:
        lock = backend.lockstep
        assert lock is not None
        lock.load([(0, unit, 0)])
        for _ in range(3):
            lock.step()
        before = {n: lock.worlds.tensor(n)[0].clone() for n in ("xpos", "site_xpos", "qacc",
                                                                  "qfrc_constraint")}
        lock.load([(1, unit, 1)])
        for name, value in before.items():
            assert lock.worlds.tensor(name)[0].equal(value), name
        assert not lock.worlds.tensor("xpos")[1].equal(before["xpos"])
    finally:
        backend.close()


def test_refilled_worlds_follow_the_serial_episodes_of_a_terminating_env(
        tmp_path: Path) -> None:
    """Hopper under the seeded random policy ends its episodes at different steps (it falls),
    so worlds are refilled while others run: every episode ends at the serial step with the
    serial cause, its return within float32 drift."""
    args = ["--env", "gymnasium/Hopper-v5", "--policy", "random", "--axes", "physics",
            "--severities", "0.5", "--episodes", "6", "--batch-size", "3", "--max-steps", "30"]
    eval_ok(*args, "--backend", "batched", "--worlds", "3",
            "--out", str(tmp_path / "batched"))
    eval_ok(*args, "--backend", "serial", "--videos", "0",
            "--out", str(tmp_path / "serial"))
    batched, serial = _table(tmp_path / "batched"), _table(tmp_path / "serial")
    cols = ["condition", "episode_index", "success", "cause", "length_steps"]
    pd.testing.assert_frame_equal(batched[cols], serial[cols])
    assert np.abs(batched.episode_return - serial.episode_return).max() <= RETURN_ATOL
    assert batched.length_steps.nunique() > 2  # episodes ended at different steps
    assert (batched.cause == "terminated").any()


def test_a_cuda_device_warp_does_not_see_is_refused(tmp_path: Path) -> None:
    from robogen.batched.worlds import load_mjwarp

    wp, _ = load_mjwarp()
    device = f"cuda:{wp.get_cuda_device_count()}"  # one past the last
    code, text = _eval(*REACHER, *SMALL, "--backend", "batched", "--sim-device", device,
                       "--out", str(tmp_path / "run"))
    assert code == 2, text
    assert f"--sim-device {device}: warp sees" in text and "--backend ray" in text
    assert not (tmp_path / "run").exists()
