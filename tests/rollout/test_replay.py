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


CKPT = "robogen/assets/checkpoints/ppo_reacher.zip"
VECNORM = "robogen/assets/checkpoints/ppo_reacher_vecnormalize.pkl"


def test_a_replay_reproduces_its_stored_episode_exactly(tmp_path) -> None:
    """The shipped PPO checkpoint's batched MLP depends on the batch it runs in; a replay
    runs the stored unit's batch again, so return, length and outcome match exactly."""
    from robogen.rollout.replay import replay_differences, replay_episode
    from robogen.rollout.store import ResultStore
    from robogen.runs.evaluation import evaluate

    cfg = load_eval_config(
        None, env="gymnasium/Reacher-v5", policy=f"sb3:{CKPT}", vecnormalize=VECNORM,
        episodes=6, batch_size=3, axes=["physics"], severities=[1.0], combined=False,
        max_steps=30, backend="serial", videos=0, seed=5, out=tmp_path / "r",
    )
    store = ResultStore.open(evaluate(cfg).run_dir)
    results = store.load_results()
    worker = EpisodeWorker(store.manifest)
    try:
        for r in (results[1], results[5], results[-1]):  # middle, last and another unit
            replayed, frames = replay_episode(worker, r, size=32)
            assert replay_differences(r, replayed) == []
            assert (replayed.episode_return, replayed.length_steps, replayed.success) == (
                r.episode_return, r.length_steps, r.success)
            assert frames.shape == (r.length_steps + 1, 32, 32, 3)
    finally:
        worker.close()


def test_replay_differences_name_what_differs() -> None:
    import dataclasses

    from robogen.rollout.replay import replay_differences
    from robogen.types import EpisodeResult

    a = EpisodeResult("e", "p", "nominal", (), 0.0, "all", 0, 1, -3.25, 50, False, "timeout",
                      None, "[]", (), 0.1, 0)
    assert replay_differences(a, dataclasses.replace(a, wall_time_s=9.0)) == []
    b = dataclasses.replace(a, episode_return=-3.25 + 1e-8)
    assert replay_differences(a, b) == [f"return {-3.25!r} -> {-3.25 + 1e-8!r}"]
    c = dataclasses.replace(a, success=True, cause=None, length_steps=20)
    assert replay_differences(a, c) == ["outcome timeout -> success", "length 50 -> 20"]


PIXEL_POLICY = "flax:robogen/assets/policies/push_pixels_plain"


def test_an_episode_replayed_alone_is_the_stored_one(tmp_path) -> None:
    """The shipped pixel policy's rows depend on their own observation only: run alone, each
    stored episode comes back exactly (return, length, outcome) with the same frames as a
    replay of its whole unit, and so does the episode run as a unit of its own."""
    from robogen.rollout.replay import replay_differences, stored_unit
    from robogen.rollout.store import ResultStore
    from robogen.runs.evaluation import evaluate

    cfg = load_eval_config(
        None, env="robogen/Push-v0", policy=PIXEL_POLICY, obs_mode="state+pixels",
        episodes=3, batch_size=3, axes=["texture"], severities=[1.0], combined=False,
        max_steps=12, backend="serial", videos=0, seed=3, out=tmp_path / "r",
    )
    store = ResultStore.open(evaluate(cfg).run_dir)
    results = store.load_results()
    worker = EpisodeWorker(store.manifest)
    try:
        assert worker.can_run_alone()
        for r in results:
            unit = stored_unit(store.manifest, r.condition, r.episode_index)
            alone, frames = record_episode(worker, unit, 32, r.episode_index, alone=True)
            assert replay_differences(r, alone) == []
            whole, whole_frames = record_episode(worker, unit, 32, r.episode_index)
            assert np.array_equal(frames, whole_frames)
        # a batch of one row gives the stored episode too: the batch layout does not matter
        lone, _ = record_episode(worker, WorkUnit(-1, unit.condition, (r.episode_index,)), 32)
        assert replay_differences(r, lone) == []
    finally:
        worker.close()


