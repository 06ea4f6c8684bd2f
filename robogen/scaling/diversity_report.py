"""The diversity part of ``scaling.html``: diversity next to quantity curves, per factor.

For a diversity run (:mod:`robogen.scaling.diversity`) the page shows, per factor, the
figure's row of two panels (success against distinct values ``k``, one line per
demonstrations-per-value ``m``; success against ``m``, one line per ``k``), a table of the
fitted exponents with bootstrap percentile intervals, and one sentence saying whether the
next demonstrations are better spent on new values or on more demonstrations per value
(:func:`robogen.scaling.value_planner.diversity_verdict`), then any value plans.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from robogen.reports.html_parts import html_table

if TYPE_CHECKING:
    from robogen.scaling.curves import CurvesFile
    from robogen.scaling.value_planner import ValuePlan

MODEL_NOTE = (
    "Diversity curve f:k@m<M>: success on held-out values against k distinct training "
    "values at M demonstrations per value; quantity curve f:m@k<K>: against m demonstrations "
    "per value at K values. Both are fitted as success = 1 − a·x^b (maximum likelihood, "
    "bootstrap over evaluation episodes and training seeds); b is the exponent of the failure "
    "rate: more negative, faster gains (diversity scaling: Lin et al. 2024, arXiv:2410.18647)."
)


def _split(curves: CurvesFile) -> dict[str, dict[str, list[tuple[int, str]]]]:
    """Factor -> {"k": [(m, name)], "m": [(k, name)]} in grid order."""
    from robogen.scaling.value_planner import _CURVE  # same package

    out: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for name in curves.names:
        mt = _CURVE.match(name)
        if mt:
            out.setdefault(mt["factor"], {"k": [], "m": []})[mt["x"]].append(
                (int(mt["n"]), name))
    for d in out.values():
        d["k"].sort()
        d["m"].sort()
    return out


def diversity_plot_png(curves: CurvesFile, dpi: int = 110) -> bytes:
    """One row per factor: diversity curves (left) and quantity curves (right), log x, with
    the measured points (pooled over seeds) and the fits; PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    groups = _split(curves)
    fig = Figure(figsize=(8.0, 2.8 * max(1, len(groups))), dpi=dpi)
    axes = fig.subplots(max(1, len(groups)), 2, squeeze=False, sharey=True)
    for row, (factor, g) in enumerate(groups.items()):
        for col, (key, xlabel, tag) in enumerate(
                (("k", "distinct values k", "m"), ("m", "demonstrations per value m", "k"))):
            ax = axes[row][col]
            cmap = matplotlib.colormaps["viridis"]
            for i, (at, name) in enumerate(g[key]):
                c = curves.curves[name]
                color = cmap(i / max(1, len(g[key]) - 1) * 0.85)
                xs = sorted({p.x for p in c.points})
                rate = [sum(p.successes for p in c.points if p.x == x)
                        / sum(p.n for p in c.points if p.x == x) for x in xs]
                grid = np.geomspace(min(xs), max(xs), 60)
                ax.plot(grid, c.fit.success(grid), color=color, linewidth=1.3,
                        label=f"{tag}={at}, b={c.fit.b:.2f}")
                ax.plot(xs, rate, "o", color=color, markersize=3.5)
            ax.set_xscale("log", base=2)
            ax.set_xlabel(xlabel, fontsize=8)
            ax.set_title(f"{factor}: {'diversity' if key == 'k' else 'quantity'}", fontsize=9)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6, loc="lower right")
        axes[row][0].set_ylabel("held-out success", fontsize=8)
    axes[0][0].set_ylim(-0.02, 1.02)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def diversity_html(curves: CurvesFile, value_plans: Sequence[ValuePlan] = ()) -> str:
    """The page section: exponents with intervals, one sentence per factor, value plans."""
    from robogen.scaling.value_planner import (
        diversity_models,
        diversity_verdict,
        exponent_interval,
    )

    e = html.escape
    pct = f"{curves.confidence * 100:g}%"
    parts = ["<h2>Diversity vs quantity</h2>", f'<p class="note">{e(MODEL_NOTE)}</p>']
    models = diversity_models(curves)
    for factor, g in _split(curves).items():
        rows = []
        for key, label in (("k", "values (diversity)"), ("m", "demos per value (quantity)")):
            for at, name in g[key]:
                fit = curves.curves[name].fit
                lo, hi = exponent_interval(fit, curves.confidence)
                last = max(p.x for p in curves.curves[name].points)
                rows.append([e(name), label, f"{'m' if key == 'k' else 'k'} = {at}",
                             f"{fit.b:.3f} [{lo:.3f}, {hi:.3f}]",
                             f"{float(fit.success(last)):.3f} at {key} = {last}"])
        parts.append(f"<h3>{e(factor)}</h3>")
        if factor in models:
            parts.append(f"<p><b>{e(diversity_verdict(models[factor])['sentence'])}</b></p>")
        parts.append(html_table(["curve", "varies", "at", f"exponent b [{pct}]", "fit"], rows))
    for plan in value_plans:
        rows = [[e(f.factor), str(f.values), str(f.per_value), str(f.demos), f"{f.cost:g}",
                 f"{f.success:.3f} [{f.low:.3f}, {f.high:.3f}]"] for f in plan.factors]
        rows.append(["total", "", "", str(sum(f.demos for f in plan.factors)),
                     f"{plan.total_cost:g} / {plan.budget:g}", f"mean {plan.mean_success:.3f}"])
        parts.append(f"<h3>{e(plan.method)} plan (budget {plan.budget:g})</h3>")
        parts.append(html_table(["factor", "values", "demos per value", "demos", "cost",
                                 f"predicted success [{pct} band]"], rows))
    return "\n".join(parts)


def settings_line(curves: CurvesFile) -> str:
    """One line of a diversity run's settings (from ``curves.json`` meta)."""
    cfg = curves.meta.get("config") or {}
    bc = cfg.get("bc", {})
    return (f"values k {cfg.get('values')} × demonstrations per value m "
            f"{cfg.get('per_value')} · {cfg.get('base')} base demonstrations · "
            f"{cfg.get('seeds')} training seed(s) · {cfg.get('eval_values')} held-out values × "
            f"{cfg.get('eval_episodes')} episodes per model · {cfg.get('obs_mode')} observations "
            f"· BC {bc.get('arch')} {bc.get('hidden')} · {bc.get('steps')} steps · severity "
            f"{cfg.get('severity')} · run seed {cfg.get('seed')}")
