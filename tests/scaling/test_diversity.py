"""Diversity curves (`robogen scale --vary values`): end to end with a resume after SIGKILL,
distinct value ids in the demonstrations, disjoint train/test values, the power-law fit's
recovery and band coverage, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.scaling.curves import build_curve, load_curves
from robogen.scaling.demos import DemoStore, value_factor
from robogen.scaling.diversity import PURE_N0
from robogen.scaling.value_planner import exponent_interval

runner = CliRunner()
TASK = "robogen/Reach-v0"
ARGS = ["--task", TASK, "--vary", "values", "--factors", "embodiment", "--values", "1,2,3",
        "--per-value", "1,2,3", "--eval-values", "2", "--eval-episodes", "3", "--seeds", "1",
        "--steps", "100", "--hidden", "32,32", "--n-boot", "20", "--seed", "0"]
MODELS = {f"embodiment-k{k}-m{m}-s0" for k in (1, 2, 3) for m in (1, 2, 3)}


def _files(out):
    paths = [*out.glob("models/*/*"), *out.glob("evals/*/episodes/*.parquet"),
             *out.glob("demos/chunk-*.arrow")]
    return {p.relative_to(out): (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths}


def _kill_during_evaluation(out):
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


def test_diversity_run_end_to_end_resumes_after_sigkill(tmp_path):
    out = tmp_path / "div"
    _kill_during_evaluation(out)
    before = _files(out)
    assert {p.parts[1] for p in before if p.parts[0] == "models"} == MODELS
    assert not (out / "curves.json").exists()

    res = runner.invoke(app, ["scale", *ARGS, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "0 models trained, 9 reused" in res.output
    after = _files(out)
    assert {p: after[p] for p in before} == before  # nothing saved was redone

    # k distinct values are k distinct ids (and k distinct scenes) in the demonstrations
    store = DemoStore.open(out / "demos")
    train_ids: set[str] = set()
    for k in (1, 2, 3):
        ids, scenes = set(), set()
        for i in range(k):
            t = store.episodes()
            assert (t.factor == value_factor("embodiment", i)).sum() >= 3
        for (f, _), p in store.chunks().items():
            if f in {value_factor("embodiment", i) for i in range(k)}:
                for rec in pd.read_feather(p).perturbations_json.unique():
                    (r,) = json.loads(rec)
                    ids.add(r["value"]["id"])
                    scenes.add(json.dumps(r["values"], sort_keys=True))
                    assert r["applied"]["body_id"] == r["value"]["id"]
        assert len(ids) == len(scenes) == k, (k, ids)
        train_ids |= ids
    # every model of a k trains on exactly the demonstrations of values 0..k-1
    info = json.loads((out / "models/embodiment-k2-m3-s0/bc.json").read_text())
    assert info["train_info"]["counts"] == {"embodiment.v0": 3, "embodiment.v1": 3}

    # evaluation: held-out test values, disjoint from train, the same episodes for every model
    frames = {m: pd.read_parquet(out / "evals" / m / "episodes") for m in MODELS}
    test_ids = set()
    for df in frames.values():
        for rec in df.perturbations_json:
            test_ids.add(json.loads(rec)[0]["value"]["id"])
        assert (df.split == "test").all() and len(df) == 6
    assert test_ids == {"body-test-000000", "body-test-000001"}
    assert not train_ids & test_ids
    ref = frames["embodiment-k1-m1-s0"].sort_values(["condition", "episode_index"])
    for df in frames.values():
        df = df.sort_values(["condition", "episode_index"])
        assert list(df.seed) == list(ref.seed)
        assert list(df.perturbations_json) == list(ref.perturbations_json)

    curves = load_curves(out / "curves.json", task=TASK)
    assert set(curves.names) == {"embodiment:k@m1", "embodiment:k@m2", "embodiment:k@m3",
                                 "embodiment:m@k1", "embodiment:m@k2", "embodiment:m@k3"}
    c = curves.curves["embodiment:k@m3"]
    assert [p.x for p in c.points] == [1, 2, 3] and all(p.n == 6 for p in c.points)
    assert c.points[-1].successes == frames["embodiment-k3-m3-s0"].success.sum()
    assert curves.meta["kind"] == "diversity"
    assert curves.meta["value_ids"]["embodiment"] == sorted(train_ids)
    page = (out / "scaling.html").read_text()
    assert "Diversity vs quantity" in page and "spends the budget better" in page

    # the planner splits a budget into (values, demos per value) and compares with equal
    res = runner.invoke(app, ["plan", "--curves", str(out), "--budget", "30",
                              "--value-cost", "2", "--out", str(tmp_path / "plan.json")])
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    (row,) = plan["factors"]
    assert row["cost"] == row["values"] * (2 + row["per_value"]) <= 30
    assert plan["vs_equal"]["low"] <= plan["vs_equal"]["difference"] <= plan["vs_equal"]["high"]
    assert "optimal - equal split" in " ".join(res.output.split())

    # a finished run reruns without work; other settings are refused
    res = runner.invoke(app, ["scale", *ARGS, "--out", str(out)])
    assert res.exit_code == 0 and "0 models trained, 9 reused" in res.output
    res = runner.invoke(app, ["scale", *ARGS, "--eval-values", "3", "--out", str(out)])
    assert res.exit_code == 2 and "other settings" in res.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--values", "1,2,8192"], "its train set has 4096; give at most 4096"),
        (["--factors", "sensor"], "factor 'sensor' has no distinct values"),
        (["--eval-values", "2000"], "exceeds the 1024 held-out values"),
        (["--values", "1,2"], "at least 3 distinct values"),
        (["--per-value", "0,1,2"], "got '0'"),
        (["--points", "0,5,10"], "--points applies only to --vary demos"),
        (["--vary", "scenes"], "--vary must be 'demos' or 'values'"),
        (["--factors", "embodment"], "did you mean 'embodiment'"),
    ],
    ids=["k-above-train-set", "no-distinct-values", "eval-values", "grid-2", "grid-0",
         "points", "vary", "unknown-factor"],
)
def test_diversity_bad_input_exits_2_and_writes_nothing(tmp_path, args, needle):
    out = tmp_path / "div"
    base = dict(zip(ARGS[::2], ARGS[1::2], strict=True))
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    res = runner.invoke(app, ["scale", *[a for kv in base.items() for a in kv], "--out",
                              str(out)])
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.split())
    assert not out.exists()


def test_values_flags_need_vary_values(tmp_path):
    res = runner.invoke(app, ["scale", "--task", TASK, "--factors", "physics", "--values",
                              "1,2,4", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "add --vary values" in " ".join(res.output.split())


def _synthetic(a, b, reps_seed, n=200, ks=(1, 2, 4, 8, 16, 32), n_boot=30):
    rng = np.random.default_rng(reps_seed)
    outs = [rng.random(n) < 1 - a * k ** b for k in ks]
    return build_curve("x:k@m1", list(ks), outs, n_boot=n_boot, seed=reps_seed, n0=PURE_N0)


def test_power_law_recovers_a_known_exponent():
    c = _synthetic(0.8, -0.5, 0, n=400)
    lo, hi = exponent_interval(c.fit)
    assert abs(c.fit.b - (-0.5)) < 0.08
    assert lo <= -0.5 <= hi and hi - lo < 0.3


@pytest.mark.slow
def test_bootstrap_band_covers_the_exponent_in_95_percent_of_repetitions():
    """100 seeded repetitions of a synthetic curve (k = 1..32, 200 episodes per point)."""
    hits = 0
    for r in range(100):
        lo, hi = exponent_interval(_synthetic(0.8, -0.5, r, n_boot=200).fit)
        hits += lo <= -0.5 <= hi
    assert hits >= 95, f"the 95% band covered the exponent in {hits}/100 repetitions"
