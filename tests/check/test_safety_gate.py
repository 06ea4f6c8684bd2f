"""``robogen check --safety-margin`` (issue 24 §4): a candidate as successful as the baseline
but rougher fails on the safety metric that rose; an identical one passes; runs without
safety metrics and bad margins are refused before anything is decided."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from robogen.check.config import CheckConfig
from robogen.check.records import REGRESSION, SAFETY_OK
from robogen.check.run import CheckOutcome
from robogen.check.run import run_check as _run_check
from robogen.configs import load_eval_config
from robogen.errors import InvalidSpecError
from robogen.runs.evaluation import evaluate

JITTERY = "python:tests/fixtures/jittery_policies.py:jittery"


def _run(out, policy: str, safety: bool = True, episodes: int = 12):
    cfg = load_eval_config(None, env="robogen/Reach-v0", policy=policy, axes=["physics"],
                           severities=[1.0], combined=False, episodes=episodes, batch_size=4,
                           seed=0, videos=0, backend="serial", safety=safety, out=out)
    return evaluate(cfg).run_dir


def run_check(baseline, candidate, **options) -> CheckOutcome:
    return _run_check(CheckConfig(baseline, candidate, **options))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety-gate")
    return {"expert": _run(root / "expert", "expert:reach"),
            "expert2": _run(root / "expert2", "expert:reach"),
            "jittery": _run(root / "jittery", JITTERY),
            "plain": _run(root / "plain", "expert:reach", safety=False),
            "expert4": _run(root / "expert4", "expert:reach", episodes=4),
            "jittery4": _run(root / "jittery4", JITTERY, episodes=4)}


def test_a_rougher_candidate_fails_on_jerk(runs, tmp_path):
    out = run_check(runs["expert"], runs["jittery"], safety_margin=0.2, out=tmp_path / "c")
    r = out.result
    assert r.verdict == REGRESSION and r.exit_code == 1 and r.safety_margin == 0.2
    jerk = {s.condition: s for s in r.safety if s.metric == "action_jerk"}
    assert set(jerk) == {"nominal", "physics@1"}
    for s in jerk.values():
        assert s.verdict == REGRESSION and s.n_pairs == 12
        assert s.ci_low > s.tolerance == pytest.approx(0.2 * s.baseline_mean)
    assert "safety: action_jerk" in r.regressions
    assert all(c.verdict != REGRESSION for c in r.conditions)  # success did not regress
    md = (tmp_path / "c" / "check.md").read_text()
    assert "**Safety** (margin 0.2" in md and "| nominal | action_jerk" in md
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "c" / "check.xml").iter("testcase")}
    assert cases["safety: action_jerk"].find("failure") is not None
    saved = json.loads((tmp_path / "c" / "check.json").read_text())
    assert saved["safety_margin"] == 0.2 and len(saved["safety"]) == len(r.safety)


def test_the_same_policy_passes_the_safety_gate(runs, tmp_path):
    out = run_check(runs["expert"], runs["expert2"], safety_margin=0.0, out=tmp_path / "c")
    assert out.result.safety and all(s.verdict == SAFETY_OK for s in out.result.safety)
    assert all(s.diff == 0 for s in out.result.safety)  # the same episodes, the same numbers
    assert out.result.exit_code == 0


def test_runs_without_safety_metrics_and_bad_margins_are_refused(runs, tmp_path):
    with pytest.raises(InvalidSpecError, match="recorded none; evaluate it with robogen eval "
                                               "--safety"):
        run_check(runs["plain"], runs["jittery"], safety_margin=0.2, out=tmp_path / "c")
    assert not (tmp_path / "c").exists()
    for bad in ("-1", "nan", "1e308"):
        done = subprocess.run(
            [sys.executable, "-m", "robogen.cli", "check", "--baseline", str(runs["expert"]),
             "--candidate", str(runs["jittery"]), f"--safety-margin={bad}", "--out",
             str(tmp_path / "d")], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (bad, done.stderr)
        assert "--safety-margin must be a number in [0, 100]" in " ".join(done.stderr.split())
        assert not (tmp_path / "d").exists()
    run_check(runs["expert"], runs["expert2"], safety_margin=-0.0, out=tmp_path / "z")
    assert "margin 0 of" in (tmp_path / "z" / "check.md").read_text()


def test_too_few_pairs_to_decide_is_inconclusive_not_a_pass(runs, tmp_path):
    """4 pairs give at best p = 1/16, never below 0.05 / 12 tests: the rougher candidate's
    jerk increase is undecided, not 'no significant increase'."""
    out = run_check(runs["expert4"], runs["jittery4"], safety_margin=0.2, out=tmp_path / "c")
    r = out.result
    jerk = [s for s in r.safety if s.metric == "action_jerk"]
    assert jerk and all(s.verdict == "inconclusive" and s.diff > s.tolerance for s in jerk)
    assert all(s.verdict != REGRESSION for s in r.safety)
    assert r.verdict == "inconclusive" and r.exit_code == 0
    md = (tmp_path / "c" / "check.md").read_text()
    assert "so few pairs cannot decide" in md and "run more episodes" in md
    strict = run_check(runs["expert4"], runs["jittery4"], safety_margin=0.2,
                       fail_on_inconclusive=True, out=tmp_path / "s")
    assert strict.result.exit_code == 1


def test_compare_lists_the_safety_differences_between_policies(runs, tmp_path):
    from robogen.reports.compare import compare_dirs

    files = compare_dirs([runs["expert"], runs["jittery"]], tmp_path / "cmp")
    saved = json.loads(files["json"].read_text())
    jerk = [d for d in saved["safety"] if d["metric"] == "action_jerk"]
    assert [d["condition"] for d in jerk] == ["nominal", "physics@1"]
    for d in jerk:  # b (the jittery policy) is rougher on the same episodes
        assert d["run_b"] == "jittery" and d["n_pairs"] == 12 and d["ci_low"] > 0
        assert d["difference"] == pytest.approx(d["mean_b"] - d["mean_a"])
    md = files["md"].read_text()
    assert "**Safety between policies**" in md and "| nominal | action_jerk" in md
    assert "<h2>Safety between policies</h2>" in files["html"].read_text()
    files = compare_dirs([runs["expert"], runs["plain"]], tmp_path / "cmp2")
    assert "not compared: plain recorded no safety metrics" in files["md"].read_text()
