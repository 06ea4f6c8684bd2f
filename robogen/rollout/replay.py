"""Replay stored episodes with rendering on (filming them: :mod:`robogen.runs.failure_videos`).

Episodes are deterministic functions of (run seed, episode index, condition),
so a failure is filmed after the run by replaying it with rendering on, instead
of rendering every episode during the evaluation. A policy's batched arithmetic may
depend on the batch's shape and on a row's place in it (an SB3 MLP run on a batch of
one differs from the same rows in a batch of eight in the last bits, and the episode
return by ~1e-8; XLA's convolutions of a Flax CNN likewise), so a replay keeps the
stored unit's batch layout. It first runs the episode alone in that layout (its row at
its place, the other rows copies of it: ``EpisodeWorker.run_unit(alone=...)``, one env
stepped instead of the unit's eight); if that does not reproduce the stored episode
exactly, or the policy cannot run an episode alone (it takes ``slots`` or reads the
simulator), it runs the whole unit again, filming only that episode. Each video's
label says whether the replay reproduced the stored episode (success, cause, return
and length, compared exactly).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from robogen.rollout.plan import make_units
from robogen.types import EpisodeResult, EvalManifest, WorkUnit

VIDEO_DIR = "videos"
VIDEO_INDEX = "index.json"
VIDEO_SIZE = 128
"""Side of the filmed frames [px] (square)."""
NOT_FILMED = ("worker_died", "infra_timeout", "infra_error")
"""Causes of failures never replayed for a video."""


def film_camera(worker: Any) -> str:
    """The camera failure videos are filmed from: the scene's first camera role (its
    observation camera), ``""`` for a scene without one (MuJoCo's free camera)."""
    cameras = worker.scenes[0].roles.cameras
    return str(cameras[0]) if cameras else ""


def record_episode(
    worker: Any, unit: WorkUnit, size: int = VIDEO_SIZE, episode_index: int | None = None,
    *, alone: bool = False,
) -> tuple[EpisodeResult, np.ndarray]:
    """Run ``unit`` with ``worker``, filming one of its episodes from :func:`film_camera`.

    Args:
        worker: An :class:`~robogen.rollout.worker.EpisodeWorker` of the run's manifest.
        unit: The unit to run (all its episodes run, as one batch).
        size: Side of the frames [px].
        episode_index: The episode filmed (default: the unit's first).
        alone: Run only the filmed episode, in the unit's batch layout
            (``EpisodeWorker.run_unit(alone=...)``; needs ``worker.can_run_alone()``).

    Returns:
        The filmed episode's result and its ``(T, size, size, 3) uint8`` frames (T: its
        steps plus the reset frame): for a policy that observes pixels
        (:func:`films_policy_frames`) the images it received, after the episode's
        ``sensor`` corruption, scaled to ``size`` (nearest neighbour); otherwise a clean
        render from :func:`film_camera`.
    """
    from robogen.envs.base import find_scene

    wanted = unit.episode_indices[0] if episode_index is None else episode_index
    if wanted not in unit.episode_indices:
        raise ValueError(f"episode {wanted} is not in unit {unit.unit_id} "
                         f"(episodes {list(unit.episode_indices)})")
    frames: list[np.ndarray] = []
    camera = film_camera(worker) or None
    policy_frames = films_policy_frames(worker.manifest)

    def hook(episode: int, env: Any) -> None:
        if episode == wanted:
            if policy_frames:
                frames.append(policy_frame(env.last_observation, size))
            else:
                frames.append(find_scene(env).render_frame(camera, size, size))

    worker.frame_hook = hook
    try:
        results = worker.run_unit(unit, alone=wanted if alone else None)
    finally:
        worker.frame_hook = None
    if not frames:
        frames.append(np.zeros((size, size, 3), np.uint8))
    result = next(r for r in results if r.episode_index == wanted)
    return result, np.stack(frames)


def films_policy_frames(manifest: EvalManifest) -> bool:
    """Whether failure videos of this run show the policy's own observations (it observes
    pixels: what it received, corruptions included) rather than a clean render."""
    return manifest.obs_mode != "state" and manifest.policy_obs_mode != "state"


def policy_frame(observation: Any, size: int) -> np.ndarray:
    """The image of a delivered ``pixels`` or ``state+pixels`` observation (a pending frame
    is waited for), scaled to ``(size, size, 3) uint8`` by nearest neighbour."""
    from PIL import Image

    from robogen.envs.render import resolve_frames

    obs = resolve_frames(observation)
    image = np.asarray(obs["pixels"] if isinstance(obs, dict) else obs, dtype=np.uint8)
    if image.shape[:2] == (size, size):
        return image.copy()
    return np.asarray(Image.fromarray(image).resize((size, size), Image.Resampling.NEAREST))


def stored_unit(manifest: EvalManifest, condition: str, episode_index: int) -> WorkUnit:
    """The unit of the run's plan that ran ``episode_index`` under ``condition``.

    Raises:
        KeyError: If the plan has no such episode.
    """
    for unit in make_units(manifest.conditions, manifest.n_episodes, manifest.batch_size):
        if unit.condition.name == condition and episode_index in unit.episode_indices:
            return unit
    raise KeyError(f"the run's plan has no episode {episode_index} of condition {condition!r}")


def replay_episode(worker: Any, result: EpisodeResult, size: int = VIDEO_SIZE
                   ) -> tuple[EpisodeResult, np.ndarray]:
    """Replay the stored episode ``result`` exactly, filming it.

    The episode runs alone in its unit's batch layout when the policy allows it; if that
    does not reproduce ``result`` exactly (:func:`replay_differences`), its whole unit
    runs again (see the module docstring).

    Args:
        worker: An :class:`~robogen.rollout.worker.EpisodeWorker` of the run's manifest.
        result: A stored episode of that run.
        size: Side of the frames [px].

    Returns:
        The replayed episode's result and its ``(T, size, size, 3) uint8`` frames.
    """
    unit = stored_unit(worker.manifest, result.condition, result.episode_index)
    if worker.can_run_alone():
        replayed = record_episode(worker, unit, size, result.episode_index, alone=True)
        if not replay_differences(result, replayed[0]):
            return replayed
    return record_episode(worker, unit, size, episode_index=result.episode_index)


def replay_differences(stored: EpisodeResult, replayed: EpisodeResult) -> list[str]:
    """What differs between a stored episode and its replay (exact comparison); empty if
    the replay reproduced it: success, cause, return and length."""
    out = []
    if stored.success != replayed.success or stored.cause != replayed.cause:
        out.append(f"outcome {stored.cause or 'success'} -> {replayed.cause or 'success'}")
    if stored.episode_return != replayed.episode_return:
        out.append(f"return {stored.episode_return!r} -> {replayed.episode_return!r}")
    if stored.length_steps != replayed.length_steps:
        out.append(f"length {stored.length_steps} -> {replayed.length_steps}")
    return out


def read_video_index(run_dir: Path) -> dict[str, str]:
    """``run_dir/videos/index.json`` as ``{label: relative path}`` ({} if absent or unreadable)."""
    try:
        d = json.loads((Path(run_dir) / VIDEO_DIR / VIDEO_INDEX).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in d.items()} if isinstance(d, dict) else {}


def existing_videos(run_dir: Path) -> dict[str, str]:
    """Videos in ``run_dir/videos`` as ``{label: relative path}`` (labels from index.json)."""
    folder = Path(run_dir) / VIDEO_DIR
    if not folder.is_dir():
        return {}
    present = {str(p.relative_to(run_dir)): p.stem for p in sorted(folder.glob("*.mp4"))}
    labelled = {k: v for k, v in read_video_index(run_dir).items() if v in present}
    named = set(labelled.values())
    labelled.update({stem: rel for rel, stem in present.items() if rel not in named})
    return labelled
