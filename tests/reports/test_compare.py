"""robogen compare and eval --policy A --policy B on real Reach runs (serial backend)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.configs import load_eval_config
from robogen.reports.compare import compare_runs, load_run
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate
from tests.fixtures.interrupt import sigint_inherited

FIXTURES = Path(__file__).resolve().parents[1] / "check" / "degraded_policies.py"
DEGRADED = f"python:{FIXTURES}:nominal_kinematics_reach"
EPISODES = 10
cli = CliRunner()


def _run(out: Path, policy: str, *, env: str = "robogen/Reach-v0", seed: int = 0,
         episodes: int = EPISODES) -> Path:
    cfg = load_eval_config(None, env=env, policy=policy, axes=["embodiment", "physics"],
                           severities=[1.0], combined=False, episodes=episodes, seed=seed,
                           backend="serial", videos=0, out=out)
    return evaluate(cfg).run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "expert": _run(root / "expert", "expert:reach"),
        "expert_again": _run(root / "expert_again", "expert:reach"),
        "degraded": _run(root / "degraded", DEGRADED),
        "seed1": _run(root / "seed1", "expert:reach", seed=1),
        "n6": _run(root / "n6", "expert:reach", episodes=6),
    }


def test_same_policy_twice_gives_exactly_zero_differences(runs) -> None:
    c = compare_runs([load_run(runs["expert"]), load_run(runs["expert_again"])], n_boot=500)
    assert len(c.differences) == 2  # embodiment@1, physics@1
    for d in c.differences:
        assert d.difference == 0.0 and d.success_difference == 0.0 and d.n == EPISODES
        assert d.ci_low < 0.0 < d.ci_high  # contains 0 and has width
        assert d.success_ci_low < 0.0 < d.success_ci_high
        assert d.p_value == 1.0 and d.p_holm == 1.0 and d.mcnemar_p == 1.0


def _table(run_dir: Path) -> dict[str, dict[int, bool]]:
    df = ResultStore.open(run_dir).load_frame()
    return {c: dict(zip(g.episode_index, g.success, strict=True))
            for c, g in df.groupby("condition")}


def test_two_policies_match_a_hand_computation_from_the_episode_tables(runs) -> None:
    c = compare_runs([load_run(runs["expert"]), load_run(runs["degraded"])], n_boot=500)
    a, b = _table(runs["expert"]), _table(runs["degraded"])
    for cond in ("embodiment@1", "physics@1"):
        idx = sorted(a["nominal"])
        d = [(a["nominal"][i] - a[cond][i]) - (b["nominal"][i] - b[cond][i]) for i in idx]
        n10 = sum(a[cond][i] and not b[cond][i] for i in idx)
        n01 = sum(b[cond][i] and not a[cond][i] for i in idx)
        got = c.difference(cond, "expert", "degraded")
        assert got.n == len(idx) == EPISODES
        assert got.difference == pytest.approx(np.mean(d))
        assert got.success_difference == pytest.approx((n10 - n01) / EPISODES)
        k, m = min(n10, n01), n10 + n01  # exact McNemar: two-sided binomial at 1/2
        want = 1.0 if m == 0 else min(1.0, 2 * sum(math.comb(m, j) for j in range(k + 1)) / 2**m)
        assert got.mcnemar_p == pytest.approx(want)
    # the degraded policy misses every target once the arm changes, the expert none
    emb = c.difference("embodiment@1", "expert", "degraded")
    assert emb.gap_a == 0.0 and emb.gap_b == 1.0 and emb.ci_high < 0.0
    assert emb.p_holm < 0.05
    rank = {r.axis: r for r in c.rankings}
    assert rank["embodiment"].order == ("expert", "degraded") and rank["embodiment"].separated[0]


def test_compare_cli_writes_json_md_html(runs, tmp_path) -> None:
    out = tmp_path / "cmp"
    res = cli.invoke(app, ["compare", str(runs["expert"]), str(runs["degraded"]), "--out",
                           str(out)])
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} == {"compare.json", "compare.md", "compare.html",
                                               "compare_gaps.png"}
    data = json.loads((out / "compare.json").read_text())
    assert [r["label"] for r in data["runs"]] == ["expert", "degraded"]
    assert "Paired differences between policies" in (out / "compare.md").read_text()
    assert "data:image/png;base64," in (out / "compare.html").read_text()


def test_compare_prints_both_gaps_and_their_difference_in_80_columns(runs, tmp_path) -> None:
    """The terminal gets the gaps side by side with intervals and the paired difference, the
    values of compare.json, hardest condition first, no line over 80 columns (a pipe)."""
    out = tmp_path / "cmp"
    res = cli.invoke(app, ["compare", str(runs["expert"]), str(runs["degraded"]), "--out",
                           str(out)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    wide = [ln for ln in lines if len(ln) > 80 and str(out) not in ln]  # paths stay whole
    assert not wide, wide
    data = json.loads((out / "compare.json").read_text())
    assert "A = expert: nominal success" in res.output
    assert "B = degraded: nominal success" in res.output
    rows = {ln.split()[0]: ln for ln in lines if re.match(r"(embodiment|physics)@1 ", ln)}
    assert list(rows) == data["conditions"] == ["embodiment@1", "physics@1"]
    gaps = [{g["condition"]: g for g in r["gaps"]} for r in data["runs"]]
    diff = {d["condition"]: d for d in data["differences"]}
    for cond, line in rows.items():
        want = [f"{g[cond]['gap']:+.2f} [{g[cond]['ci_low']:+.2f}, {g[cond]['ci_high']:+.2f}]"
                for g in gaps]
        d = diff[cond]
        want.append(f"{d['difference']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]")
        assert re.findall(r"[+-]\d\.\d\d \[[+-]\d\.\d\d, [+-]\d\.\d\d\]", line) == want, line
    # the degraded policy loses under embodiment only: a decided difference, starred
    assert rows["embodiment@1"].rstrip().endswith("]*") and diff["embodiment@1"]["p_holm"] < 0.05
    assert not rows["physics@1"].rstrip().endswith("*")


@pytest.mark.parametrize(
    ("names", "needle"),
    [
        (["expert"], "at least two run directories, got 1"),
        (["expert", "seed1"], "seed: expert 0 vs seed1 1"),
        (["expert", "n6"], "n_episodes: expert 10 vs n6 6"),
        (["expert", "not_a_run"], "is not a robogen run directory"),
        (["expert", "missing"], "does not exist"),
        (["expert", "expert"], "the same run directory is given twice"),
        (["expert", "parent"], "it has no manifest.json; it holds the runs"),
    ],
    ids=["one-run", "other-seed", "other-n", "non-run-dir", "missing-dir", "same-run-twice",
         "several-policy-parent"],
)
def test_bad_input_is_exit_2_and_writes_nothing(runs, tmp_path, names, needle) -> None:
    (tmp_path / "not_a_run").mkdir()
    (tmp_path / "not_a_run" / "notes.txt").write_text("hello")
    paths = [str(runs.get(n, tmp_path / n)) for n in names]
    if "parent" in names:  # the --out of a several-policy eval, given instead of its runs
        paths[1] = str(runs["expert"].parent)
    out = tmp_path / "cmp"
    res = cli.invoke(app, ["compare", *paths, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.split())
    assert not out.exists()


def test_runs_of_different_envs_are_refused(runs, tmp_path) -> None:
    other = _run(tmp_path / "push", "random", env="robogen/Push-v0", episodes=EPISODES)
    res = cli.invoke(app, ["compare", str(runs["expert"]), str(other), "--out",
                           str(tmp_path / "cmp")])
    assert res.exit_code == 2
    assert 'env_id: expert "robogen/Reach-v0" vs push "robogen/Push-v0"' in " ".join(
        res.output.split())
    assert not (tmp_path / "cmp").exists()


def test_eval_with_several_policies_writes_one_run_each_and_the_comparison(tmp_path) -> None:
    out = tmp_path / "multi"
    args = ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach", "--policy",
            DEGRADED, "--axes", "embodiment", "--severities", "1", "--episodes", "4",
            "--backend", "serial", "--videos", "1", "--out", str(out)]
    res = cli.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} >= {"expert-reach", "nominal_kinematics_reach",
                                               "compare.json"}
    # the degraded policy fails under embodiment: its failure video plays inline in compare.html
    page = (out / "compare.html").read_text()
    srcs = re.findall(r'<video [^>]*src="([^"]+)"', page)
    assert srcs and all((out / s).is_file() for s in srcs), srcs
    assert all(s.startswith("nominal_kinematics_reach/videos/") for s in srcs), srcs
    assert 'href="expert-reach/report.html"' in page
    # each run's own report is written (once, after the videos) and plays its videos too
    report = (out / "nominal_kinematics_reach" / "report.html").read_text()
    assert any(s.split("/", 1)[1] in report for s in srcs)
    assert (out / "expert-reach" / "report.html").is_file()
    a = ResultStore.open(out / "expert-reach").manifest
    b = ResultStore.open(out / "nominal_kinematics_reach").manifest
    assert a.conditions == b.conditions and a.seed == b.seed and a.policy != b.policy


def test_eval_with_a_bad_second_policy_runs_nothing(tmp_path) -> None:
    out = tmp_path / "multi"
    res = cli.invoke(app, ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach",
                           "--policy", "nosuch:thing", "--episodes", "2", "--backend", "serial",
                           "--out", str(out)])
    assert res.exit_code == 2 and "nosuch" in res.output
    assert not out.exists()


def test_several_policy_eval_starts_at_most_one_figure_helper_per_core(tmp_path, monkeypatch):
    """Each run's figures are drawn by a helper process of its own only up to one per core;
    the later runs' figures are drawn in-process, and every run's report has all of them."""
    from robogen.reports.plot_worker import PlotWorker
    from robogen.runs import multi

    started = []
    monkeypatch.setattr(multi.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(PlotWorker, "start", lambda self: started.append(self))
    out = tmp_path / "multi"
    res = cli.invoke(app, ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach",
                           "--policy", DEGRADED, "--axes", "embodiment", "--severities", "1",
                           "--episodes", "2", "--backend", "serial", "--videos", "0",
                           "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(started) == 1
    for run in ("expert-reach", "nominal_kinematics_reach"):
        pngs = sorted(p.name for p in (out / run / "plots").glob("*.png"))
        assert pngs == ["conditions.png", "gaps.png", "severity.png"], (run, pngs)


def test_an_interrupted_several_policy_eval_says_how_to_finish_and_that_advice_works(
        tmp_path) -> None:
    """Ctrl-C during the first policy: exit 130 and one concrete command per run (resume the
    started run, start the other), then the compare; followed, they give every run its
    failure videos (the run keeps --videos) and the comparison."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "multi"
    robogen = [sys.executable, "-m", "robogen.cli"]
    protocol = ["--env", "robogen/Reach-v0", "--axes", "embodiment", "--severities", "1",
                "--episodes", "60", "--batch-size", "2", "--backend", "serial",
                "--videos", "1"]
    with sigint_inherited():
        proc = subprocess.Popen([*robogen, "eval", "--policy", DEGRADED, "--policy",
                                 "expert:reach", *protocol, "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first, second = out / "nominal_kinematics_reach", out / "expert-reach"
    deadline = time.monotonic() + 120
    while not list((first / "episodes").glob("*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    steps = err[err.index("interrupted; finish the runs"):].splitlines()[1:]
    assert steps == [f"  robogen eval --resume {first}",
                     f"  the same robogen eval with only --policy expert:reach and --out {second}",
                     f"  robogen compare {first} {second} --out {out / 'compare'}"], err
    assert not second.exists()
    resumed = subprocess.run([*robogen, "eval", "--resume", str(first)], capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert list((first / "videos").glob("embodiment-*.mp4"))  # --videos 1 kept by the run
    started = subprocess.run([*robogen, "eval", "--policy", "expert:reach", *protocol,
                              "--out", str(second)], capture_output=True, text=True,
                             timeout=300)
    assert started.returncode == 0, started.stderr[-2000:]
    res = cli.invoke(app, ["compare", str(first), str(second), "--out", str(out / "compare")])
    assert res.exit_code == 0, res.output
    assert (out / "compare" / "compare.html").is_file()


def test_four_policies_show_gaps_without_intervals_in_80_columns() -> None:
    """Past three runs the table keeps to gaps (compare.md has the intervals), so it still
    fits 80 columns; a condition a run lacks reads n/a."""
    import io

    from rich.console import Console

    from robogen.reports.terminal import print_comparison

    def run(label: str, gap: float) -> dict:
        return {"label": label, "nominal_rate": 0.9, "nominal_ci_low": 0.8,
                "nominal_ci_high": 0.95,
                "gaps": [{"condition": "lighting@1", "gap": gap, "ci_low": gap - 0.1,
                          "ci_high": gap + 0.1}]}

    data = {"runs": [run(f"policy_{i}", 0.1 * i) for i in range(4)],
            "conditions": ["lighting@1", "texture@1"], "differences": [], "rankings": [],
            "confidence": 0.95}
    out = io.StringIO()
    print_comparison(data, Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert all(len(ln) <= 80 for ln in lines), lines
    assert "D = policy_3: nominal success 0.90 [0.80, 0.95]" in lines
    assert next(ln for ln in lines if ln.startswith("lighting@1")).split() == [
        "lighting@1", "+0.00", "+0.10", "+0.20", "+0.30"]
    assert next(ln for ln in lines if ln.startswith("texture@1")).split()[1:] == ["n/a"] * 4
    assert "intervals and paired differences in compare.md" in lines
