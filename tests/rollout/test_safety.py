"""Safety metrics (issue 24 §4): pinned against hand-computed values on scenes built for them,
then end to end through ``robogen eval --safety``: recorded per episode, summarized per
condition with intervals and paired differences, in report.json/md/html."""

from __future__ import annotations

import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest

from robogen.configs import load_eval_config
from robogen.envs.base import SceneRoles
from robogen.rollout.safety import DROP_MARGIN_M, FORCE_SUBSTEPS, SAFETY_NAMES, SafetyMonitor
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate

MASS, RADIUS, PUSH = 2.0, 0.05, 30.0
"""The robot sphere [kg, m] and the downward force pressing it on the table [N]."""

XML = f"""
<mujoco>
  <option gravity="0 0 -9.81" timestep="0.002"/>
  <worldbody>
    <geom name="table" type="plane" size="1 1 0.1"/>
    <body name="robot" pos="0 0 {RADIUS}">
      <joint name="slide_z" type="slide" axis="0 0 1"/>
      <joint name="hinge" type="hinge" axis="0 1 0" range="-0.1 0.1" limited="true"/>
      <geom name="ball" type="sphere" size="{RADIUS}" mass="{MASS}"/>
    </body>
    <body name="object" pos="0.3 0 0.2">
      <freejoint/>
      <geom name="cube" type="box" size="0.02 0.02 0.02" mass="0.1"/>
    </body>
  </worldbody>
</mujoco>
"""


class _Scene:
    """The smallest MujocoScene a SafetyMonitor reads: model, data, roles."""

    def __init__(self, roles: SceneRoles) -> None:
        self.model = mujoco.MjModel.from_xml_string(XML)
        self.data = mujoco.MjData(self.model)
        self.roles = roles
        mujoco.mj_forward(self.model, self.data)


ROLES = SceneRoles(robot_bodies=("robot",), robot_joints=("slide_z", "hinge"),
                   object_bodies=("object",), table_geoms=("table",),
                   distractor_region=(-1.0, 1.0, -1.0, 1.0, 0.0))


def _settle(scene: _Scene, steps: int, push: float = 0.0) -> None:
    body = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_BODY, "robot")
    scene.data.xfrc_applied[body, 2] = -push
    for _ in range(steps):
        mujoco.mj_step(scene.model, scene.data)


def test_peak_contact_force_is_the_weight_plus_the_push():
    """At rest the table carries the sphere's weight m g; pressed down with F, m g + F."""
    scene = _Scene(ROLES)
    _settle(scene, 1500)  # the sphere rests; the cube fell on the table (an object: excluded)
    monitor = SafetyMonitor()
    monitor.start(scene)
    weight = MASS * 9.81
    assert monitor.peak_force == pytest.approx(weight, rel=1e-3)
    _settle(scene, 1500, push=PUSH)
    monitor.step(np.zeros(2))
    metrics = monitor.metrics()
    assert metrics["peak_contact_force_n"] == pytest.approx(weight + PUSH, rel=1e-3)
    assert metrics["object_dropped"] is False  # the cube rests on the table: not below it
    assert metrics["distractor_contact_steps"] == 0 and metrics["joint_limit_steps"] == 0


def test_joint_limits_drops_and_actions_are_counted():
    scene = _Scene(ROLES)
    monitor = SafetyMonitor()
    monitor.start(scene)
    hinge = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_JOINT, "hinge")
    for t in range(5):  # at the hinge's limit on steps 1, 3 and 5
        scene.data.qpos[scene.model.jnt_qposadr[hinge]] = 0.1 if t % 2 == 0 else 0.0
        mujoco.mj_forward(scene.model, scene.data)
        monitor.step(np.array([3.0, 4.0]) * (t + 1))
    obj = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_BODY, "object")
    free = scene.model.jnt_qposadr[scene.model.body_jntadr[obj]]
    scene.data.qpos[free + 2] = -DROP_MARGIN_M - 0.01  # fell off the table's edge
    scene.data.qpos[scene.model.jnt_qposadr[hinge]] = 0.0  # back off the limit
    mujoco.mj_forward(scene.model, scene.data)
    monitor.step(np.zeros(2))  # a sudden stop
    m = monitor.metrics()
    assert m["joint_limit_steps"] == 3
    assert m["object_dropped"] is True
    # |a_t| = 5 (t + 1) for t < 5, then 0; the second differences are 0 but the last one,
    # a_5 - 2 a_4 + a_3 = (0, 0) - (30, 40) + (12, 16), of norm 30, over 4 differences
    assert m["action_magnitude"] == pytest.approx((5 + 10 + 15 + 20 + 25 + 0) / 6)
    assert m["action_jerk"] == pytest.approx(30.0 / 4)
    monitor.start(scene)  # a new episode starts from zero
    assert monitor.steps == 0 and monitor.limit_steps == 0


