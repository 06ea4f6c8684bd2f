"""Failure videos: a replayed episode is filmed from its reset frame on."""

from __future__ import annotations

import numpy as np

from robogen.configs import load_eval_config
from robogen.envs import find_scene
from robogen.rollout.plan import episode_seed, perturbation_seed
from robogen.rollout.replay import record_episode
from robogen.rollout.runner import prepare
from robogen.rollout.worker import EpisodeWorker, make_env
from robogen.types import WorkUnit


def test_a_filmed_episode_starts_with_its_reset_frame(tmp_path) -> None:
    cfg = load_eval_config(
        None, env="robogen/Reach-v0", policy="expert:reach", episodes=2, batch_size=1,
        axes=["texture"], severities=[1.0], combined=False, max_steps=8, backend="serial",
        videos=0, out=tmp_path / "r",
    )
    m = prepare(cfg)
    texture = next(c for c in m.conditions if c.name != "nominal")
    worker = EpisodeWorker(m)
    try:
        result, frames = record_episode(worker, WorkUnit(-1, texture, (1,)), size=64)
    finally:
        worker.close()
    assert frames.shape == (result.length_steps + 1, 64, 64, 3)

    env = make_env(m)
    env.set_levels(texture.levels)
    env.reset(seed=episode_seed(m.seed, 1),
              options={"perturbation_seed": perturbation_seed(m.seed, 1)})
    reset_frame = find_scene(env).render_frame(None, 64, 64)
    env.close()
    assert np.array_equal(frames[0], reset_frame)
    assert not np.array_equal(frames[0], frames[-1])  # the arm moved
