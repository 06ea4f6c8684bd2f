"""Film failures: replay a failed perturbed episode and the nominal episode of the same seed.

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robogen._atomic import write_atomic
from robogen.rollout.plan import make_units
from robogen.rollout.store import ResultStore
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
        steps plus the reset frame).
    """
    from robogen.envs.base import find_scene

    wanted = unit.episode_indices[0] if episode_index is None else episode_index
    if wanted not in unit.episode_indices:
        raise ValueError(f"episode {wanted} is not in unit {unit.unit_id} "
                         f"(episodes {list(unit.episode_indices)})")
    frames: list[np.ndarray] = []
    camera = film_camera(worker) or None

    def hook(episode: int, env: Any) -> None:
        if episode == wanted:
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


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def film_failures(
    store: ResultStore, results: Sequence[EpisodeResult], *, per_axis: int = 2
) -> dict[str, str]:
    """Write side-by-side MP4s (nominal | perturbed) of failed single-axis episodes.

    For each axis, the failures at its highest severity whose nominal episode
    of the same seed succeeded are preferred; failures of the machinery
    (:data:`NOT_FILMED`) are not filmed. Each side replays its stored unit
    (:func:`replay_episode`); a label says ``replay differs`` unless both replays
    reproduced their stored episodes exactly. Returns ``{label: path relative to
    the run dir}``.
    """
    from robogen.reports.video import write_side_by_side
    from robogen.rollout.worker import EpisodeWorker

    m = store.manifest
    nominal_ok = {r.episode_index for r in results if r.condition == "nominal" and r.success}
    picks: list[tuple[str, EpisodeResult]] = []
    for axis in m.axes:
        singles = [c for c in m.conditions if c.axes == (axis,)]
        if not singles:
            continue
        top = max(singles, key=lambda c: (c.severity, c.split != "all"))
        # not the machinery's failures: replaying a hung or killed worker's episode here
        # would hang or kill the driver (an unstable simulation is worth seeing)
        failed = [r for r in results if r.condition == top.name and not r.success
                  and r.cause not in NOT_FILMED]
        failed.sort(key=lambda r: (r.episode_index not in nominal_ok, r.episode_index))
        picks.extend((axis, r) for r in failed[:per_axis])
    if not picks:
        return {}
    out: dict[str, str] = {}
    worker = EpisodeWorker(m)
    camera = film_camera(worker)
    stored = {(x.condition, x.episode_index): x for x in results}
    try:
        for axis, r in picks:
            i = r.episode_index
            nom_stored = stored.get(("nominal", i))
            if nom_stored is not None:
                nom_res, nom_frames = replay_episode(worker, nom_stored)
            else:
                nom_res, nom_frames = record_episode(worker, stored_unit(m, "nominal", i),
                                                     episode_index=i)
            per_res, per_frames = replay_episode(worker, r)
            same = not replay_differences(r, per_res) and (
                nom_stored is None or not replay_differences(nom_stored, nom_res))
            rel = Path(VIDEO_DIR) / f"{_slug(r.condition)}-ep{i:04d}.mp4"
            (store.run_dir / VIDEO_DIR).mkdir(parents=True, exist_ok=True)
            write_side_by_side(
                store.run_dir / rel,
                nom_frames,
                per_frames,
                labels=(
                    f"nominal ({'success' if nom_res.success else nom_res.cause})",
                    f"{r.condition} ({'success' if per_res.success else per_res.cause}"
                    f"{'' if same else ', replay differs'})",
                ),
                camera=camera,
            )
            out[f"{axis}: {r.condition} episode {i}"] = str(rel)
        index = store.run_dir / VIDEO_DIR / VIDEO_INDEX
        write_atomic(index, json.dumps({**_read_index(store.run_dir), **out}, indent=2))
    finally:
        worker.close()
    return out


def _read_index(run_dir: Path) -> dict[str, str]:
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
    labelled = {k: v for k, v in _read_index(run_dir).items() if v in present}
    named = set(labelled.values())
    labelled.update({stem: rel for rel, stem in present.items() if rel not in named})
    return labelled