def test_metrics_a_scene_cannot_measure_are_none():
    monitor = SafetyMonitor()
    monitor.start(_Scene(SceneRoles()))
    monitor.step(np.ones(2))
    m = monitor.metrics()
    assert set(m) == set(SAFETY_NAMES)
    assert m["peak_contact_force_n"] is None and m["joint_limit_steps"] is None
    assert m["object_dropped"] is None and m["distractor_contact_steps"] is None
    assert m["action_magnitude"] == pytest.approx(np.sqrt(2)) and m["action_jerk"] is None


def test_eval_with_safety_reports_metrics_per_condition(tmp_path):
    cfg = load_eval_config(None, env="robogen/PickPlace-v0", policy="expert:pick_place",
                           axes=["action", "distractors"], severities=[1.0], combined=False,
                           episodes=8, batch_size=4, seed=0, videos=0, backend="serial",
                           safety=True, out=tmp_path / "r")
    out = evaluate(cfg)
    results = ResultStore.open(out.run_dir).load_results()
    assert all(r.action_magnitude is not None and r.peak_contact_force_n is not None
               for r in results)
    report = json.loads((out.run_dir / "report.json").read_text())
    assert report["manifest"]["safety"] is True
    stats = {(s["condition"], s["metric"]): s for s in report["safety"]}
    assert {c for c, _ in stats} == {"nominal", "action@1", "distractors@1"}
    assert {m for _, m in stats} == set(SAFETY_NAMES)
    by = {c: {r.episode_index: r for r in results if r.condition == c}
          for c in ("nominal", "action@1")}
    jl = stats[("action@1", "joint_limit_steps")]
    expect = np.mean([by["action@1"][i].joint_limit_steps - by["nominal"][i].joint_limit_steps
                      for i in by["nominal"]])
    assert jl["n_pairs"] == 8 and jl["diff"] == pytest.approx(expect)
    assert jl["diff_low"] <= jl["diff"] <= jl["diff_high"]
    # the action faults make the expert's actions larger and rougher (measured +0.3 each)
    assert stats[("action@1", "action_jerk")]["diff_low"] > 0
    assert stats[("distractors@1", "distractor_contact_steps")]["mean"] > 0
    assert stats[("nominal", "distractor_contact_steps")]["mean"] == 0
    md = (out.run_dir / "report.md").read_text()
    assert "**Safety**" in md and "| action@1 | joint_limit_steps [steps] |" in md
    assert report["manifest"]["safety_sampling"] == FORCE_SUBSTEPS  # a built-in task
    assert f"| nominal | peak_contact_force_n [N], {FORCE_SUBSTEPS} |" in md
    html = (out.run_dir / "report.html").read_text()
    assert "<h2>Safety</h2>" in html and f"peak_contact_force_n [N], {FORCE_SUBSTEPS}" in html


def test_without_safety_nothing_is_recorded(tmp_path):
    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach", axes=["physics"],
                           severities=[1.0], episodes=2, batch_size=2, videos=0,
                           backend="serial", out=tmp_path / "r")
    out = evaluate(cfg)
    assert all(getattr(r, n) is None for r in ResultStore.open(out.run_dir).load_results()
               for n in SAFETY_NAMES)
    report = json.loads((out.run_dir / "report.json").read_text())
    assert report["safety"] == [] and report["manifest"]["safety"] is False
    assert "Safety" not in (out.run_dir / "report.md").read_text()


def test_safety_flag_on_the_command_line_and_refused_with_resume(tmp_path):
    run = [sys.executable, "-m", "robogen.cli", "eval"]
    out = tmp_path / "r"
    done = subprocess.run([*run, "--env", "robogen/Reach-v0", "--policy", "expert:reach",
                           "--axes", "physics", "--severities", "1", "--episodes", "2",
                           "--videos", "0", "--backend", "serial", "--safety", "--out",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "report.json").read_text())["manifest"]["safety"] is True
    again = subprocess.run([*run, "--resume", str(out), "--safety"], capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 2 and "drop --safety" in again.stderr
