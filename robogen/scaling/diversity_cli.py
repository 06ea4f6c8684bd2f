"""``robogen scale --vary values``: the diversity curves' part of the scale command.

Exit codes as ``robogen scale``: 2 on invalid input, before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robogen._console import exit_invalid, guarded
from robogen.progress import ProgressBars

QUANTITY_ONLY = (
    "{flag} applies only to --vary demos (quantity curves); with --vary values the grid is "
    "--values x --per-value"
)


def scale_values(*, task: str, factors: list[str], out: Path, points: str, pairs: str,
                 base: int | None, eval_episodes: int | None, values: str, per_value: str,
                 eval_values: int, seeds: int, obs_mode: str, overrides: dict[str, Any],
                 n_boot: int, severity: float, image_size: int, backend: str,
                 workers: int | None, address: str | None, seed: int) -> None:
    """Build the :class:`~robogen.scaling.diversity.DiversityConfig`, run it, print the fits."""
    from rich.console import Console

    from robogen.scaling import diversity
    from robogen.scaling.loop import default_bc_config
    from robogen.scaling.pipeline import eval_backend

    if points != "0,10,20,40":
        exit_invalid(QUANTITY_ONLY.format(flag="--points"))
    if pairs != "none":
        exit_invalid(QUANTITY_ONLY.format(flag="--pairs"))

    def build() -> diversity.DiversityConfig:
        return diversity.DiversityConfig(
            task=task, factors=tuple(factors), values=diversity.parse_grid(values),
            per_value=diversity.parse_grid(per_value, "--per-value"),
            base=0 if base is None else base, eval_values=eval_values,
            eval_episodes=5 if eval_episodes is None else eval_episodes, seeds=seeds,
            obs_mode=obs_mode, seed=seed, severity=severity, image_size=image_size,
            bc=default_bc_config(obs_mode, **overrides), n_boot=n_boot)

    config = guarded(build)
    guarded(diversity.validate, config)
    options = guarded(eval_backend, backend, workers, address)
    with ProgressBars({"train": "steps"}) as bars:
        outcome = guarded(diversity.run_diversity, config, out, backend=options, progress=bars)
    c = Console()
    for w in outcome.warnings:
        c.print(f"[yellow]note:[/] {w}", highlight=False)
    c.print(f"[bold green]done:[/] {outcome.trained} models trained, {outcome.reused} reused")
    from robogen.scaling.curves import load_curves
    from robogen.scaling.value_planner import exponent_interval

    for name, cv in load_curves(outcome.curves_path).curves.items():
        lo, hi = exponent_interval(cv.fit)
        c.print(f"  {name}: b={cv.fit.b:.3g} [{lo:.3g}, {hi:.3g}]  " + "  ".join(
            f"x={p.x}:{p.successes}/{p.n}" for p in cv.points), highlight=False)
    for label, p in (("curves", outcome.curves_path), ("plot", outcome.plot_path),
                     ("report", outcome.html_path)):
        c.print(f"  {label}: {p}")


def _value_costs(value: str | None) -> float | dict[str, float]:
    """``"5"`` -> 5.0; ``"texture=5,embodiment=20"`` -> a dict (checked by the planner)."""
    from robogen.errors import InvalidSpecError
    from robogen.scaling.value_planner import BAD_VALUE_COST

    text = (value or "0").strip()
    try:
        if "=" not in text:
            return float(text)
        out: dict[str, float] = {}
        for item in (t.strip() for t in text.split(",") if t.strip()):
            name, _, num = item.partition("=")
            if name.strip() in out:
                raise InvalidSpecError(BAD_VALUE_COST.format(why=f"{name.strip()!r} twice"))
            out[name.strip()] = float(num)
        return out
    except ValueError:
        raise InvalidSpecError(BAD_VALUE_COST.format(why=f"got {value!r}")) from None


def plan_values_command(cf: Any, curves: Path, budget: float, *, value_cost: str | None,
                        method: str, out: Path | None, report: Path | None, cost: str | None,
                        lcb: float | None) -> None:
    """``robogen plan`` on diversity curves: (values, demos per value) per factor vs equal."""
    import json

    from rich.console import Console
    from rich.table import Table

    from robogen._atomic import write_atomic
    from robogen.scaling.value_planner import (
        NOT_DIVERSITY,
        compare_values_with_equal,
        diversity_models,
        diversity_verdict,
        plan_values,
    )

    if (cf.meta or {}).get("kind") != "diversity":
        exit_invalid(NOT_DIVERSITY.format(path=curves))
    if cost is not None or lcb is not None:
        exit_invalid("--cost and --lcb apply to quantity curves; diversity curves take "
                     "--value-cost (demonstrations cost 1 each)")
    if method not in ("greedy", "optimal", "equal"):
        exit_invalid(f"--method for diversity curves must be optimal (default) or equal, got "
                     f"{method!r}")
    if report is not None and Path(report).is_dir():
        exit_invalid(f"--report {str(report)!r} is a directory; give an .html file path")
    vc = guarded(_value_costs, value_cost)
    models = guarded(diversity_models, cf, str(curves))
    plan = guarded(plan_values, models, budget, value_cost=vc,
                   method="equal" if method == "equal" else "optimal")
    versus = guarded(compare_values_with_equal, models, budget, value_cost=vc)
    pct = f"{plan.confidence * 100:g}%"
    t = Table(title=f"{plan.method} (values x demos per value) for {cf.task}, "
                    f"budget {plan.budget:g}")
    for col in ("factor", "values", "demos per value", "demos", "cost",
                f"predicted success [{pct} band]"):
        t.add_column(col, justify="left" if col == "factor" else "right")
    for f in plan.factors:
        t.add_row(f.factor, str(f.values), str(f.per_value), str(f.demos), f"{f.cost:g}",
                  f"{f.success:.3f} [{f.low:.3f}, {f.high:.3f}]")
    t.add_row("total", "", "", str(sum(f.demos for f in plan.factors)),
              f"{plan.total_cost:g}", f"mean {plan.mean_success:.3f}")
    c = Console()
    c.print(t)
    v = versus
    verdict = ("better" if v["low"] > 0 else "worse" if v["high"] < 0 else "undecided")
    c.print(f"optimal - equal split: {v['difference']:+.3f} [{v['low']:+.3f}, "
            f"{v['high']:+.3f}] ({pct}, {v['n_samples']} bootstrap pairs: planned on one "
            f"resample of the curves, judged on another): {verdict}", highlight=False)
    verdicts = [diversity_verdict(m, vc.get(f, 0.0) if isinstance(vc, dict) else vc)
                for f, m in models.items()]
    for d in verdicts:
        c.print(d["sentence"], highlight=False)
    if out is not None:
        if out.is_dir():
            out = out / "plan.json"
        doc = {"schema": "robogen.plan", "version": 1, "kind": "diversity", "task": cf.task,
               "curves": str(curves), "value_cost": vc, **plan.to_dict(), "vs_equal": versus,
               "verdicts": verdicts}
        guarded(write_atomic, out, json.dumps(doc, indent=2))
        c.print(f"  plan: {out}")
    if report is not None:
        from robogen.scaling.report import write_scaling_html

        c.print(f"  report: {guarded(write_scaling_html, report, cf, value_plans=[plan])}")
