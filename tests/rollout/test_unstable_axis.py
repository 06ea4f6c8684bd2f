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


LAST_STEP_AXIS = "timestep_x250_530"
FACTOR_RANGE = (250.0, 530.0)
"""Hopper's time step times U(250, 530): for some initial states and actions MuJoCo's state
reaches 1e12-1e42 within the last physics substep of the first env step (the episode's last:
Hopper terminates), where MuJoCo's own checks, run at the start of the next step, never look."""


class _LastStepAxis(Axis):
    kind: ClassVar[str] = "physical"
    description: ClassVar[str] = "integrator timestep x U(250, 530)"

    def sample(self, rng, severity, split, scene):  # noqa: ANN001, ANN201
        return _Timestep(1.0 + severity * float(rng.uniform(*FACTOR_RANGE)))


@pytest.fixture
def last_step_axis(monkeypatch):
    """``register_axis(LAST_STEP_AXIS)`` for this test only."""
    from robogen.perturbations import register_axis

    monkeypatch.setattr(AXES, "_entries", dict(AXES._entries))
    register_axis(LAST_STEP_AXIS)(_LastStepAxis)
    return LAST_STEP_AXIS


def test_a_state_beyond_mujocos_limit_after_the_last_step_is_unstable():
    """MuJoCo raises no warning (its checks run at the next step); the wrapper's limit does."""
    import numpy as np

    from robogen.envs import make
    from robogen.perturbations import PerturbedEnv, SimulationUnstableError
    from robogen.perturbations.wrapper import MAX_STATE

    env = PerturbedEnv(make("gymnasium/Hopper-v5"))
    try:
        env.reset(seed=1)
        env.scene.model.opt.timestep *= 412.9  # after the reset, which restores it
        action = np.random.default_rng(1).uniform(-1, 1, 3).astype(np.float32)
        with pytest.raises(SimulationUnstableError, match=r"step 1 \(\|q.*mjMAXVAL"):
            env.step(action)
        data = env.scene.data
        assert not data.warning.number[:4].any()  # MuJoCo itself saw nothing
        worst = max(np.abs(getattr(data, f)).max() for f in ("qpos", "qvel", "qacc"))
        assert np.isfinite(worst) and worst > MAX_STATE == 1e10
    finally:
        env.close()


def test_a_last_step_divergence_is_invalid_and_the_means_stay_finite(last_step_axis, tmp_path):
    cfg = load_eval_config(None, env="gymnasium/Hopper-v5", policy="random:0",
                           axes=[last_step_axis], severities=[1.0], combined=False,
                           episodes=40, seed=0, videos=0, backend="serial", out=tmp_path / "r")
    out = evaluate(cfg)
    results = [r for r in ResultStore.open(out.run_dir).load_results()
               if r.condition == f"{last_step_axis}@1"]
    beyond = [r for r in results if "mjMAXVAL" in (r.error or "")]
    assert beyond and all(r.cause == "sim_unstable" for r in beyond)
    valid = [r for r in results if r.cause != "sim_unstable"]
    assert valid and all(abs(r.episode_return) < 1e6 for r in valid)
    report = json.loads((out.run_dir / "report.json").read_text())
    cond = next(c for c in report["conditions"] if c["condition"] == f"{last_step_axis}@1")
    assert cond["n"] == len(valid) and cond["n_invalid"] == len(results) - len(valid)
    assert abs(cond["mean_return"]) < 1e6 and abs(cond["std_return"]) < 1e6