def test_a_policy_reading_the_simulator_does_not_run_an_episode_alone(tmp_path) -> None:
    import pytest

    cfg = load_eval_config(
        None, env="robogen/Reach-v0", policy="expert:reach", episodes=2, batch_size=2,
        axes=["texture"], severities=[1.0], combined=False, max_steps=4, backend="serial",
        videos=0, out=tmp_path / "r",
    )
    m = prepare(cfg)
    worker = EpisodeWorker(m)
    try:
        assert not worker.can_run_alone()  # the expert reads the simulator of each slot
        with pytest.raises(ValueError, match="alone"):
            worker.run_unit(WorkUnit(0, m.conditions[0], (0, 1)), alone=1)
    finally:
        worker.close()


def test_a_failure_video_records_the_camera_it_was_filmed_from(tmp_path) -> None:
    from robogen.reports.video import read_video_info
    from robogen.runs.evaluation import evaluate

    for obs_mode, camera in (("pixels", "side"), ("state", "front")):  # observation camera
        cfg = load_eval_config(
            None, env="robogen/Reach-v0", policy="random", episodes=2, batch_size=2,
            axes=["texture"], severities=[1.0], combined=False, max_steps=5, backend="serial",
            videos=1, obs_mode=obs_mode, camera="side", out=tmp_path / obs_mode,
        )
        run_dir = evaluate(cfg).run_dir
        videos = sorted((run_dir / "videos").glob("*.mp4"))
        assert videos
        info = read_video_info(videos[0])
        assert info is not None and info.camera == camera, obs_mode


def _sensor_run(tmp_path, policy: str):
    cfg = load_eval_config(
        None, env="robogen/Reach-v0", policy=policy, obs_mode="pixels", episodes=2,
        batch_size=1, axes=["sensor"], severities=[1.0], splits=["train"], combined=False,
        max_steps=6, backend="serial", videos=0, out=tmp_path / "r",
    )
    m = prepare(cfg)
    train = next(c for c in m.conditions if c.name != "nominal" and c.levels[0].split == "train")
    return m, train


def _clean_reset_observation(m, condition):
    """The reset observation of episode 1 under ``condition`` with the sensor filter off."""
    env = make_env(m)
    env.set_levels(condition.levels)
    env.reset(seed=episode_seed(m.seed, 1),
              options={"perturbation_seed": perturbation_seed(m.seed, 1)})
    clean = find_scene(env).observe()
    env.close()
    return clean


def test_a_pixel_policys_failure_video_shows_the_corrupted_frames_it_received(tmp_path):
    """sensor@train (gaussian noise or JPEG): the filmed frames are the policy's corrupted
    observations, not the clean render of the same state; the label names the corruption."""
    from robogen.rollout.replay import films_policy_frames, policy_frame
    from robogen.runs.failure_videos import corruption_note

    m, train = _sensor_run(tmp_path, "random:0")
    assert films_policy_frames(m)
    worker = EpisodeWorker(m)
    try:
        result, frames = record_episode(worker, WorkUnit(-1, train, (1,)), size=64)
    finally:
        worker.close()
    clean = policy_frame(_clean_reset_observation(m, train), 64)
    assert frames.shape == (result.length_steps + 1, 64, 64, 3)
    assert np.abs(frames[0].astype(float) - clean).mean() > 2.0  # corrupted, visibly
    short, note = corruption_note(result, policy_frames=True)
    kind = next(x for x in ("gaussian_noise", "jpeg") if x in note)
    assert short.startswith(kind) and note.startswith(f"the policy's frames, sensor {kind} m=")


def test_a_state_policys_failure_video_is_the_clean_render_and_says_so(tmp_path):
    from robogen.rollout.replay import films_policy_frames
    from robogen.runs.failure_videos import corruption_note

    m, train = _sensor_run(tmp_path, "expert:reach")  # privileged: reads the simulator
    assert not films_policy_frames(m)
    worker = EpisodeWorker(m)
    try:
        result, frames = record_episode(worker, WorkUnit(-1, train, (1,)), size=64)
        camera = worker.scenes[0].roles.cameras[0]
    finally:
        worker.close()
    env = make_env(m)
    env.set_levels(train.levels)
    env.reset(seed=episode_seed(m.seed, 1),
              options={"perturbation_seed": perturbation_seed(m.seed, 1)})
    reset_frame = find_scene(env).render_frame(camera, 64, 64)
    env.close()
    assert np.array_equal(frames[0], reset_frame)
    _, note = corruption_note(result, policy_frames=False)
    assert note.startswith("clean render, sensor ")
    assert note.endswith("applied to the policy's state")
