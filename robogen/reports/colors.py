"""One colour per axis name, the same in every figure of every report.

Built-in axes have fixed, distinct colours (:data:`AXIS_COLORS`, a qualitative palette:
matplotlib's ``tab10`` plus two darker tones); any other axis (a plug-in's) gets a colour
from a hash of its name into :data:`PALETTE`, so it too keeps its colour from run to run and
from report to report. Conditions over several axes share :data:`COMBINED_COLOR`.
"""

from __future__ import annotations

import zlib

PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#843c39",
)
"""Qualitative palette [hex RGB]: ``tab10`` without its grey, plus three dark tones."""

AXIS_COLORS: dict[str, str] = {
    "lighting": PALETTE[1],
    "texture": PALETTE[0],
    "camera": PALETTE[2],
    "distractors": PALETTE[3],
    "embodiment": PALETTE[4],
    "physics": PALETTE[5],
    "background": PALETTE[6],
    "object_pose": PALETTE[7],
    "object_shape": PALETTE[8],
    "sensor": PALETTE[9],
    "action": PALETTE[10],
    "language": PALETTE[11],
}
"""Colour of each built-in axis [hex RGB]; every one distinct."""

COMBINED_COLOR = "#555555"
"""Colour of a condition that perturbs several axes at once."""
NOT_OBSERVED_COLOR = "#bbbbbb"
"""Colour of an axis the policy does not observe (its gap says nothing about the policy)."""


def axis_color(name: str) -> str:
    """The colour of axis ``name`` (hex RGB), the same in every report.

    Args:
        name: Axis name (``texture``), or a condition's axis label (``lighting+texture``,
            ``combined``): several axes get :data:`COMBINED_COLOR`.

    Returns:
        The built-in axis's colour, else a colour of :data:`PALETTE` chosen by a CRC-32 hash
        of the name (stable across processes, unlike Python's ``hash``).
    """
    if name in AXIS_COLORS:
        return AXIS_COLORS[name]
    if "+" in name or name == "combined":
        return COMBINED_COLOR
    return PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]
