"""``robogen check`` end to end on real MuJoCo runs of the Reach task (serial backend)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from robogen.check import REGRESSION, load_check
from robogen.check.inputs import load_saved
from robogen.cli import app
from robogen.errors import RunDirError

FIXTURES = Path(__file__).parent / "degraded_policies.py"
DEGRADED = f"python:{FIXTURES}:nominal_kinematics_reach"
WRONG_ACTIONS = f"python:{FIXTURES}:wrong_action_space"
EPISODES = 48


def _eval(out: Path, env: str, policy: str, axes: str, episodes: int) -> None:
    res = CliRunner().invoke(app, [
        "eval", "--env", env, "--policy", policy, "--axes", axes, "--severities", "1",
        "--episodes", str(episodes), "--no-combined", "--backend", "serial", "--videos", "0",
        "--seed", "0", "--out", str(out),
    ])
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Reach expert: nominal, physics@1, embodiment@1 x 48 episodes (all succeed)."""
    out = tmp_path_factory.mktemp("check") / "baseline"
    _eval(out, "robogen/Reach-v0", "expert:reach", "physics,embodiment", EPISODES)
    return out


def _check(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["check", *args, "--backend", "serial"])
    return res.exit_code, res.output


def test_degraded_candidate_fails_on_the_axis_it_hurts(baseline_run: Path, tmp_path: Path) -> None:
    code, output = _check("--baseline", str(baseline_run), "--candidate", DEGRADED,
                          "--margin", "0.1", "--out", str(tmp_path))
    assert code == 1, output
    result = load_check(tmp_path)
    assert result.design == "paired"
    assert result.candidate.kind == "evaluated" and result.candidate.episodes_run == 3 * EPISODES
    verdicts = {a.axis: a.verdict for a in result.axes}
    assert verdicts == {"nominal": "pass", "physics": "pass", "embodiment": REGRESSION}
    emb = result.condition("embodiment@1")
    assert emb.baseline_rate == 1.0 and emb.candidate_rate <= 0.5
    # the candidate ran under the baseline's manifest: same seeds, episodes, conditions
    cand = load_saved(tmp_path / "candidate")
    base = load_saved(baseline_run)
    assert cand.manifest.seed == base.manifest.seed
    assert cand.manifest.conditions == base.manifest.conditions
    assert (tmp_path / "candidate" / "report.json").is_file()
    suite = ET.parse(tmp_path / "check.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"nominal", "physics", "embodiment"}
    assert cases["embodiment"].find("failure") is not None
    assert cases["physics"].find("failure") is None and cases["physics"].find("skipped") is None
    assert "❌ regression on embodiment" in (tmp_path / "check.md").read_text()


def test_sequential_mode_stops_early_and_says_what_it_saved(
    baseline_run: Path, tmp_path: Path
) -> None:
    code, output = _check("--baseline", str(baseline_run), "--candidate", DEGRADED,
                          "--margin", "0.1", "--sequential", "--looks", "3", "--out",
                          str(tmp_path))
    assert code == 1, output
    result = load_check(tmp_path)
    seq = result.sequential
    assert seq is not None and seq.schedule == (16, 32, 48)
    assert result.axis("embodiment").verdict == REGRESSION
    assert result.condition("embodiment@1").decided_at < EPISODES
    assert 0 < seq.episodes_saved == seq.episodes_budget - seq.episodes_run
    assert f"{seq.episodes_saved} saved" in output
    # the partial candidate run holds exactly the episodes that ran
    partial = load_saved(tmp_path / "candidate", require_complete=False)
    assert sum(n for _, n in partial.counts.values()) == seq.episodes_run
    with pytest.raises(RunDirError, match="incomplete"):  # a user's unfinished run is refused
        load_saved(tmp_path / "candidate")


def test_same_policy_against_its_own_run_is_no_regression(
    baseline_run: Path, tmp_path: Path
) -> None:
    code, output = _check("--baseline", str(baseline_run), "--candidate", str(baseline_run),
                          "--margin", "0.1", "--out", str(tmp_path))
    assert code == 0, output
    assert load_check(tmp_path).verdict == "pass"


def test_inconclusive_says_how_many_pairs_would_decide(baseline_run: Path, tmp_path: Path
                                                       ) -> None:
    """The same 48 episodes at the default margin 0.05 cannot pass (exit 0, inconclusive); the
    terminal, check.md and check.json give the planning estimate: no discordant pair, so
    ceil(19 z^2) pairs with z = z_{1 - 0.05 / 3} over the 3 tested conditions = 87."""
    code, output = _check("--baseline", str(baseline_run), "--candidate", str(baseline_run),
                          "--out", str(tmp_path))
    assert code == 0, output
    line = ("**Episodes to decide** (planning estimate, not a guarantee: episodes per run at "
            "which the observed success rates would decide (normal approximation to the score "
            "test at level alpha / 3, Holm's strictest step over 3 tested conditions); now 48): "
            "nominal ~87 pairs; physics@1 ~87 pairs; embodiment@1 ~87 pairs.")
    assert line in output and line in (tmp_path / "check.md").read_text()
    result = load_check(tmp_path)
    assert result.verdict == "inconclusive"
    assert [c.episodes_to_decide for c in result.conditions] == [87, 87, 87]


def test_baseline_from_another_task_is_exit_2(baseline_run: Path, tmp_path: Path) -> None:
    push = tmp_path / "push"
    _eval(push, "robogen/Push-v0", "expert:push", "physics,embodiment", 4)
    code, output = _check("--baseline", str(push), "--candidate", str(baseline_run),
                          "--out", str(tmp_path / "out"))
    assert code == 2
    assert "env_id: baseline \"robogen/Push-v0\" vs candidate \"robogen/Reach-v0\"" in \
        " ".join(output.split())
    assert not (tmp_path / "out").exists()  # refused before anything was written
    # a policy candidate is evaluated under the saved baseline's manifest: its env, not --env
    code, output = _check("--baseline", str(push), "--candidate", "expert:reach",
                          "--env", "robogen/Reach-v0", "--out", str(tmp_path / "out2"))
    assert code == 2
    assert "env (spec 'robogen/Reach-v0', manifest 'robogen/Push-v0')" in " ".join(output.split())
    assert not (tmp_path / "out2").exists()


def test_corrupt_report_is_exit_2(baseline_run: Path, tmp_path: Path) -> None:
    bad = tmp_path / "report.json"
    bad.write_text('{"schema_version": 1, "manifest": ')
    code, output = _check("--baseline", str(bad), "--candidate", "expert:reach",
                          "--out", str(tmp_path / "out"))
    assert code == 2
    assert "not JSON" in output
    assert not (tmp_path / "out").exists()


def test_report_only_baseline_is_compared_unpaired(baseline_run: Path, tmp_path: Path) -> None:
    only = tmp_path / "cached"
    only.mkdir()
    shutil.copy(baseline_run / "report.json", only / "report.json")
    code, output = _check("--baseline", str(only / "report.json"), "--candidate",
                          str(baseline_run), "--out", str(tmp_path / "out"))
    assert code == 0, output
    result = json.loads((tmp_path / "out" / "check.json").read_text())
    assert result["design"] == "unpaired" and result["baseline"]["kind"] == "report"


def test_wrong_action_space_is_exit_2_before_any_episode(
    baseline_run: Path, tmp_path: Path
) -> None:
    code, output = _check("--baseline", str(baseline_run), "--candidate", WRONG_ACTIONS,
                          "--out", str(tmp_path))
    assert code == 2
    assert "action space" in output and "Box(-1.0, 1.0, (4,)" in output
    assert not (tmp_path / "candidate" / "episodes").exists()


def test_missing_baseline_and_bad_margin_are_exit_2(tmp_path: Path) -> None:
    code, output = _check("--baseline", str(tmp_path / "nope"), "--candidate", "expert:reach")
    assert code == 2 and "neither an existing run directory" in " ".join(output.split())
    code, output = _check("--baseline", "expert:reach", "--candidate", "expert:reach",
                          "--margin", "1.5")
    assert code == 2 and "margin must be in" in output


def test_two_policies_are_evaluated_from_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "eval.toml"
    spec.write_text('env = "robogen/Reach-v0"\naxes = ["physics"]\nseverities = [1.0]\n'
                    'episodes = 8\nseed = 3\ncombined = false\nbackend = "serial"\n')
    code, output = _check("--baseline", "expert:reach", "--candidate", "expert:reach",
                          "--spec", str(spec), "--sequential", "--looks", "2",
                          "--out", str(tmp_path / "out"))
    assert code == 0, output
    result = load_check(tmp_path / "out")
    assert result.baseline.kind == result.candidate.kind == "evaluated"
    assert result.baseline.seed == 3 and result.design == "paired"
    assert [c.condition for c in result.conditions] == ["nominal", "physics@1"]
    for side in ("baseline", "candidate"):
        assert (tmp_path / "out" / side / "manifest.json").is_file()
    before = (tmp_path / "out" / "check.json").read_bytes()
    # the same command again into the same --out: a clear error, nothing touched
    code, output = _check("--baseline", "expert:reach", "--candidate", "expert:reach",
                          "--spec", str(spec), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "already holds a check (check.json exists)" in output
    assert (tmp_path / "out" / "check.json").read_bytes() == before
    # its saved runs can be compared again in place
    code, output = _check("--baseline", str(tmp_path / "out" / "baseline"),
                          "--candidate", str(tmp_path / "out" / "candidate"),
                          "--out", str(tmp_path / "out"))
    assert code == 0, output


def test_spec_that_contradicts_the_saved_baseline_is_exit_2(
    baseline_run: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "eval.toml"
    spec.write_text('severities = [0.5]\nbackend = "serial"\n')
    code, output = _check("--baseline", str(baseline_run), "--candidate", "expert:reach",
                          "--spec", str(spec), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "severities (spec [0.5], manifest [1.0])" in " ".join(output.split())


def test_missing_statistics_name_checks_own_flag(tmp_path: Path) -> None:
    spec = tmp_path / "eval.toml"
    spec.write_text('env = "gymnasium/Reacher-v5"\naxes = ["physics"]\nseverities = [1.0]\n'
                    'episodes = 2\nseed = 0\ncombined = false\nbackend = "serial"\n')
    ckpt = "sb3:robogen/assets/checkpoints/ppo_reacher.zip"
    code, output = _check("--baseline", ckpt, "--candidate", ckpt, "--spec", str(spec),
                          "--out", str(tmp_path / "out"))
    assert code == 2
    assert "pass --baseline-vecnormalize" in output and "pass --vecnormalize" not in output
    assert not (tmp_path / "out" / "baseline" / "episodes").exists()


def test_a_scale_eval_dir_as_baseline_is_refused_before_evaluating(tmp_path: Path) -> None:
    """`robogen scale` writes runs whose conditions `robogen eval` cannot reproduce."""
    from robogen.scaling.pipeline import eval_manifest, run_eval
    from robogen.types import AxisLevel, Condition

    cond = Condition("physics", (AxisLevel("physics", 1.0, "test"),))
    run_eval(tmp_path / "base", eval_manifest("robogen/Reach-v0", "expert:reach", [cond],
                                              n_episodes=2, seed=0))
    code, output = _check("--baseline", str(tmp_path / "base"), "--candidate", "expert:reach",
                          "--out", str(tmp_path / "out"))
    assert code == 2, output
    flat = " ".join(output.split())
    assert "cannot be re-run for the candidate" in flat and "Nothing was evaluated" in flat
    assert "conditions: baseline" in flat
    assert not (tmp_path / "out").exists()


def test_assert_no_regression_on_policies_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    from robogen.testing import assert_no_regression

    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "eval.toml"
    spec.write_text('env = "robogen/Reach-v0"\naxes = ["physics"]\nseverities = [1.0]\n'
                    'episodes = 6\nseed = 1\ncombined = false\nbackend = "serial"\n')
    result = assert_no_regression("expert:reach", "expert:reach", spec=spec)
    assert result.baseline.kind == result.candidate.kind == "evaluated"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.toml"]  # no ./runs


def test_unwritable_outputs_are_exit_2_before_evaluating(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    base = ["--baseline", "expert:reach", "--candidate", "expert:reach",
            "--env", "robogen/Reach-v0"]
    code, output = _check(*base, "--junit", str(afile / "x.xml"), "--out", str(tmp_path / "o"))
    assert code == 2 and "--junit" in output and "is a file" in output
    assert not (tmp_path / "o").exists()
    code, output = _check(*base, "--out", str(afile))
    assert code == 2 and "--out" in output and "is a file" in output
    code, output = _check(*base, "--junit", str(tmp_path), "--out", str(tmp_path / "o"))
    assert code == 2 and "is a directory" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
