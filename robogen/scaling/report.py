"""The scaling report: ``scaling.html``, one self-contained page (plot embedded, no links out).

Sections: the run's settings (from ``curves.json`` meta), the figure of
:func:`robogen.scaling.curves_plot.curves_plot_png` embedded as a base64 PNG,
per curve a table of the evaluated points (success with its Wilson interval,
per training seed and pooled per ``x``) and the fitted parameters ``a, b, n0``
with bootstrap percentile intervals and predictions beyond the measured range,
and, if given, the budget allocation of :func:`robogen.scaling.planner.plan_budget`.
Style and table markup are those of the evaluation report
(:mod:`robogen.reports.writers`).
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from robogen._atomic import write_atomic
from robogen.reports.html_parts import CSS, html_table
from robogen.stats.intervals import wilson_interval

if TYPE_CHECKING:
    from robogen.scaling.curves import CurvesFile, FactorCurve
    from robogen.scaling.planner import Allocation
    from robogen.scaling.value_planner import ValuePlan


def render_scaling_html(
    curves: CurvesFile,
    *,
    plot_png: bytes | None = None,
    plans: Sequence[Allocation] = (),
    value_plans: Sequence[ValuePlan] = (),
) -> str:
    """The scaling report as one self-contained HTML page.

    Args:
        curves: A loaded ``curves.json``.
        plot_png: The figure (default: drawn with :func:`curves_plot_png`, or for a
            diversity run :func:`~robogen.scaling.diversity_report.diversity_plot_png`).
        plans: Budget allocations to show (first is the recommended one).
        value_plans: (values, demos per value) plans of a diversity run
            (:mod:`robogen.scaling.value_planner`).

    Returns:
        HTML text referencing no external resource.
    """
    from robogen.scaling import diversity_report
    from robogen.scaling.curves_plot import curves_plot_png

    e = html.escape
    pct = f"{curves.confidence * 100:g}%"
    diverse = curves.meta.get("kind") == "diversity"
    png = plot_png if plot_png is not None else (
        diversity_report.diversity_plot_png(curves) if diverse else curves_plot_png(curves))
    b64 = base64.b64encode(png).decode("ascii")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>robogen scaling: {e(curves.task)}</title><style>{CSS}</style></head><body>",
        f"<h1>Factored scaling curves: {e(curves.task)}</h1>",
        f'<p class="meta">{e(_settings_line(curves))}</p>',
        '<p class="note">success(x) = 1 − a·(x + n0)^b, fitted by maximum likelihood; x is the '
        "number of demonstrations varying the factor added to the base data; success is "
        "measured on the factor's held-out test values (Factored Scaling Curves, Zha et al. "
        "2025, arXiv:2505.07728).</p>",
        f'<img alt="scaling curves" src="data:image/png;base64,{b64}">',
    ]
    if diverse:  # a diversity run: its own title and settings line, no FSC note
        parts[3:6] = [f"<h1>Diversity and quantity scaling curves: {e(curves.task)}</h1>",
                      f'<p class="meta">{e(diversity_report.settings_line(curves))}</p>']
    for w in curves.meta.get("warnings", []) or []:
        parts.append(f'<p class="note"><b>note:</b> {e(str(w))}</p>')
    if diverse:
        parts.append(diversity_report.diversity_html(curves, value_plans))
    if plans:
        parts.append("<h2>Data-collection plan</h2>")
        for plan in plans:
            parts.append(_plan_html(plan))
    parts.append("<h2>Fits</h2>")
    parts.append(_fits_table(curves))
    for curve in curves.curves.values():
        parts.append(f"<h2>{e(curve.name)}</h2>")
        parts.append(_points_table(curve, curves.confidence))
        parts.append(f'<p class="note">Wilson {pct} intervals; pooled rows merge the training '
                     "seeds of one x.</p>")
    expert = curves.meta.get("expert_demos")
    if expert:
        rows = [[f, str(v.get("successes")), str(v.get("episodes"))] for f, v in expert.items()]
        parts.append("<h2>Demonstrations</h2>")
        parts.append(html_table(["factor", "expert successes", "episodes recorded"],
                                 rows))
    meta = json.dumps(dict(curves.meta), indent=2, default=str)
    parts.append(f"<h2>Settings</h2><pre>{e(meta)}</pre>")
    parts.append(f'<p class="note">curves schema version {curves.version}</p></body></html>')
    return "\n".join(parts) + "\n"


def write_scaling_html(
    path: str | os.PathLike[str],
    curves: CurvesFile,
    *,
    plot_png: bytes | None = None,
    plans: Sequence[Allocation] = (),
    value_plans: Sequence[ValuePlan] = (),
) -> Path:
    """Write :func:`render_scaling_html` atomically to ``path``; returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = render_scaling_html(curves, plot_png=plot_png, plans=plans, value_plans=value_plans)
    return write_atomic(out, text.encode("utf-8"))


