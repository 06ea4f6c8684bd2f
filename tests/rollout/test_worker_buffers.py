"""The worker's records do not alias a policy's buffers (its batch of one is a copy too)."""

from __future__ import annotations

import numpy as np
import pytest

from robogen.configs import load_eval_config
from robogen.rollout.runner import plan_units, prepare
from robogen.rollout.worker import EpisodeWorker


@pytest.mark.parametrize("batch", [1, 3])
def test_recorded_actions_and_observations_survive_a_policy_reusing_its_buffers(tmp_path, batch):
    cfg = load_eval_config(None, env="robogen/Reach-v0",
                           policy="python:tests/fixtures/buffer_policies.py:reuse",
                           axes=["physics"], severities=[1.0], combined=False, episodes=batch,
                           batch_size=batch, backend="serial", max_steps=12, videos=0,
                           out=tmp_path / "r")
    manifest = prepare(cfg)
    worker = EpisodeWorker(manifest, render_lanes=1)
    seen: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    worker.transition_hook = lambda i, o, a, r: seen.setdefault(i, []).append((o, a))
    unit = next(u for u in plan_units(manifest) if u.condition.name == "nominal")
    try:
        results = worker.run_unit(unit)
    finally:
        worker.close()
    assert [r.cause for r in results] == ["timeout"] * batch  # no NaN reached a step
    for i in unit.episode_indices:
        steps = seen[i]
        assert len(steps) == 12
        actions = np.stack([a for _, a in steps])
        want = ((np.arange(12) % 7) / 7 - 0.5).astype(np.float32)
        np.testing.assert_array_equal(actions, np.broadcast_to(want[:, None], actions.shape))
        assert all(np.isfinite(o).all() for o, _ in steps)  # not the policy's scribbles
