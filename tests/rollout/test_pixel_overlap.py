"""The shipped pixel policy's inference overlaps rendering without changing an episode.

A ``flax:`` policy takes ``slots``, so a pixel evaluation acts on one half of the worker's
envs while the render thread draws the other half's frames. The same policy behind the plain
protocol (no ``slots``) runs whole batches; both must give the same episodes, bit for bit.
"""

from __future__ import annotations

import dataclasses

from robogen.configs import load_eval_config
from robogen.rollout.runner import plan_units, prepare
from robogen.rollout.worker import EpisodeWorker

OVERLAPPED = "flax:robogen/assets/policies/push_pixels_plain"
WHOLE_BATCH = "python:tests/fixtures/pixel_policies.py:push_pixels_whole_batch"


def _run(tmp_path, policy: str):
    cfg = load_eval_config(
        None, env="robogen/Push-v0", policy=policy, obs_mode="state+pixels", episodes=4,
        batch_size=4, axes=["object_pose"], severities=[1.0], combined=False, max_steps=30,
        backend="serial", videos=0, seed=5, out=tmp_path / "r",
    )
    m = prepare(cfg)
    worker = EpisodeWorker(m)
    batches: list[int] = []
    act = worker.policy.act

    def counting_act(obs, **kw):  # noqa: ANN001, ANN202
        batches.append(len(obs["pixels"]))
        return act(obs, **kw)

    worker.policy.act = counting_act
    try:
        results = [r for u in plan_units(m) for r in worker.run_unit(u)]
    finally:
        worker.close()
    return [dataclasses.replace(r, policy_id="", wall_time_s=0.0) for r in results], batches


def test_overlapped_inference_gives_the_episodes_of_whole_batches(tmp_path) -> None:
    overlapped, halves = _run(tmp_path / "a", OVERLAPPED)
    plain, wholes = _run(tmp_path / "b", WHOLE_BATCH)
    assert max(halves) == 2 and set(wholes) == {4}  # the two paths really differ
    assert overlapped == plain
    assert len(overlapped) == 8 and all(r.error is None for r in overlapped)
    assert len({r.episode_return for r in plain}) == 8  # the episodes really differ
