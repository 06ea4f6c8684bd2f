"""Scaling-curve figure as PNG bytes (matplotlib, Agg, no pyplot global state).

One panel per curve: the evaluated points with their Wilson intervals, the
fitted curve ``1 - a (x + n0)^b`` (solid over the measured range, dashed where
it extrapolates) and the bootstrap band around it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from robogen.errors import InvalidSpecError
from robogen.scaling.curves import CurvesFile, FactorCurve, predict

DPI = 100
_COLORS = ("#3366aa", "#aa4433", "#338844", "#aa8833", "#7744aa", "#33998f", "#aa3377",
           "#666666")


def curves_plot_png(
    curves: CurvesFile | Mapping[str, FactorCurve] | Sequence[FactorCurve],
    *,
    x_max: float | None = None,
    confidence: float = 0.95,
    title: str | None = None,
) -> bytes:
    """Success against demonstrations per curve, with fitted curves and bootstrap bands.

    Args:
        curves: A loaded ``curves.json``, or the curves themselves.
        x_max: Right end of the x axis [demonstrations] (default: 1.5x the largest measured
            point); the fitted curve is dashed beyond the measured range.
        confidence: Level of the bootstrap band.
        title: Figure title (default: the task id for a :class:`CurvesFile`).

    Returns:
        PNG image bytes.

    Raises:
        InvalidSpecError: If there are no curves.
    """
    if isinstance(curves, CurvesFile):
        title = title if title is not None else f"Factored scaling curves: {curves.task}"
        items = list(curves.curves.values())
    elif isinstance(curves, Mapping):
        items = list(curves.values())
    else:
        items = list(curves)
    if not items:
        raise InvalidSpecError("no curves to plot")
    ncols = min(4, len(items))
    nrows = math.ceil(len(items) / ncols)
    fig = Figure(figsize=(3.2 * ncols, 2.7 * nrows + (0.4 if title else 0.0)), dpi=DPI,
                 layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    measured_max = max(max((p.x for p in c.points), default=0) for c in items)
    right = float(x_max) if x_max is not None else max(1.5 * measured_max, 1.0)
    for i, curve in enumerate(items):
        ax = axes[i // ncols][i % ncols]
        color = _COLORS[i % len(_COLORS)]
        _panel(ax, curve, right, confidence, color)
    for j in range(len(items), nrows * ncols):
        axes[j // ncols][j % ncols].set_axis_off()
    if title:
        fig.suptitle(title, fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _panel(ax, curve: FactorCurve, right: float, confidence: float,  # noqa: ANN001 - Axes
           color: str) -> None:
    fit = curve.fit
    last = max((p.x for p in curve.points), default=0)
    xs = np.linspace(0.0, right, 200)
    mean, low, high = predict(fit, xs, confidence)
    if fit.samples is not None and len(fit.samples):
        ax.fill_between(xs, low, high, color=color, alpha=0.18, linewidth=0,
                        label=f"{confidence * 100:g}% band")
    inside = xs <= last
    ax.plot(xs[inside], mean[inside], color=color, linewidth=1.6, label="fit")
    ax.plot(xs[xs >= last], mean[xs >= last], color=color, linewidth=1.2, linestyle="--",
            label="extrapolation")
    px = np.array([p.x for p in curve.points], float)
    py = np.array([p.rate for p in curve.points])
    err = np.array([[p.rate - p.ci_low for p in curve.points],
                    [p.ci_high - p.rate for p in curve.points]])
    ax.errorbar(px, py, yerr=err, fmt="o", color="black", markersize=3.5, capsize=2,
                linewidth=0.8, label="measured (Wilson)")
    ax.set_title(f"{curve.name}\na={fit.a:.3g}, b={fit.b:.3g}, n0={fit.n0:.3g}", fontsize=9)
    ax.set_xlim(0.0, right)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("added demonstrations", fontsize=8)
    ax.set_ylabel("success rate", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="lower right")
