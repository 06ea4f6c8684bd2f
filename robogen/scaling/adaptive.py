"""The closed data-collection loop behind ``robogen plan --rounds R``: plan, collect, refit, replan.

A one-shot plan (:func:`~robogen.scaling.planner.plan_budget`) extrapolates the curves of
``robogen scale`` far beyond their last point. The closed loop spends the budget in ``R``
rounds instead, in the spirit of Factored Scaling Curves' iterative collection (Zha et al.
2025, arXiv:2505.07728): each round plans one share of the budget on the current curves,
collects those demonstrations, measures the curves where the plan now stands, refits, and
plans the next share on the refitted curves.

Round ``r`` (1-based) of a loop with budget ``B``:

1. Plan ``r * B / R`` minus what earlier rounds spent (the rounding leftover carries over)
   with the chosen method, on the current curves shifted by what each curve already has:
   a curve with ``c`` collected demonstrations plans its increment with
   ``success(c + x) = 1 - a (x + c + n0)^b``, so every method plans the increment given
   what is collected (greedy continues where it stopped). ``equal`` tops every curve up to
   the equal split of ``r * B / R``, so that its last round ends where a one-shot equal split
   of ``B`` does. Stored as ``round-<r>/plan.json`` before any work.
2. Collect the new demonstrations (scripted expert, ``train`` values, the same
   demonstration stream as the scale run: :func:`~robogen.scaling.pipeline.collect_demos`).
3. For each curve that received demonstrations, train ``seeds`` BC models on the base data
   plus its ``c`` demonstrations (a curve point, named as ``robogen scale`` names them) and
   evaluate them on the factor's held-out ``test`` values with the scale run's evaluation
   seed (paired with every other point of the curve).
4. Refit every curve on all its points (the scale run's plus the loop's) and write
   ``round-<r>/curves.json``, then ``round-<r>/round.json`` (the round's record, written
   last: a round with it is complete).

Demonstrations, checkpoints and evaluations live in the scale run directory (``demos/``,
``models/``, ``evals/``) and are named by what they hold, so a killed loop, a rerun, or a
second loop with another method reuses every one that exists. The loop's own files::

    LOOP/                   (default SCALE_DIR/adaptive)
      adaptive.json         the loop's settings (a rerun must match)
      round-<r>/plan.json, round-<r>/curves.json, round-<r>/round.json
      summary.json          every round plus the final allocation and its prediction
      curves.png, scaling.html   the final curves with the final allocation
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from robogen.errors import InvalidSpecError
from robogen.scaling.curves import CurveFit, CurvesFile, FactorCurve, predict
from robogen.scaling.planner import METHODS, Allocation, FactorAllocation, plan_budget

if TYPE_CHECKING:
    from robogen.rollout.backend import BackendOptions

ADAPTIVE_FILE = "adaptive.json"
SUMMARY_FILE = "summary.json"
ADAPTIVE_SCHEMA = "robogen.adaptive"
ADAPTIVE_VERSION = 1
BAD_ROUNDS = "--rounds must be an integer >= 1 (planning rounds), got {value!r}"
SHARE_TOO_SMALL = (
    "--budget {budget:g} over --rounds {rounds} is {share:g} per round, less than the cheapest "
    "demonstration ({cheapest:g}): a round could collect nothing; use fewer rounds or a "
    "larger budget"
)
NOT_A_FINISHED_SCALE_RUN = (
    "{path} is not a finished `robogen scale` run directory (no {missing}); the closed loop "
    "needs the run's settings and curves: give --curves SCALE_DIR after `robogen scale` ends"
)
OTHER_LOOP = (
    "{out} holds a closed loop with other settings ({diff}); rerun with the same options to "
    "resume it, or give another --out directory"
)
NOT_A_LOOP_DIR = "{out} is not empty and holds no {file}; choose an empty or new --out directory"

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``; stages are ``round <r> collect|train|eval``."""


