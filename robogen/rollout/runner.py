"""Run an evaluation's episodes: prepare, plan, run on a backend, store.

``run_evaluation(config)`` creates a run directory and runs all of its episodes;
``resume_run(run_dir)`` runs a killed run's missing units. Both end with the episodes
stored and build no report: :mod:`robogen.runs.evaluation` (``evaluate``, ``resume``,
``rebuild_report``: the jobs behind ``robogen eval`` and ``robogen report``) calls them
and writes the report. ``--episodes auto`` runs are scheduled by
:func:`robogen.rollout.sequential.run_auto`, with the stop rule of
:func:`robogen.stats.sequential_planner`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from robogen._console import print_message
from robogen.configs import EvalConfig
from robogen.plugins import import_plugins
from robogen.rollout.backend import Backend, BackendOptions
from robogen.rollout.backends import describe_backend, make_backend
from robogen.rollout.gpu import fixed_share
from robogen.rollout.lock import RunDirLock
from robogen.rollout.manifest import build_manifest, require_schema, with_hash
from robogen.rollout.plan import make_units
from robogen.rollout.probe import probe_policy
from robogen.rollout.sequential import run_auto
from robogen.rollout.session import EvalSession
from robogen.rollout.store import ResultStore
from robogen.types import (
    EvalManifest,
    RenderSettings,
    WorkUnit,
    to_dict,
)

DAMAGED_PART = ("an episode part was unreadable ({why}); moved to {path!r}, its unit runs "
                "again")
"""Warning of a resume that set a damaged part aside (:meth:`ResultStore.set_aside_damaged`)."""

RETRIED_ON_RESUME = ("worker_died", "infra_timeout", "infra_error")
"""Causes whose units ``--resume`` runs again (the machinery failed; the cell may work now)."""

ProgressFn = Callable[[int, int], None]


def _default_out(cfg: EvalConfig) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{cfg.env}-{cfg.policy.split('/')[-1]}").strip("-")
    return Path("runs") / f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}"


def plan_units(manifest: EvalManifest) -> tuple[WorkUnit, ...]:
    """All work units of a manifest (deterministic)."""
    return make_units(manifest.conditions, manifest.n_episodes, manifest.batch_size)


def prepare(cfg: EvalConfig) -> EvalManifest:
    """Create one env and load the policy once, so every setup error surfaces before any rollout.

    Returns:
        The evaluation manifest of ``cfg``.

    Raises:
        UnknownNameError, SpaceMismatchError, CheckpointError, InvalidSpecError: On bad input.
    """
    from robogen.envs import make
    from robogen.perturbations.wrapper import PerturbedEnv
    from robogen.policies import load_policy
    from robogen.rollout.worker import policy_context

    render = RenderSettings(width=cfg.width, height=cfg.height, camera=cfg.camera or "")
    env = PerturbedEnv(
        make(
            cfg.env,
            obs_mode=cfg.obs_mode,
            max_steps=cfg.max_steps,
            render=render if cfg.obs_mode != "state" else None,
            success_threshold=cfg.success_threshold,
            **cfg.env_kwargs,
        )
    )
    ctx = policy_context(
        cfg.env,
        cfg.obs_mode,
        cfg.vecnormalize,
        env,
        "cuda" if fixed_share(cfg.num_gpus_per_worker) > 0 else "cpu",
    )
    policy = load_policy(cfg.policy, ctx)
    try:
        _check_camera(cfg, env)
        probe_policy(cfg.policy, policy, env, seed=cfg.seed)
        manifest = build_manifest(cfg, env, policy)
    finally:
        env.close()
    return manifest


def _check_camera(cfg: EvalConfig, env: Any) -> None:
    import mujoco

    from robogen.envs.base import find_scene
    from robogen.errors import UnknownNameError

    if not cfg.camera:
        return
    model = find_scene(env).model
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
    if cfg.camera not in names:
        raise UnknownNameError(f"camera of {cfg.env}", cfg.camera, [n for n in names if n])


def backend_options(cfg: EvalConfig) -> BackendOptions:
    """The :class:`BackendOptions` of an evaluation config."""
    return BackendOptions(kind=cfg.backend, workers=cfg.workers, address=cfg.address,
                          num_gpus_per_worker=cfg.num_gpus_per_worker,
                          unit_timeout_s=cfg.unit_timeout, render_device=cfg.render_device,
                          worlds=cfg.worlds, sim_device=cfg.sim_device)


def run_session(store: ResultStore, options: BackendOptions,
                progress: ProgressFn | None = None, backend: Backend | None = None,
                rerun: frozenset[int] = frozenset()) -> None:
    """Run the stored run's missing units (and ``rerun``) on ``backend`` or one of ``options``.

    Raises:
        WorkerSetupError: If the workers cannot start.
    """
    if backend is None:
        done = store.done_units() - rerun
        n = sum(1 for u in plan_units(store.manifest) if u.unit_id not in done)
        backend = make_backend(store.manifest, options, max_workers=max(n, 1))
    with EvalSession(store, backend) as session:
        session.run(progress=progress, rerun=rerun)


def run_sweep(store: ResultStore, options: BackendOptions, progress: ProgressFn | None) -> None:
    """Severity sweep rounds: add the bisection severities of every axis, run them, repeat.

    New conditions are appended to the manifest (rewritten atomically before
    they run), so unit ids of earlier rounds never change and a killed sweep
    resumes: the stored manifest's missing units run first, then the rounds
    continue from the stored episodes (the choice is a function of them only).
    """
    from robogen.stats.sweep import next_severities
    from robogen.types import INVALID_CAUSES, AxisLevel, Condition

    m = store.manifest
    if not m.breaking_levels:
        return
    while True:
        by_cond: dict[str, dict[int, bool]] = {}
        for r in store.load_results():
            if r.cause not in INVALID_CAUSES:
                by_cond.setdefault(r.condition, {})[r.episode_index] = r.success
        nominal = by_cond.get("nominal", {})
        added: list[Condition] = []
        for axis in m.axes:
            singles = {c.levels[0].severity: c.name for c in m.conditions
                       if len(c.levels) == 1 and c.axes == (axis,) and c.split == "all"}
            idx = sorted(set(nominal).intersection(*(by_cond.get(n, {}) for n in singles.values())))
            if not idx:
                continue
            points = {0.0: np.array([nominal[i] for i in idx], dtype=bool)}
            for sev, name in singles.items():
                points[sev] = np.array([by_cond[name][i] for i in idx], dtype=bool)
            for sev in next_severities(points, m.breaking_levels):
                lv = AxisLevel(axis, sev)
                added.append(Condition(lv.label, (lv,)))
        if not added:
            return
        sevs = tuple(sorted({*m.severities, *(c.severity for c in added)}))
        m = with_hash(replace(m, conditions=(*m.conditions, *added), severities=sevs))
        from robogen._atomic import write_atomic
        from robogen.rollout.store import MANIFEST

        write_atomic(store.run_dir / MANIFEST, json.dumps(to_dict(m), indent=2))
        store.manifest = m
        run_session(store, options, progress)


def run_evaluation(
    cfg: EvalConfig,
    *,
    progress: ProgressFn | None = None,
    check_manifest: Callable[[EvalManifest], None] | None = None,
) -> ResultStore:
    """Create the run directory ``cfg`` describes and run all of its episodes (no report).

    Args:
        cfg: The evaluation.
        progress: Called with (episodes done, total).
        check_manifest: Called with the prepared manifest before anything is written
            or run; raising there stops the evaluation (``robogen check`` refuses a
            protocol that differs from its baseline's this way).

    Returns:
        The run's store, every episode stored.

    Raises:
        InvalidSpecError, SpaceMismatchError, CheckpointError, UnknownNameError,
        RunDirError: On bad input, before any episode runs or any file is written.
    """
    out = Path(cfg.out) if cfg.out else _default_out(cfg)
    ResultStore.require_new(out)
    manifest = prepare(cfg)
    if check_manifest is not None:
        check_manifest(manifest)
    # workers start before the run dir exists: a set-up failure leaves nothing behind
    backend = make_backend(manifest, backend_options(cfg), max_workers=len(plan_units(manifest)))
    lock: RunDirLock | None = None
    try:
        backend.start()
        manifest = with_hash(replace(manifest, backend=describe_backend(backend, cfg.backend)))
        store = ResultStore.create(out, manifest)
        lock = RunDirLock(store.run_dir).acquire()  # a --resume started meanwhile is refused
        (store.run_dir / "eval_config.json").write_text(cfg.model_dump_json(indent=2))
    except BaseException:
        backend.close()
        if lock is not None:
            lock.release()
        raise
    with lock:
        if manifest.sequential is not None:
            run_auto(store, backend_options(cfg), progress, backend=backend)
        else:
            run_session(store, backend_options(cfg), progress, backend=backend)
            run_sweep(store, backend_options(cfg), progress)
    return store


def _require_registrations(manifest: EvalManifest, run_dir: Path | str) -> None:
    """Import the plug-ins ``manifest`` lists; then its env family, scheme and axes must be
    registered here (a run made by a script that registered them itself cannot resume
    elsewhere: :data:`~robogen.plugins.SCRIPT_RESUME`).

    Raises:
        PluginError: A plug-in that does not import, or a script's registration missing.
        UnknownNameError: A registration missing otherwise.
    """
    from robogen.errors import PluginError, UnknownNameError
    from robogen.plugins import SCRIPT, SCRIPT_RESUME
    from robogen.rollout.manifest import plugin_modules

    import_plugins(manifest.plugins, why=f" that the run in {str(run_dir)!r} was made with")
    try:
        plugin_modules(manifest.env_id, manifest.policy, manifest.axes)
    except UnknownNameError as e:
        if SCRIPT in manifest.plugins:
            raise PluginError(SCRIPT, SCRIPT_RESUME.format(error=e)) from e
        raise


def saved_config(run_dir: Path) -> dict[str, Any]:
    """A run's ``eval_config.json`` as data (``{}`` for a run dir written without one)."""
    cfg_path = Path(run_dir) / "eval_config.json"
    return json.loads(cfg_path.read_text()) if cfg_path.exists() else {}


@dataclass(frozen=True, slots=True)
class ResumeOptions:
    """How :func:`resume_run` finishes a killed run (what to run is in its manifest).

    Attributes:
        backend: ``ray``, ``serial`` or ``batched``.
        workers: Ray workers (default: the cluster's free CPUs).
        address: Ray cluster to join.
        unit_timeout: Wall-clock budget per unit [s] (default: the run's setting, else
            derived from the unit's steps).
        retry_invalid: Rerun units the run gave up on (:data:`RETRIED_ON_RESUME`).
        worlds: Worlds of the batched backend (default: the run's setting, else its default).
        sim_device: Device of the batched backend (default: the run's setting, else its
            default).
    """

    backend: str = "ray"
    workers: int | None = None
    address: str | None = None
    unit_timeout: float | None = None
    retry_invalid: bool = True
    worlds: int | None = None
    sim_device: str | None = None


def resume_run(
    run_dir: Path,
    options: ResumeOptions | None = None,
    *,
    progress: ProgressFn | None = None,
) -> ResultStore:
    """Finish a killed run: run only the units without a stored part (no report).

    Units with episodes stored as ``worker_died``, ``infra_timeout`` or ``infra_error``
    (:data:`RETRIED_ON_RESUME`: the machinery failed, e.g. a policy server was down) are
    run again when ``options.retry_invalid``.

    Args:
        run_dir: The run directory.
        options: Backend, workers, timeouts (default :class:`ResumeOptions`: Ray).
        progress: Called with (episodes done, total).

    Returns:
        The run's store, every episode stored.

    Raises:
        RunDirError: If ``run_dir`` is missing, empty or corrupt.
        InvalidSpecError: If ``options.backend`` is not ``ray`` or ``serial``.
        WorkerSetupError: If the workers cannot start.
        PluginError: If a plug-in module the run's manifest lists cannot be imported.
    """
    options = options or ResumeOptions()
    store = ResultStore.open(run_dir)
    require_schema(store.manifest, run_dir)
    _require_registrations(store.manifest, run_dir)
    with RunDirLock(store.run_dir):  # one writer: a run still going is refused, a dead one's
        _resume_locked(store, options, progress)  # lock taken over
    return store


def _resume_locked(store: ResultStore, options: ResumeOptions,
                   progress: ProgressFn | None) -> None:
    """:func:`resume_run` once the run directory's writer lock is held."""
    store.remove_stale_temporaries()
    for path, why in store.set_aside_damaged():
        print_message("warning", DAMAGED_PART.format(path=str(path), why=why),
                      style="bold yellow")
    saved = saved_config(store.run_dir)
    unit_timeout = options.unit_timeout
    if unit_timeout is None:
        unit_timeout = saved.get("unit_timeout")
    run_options = BackendOptions(kind=options.backend,  # type: ignore[arg-type]  # checked there
                                 workers=options.workers, address=options.address,
                                 num_gpus_per_worker=saved.get("num_gpus_per_worker", 0.0),
                                 unit_timeout_s=unit_timeout,
                                 render_device=saved.get("render_device", "auto"),
                                 worlds=options.worlds if options.worlds is not None
                                 else saved.get("worlds"),
                                 sim_device=options.sim_device or saved.get("sim_device"))
    rerun = (store.units_with_causes(RETRIED_ON_RESUME) if options.retry_invalid
             else frozenset[int]())
    if store.manifest.sequential is not None:
        run_auto(store, run_options, progress, rerun=rerun)
    else:
        run_session(store, run_options, progress, rerun=rerun)
        run_sweep(store, run_options, progress)
