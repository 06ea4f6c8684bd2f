"""Film failures: side-by-side videos of a failed perturbed episode and the nominal episode
of the same seed, both replayed (:mod:`robogen.rollout.replay`) after the run.

Each video's label says whether the replays reproduced the stored episodes (success,
cause, return and length, compared exactly); ``videos/index.json`` maps labels to files.
A policy that observes pixels is filmed through its own eyes: the frames it received, after
the episode's ``sensor`` corruption (named in the label); a state policy's video is a clean
render, and its label says the corruption applied to the policy's state. A run of the
batched backend is replayed on the serial path too: its label says so (:data:`BATCHED_REPLAY`),
since its pixel policy saw MuJoCo Warp's frames, not the OpenGL frames filmed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from robogen._atomic import write_atomic
from robogen.rollout.replay import (
    NOT_FILMED,
    VIDEO_DIR,
    VIDEO_INDEX,
    film_camera,
    films_policy_frames,
    read_video_index,
    record_episode,
    replay_differences,
    replay_episode,
    stored_unit,
)
from robogen.rollout.store import ResultStore
from robogen.types import EpisodeResult

if TYPE_CHECKING:
    import numpy as np

    from robogen.rollout.worker import EpisodeWorker


BATCHED_REPLAY = "replayed on the serial backend: C MuJoCo physics, OpenGL frames"
"""Label note of a video of a batched run's episode (the run stepped MuJoCo Warp worlds)."""


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def corruption_note(result: EpisodeResult, policy_frames: bool) -> tuple[str, str]:
    """What a video of ``result`` shows of its ``sensor`` corruption: ``(short, note)``, the
    short form for the clip's bar (``jpeg 0.83``) and the sentence of the video's label
    (``the policy's frames, sensor jpeg m=0.83``, or for a state policy ``clean render,
    sensor jpeg m=0.83 applied to the policy's state``); ``("", "the policy's frames")`` or
    ``("", "")`` for an episode without one."""
    try:
        records = json.loads(result.perturbations_json or "[]")
    except ValueError:
        records = []
    sensor = next((x for x in records if isinstance(x, dict) and x.get("axis") == "sensor"),
                  None)
    frames = "the policy's frames" if policy_frames else ""
    if sensor is None:
        return "", frames
    values = sensor.get("values") or {}
    kind, m = str(values.get("kind", "?")), float(values.get("magnitude", float("nan")))
    what = f"sensor {kind} m={m:.2f}"
    if policy_frames:
        return f"{kind} {m:.2f}", f"{frames}, {what}"
    return f"{kind} {m:.2f} on state", f"clean render, {what} applied to the policy's state"


def film_failures(
    store: ResultStore, results: Sequence[EpisodeResult], *, per_axis: int = 2,
    worker: EpisodeWorker | None = None,
) -> dict[str, str]:
    """Write side-by-side MP4s (nominal | perturbed) of failed single-axis episodes.

    For each axis, the failures at its highest severity whose nominal episode
    of the same seed succeeded are preferred; failures of the machinery
    (:data:`~robogen.rollout.replay.NOT_FILMED`) are not filmed. Each side replays its
    stored unit (:func:`~robogen.rollout.replay.replay_episode`); a label says ``replay
    differs`` unless both replays reproduced their stored episodes exactly. Returns
    ``{label: path relative to the run dir}``.

    ``worker`` (an :class:`~robogen.rollout.worker.EpisodeWorker` of the run's manifest, e.g.
    the one its episodes ran on) is used and left open; by default one is made and closed.
    """
    from robogen.reports.video import write_side_by_side

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
    own = worker is None
    if worker is None:
        from robogen.rollout.worker import EpisodeWorker

        worker = EpisodeWorker(m)
    camera = film_camera(worker)
    batched = m.backend.kind == "batched"
    policy_frames = films_policy_frames(m) and not batched
    stored = {(x.condition, x.episode_index): x for x in results}
    nominal_replays: dict[int, tuple[EpisodeResult, np.ndarray]] = {}  # several axes, one twin
    try:
        for axis, r in picks:
            i = r.episode_index
            nom_stored = stored.get(("nominal", i))
            if i not in nominal_replays:
                nominal_replays[i] = (
                    replay_episode(worker, nom_stored) if nom_stored is not None
                    else record_episode(worker, stored_unit(m, "nominal", i), episode_index=i))
            nom_res, nom_frames = nominal_replays[i]
            per_res, per_frames = replay_episode(worker, r)
            same = not replay_differences(r, per_res) and (
                nom_stored is None or not replay_differences(nom_stored, nom_res))
            rel = Path(VIDEO_DIR) / f"{_slug(r.condition)}-ep{i:04d}.mp4"
            (store.run_dir / VIDEO_DIR).mkdir(parents=True, exist_ok=True)
            short, note = corruption_note(r, policy_frames)
            if batched:
                note = ", ".join(x for x in (note, BATCHED_REPLAY) if x)
            write_side_by_side(
                store.run_dir / rel,
                nom_frames,
                per_frames,
                labels=(
                    f"nominal ({'success' if nom_res.success else nom_res.cause})",
                    f"{r.condition} ({'success' if per_res.success else per_res.cause}"
                    f"{'' if same else ', replay differs'}){f' {short}' if short else ''}",
                ),
                camera=camera,
            )
            out[f"{axis}: {r.condition} episode {i}{f' ({note})' if note else ''}"] = str(rel)
        index = store.run_dir / VIDEO_DIR / VIDEO_INDEX
        write_atomic(index, json.dumps({**read_video_index(store.run_dir), **out}, indent=2))
    finally:
        if own:
            worker.close()
    return out


def film_run(run_dir: str | Path, per_axis: int,
             worker: EpisodeWorker | None = None) -> dict[str, str]:
    """:func:`film_failures` of the stored run in ``run_dir`` (a module-level entry point, so
    that several runs are filmed in parallel worker processes: ``robogen eval --policy A
    --policy B``, on the Ray workers their episodes ran on). Returns ``{label: path relative
    to the run dir}``.

    Raises:
        RunDirError: If ``run_dir`` is not a run directory.
    """
    store = ResultStore.open(Path(run_dir))
    return film_failures(store, store.load_results(), per_axis=per_axis, worker=worker)
