"""``robogen collect``, ``robogen scale`` and ``robogen plan`` (registered in :mod:`robogen.cli`).

Exit codes: 0 success, 2 invalid input or setup error (nothing is written).
JAX, MuJoCo and matplotlib load only when a command runs, so ``--help`` stays instant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from robogen._console import exit_invalid, guarded, print_message
from robogen.progress import ProgressBars

_error = exit_invalid
_guarded = guarded


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def collect_command(
    task: Annotated[str, typer.Option(help=(
        "Task id with a scripted expert: robogen/Reach-v0|Push-v0|PickPlace-v0, "
        "robosuite/Lift|Stack|PickPlaceCan, gymnasium-robotics/Fetch*, metaworld/*."))],
    vary: Annotated[str, typer.Option(
        help="Comma-separated factors: 'none' (nominal base data), axes, or axis+axis pairs."
    )] = "none",
    n: Annotated[int, typer.Option(help="Episodes per factor.")] = 100,
    out: Annotated[Path, typer.Option(help="Demonstrations directory (appended to).")
                   ] = Path("demos"),
    seed: Annotated[int, typer.Option(help="Run seed.")] = 0,
    severity: Annotated[float, typer.Option(help="Severity of the varied factors, (0, 1].")
                        ] = 1.0,
    split: Annotated[str, typer.Option(help="Factor value set: train | test | all.")
                     ] = "train",
    image_size: Annotated[int, typer.Option(help="Side of the stored images in pixels.")] = 84,
    batch_size: Annotated[int, typer.Option(help="Episodes per chunk (envs stepped together).")
                          ] = 8,
) -> None:
    """Record scripted-expert demonstrations with factor values from the axes' train sets."""
    from rich.console import Console
    from rich.table import Table

    from robogen.scaling.demos import collect

    factors = _csv(vary)
    with ProgressBars() as bars:
        store = _guarded(collect, task, factors, n, out, seed=seed, severity=severity,
                         split=split, image_size=image_size, batch_size=batch_size,
                         progress=bars.stage("collect"))
    eps = store.episodes()
    t = Table(title=f"demonstrations in {out}")
    for col in ("factor", "episodes", "expert successes", "steps"):
        t.add_column(col)
    for f, g in eps.groupby("factor"):
        t.add_row(str(f), str(len(g)), str(int(g.success.sum())), str(int(g.length.sum())))
    Console().print(t)


