"""Every policy is asked for actions before the run directory exists (``probe_policy``): one
that raises is exit 2 naming the exception, nothing written; one that passes the probe but
raises in every nominal episode finishes with exit 3."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from robogen.cli import EXIT_INVALID_EPISODES, POLICY_ALWAYS_RAISED, app
from robogen.rollout.probe import RAISED_IN

FIXTURE = "python:tests/fixtures/faulty_policies.py"
runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _eval(*args: str):
    return runner.invoke(app, ["eval", "--env", "robogen/Reach-v0", "--axes", "physics",
                               "--severities", "1", "--episodes", "2", "--max-steps", "10",
                               "--videos", "0", "--backend", "serial", *args])


@pytest.mark.parametrize(("factory", "error"), [
    ("always_raising", "RuntimeError: policy bug on every call (at "),
    ("old_signature", "TypeError: "),
])
def test_a_policy_that_raises_on_the_first_observation_is_exit_2(tmp_path, factory, error):
    out = tmp_path / "run"
    res = _eval("--policy", f"{FIXTURE}:{factory}", "--out", str(out))
    assert res.exit_code == 2, res.output
    text = _flat(res.output)
    # the call, the episode and the exception are named
    assert RAISED_IN.format(call="act() on a batch of 1", error="").rstrip() in text
    assert error in text
    if factory == "old_signature":
        assert "'deterministic'" in text
    assert not out.exists()


def test_every_policy_is_probed_before_any_run_dir(tmp_path):
    out = tmp_path / "cmp"
    res = _eval("--policy", "expert:reach", "--policy", f"{FIXTURE}:always_raising",
                "--out", str(out))
    assert res.exit_code == 2, res.output
    assert "policy bug on every call" in _flat(res.output)
    assert not out.exists()  # not even the first policy's run


def test_a_policy_that_raises_in_every_nominal_episode_exits_3(tmp_path):
    out = tmp_path / "run"
    res = _eval("--policy", f"{FIXTURE}:breaks_after_two_calls", "--out", str(out))
    assert res.exit_code == EXIT_INVALID_EPISODES, res.output
    head = POLICY_ALWAYS_RAISED.split("{error}")[0].format(run=out)
    assert _flat(head) in _flat(res.output)
    assert "RuntimeError: policy bug after its first two calls" in _flat(res.output)
    report = json.loads((out / "report.json").read_text())  # the run is stored and reported
    nominal = next(c for c in report["conditions"] if c["condition"] == "nominal")
    assert nominal["causes"] == {"policy_error": 2}


def test_a_policy_that_raises_on_some_episodes_only_exits_0(tmp_path):
    """The faulty-half policy acts on the first episode's observation: it runs, and its
    failing episodes are ``policy_error`` (tests/rollout/test_failures.py)."""
    out = tmp_path / "run"
    res = _eval("--policy", f"{FIXTURE}:raising", "--episodes", "8", "--batch-size", "4",
                "--out", str(out))
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    nominal = next(c for c in report["conditions"] if c["condition"] == "nominal")
    assert 0 < nominal["causes"]["policy_error"] < nominal["n"]
