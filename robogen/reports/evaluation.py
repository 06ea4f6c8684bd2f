"""Evaluate a policy across axes and write the report: the jobs behind ``robogen eval``.

``evaluate(config)`` runs a new evaluation, ``resume(run_dir)`` finishes a killed run and
``rebuild_report(run_dir)`` rewrites the report from the stored episodes. The episodes
run in :mod:`robogen.rollout.runner` (plan, backend, store), which builds no report;
this module adds what ends in one: the stop rule of ``--episodes auto`` runs
(:func:`~robogen.reports.sequential.sequential_planner`), the report files and the
failure videos.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from robogen.configs import EvalConfig
from robogen.errors import RunDirError
from robogen.perturbations import AXES
from robogen.reports.build import build_report
from robogen.reports.plot_worker import PlotWorker
from robogen.reports.sequential import sequential_planner
from robogen.reports.writers import write_report
from robogen.rollout.faults import load_faults
from robogen.rollout.replay import existing_videos
from robogen.rollout.runner import ProgressFn, resume_run, run_evaluation, saved_config
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


def evaluate(
    cfg: EvalConfig,
    *,
    progress: ProgressFn | None = None,
    check_manifest: Callable[[EvalManifest], None] | None = None,
) -> EvalOutcome:
    """Run the evaluation ``cfg`` describes and write its report.

    Args:
        cfg: The evaluation.
        progress: Called with (episodes done, total).
        check_manifest: Called with the prepared manifest before anything is written
            or run; raising there stops the evaluation (``robogen check`` refuses a
            protocol that differs from its baseline's this way).

    Raises:
        InvalidSpecError, SpaceMismatchError, CheckpointError, UnknownNameError,
        RunDirError: On bad input, before any episode runs or any file is written.
    """
    with PlotWorker() as plotter:  # imports matplotlib on another core while episodes run
        store = run_evaluation(cfg, progress=progress, check_manifest=check_manifest,
                               make_planner=sequential_planner)
        return finish_report(store, videos=cfg.videos, plotter=plotter)


def resume(
    run_dir: Path,
    *,
    backend: str = "ray",
    workers: int | None = None,
    address: str | None = None,
    progress: ProgressFn | None = None,
    videos: int | None = None,
    unit_timeout: float | None = None,
    retry_invalid: bool = True,
) -> EvalOutcome:
    """Finish a killed run: run only the units without a stored part, then report.

    Units with episodes stored as ``worker_died``, ``infra_timeout`` or ``infra_error``
    (:data:`~robogen.rollout.runner.RETRIED_ON_RESUME`: the machinery failed, e.g. a
    policy server was down) are run again when ``retry_invalid``.

    Args:
        run_dir: The run directory.
        backend: ``ray`` or ``serial``.
        workers: Ray workers (default: the cluster's free CPUs).
        address: Ray cluster to join.
        progress: Called with (episodes done, total).
        videos: Failures filmed per axis (default: the run's setting, else 2).
        unit_timeout: Wall-clock budget per unit [s] (default: the run's setting, else
            derived from the unit's steps).
        retry_invalid: Rerun units the run gave up on.

    Raises:
        RunDirError: If ``run_dir`` is missing, empty or corrupt.
        InvalidSpecError: If ``backend`` is not ``ray`` or ``serial``.
        WorkerSetupError: If the workers cannot start.
    """
    with PlotWorker() as plotter:
        store = resume_run(run_dir, backend=backend, workers=workers, address=address,
                           progress=progress, unit_timeout=unit_timeout,
                           retry_invalid=retry_invalid, make_planner=sequential_planner)
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
                          faults=load_faults(store.run_dir))
    video_files: dict[str, str] = dict(keep_videos or {})
    if videos > 0:
        from robogen.reports.failure_videos import film_failures

        video_files = film_failures(store, results, per_axis=videos)
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
