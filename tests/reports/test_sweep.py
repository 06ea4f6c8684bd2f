"""Severity sweeps: bisection finds a known breaking point; a real sweep resumes and pairs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.reports import load_report
from robogen.rollout.store import ResultStore
from robogen.stats.sweep import (
    SWEEP_GRID,
    SWEEP_RESOLUTION,
    breaking_point,
    crossing,
    next_severities,
)

N = 400
THRESH = (np.arange(N) + 0.5) / N


def _success(v: float) -> np.ndarray:
    """Episode i succeeds below severity 0.3 + 0.6 t_i: success(v) = 1 - (v - 0.3) / 0.6."""
    return v < 0.3 + 0.6 * THRESH


def _sweep(levels):
    points = {0.0: _success(0.0), **{s: _success(s) for s in SWEEP_GRID}}
    rounds = 0
    while new := next_severities(points, levels):
        assert all(s not in points for s in new)
        points.update({s: _success(s) for s in new})
        rounds += 1
    return points, rounds


@pytest.mark.parametrize(("level", "known"), [(0.5, 0.6), (0.8, 0.42)])
def test_sweep_finds_the_known_breaking_point_within_the_grid_resolution(level, known) -> None:
    points, rounds = _sweep([0.5, 0.8])
    assert rounds == 3  # 0.25 halved three times down to 1/32
    sevs = sorted(points)
    # the crossing is bracketed by two run severities at most SWEEP_RESOLUTION apart
    below = [s for s in sevs if s <= known]
    above = [s for s in sevs if s >= known]
    assert above[0] - below[-1] <= SWEEP_RESOLUTION
    bp = breaking_point("synthetic", points, level, n_boot=500)
    assert abs(bp.severity - known) <= SWEEP_RESOLUTION
    assert bp.ci_low <= bp.severity <= bp.ci_high and bp.ci_high - bp.ci_low < 0.15
    assert bp.target_rate == pytest.approx(level)


def test_not_reached_and_monotone_fit() -> None:
    flat = {0.0: np.ones(20, bool), 1.0: np.ones(20, bool)}
    bp = breaking_point("a", flat, 0.5, n_boot=100)
    assert not bp.reached and math.isnan(bp.severity) and bp.ci_high == math.inf
    assert next_severities(flat, [0.5]) == []
    # a non-monotone blip (0.5 at 0.25, 0.9 at 0.5) is pooled before the crossing is found
    assert crossing([0.0, 0.25, 0.5, 1.0], np.array([1.0, 0.5, 0.9, 0.0]), 0.5) == pytest.approx(
        0.5 + (0.7 - 0.5) / 0.7 * 0.5)


def test_real_sweep_reports_breaking_points_and_resumes(tmp_path) -> None:
    out = tmp_path / "sweep"
    args = ["eval", "--env", "robogen/Reach-v0", "--policy",
            "python:tests/check/degraded_policies.py:nominal_kinematics_reach",
            "--axes", "embodiment", "--severities", "sweep", "--breaking-level", "0.7",
            "--episodes", "8", "--backend", "serial", "--videos", "0", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    report = load_report(out)
    assert [(b.axis, b.level) for b in report.breaking_points] == [("embodiment", 0.5),
                                                                    ("embodiment", 0.7)]
    assert all(b.reached for b in report.breaking_points)
    m = ResultStore.open(out).manifest
    assert m.breaking_levels == (0.5, 0.7) and len(m.severities) > len(SWEEP_GRID)
    # every severity ran the same episode indices (paired with nominal)
    assert all(report.gap(c.name).n_pairs == 8 for c in m.conditions if c.axes)
    before = json.loads((out / "report.json").read_text())["breaking_points"]
    # kill the last bisection round: drop its parts and its conditions from the manifest
    store = ResultStore.open(out)
    last = m.conditions[-1]
    store.part_path(len(m.conditions) - 1).unlink()
    res = CliRunner().invoke(app, ["eval", "--resume", str(out), "--backend", "serial"])
    assert res.exit_code == 0, res.output
    assert ResultStore.open(out).manifest.conditions[-1] == last
    assert json.loads((out / "report.json").read_text())["breaking_points"] == before
    assert "Breaking points" in (out / "report.html").read_text()
