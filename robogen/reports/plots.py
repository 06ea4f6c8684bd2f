"""Report figures as PNG bytes (matplotlib, Agg, no pyplot global state).

Each function draws one figure from a :class:`~robogen.reports.records.Report`
and returns the encoded PNG, so the same bytes can be saved next to the report
and embedded in ``report.html``. Figures are built on
:class:`matplotlib.figure.Figure` directly: no GUI backend, no global figure
registry, safe to call from worker threads.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.patches import Patch

from robogen._atomic import write_atomic
from robogen.reports.colors import COMBINED_COLOR, NOT_OBSERVED_COLOR, axis_color
from robogen.reports.figures import empty_axes, figure_png, new_figure, rows_figure
from robogen.reports.records import (
    PLOT_FILES,
    STATUS_NOT_APPLIED,
    STATUS_NOT_OBSERVED,
    STATUS_OK,
    AxisGap,
    Report,
)

_NOMINAL_COLOR = "#aaaaaa"



def gap_chart_png(report: Report) -> bytes:
    """Horizontal bars of every paired gap with its bootstrap interval.

    Rows follow the difficulty order (hardest on top), then severity; each axis
    has its colour (:func:`~robogen.reports.colors.axis_color`, the same in every
    report); the combined conditions come last in dark grey. Visual axes a
    state-only policy does not observe are light grey and hatched; axes that were
    not applied get a text marker instead of a bar (so no 0.00 bar is drawn for them).

    Args:
        report: The report.

    Returns:
        PNG image bytes.
    """
    rows: list[AxisGap] = [*report.gaps, *report.combined_gaps]
    fig, ax = rows_figure(len(rows), 0.32)
    if not rows:
        empty_axes(ax, "no perturbed conditions")
        return figure_png(fig)
    ys = np.arange(len(rows))
    used: dict[str, str] = {}
    for y, g in zip(ys, rows, strict=True):
        if not math.isfinite(g.gap):
            ax.text(0.0, y, f"  {g.status}", va="center", ha="left", fontsize=8, color="#666666")
            continue
        color, kind, hatch = axis_color(g.axis), "", None
        if g.status == STATUS_NOT_OBSERVED:
            color, kind, hatch = NOT_OBSERVED_COLOR, STATUS_NOT_OBSERVED, "//"
        elif len(g.axes) > 1:
            color, kind = COMBINED_COLOR, "several axes combined"
        if kind:
            used[kind] = color
        ax.barh(y, g.gap, color=color, height=0.7, hatch=hatch, edgecolor="white")
        ax.errorbar(
            g.gap,
            y,
            xerr=[[g.gap - g.ci_low], [g.ci_high - g.gap]],
            fmt="none",
            ecolor="black",
            capsize=3,
            linewidth=1,
        )
    ax.set_yticks(ys, [_row_label(g) for g in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlim(
        min(-0.1, _finite_min([g.ci_low for g in rows])) - 0.05,
        max(0.1, _finite_max([g.ci_high for g in rows])) + 0.05,
    )
    ax.set_xlabel(f"generalization gap: nominal − perturbed success ({_pct(report)} CI)")
    ax.set_title("Success lost per axis (paired, same episodes)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if used:
        handles = [Patch(facecolor=c, label=k, edgecolor="white",
                         hatch="//" if k == STATUS_NOT_OBSERVED else None)
                   for k, c in used.items()]
        ax.legend(
            handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False
        )
    return figure_png(fig)


def severity_chart_png(report: Report) -> bytes:
    """Success rate against severity per axis, with Wilson interval bands.

    Each curve starts at the nominal condition (severity 0) and has its axis's
    colour (:func:`~robogen.reports.colors.axis_color`, the same in every report);
    a pair of axes is dotted in the first axis's colour with square markers
    filled in the second's, without a band. Axes that were not applied are drawn dashed. Breaking
    points of a sweep are diamonds at (severity, level x nominal success) with their
    interval as a horizontal bar.

    Args:
        report: The report.

    Returns:
        PNG image bytes.
    """
    fig = new_figure(9.0, 4.2)
    ax = fig.add_subplot()
    curves = report.severity_curves
    if not curves:
        empty_axes(ax, "no severity levels")
        return figure_png(fig)
    for c in curves:
        x = np.asarray(c.severities, dtype=float)
        y = np.asarray(c.success_rates, dtype=float)
        names = c.axis.split("+")
        color = axis_color(names[0]) if len(names) == 2 else axis_color(c.axis)
        face = axis_color(names[1]) if len(names) == 2 else color
        style = "--" if c.status == STATUS_NOT_APPLIED else (":" if len(names) > 1 else "-")
        label = c.axis if c.status == STATUS_OK else f"{c.axis} ({c.status})"
        ax.plot(x, y, style, marker="s" if len(names) > 1 else "o", color=color,
                markerfacecolor=face, label=label, linewidth=1.5, markersize=4)
        if len(names) == 1:  # pairs: the line only, or the bands bury each other
            ax.fill_between(x, c.ci_lows, c.ci_highs, color=color, alpha=0.12, linewidth=0)
        for bp in report.breaking_points:
            if bp.axis != c.axis or not bp.reached:
                continue
            high = bp.ci_high if math.isfinite(bp.ci_high) else 1.03
            ax.errorbar(bp.severity, bp.target_rate,
                        xerr=[[bp.severity - bp.ci_low], [high - bp.severity]], fmt="D",
                        color=color, markersize=6, capsize=3, markeredgecolor="black")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("severity (0 = nominal, 1 = widest shift)")
    ax.set_ylabel("success rate")
    ax.set_title(f"Success against severity ({_pct(report)} Wilson bands)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return figure_png(fig)


def condition_chart_png(report: Report) -> bytes:
    """Success rate per condition with its Wilson interval.

    Args:
        report: The report.

    Returns:
        PNG image bytes.
    """
    conds = [c for c in report.conditions if c.n > 0]
    fig, ax = rows_figure(len(conds), 0.28)
    if not conds:
        empty_axes(ax, "no episodes recorded")
        return figure_png(fig)
    ys = np.arange(len(conds))
    rates = np.array([c.success_rate for c in conds])
    lows = np.array([c.ci_low for c in conds])
    highs = np.array([c.ci_high for c in conds])
    colors = [_NOMINAL_COLOR if not c.axes else
              axis_color(c.axes[0]) if len(c.axes) == 1 else COMBINED_COLOR for c in conds]
    ax.barh(ys, rates, color=colors, height=0.7)
    ax.errorbar(
        rates,
        ys,
        xerr=[rates - lows, highs - rates],
        fmt="none",
        ecolor="black",
        capsize=3,
        linewidth=1,
    )
    ax.set_yticks(ys, [f"{c.condition} (n={c.n})" for c in conds], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel(f"success rate ({_pct(report)} Wilson CI)")
    ax.set_title("Success per condition", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return figure_png(fig)


def all_plots_png(report: Report) -> dict[str, bytes]:
    """Every report figure, keyed like :data:`PLOT_FILES` (``interactions`` only with pairs)."""
    from robogen.reports.heatmaps import interaction_heatmap_png

    out = {
        "gaps": gap_chart_png(report),
        "severity": severity_chart_png(report),
        "conditions": condition_chart_png(report),
    }
    heat = interaction_heatmap_png(report)
    if heat is not None:
        out["interactions"] = heat
    return out


def save_plots(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write every figure as PNG into ``out_dir`` (created if missing), atomically.

    Returns:
        Plot key -> written path (names from :data:`PLOT_FILES`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {
        key: write_atomic(out_dir / PLOT_FILES[key], data)
        for key, data in all_plots_png(report).items()
    }


def _row_label(g: AxisGap) -> str:
    level = f"{g.severity:g}" if g.split == "all" else g.split
    return f"{g.axis} @{level}"


def _pct(report: Report) -> str:
    return f"{report.confidence * 100:g}%"


def _finite_min(xs: list[float]) -> float:
    f = [x for x in xs if math.isfinite(x)]
    return min(f) if f else 0.0


def _finite_max(xs: list[float]) -> float:
    f = [x for x in xs if math.isfinite(x)]
    return max(f) if f else 0.0
