"""Diversity curves behind ``robogen scale --vary values``: distinct values against quantity.

Question (Lin et al. 2024, "Data Scaling Laws in Imitation Learning for Robotic
Manipulation", arXiv:2410.18647; embodiment scaling over many procedurally generated
bodies): does a policy generalize to unseen scenes, objects or bodies because it saw
*more distinct* ones, or more demonstrations of each? For each factor, a grid of
behaviour-cloning models is trained on ``m`` demonstrations in each of ``k`` distinct
values of the factor (``k`` in ``values``, ``m`` in ``per_value``; optionally on top of
``base`` nominal demonstrations) and evaluated on ``eval_values`` held-out values of the
factor's ``test`` set, ``eval_episodes`` episodes each (the same episodes for every
model: paired outcomes).

A *distinct value* is what the axis defines (:meth:`~robogen.perturbations.base.Axis.
sample_value`, recorded with every episode as ``value: {index, id}``): for most axes one
draw of the axis from the value stream of its index (a lighting, a texture palette, a
camera pose, a distractor layout, an object with its shape and size, a physics setting);
for ``embodiment`` a procedural body (:mod:`robogen.perturbations.bodies`). Value ``i``
of factor ``f`` is the demonstration factor ``f.v<i>`` (:func:`~robogen.scaling.demos.
value_factor`): every one of its demonstrations shows that value, from its own initial
states. Train values come from the ``train`` split, evaluation values from ``test``:
disjoint sets.

Fits (the FSC fitting of :mod:`robogen.scaling.curve_fit`, bootstrap over evaluation
episodes and training seeds): per ``m`` a *diversity curve* ``f:k@m<m>``, success against
``k`` values; per ``k`` a *quantity curve* ``f:m@k<k>``, success against ``m`` demonstrations
per value; both as the pure power law ``success(x) = 1 - a x^b`` (``n0`` pinned to
:data:`PURE_N0`), so ``b`` is the exponent of the failure rate in the number of values
(or of demonstrations per value). :mod:`robogen.scaling.value_planner` combines the two
into ``success(k, m)`` to split a budget into (values, demonstrations per value).

Run directory (resumable: a killed run redoes nothing it saved)::

    OUT/
      diversity.json                  the DiversityConfig (a rerun must match it)
      demos/                          DemoStore: factors ``none`` and ``<axis>.v<i>``
      models/<f>-k<k>-m<m>-s<s>/      BC checkpoints
      evals/<f>-k<k>-m<m>-s<s>/       one evaluation run dir per model
      curves.json, curves.png, scaling.html
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.scaling.bc import check_image_size
from robogen.scaling.demos import BASE_FACTOR, EXPERT_TASKS, value_factor
from robogen.scaling.loop import OTHER_SETTINGS, VISUAL_FOR_STATE, RunSettings
from robogen.scaling.pipeline import (
    ModelJob,
    changed_settings,
    check_settings_dir,
    collect_demos,
    eval_manifest,
    run_eval,
    train_models,
)
from robogen.types import AxisLevel, Condition

if TYPE_CHECKING:
    from robogen.rollout.backend import BackendOptions
    from robogen.scaling.curves import FactorCurve
    from robogen.scaling.loop import Progress

DIVERSITY_FILE = "diversity.json"
DIVERSITY_SCHEMA_VERSION = 1
KIND = "diversity"
"""``meta.kind`` of a diversity run's ``curves.json``."""
PURE_N0 = 1e-9
"""The pinned offset of diversity and quantity curves: ``success = 1 - a x^b`` (x >= 1)."""
BAD_GRID = (
    "{flag} must be comma-separated positive integers, at least 3 distinct values such as "
    "{example}; {why}"
)
TOO_MANY_VALUES = (
    "--values asks for {k} distinct values of {factor!r}, but its train set has {count}; "
    "give at most {count}"
)
NO_VALUES = (
    "factor {factor!r} has no distinct values ({why}); diversity curves need an axis with "
    "distinct values: {choices}"
)
NOT_A_DIVERSITY_DIR = (
    "{out} is not empty and holds no {file}; choose an empty or new --out directory"
)
CURVE_NAME = re.compile(r"^(?P<factor>[a-z_]+):(?P<x>[km])@(?P<at>[km])(?P<n>\d+)$")
"""``texture:k@m4`` (diversity curve at 4 demos per value), ``texture:m@k8`` (quantity
curve at 8 values)."""


