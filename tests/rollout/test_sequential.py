"""``robogen eval --episodes auto``: stop replay, rounds, real runs, resume, bad input."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.configs import load_eval_config
from robogen.reports.writers import load_report
from robogen.rollout.manifest import spec_hash
from robogen.rollout.sequential import round_units
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate, resume
from robogen.stats.sequential import (
    REASON_NOMINAL,
    REASON_RUNNING,
    ConditionTarget,
    replay_condition,
    replay_run,
)
from robogen.stats.stopping import simulate_stop_rule
from robogen.types import SEQUENTIAL_METHOD, Condition, EvalManifest, SequentialRule, WorkUnit

LIGHT = "python:tests/fixtures/sequential_policies.py:light_sensitive"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest_before_record_fields.json"
runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ replay (no envs)


def _stream(values: np.ndarray) -> tuple[dict[int, bool | None], dict[int, bool | None]]:
    """Nominal/perturbed outcomes whose paired differences are ``values`` (0/1 gaps)."""
    nom = {i: True for i in range(len(values))}
    per = {i: not bool(v) for i, v in enumerate(values)}
    return nom, per  # type: ignore[return-value]


@pytest.mark.parametrize("gap", [0.0, 0.3, 1.0], ids=["gap-0", "gap-0.3", "gap-1"])
def test_replay_stops_where_the_tested_stop_rule_does(gap):
    rule = SequentialRule(target_halfwidth=0.1, max_episodes=400, batch_size=8)
    rng = np.random.default_rng(7)
    d = (rng.random(400) < gap).astype(np.float64)
    nom, per = _stream(d)
    stop = replay_condition("c", rule, nom, per)
    from robogen.stats.sequential import stop_rule

    n, reasons, lo, hi = simulate_stop_rule(d[None, :], stop_rule(rule))
    assert (stop.episodes, stop.reason) == (int(n[0]), reasons[0])
    assert (stop.ci_low, stop.ci_high) == (float(lo[0]), float(hi[0]))
    assert stop.ci_low <= gap <= stop.ci_high


def test_replay_of_a_partial_store_asks_for_the_same_next_boundary():
    rule = SequentialRule(target_halfwidth=0.1, max_episodes=400, batch_size=8)
    nom, per = _stream(np.zeros(400))
    full = replay_condition("c", rule, nom, per)
    assert full.reason == "width" and full.episodes == 72
    cut = {i: v for i, v in per.items() if i < full.episodes - 3}  # killed mid-batch
    part = replay_condition("c", rule, nom, cut)
    assert part.reason == REASON_RUNNING and part.target == full.episodes
    assert part.episodes < full.episodes


def test_invalid_episodes_drop_their_pair_and_the_threshold_decides():
    rule = SequentialRule(target_halfwidth=0.05, max_episodes=200, batch_size=8,
                          gap_threshold=0.2)
    nom, per = _stream(np.ones(200))
    nom[3] = None  # an infrastructure failure in nominal drops pair 3
    stop = replay_condition("c", rule, nom, per)
    assert stop.reason == "decided" and stop.ci_low > 0.2
    assert stop.n_pairs == stop.episodes - 1


def test_nominal_runs_as_many_indices_as_any_condition_needs():
    rule = SequentialRule(target_halfwidth=0.1, max_episodes=400, batch_size=8)
    nom = {i: True for i in range(16)}
    out = {"nominal": nom, "a": {i: False for i in range(16)}, "b": {i: True for i in range(8)}}
    stops = {s.condition: s for s in replay_run(rule, "nominal", out)}
    assert stops["a"].reason == REASON_RUNNING and stops["a"].target == 32
    assert stops["nominal"].target == 32 and stops["nominal"].reason == REASON_RUNNING


def test_round_orders_widest_relative_to_target_first():
    a, b = Condition("a"), Condition("b")
    units = [WorkUnit(0, a, (0, 1)), WorkUnit(1, a, (2, 3)), WorkUnit(2, b, (0, 1)),
             WorkUnit(3, b, (2, 3))]
    targets = {"a": ConditionTarget(4, False, 1.5), "b": ConditionTarget(4, False, 3.0)}
    assert [u.unit_id for u in round_units(units, {0}, targets)] == [2, 3, 1]
    assert [u.unit_id for u in round_units(units, {0}, targets, "plan")] == [1, 2, 3]
    targets["a"] = ConditionTarget(2, True, 1.0)
    assert [u.unit_id for u in round_units(units, {0}, targets)] == [2, 3]


def test_old_manifests_load_without_a_rule_and_keep_their_hash():
    d = json.loads(FIXTURE.read_text())
    m = EvalManifest.from_dict(d)
    assert m.sequential is None and spec_hash(m) == d["spec_hash"]
    rule = SequentialRule(0.05, 1000, 8, 0.1)
    auto = dataclasses.replace(m, sequential=rule)
    assert spec_hash(auto) != d["spec_hash"]  # the rule decides which episodes exist
    again = EvalManifest.from_dict(json.loads(json.dumps(dataclasses.asdict(auto))))
    assert again.sequential == rule


# ------------------------------------------------------------------ real runs


def _auto_cfg(out: Path, **kw):
    base = dict(env="robogen/Reach-v0", policy=LIGHT, axes=["lighting", "physics"],
                severities=[1.0], combined=False, episodes="auto", target_halfwidth=0.1,
                max_episodes=400, batch_size=8, seed=2, backend="serial", videos=0, out=out)
    base.update(kw)
    return load_eval_config(None, **base)


def _counts(run_dir: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in ResultStore.open(run_dir).load_results():
        out[r.condition] = out.get(r.condition, 0) + 1
    return out


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("auto") / "run"
    evaluate(_auto_cfg(out))
    return out


def test_large_gap_stops_early_and_identical_conditions_contain_zero(auto_run):
    report = load_report(auto_run)
    seq = report.sequential
    assert seq is not None and seq.rule.method == SEQUENTIAL_METHOD
    light, phys = seq.stop("lighting@1"), seq.stop("physics@1")
    # the lighting-blind policy fails every relit episode: gap 1, stopped by width at 72
    assert (light.reason, light.episodes) == ("width", 72)
    assert light.ci_low > 0.8 and light.halfwidth <= 0.1
    # physics leaves the expert's success unchanged: the interval contains 0
    assert phys.reason == "width" and phys.ci_low <= 0.0 <= phys.ci_high
    nominal = seq.stop("nominal")
    assert nominal.reason == REASON_NOMINAL
    assert nominal.episodes == max(light.episodes, phys.episodes)
    # nothing ran beyond the stops, and the printed gaps are the confidence sequence's
    assert _counts(auto_run) == {s.condition: s.episodes for s in seq.stops}
    for g in report.gaps:
        s = seq.stop(g.condition)
        assert (g.ci_low, g.ci_high, g.ci_method) == (s.ci_low, s.ci_high, SEQUENTIAL_METHOD)
    md = (auto_run / "report.md").read_text()
    assert "Sequential evaluation" in md and "Waudby-Smith & Ramdas (2024)" in md
    assert "| lighting@1 | 72 | 72 | half-width reached the target |" in md
    assert "Sequential evaluation" in (auto_run / "report.html").read_text()


def test_killed_auto_run_resumes_to_the_same_stops(tmp_path, auto_run):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "robogen.cli", "eval", "--env", "robogen/Reach-v0",
           "--policy", LIGHT, "--axes", "lighting,physics", "--severities", "1",
           "--no-combined", "--episodes", "auto", "--target-halfwidth", "0.1",
           "--max-episodes", "400", "--batch-size", "8", "--seed", "2", "--backend", "serial",
           "--videos", "0", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "MUJOCO_GL": "egl"})
    parts = out / "episodes"
    deadline = time.time() + 240
    while time.time() < deadline:
        if parts.is_dir() and len(list(parts.glob("unit-*.parquet"))) >= 9:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = ResultStore.open(out).done_units()
    assert 0 < len(before) < 27, "the kill should land mid-run"
    resume(out, backend="serial", videos=0)
    assert _counts(out) == _counts(auto_run)
    a, b = load_report(out).sequential, load_report(auto_run).sequential
    assert a is not None and b is not None and a.stops == b.stops


@pytest.mark.slow  # a Ray cluster start: ~1 min on a busy 2-core machine
def test_serial_and_ray_stop_at_the_same_counts(tmp_path):
    kw = dict(axes=["lighting"], target_halfwidth=0.2, max_episodes=64)
    evaluate(_auto_cfg(tmp_path / "serial", **kw))
    evaluate(_auto_cfg(tmp_path / "ray", backend="ray", workers=2, **kw))
    assert _counts(tmp_path / "serial") == _counts(tmp_path / "ray")
    a, b = load_report(tmp_path / "serial"), load_report(tmp_path / "ray")
    assert a.sequential is not None and a.sequential.stops == b.sequential.stops  # type: ignore[union-attr]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--episodes", "auto", "--target-halfwidth", "0"], "must be in (0, 1)"),
        (["--episodes", "auto", "--target-halfwidth", "1"], "must be in (0, 1)"),
        (["--episodes", "auto", "--max-episodes", "4", "--batch-size", "8"],
         "max_episodes (4, --max-episodes) is below the batch size (8, --batch-size)"),
        (["--episodes", "20", "--target-halfwidth", "0.1"], "only to a sequential run"),
        (["--max-episodes", "100"], "only to a sequential run"),
        (["--episodes", "auto", "--gap-threshold", "1"], "must be in (-1, 1)"),
        (["--episodes", "many"], "positive integer or 'auto', got 'many'"),
        (["--episodes", "auto", "--severities", "sweep"], "cannot be combined with"),
        (["--episodes", "auto", "--policy", "expert:reach"], "several --policy"),
    ],
    ids=["target-0", "target-1", "cap-below-batch", "target-without-auto",
         "cap-without-auto", "threshold-1", "not-a-number", "auto-sweep", "auto-two-policies"],
)
def test_bad_sequential_flags_exit_2_and_write_nothing(tmp_path, args, needle):
    out = tmp_path / "run"
    res = runner.invoke(app, ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach",
                              "--axes", "physics", "--backend", "serial", "--out", str(out),
                              *args])
    assert res.exit_code == 2, res.output
    assert needle in _flat(res.output)
    assert not out.exists()


def test_check_refuses_an_auto_run_as_a_fixed_protocol(tmp_path, auto_run):
    out = tmp_path / "check"
    res = runner.invoke(app, ["check", "--baseline", str(auto_run), "--candidate",
                              "expert:reach", "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "was evaluated with --episodes auto" in _flat(res.output)
    assert not out.exists()
    res = runner.invoke(app, ["compare", str(auto_run), str(auto_run), "--out", str(out)])
    assert res.exit_code == 2 and "--episodes auto" in _flat(res.output)
    assert not out.exists()
