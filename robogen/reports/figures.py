"""Matplotlib figures without pyplot: a headless canvas and reproducible PNG bytes.

Shared by the run report's charts (:mod:`robogen.reports.plots`) and the
heatmaps (:mod:`robogen.reports.heatmaps`). PNGs carry no ``Software``
metadata, so the same figure gives the same bytes.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100
"""Resolution of every report figure [dots per inch]."""


def new_figure(width_in: float, height_in: float) -> Figure:
    """A ``width_in`` x ``height_in`` [in] figure at :data:`DPI` with a constrained layout."""
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def rows_figure(n_rows: int, row_height_in: float, width_in: float = 7.0) -> tuple[Figure, Any]:
    """A figure with one ``Axes`` for ``n_rows`` horizontal bars (room for one if 0).

    Args:
        n_rows: Number of bars.
        row_height_in: Height of one bar's row [in]; the figure is 1.2 in plus the rows.
        width_in: Figure width [in].

    Returns:
        ``(figure, axes)``.
    """
    fig = new_figure(width_in, 1.2 + row_height_in * max(n_rows, 1))
    return fig, fig.add_subplot()


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of ``fig`` at :data:`DPI` (no ``Software`` metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def empty_axes(ax: Any, text: str) -> None:
    """Show ``text`` centred on ``ax`` (a matplotlib ``Axes``) with the axes hidden."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
