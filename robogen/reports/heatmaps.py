"""Heatmaps as PNG bytes: gaps of several policies, interactions of pairs of axes.

Drawn like :mod:`robogen.reports.plots` (matplotlib ``Figure`` on Agg, no pyplot
state). Cells show the estimate and its interval; the colour is the estimate on
a diverging scale centred at 0 (red: success lost, blue: gained).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from robogen.reports.colors import axis_color
from robogen.reports.figures import empty_axes, figure_png, new_figure
from robogen.reports.html_parts import level_label
from robogen.reports.records import AxisGap, InteractionStats, Report

if TYPE_CHECKING:
    from robogen.reports.comparison import Comparison

_CMAP = "RdBu_r"
GAP_HEATMAP_WIDTH_IN = 9.6
"""Width of compare.html's gap heatmap [in]: 960 px at the report DPI, the page's column."""


def gap_heatmap_png(comparison: Comparison) -> bytes:
    """One heatmap row per axis: policies x that axis's levels, paired gaps with intervals.

    Each axis label (``texture``, ``lighting+texture``, ``combined``) gets its own row of
    panels, its levels as columns (left to right in report order) and the policies as rows,
    so the figure keeps a page's width whatever the number of conditions. All panels share
    one diverging colour scale.

    Args:
        comparison: The comparison.

    Returns:
        PNG image bytes (at most :data:`GAP_HEATMAP_WIDTH_IN` inches wide).
    """
    runs = comparison.runs
    groups: dict[str, list[AxisGap]] = {}
    first = {g.condition: g for g in runs[0].gaps} if runs else {}
    for c in comparison.conditions:
        g0 = first.get(c)
        if g0 is not None:
            groups.setdefault(g0.axis, []).append(g0)
    if not groups:
        fig = new_figure(GAP_HEATMAP_WIDTH_IN, 2.0)
        empty_axes(fig.add_subplot(), "no perturbed conditions")
        return figure_png(fig)
    by = [{g.condition: g for g in r.gaps} for r in runs]
    n_cols = max(len(v) for v in groups.values())
    row_in = 0.24 * len(runs) + 0.32
    fig = new_figure(GAP_HEATMAP_WIDTH_IN, 0.7 + row_in * len(groups))
    axs = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    finite = [g.gap for b in by for g in b.values() if math.isfinite(g.gap)]
    lim = max(0.1, max((abs(x) for x in finite), default=0.1))
    im = None
    for ax, (axis, gs) in zip(axs, groups.items(), strict=True):
        vals = np.full((len(runs), n_cols), np.nan)
        text = [["" for _ in range(n_cols)] for _ in runs]
        for i, b in enumerate(by):
            for j, g0 in enumerate(gs):
                g = b.get(g0.condition)
                if g is None or not math.isfinite(g.gap):
                    text[i][j] = g.status if g is not None else "n/a"
                    continue
                vals[i, j] = g.gap
                text[i][j] = f"{g.gap:+.2f} [{g.ci_low:+.2f}, {g.ci_high:+.2f}]"
        im = ax.imshow(np.ma.masked_invalid(vals), cmap=_CMAP, vmin=-lim, vmax=lim,
                       aspect="auto")
        ax.set_xticks(range(len(gs)), [f"@{level_label(g.severity, g.split)}" for g in gs],
                      fontsize=8)
        ax.set_xlim(-0.5, n_cols - 0.5)
        ax.tick_params(axis="x", length=0, pad=1)
        ax.set_yticks(range(len(runs)), [r.label for r in runs], fontsize=8)
        ax.set_ylabel(axis, rotation=0, ha="right", va="center", fontsize=9,
                      color=axis_color(axis), fontweight="bold")
        for spine in ax.spines.values():
            spine.set_visible(False)
        _annotate(ax, text, vals, lim)
    axs[0].set_title(f"Generalization gap per axis and policy ({comparison.confidence * 100:g}% "
                     "CI; columns: the axis's levels)", fontsize=10)
    if im is not None:
        fig.colorbar(im, ax=list(axs), shrink=min(1.0, 3.0 / len(groups)), aspect=30,
                     ).set_label("gap: nominal − perturbed success", fontsize=8)
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
    _annotate(ax, text, vals, lim)
    fig.colorbar(im, ax=ax, shrink=0.8).set_label(label, fontsize=8)


def _annotate(ax: Any, text: Sequence[Sequence[str]], vals: np.ndarray, lim: float) -> None:
    """Write each non-empty cell label of a heatmap, white on dark cells (|value| > 0.6 lim).

    Args:
        ax: The matplotlib axes holding the heatmap.
        text: Labels per row and column ("" for none).
        vals: ``(rows, columns) float`` cell values (NaN for empty cells).
        lim: The colour scale's half-range.
    """
    for i, row in enumerate(text):
        for j, s in enumerate(row):
            if s:
                v = vals[i, j]
                dark = math.isfinite(v) and abs(v) > 0.6 * lim
                ax.text(j, i, s, ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
