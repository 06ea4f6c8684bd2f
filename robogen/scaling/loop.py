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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.scaling.bc import BCConfig, check_image_size
from robogen.scaling.demos import BASE_FACTOR, EXPERT_TASKS, factor_condition
from robogen.scaling.pipeline import (
    ModelJob,
    changed_settings,
    check_settings_dir,
    collect_demos,
    eval_backend,
    eval_manifest,
    is_saved,
    outcomes_by_condition,
    run_eval,
    train_models,
)

if TYPE_CHECKING:
    from robogen.rollout.backend import BackendOptions
    from robogen.scaling.curves import FactorCurve

__all__ = [
    "ModelJob", "ScaleConfig", "ScaleOutcome", "collect_demos", "default_bc_config",
    "eval_manifest", "evaluate_point", "fit_point_curve", "is_saved", "model_jobs", "model_name",
    "outcomes_by_condition", "parse_pairs", "parse_points", "point_job", "run_eval", "run_scale",
    "train_models", "validate",
]

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

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)`` with stage ``collect`` (episodes), ``train`` (gradient
steps of the current call), ``eval`` (episodes) or ``fit`` (curves fitted)."""


def default_bc_config(obs_mode: str = "state", **overrides: Any) -> BCConfig:
    """The BC settings of the scale loop (overridable per field).

    State: a 256-256 MLP, 3000 steps of batch 64, AdamW with learning rate 1e-3 and
    decoupled weight decay 1.0. The weight decay matters: with few demonstrations
    (Reach: ~12 steps each) and 13 of 30 state features irrelevant to the task, plain
    Adam overfits (held-out action MSE 0.0065 against 0.0016 with decay, 150
    demonstrations) and its rollouts drift away from the target (nominal success 0.08-0.98
    across 8 seeds at 200 demonstrations, mostly ~0.2; with decay, 1.0 at every seed).
    The decay per step is ``lr * weight_decay``, so it acts together with ``steps`` (1500
    steps: ~0.53 at 40 demonstrations, 3000: ~0.85). Batch 256 was no better than 64 and
    twice as slow. Nominal Reach success with these settings: 11/50 at 10
    demonstrations, 30/50 at 20, 48/50 at 40, 100/100 at 200 (pinned in
    ``tests/scaling/test_loop.py``).

    Pixels: the small CNN with DrQ random-shift augmentation, batch 64, no weight decay
    (untuned: on 2 CPU cores one step of one 84x84 model takes ~0.16 s, so pixel curves
    want a GPU). Progress is reported every tenth of training.
    """
    base: dict[str, Any] = {"arch": "mlp", "hidden": (256, 256), "steps": 3000,
                            "batch_size": 64, "lr": 1e-3, "weight_decay": 1.0}
    if obs_mode != "state":
        base.update(arch="cnn", augment=True, batch_size=64, weight_decay=0.0)
    base.update(overrides)
    base.setdefault("chunk_steps", max(1, int(base["steps"]) // 10))
    return BCConfig(**base)


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Settings every scaling run shares (``robogen scale`` and its diversity grid):
    training seeds, observations, BC, evaluation batching and the bootstrap. Subclasses add
    what they measure and list their tuple-valued fields in ``TUPLE_FIELDS`` (JSON lists
    read back as tuples)."""

    seeds: int = 2
    """Training seeds per grid point."""
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

    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ()

    def train_seed(self, s: int) -> int:
        """Seed of training seed index ``s`` (distinct per run seed)."""
        return 1000 * self.seed + s

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``bc`` as a dict)."""
        d = dataclasses.asdict(self)
        d["bc"] = self.bc.to_dict()
        return json.loads(json.dumps(d))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`to_dict`."""
        kw = dict(d)
        kw["bc"] = BCConfig.from_dict(kw["bc"])
        for k in cls.TUPLE_FIELDS:
            kw[k] = tuple(kw[k])
        return cls(**kw)


@dataclass(frozen=True)
class ScaleConfig(RunSettings):
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

    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ("factors", "points", "pairs")

    @property
    def curves(self) -> tuple[str, ...]:
        """Curve names: the factors, then the pairs."""
        return (*self.factors, *self.pairs)


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
    if config.obs_mode != "state":
        check_image_size(config.bc, config.image_size)
    warnings = []
    if config.obs_mode == "state":
        for f in config.factors:
            if AXES.get(f).kind == "visual":
                warnings.append(VISUAL_FOR_STATE.format(factor=f))
    return warnings


def _open_run_dir(config: ScaleConfig, out: Path) -> None:
    """Check ``out`` is new, empty or a run of the same config (nothing is written here)."""
    check_settings_dir(out, SCALE_FILE,
                       lambda old: changed_settings(old.get("config", {}), config.to_dict()),
                       other_settings=OTHER_SETTINGS, not_a_dir=NOT_A_SCALE_DIR)


