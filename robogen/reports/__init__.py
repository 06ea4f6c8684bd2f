"""The :class:`Report` record, how it is built from stored episodes, and its writers.

Reports consume only ``Sequence[EpisodeResult]`` and the
:class:`~robogen.types.EvalManifest`::

    report = build_report(results, manifest, axis_kinds={"lighting": "visual"})
    paths = write_report(report, run_dir)          # report.json / .md / .html, plots/
    report = load_report(run_dir)

Plots (matplotlib) and videos (imageio) are imported lazily: use
``robogen.reports.plots`` and ``robogen.reports.video`` directly. The estimators live in
:mod:`robogen.stats`; running an evaluation end to end in :mod:`robogen.runs`.
"""

from __future__ import annotations

import warnings
from typing import Any

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
    "InteractionStats",
    "Report",
    "SeverityCurve",
    "build_report",
    "failure_pairs",
    "load_report",
    "render_html",
    "render_markdown",
    "write_report",
]

MOVED: dict[str, str] = {
    "Interaction": "robogen.stats",
    "PairedGap": "robogen.stats",
    "SequentialSummary": "robogen.stats",
    "bootstrap_mean_interval": "robogen.stats",
    "interaction": "robogen.stats",
    "paired_gap": "robogen.stats",
    "sequential_planner": "robogen.stats",
    "wilson_interval": "robogen.stats",
}
"""Names this package exported before they moved: name -> the module that has them now."""

MOVED_MODULES: dict[str, str] = {
    "anytime": "robogen.stats.anytime",
    "paired": "robogen.stats.paired",
    "sequential": "robogen.stats.sequential",
    "stats": "robogen.stats.intervals",
    "stopping": "robogen.stats.stopping",
    "sweep": "robogen.stats.sweep",
    "evaluation": "robogen.runs.evaluation",
    "failure_videos": "robogen.runs.failure_videos",
    "multi": "robogen.runs.multi",
}
"""Submodules that moved out of this package: name -> their module now. ``from
robogen.reports import evaluation`` still resolves (with a warning); ``import
robogen.reports.evaluation`` does not."""

MOVED_NAME = ("robogen.reports.{name} moved to {module}.{name}; import it from there "
              "(robogen.reports re-exports it for one release)")
MOVED_MODULE = ("robogen.reports.{name} moved to {module}; import it from there "
                "(robogen.reports re-exports it for one release)")


def __getattr__(name: str) -> Any:
    """Resolve a name that moved out of this package, with a :class:`DeprecationWarning`.

    Raises:
        AttributeError: If ``name`` is neither here nor in :data:`MOVED` or
            :data:`MOVED_MODULES`.
    """
    import importlib

    if name in MOVED_MODULES:
        module = MOVED_MODULES[name]
        warnings.warn(MOVED_MODULE.format(name=name, module=module), DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module(module)
    module = MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(MOVED_NAME.format(name=name, module=module), DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
