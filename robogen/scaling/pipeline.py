"""Building blocks of the scaling loop: collect demonstrations, train BC models, evaluate them.

Used by :func:`robogen.scaling.loop.run_scale` and ``benchmarks/validate_plan.py``; each
step resumes where a killed run stopped:

* :func:`collect_demos`: scripted-expert demonstrations until every factor has enough
  successful ones (:func:`robogen.scaling.demos.collect`, appended chunk by chunk).
* :func:`train_models`: every :class:`ModelJob` without a saved checkpoint, in one
  ``jax.vmap``-ed :func:`~robogen.scaling.bc.train_bc_ensemble` call (a few calls for large
  CNN ensembles), each saved with :func:`~robogen.scaling.bc_io.save_bc` (``bc.json`` last).
* :func:`eval_manifest` (:func:`robogen.rollout.manifest.conditions_manifest`) /
  :func:`run_eval`: a checkpoint (``flax:PATH``) on given conditions
  with the evaluation pipeline (:mod:`robogen.rollout`: worker, serial or Ray backend,
  :class:`~robogen.rollout.store.ResultStore`); finished work units are never rerun.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from robogen.errors import InvalidSpecError, RunDirError
from robogen.rollout.manifest import conditions_manifest as eval_manifest  # noqa: F401
from robogen.rollout.manifest import same_episodes_but_policy
from robogen.scaling.bc import BCConfig
from robogen.scaling.demos import DemoStore, collect
from robogen.types import EpisodeResult, EvalManifest

if TYPE_CHECKING:
    from robogen.rollout.backend import BackendOptions

MAX_TOP_UPS = 4
"""Rounds of extra collection when the expert fails some demonstrations."""
MLP_MODELS_PER_CALL = 64
CNN_MODELS_PER_CALL = 8
"""Models per vmapped training call (memory of a CNN ensemble grows with K x batch x image)."""


@dataclass(frozen=True)
class ModelJob:
    """One BC model to train: its checkpoint name, training data and seed.

    Attributes:
        name: Directory name under ``models/``.
        counts: Factor -> first successful demonstrations used (``none`` is the base data).
        seed: Training seed.
    """

    name: str
    counts: Mapping[str, int]
    seed: int



# ---- step 1: demonstrations ------------------------------------------------------------------


def collect_demos(
    task: str,
    targets: Mapping[str, int],
    out: Path,
    *,
    seed: int = 0,
    severity: float = 1.0,
    image_size: int = 84,
    batch_size: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> DemoStore:
    """Collect until each factor has ``targets[factor]`` successful expert demonstrations.

    Collection is resumable (:func:`robogen.scaling.demos.collect`); episodes where the
    expert fails are kept in the store but skipped by training, and more episodes are
    collected (at most ``MAX_TOP_UPS`` rounds) until the target is met.

    Args:
        task: Built-in task id.
        targets: Factor name (``none``, an axis or ``axis+axis``) -> successful episodes.
        out: Demonstrations directory.
        seed: Run seed.
        severity: Severity of the varied factors.
        image_size: Side of the stored images [px].
        batch_size: Episodes per chunk.
        progress: ``progress(done, total)`` in episodes.

    Returns:
        The store.

    Raises:
        InvalidSpecError: If the expert fails too often to reach a target.
    """
    want = {f: int(n) for f, n in targets.items() if n > 0}
    asked = dict(want)
    total = sum(asked.values())
    store: DemoStore | None = None
    for round_ in range(MAX_TOP_UPS + 1):
        offset = 0
        for f, n in asked.items():
            def report(done: int, _t: int, offset: int = offset, total: int = total) -> None:
                if progress:
                    progress(offset + done, total)

            store = collect(task, [f], n, out, seed=seed, severity=severity, split="train",
                            image_size=image_size, batch_size=batch_size, progress=report)
            offset += n
        eps = store.episodes()
        ok = eps[eps.success].groupby("factor").size().to_dict()
        short = {f: n for f, n in want.items() if ok.get(f, 0) < n}
        if not short:
            return store  # type: ignore[return-value]
        if round_ == MAX_TOP_UPS:
            break
        for f in short:
            have, tried = ok.get(f, 0), asked[f]
            rate = max(have / tried, 0.2)
            asked[f] = tried + math.ceil((want[f] - have) / rate) + 1
        total = sum(asked.values())
    raise InvalidSpecError(
        "the scripted expert succeeded too rarely to collect the demonstrations asked for: " +
        ", ".join(f"{f}: {ok.get(f, 0)} successful of {asked[f]} (need {n})"
                  for f, n in short.items()) + "; lower --severity or the counts")



# ---- step 2: training ------------------------------------------------------------------------

def is_saved(path: Path) -> bool:
    """True if ``path`` holds a complete BC checkpoint (``bc.json`` is written last)."""
    from robogen.scaling.bc_io import META_FILE

    return (path / META_FILE).is_file()


def train_models(
    store: DemoStore,
    jobs: Sequence[ModelJob],
    models_dir: Path,
    *,
    config: BCConfig,
    obs_mode: str = "state",
    action_low: Any = None,
    action_high: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int]:
    """Train every job whose checkpoint is missing, vmapped, and save each to ``models_dir``.

    The union of the jobs' demonstrations is loaded once; job ``k`` trains on the rows of
    the first ``counts[f]`` successful episodes of each factor ``f``.

    Returns:
        ``(trained, reused)`` model counts.

    Raises:
        InvalidSpecError: If the store lacks the demonstrations a job needs.
    """
    from robogen.scaling.bc import train_bc_ensemble
    from robogen.scaling.bc_io import save_bc

    todo = [j for j in jobs if not is_saved(models_dir / j.name)]
    if not todo:
        return 0, len(jobs)
    need: dict[str, int] = {}
    for j in todo:
        for f, n in j.counts.items():
            need[f] = max(need.get(f, 0), int(n))
    obs, actions, rows = _training_data(store, need, obs_mode)
    subsets = [np.concatenate([r for f, n in j.counts.items() for r in rows[f][:n]])
               for j in todo]
    per_call = CNN_MODELS_PER_CALL if config.arch == "cnn" else MLP_MODELS_PER_CALL
    groups = [todo[i:i + per_call] for i in range(0, len(todo), per_call)]
    sub_groups = [subsets[i:i + per_call] for i in range(0, len(todo), per_call)]
    total = len(groups) * config.steps
    for g, (group, subs) in enumerate(zip(groups, sub_groups, strict=True)):
        def report(done: int, _steps: int, g: int = g) -> None:
            if progress:
                progress(g * config.steps + done, total)

        models = train_bc_ensemble(obs, actions, subs, seeds=[j.seed for j in group],
                                   config=config, action_low=action_low,
                                   action_high=action_high, progress=report)
        for job, model in zip(group, models, strict=True):
            info = dict(model.train_info) | {"counts": dict(job.counts),
                                             "env_id": store.collection.env_id}
            save_bc(dataclasses.replace(model, train_info=info), models_dir / job.name)
    return len(todo), len(jobs) - len(todo)


def _training_data(store: DemoStore, need: Mapping[str, int], obs_mode: str
                   ) -> tuple[Any, np.ndarray, dict[str, list[np.ndarray]]]:
    """Observations, actions and per factor the row indices of each episode, in order."""
    parts, rows, start = [], {}, 0
    for f, n in need.items():
        if n <= 0:
            rows[f] = []
            continue
        d = store.load({f: n}, pixels=obs_mode != "state")
        ep = d["episode"]
        order = np.unique(ep)
        rows[f] = [start + np.flatnonzero(ep == e) for e in order]
        start += len(ep)
        parts.append(d)
    actions = np.concatenate([d["action"] for d in parts])
    state = np.concatenate([d["state"] for d in parts])
    if obs_mode == "state":
        obs: Any = state
    else:
        pixels = np.concatenate([d["pixels"] for d in parts])
        obs = pixels if obs_mode == "pixels" else {"state": state, "pixels": pixels}
    return obs, actions, rows


# ---- run directories -------------------------------------------------------------------------


def changed_settings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``"key: old != new"`` for every key of ``new`` whose value ``old`` does not hold."""
    return [f"{k}: {old.get(k)!r} != {new[k]!r}" for k in new if old.get(k) != new[k]]


