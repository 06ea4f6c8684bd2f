"""The per-step axes end to end (issue 24 §2): ``robogen eval`` runs ``sensor`` and ``action``
like every axis: recorded per episode, paired with nominal, a gap with an interval; a
privileged expert is flagged as not observing the sensor axis."""

from __future__ import annotations

import json

from robogen.configs import load_eval_config
from robogen.reports.records import STATUS_NOT_OBSERVED, STATUS_OK
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate

CKPT = "robogen/assets/checkpoints/ppo_reacher.zip"
STATS = "robogen/assets/checkpoints/ppo_reacher_vecnormalize.pkl"


def _run(tmp_path, **kw):
    cfg = load_eval_config(None, axes=["sensor", "action"], severities=[1.0], combined=False,
                           seed=0, videos=0, backend="serial", out=tmp_path / "r", **kw)
    out = evaluate(cfg)
    report = json.loads((out.run_dir / "report.json").read_text())
    return ResultStore.open(out.run_dir), report


def test_a_state_policy_loses_success_to_sensor_and_action_faults(tmp_path):
    """The shipped Reacher PPO (state) at severity 1, 40 paired episodes: both axes cost it
    success, the sensor axis significantly (measured: nominal 0.55, sensor gap +0.28
    [+0.12, +0.42], action +0.20 [+0.03, +0.38])."""
    store, report = _run(tmp_path, env="gymnasium/Reacher-v5", policy=f"sb3:{CKPT}",
                         vecnormalize=STATS, episodes=40, batch_size=8)
    assert report["manifest"]["policy_inputs"] == ["observation"]
    gaps = {g["axis"]: g for g in report["gaps"]}
    for axis in ("sensor", "action"):
        g = gaps[axis]
        assert g["status"] == STATUS_OK and g["n_pairs"] == 40
        assert g["gap"] > 0.1, g
    assert gaps["sensor"]["ci_low"] > 0, gaps["sensor"]
    results = store.load_results()
    kinds = {a: set() for a in ("sensor", "action")}
    for r in results:
        records = json.loads(r.perturbations_json)
        if r.condition == "nominal":
            assert records == [] and r.changed_axes == ()
            continue
        (rec,) = records
        assert rec["changed"] is True and r.changed_axes == (rec["axis"],)
        kinds[rec["axis"]].add(rec["values"]["kind"])
        assert 0.5 <= rec["values"]["magnitude"] <= 1.0
    # split "all": every kind of each axis occurs over 40 episodes
    assert kinds == {"sensor": {"gaussian_noise", "jpeg", "blur", "frame_drop"},
                     "action": {"noise", "latency", "repeat", "bias"}}


def test_a_privileged_expert_does_not_observe_the_sensor_axis(tmp_path):
    _, report = _run(tmp_path, env="robogen/Reach-v0", policy="expert:reach", episodes=6,
                     batch_size=3, max_steps=60)
    assert report["manifest"]["policy_inputs"] == ["simulator"]
    gaps = {g["axis"]: g for g in report["gaps"]}
    assert gaps["sensor"]["status"] == STATUS_NOT_OBSERVED
    assert "reads the simulator's state" in gaps["sensor"]["note"]
    assert gaps["sensor"]["gap"] == 0.0  # the expert never sees the corrupted observations
    assert gaps["action"]["status"] == STATUS_OK