# ---- the models of a run --------------------------------------------------------------------


def model_jobs(config: ScaleConfig) -> list[ModelJob]:
    """The models of a scaling run (x = 0 models shared by every curve)."""
    jobs = {}
    for s in range(config.seeds):
        for curve in config.curves:
            for x in config.points:
                job = point_job(config, curve, x, s)
                jobs[job.name] = job
    return list(jobs.values())


def point_job(config: ScaleConfig, curve: str, x: int, s: int) -> ModelJob:
    """The model of one curve point: base data plus the first ``x`` demos of ``curve``."""
    counts = {BASE_FACTOR: config.base} | ({curve: x} if x else {})
    return ModelJob(model_name(curve, x, s), counts, config.train_seed(s))


def model_name(curve: str, x: int, s: int) -> str:
    """Checkpoint directory name of (curve, x, seed index)."""
    return f"{BASE_FACTOR}-x0-s{s}" if x == 0 else f"{curve}-x{x}-s{s}"


def evaluate_point(
    config: ScaleConfig,
    out: Path,
    curve: str,
    x: int,
    s: int,
    *,
    backend: BackendOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Evaluate (or reload) the model of point ``(curve, x, s)`` on the curve's ``test`` condition.

    Every point uses the run seed, so episode ``i`` starts from the same initial state and
    perturbation draw at every ``x`` (paired outcomes). The run dir is
    ``OUT/evals/<curve>-x<x>-s<s>``; finished work units are kept.

    Returns:
        ``(eval_episodes,) bool`` success by episode index.
    """
    model_dir = (Path(out) / "models" / model_name(curve, x, s)).resolve()
    cond = factor_condition(curve, config.severity, "test")
    manifest = eval_manifest(config.task, f"flax:{model_dir}", [cond],
                             n_episodes=config.eval_episodes, seed=config.seed,
                             obs_mode=config.obs_mode, image_size=config.image_size,
                             batch_size=config.eval_batch_size)
    results = run_eval(Path(out) / "evals" / f"{curve}-x{x}-s{s}", manifest, backend=backend,
                       progress=progress)
    return outcomes_by_condition(results)[cond.name]


def fit_point_curve(config: ScaleConfig, curve: str,
                    outcomes: Mapping[tuple[int, int], np.ndarray]) -> FactorCurve:
    """Fit one curve from its points' outcomes, ``(x, seed index) -> (n,) bool``.

    Bootstrap over episodes and training seeds with ``config.n_boot`` refits, seeded by the
    run seed; ``n0`` fixed to the base dataset size (:func:`~robogen.scaling.curves.build_curve`).
    """
    from robogen.scaling.curves import build_curve

    keys = sorted(outcomes)
    return build_curve(
        curve, [x for x, _ in keys], [outcomes[k] for k in keys],
        seeds=[config.train_seed(s) for _, s in keys], n_boot=config.n_boot,
        seed=config.seed, n0=config.base if config.base > 0 else None)


# ---- the loop --------------------------------------------------------------------------------


def run_scale(
    config: ScaleConfig,
    out: Path,
    *,
    backend: BackendOptions | None = None,
    progress: Progress | None = None,
) -> ScaleOutcome:
    """Run (or resume) a factored-scaling measurement; see the module docstring.

    Args:
        config: What to measure.
        out: Run directory (new, empty, or a killed run of the same config).
        backend: Rollout backend of the evaluations (:func:`eval_backend`); None: serial
            (small BC policies evaluate fast in-process; Ray actors would start per model).
        progress: ``progress(stage, done, total)``.

    Returns:
        The :class:`ScaleOutcome`.

    Raises:
        UnknownNameError, InvalidSpecError, RunDirError: On bad input, before anything
            is written.
    """
    from robogen._atomic import write_atomic
    from robogen.envs import make
    from robogen.scaling.curves import load_curves, write_curves
    from robogen.scaling.curves_plot import curves_plot_png
    from robogen.scaling.report import write_scaling_html

    warnings = validate(config)
    options = backend or eval_backend()
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

        outcomes[(curve, x, s)] = evaluate_point(config, out, curve, x, s, backend=options,
                                                 progress=report)

    curves = []
    for k, curve in enumerate(config.curves):
        if progress:
            progress("fit", k, len(config.curves))
        curves.append(fit_point_curve(config, curve, {(x, s): o for (c, x, s), o
                                                      in outcomes.items() if c == curve}))
    if progress:
        progress("fit", len(config.curves), len(config.curves))
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
