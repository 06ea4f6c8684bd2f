"""Evaluate a policy across axes and write the report: the jobs behind ``robogen eval``.

``evaluate(config)`` runs a new evaluation, ``resume(run_dir)`` finishes a killed run and
``rebuild_report(run_dir)`` rewrites the report from the stored episodes. The episodes
run in :mod:`robogen.rollout.runner` (plan, backend, store, and the stop rule of
``--episodes auto`` runs), which builds no report; this module adds what ends in one:
the report files and the failure videos.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robogen.configs import EvalConfig
from robogen.errors import RunDirError
from robogen.perturbations import AXES
from robogen.reports.build import build_report
from robogen.reports.plot_worker import PlotWorker
from robogen.reports.writers import report_write_error, write_report
from robogen.rollout.faults import load_faults
from robogen.rollout.gpu import hardware_summary, read_placements
from robogen.rollout.replay import VIDEO_DIR, existing_videos
from robogen.rollout.runner import (
    ProgressFn,
    ResumeOptions,
    resume_run,
    run_evaluation,
    saved_config,
)
from robogen.rollout.store import ResultStore
from robogen.types import EvalManifest


@dataclass(frozen=True, slots=True)
class EvalOutcome:
    """What an evaluation produced.

    Attributes:
        run_dir: The run directory.
        n_episodes: Episodes stored.
        files: Report files by kind (``json``, ``md``, ``html``, plots, videos).
    """

    run_dir: Path
    n_episodes: int
    files: dict[str, Path]


def load_backend(kind: str) -> None:
    """Import the module that registers backend ``kind`` when it lives above
    :mod:`robogen.rollout` (``batched``: :mod:`robogen.batched.backend`)."""
    if kind == "batched":
        import robogen.batched.backend  # noqa: F401  (registers "batched")


def evaluate(
    cfg: EvalConfig,
    *,
    progress: ProgressFn | None = None,
    check_manifest: Callable[[EvalManifest], None] | None = None,
) -> EvalOutcome:
    """Run the evaluation ``cfg`` describes and write its report.

    :func:`~robogen.rollout.runner.run_evaluation` (same arguments and errors), then
    :func:`finish_report` with ``cfg.videos``.
    """
    load_backend(cfg.backend)
    with PlotWorker() as plotter:  # imports matplotlib on another core while episodes run
        store = run_evaluation(cfg, progress=progress, check_manifest=check_manifest)
        return finish_report(store, videos=cfg.videos, plotter=plotter)


def resume(
    run_dir: Path,
    *,
    progress: ProgressFn | None = None,
    videos: int | None = None,
    **options: Any,
) -> EvalOutcome:
    """Finish a killed run: run only the units without a stored part, then report.

    :func:`~robogen.rollout.runner.resume_run` (units stored with a cause in
    :data:`~robogen.rollout.runner.RETRIED_ON_RESUME` run again unless
    ``retry_invalid=False``), then :func:`finish_report`.

    Args:
        run_dir: The run directory.
        progress: Called with (episodes done, total).
        videos: Failures filmed per axis (default: the run's setting, else 2).
        **options: :class:`~robogen.rollout.runner.ResumeOptions` fields
            (``backend`` (default ``"ray"``), ``workers``, ``address``, ``unit_timeout``,
            ``retry_invalid``, ``worlds``, ``sim_device``).

    Raises:
        TypeError: On a keyword that is not a ``ResumeOptions`` field.
        RunDirError, InvalidSpecError, WorkerSetupError: As ``resume_run``.
    """
    resume_options = ResumeOptions(**options)  # a bad keyword fails before the helper starts
    load_backend(resume_options.backend)
    with PlotWorker() as plotter:
        store = resume_run(run_dir, resume_options, progress=progress)
        n_videos = saved_config(store.run_dir).get("videos", 2) if videos is None else videos
        return finish_report(store, videos=2 if n_videos is None else n_videos, plotter=plotter)


def finish_report(
    store: ResultStore,
    *,
    videos: int = 0,
    keep_videos: dict[str, str] | None = None,
    plotter: PlotWorker | None = None,
) -> EvalOutcome:
    """Build and write the report of a stored run (and film failure videos if asked).

    Args:
        store: The run's store.
        videos: Failures filmed per axis (0: none).
        keep_videos: Video files (by kind) already in the run dir to link from the report.
        plotter: A started helper that draws the figures (default: drawn in-process).

    Raises:
        RunDirError: If the run has no finished episode.
    """
    results = store.load_results()
    if not results:
        raise RunDirError(f"run directory {str(store.run_dir)!r} has no finished episodes")
    m = store.manifest
    kinds = {a: AXES.get(a).kind for a in m.axes if a in AXES}
    report = build_report(results, m, policy_obs_mode=m.policy_obs_mode, axis_kinds=kinds,
                          faults=load_faults(store.run_dir),
                          hardware=_hardware(store))
    video_files: dict[str, str] = dict(keep_videos or {})
    if videos > 0:
        from robogen.runs.failure_videos import film_failures

        try:
            video_files = film_failures(store, results, per_axis=videos)
        except OSError as e:  # a full disk: named like a report file's
            raise report_write_error(report, store.run_dir,
                                     e.filename or store.run_dir / VIDEO_DIR, e) from e
    files = write_report(report, store.run_dir, videos=video_files,
                         draw=plotter.draw if plotter is not None else None)
    return EvalOutcome(store.run_dir, len(results), dict(files))


def rebuild_report(run_dir: Path) -> EvalOutcome:
    """Rewrite report files from the stored episodes (keeps existing videos).

    Raises:
        RunDirError: If ``run_dir`` is missing, corrupt or has no finished episode.
    """
    store = ResultStore.open(run_dir)
    return finish_report(store, videos=0, keep_videos=existing_videos(store.run_dir))


def _hardware(store: ResultStore) -> str:
    """The report header's line on where the episodes ran: the workers' placements, or for
    the batched backend its worlds, device and simulator (``"batched backend: 64 worlds on
    cpu (MuJoCo Warp 4.0.0, float32)"``)."""
    b = store.manifest.backend
    if b.kind == "batched":
        mjw = b.versions.get("mujoco-warp", "?")
        return (f"batched backend: {b.worlds} worlds on {b.device} (MuJoCo Warp {mjw}, "
                f"{b.float_precision})")
    return hardware_summary(read_placements(store.run_dir))
