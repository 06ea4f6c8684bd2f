"""The closed loop (`robogen plan --rounds`): rounds, refits, resume without rework, bad input."""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.scaling import loop
from robogen.scaling.adaptive import (
    BAD_ROUNDS,
    NOT_A_FINISHED_SCALE_RUN,
    AdaptiveConfig,
    plan_round,
    shifted,
)
from robogen.scaling.curves import CurveFit, load_curves
from robogen.scaling.planner import plan_budget

runner = CliRunner()
TASK = "robogen/Reach-v0"


@pytest.fixture(scope="module")
def scale_dir(tmp_path_factory):
    """A tiny finished scale run: 2 factors, points 0,2,4, 1 seed, 6 episodes per point."""
    out = tmp_path_factory.mktemp("adaptive") / "scale"
    config = loop.ScaleConfig(
        task=TASK, factors=("object_pose", "physics"), points=(0, 2, 4), base=4,
        eval_episodes=6, seeds=1, n_boot=50, image_size=16,
        bc=loop.default_bc_config("state", steps=200, hidden=(64, 64)))
    loop.run_scale(config, out)
    return out


def _files(scale, loop_dir):
    paths = [*scale.glob("models/*/*"), *scale.glob("evals/*/episodes/*.parquet"),
             *scale.glob("demos/chunk-*.arrow"), *loop_dir.glob("round-*/*")]
    return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths}


def _plan(scale, *extra):
    return runner.invoke(app, ["plan", "--curves", str(scale), "--budget", "6", "--rounds", "2",
                               *extra])


