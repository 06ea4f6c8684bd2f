"""The inconclusive check's planning estimate: episodes at which the observed rates decide."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from robogen.check import INCONCLUSIVE, PASS, CheckResult, compare, run_data_from_arrays
from robogen.check.noninferiority import tango_statistic
from robogen.check.outputs import render_junit, render_markdown
from robogen.check.planning import episodes_to_decide

CONDITIONS = ("nominal", "lighting@1", "physics@1", "embodiment@1")


def _identical(n: int) -> dict[str, np.ndarray]:
    """The same outcomes in both runs: 80% success on every condition."""
    return {c: np.arange(n) % 5 != 0 for c in CONDITIONS}


def test_identical_runs_need_19_z_squared_pairs_whatever_their_number() -> None:
    """Identical paired outcomes (no discordant pair): Tango's Z = sqrt(n m / (1 - m)), so
    n' = ceil(n z^2 / Z^2) = ceil(z^2 (1 - m) / m) = ceil(19 z^2) at m = 0.05, with
    z = z_{1 - alpha / k} over the k = 4 tested conditions: 96 pairs."""
    z = stats.norm.isf(0.05 / 4)
    want = math.ceil(19 * z * z)
    assert want == 96
    for n in (30, 50):
        data = _identical(n)
        r = compare(run_data_from_arrays(data), run_data_from_arrays(data), margin=0.05)
        assert r.verdict == INCONCLUSIVE
        assert [c.episodes_to_decide for c in r.conditions] == [want] * 4
    md = render_markdown(r)
    assert "**Episodes to decide** (planning estimate, not a guarantee" in md
    assert "level alpha / 4" in md and "nominal ~96 pairs; lighting@1 ~96 pairs" in md
    assert "with 96 episodes per condition would decide" in md
    assert "~96 episodes per run would decide (planning estimate)" in render_junit(r)
    d = json.loads(json.dumps(r.to_dict()))
    assert [c["episodes_to_decide"] for c in d["conditions"]] == [96] * 4
    assert CheckResult.from_dict(d).conditions[0].episodes_to_decide == 96


def test_the_estimate_decides_when_the_rates_hold() -> None:
    """The same proportions a little past the estimate (96 pairs) pass: the exact test is
    discrete and needs slightly more than its normal approximation (p = 0.0129 at 96 pairs,
    0.0068 at 120, against alpha / 4 = 0.0125)."""
    data = _identical(120)
    r = compare(run_data_from_arrays(data), run_data_from_arrays(data), margin=0.05)
    assert all(c.verdict == PASS for c in r.conditions)
    assert all(c.episodes_to_decide == -1 for c in r.conditions)
    assert "Episodes to decide" not in render_markdown(r)


def test_formula_with_discordant_pairs_and_edges() -> None:
    z_obs = float(tango_statistic(6, 3, 40, 0.05))  # 6 won, 3 lost of 40 pairs
    want = math.ceil(40 * (stats.norm.isf(0.01) / z_obs) ** 2)
    assert episodes_to_decide(z_obs, 40, 0.01) == want
    assert episodes_to_decide(-z_obs, 40, 0.01) == want  # leaning to regression: same size
    assert episodes_to_decide(0.0, 40, 0.01) == -1  # on the margin: nothing decides
    assert episodes_to_decide(10.0, 40, 0.01) == 41  # at least one more than was run
    with pytest.raises(ValueError, match="level must be in"):
        episodes_to_decide(1.0, 40, 0.7)
