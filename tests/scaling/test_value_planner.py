"""The (values, demos per value) planner on synthetic diversity curves of known shape."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.errors import InvalidSpecError
from robogen.scaling.curves import build_curve, load_curves, write_curves
from robogen.scaling.diversity import PURE_N0
from robogen.scaling.value_planner import (
    compare_values_with_equal,
    diversity_models,
    diversity_verdict,
    plan_values,
)

runner = CliRunner()
TASK = "robogen/Reach-v0"
TRUE = {"texture": (0.8, -0.6, -0.05), "embodiment": (0.4, -0.05, -0.4)}
"""(a_D, b_D, b_Q): texture gains from new values, embodiment from demos per value."""
KS, MS, N = (1, 2, 4, 8), (1, 2, 4), 400


@pytest.fixture(scope="module")
def curves_path(tmp_path_factory):
    curves = []
    for f, (a, bd, bq) in TRUE.items():
        def succ(k, m, a=a, bd=bd, bq=bq):
            return round(N * (1 - a * k ** bd * (m / MS[-1]) ** bq))
        for m in MS:
            curves.append(build_curve(f"{f}:k@m{m}", KS, successes=[succ(k, m) for k in KS],
                                      n=[N] * len(KS), n_boot=30, seed=0, n0=PURE_N0))
        for k in KS:
            curves.append(build_curve(f"{f}:m@k{k}", MS, successes=[succ(k, m) for m in MS],
                                      n=[N] * len(MS), n_boot=30, seed=0, n0=PURE_N0))
    meta = {"kind": "diversity", "anchor": {"values": KS[-1], "per_value": MS[-1]}}
    return write_curves(tmp_path_factory.mktemp("d") / "curves.json", TASK, curves, meta=meta)


def test_plan_spends_within_budget_and_follows_the_exponents(curves_path):
    cf = load_curves(curves_path)
    plan = plan_values(cf, 120, value_cost=2)
    assert plan.total_cost <= 120
    assert plan.total_cost > 120 - 2 * (2 + 1)  # nothing affordable left unspent per factor
    split = plan.split
    assert split["texture"][0] > split["embodiment"][0]  # many textures, few bodies
    assert split["embodiment"][1] > split["texture"][1]  # many demos per body
    equal = plan_values(cf, 120, value_cost=2, method="equal")
    assert equal.split == {"texture": (10, 4), "embodiment": (10, 4)}
    assert plan.mean_success >= equal.mean_success
    # a dearer value buys fewer values
    dear = plan_values(cf, 120, value_cost=20)
    assert dear.split["texture"][0] < split["texture"][0]
    for f in plan.factors:
        assert f.low <= f.success <= f.high


def test_compare_with_equal_has_an_interval_and_sees_the_gain(curves_path):
    v = compare_values_with_equal(load_curves(curves_path), 120, value_cost=2, n_samples=30)
    assert v["low"] <= v["difference"] <= v["high"]
    assert v["low"] > 0  # the curves differ strongly: the plan beats the equal split
    assert v["n_samples"] == 30


def test_verdict_sentence_names_the_better_use(curves_path):
    models = diversity_models(load_curves(curves_path))
    assert "diversity (more values) spends the budget better" in \
        diversity_verdict(models["texture"])["sentence"]
    assert "quantity (more demonstrations per value) spends" in \
        diversity_verdict(models["embodiment"])["sentence"]


def test_bad_value_costs_and_quantity_curves(curves_path, tmp_path):
    cf = load_curves(curves_path)
    with pytest.raises(InvalidSpecError, match="'lighting' is not a factor"):
        plan_values(cf, 100, value_cost={"lighting": 1})
    with pytest.raises(InvalidSpecError, match="got texture=-1"):
        plan_values(cf, 100, value_cost={"texture": -1})
    quantity = write_curves(tmp_path / "q.json", TASK, [build_curve(
        "texture", [0, 10, 20], successes=[10, 20, 30], n=[40] * 3, n_boot=0)])
    res = runner.invoke(app, ["plan", "--curves", str(quantity), "--budget", "10",
                              "--value-cost", "3"])
    assert res.exit_code == 2 and "holds quantity curves, not diversity curves" in \
        " ".join(res.output.split())
    res = runner.invoke(app, ["plan", "--curves", str(curves_path), "--budget", "10",
                              "--value-cost", "x"])
    assert res.exit_code == 2 and "--value-cost must be a number" in " ".join(res.output.split())


def test_plan_cli_writes_the_split_and_a_report(curves_path, tmp_path):
    res = runner.invoke(app, ["plan", "--curves", str(curves_path), "--budget", "60",
                              "--value-cost", "texture=1,embodiment=10", "--out",
                              str(tmp_path / "p.json"), "--report", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["kind"] == "diversity" and doc["value_cost"] == {"texture": 1.0,
                                                                "embodiment": 10.0}
    assert sum(f["cost"] for f in doc["factors"]) <= 60
    page = (tmp_path / "r.html").read_text()
    assert "optimal plan (budget 60)" in page and "exponent b" in page
