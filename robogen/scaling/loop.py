"""The factored-scaling loop behind ``robogen scale``: collect, train, evaluate, fit.

Method (Factored Scaling Curves, Zha et al. 2025, arXiv:2505.07728): for each
factor of variation (and chosen pairs), ``x`` demonstrations that vary only
that factor are added to a base dataset of nominal demonstrations; a
behaviour-cloning policy is trained per ``x`` (and per training seed) and
evaluated on the held-out ``test`` values of the factor; the success rates are
fitted with ``success(x) = 1 - a (x + n0)^b`` (:mod:`robogen.scaling.curves`).

Steps of :func:`run_scale` (each resumes where a killed run stopped)::

    OUT/
      scale.json                      the ScaleConfig (a rerun must match it)
      demos/                          DemoStore: base (factor ``none``) and per-curve demos
      models/<name>/                  BC checkpoints (bc.json last: complete saves only)
      evals/<curve>-x<x>-s<seed>/     one evaluation run dir (ResultStore) per point
      curves.json, curves.png, scaling.html

1. Collect (:func:`collect_demos`): ``base`` nominal expert episodes and
   ``max(points)`` per curve, factor values drawn from the ``train`` split.
   Episodes where the expert fails are skipped, and collection is topped up
   until each factor has enough successful ones.
2. Train (:func:`train_models`): one model per (curve, x, training seed) on
   the base data plus the first ``x`` successful demonstrations of the curve's
   factor; every ``x = 0`` model is the same base-only model, trained once per
   seed (``none-x0-s<seed>``). All missing models are trained in one
   ``jax.vmap``-ed :func:`~robogen.scaling.bc.train_bc_ensemble` call (split
   into a few calls only for large CNN ensembles); existing checkpoints are
   kept.
3. Evaluate (:func:`run_eval`): each point's model (``flax:PATH``) on the
   curve's ``test`` condition (a pair: both axes at ``test``) with the
   evaluation pipeline (:mod:`robogen.rollout`); finished work units are kept.
   Every point uses the same run seed, so episode ``i`` starts from the same
   initial state and perturbation draw at every ``x`` (paired outcomes).
4. Fit (:func:`~robogen.scaling.curves.build_curve`, bootstrap over episodes
   and training seeds) and write ``curves.json``, ``curves.png`` and
   ``scaling.html`` (:mod:`robogen.scaling.report`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robogen.errors import InvalidSpecError, RunDirError, UnknownNameError
from robogen.scaling.bc import BCConfig
from robogen.scaling.demos import BASE_FACTOR, EXPERT_TASKS, DemoStore, collect, factor_condition
from robogen.types import Condition, EpisodeResult, EvalManifest, RenderSettings

SCALE_FILE = "scale.json"
SCALE_SCHEMA_VERSION = 1
VISUAL_FOR_STATE = (
    "factor {factor!r} is visual: it changes only images, so a state policy's curve is flat; "
    "use --obs-mode pixels to measure it"
)
BAD_POINTS = (
    "--points must be comma-separated non-negative integers (demonstrations added), at least 3 "
    "distinct values such as 0,10,20,40; {why}"
)
BAD_PAIR = (
    "--pairs must be 'none', 'all' or comma-separated pairs like lighting+texture of two "
    "different factors; {why}"
)
OTHER_SETTINGS = (
    "{out} holds a scaling run with other settings ({diff}); resume it with the same options or "
    "choose another --out directory"
)
NOT_A_SCALE_DIR = (
    "{out} is not empty and holds no {file}; choose an empty or new --out directory"
)
MAX_TOP_UPS = 4
MLP_MODELS_PER_CALL = 64
CNN_MODELS_PER_CALL = 8

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)`` with stage ``collect`` (episodes), ``train`` (gradient
steps of the current call) or ``eval`` (episodes)."""


