"""The scaling loop: end to end through the CLI, resume after SIGKILL, bad input, pinned BC."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.scaling.curves import load_curves

runner = CliRunner()
TASK = "robogen/Reach-v0"
ARGS = ["--task", TASK, "--factors", "object_pose,physics", "--points", "0,2,4", "--base", "4",
        "--eval-episodes", "6", "--seeds", "1", "--steps", "200", "--hidden", "64,64",
        "--n-boot", "50", "--image-size", "16", "--seed", "0"]
MODELS = {"none-x0-s0", "object_pose-x2-s0", "object_pose-x4-s0", "physics-x2-s0",
          "physics-x4-s0"}
EVALS = {f"{c}-x{x}-s0" for c in ("object_pose", "physics") for x in (0, 2, 4)}


def _files(out):
    """Path -> (inode, mtime) of every checkpoint, evaluation part and demonstration chunk."""
    paths = [*out.glob("models/*/*"), *out.glob("evals/*/episodes/*.parquet"),
             *out.glob("demos/chunk-*.arrow")]
    return {p.relative_to(out): (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths}


def _kill_during_evaluation(out):
    """Start `robogen scale` in a subprocess and SIGKILL it once the first evaluation part lands."""
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    proc = subprocess.Popen([sys.executable, "-m", "robogen.cli", "scale", *ARGS, "--out",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    guard = time.monotonic() + 600  # only so that a hung child cannot hang the suite
    try:
        while not list(out.glob("evals/*/episodes/unit-*.parquet")):
            if proc.poll() is not None:
                pytest.fail(f"scale exited ({proc.returncode}) before evaluating: "
                            f"{proc.stderr.read().decode()[-2000:]}")
            assert time.monotonic() < guard, "scale did not reach the evaluation step"
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


def test_scale_end_to_end_resumes_after_sigkill(tmp_path):
    out = tmp_path / "scale"
    _kill_during_evaluation(out)
    before = _files(out)
    done = {p.parts[1] for p in before if p.parts[0] == "evals"}
    assert {p.parts[1] for p in before if p.parts[0] == "models"} == MODELS
    assert 1 <= len(done) < len(EVALS), "the kill must land in the middle of the evaluations"
    assert not (out / "curves.json").exists()

    res = runner.invoke(app, ["scale", *ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "0 models trained, 5 reused" in res.output
    flat = " ".join(ln.strip() for ln in res.output.splitlines())  # phases wrap at 80 columns
    order = [flat.index("robogen scale: robogen/Reach-v0: collecting expert demonstrations for 2 "
                        "curves, then training and evaluating BC models ..."),
             flat.index("eval: 36/36 episodes in "),
             flat.index("fitting 2 scaling curves (50 bootstrap refits each) ..."),
             flat.index("fit: 0/2 curves in "), flat.index("fit: 2/2 curves in "),
             flat.index("done: 0 models trained")]
    assert order == sorted(order) and order[0] == 0, res.output  # every phase, the fit included
    after = _files(out)
    # nothing that existed was redone: same inode and mtime for checkpoints, parts and chunks
    assert {p: after[p] for p in before} == before
    assert {p.parts[1] for p in after if p.parts[0] == "evals"} == EVALS

    frames = {e: pd.read_parquet(out / "evals" / e / "episodes") for e in EVALS}
    for name, df in frames.items():
        assert sorted(df.episode_index) == list(range(6)), name  # no episode repeated or lost
        assert (df.split == "test").all()
    # paired across x: the same initial-state seeds and perturbation draws at every x
    for c in ("object_pose", "physics"):
        ref = frames[f"{c}-x0-s0"].sort_values("episode_index")
        for x in (2, 4):
            df = frames[f"{c}-x{x}-s0"].sort_values("episode_index")
            assert list(df.seed) == list(ref.seed)
            assert list(df.perturbations_json) == list(ref.perturbations_json)
    policy = json.loads((out / "evals/physics-x0-s0/manifest.json").read_text())["policy"]
    assert policy.endswith("models/none-x0-s0")  # every curve's x = 0 is the base model

    curves = load_curves(out / "curves.json", task=TASK)
    assert curves.names == ("object_pose", "physics")
    for name, curve in curves.curves.items():
        assert [p.x for p in curve.points] == [0, 2, 4]
        assert all(p.n == 6 for p in curve.points)
        succ = frames[f"{name}-x4-s0"].success.sum()
        assert curve.points[-1].successes == succ
        assert curve.fit.samples is not None and curve.fit.samples.shape == (50, 3)
    assert curves.meta["config"]["base"] == 4
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "scaling.html").read_text()
    m = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert m and base64.b64decode(m[1])[:4] == b"\x89PNG"
    assert "<h2>object_pose</h2>" in page and "<h2>physics</h2>" in page
    # a trained model knows its task: another task with the same spaces is refused
    from robogen.envs import make
    from robogen.errors import SpaceMismatchError
    from robogen.policies import LoadContext, load_policy

    push = make("robogen/Push-v0")
    ctx = LoadContext("robogen/Push-v0", push.observation_space, push.action_space)
    with pytest.raises(SpaceMismatchError, match="trained on demonstrations of 'robogen/Reach-v0'"):
        load_policy(f"flax:{out / 'models' / 'object_pose-x4-s0'}", ctx)

    # a finished run reruns without work; other settings in the same directory are refused
    res = runner.invoke(app, ["scale", *ARGS, "--out", str(out)])
    assert res.exit_code == 0 and "0 models trained, 5 reused" in res.output
    assert {p: v for p, v in _files(out).items()} == after
    res = runner.invoke(app, ["scale", *ARGS, "--base", "5", "--out", str(out)])
    assert res.exit_code == 2
    assert "other settings (base: 4 != 5)" in " ".join(res.output.split())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--factors", "object_pos"], "did you mean 'object_pose'"),
        (["--points", "0,2"], "at least 3 distinct values"),
        (["--points", "0,-2,4"], "got '-2'"),
        (["--points", "0,1.5,4"], "got '1.5'"),
        (["--pairs", "object_pose+object_pose"], "names 'object_pose' twice"),
        (["--pairs", "object_pose+lightning"], "unknown perturbation axis 'lightning'"),
        (["--pairs", "object_pose"], "--pairs must be 'none', 'all' or"),
        (["--task", "gymnasium/Hopper-v5"], "task with a scripted expert"),
        (["--base", "0"], "base must be a positive integer, got 0"),
        (["--obs-mode", "depth"], "--obs-mode must be state, pixels"),
        (["--backend", "spark"], "backend must be 'serial' or 'ray'"),
        (["--steps", "0"], "BC steps must be a positive integer"),
        (["--obs-mode", "state+pixels", "--image-size", "16"], "it needs at least 36x36"),
    ],
    ids=["unknown-factor", "two-points", "negative-point", "fractional-point", "pair-twice",
         "pair-unknown", "pair-malformed", "no-expert", "base-0", "obs-mode", "backend",
         "steps-0", "image-too-small-for-cnn"],
)
def test_scale_bad_input_exits_2_and_writes_nothing(tmp_path, args, needle):
    out = tmp_path / "scale"
    base = dict(zip(ARGS[::2], ARGS[1::2], strict=True))
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    res = runner.invoke(app, ["scale", *[a for kv in base.items() for a in kv], "--out",
                              str(out)])
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.split())
    assert not out.exists()


def test_scale_refuses_a_foreign_nonempty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    res = runner.invoke(app, ["scale", *ARGS, "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "holds no scale.json" in " ".join(res.output.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def _bc_success_at_nominal(tmp_path, n_demos: int, n_episodes: int) -> tuple[int, int]:
    """Train the loop's default state BC on ``n_demos`` nominal Reach demos; evaluate nominal."""
    from robogen.scaling.loop import (
        ModelJob,
        collect_demos,
        default_bc_config,
        eval_manifest,
        outcomes_by_condition,
        run_eval,
        train_models,
    )
    from robogen.types import Condition

    store = collect_demos(TASK, {"none": n_demos}, tmp_path / "demos", seed=0, image_size=16,
                          batch_size=20)
    trained, _ = train_models(store, [ModelJob("bc", {"none": n_demos}, 0)], tmp_path / "models",
                              config=default_bc_config("state"))
    assert trained == 1
    manifest = eval_manifest(TASK, f"flax:{tmp_path / 'models' / 'bc'}",
                             [Condition("nominal", ())], n_episodes=n_episodes, seed=0,
                             batch_size=25)
    outcomes = outcomes_by_condition(run_eval(tmp_path / "eval", manifest))["nominal"]
    return int(outcomes.sum()), len(outcomes)


def test_bc_on_40_expert_demos_reaches_pinned_success_at_nominal(tmp_path):
    """Measured 48/50 (0.96) on the dev machine, deterministic there (same data, seeds and
    program). Bound: the 95% Wilson lower bound of 48/50 is 0.87, i.e. 44 successes; another
    CPU's float reassociation may flip a few borderline episodes, not more (50/50 would be
    no regression, so there is no upper bound). The same BC without weight decay scored
    mostly ~0.2 (0.08-0.98 across seeds), far below; 10 demonstrations score 11/50."""
    k, n = _bc_success_at_nominal(tmp_path, n_demos=40, n_episodes=50)
    assert n == 50
    assert k >= 44, f"BC success {k}/{n}, pinned 48/50"


def test_bc_on_200_expert_demos_solves_reach(tmp_path):
    """Measured 100/100 (~10 s); the 95% Wilson lower bound of 100/100 is 0.963."""
    k, n = _bc_success_at_nominal(tmp_path, n_demos=200, n_episodes=100)
    assert n == 100 and k >= 96, f"BC success {k}/{n}, pinned 100/100"
