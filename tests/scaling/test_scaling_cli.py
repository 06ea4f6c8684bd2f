"""`robogen plan` and `robogen collect` through the CLI; the scaling HTML report."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.scaling.curves import build_curve, load_curves, write_curves
from robogen.scaling.report import render_scaling_html

runner = CliRunner()
TASK = "robogen/PickPlace-v0"
X = [0, 10, 20, 40]
TRUE = {"lighting": (0.9, -0.6, 2.0), "texture": (0.3, -0.02, 2.0)}
"""(a, b, n0) per factor: lighting's curve is much steeper than texture's."""


@pytest.fixture(scope="module")
def curves_path(tmp_path_factory):
    n = 400
    curves = []
    for name, (a, b, n0) in TRUE.items():
        k = [round(n * (1 - a * (x + n0) ** b)) for x in X]
        curves.append(build_curve(name, X, successes=k, n=[n] * len(X), n_boot=40, seed=0))
    return write_curves(tmp_path_factory.mktemp("c") / "curves.json", TASK, curves,
                        meta={"note": "synthetic"})


def _plan(curves_path, *args: str):
    res = runner.invoke(app, ["plan", "--curves", str(curves_path), *args])
    return res, " ".join(res.output.split())


def _demos(output: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"│ (lighting|texture)\s+│\s+(\d+) ", output)}


def test_plan_sums_to_budget_and_favours_the_steeper_curve(curves_path, tmp_path):
    out = tmp_path / "plan.json"
    res, text = _plan(curves_path, "--budget", "100", "--out", str(out))
    assert res.exit_code == 0, res.output
    plan = json.loads(out.read_text())
    demos = {f["factor"]: f["demos"] for f in plan["factors"]}
    assert sum(demos.values()) == 100 and plan["total_cost"] == 100
    assert demos["lighting"] > demos["texture"]
    assert _demos(res.output) == demos  # the printed table shows the same allocation
    assert plan["task"] == TASK and plan["method"] == "greedy"
    for f in plan["factors"]:
        assert f["low"] <= f["success"] <= f["high"]
    assert "equal" in text and "worst_first" in text  # the other methods are compared


def test_plan_respects_costs(curves_path, tmp_path):
    out = tmp_path / "plan.json"
    res, _ = _plan(curves_path, "--budget", "101", "--cost", "lighting=3", "--method", "equal",
                   "--out", str(out))
    assert res.exit_code == 0, res.output
    plan = json.loads(out.read_text())
    f = {r["factor"]: r for r in plan["factors"]}
    assert f["lighting"]["cost"] == 3 * f["lighting"]["demos"]
    assert f["texture"]["cost"] == f["texture"]["demos"]
    # equal split: 25 each costs 3*25 + 25 = 100; the one unit left buys one texture demo
    assert (f["lighting"]["demos"], f["texture"]["demos"]) == (25, 26)
    assert plan["total_cost"] == 101


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--budget", "0"], "budget must be a finite number > 0, got 0"),
        (["--budget", "inf"], "budget must be a finite number > 0, got inf"),
        (["--budget", "50", "--report", "."], "is a directory"),
        (["--budget", "50", "--cost", "lightning=2"], "did you mean 'lighting'"),
        (["--budget", "50", "--cost", "lighting"], "--cost must look like texture=2"),
        (["--budget", "50", "--cost", "lighting=-1"], "cost of 'lighting' must be"),
        (["--budget", "50", "--task", "robogen/Reach-v0"],
         "holds curves of task 'robogen/PickPlace-v0', not 'robogen/Reach-v0'"),
        (["--budget", "50", "--method", "random"], "planning method must be one of"),
    ],
    ids=["budget-0", "budget-inf", "report-dir", "unknown-cost-factor", "malformed-cost",
         "negative-cost", "wrong-task", "bad-method"],
)
def test_plan_bad_input(curves_path, tmp_path, args, needle):
    out = tmp_path / "plan.json"
    res, text = _plan(curves_path, *args, "--out", str(out))
    assert res.exit_code == 2, res.output
    assert needle in text
    assert not out.exists()


def test_plan_missing_or_foreign_curves_file(tmp_path):
    res, text = _plan(tmp_path / "nope.json", "--budget", "10")
    assert res.exit_code == 2 and "does not exist" in text
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps({"schema": "robogen.report"}))
    res, text = _plan(bad, "--budget", "10")
    assert res.exit_code == 2 and "not a robogen curves file" in text


def test_plan_report_embeds_plot_and_tables(curves_path, tmp_path):
    html_path = tmp_path / "plan.html"
    res, _ = _plan(curves_path, "--budget", "60", "--report", str(html_path))
    assert res.exit_code == 0, res.output
    page = html_path.read_text()
    m = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert m and base64.b64decode(m[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Data-collection plan" in page and "<b>greedy</b>" in page
    assert "http://" not in page and "https://" not in page  # self-contained
    # fitted parameters with bootstrap intervals and per-point Wilson intervals
    assert re.search(r"<td>-0\.\d+ \[-\d", page)
    assert page.count("<h2>lighting</h2>") == 1 and page.count("<h2>texture</h2>") == 1


def test_report_points_match_curves(curves_path):
    cf = load_curves(curves_path)
    page = render_scaling_html(cf)
    for p in cf.get("texture").points:
        assert f"{p.successes}/{p.n}" in page
        assert f"{p.rate:.3f} [{p.ci_low:.3f}, {p.ci_high:.3f}]" in page


def test_collect_cli_records_and_summarises(tmp_path):
    out = tmp_path / "demos"
    res = runner.invoke(app, ["collect", "--task", "robogen/Reach-v0", "--vary", "none,physics",
                              "--n", "2", "--out", str(out), "--image-size", "16",
                              "--batch-size", "2"])
    assert res.exit_code == 0, res.output
    rows = {m[1]: (int(m[2]), int(m[3])) for m in
            re.finditer(r"│ (none|physics)\s+│\s+(\d+)\s+│\s+(\d+) ", res.output)}
    assert rows == {"none": (2, 2), "physics": (2, 2)}
    assert np.array(sorted(p.name for p in out.glob("chunk-*.arrow"))).size == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--vary", "lightning"], "did you mean 'lighting'"),
        (["--n", "0"], "--n must be a positive"),
        (["--task", "gymnasium/Hopper-v5"], "scripted expert"),
        (["--vary", "object_pose+object_pose"], "names 'object_pose' twice"),
    ],
    ids=["unknown-factor", "n-0", "no-expert", "pair-twice"],
)
def test_collect_cli_bad_input(tmp_path, args, needle):
    out = tmp_path / "demos"
    base = {"--task": "robogen/Reach-v0", "--vary": "none", "--n": "2"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    res = runner.invoke(app, ["collect", *[a for kv in base.items() for a in kv],
                              "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.split())
    assert not out.exists()


def test_collect_refuses_a_foreign_directory_or_a_file(tmp_path):
    run = tmp_path / "an_eval_run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    res = runner.invoke(app, ["collect", "--task", "robogen/Reach-v0", "--n", "1",
                              "--out", str(run)])
    assert res.exit_code == 2 and "not a demonstration directory" in " ".join(res.output.split())
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = runner.invoke(app, ["collect", "--task", "robogen/Reach-v0", "--n", "1",
                              "--out", str(afile)])
    assert res.exit_code == 2 and "is a file" in res.output


def test_plan_accepts_a_scale_dir_and_rejects_repeated_costs(curves_path, tmp_path):
    from typer.testing import CliRunner

    from robogen.cli import app

    runner = CliRunner()
    ok = runner.invoke(app, ["plan", "--curves", str(curves_path.parent), "--budget", "10"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["plan", "--curves", str(curves_path), "--budget", "10",
                              "--cost", "lighting=2,lighting=3"])
    assert bad.exit_code == 2 and "twice" in " ".join(bad.output.split())


def _curves_file(tmp_path, true, seeds, n=400):
    curves = [build_curve(name, X, successes=[round(n * (1 - a * (x + n0) ** b)) for x in X],
                          n=[n] * len(X), n_boot=60, seed=s)
              for (name, (a, b, n0)), s in zip(true.items(), seeds, strict=True)]
    return write_curves(tmp_path / "curves.json", TASK, curves)


def test_plan_says_plainly_when_no_method_beats_equal(tmp_path):
    same = (0.6, -0.3, 3.0)
    path = _curves_file(tmp_path, {"lighting": same, "texture": same}, seeds=(0, 1))
    out = tmp_path / "plan.json"
    res, text = _plan(path, "--budget", "40", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "no method beats the equal split with 95% confidence" in text
    vs = json.loads(out.read_text())["vs_equal"]
    assert set(vs) == {"greedy", "fsc_topk", "equal", "worst_first"}
    g = vs["greedy"]
    assert g["low"] <= 0.0 <= g["high"] and g["high"] > g["low"] and not g["better"]


def test_plan_reports_a_method_that_beats_equal(tmp_path):
    # lighting gains a lot from data, texture almost nothing: equal wastes half the budget
    path = _curves_file(tmp_path, {"lighting": (0.9, -0.6, 2.0), "texture": (0.3, -0.002, 2.0)},
                        seeds=(0, 1))
    out = tmp_path / "plan.json"
    res, text = _plan(path, "--budget", "30", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "beats the equal split with 95% confidence: greedy" in text
    g = json.loads(out.read_text())["vs_equal"]["greedy"]
    assert g["better"] and g["low"] > 0.0 and g["predicted"] > 0.0