def scale_command(
    task: Annotated[str, typer.Option(help=(
        "Task id with a scripted expert: robogen/Reach-v0|Push-v0|PickPlace-v0, "
        "robosuite/Lift|Stack|PickPlaceCan, gymnasium-robotics/Fetch*, metaworld/*."))],
    factors: Annotated[str, typer.Option(help="Comma-separated axes, e.g. object_pose,physics.")],
    out: Annotated[Path, typer.Option(help="Run directory (new, empty, or a killed run).")],
    points: Annotated[str, typer.Option(
        help="Demonstrations added per curve, >= 3 distinct non-negative integers.")
    ] = "0,10,20,40",
    pairs: Annotated[str, typer.Option(help="none | all | a+b,c+d: factor pairs measured too.")
                     ] = "none",
    base: Annotated[int | None, typer.Option(
        help="Nominal base demonstrations (default 20; with --vary values 0).")] = None,
    eval_episodes: Annotated[int | None, typer.Option(
        help="Evaluation episodes per model (default 50); with --vary values per held-out "
             "value (default 5).")] = None,
    vary: Annotated[str, typer.Option(
        help="demos: curves of demonstrations added per factor (quantity) | values: diversity "
             "curves, k distinct factor values x m demonstrations per value.")] = "demos",
    values: Annotated[str, typer.Option(
        help="With --vary values: distinct train values k per model, >= 3 distinct.")
    ] = "1,2,4,8",
    per_value: Annotated[str, typer.Option(
        help="With --vary values: demonstrations per value m, >= 3 distinct.")] = "1,2,4",
    eval_values: Annotated[int, typer.Option(
        help="With --vary values: held-out test values each model is evaluated on.")] = 10,
    seeds: Annotated[int, typer.Option(help="Training seeds per point.")] = 2,
    obs_mode: Annotated[str, typer.Option(help="state | pixels | state+pixels (BC input).")
                        ] = "state",
    steps: Annotated[int | None, typer.Option(help="BC gradient steps per model.")] = None,
    hidden: Annotated[str | None, typer.Option(help="BC MLP widths, e.g. 256,256.")] = None,
    lr: Annotated[float | None, typer.Option(help="BC Adam learning rate.")] = None,
    augment: Annotated[bool | None, typer.Option(
        "--augment/--no-augment", help="Random-shift augmentation (pixels).")] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap refits per curve.")] = 500,
    severity: Annotated[float, typer.Option(help="Severity of the varied factors, (0, 1].")
                        ] = 1.0,
    image_size: Annotated[int, typer.Option(help="Image side in pixels.")] = 84,
    backend: Annotated[str, typer.Option(help="Evaluation backend: serial | ray.")] = "serial",
    workers: Annotated[int | None, typer.Option(help="Ray workers.")] = None,
    address: Annotated[str | None, typer.Option(help="Existing Ray cluster address.")] = None,
    seed: Annotated[int, typer.Option(help="Run seed.")] = 0,
) -> None:
    """Measure factored scaling curves: collect, train BC, evaluate on held-out values, fit.

    Writes OUT/curves.json, OUT/curves.png and OUT/scaling.html; rerun the same
    command to resume a killed run.
    """
    from rich.console import Console

    from robogen.scaling import loop

    overrides: dict[str, Any] = {}
    if steps is not None:
        overrides["steps"] = steps
    if lr is not None:
        overrides["lr"] = lr
    if augment is not None:
        overrides["augment"] = augment
    if hidden is not None:
        try:
            overrides["hidden"] = tuple(int(h) for h in _csv(hidden))
        except ValueError:
            _error(f"--hidden must be comma-separated integers such as 256,256, got {hidden!r}")

    if vary not in ("demos", "values"):
        _error(f"--vary must be 'demos' or 'values', got {vary!r}")
    if vary == "values":
        from robogen.scaling.diversity_cli import scale_values

        scale_values(task=task, factors=_csv(factors), out=out, points=points, pairs=pairs,
                     base=base, eval_episodes=eval_episodes, values=values,
                     per_value=per_value, eval_values=eval_values, seeds=seeds,
                     obs_mode=obs_mode, overrides=overrides, n_boot=n_boot, severity=severity,
                     image_size=image_size, backend=backend, workers=workers, address=address,
                     seed=seed)
        return
    if (values, per_value, eval_values) != ("1,2,4,8", "1,2,4", 10):
        _error("--values, --per-value and --eval-values apply only to diversity curves; add "
               "--vary values")
    base = 20 if base is None else base
    eval_episodes = 50 if eval_episodes is None else eval_episodes

    def build() -> Any:
        factor_list = tuple(_csv(factors))
        return loop.ScaleConfig(
            task=task, factors=factor_list, points=loop.parse_points(points),
            pairs=loop.parse_pairs(pairs, factor_list), base=base, eval_episodes=eval_episodes,
            seeds=seeds, obs_mode=obs_mode, seed=seed, severity=severity,
            image_size=image_size, bc=loop.default_bc_config(obs_mode, **overrides),
            n_boot=n_boot)

    config = _guarded(build)
    _guarded(loop.validate, config)
    options = _guarded(loop.eval_backend, backend, workers, address)
    with ProgressBars({"train": "steps", "fit": "curves"}) as bars:
        bars.phase(f"robogen scale: {config.task}: collecting expert demonstrations for "
                   f"{len(config.curves)} curves, then training and evaluating BC models ...")
        bars.stage("eval", then=f"fitting {len(config.curves)} scaling curves ({config.n_boot} "
                   "bootstrap refits each) ...")
        outcome = _guarded(loop.run_scale, config, out, backend=options, progress=bars)
    c = Console()
    for w in outcome.warnings:
        c.print(f"[yellow]note:[/] {w}", highlight=False)
    c.print(f"[bold green]done:[/] {outcome.trained} models trained, {outcome.reused} reused")
    from robogen.scaling.curves import load_curves

    curves = load_curves(outcome.curves_path)
    for name, cv in curves.curves.items():
        f = cv.fit
        c.print(f"  {name}: a={f.a:.3g} b={f.b:.3g} n0={f.n0:.3g}  " + "  ".join(
            f"x={p.x}:{p.successes}/{p.n}" for p in cv.points), highlight=False)
    for label, p in (("curves", outcome.curves_path), ("plot", outcome.plot_path),
                     ("report", outcome.html_path)):
        c.print(f"  {label}: {p}")


