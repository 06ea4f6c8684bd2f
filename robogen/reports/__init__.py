"""Statistics, the :class:`Report` record, report writers, plots and videos.

Reports consume only ``Sequence[EpisodeResult]`` and the
:class:`~robogen.types.EvalManifest`::

    report = build_report(results, manifest, axis_kinds={"lighting": "visual"})
    paths = write_report(report, run_dir)          # report.json / .md / .html, plots/
    report = load_report(run_dir)

Plots (matplotlib) and videos (imageio) are imported lazily: use
``robogen.reports.plots`` and ``robogen.reports.video`` directly.
"""

from __future__ import annotations

from robogen.reports.build import build_report, failure_pairs
from robogen.reports.records import (
    INVALID_SHARE_LIMIT,
    REPORT_SCHEMA_VERSION,
    STATUS_INVALID,
    STATUS_NO_DATA,
    STATUS_NOT_APPLIED,
    STATUS_NOT_OBSERVED,
    STATUS_OK,
    STATUSES,
    AxisGap,
    ConditionStats,
    FailurePair,
    InteractionStats,
    Report,
    SeverityCurve,
)
from robogen.reports.sequential import SequentialSummary, sequential_planner
from robogen.reports.stats import (
    Interaction,
    PairedGap,
    bootstrap_mean_interval,
    interaction,
    paired_gap,
    wilson_interval,
)
from robogen.reports.writers import load_report, render_html, render_markdown, write_report

__all__ = [
    "INVALID_SHARE_LIMIT",
    "REPORT_SCHEMA_VERSION",
    "STATUSES",
    "STATUS_NOT_APPLIED",
    "STATUS_NOT_OBSERVED",
    "STATUS_INVALID",
    "STATUS_NO_DATA",
    "STATUS_OK",
    "AxisGap",
    "ConditionStats",
    "FailurePair",
    "Interaction",
    "InteractionStats",
    "PairedGap",
    "Report",
    "SequentialSummary",
    "SeverityCurve",
    "bootstrap_mean_interval",
    "build_report",
    "failure_pairs",
    "interaction",
    "load_report",
    "paired_gap",
    "render_html",
    "render_markdown",
    "sequential_planner",
    "wilson_interval",
    "write_report",
]