def default_bc_config(obs_mode: str = "state", **overrides: Any) -> BCConfig:
    """The BC settings of the scale loop (overridable per field).

    State: a 256-256 MLP, 3000 steps of batch 256, AdamW with learning rate 1e-3 and
    decoupled weight decay 1.0. The weight decay matters: with few demonstrations
    (Reach: ~12 steps each) and 13 of 30 state features irrelevant to the task, plain
    Adam overfits (held-out action MSE 0.0065 against 0.0016 with decay on 150
    demonstrations) and the rollouts drift away from the target (nominal success
    0.08-0.98 across seeds at 200 demonstrations; with decay 1.0 at all of 8 seeds,
    ~0.83 at 40). The decay per step is ``lr * weight_decay``, so it acts together with
    ``steps``: 1500 steps gave ~0.53 at 40 demonstrations. See the pinned Reach success
    in ``tests/scaling/test_loop.py``. Pixels: the small CNN with DrQ random-shift
    augmentation. Progress is reported every tenth of training.
    """
    base: dict[str, Any] = {"arch": "mlp", "hidden": (256, 256), "steps": 3000,
                            "batch_size": 256, "lr": 1e-3, "weight_decay": 1.0}
    if obs_mode != "state":
        base.update(arch="cnn", augment=True)
    base.update(overrides)
    base.setdefault("chunk_steps", max(1, int(base["steps"]) // 10))
    return BCConfig(**base)


@dataclass(frozen=True)
class ScaleConfig:
    """What a scaling run measures (stored as ``scale.json``; a rerun must match)."""

    task: str
    """Built-in task id with a scripted expert (``robogen/Reach-v0``)."""
    factors: tuple[str, ...]
    """Axes measured one at a time."""
    points: tuple[int, ...] = (0, 10, 20, 40)
    """Demonstrations added per curve at each point (>= 3 distinct, sorted)."""
    pairs: tuple[str, ...] = ()
    """Pairs of factors measured together (``lighting+texture``)."""
    base: int = 20
    """Nominal expert demonstrations every model is trained on."""
    eval_episodes: int = 50
    """Evaluation episodes per model on the held-out ``test`` condition."""
    seeds: int = 2
    """Training seeds per point."""
    obs_mode: str = "state"
    """Observation of the BC policies: ``state``, ``pixels`` or ``state+pixels``."""
    seed: int = 0
    """Run seed of demonstrations, evaluation episodes and the bootstrap."""
    severity: float = 1.0
    """Severity of the varied factors, in (0, 1]."""
    image_size: int = 84
    """Side of the recorded and evaluated images [px]."""
    bc: BCConfig = field(default_factory=default_bc_config)
    """Behaviour-cloning settings."""
    n_boot: int = 500
    """Bootstrap refits per curve."""
    eval_batch_size: int = 10
    """Episodes per evaluation work unit (envs stepped together)."""
    collect_batch_size: int = 8
    """Episodes per demonstration chunk."""

    @property
    def curves(self) -> tuple[str, ...]:
        """Curve names: the factors, then the pairs."""
        return (*self.factors, *self.pairs)

    def train_seed(self, s: int) -> int:
        """Seed of training seed index ``s`` (distinct per run seed)."""
        return 1000 * self.seed + s

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``bc`` as a dict)."""
        d = dataclasses.asdict(self)
        d["bc"] = self.bc.to_dict()
        return json.loads(json.dumps(d))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScaleConfig:
        """Inverse of :meth:`to_dict`."""
        kw = dict(d)
        kw["bc"] = BCConfig.from_dict(kw["bc"])
        for k in ("factors", "points", "pairs"):
            kw[k] = tuple(kw[k])
        return cls(**kw)


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


@dataclass(frozen=True)
class ScaleOutcome:
    """What :func:`run_scale` produced.

    Attributes:
        out: The run directory.
        curves_path: ``curves.json``.
        plot_path: ``curves.png``.
        html_path: ``scaling.html``.
        trained: Models trained by this call.
        reused: Models whose checkpoints already existed.
        warnings: Notes for the user (e.g. visual factors with a state policy).
    """

    out: Path
    curves_path: Path
    plot_path: Path
    html_path: Path
    trained: int
    reused: int
    warnings: tuple[str, ...] = ()


# ---- parsing and validation ------------------------------------------------------------------


def parse_points(value: str | Sequence[int]) -> tuple[int, ...]:
    """``"0,10,20,40"`` -> ``(0, 10, 20, 40)`` (sorted, unique).

    Raises:
        InvalidSpecError: On a value that is not a non-negative integer or fewer than 3 distinct.
    """
    items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else \
        list(value)
    out = []
    for v in items:
        try:
            if isinstance(v, float | bool) or (isinstance(v, str) and not v.lstrip("-").isdigit()):
                raise ValueError
            n = int(v)
        except (TypeError, ValueError):
            raise InvalidSpecError(BAD_POINTS.format(why=f"got {v!r}")) from None
        if n < 0:
            raise InvalidSpecError(BAD_POINTS.format(why=f"got {v!r}"))
        out.append(n)
    pts = tuple(sorted(set(out)))
    if len(pts) < 3:
        raise InvalidSpecError(BAD_POINTS.format(why=f"got {len(pts)} distinct: {list(pts)}"))
    return pts


def parse_pairs(value: str | Sequence[str] | None, factors: Sequence[str]) -> tuple[str, ...]:
    """``none`` -> ``()``, ``all`` -> every pair of ``factors``, else the named pairs.

    Raises:
        InvalidSpecError: On a malformed pair or a pair of one factor twice.
        UnknownNameError: On an unknown axis in a pair.
    """
    from robogen.perturbations import AXES

    if value is None:
        return ()
    items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else \
        [str(v) for v in value]
    if items in ([], ["none"]):
        return ()
    if items == ["all"]:
        return tuple(f"{a}+{b}" for a, b in itertools.combinations(factors, 2))
    out: list[str] = []
    seen: set[frozenset[str]] = set()
    for p in items:
        parts = p.split("+")
        if len(parts) != 2 or not all(parts):
            raise InvalidSpecError(BAD_PAIR.format(why=f"got {p!r}"))
        if parts[0] == parts[1]:
            raise InvalidSpecError(BAD_PAIR.format(why=f"{p!r} names {parts[0]!r} twice"))
        for a in parts:
            if a not in AXES:
                raise UnknownNameError("perturbation axis", a, AXES.names())
        key = frozenset(parts)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return tuple(out)


def validate(config: ScaleConfig) -> list[str]:
    """Check a :class:`ScaleConfig` before any work; returns warnings.

    Raises:
        UnknownNameError: On a task without a scripted expert or an unknown factor
            (with close matches).
        InvalidSpecError: On bad points, pairs, counts, observation mode or severity.
    """
    from robogen.perturbations import AXES

    if config.task not in EXPERT_TASKS:
        raise UnknownNameError("task with a scripted expert", config.task, EXPERT_TASKS)
    if not config.factors:
        raise InvalidSpecError("give at least one factor, e.g. --factors object_pose,physics")
    for f in config.factors:
        if f not in AXES:
            raise UnknownNameError("perturbation axis", f, AXES.names())
    if len(set(config.factors)) != len(config.factors):
        raise InvalidSpecError(f"--factors are repeated: {list(config.factors)}")
    if parse_points(config.points) != tuple(config.points):
        raise InvalidSpecError(BAD_POINTS.format(why=f"got {list(config.points)} (unsorted)"))
    if parse_pairs(list(config.pairs) or None, config.factors) != tuple(config.pairs):
        raise InvalidSpecError(BAD_PAIR.format(why=f"got repeated pairs {list(config.pairs)}"))
    for name in ("base", "eval_episodes", "seeds", "n_boot", "eval_batch_size",
                 "collect_batch_size", "image_size"):
        v = getattr(config, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidSpecError(f"{name} must be a positive integer, got {v!r}")
    if config.seed < 0:
        raise InvalidSpecError(f"seed must be >= 0, got {config.seed!r}")
    if config.obs_mode not in ("state", "pixels", "state+pixels"):
        raise InvalidSpecError(
            f"--obs-mode must be state, pixels or state+pixels, got {config.obs_mode!r}")
    if not 0.0 < config.severity <= 1.0:
        raise InvalidSpecError(f"severity must be in (0, 1], got {config.severity!r}")
    if (config.bc.arch == "cnn") != (config.obs_mode != "state"):
        raise InvalidSpecError(
            f"BC arch {config.bc.arch!r} cannot read {config.obs_mode!r} observations; use "
            f"arch={'mlp' if config.obs_mode == 'state' else 'cnn'}")
    warnings = []
    if config.obs_mode == "state":
        for f in config.factors:
            if AXES.get(f).kind == "visual":
                warnings.append(VISUAL_FOR_STATE.format(factor=f))
    return warnings


def _open_run_dir(config: ScaleConfig, out: Path) -> None:
    """Check ``out`` is new, empty or a run of the same config (nothing is written here)."""
    meta = out / SCALE_FILE
    if meta.is_file():
        try:
            old = json.loads(meta.read_text())
        except ValueError as e:
            raise RunDirError(f"{str(meta)!r} is corrupt ({e}); delete {out} to start over") from e
        new = config.to_dict()
        old_cfg = old.get("config", {})
        diff = [f"{k}: {old_cfg.get(k)!r} != {new[k]!r}" for k in new if old_cfg.get(k) != new[k]]
        if diff:
            raise InvalidSpecError(OTHER_SETTINGS.format(out=out, diff="; ".join(diff)))
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirError(NOT_A_SCALE_DIR.format(out=out, file=SCALE_FILE))


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
            def report(done: int, _t: int, offset: int = offset) -> None:
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


def model_jobs(config: ScaleConfig) -> list[ModelJob]:
    """The models of a scaling run (x = 0 models shared by every curve)."""
    jobs = {}
    for s in range(config.seeds):
        for curve in config.curves:
            for x in config.points:
                name = model_name(curve, x, s)
                counts = {BASE_FACTOR: config.base} | ({curve: x} if x else {})
                jobs[name] = ModelJob(name, counts, config.train_seed(s))
    return list(jobs.values())


def model_name(curve: str, x: int, s: int) -> str:
    """Checkpoint directory name of (curve, x, seed index)."""
    return f"{BASE_FACTOR}-x0-s{s}" if x == 0 else f"{curve}-x{x}-s{s}"


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
            info = dict(model.train_info) | {"counts": dict(job.counts)}
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


# ---- step 3: evaluation ----------------------------------------------------------------------


def eval_manifest(
    task: str,
    policy: str,
    conditions: Sequence[Condition],
    *,
    n_episodes: int,
    seed: int,
    obs_mode: str = "state",
    image_size: int = 84,
    batch_size: int = 10,
) -> EvalManifest:
    """The evaluation manifest of one model on ``conditions`` (same seed: paired episodes).

    Pixel observations use the render settings of the demonstrations (``front`` camera,
    ``image_size`` square, no shadows or MSAA).
    """
    from robogen.envs import make
    from robogen.rollout.runner import MANIFEST_SCHEMA_VERSION, _versions, spec_hash

    probe = make(task)
    max_steps = int(probe.spec.max_episode_steps)
    probe.close()
    axes = tuple(dict.fromkeys(a for c in conditions for a in c.axes))
    render = RenderSettings(width=image_size, height=image_size, camera="front") \
        if obs_mode != "state" else RenderSettings()
    m = EvalManifest(
        schema_version=MANIFEST_SCHEMA_VERSION, env_id=task, policy=policy, vecnormalize=None,
        obs_mode=obs_mode, axes=axes,
        severities=tuple(sorted({lv.severity for c in conditions for lv in c.levels})),
        splits=tuple(sorted({lv.split for c in conditions for lv in c.levels})),
        combined=False, n_episodes=n_episodes, seed=seed, max_steps=max_steps,
        batch_size=min(batch_size, n_episodes), success_threshold=None,
        conditions=tuple(conditions), render=render, versions=_versions(),
        policy_obs_mode=obs_mode,
    )
    return dataclasses.replace(m, spec_hash=spec_hash(m))


def run_eval(
    run_dir: Path,
    manifest: EvalManifest,
    *,
    backend: str = "serial",
    workers: int | None = None,
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[EpisodeResult]:
    """Run (or finish) one evaluation in ``run_dir`` with the rollout pipeline.

    A run dir with the same episodes (all but the policy path compared) is resumed: only
    units without a stored part run. One with other episodes is an error.

    Returns:
        The stored episodes, ordered by (condition unit, episode index).

    Raises:
        RunDirError: If ``run_dir`` holds another evaluation.
    """
    from robogen.rollout.runner import _run, spec_hash
    from robogen.rollout.store import EPISODES_DIR, MANIFEST, ResultStore, write_atomic
    from robogen.types import to_dict

    run_dir = Path(run_dir)
    if (run_dir / MANIFEST).is_file():
        old = ResultStore.open(run_dir).manifest
        same = spec_hash(dataclasses.replace(old, policy=manifest.policy)) == manifest.spec_hash
        if not same:
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
    _run(store, backend, workers, address, 0.0, progress)
    return store.load_results()


def outcomes_by_condition(results: Sequence[EpisodeResult]) -> dict[str, np.ndarray]:
    """Condition -> ``(n,) bool`` success ordered by episode index."""
    by: dict[str, list[tuple[int, bool]]] = {}
    for r in results:
        by.setdefault(r.condition, []).append((r.episode_index, r.success))
    return {c: np.array([s for _, s in sorted(v)], bool) for c, v in by.items()}


# ---- the loop --------------------------------------------------------------------------------


def run_scale(
    config: ScaleConfig,
    out: Path,
    *,
    backend: str = "serial",
    workers: int | None = None,
    address: str | None = None,
    progress: Progress | None = None,
) -> ScaleOutcome:
    """Run (or resume) a factored-scaling measurement; see the module docstring.

    Args:
        config: What to measure.
        out: Run directory (new, empty, or a killed run of the same config).
        backend: Rollout backend of the evaluations, ``serial`` (default: small BC
            policies evaluate fast in-process; Ray actors would start per model) or ``ray``.
        workers: Ray workers.
        address: Ray cluster address.
        progress: ``progress(stage, done, total)``.

    Returns:
        The :class:`ScaleOutcome`.

    Raises:
        UnknownNameError, InvalidSpecError, RunDirError: On bad input, before anything
            is written.
    """
    from robogen.envs import make
    from robogen.rollout.store import write_atomic
    from robogen.scaling.curves import build_curve, load_curves, write_curves
    from robogen.scaling.curves_plot import curves_plot_png
    from robogen.scaling.report import write_scaling_html

    warnings = validate(config)
    if backend not in ("serial", "ray"):
        raise InvalidSpecError(f"backend must be 'serial' or 'ray', got {backend!r}")
    out = Path(out)
    _open_run_dir(config, out)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / SCALE_FILE).is_file():
        write_atomic(out / SCALE_FILE, json.dumps(
            {"schema_version": SCALE_SCHEMA_VERSION, "config": config.to_dict()}, indent=2))

    def stage(name: str) -> Callable[[int, int], None] | None:
        return (lambda d, t: progress(name, d, t)) if progress else None

    targets = {BASE_FACTOR: config.base} | {c: max(config.points) for c in config.curves}
    store = collect_demos(config.task, targets, out / "demos", seed=config.seed,
                          severity=config.severity, image_size=config.image_size,
                          batch_size=config.collect_batch_size, progress=stage("collect"))
    probe = make(config.task)
    low, high = probe.action_space.low, probe.action_space.high
    probe.close()
    jobs = model_jobs(config)
    trained, reused = train_models(store, jobs, out / "models", config=config.bc,
                                   obs_mode=config.obs_mode, action_low=low, action_high=high,
                                   progress=stage("train"))

    points = [(c, x, s) for c in config.curves for x in config.points for s in range(config.seeds)]
    total = len(points) * config.eval_episodes
    outcomes: dict[tuple[str, int, int], np.ndarray] = {}
    for i, (curve, x, s) in enumerate(points):
        def report(done: int, _t: int, i: int = i) -> None:
            if progress:
                progress("eval", i * config.eval_episodes + done, total)

        model_dir = (out / "models" / model_name(curve, x, s)).resolve()
        cond = factor_condition(curve, config.severity, "test")
        manifest = eval_manifest(config.task, f"flax:{model_dir}", [cond],
                                 n_episodes=config.eval_episodes, seed=config.seed,
                                 obs_mode=config.obs_mode, image_size=config.image_size,
                                 batch_size=config.eval_batch_size)
        results = run_eval(out / "evals" / f"{curve}-x{x}-s{s}", manifest, backend=backend,
                           workers=workers, address=address, progress=report)
        outcomes[(curve, x, s)] = outcomes_by_condition(results)[cond.name]

    curves = []
    for curve in config.curves:
        keys = [(x, s) for x in config.points for s in range(config.seeds)]
        curves.append(build_curve(
            curve, [x for x, _ in keys], [outcomes[(curve, x, s)] for x, s in keys],
            seeds=[config.train_seed(s) for _, s in keys], n_boot=config.n_boot,
            seed=config.seed))
    eps = store.episodes()
    expert = {f: {"episodes": int((eps.factor == f).sum()),
                  "successes": int((eps.success & (eps.factor == f)).sum())} for f in targets}
    meta = {"config": config.to_dict(), "expert_demos": expert, "warnings": warnings,
            "eval_split": "test", "demo_split": "train"}
    curves_path = write_curves(out / "curves.json", config.task, curves, meta=meta)
    loaded = load_curves(curves_path)
    png = curves_plot_png(loaded)
    write_atomic(out / "curves.png", png)
    html_path = write_scaling_html(out / "scaling.html", loaded, plot_png=png)
    return ScaleOutcome(out, curves_path, out / "curves.png", html_path, trained, reused,
                        tuple(warnings))