def _costs(value: str | None) -> dict[str, float]:
    from robogen.errors import InvalidSpecError

    out = {}
    for item in _csv(value):
        name, sep, num = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            value = float(num)
        except ValueError:
            raise InvalidSpecError(
                f"--cost must look like texture=2,lighting=1.5 (cost per demonstration), got "
                f"{item!r}") from None
        if name.strip() in out:
            raise InvalidSpecError(
                f"--cost gives {name.strip()!r} twice ({item!r}); give each factor once")
        out[name.strip()] = value
    return out


def plan_command(
    curves: Annotated[Path, typer.Option(help="curves.json written by robogen scale.")],
    budget: Annotated[float, typer.Option(
        help="Budget in cost units (demonstrations by default).")],
    cost: Annotated[str | None, typer.Option(
        help="Cost per demonstration by factor, e.g. texture=2,lighting=1.5 (default 1).")
    ] = None,
    method: Annotated[str, typer.Option(help="greedy | fsc_topk | equal | worst_first.")
                      ] = "greedy",
    lcb: Annotated[float | None, typer.Option(
        help="Greedy/fsc_topk on the lower confidence bound at this level (e.g. 0.8).")] = None,
    k: Annotated[int, typer.Option(help="Curves funded by fsc_topk.")] = 2,
    step: Annotated[int, typer.Option(help="Demonstrations per greedy increment.")] = 1,
    task: Annotated[str | None, typer.Option(help="Require curves of this task id.")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Write the plan as JSON to this file (or DIR/plan.json for a directory).")] = None,
    report: Annotated[Path | None, typer.Option(
        help="Write the scaling report with this plan (HTML) here.")] = None,
    rounds: Annotated[int | None, typer.Option(
        help="Closed loop: spend the budget in this many rounds, collecting, measuring and "
             "refitting after each (needs --curves SCALE_DIR; --out is the loop directory, "
             "default SCALE_DIR/adaptive).")] = None,
    backend: Annotated[str, typer.Option(help="With --rounds: evaluation backend, serial | ray.")
                       ] = "serial",
    value_cost: Annotated[str | None, typer.Option(
        help="Diversity curves (robogen scale --vary values): cost of one new value in "
             "demonstrations, e.g. 5 or texture=5,embodiment=20 (default 0).")] = None,
) -> None:
    """Split a demonstration budget across factors from their fitted scaling curves.

    With --rounds R the plan is carried out: each round collects its share of the budget,
    trains and evaluates BC models where the plan now stands, refits the curves and replans;
    rerun the same command to resume a killed loop.
    """
    from rich.console import Console
    from rich.table import Table

    from robogen.scaling.curves import load_curves
    from robogen.scaling.planner import plan_budget

    if rounds is None and backend != "serial":
        _error(f"--backend {backend!r} applies only to the closed loop; add --rounds R")
    if rounds is not None and value_cost is not None:
        _error("--rounds (the closed loop) plans quantity curves; --value-cost plans the "
               "diversity curves of robogen scale --vary values in one shot: drop one of them")
    if rounds is not None:
        _plan_rounds(curves, budget, rounds, cost=cost, method=method, lcb=lcb, k=k, step=step,
                     task=task, out=out, report=report, backend=backend)
        return
    if curves.is_dir():  # a scale run directory
        curves = curves / "curves.json"
    cf = _guarded(load_curves, curves, task=task)
    if (cf.meta or {}).get("kind") == "diversity" or value_cost is not None:
        from robogen.scaling.diversity_cli import plan_values_command

        plan_values_command(cf, curves, budget, value_cost=value_cost, method=method, out=out,
                            report=report, cost=cost, lcb=lcb)
        return
    if report is not None and Path(report).is_dir():
        _error(f"--report {str(report)!r} is a directory; give an .html file path")
    costs = _guarded(_costs, cost)
    plan = _guarded(plan_budget, cf, budget, costs=costs, method=method, lcb=lcb, k=k,
                    step=step)
    for w in (cf.meta or {}).get("warnings", []) if isinstance(cf.meta, dict) else []:
        print_message("warning (from the scale run)", w, style="bold yellow")
    pct = f"{plan.confidence * 100:g}%"
    t = Table(title=f"{plan.method} plan for {cf.task}, budget {plan.budget:g}")
    for col in ("factor", "demos", "cost", "success now", f"predicted success [{pct} band]"):
        t.add_column(col, justify="left" if col == "factor" else "right")
    for f in plan.factors:
        t.add_row(f.factor, str(f.demos), f"{f.cost:g}", f"{f.success_now:.3f}",
                  f"{f.success:.3f} [{f.low:.3f}, {f.high:.3f}]")
    t.add_row("total", str(sum(f.demos for f in plan.factors)),
              f"{plan.total_cost:g}", "", f"mean {plan.mean_success:.3f}")
    c = Console()
    c.print(t)
    versus = _print_versus_equal(c, cf, plan, budget, costs=costs, lcb=lcb, k=k, step=step)
    if out is not None:
        from robogen._atomic import write_atomic

        if out.is_dir():
            out = out / "plan.json"

        doc = {"schema": "robogen.plan", "version": 1, "task": cf.task,
               "curves": str(curves), "costs": costs, **plan.to_dict(),
               "vs_equal": {m: v.to_dict() for m, v in versus.items()}}
        _guarded(write_atomic, out, json.dumps(doc, indent=2))
        c.print(f"  plan: {out}")
    if report is not None:
        from robogen.scaling.report import write_scaling_html


        c.print(f"  report: {_guarded(write_scaling_html, report, cf, plans=[plan])}")


def _print_versus_equal(c: Any, cf: Any, plan: Any, budget: float, **kw: Any) -> dict[str, Any]:
    """Every method's predicted success and difference from equal; a plain verdict."""
    from rich.table import Table

    from robogen.scaling.planner import METHODS, compare_with_equal, plan_budget

    pct = f"{plan.confidence * 100:g}%"
    has_samples = all(f.samples is not None and len(f.samples) >= 2 for f in cf.fits().values())
    versus = _guarded(compare_with_equal, cf, budget, METHODS, confidence=plan.confidence,
                      **kw) if has_samples else {}
    plans = {m: plan if m == plan.method else _guarded(
        plan_budget, cf, budget, method=m, confidence=plan.confidence, **kw) for m in METHODS}
    t = Table(title=f"methods against the equal split (budget {plan.budget:g})")
    for col in ("method", "predicted", f"vs equal [{pct}]", "verdict"):
        t.add_column(col, justify="left" if col in ("method", "verdict") else "right")
    for m, alt in plans.items():
        if m == "equal":
            diff, verdict = "(reference)", ""
        elif m in versus:
            v = versus[m]
            diff = f"{v.difference:+.3f} [{v.low:+.3f}, {v.high:+.3f}]"
            verdict = "better" if v.better else "worse" if v.worse else "undecided"
        else:
            diff = f"{alt.mean_success - plans['equal'].mean_success:+.3f} (no interval)"
            verdict = ""
        t.add_row(m, f"{alt.mean_success:.3f}", diff, verdict)
    c.print(t)
    if not versus:
        c.print("no interval: the curves have no bootstrap samples (robogen scale --n-boot > 1)",
                highlight=False)
        return versus
    n = next(iter(versus.values())).n_samples
    c.print(f"difference from equal: mean over {n} bootstrap pairs (each method plans on one "
            "resample of the curves, every plan is judged on another), percentile interval",
            highlight=False)
    winners = [m for m, v in versus.items() if v.better]
    if winners:
        c.print(f"[bold green]beats the equal split with {pct} confidence:[/] "
                + ", ".join(winners), highlight=False)
    else:
        c.print(f"[bold yellow]no method beats the equal split with {pct} confidence[/] on "
                "these curves: an equal split is as good a choice as any", highlight=False)
    return versus


def _plan_rounds(curves: Path, budget: float, rounds: int, *, cost: str | None, method: str,
                 lcb: float | None, k: int, step: int, task: str | None, out: Path | None,
                 report: Path | None, backend: str) -> None:
    """``robogen plan --rounds``: the closed loop of :mod:`robogen.scaling.adaptive`."""
    from rich.console import Console

    from robogen.scaling import adaptive
    from robogen.scaling.pipeline import eval_backend

    scale_dir = curves.parent if curves.name == "curves.json" else curves
    if report is not None and Path(report).is_dir():
        _error(f"--report {str(report)!r} is a directory; give an .html file path")
    if out is not None and out.is_file():
        _error(f"--out {str(out)!r} is a file; with --rounds it is the loop's directory")
    scale, cf = _guarded(adaptive.load_scale_run, scale_dir)
    if task is not None and scale.task != task:
        _error(f"{scale_dir} holds curves of {scale.task!r}, not of --task {task!r}")
    config = adaptive.AdaptiveConfig(budget=budget, rounds=rounds, method=method,
                                     costs=_guarded(_costs, cost), k=k, step=step, lcb=lcb)
    _guarded(adaptive.validate_adaptive, config, cf)
    options = _guarded(eval_backend, backend)
    with ProgressBars({"train": "steps"}) as bars:
        res = _guarded(adaptive.run_adaptive, scale_dir, config, out=out,
                       backend=options, progress=bars)
    c = Console()
    c.print(f"[bold green]closed loop:[/] {config.method}, budget {config.budget:g} in "
            f"{config.rounds} rounds; {res.trained} models trained, {res.reused} reused",
            highlight=False)
    for r in res.rounds:
        c.print(f"round {r.round} (budget {r.budget:g}, spent {r.spent:g}): added "
                + ", ".join(f"{n} +{v}" for n, v in r.added.items()) + "  -> "
                + ", ".join(f"{n} {v}" for n, v in r.demos.items()), highlight=False)
        c.print(f"  predicted mean success {r.predicted_planned:.3f} before refit, "
                f"{r.predicted:.3f} after; measured at the new counts: "
                + ", ".join(f"{n} {v:.2f}" for n, v in r.measured.items()), highlight=False)
        c.print("  refit: " + "  ".join(f"{n}: a={a:.3g} b={b:.3g} n0={n0:.3g}"
                                       for n, (a, b, n0) in r.fits.items()), highlight=False)
    c.print(res.final.table(), highlight=False)
    if report is not None:
        from robogen.scaling.curves import load_curves
        from robogen.scaling.report import write_scaling_html

        last = load_curves(res.out / f"round-{len(res.rounds)}" / "curves.json")
        _guarded(write_scaling_html, report, last, plans=[res.final])
        c.print(f"  report: {report}")
    for label, p in (("summary", res.summary_path), ("report", res.html_path)):
        c.print(f"  {label}: {p}")
