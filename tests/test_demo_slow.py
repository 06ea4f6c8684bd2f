"""The demo's evaluations end to end (make check-slow): known success rates and interval widths."""

from __future__ import annotations

import json

import pytest

from robogen.configs import load_eval_config
from robogen.rollout.runner import evaluate

pytestmark = pytest.mark.slow

CKPT = "sb3:robogen/assets/checkpoints/ppo_reacher.zip"
STATS = "robogen/assets/checkpoints/ppo_reacher_vecnormalize.pkl"


def _run(tmp_path, **kw):
    cfg = load_eval_config(None, severities=[0.5, 1.0], episodes=80, seed=0, videos=1,
                           out=tmp_path / "run", **kw)
    out = evaluate(cfg)
    return out, json.loads((out.run_dir / "report.json").read_text())


def test_demo_reacher_checkpoint(tmp_path):
    out, report = _run(tmp_path, env="gymnasium/Reacher-v5", policy=CKPT, vecnormalize=STATS)
    conds = {c["condition"]: c for c in report["conditions"]}
    assert len(conds) == 1 + 7 * 2 + 2
    nominal = conds["nominal"]
    assert nominal["n"] == 80
    assert 0.55 <= nominal["success_rate"] <= 0.85  # the shipped checkpoint: 0.685 over 200 seeds
    # intervals narrower than +-0.15 everywhere (the demo's promise)
    for c in conds.values():
        assert c["ci_high"] - c["ci_low"] < 0.30, c["condition"]
    for g in report["gaps"]:
        if g["status"] in ("ok", "not observed by this policy"):
            assert g["ci_high"] - g["ci_low"] < 0.30, g["condition"]
    # a state policy does not see visual axes; physical ones cost it success
    gaps = {g["condition"]: g for g in report["gaps"]}
    assert gaps["lighting@1"]["status"] == "not observed by this policy"
    assert gaps["lighting@1"]["gap"] == 0.0
    assert gaps["embodiment@1"]["gap"] > 0.1
    assert (out.run_dir / "report.html").stat().st_size > 20_000
    assert list((out.run_dir / "videos").glob("*.mp4"))


def test_demo_pickplace_expert(tmp_path):
    _, report = _run(tmp_path, env="robogen/PickPlace-v0", policy="expert:pick_place")
    conds = {c["condition"]: c for c in report["conditions"]}
    assert conds["nominal"]["successes"] == 80  # the expert succeeds in every nominal episode
    assert conds["nominal"]["ci_low"] > 0.95
