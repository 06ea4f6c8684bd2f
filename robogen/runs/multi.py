"""Evaluate several policies under one manifest, then compare them.

``robogen eval --policy A --policy B ...`` runs :func:`evaluate_policies`: one
run directory per policy under ``--out`` (same env, axes, severities, seeds,
episodes: every policy meets the same episodes and perturbation values), then
``compare.{json,md,html}`` in ``--out`` itself (see :mod:`robogen.reports.compare`).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from robogen.configs import EvalConfig
from robogen.errors import InvalidSpecError, RunDirError
from robogen.rollout.runner import ProgressFn, prepare
from robogen.runs.evaluation import EvalOutcome


@dataclass(frozen=True, slots=True)
class MultiOutcome:
    """What a several-policy evaluation produced.

    Attributes:
        out: The parent directory (holds the comparison).
        runs: One outcome per policy, in the order given.
        files: Comparison files by kind (``json``, ``md``, ``html``, ``heatmap``).
    """

    out: Path
    runs: tuple[EvalOutcome, ...]
    files: dict[str, Path]


def run_dir_names(policies: Sequence[str]) -> list[str]:
    """One directory name per policy URI, made unique.

    ``expert:reach`` -> ``expert-reach``, ``sb3:ckpts/ppo.zip`` -> ``ppo``,
    ``python:pol.py:make`` -> ``make``, ``random`` -> ``random``.
    """
    out: list[str] = []
    for uri in policies:
        scheme, _, rest = uri.partition(":")
        tail = re.split(r"[/:]", rest.rstrip("/") or scheme)[-1]
        tail = re.sub(r"\.(zip|pt|pth|ckpt|msgpack|py)$", "", tail)
        if scheme == "expert":
            tail = f"expert-{tail}"
        base = re.sub(r"[^A-Za-z0-9_]+", "-", tail).strip("-") or "policy"
        name, k = base, 2
        while name in out:
            name, k = f"{base}-{k}", k + 1
        out.append(name)
    return out


def comparison_out(cfg: EvalConfig) -> Path:
    """The parent directory of a several-policy evaluation: ``cfg.out``, else
    ``runs/<env>-compare-<time>``."""
    if cfg.out:
        return Path(cfg.out)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", cfg.env).strip("-")
    return Path("runs") / f"{slug}-compare-{time.strftime('%Y%m%d-%H%M%S')}"


def evaluate_policies(
    cfg: EvalConfig,
    policies: Sequence[str],
    *,
    progress_for: Callable[[str], ProgressFn | None] | None = None,
) -> MultiOutcome:
    """Evaluate each policy with ``cfg``'s protocol, then write the comparison.

    Every policy is loaded and probed on the env before the first episode runs,
    so a bad URI of the last policy is an input error, not a failure after
    the first evaluations.

    Args:
        cfg: The evaluation; its ``policy`` is replaced by each of ``policies``
            and its ``out`` (default ``runs/<env>-compare-<time>``) becomes the parent.
        policies: Two or more policy URIs.
        progress_for: Called with a policy URI, returns that run's progress callback.

    Raises:
        InvalidSpecError: Fewer than two policies, or ``vecnormalize`` with several policies.
        RunDirError: ``out`` is a file or not empty.
        UnknownNameError, SpaceMismatchError, CheckpointError: A policy that cannot run.
    """
    from robogen.reports.compare import TOO_FEW_RUNS, compare_dirs

    if len(policies) < 2:
        raise InvalidSpecError(TOO_FEW_RUNS.format(n=len(policies)))
    if cfg.vecnormalize:
        raise InvalidSpecError(
            "--vecnormalize names one policy's statistics, but several --policy were given; "
            "evaluate that policy alone and compare the run dirs with robogen compare"
        )
    out = comparison_out(cfg)
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {str(out)!r} is a file; give a new or empty directory")
    if out.exists() and any(out.iterdir()):
        raise RunDirError(f"--out {str(out)!r} is not empty; give a new or empty directory")
    cfgs = [
        cfg.model_copy(update={"policy": uri, "out": out / name})
        for uri, name in zip(policies, run_dir_names(policies), strict=True)
    ]
    for c in cfgs:  # every setup error before the first episode
        prepare(c)
    outcomes = _evaluate_all(cfgs, progress_for)
    files = compare_dirs([o.run_dir for o in outcomes], out, fresh_out=False)
    return MultiOutcome(out, outcomes, files)


def _evaluate_all(
    cfgs: Sequence[EvalConfig], progress_for: Callable[[str], ProgressFn | None] | None
) -> tuple[EvalOutcome, ...]:
    """Run every policy's episodes, then film all failure videos at once, then report.

    On an embedded Ray cluster the policies share one cluster (started once) and one set of
    Ray workers (each policy's backend adopts the workers the last one left:
    :func:`~robogen.rollout.backends.reuse_ray_workers`), and the runs' videos (a replay of
    each filmed episode and its nominal twin) are filmed on those workers in parallel, one
    run per worker, with the policy and envs the run's episodes ran on, instead of one run
    after the other in this process. Each run's report is written once, with its videos (also when
    filming fails, without them), its figures drawn by a helper process of its own
    (:class:`~robogen.reports.plot_worker.PlotWorker`) started with the first episodes.
    The episodes, videos and reports are the same as one
    :func:`~robogen.runs.evaluation.evaluate` per policy.
    """
    from robogen.reports.plot_worker import PlotWorker
    from robogen.rollout.backends import (
        map_calls,
        map_on_ray_workers,
        ray_cluster_is_up,
        reuse_ray_workers,
        start_ray_cluster,
        stop_ray_cluster,
    )
    from robogen.rollout.ray_backend import cluster_address
    from robogen.rollout.runner import run_evaluation
    from robogen.rollout.store import ResultStore
    from robogen.runs.evaluation import finish_report, load_backend
    from robogen.runs.failure_videos import film_run

    first = cfgs[0]
    load_backend(first.backend)
    shared = (first.backend == "ray" and cluster_address(first.address) is None
              and not ray_cluster_is_up())
    if shared:
        start_ray_cluster(None, num_cpus=max(first.workers or 0, os.cpu_count() or 1))
    try:
        with contextlib.ExitStack() as helpers:
            helpers.enter_context(reuse_ray_workers(shared))
            # one figure helper per run (each draws one report), matplotlib imported in them
            # while the episodes run; at most one per core (more policies: the later runs'
            # figures are drawn in this process, not by a crowd of helpers started at once)
            helpers_max = os.cpu_count() or 1
            plotters = [helpers.enter_context(PlotWorker()) if i < helpers_max else PlotWorker()
                        for i in range(len(cfgs))]
            stores: list[ResultStore] = []
            films: dict[int, dict[str, str]] = {}
            try:
                for c in cfgs:  # its eval_config.json keeps --videos: a resume films them
                    stores.append(run_evaluation(
                        c, progress=progress_for(c.policy) if progress_for else None))
                filmed = [i for i, c in enumerate(cfgs) if c.videos > 0]
                calls = [(str(stores[i].run_dir), cfgs[i].videos) for i in filmed]
                videos = map_on_ray_workers(film_run, [(stores[i].manifest, args) for i, args
                                                       in zip(filmed, calls, strict=True)])
                if videos is None:
                    videos = map_calls(film_run, calls, on_ray=shared)
                films = dict(zip(filmed, videos, strict=True))
            finally:  # the runs that finished get their report, also when a later one failed
                outcomes = tuple(finish_report(store, keep_videos=films.get(i),
                                               plotter=plotters[i])
                                 for i, store in enumerate(stores))
    finally:
        if shared:
            stop_ray_cluster()
    return outcomes