@dataclass(frozen=True)
class DiversityConfig(RunSettings):
    """What a diversity run measures (stored as ``diversity.json``; a rerun must match)."""

    task: str
    """Built-in task id with a scripted expert."""
    factors: tuple[str, ...]
    """Axes with distinct values, measured one at a time."""
    values: tuple[int, ...] = (1, 2, 4, 8)
    """Distinct train values ``k`` per model (>= 3 distinct, sorted)."""
    per_value: tuple[int, ...] = (1, 2, 4)
    """Demonstrations per value ``m`` (>= 3 distinct, sorted)."""
    base: int = 0
    """Nominal expert demonstrations every model is also trained on."""
    eval_values: int = 10
    """Held-out ``test`` values each model is evaluated on."""
    eval_episodes: int = 5
    """Evaluation episodes per held-out value."""

    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ("factors", "values", "per_value")


def parse_grid(value: str | Sequence[int], flag: str = "--values") -> tuple[int, ...]:
    """``"1,2,4,8"`` -> ``(1, 2, 4, 8)`` (sorted, unique, positive, >= 3 distinct).

    Raises:
        InvalidSpecError: On a value that is not a positive integer or fewer than 3 distinct.
    """
    example = "1,2,4,8" if flag == "--values" else "1,2,4"
    items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) \
        else list(value)
    out = []
    for v in items:
        if isinstance(v, bool | float) or not str(v).isdigit() or int(v) < 1:
            raise InvalidSpecError(BAD_GRID.format(flag=flag, example=example,
                                                   why=f"got {v!r}"))
        out.append(int(v))
    grid = tuple(sorted(set(out)))
    if len(grid) < 3:
        raise InvalidSpecError(BAD_GRID.format(flag=flag, example=example,
                                               why=f"got {len(grid)} distinct: {list(grid)}"))
    return grid


