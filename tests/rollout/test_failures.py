"""A failing episode is recorded with its cause, never dropped or counted as a success."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from robogen.configs import load_eval_config
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate

FIXTURE = "tests/fixtures/faulty_policies.py"


@pytest.mark.parametrize("factory", ["raising", "nan_actions"])
def test_policy_errors_fail_only_their_episodes(tmp_path, factory):
    cfg = load_eval_config(
        None,
        env="robogen/Reach-v0",
        policy=f"python:{FIXTURE}:{factory}",
        axes=["physics"],
        severities=[1.0],
        episodes=8,
        batch_size=4,
        backend="serial",
        videos=0,
        out=tmp_path / "r",
    )
    out = evaluate(cfg)
    results = ResultStore.open(out.run_dir).load_results()
    assert len(results) == 16  # nothing dropped
    bad = [r for r in results if r.cause == "policy_error"]
    good = [r for r in results if r.cause != "policy_error"]
    assert bad and good  # the faulty half failed, the rest ran on in the same batch
    assert not any(r.success for r in bad)
    assert all(r.success for r in good)  # the Reach expert succeeds whenever it is not broken
    needle = "policy bug in slot" if factory == "raising" else "non-finite action"
    assert all(needle in r.error for r in bad)
    report = json.loads((out.run_dir / "report.json").read_text())
    nominal = next(c for c in report["conditions"] if c["condition"] == "nominal")
    assert nominal["causes"]["policy_error"] == sum(r.condition == "nominal" for r in bad)
    assert nominal["successes"] == sum(r.condition == "nominal" for r in good)
    # the error text reaches the report, not only the episode table
    assert report["errors"] and report["errors"][0][0] == "policy_error"
    assert needle in (out.run_dir / "report.md").read_text()


def test_gl_backend_chosen_before_mujoco_import():
    drop = ("MUJOCO_GL", "DISPLAY", "PYOPENGL_PLATFORM")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    code = "import robogen, os, mujoco; print(os.environ['MUJOCO_GL'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "egl", out.stderr
    env["MUJOCO_GL"] = "osmesa"
    code = "import robogen, os; print(os.environ['MUJOCO_GL'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "osmesa"  # a user's choice is kept


def test_report_rebuild_keeps_video_labels(tmp_path):
    from robogen.runs.evaluation import rebuild_report

    cfg = load_eval_config(
        None, env="robogen/Reach-v0", policy="random", axes=["physics"], severities=[1.0],
        episodes=2, batch_size=2, backend="serial", videos=1, out=tmp_path / "r",
    )
    first = (evaluate(cfg).run_dir / "report.md").read_text()
    again = (rebuild_report(tmp_path / "r").run_dir / "report.md").read_text()
    label = "physics: physics@1 episode"
    assert label in first and label in again
    assert list((tmp_path / "r" / "videos").glob("*.mp4"))


def test_a_unit_whose_worker_died_is_recorded_episode_by_episode(tmp_path):
    """Ray retries a dead worker once; then every episode of the unit is a recorded failure."""
    from robogen.rollout.backend import failed_unit_results
    from robogen.rollout.plan import episode_seed
    from robogen.rollout.runner import plan_units, prepare

    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach", episodes=6,
                           batch_size=3, axes=["physics"], severities=[1.0], combined=False,
                           backend="serial", videos=0, out=tmp_path / "r")
    m = prepare(cfg)
    unit = plan_units(m)[-1]
    results = failed_unit_results(m, unit, "worker_died", "worker died: MemoryError")
    assert [r.episode_index for r in results] == list(unit.episode_indices)
    assert [r.seed for r in results] == [episode_seed(m.seed, i) for i in unit.episode_indices]
    assert all(not r.success and r.cause == "worker_died" and "MemoryError" in r.error
               and r.condition == unit.condition.name and r.unit_id == unit.unit_id
               for r in results)
