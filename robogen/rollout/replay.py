"""Film failures: replay a failed perturbed episode and the nominal episode of the same seed.

Episodes are deterministic functions of (run seed, episode index, condition),
so a failure is filmed after the run by replaying it with rendering on, instead
of rendering every episode during the evaluation. The replay runs the episode
alone (batch of one); a policy whose batched arithmetic differs in the last
bits may diverge from the stored episode in rare cases, so each video's label
says whether the replay reproduced the stored outcome.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robogen._atomic import write_atomic
from robogen.rollout.store import ResultStore
from robogen.types import EpisodeResult, WorkUnit

VIDEO_DIR = "videos"
VIDEO_INDEX = "index.json"
VIDEO_SIZE = 128
"""Side of the filmed frames [px] (square)."""


def record_episode(
    worker: Any, unit: WorkUnit, size: int = VIDEO_SIZE
) -> tuple[EpisodeResult, np.ndarray]:
    """Run a one-episode unit with ``worker``.

    Returns:
        The episode's result and its ``(T, size, size, 3) uint8`` frames.
    """
    from robogen.envs.base import find_scene

    frames: list[np.ndarray] = []

    def hook(_episode: int, env: Any) -> None:
        frames.append(find_scene(env).render_frame(None, size, size))

    worker.frame_hook = hook
    try:
        result = worker.run_unit(unit)[0]
    finally:
        worker.frame_hook = None
    if not frames:
        frames.append(np.zeros((size, size, 3), np.uint8))
    return result, np.stack(frames)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def film_failures(
    store: ResultStore, results: Sequence[EpisodeResult], *, per_axis: int = 2
) -> dict[str, str]:
    """Write side-by-side MP4s (nominal | perturbed) of failed single-axis episodes.

    For each axis, the failures at its highest severity whose nominal episode
    of the same seed succeeded are preferred. Returns ``{label: path relative
    to the run dir}``.
    """
    from robogen.reports.video import write_side_by_side
    from robogen.rollout.worker import EpisodeWorker

    m = store.manifest
    by_cond = {c.name: c for c in m.conditions}
    nominal_ok = {r.episode_index for r in results if r.condition == "nominal" and r.success}
    picks: list[tuple[str, EpisodeResult]] = []
    for axis in m.axes:
        singles = [c for c in m.conditions if c.axes == (axis,)]
        if not singles:
            continue
        top = max(singles, key=lambda c: (c.severity, c.split != "all"))
        failed = [r for r in results if r.condition == top.name and not r.success]
        failed.sort(key=lambda r: (r.episode_index not in nominal_ok, r.episode_index))
        picks.extend((axis, r) for r in failed[:per_axis])
    if not picks:
        return {}
    out: dict[str, str] = {}
    worker = EpisodeWorker(m)
    nominal = next(c for c in m.conditions if c.name == "nominal")
    try:
        for axis, r in picks:
            i = r.episode_index
            nom_res, nom_frames = record_episode(worker, WorkUnit(-1, nominal, (i,)))
            per_res, per_frames = record_episode(worker, WorkUnit(-1, by_cond[r.condition], (i,)))
            same = per_res.success == r.success
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
