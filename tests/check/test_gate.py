"""Gate decisions on synthetic outcome streams: false alarms, power, pairing, sequential looks."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from check_streams import CONDITIONS, stream_pair

from robogen.check import (
    INCONCLUSIVE,
    PASS,
    REGRESSION,
    CheckResult,
    StaticSource,
    compare,
    run_data_from_arrays,
    sequential_check,
)
from robogen.check.outputs import render_junit, render_markdown
from robogen.errors import InvalidSpecError
from robogen.testing import assert_no_regression

ALPHA = 0.05
N_STREAMS = 400


def _rate(verdicts: list[str], which: str) -> float:
    return sum(v == which for v in verdicts) / len(verdicts)


@pytest.mark.parametrize(
    ("margin", "drop", "min_rate"),
    [(0.05, 0.0, 0.0),   # identical policies, default margin
     (0.0, 0.0, 0.005),  # identical policies, zero margin: "regression" = significantly worse
     (0.05, 0.05, 0.005)],  # candidate exactly at the margin on every condition (worst case)
    ids=["identical", "identical-zero-margin", "at-the-margin"],
)
def test_false_alarm_rate_is_at_most_alpha(margin: float, drop: float, min_rate: float) -> None:
    """Over 400 seeded stream pairs (4 conditions, 60 paired episodes each), the gate fails
    the build (overall regression, any condition) in at most alpha of them."""
    rng = np.random.default_rng(20261129)
    verdicts = []
    for _ in range(N_STREAMS):
        base, cand = stream_pair(rng, 60, dict.fromkeys(CONDITIONS, 0.8),
                                 dict.fromkeys(CONDITIONS, 0.8 - drop))
        verdicts.append(compare(base, cand, margin=margin, alpha=ALPHA).verdict)
    rate = _rate(verdicts, REGRESSION)
    assert rate <= ALPHA
    assert rate >= min_rate  # the boundary cases do reach the error budget: the test is not idle


def test_degraded_axis_is_flagged_and_the_others_are_not() -> None:
    """A candidate that loses 0.3 success on embodiment only (60 paired episodes per condition)."""
    rng = np.random.default_rng(7)
    hurt, other = 0, 0
    n = 100
    p_b = dict.fromkeys(CONDITIONS, 0.9)
    p_c = {**p_b, "embodiment@1": 0.6}
    for _ in range(n):
        base, cand = stream_pair(rng, 60, p_b, p_c, rho=0.8)
        r = compare(base, cand, margin=0.05, alpha=ALPHA)
        hurt += r.axis("embodiment").verdict == REGRESSION
        other += any(r.axis(a).verdict == REGRESSION for a in ("nominal", "lighting", "physics"))
        assert r.exit_code == (1 if r.verdict == REGRESSION else 0)
    assert hurt / n >= 0.95
    assert other / n <= ALPHA


def test_paired_test_decides_where_the_unpaired_one_cannot() -> None:
    """Same outcomes: pairing on the shared initial states gives a narrower interval."""
    rng = np.random.default_rng(3)
    base, cand = stream_pair(rng, 120, {"nominal": 0.85}, {"nominal": 0.85}, rho=0.95)
    paired = compare(base, cand, margin=0.05).condition("nominal")
    unpaired = compare(base, cand, margin=0.05, paired=False).condition("nominal")
    assert paired.paired and not unpaired.paired
    assert paired.verdict == PASS and unpaired.verdict == INCONCLUSIVE
    width = lambda c: c.diff_ci_high - c.diff_ci_low  # noqa: E731
    assert width(paired) < 0.5 * width(unpaired)
    assert paired.candidate_only + paired.baseline_only <= 20


def test_pairing_needs_matching_seeds() -> None:
    rng = np.random.default_rng(0)
    a, _ = stream_pair(rng, 30, {"nominal": 0.8}, {"nominal": 0.8})
    other = run_data_from_arrays({"nominal": np.ones(30, bool)}, seed=1)
    assert compare(a, other).design == "unpaired"
    with pytest.raises(InvalidSpecError, match="run seeds differ"):
        compare(a, other, paired=True)


def test_protocol_mismatch_names_the_fields() -> None:
    a = run_data_from_arrays({"nominal": np.ones(10, bool), "lighting@1": np.ones(10, bool)})
    b = run_data_from_arrays({"nominal": np.ones(10, bool), "lighting@0.5": np.ones(10, bool)},
                             env_id="robogen/Push-v0")
    with pytest.raises(InvalidSpecError) as e:
        compare(a, b)
    msg = str(e.value)
    assert "env_id: baseline \"synthetic\" vs candidate \"robogen/Push-v0\"" in msg
    assert "severities" in msg and "conditions" in msg and "axes" not in msg


@pytest.mark.parametrize(("margin", "alpha"), [(-0.1, 0.05), (1.0, 0.05), (0.05, 0.0),
                                               (0.05, 0.5)])
def test_bad_margin_or_alpha_raises(margin: float, alpha: float) -> None:
    a = run_data_from_arrays({"nominal": np.ones(10, bool)})
    with pytest.raises(InvalidSpecError, match="must be in"):
        compare(a, a, margin=margin, alpha=alpha)


def test_sequential_keeps_the_error_rate_and_saves_episodes() -> None:
    rng = np.random.default_rng(11)
    at_margin, saved_clear = [], []
    for _ in range(100):
        base, cand = stream_pair(rng, 80, dict.fromkeys(CONDITIONS, 0.8),
                                 dict.fromkeys(CONDITIONS, 0.75))
        at_margin.append(sequential_check(StaticSource(base, cand), margin=0.05).verdict)
    assert _rate(at_margin, REGRESSION) <= ALPHA
    for _ in range(20):  # a clear regression on one axis, identical elsewhere
        p_b = dict.fromkeys(CONDITIONS, 0.9)
        base, cand = stream_pair(rng, 80, p_b, {**p_b, "physics@1": 0.3}, rho=0.9)
        r = sequential_check(StaticSource(base, cand), margin=0.05, looks=4)
        assert r.axis("physics").verdict == REGRESSION
        assert r.condition("physics@1").decided_at < 80
        saved_clear.append(r.sequential.episodes_saved / r.sequential.episodes_budget)
    assert np.mean(saved_clear) >= 0.1


def test_sequential_schedule_and_levels() -> None:
    rng = np.random.default_rng(5)
    base, cand = stream_pair(rng, 50, {"nominal": 0.9}, {"nominal": 0.9})
    r = sequential_check(StaticSource(base, cand), looks=4, spending="pocock", alpha=0.05)
    seq = r.sequential
    assert seq.schedule == (13, 25, 38, 50)
    assert sum(seq.levels) == pytest.approx(0.05)
    assert all(lv > 0 for lv in seq.levels)
    assert seq.episodes_budget == 50 and seq.looks_run <= 4


def test_records_and_outputs_round_trip() -> None:
    rng = np.random.default_rng(2)
    p_b = dict.fromkeys(CONDITIONS, 0.9)
    base, cand = stream_pair(rng, 80, p_b, {**p_b, "lighting@1": 0.4}, rho=0.9)
    r = compare(base, cand)
    assert r.verdict == REGRESSION and r.exit_code == 1 and r.regressions == ("lighting",)
    d = json.loads(json.dumps(r.to_dict()))
    assert CheckResult.from_dict(d).to_dict() == d
    root = ET.fromstring(render_junit(r))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == ["nominal", "lighting", "physics", "embodiment"]
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["lighting"] and root.get("failures") == "1"
    md = render_markdown(r)
    assert md.startswith("## robogen check: ❌ regression on lighting")
    assert "| lighting | lighting@1 |" in md


def test_assert_no_regression_raises_with_the_table() -> None:
    rng = np.random.default_rng(4)
    p_b = dict.fromkeys(CONDITIONS, 0.9)
    base, cand = stream_pair(rng, 80, p_b, {**p_b, "physics@1": 0.4}, rho=0.9)
    with pytest.raises(AssertionError) as e:
        assert_no_regression(base, cand)
    msg = str(e.value)
    assert msg.startswith("robogen check: regression on physics")
    assert "| physics | physics@1 |" in msg and "regression |" in msg
    same = {k: np.ones(120, bool) for k in CONDITIONS}
    ok = assert_no_regression(same, same, margin=0.1)
    assert ok.verdict == PASS
    with pytest.raises(AssertionError, match="inconclusive"):
        assert_no_regression({"nominal": np.ones(5, bool)}, {"nominal": np.ones(5, bool)},
                             fail_on_inconclusive=True)


def test_one_look_is_the_fixed_size_check_and_bad_spending_is_named() -> None:
    rng = np.random.default_rng(9)
    p_b = dict.fromkeys(CONDITIONS, 0.85)
    base, cand = stream_pair(rng, 60, p_b, {**p_b, "nominal": 0.6})
    fixed = compare(base, cand)
    one = sequential_check(StaticSource(base, cand), looks=1)
    assert [c.verdict for c in one.conditions] == [c.verdict for c in fixed.conditions]
    assert [c.p_regression_adj for c in one.conditions] == \
        [c.p_regression_adj for c in fixed.conditions]
    assert one.sequential.episodes_saved == 0
    with pytest.raises(LookupError, match="did you mean 'pocock'"):
        sequential_check(StaticSource(base, cand), spending="pocok")
