"""A simulation that goes unstable under a perturbation is an invalid episode, not a policy
failure (issue 8 §4): a user axis registered with ``register_axis`` that makes Hopper's
timestep 150x nominal, end to end through ``robogen eval``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import pytest

from robogen.configs import load_eval_config
from robogen.perturbations import AXES, Axis, Perturbation
from robogen.reports.records import STATUS_INVALID
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate

AXIS = "timestep_x150"


@dataclass(frozen=True, slots=True)
class _Timestep(Perturbation):
    scale: float = 1.0
    axis: ClassVar[str] = AXIS
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = ("opt.timestep",)

    def apply_model(self, model, nominal, scene) -> bool:  # noqa: ANN001
        model.opt.timestep = nominal.opt.timestep * self.scale
        return self.scale != 1.0


class _TimestepAxis(Axis):
    kind: ClassVar[str] = "physical"
    description: ClassVar[str] = "integrator timestep x (1 + 149 severity)"

    def sample(self, rng, severity, split, scene):  # noqa: ANN001, ANN201
        return _Timestep(1.0 + 149.0 * severity)


@pytest.fixture
def timestep_axis(monkeypatch):
    """``register_axis(AXIS)`` for this test only (the registry is the process's)."""
    from robogen.perturbations import register_axis

    monkeypatch.setattr(AXES, "_entries", dict(AXES._entries))
    register_axis(AXIS)(_TimestepAxis)
    return AXIS


def test_an_unstable_simulation_is_invalid_and_excluded(timestep_axis, tmp_path):
    cfg = load_eval_config(None, env="gymnasium/Hopper-v5", policy="random:0",
                           axes=[timestep_axis, "physics"], severities=[1.0], combined=False,
                           episodes=6, batch_size=3, seed=0, max_steps=30, videos=0,
                           backend="serial", out=tmp_path / "r",
                           # the hopper's fall would end the episode before MuJoCo diverges
                           env_kwargs={"terminate_when_unhealthy": False})
    out = evaluate(cfg)
    results = ResultStore.open(out.run_dir).load_results()
    unstable = [r for r in results if r.condition == f"{AXIS}@1"]
    assert len(unstable) == 6
    assert all(r.cause == "sim_unstable" and not r.success for r in unstable), unstable
    assert all("became unstable" in r.error and AXIS in r.error for r in unstable)
    assert not any(r.cause == "sim_unstable" for r in results if r.condition != f"{AXIS}@1")

    report = json.loads((out.run_dir / "report.json").read_text())
    cond = next(c for c in report["conditions"] if c["condition"] == f"{AXIS}@1")
    assert cond["n"] == 0 and cond["n_invalid"] == 6 and cond["causes"] == {"sim_unstable": 6}
    assert cond["success_rate"] is None  # no valid episode: no rate, not 0 %
    gap = next(g for g in report["gaps"] if g["axis"] == AXIS)
    assert gap["status"] == STATUS_INVALID and gap["gap"] is None
    assert AXIS not in report["difficulty_order"]  # not ranked as the hardest axis
    physics = next(g for g in report["gaps"] if g["axis"] == "physics")
    assert physics["status"] != STATUS_INVALID and physics["n_pairs"] == 6
    assert STATUS_INVALID in (out.run_dir / "report.md").read_text()