def validate(config: DiversityConfig) -> list[str]:
    """Check a :class:`DiversityConfig` before any work; returns warnings.

    Raises:
        UnknownNameError: On a task without a scripted expert or an unknown factor.
        InvalidSpecError: On a factor without distinct values, more values than a factor's
            train (or held-out) set holds, a bad grid, count, observation mode or severity.
    """
    from robogen.perturbations import AXES

    if config.task not in EXPERT_TASKS:
        raise UnknownNameError("task with a scripted expert", config.task, EXPERT_TASKS)
    if not config.factors:
        raise InvalidSpecError("give at least one factor, e.g. --factors texture,embodiment")
    if len(set(config.factors)) != len(config.factors):
        raise InvalidSpecError(f"--factors are repeated: {list(config.factors)}")
    with_values = [n for n in AXES.names() if AXES.get(n)().value_count("train") != 0]
    for f in config.factors:
        if f not in AXES:
            raise UnknownNameError("perturbation axis", f, AXES.names())
        axis = AXES.get(f)()
        for split, k in (("train", max(config.values)), ("test", config.eval_values)):
            count = axis.value_count(split)
            if count == 0:
                raise InvalidSpecError(NO_VALUES.format(
                    factor=f, why="its effect is a per-step process or an instruction, not a "
                                  "scene", choices=", ".join(with_values)))
            if count is not None and k > count:
                raise InvalidSpecError(TOO_MANY_VALUES.format(k=k, factor=f, count=count)
                                       if split == "train" else
                                       f"--eval-values {k} exceeds the {count} held-out "
                                       f"values of {f!r}; give at most {count}")
    if parse_grid(config.values) != tuple(config.values):
        raise InvalidSpecError(BAD_GRID.format(flag="--values", example="1,2,4,8",
                                               why=f"got {list(config.values)} (unsorted)"))
    if parse_grid(config.per_value, "--per-value") != tuple(config.per_value):
        raise InvalidSpecError(BAD_GRID.format(flag="--per-value", example="1,2,4",
                                               why=f"got {list(config.per_value)} (unsorted)"))
    for name in ("eval_values", "eval_episodes", "seeds", "n_boot", "eval_batch_size",
                 "collect_batch_size", "image_size"):
        v = getattr(config, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidSpecError(f"{name} must be a positive integer, got {v!r}")
    if isinstance(config.base, bool) or not isinstance(config.base, int) or config.base < 0:
        raise InvalidSpecError(f"base must be an integer >= 0, got {config.base!r}")
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
    if config.obs_mode != "state":
        return []
    return [VISUAL_FOR_STATE.format(factor=f) for f in config.factors
            if AXES.get(f).kind == "visual"]


# ---- the grid --------------------------------------------------------------------------------


def model_name(factor: str, k: int, m: int, s: int) -> str:
    """Checkpoint (and evaluation) directory name of one grid cell and training seed."""
    return f"{factor}-k{k}-m{m}-s{s}"


def cell_job(config: DiversityConfig, factor: str, k: int, m: int, s: int) -> ModelJob:
    """The model of one cell: ``m`` demonstrations in each of values ``0..k-1`` (+ base)."""
    counts = ({BASE_FACTOR: config.base} if config.base else {}) | {
        value_factor(factor, i): m for i in range(k)}
    return ModelJob(model_name(factor, k, m, s), counts, config.train_seed(s))


def model_jobs(config: DiversityConfig) -> list[ModelJob]:
    """Every model of the run (factor x values x demos per value x seed)."""
    return [cell_job(config, f, k, m, s) for f in config.factors for k in config.values
            for m in config.per_value for s in range(config.seeds)]


def eval_conditions(config: DiversityConfig, factor: str) -> list[Condition]:
    """The held-out conditions of ``factor``: test values ``0..eval_values-1``, one each."""
    return [Condition(f"{factor}@test#{i}", (AxisLevel(factor, config.severity, "test", i),))
            for i in range(config.eval_values)]


def evaluate_cell(config: DiversityConfig, out: Path, factor: str, k: int, m: int, s: int, *,
                  backend: BackendOptions | None = None,
                  progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Evaluate (or reload) one model on the factor's held-out values.

    Returns:
        ``(eval_values * eval_episodes,) bool`` success, by held-out value then episode
        index (the same episodes for every model of the run: paired).
    """
    from robogen.scaling.pipeline import outcomes_by_condition

    name = model_name(factor, k, m, s)
    conds = eval_conditions(config, factor)
    manifest = eval_manifest(config.task, f"flax:{(Path(out) / 'models' / name).resolve()}",
                             conds, n_episodes=config.eval_episodes, seed=config.seed,
                             obs_mode=config.obs_mode, image_size=config.image_size,
                             batch_size=min(config.eval_batch_size, config.eval_episodes))
    by = outcomes_by_condition(run_eval(Path(out) / "evals" / name, manifest, backend=backend,
                                        progress=progress))
    return np.concatenate([by[c.name] for c in conds])


def fit_factor_curves(config: DiversityConfig, factor: str,
                      outcomes: Mapping[tuple[int, int, int], np.ndarray]
                      ) -> list[FactorCurve]:
    """The diversity curves (one per ``m``) and quantity curves (one per ``k``) of a factor.

    Args:
        config: The run.
        factor: The factor.
        outcomes: ``(k, m, seed index) -> (n,) bool``.
    """
    from robogen.scaling.curves import build_curve

    curves = []
    for m in config.per_value:
        keys = sorted((k, s) for (k, mm, s) in outcomes if mm == m)
        curves.append(build_curve(
            f"{factor}:k@m{m}", [k for k, _ in keys], [outcomes[(k, m, s)] for k, s in keys],
            seeds=[config.train_seed(s) for _, s in keys], n_boot=config.n_boot,
            seed=config.seed, n0=PURE_N0))
    for k in config.values:
        keys = sorted((m, s) for (kk, m, s) in outcomes if kk == k)
        curves.append(build_curve(
            f"{factor}:m@k{k}", [m for m, _ in keys], [outcomes[(k, m, s)] for m, s in keys],
            seeds=[config.train_seed(s) for _, s in keys], n_boot=config.n_boot,
            seed=config.seed, n0=PURE_N0))
    return curves


def value_ids(store: Any, factor: str, k: int) -> list[str]:
    """The value ids recorded in the demonstrations of values ``0..k-1`` of ``factor``
    (sorted, unique), read from the stored ``perturbations_json``."""
    import pyarrow as pa

    ids: list[str] = []
    for (f, _), p in store.chunks().items():
        if f in {value_factor(factor, i) for i in range(k)}:
            t = pa.ipc.open_file(pa.memory_map(str(p))).read_all()
            for rec in set(t.column("perturbations_json").to_pylist()):
                ids += [r["value"]["id"] for r in json.loads(rec) if "value" in r]
    return sorted(set(ids))


# ---- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiversityOutcome:
    """What :func:`run_diversity` produced (paths, models trained and reused, notes)."""

    out: Path
    curves_path: Path
    plot_path: Path
    html_path: Path
    trained: int
    reused: int
    warnings: tuple[str, ...] = ()


def run_diversity(config: DiversityConfig, out: Path, *, backend: BackendOptions | None = None,
                  progress: Progress | None = None) -> DiversityOutcome:
    """Run (or resume) a diversity measurement; see the module docstring.

    Raises:
        UnknownNameError, InvalidSpecError, RunDirError: On bad input, before anything
            is written.
    """
    from robogen._atomic import write_atomic
    from robogen.envs import make
    from robogen.scaling.curves import load_curves, write_curves
    from robogen.scaling.diversity_report import diversity_plot_png
    from robogen.scaling.pipeline import eval_backend
    from robogen.scaling.report import write_scaling_html

    warnings = validate(config)
    options = backend or eval_backend()
    out = Path(out)
    check_settings_dir(out, DIVERSITY_FILE,
                       lambda old: changed_settings(old.get("config", {}), config.to_dict()),
                       other_settings=OTHER_SETTINGS, not_a_dir=NOT_A_DIVERSITY_DIR)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / DIVERSITY_FILE).is_file():
        write_atomic(out / DIVERSITY_FILE, json.dumps(
            {"schema_version": DIVERSITY_SCHEMA_VERSION, "config": config.to_dict()}, indent=2))

    def stage(name: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        report = progress
        return lambda d, t: report(name, d, t)

    targets = ({BASE_FACTOR: config.base} if config.base else {}) | {
        value_factor(f, i): max(config.per_value)
        for f in config.factors for i in range(max(config.values))}
    store = collect_demos(config.task, targets, out / "demos", seed=config.seed,
                          severity=config.severity, image_size=config.image_size,
                          batch_size=config.collect_batch_size, progress=stage("collect"))
    probe = make(config.task)
    low, high = probe.action_space.low, probe.action_space.high
    probe.close()
    trained, reused = train_models(store, model_jobs(config), out / "models", config=config.bc,
                                   obs_mode=config.obs_mode, action_low=low, action_high=high,
                                   progress=stage("train"))
    cells = [(f, k, m, s) for f in config.factors for k in config.values
             for m in config.per_value for s in range(config.seeds)]
    per_model = config.eval_values * config.eval_episodes
    outcomes: dict[tuple[str, int, int, int], np.ndarray] = {}
    for i, (f, k, m, s) in enumerate(cells):
        def report(done: int, _t: int, i: int = i) -> None:
            if progress:
                progress("eval", i * per_model + done, len(cells) * per_model)

        outcomes[(f, k, m, s)] = evaluate_cell(config, out, f, k, m, s, backend=options,
                                               progress=report)
    curves = [c for f in config.factors for c in fit_factor_curves(
        config, f, {(k, m, s): o for (ff, k, m, s), o in outcomes.items() if ff == f})]
    meta = {"kind": KIND, "config": config.to_dict(), "warnings": warnings,
            "eval_split": "test", "demo_split": "train",
            "anchor": {"values": max(config.values), "per_value": max(config.per_value)},
            "value_ids": {f: value_ids(store, f, max(config.values))
                          for f in config.factors}}
    curves_path = write_curves(out / "curves.json", config.task, curves, meta=meta)
    loaded = load_curves(curves_path)
    png = diversity_plot_png(loaded)
    write_atomic(out / "curves.png", png)
    html_path = write_scaling_html(out / "scaling.html", loaded, plot_png=png)
    return DiversityOutcome(out, curves_path, out / "curves.png", html_path, trained, reused,
                            tuple(warnings))


__all__ = [
    "DIVERSITY_FILE", "KIND", "PURE_N0", "DiversityConfig", "DiversityOutcome", "cell_job",
    "eval_conditions", "evaluate_cell", "fit_factor_curves", "model_jobs", "model_name",
    "parse_grid", "run_diversity", "validate", "value_ids",
]