def check_settings_dir(out: Path, settings_file: str,
                       differences: Callable[[dict[str, Any]], list[str]], *,
                       other_settings: str, not_a_dir: str) -> None:
    """Check ``out`` is new, empty, or a run whose ``settings_file`` matches (writes nothing).

    Args:
        out: The run directory.
        settings_file: Name of the JSON file a run writes first.
        differences: The stored settings (parsed JSON) -> what differs from this run's.
        other_settings: Message template (``{out}``, ``{diff}``) for a run with other settings.
        not_a_dir: Message template (``{out}``, ``{file}``) for a non-empty dir without it.

    Raises:
        RunDirError: If ``settings_file`` is corrupt, or ``out`` is a file or a non-empty
            directory without it.
        InvalidSpecError: If the stored settings differ.
    """
    meta = out / settings_file
    if meta.is_file():
        try:
            old = json.loads(meta.read_text())
        except ValueError as e:
            raise RunDirError(f"{str(meta)!r} is corrupt ({e}); delete {out} to start over") from e
        diff = differences(old)
        if diff:
            raise InvalidSpecError(other_settings.format(out=out, diff="; ".join(diff)))
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirError(not_a_dir.format(out=out, file=settings_file))


# ---- step 3: evaluation ----------------------------------------------------------------------