def _settings_line(curves: CurvesFile) -> str:
    cfg = curves.meta.get("config") or {}
    if not cfg:
        return f"{len(curves.curves)} curves"
    bc = cfg.get("bc", {})
    return (f"{cfg.get('base')} base demonstrations · points {cfg.get('points')} · "
            f"{cfg.get('seeds')} training seed(s) · {cfg.get('eval_episodes')} evaluation "
            f"episodes per model · {cfg.get('obs_mode')} observations · BC {bc.get('arch')} "
            f"{bc.get('hidden')} · {bc.get('steps')} steps · severity {cfg.get('severity')} · "
            f"run seed {cfg.get('seed')}")


def _interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    q = (1.0 - level) / 2.0
    return float(np.quantile(samples, q)), float(np.quantile(samples, 1.0 - q))


def _fits_table(curves: CurvesFile) -> str:
    level = curves.confidence
    pct = f"{level * 100:g}%"
    rows = []
    for c in curves.curves.values():
        fit = c.fit
        cells = [c.name]
        for i, v in enumerate((fit.a, fit.b, fit.n0)):
            if fit.samples is not None and len(fit.samples):
                lo, hi = _interval(fit.samples[:, i], level)
                cells.append(f"{v:.3g} [{lo:.3g}, {hi:.3g}]")
            else:
                cells.append(f"{v:.3g}")
        last = max((p.x for p in c.points), default=0)
        for x in (last, 2 * last):
            mean, low, high = _predict(c, x, level)
            cells.append(f"{mean:.3f} [{low:.3f}, {high:.3f}]")
        cells.append("" if fit.deviance != fit.deviance else f"{fit.deviance:.2f}")
        rows.append(cells)
    header = ["curve", f"a [{pct}]", f"b [{pct}]", f"n0 [{pct}]", "success at max x",
              "success at 2× max x", "deviance"]
    return html_table(header, rows) + (
        f'<p class="note">Intervals: bootstrap percentiles ({pct}) over evaluation episodes '
        "and training seeds; predictions at the largest measured x and at twice it "
        "(extrapolated).</p>")


def _predict(curve: FactorCurve, x: float, level: float) -> tuple[float, float, float]:
    from robogen.scaling.curves import predict

    mean, low, high = predict(curve.fit, [float(x)], level)
    return float(mean[0]), float(low[0]), float(high[0])


def _points_table(curve: FactorCurve, level: float) -> str:
    rows = []
    xs = sorted({p.x for p in curve.points})
    for x in xs:
        pts = [p for p in curve.points if p.x == x]
        for p in pts:
            rows.append([str(x), "" if p.seed is None else str(p.seed), f"{p.successes}/{p.n}",
                         f"{p.rate:.3f} [{p.ci_low:.3f}, {p.ci_high:.3f}]",
                         f"{float(curve.fit.success(x)):.3f}"])
        if len(pts) > 1:
            k, n = sum(p.successes for p in pts), sum(p.n for p in pts)
            lo, hi = wilson_interval(k, n, level)
            rows.append([str(x), "pooled", f"{k}/{n}", f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]",
                         f"{float(curve.fit.success(x)):.3f}"])
    return html_table(["demos added (x)", "training seed", "successes",
                        f"success rate [{level * 100:g}% Wilson]", "fit"], rows)


def _plan_html(plan: Allocation) -> str:
    e = html.escape
    pct = f"{plan.confidence * 100:g}%"
    extra = ""
    if plan.lcb is not None:
        extra += f", lower confidence bound {plan.lcb:g}"
    if plan.k is not None:
        extra += f", top-{plan.k}"
    rows = [[f.factor, str(f.demos), f"{f.cost:g}", f"{f.success_now:.3f}",
             f"{f.success:.3f} [{f.low:.3f}, {f.high:.3f}]"] for f in plan.factors]
    rows.append(["total", str(sum(f.demos for f in plan.factors)),
                 f"{plan.total_cost:g} / {plan.budget:g}", "", f"mean {plan.mean_success:.3f}"])
    return (f"<p><b>{e(plan.method)}</b> (budget {plan.budget:g}{e(extra)})</p>" +
            html_table(["factor", "demos", "cost", "success now",
                         f"predicted success [{pct} band]"], rows))
