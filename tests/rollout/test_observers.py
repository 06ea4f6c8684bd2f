"""Episode observers (issue 36 §4): a per-episode job is one module plus one registration.

A toy observer registered here (not in robogen) is built by every worker, sees each
episode's reset, steps and end, and its values land where the observers module says: on
the observer itself (``EpisodeWorker.observers``), and in the record for the fields an
observer may fill; the records are otherwise unchanged, a field an observer may not fill
is refused, and a plug-in's observer is listed among the run's plug-in modules.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from robogen.configs import load_eval_config
from robogen.errors import RobogenError
from robogen.rollout.manifest import plugin_modules
from robogen.rollout.observers import (
    BAD_FIELD,
    OBSERVED_FIELDS,
    OBSERVERS,
    EpisodeObserver,
    EpisodeState,
    Observer,
    register_observer,
)
from robogen.rollout.runner import plan_units, prepare
from robogen.rollout.worker import EpisodeWorker


class StepCounter(Observer):
    """Counts each episode's resets and steps; puts the count in ``action_jerk`` if asked."""

    def __init__(self, field: str | None) -> None:
        self.field = field
        self.resets: list[int] = []
        self.steps: dict[int, int] = {}

    def on_reset(self, k: int, episode: EpisodeState, env: Any) -> None:
        self.resets.append(episode.episode_index)
        self.steps[episode.episode_index] = 0

    def on_step(self, k: int, episode: EpisodeState, env: Any, obs: Any, action: Any,
                reward: float) -> None:
        self.steps[episode.episode_index] += 1

    def on_end(self, k: int, episode: EpisodeState) -> dict[str, Any]:
        n = self.steps[episode.episode_index]
        return {self.field: float(n)} if self.field else {}


@pytest.fixture
def registered(monkeypatch):
    """Register a StepCounter factory (the registry is restored after the test)."""
    monkeypatch.setattr(OBSERVERS, "_entries", dict(OBSERVERS._entries))
    monkeypatch.setattr(OBSERVERS, "_modules", dict(OBSERVERS._modules))
    field: dict[str, str | None] = {"name": None}

    @register_observer("step_counter")
    def step_counter(manifest: Any, policy: Any) -> EpisodeObserver:
        return StepCounter(field["name"])

    return field


def _run(tmp_path, safety: bool = False):
    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach",
                           axes=["physics"], severities=[1.0], combined=False, episodes=3,
                           batch_size=3, backend="serial", max_steps=25, videos=0,
                           safety=safety, out=tmp_path / "r")
    manifest = prepare(cfg)
    worker = EpisodeWorker(manifest, render_lanes=1)
    unit = next(u for u in plan_units(manifest) if u.condition.name == "nominal")
    try:
        return worker.run_unit(unit), worker
    finally:
        worker.close()


def _same(a, b) -> bool:
    return [dataclasses.replace(r, wall_time_s=0.0) for r in a] == [
        dataclasses.replace(r, wall_time_s=0.0) for r in b]


def test_a_registered_observer_sees_every_episode_without_changing_its_record(
        tmp_path, registered):
    before, _ = _run(tmp_path / "a")  # registered, but its factory only runs at load
    results, worker = _run(tmp_path / "b")
    counter = next(o for o in worker.observers if isinstance(o, StepCounter))
    assert counter.resets == [r.episode_index for r in results]
    assert counter.steps == {r.episode_index: r.length_steps for r in results}
    assert all(r.length_steps > 0 for r in results)
    assert _same(results, before)


def test_an_observer_fills_a_record_field_after_the_built_in_ones(tmp_path, registered):
    plain, _ = _run(tmp_path / "a", safety=True)
    registered["name"] = "action_jerk"  # registered after the safety observer: it wins
    results, _ = _run(tmp_path / "b", safety=True)
    assert [r.action_jerk for r in results] == [float(r.length_steps) for r in results]
    assert all(p.action_jerk != r.action_jerk for p, r in zip(plain, results, strict=True))
    assert _same([dataclasses.replace(r, action_jerk=None) for r in results],
                 [dataclasses.replace(r, action_jerk=None) for r in plain])


def test_an_observer_may_not_fill_the_workers_fields(tmp_path, registered):
    registered["name"] = "success"
    assert "success" not in OBSERVED_FIELDS
    with pytest.raises(RobogenError) as e:
        _run(tmp_path)
    assert str(e.value) == BAD_FIELD.format(name="step_counter", field="success",
                                            allowed=sorted(OBSERVED_FIELDS))


def test_a_plug_in_observer_is_one_of_the_runs_plug_in_modules(registered):
    assert plugin_modules("robogen/Reach-v0", "expert:reach", ["physics"]) == (__name__,)