def eval_backend(backend: str = "serial", workers: int | None = None,
                 address: str | None = None) -> BackendOptions:
    """The backend options of a scaling run's evaluations, checked before any work.

    Args:
        backend: ``serial`` or ``ray``.
        workers: Ray workers.
        address: Ray cluster address.

    Raises:
        InvalidSpecError: On another backend name.
    """
    from robogen.rollout.backend import BackendOptions

    if backend not in ("serial", "ray"):
        raise InvalidSpecError(f"backend must be 'serial' or 'ray', got {backend!r}")
    return BackendOptions(kind=backend, workers=workers, address=address)  # type: ignore[arg-type]


def run_eval(
    run_dir: Path,
    manifest: EvalManifest,
    *,
    backend: BackendOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[EpisodeResult]:
    """Run (or finish) one evaluation in ``run_dir`` with the rollout pipeline.

    A run dir with the same episodes (all but the policy path compared) is resumed: only
    units without a stored part run. One with other episodes is an error.

    Args:
        run_dir: The evaluation's run directory.
        manifest: What to run.
        backend: How to run it (:func:`eval_backend`); None: serially in this process.
        progress: ``progress(done, total)`` in episodes.

    Returns:
        The stored episodes, ordered by (condition unit, episode index).

    Raises:
        RunDirError: If ``run_dir`` holds another evaluation.
    """
    from robogen._atomic import write_atomic
    from robogen.rollout.runner import run_session
    from robogen.rollout.store import EPISODES_DIR, MANIFEST, ResultStore
    from robogen.types import to_dict

    run_dir = Path(run_dir)
    if (run_dir / MANIFEST).is_file():
        old = ResultStore.open(run_dir).manifest
        if not same_episodes_but_policy(old, manifest):
            raise RunDirError(
                f"{str(run_dir)!r} holds an evaluation with other settings; delete it to "
                "evaluate again")
        if old.policy != manifest.policy:
            write_atomic(run_dir / MANIFEST, json.dumps(to_dict(manifest), indent=2))
        store = ResultStore(run_dir, manifest)
    else:
        if run_dir.exists() and not any((run_dir / EPISODES_DIR).glob("*.parquet")):
            shutil.rmtree(run_dir)  # a run killed before its manifest landed
        store = ResultStore.create(run_dir, manifest)
    run_session(store, backend or eval_backend(), progress)
    return store.load_results()


def outcomes_by_condition(results: Sequence[EpisodeResult]) -> dict[str, np.ndarray]:
    """Condition -> ``(n,) bool`` success ordered by episode index."""
    by: dict[str, list[tuple[int, bool]]] = {}
    for r in results:
        by.setdefault(r.condition, []).append((r.episode_index, r.success))
    return {c: np.array([s for _, s in sorted(v)], bool) for c, v in by.items()}