def test_closed_loop_rounds_refit_and_resume_without_rework(scale_dir):
    res = _plan(scale_dir)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "closed loop: greedy, budget 6 in 2 rounds" in text
    assert "round 1 (budget 3, spent 3)" in text and "round 2 (budget 6, spent 6)" in text
    loop_dir = scale_dir / "adaptive"
    summary = json.loads((loop_dir / "summary.json").read_text())
    r1, r2 = summary["rounds"]
    assert sum(r1["added"].values()) == 3 and sum(r2["added"].values()) == 3
    assert {n: r1["demos"][n] + r2["added"][n] for n in r1["demos"]} == r2["demos"]
    assert summary["final"]["total_cost"] == 6
    assert {f["factor"]: f["demos"] for f in summary["final"]["factors"]} == r2["demos"]
    assert 0.0 <= r2["predicted"] <= 1.0 and 0.0 <= r2["predicted_planned"] <= 1.0
    # every round refits on the scale run's points plus the counts the plan reached, and the
    # new points are the models trained on base + that many demonstrations of the factor
    for r, rnd in ((1, r1), (2, r2)):
        curves = load_curves(loop_dir / f"round-{r}" / "curves.json", task=TASK)
        for name, curve in curves.curves.items():
            xs = [p.x for p in curve.points]
            assert set(xs) >= {0, 2, 4, rnd["demos"][name]}
            point = next(p for p in curve.points if p.x == rnd["demos"][name])
            assert point.rate == pytest.approx(rnd["measured"][name])
            assert point.n == 6
            assert (curve.fit.a, curve.fit.b, curve.fit.n0) == pytest.approx(
                tuple(rnd["fits"][name]))
            if rnd["demos"][name] not in (0, 2, 4):
                model = scale_dir / "models" / f"{name}-x{rnd['demos'][name]}-s0"
                assert json.loads((model / "bc.json").read_text())["train_info"]["counts"] == {
                    "none": 4, name: rnd["demos"][name]}
    assert (loop_dir / "scaling.html").read_text().count("<h2>") >= 2
    assert (loop_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"

    # a rerun does no work and rewrites no round; a loop killed after its evaluations (no
    # round record yet) resumes without recollecting, retraining or re-evaluating
    before = _files(scale_dir, loop_dir)
    res = _plan(scale_dir)
    assert res.exit_code == 0 and "0 models trained, 0 reused" in res.output, res.output
    assert _files(scale_dir, loop_dir) == before
    (loop_dir / "round-2" / "round.json").unlink()
    (loop_dir / "round-2" / "curves.json").unlink()
    res = _plan(scale_dir)
    assert res.exit_code == 0, res.output
    assert "0 models trained" in res.output
    after = _files(scale_dir, loop_dir)
    assert {p: after[p] for p in before if "round-2" not in p.parts} == \
        {p: v for p, v in before.items() if "round-2" not in p.parts}
    assert json.loads((loop_dir / "summary.json").read_text())["rounds"] == [r1, r2]

    # other settings in the same loop directory are refused, nothing changes
    res = _plan(scale_dir, "--method", "equal")
    assert res.exit_code == 2
    assert "other settings (method: 'greedy' != 'equal')" in " ".join(res.output.split())


FITS = {"lighting": CurveFit(0.5, -0.2, 10.0), "texture": CurveFit(3.0, -0.8, 10.0),
        "camera": CurveFit(0.6, -0.4, 5.0)}


def _rounds(config, fits=FITS):
    demos, out = {n: 0 for n in fits}, []
    for r in range(1, config.rounds + 1):
        added = plan_round(fits, demos, config, r)
        demos = {n: demos[n] + added[n] for n in fits}
        out.append(demos)
    return out


@pytest.mark.parametrize("rounds", [1, 2, 3, 7])
def test_rounds_on_unchanged_curves_end_at_the_one_shot_plan(rounds):
    # greedy on concave curves continues where it stopped; equal tops up to the equal split
    for method in ("greedy", "equal"):
        got = _rounds(AdaptiveConfig(budget=30, rounds=rounds, method=method))
        assert got[-1] == plan_budget(FITS, 30, method=method).demos, method
        for r, demos in enumerate(got, 1):  # never more than the budget so far
            assert sum(demos.values()) <= r * 30 / rounds + 1e-9


@pytest.mark.parametrize("method", ["greedy", "fsc_topk", "equal", "worst_first"])
def test_each_round_spends_its_share_within_costs(method):
    config = AdaptiveConfig(budget=40, rounds=4, method=method, costs={"texture": 3})
    got = _rounds(config)
    cost = [d["lighting"] + 3 * d["texture"] + d["camera"] for d in got]
    for r, c in enumerate(cost, 1):
        assert r * 10 - 1 < c <= r * 10  # the leftover is smaller than the cheapest (1)
    assert all(b[n] >= a[n] for a, b in itertools.pairwise(got) for n in FITS)  # none taken back


def test_shifted_curve_is_the_same_law_after_collected_demos():
    fit = CurveFit(0.5, -0.4, 4.0, samples=np.array([[0.5, -0.4, 4.0], [0.6, -0.3, 4.0]]))
    s = shifted(fit, 3)
    x = np.arange(10.0)
    assert np.allclose(s.success(x), fit.success(x + 3))
    assert np.allclose(s.sample_success(x), fit.sample_success(x + 3))
    assert fit.samples[0, 2] == 4.0  # the original is untouched


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rounds", "0"], BAD_ROUNDS.format(value=0)),
        (["--rounds", "-1"], BAD_ROUNDS.format(value=-1)),
        (["--rounds", "7"], "is 0.857143 per round, less than the cheapest demonstration (1)"),
        (["--rounds", "2", "--method", "best"], "planning method must be one of"),
        (["--rounds", "2", "--cost", "physics=0"], "cost of 'physics' must be a finite"),
        (["--rounds", "2", "--backend", "spark"], "backend must be 'serial' or 'ray'"),
        (["--rounds", "2", "--task", "robogen/Push-v0"], "not of --task 'robogen/Push-v0'"),
        (["--backend", "ray"], "--backend 'ray' applies only to the closed loop; add --rounds"),
    ],
    ids=["rounds-0", "rounds-negative", "share-below-one-demo", "method", "cost", "backend",
         "task", "backend-without-rounds"],
)
def test_closed_loop_bad_input_exits_2_and_writes_nothing(scale_dir, tmp_path, args, needle):
    out = tmp_path / "loop"
    before = sorted(p.relative_to(scale_dir) for p in scale_dir.rglob("*")
                    if "adaptive" not in p.parts)
    res = runner.invoke(app, ["plan", "--curves", str(scale_dir), "--budget", "6",
                              "--out", str(out), *args])
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.split()), res.output
    assert not out.exists()
    assert sorted(p.relative_to(scale_dir) for p in scale_dir.rglob("*")
                  if "adaptive" not in p.parts) == before


def test_closed_loop_needs_a_finished_scale_run(scale_dir, tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(scale_dir / "curves.json", lone / "curves.json")
    res = runner.invoke(app, ["plan", "--curves", str(lone), "--budget", "6", "--rounds", "2"])
    assert res.exit_code == 2
    want = NOT_A_FINISHED_SCALE_RUN.format(path=lone, missing="scale.json")
    assert " ".join(want.split()) in " ".join(res.output.split())
    assert sorted(p.name for p in lone.iterdir()) == ["curves.json"]
