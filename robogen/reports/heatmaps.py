"""Heatmaps as PNG bytes: gaps of several policies, interactions of pairs of axes.

Drawn like :mod:`robogen.reports.plots` (matplotlib ``Figure`` on Agg, no pyplot
state). Cells show the estimate and its interval; the colour is the estimate on
a diverging scale centred at 0 (red: success lost, blue: gained).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from robogen.reports.figures import empty_axes, figure_png, new_figure
from robogen.reports.records import InteractionStats, Report

if TYPE_CHECKING:
    from robogen.reports.comparison import Comparison

_CMAP = "RdBu_r"


def gap_heatmap_png(comparison: Comparison) -> bytes:
    """Policies (rows) x perturbed conditions (columns) of paired gaps with intervals.

    Args:
        comparison: The comparison.

    Returns:
        PNG image bytes.
    """
    runs = comparison.runs
    conds = list(comparison.conditions)
    fig = new_figure(max(6.0, 2.5 + 1.5 * len(conds)), 1.4 + 0.7 * len(runs))
    ax = fig.add_subplot()
    if not conds:
        empty_axes(ax, "no perturbed conditions")
        return figure_png(fig)
    vals = np.full((len(runs), len(conds)), np.nan)
    text: list[list[str]] = []
    for i, r in enumerate(runs):
        by = {g.condition: g for g in r.gaps}
        row = []
        for j, c in enumerate(conds):
            g = by.get(c)
            if g is None or not math.isfinite(g.gap):
                row.append(g.status if g is not None else "n/a")
                continue
            vals[i, j] = g.gap
            row.append(f"{g.gap:+.2f}\n[{g.ci_low:+.2f}, {g.ci_high:+.2f}]")
        text.append(row)
    _draw(ax, vals, text, [r.label for r in runs], conds, fig,
          "gap: nominal − perturbed success")
    ax.set_title(f"Generalization gap per policy ({comparison.confidence * 100:g}% CI)",
                 fontsize=10)
    return figure_png(fig)


def interaction_heatmap_png(report: Report) -> bytes | None:
    """Axes x axes heatmap of pair interactions at each pair's highest severity.

    Cell (A, B) = gap(A∧B) − gap(A) − gap(B) with its interval; the diagonal
    is empty. Only two-axis conditions with ``split == "all"`` count.

    Args:
        report: The report.

    Returns:
        PNG image bytes, or None when the report has no two-axis interaction.
    """
    best: dict[frozenset[str], InteractionStats] = {}
    for it in report.interactions:
        if len(it.axes) != 2 or it.split != "all":
            continue
        key = frozenset(it.axes)
        if key not in best or it.severity > best[key].severity:
            best[key] = it
    if not best:
        return None
    axes = [a for a in report.manifest.axes if any(a in k for k in best)]
    k = len(axes)
    vals = np.full((k, k), np.nan)
    text = [["" for _ in axes] for _ in axes]
    for it in best.values():
        i, j = (axes.index(a) for a in it.axes)
        for r, c in ((i, j), (j, i)):
            if math.isfinite(it.interaction):
                vals[r, c] = it.interaction
                text[r][c] = (f"{it.interaction:+.2f}\n[{it.ci_low:+.2f}, {it.ci_high:+.2f}]"
                              f"\n@{it.severity:g}")
    fig = new_figure(max(4.5, 1.6 + 1.1 * k), max(3.5, 1.2 + 0.9 * k))
    ax = fig.add_subplot()
    _draw(ax, vals, text, axes, axes, fig, "interaction: gap(A∧B) − gap(A) − gap(B)")
    ax.set_title(f"Pair interactions ({report.confidence * 100:g}% CI); > 0: they compound",
                 fontsize=10)
    return figure_png(fig)


def _draw(ax, vals: np.ndarray, text: Sequence[Sequence[str]], rows: Sequence[str],  # noqa: ANN001
          cols: Sequence[str], fig, label: str) -> None:  # noqa: ANN001 - matplotlib objects
    finite = vals[np.isfinite(vals)]
    lim = max(0.1, float(np.abs(finite).max()) if finite.size else 0.1)
    im = ax.imshow(np.ma.masked_invalid(vals), cmap=_CMAP, vmin=-lim, vmax=lim, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    for i, row in enumerate(text):
        for j, s in enumerate(row):
            if s:
                v = vals[i, j]
                dark = math.isfinite(v) and abs(v) > 0.6 * lim
                ax.text(j, i, s, ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
    fig.colorbar(im, ax=ax, shrink=0.8).set_label(label, fontsize=8)
