"""A severity sweep reports no breaking point for an axis the policy cannot observe (issue
24): the scripted Reach expert takes no prompt, so ``language`` is "not observed", not "not
reached"; an axis it does observe keeps its breaking points."""

from __future__ import annotations

import json

from robogen.configs import load_eval_config
from robogen.reports.records import STATUS_NOT_OBSERVED
from robogen.runs.evaluation import evaluate


def test_no_breaking_point_for_an_unobserved_axis(tmp_path):
    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach",
                           axes=["language", "action"], severities="sweep", episodes=4,
                           batch_size=4, max_steps=30, seed=0, backend="serial", videos=0,
                           out=tmp_path / "r")
    evaluate(cfg)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert all(g["status"] == STATUS_NOT_OBSERVED for g in report["gaps"]
               if g["axis"] == "language")
    axes = {bp["axis"] for bp in report["breaking_points"]}
    assert "language" not in axes and "action" in axes