@dataclass(frozen=True)
class AdaptiveConfig:
    """The settings of a closed loop (stored as ``adaptive.json``; a rerun must match)."""

    budget: float
    """Total budget [cost units; demonstrations with default costs], > 0."""
    rounds: int
    """Planning rounds, >= 1; each spends ``budget / rounds`` (plus any leftover)."""
    method: str = "greedy"
    """Planning method (:data:`~robogen.scaling.planner.METHODS`)."""
    costs: Mapping[str, float] = field(default_factory=dict)
    """Cost per demonstration by curve or factor (default 1)."""
    k: int = 2
    """Curves funded by ``fsc_topk``."""
    step: int = 1
    """Demonstrations per greedy/worst_first increment."""
    lcb: float | None = None
    """Greedy/fsc_topk on this lower confidence bound, or None (fitted curves)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        d = dataclasses.asdict(self)
        d["costs"] = dict(self.costs)
        return json.loads(json.dumps(d))


@dataclass(frozen=True)
class RoundResult:
    """One round of the loop.

    Attributes:
        round: Round number, 1-based.
        budget: Budget available up to this round, ``round * budget / rounds`` [cost units].
        spent: Cost of everything collected up to this round [cost units].
        added: Curve -> demonstrations planned (and collected) in this round.
        demos: Curve -> demonstrations collected up to this round.
        predicted_planned: Mean predicted success of ``demos`` on the curves the round
            planned with (before its measurements).
        predicted: Mean predicted success of ``demos`` on the refitted curves.
        measured: Curve -> measured success rate of its point at ``demos`` (mean over the
            training seeds; the scale run's point where the count was measured there).
        fits: Curve -> refitted ``(a, b, n0)``.
    """

    round: int
    budget: float
    spent: float
    added: dict[str, int]
    demos: dict[str, int]
    predicted_planned: float
    predicted: float
    measured: dict[str, float]
    fits: dict[str, tuple[float, float, float]]

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundResult:
        """Inverse of :meth:`to_dict`."""
        kw = dict(d)
        kw["fits"] = {n: tuple(v) for n, v in kw["fits"].items()}
        return cls(**kw)


@dataclass(frozen=True)
class AdaptiveOutcome:
    """What :func:`run_adaptive` produced.

    Attributes:
        out: The loop directory.
        rounds: One :class:`RoundResult` per round.
        final: The final allocation (cumulative demonstrations) on the final curves.
        summary_path: ``summary.json``.
        html_path: ``scaling.html`` (final curves and allocation).
        trained: Models trained by this call.
        reused: Models whose checkpoints already existed.
    """

    out: Path
    rounds: tuple[RoundResult, ...]
    final: Allocation
    summary_path: Path
    html_path: Path
    trained: int
    reused: int


def load_scale_run(scale_dir: Path) -> tuple[Any, CurvesFile]:
    """The :class:`~robogen.scaling.loop.ScaleConfig` and curves of a finished scale run.

    Raises:
        InvalidSpecError: If ``scale_dir`` lacks ``scale.json`` or ``curves.json``, or they
            cannot be read.
    """
    from robogen.scaling.curves import load_curves
    from robogen.scaling.loop import SCALE_FILE, ScaleConfig

    scale_dir = Path(scale_dir)
    for name in (SCALE_FILE, "curves.json"):
        if not (scale_dir / name).is_file():
            raise InvalidSpecError(NOT_A_FINISHED_SCALE_RUN.format(path=scale_dir, missing=name))
    try:
        config = ScaleConfig.from_dict(json.loads((scale_dir / SCALE_FILE).read_text())["config"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InvalidSpecError(f"{scale_dir / SCALE_FILE} cannot be read ({e}); rerun "
                               "`robogen scale` to rewrite it") from e
    return config, load_curves(scale_dir / "curves.json", task=config.task)


def validate_adaptive(config: AdaptiveConfig, curves: CurvesFile) -> None:
    """Check the loop's settings against the scale run's curves, before any work.

    Raises:
        InvalidSpecError: On ``rounds < 1``, a per-round share that buys no demonstration,
            or any error :func:`~robogen.scaling.planner.plan_budget` raises for the settings
            (budget, costs, method, k, step, lcb).
    """
    r = config.rounds
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise InvalidSpecError(BAD_ROUNDS.format(value=r))
    if config.method not in METHODS:
        raise InvalidSpecError(f"planning method must be one of {METHODS}, got "
                               f"{config.method!r}")
    plan = plan_budget(curves, config.budget, costs=config.costs, method=config.method,
                       lcb=config.lcb, k=config.k, step=config.step)
    cheapest = min(f.unit_cost for f in plan.factors)
    share = float(config.budget) / r
    if share + 1e-9 < cheapest:
        raise InvalidSpecError(SHARE_TOO_SMALL.format(budget=config.budget, rounds=r,
                                                      share=share, cheapest=cheapest))


def shifted(fit: CurveFit, collected: int) -> CurveFit:
    """The curve of demonstrations added after ``collected`` ones: ``n0 -> n0 + collected``.

    ``1 - a (x + collected + n0)^b`` is the success after ``x`` more demonstrations; the
    bootstrap samples shift the same way.
    """
    samples = None
    if fit.samples is not None:
        samples = fit.samples.copy()
        samples[:, 2] += collected
    return dataclasses.replace(fit, n0=fit.n0 + collected, samples=samples)


def allocation_of(curves: CurvesFile, demos: Mapping[str, int], unit: Mapping[str, float], *,
                  method: str, budget: float, confidence: float = 0.95) -> Allocation:
    """An :class:`Allocation` of fixed ``demos`` judged on ``curves`` (bands included)."""
    rows = []
    for n, fit in curves.fits().items():
        mean, low, high = predict(fit, [float(demos[n]), 0.0], confidence)
        rows.append(FactorAllocation(n, int(demos[n]), unit[n], demos[n] * unit[n],
                                     float(mean[1]), float(mean[0]), float(low[0]),
                                     float(high[0])))
    return Allocation(method, float(budget), float(sum(r.cost for r in rows)), tuple(rows),
                      confidence)


def plan_round(curves: CurvesFile | Mapping[str, CurveFit], demos: Mapping[str, int],
               config: AdaptiveConfig, r: int) -> dict[str, int]:
    """The demonstrations round ``r`` adds, given ``demos`` collected so far (step 1 above).

    Args:
        curves: The current curves (a ``curves.json`` or curve name -> fit).
        demos: Curve -> demonstrations collected in rounds ``1 .. r - 1``.
        config: The loop's settings.
        r: Round number, 1-based.

    Returns:
        Curve -> demonstrations to add; their cost is at most ``r * budget / rounds`` minus
        the cost of ``demos``.
    """
    fits = curves.fits() if isinstance(curves, CurvesFile) else dict(curves)
    names = list(fits)
    unit = {f.factor: f.unit_cost for f in plan_budget(
        fits, config.budget, costs=config.costs, method="equal").factors}
    cum_budget = r * float(config.budget) / config.rounds
    share = cum_budget - sum(demos[n] * unit[n] for n in names)
    added = {n: 0 for n in names}
    if config.method == "equal":  # R rounds of equal end where one equal split does
        target = plan_budget(fits, cum_budget, costs=config.costs, method="equal").demos
        added = {n: max(0, target[n] - demos[n]) for n in names}
        if sum(added[n] * unit[n] for n in names) > share + 1e-9:
            added = {n: 0 for n in names}
    if not any(added.values()) and share + 1e-9 >= min(unit.values()):
        moved = {n: shifted(fits[n], demos[n]) for n in names}
        added = plan_budget(moved, share, costs=config.costs, method=config.method,
                            lcb=config.lcb, k=config.k, step=config.step).demos
    return added


def run_adaptive(
    scale_dir: Path,
    config: AdaptiveConfig,
    *,
    out: Path | None = None,
    backend: BackendOptions | None = None,
    progress: Progress | None = None,
) -> AdaptiveOutcome:
    """Run (or resume) the closed loop on a finished scale run; see the module docstring.

    Args:
        scale_dir: A finished ``robogen scale`` run directory (its demonstrations, models and
            evaluations are reused and extended).
        config: The loop's settings.
        out: Loop directory (default ``scale_dir/adaptive``): new, empty, or a loop with the
            same settings (resumed).
        backend: Evaluation backend (:func:`~robogen.scaling.pipeline.eval_backend`);
            None: serial.
        progress: ``progress(stage, done, total)``.

    Returns:
        The :class:`AdaptiveOutcome`.

    Raises:
        InvalidSpecError, RunDirError: On bad input, before anything is written.
    """
    from robogen._atomic import write_atomic
    from robogen.scaling.curves import load_curves
    from robogen.scaling.pipeline import eval_backend

    scale_dir = Path(scale_dir)
    scale, curves = load_scale_run(scale_dir)
    validate_adaptive(config, curves)
    options = backend or eval_backend()
    out = Path(out) if out is not None else scale_dir / "adaptive"
    settings = {"schema": ADAPTIVE_SCHEMA, "version": ADAPTIVE_VERSION,
                "scale_dir": str(scale_dir.resolve()), "loop": config.to_dict(),
                "scale": scale.to_dict()}
    _open_loop_dir(out, settings)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / ADAPTIVE_FILE).is_file():
        write_atomic(out / ADAPTIVE_FILE, json.dumps(settings, indent=2))

    unit = {f.factor: f.unit_cost for f in plan_budget(
        curves, config.budget, costs=config.costs, method="equal").factors}
    names = list(curves.names)
    measured_x = {c: {p.x for p in curves.curves[c].points} for c in names}
    demos = {n: 0 for n in names}
    rounds: list[RoundResult] = []
    trained = reused = 0
    for r in range(1, config.rounds + 1):
        rdir = out / f"round-{r}"
        if (rdir / "round.json").is_file():
            res = RoundResult.from_dict(json.loads((rdir / "round.json").read_text()))
            curves = load_curves(rdir / "curves.json", task=scale.task)
        else:
            res, curves, t, u = _round(scale, scale_dir, config, r, rdir, curves, demos,
                                       unit, measured_x, options, progress)
            trained, reused = trained + t, reused + u
        rounds.append(res)
        demos = dict(res.demos)
        for n in names:
            measured_x[n].add(demos[n])

    final = allocation_of(curves, demos, unit, method=config.method, budget=config.budget,
                          confidence=curves.confidence)
    summary = {**settings, "rounds": [r.to_dict() for r in rounds], "final": final.to_dict()}
    summary_path = write_atomic(out / SUMMARY_FILE, json.dumps(summary, indent=2))
    html_path = _write_report(out, curves, final)
    return AdaptiveOutcome(out, tuple(rounds), final, summary_path, html_path, trained, reused)


def _open_loop_dir(out: Path, settings: Mapping[str, Any]) -> None:
    """Check ``out`` is new, empty or a loop with the same settings (nothing is written)."""
    from robogen.scaling.pipeline import changed_settings, check_settings_dir

    def differences(old: dict[str, Any]) -> list[str]:
        diff = [d for part in ("loop", "scale")
                for d in changed_settings(old.get(part, {}), settings[part])]
        if old.get("scale_dir") != settings["scale_dir"]:
            diff.append(f"scale run: {old.get('scale_dir')!r} != {settings['scale_dir']!r}")
        return diff

    check_settings_dir(out, ADAPTIVE_FILE, differences, other_settings=OTHER_LOOP,
                       not_a_dir=NOT_A_LOOP_DIR)


def _round(scale: Any, scale_dir: Path, config: AdaptiveConfig, r: int, rdir: Path,
           curves: CurvesFile, demos: Mapping[str, int], unit: Mapping[str, float],
           measured_x: Mapping[str, set[int]], backend: BackendOptions,
           progress: Progress | None) -> tuple[RoundResult, CurvesFile, int, int]:
    """Plan, collect, train, evaluate and refit round ``r`` (resumable piece by piece)."""
    from robogen._atomic import write_atomic
    from robogen.envs import make
    from robogen.scaling.curves import load_curves, write_curves
    from robogen.scaling.demos import BASE_FACTOR
    from robogen.scaling.loop import evaluate_point, fit_point_curve, point_job
    from robogen.scaling.pipeline import collect_demos, train_models

    names = list(curves.names)
    cum_budget = r * float(config.budget) / config.rounds
    spent = sum(demos[n] * unit[n] for n in names)
    plan_file = rdir / "plan.json"
    if plan_file.is_file():
        added = {n: int(v) for n, v in json.loads(plan_file.read_text())["added"].items()}
    else:
        added = plan_round(curves, demos, config, r)
        write_atomic(plan_file, json.dumps({"round": r, "budget": cum_budget,
                                            "share": cum_budget - spent, "added": added},
                                           indent=2))
    now = {n: demos[n] + added[n] for n in names}
    planned = allocation_of(curves, now, unit, method=config.method, budget=cum_budget)

    def stage(name: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        p = progress
        return lambda d, t: p(f"round {r} {name}", d, t)

    grown = [n for n in names if added[n] > 0 and now[n] not in measured_x[n]]
    targets = {BASE_FACTOR: scale.base} | {n: max(max(scale.points), now[n]) for n in names}
    store = collect_demos(scale.task, targets, scale_dir / "demos", seed=scale.seed,
                          severity=scale.severity, image_size=scale.image_size,
                          batch_size=scale.collect_batch_size, progress=stage("collect"))
    jobs = [point_job(scale, n, now[n], s) for n in grown for s in range(scale.seeds)]
    probe = make(scale.task)
    low, high = probe.action_space.low, probe.action_space.high
    probe.close()
    trained, reused = train_models(store, jobs, scale_dir / "models", config=scale.bc,
                                   obs_mode=scale.obs_mode, action_low=low, action_high=high,
                                   progress=stage("train"))

    xs = {n: sorted(measured_x[n] | {now[n]}) for n in names}
    keys = [(n, x, s) for n in names for x in xs[n] for s in range(scale.seeds)]
    total, outcomes = len(keys) * scale.eval_episodes, {}
    for i, (n, x, s) in enumerate(keys):
        def report(done: int, _t: int, i: int = i) -> None:
            if progress:
                progress(f"round {r} eval", i * scale.eval_episodes + done, total)

        outcomes[(n, x, s)] = evaluate_point(scale, scale_dir, n, x, s, backend=backend,
                                             progress=report)
    refit: list[FactorCurve] = [
        fit_point_curve(scale, n, {(x, s): o for (c, x, s), o in outcomes.items() if c == n})
        for n in names]
    meta = {"config": scale.to_dict(), "eval_split": "test", "demo_split": "train",
            "adaptive": {"round": r, "demos": now, **config.to_dict()}}
    write_curves(rdir / "curves.json", scale.task, refit, meta=meta)
    new_curves = load_curves(rdir / "curves.json", task=scale.task)
    after = allocation_of(new_curves, now, unit, method=config.method, budget=cum_budget)
    measured = {n: float(np.mean([outcomes[(n, now[n], s)].mean() for s in range(scale.seeds)]))
                for n in names}
    res = RoundResult(
        round=r, budget=cum_budget, spent=float(sum(now[n] * unit[n] for n in names)),
        added=dict(added), demos=now, predicted_planned=planned.mean_success,
        predicted=after.mean_success, measured=measured,
        fits={c.name: (c.fit.a, c.fit.b, c.fit.n0) for c in refit})
    write_atomic(rdir / "round.json", json.dumps(res.to_dict(), indent=2))
    return res, new_curves, trained, reused


def _write_report(out: Path, curves: CurvesFile, final: Allocation) -> Path:
    from robogen._atomic import write_atomic
    from robogen.scaling.curves_plot import curves_plot_png
    from robogen.scaling.report import write_scaling_html

    png = curves_plot_png(curves)
    write_atomic(out / "curves.png", png)
    return write_scaling_html(out / "scaling.html", curves, plot_png=png, plans=[final])

