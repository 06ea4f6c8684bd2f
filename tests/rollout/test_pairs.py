"""Pairs of axes: planned conditions, spec validation, and the report's interactions."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.configs import load_eval_config, parse_pairs
from robogen.errors import InvalidSpecError
from robogen.reports import load_report
from robogen.rollout.manifest import config_fields
from robogen.rollout.plan import build_conditions, pairs_of
from robogen.rollout.store import ResultStore


def test_pairs_are_conditions_at_each_severity_and_split() -> None:
    conds = build_conditions(["lighting", "texture", "camera"], [0.5, 1.0], ["test"],
                             combined=True, pairs=[("lighting", "texture")])
    names = [c.name for c in conds]
    assert names[-3:] == ["lighting+texture@0.5", "lighting+texture@1", "lighting+texture@test"]
    assert conds[-1].levels[0].split == "test" and conds[-1].axes == ("lighting", "texture")
    assert pairs_of(conds) == ["lighting+texture"]
    # with two axes the pair is the combined condition: not run twice
    two = build_conditions(["lighting", "texture"], [1.0], pairs=[("lighting", "texture")])
    assert [c.name for c in two] == ["nominal", "lighting@1", "texture@1", "combined@1"]


def test_parse_pairs() -> None:
    assert parse_pairs("all", ["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert parse_pairs(["c+a"], ["a", "b", "c"]) == [("c", "a")]


@pytest.mark.parametrize(
    ("pairs", "needle"),
    [
        (["physics"], "two different axes joined by '+'"),
        (["physics+physics"], "two different axes"),
        (["physics+lighting"], "names lighting, which is not among the evaluated axes"),
        (["physics+camera", "camera+physics"], "is given twice"),
        ("some", "pairs must be 'all'"),
    ],
)
def test_bad_pairs_name_the_value(pairs, needle) -> None:
    with pytest.raises(InvalidSpecError, match="pairs") as e:
        load_eval_config(None, env="robogen/Reach-v0", policy="random",
                         axes=["physics", "camera"], pairs=pairs)
    assert needle in str(e.value)


def test_pair_run_reports_gap_interaction_and_heatmap(tmp_path) -> None:
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach",
        "--axes", "embodiment,physics,object_pose", "--pairs", "embodiment+physics",
        "--no-combined", "--severities", "1", "--episodes", "6", "--backend", "serial",
        "--videos", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    report = load_report(out)
    gap = report.gap("embodiment+physics@1")
    assert gap.axis == "embodiment+physics" and gap.n_pairs == 6
    (it,) = report.interactions
    assert it.condition == "embodiment+physics@1" and it.n == 6
    assert it.interaction == pytest.approx(it.combined_gap - sum(it.single_gaps))
    assert it.ci_low < it.interaction < it.ci_high  # never zero-width, even with 6 episodes
    assert (out / "plots" / "interactions.png").is_file()
    assert "Pair interactions" in (out / "report.html").read_text()
    # check re-evaluates a candidate under this manifest: the pairs travel with it
    fields = config_fields(ResultStore.open(out).manifest)
    assert fields["pairs"] == ["embodiment+physics"]
