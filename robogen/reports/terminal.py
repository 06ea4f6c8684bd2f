"""The report as the terminal shows it at the end of ``robogen eval`` / ``robogen report``.

A compact rich table, hardest axis first (the order of ``report.gaps``): one
row per perturbed condition with its paired gap and interval, the pairs it
rests on and its status; the multi-axis conditions (``combined``, pairs)
follow in a section of their own, largest gap first. It fits 80 columns, and
prints the same to a pipe or CI log as to a terminal (rich drops only the
colours). ``report.md`` stays the full report (it is a PR comment, not
terminal output).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from robogen.reports.records import STATUS_NOT_OBSERVED, STATUS_OK, AxisGap, Report

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

MAX_MULTI_ROWS = 8
"""Most multi-axis conditions (combined, pairs) listed; the rest are counted in a note."""
SHORT_STATUS = {STATUS_OK: "", STATUS_NOT_OBSERVED: "not observed"}
"""Terminal spelling of a gap status (any other status is shown as the report writes it)."""
NA = "n/a"


def _gap_text(g: AxisGap) -> str:
    if not math.isfinite(g.gap):
        return NA
    return f"{g.gap:+.2f} [{g.ci_low:+.2f}, {g.ci_high:+.2f}]"


def _multi_rows(report: Report) -> tuple[list[AxisGap], int]:
    """Multi-axis gaps to list, largest first (no gap last), and how many are left out."""
    gaps = sorted(report.combined_gaps,
                  key=lambda g: (not math.isfinite(g.gap), -g.gap if math.isfinite(g.gap) else 0,
                                 g.condition))
    return gaps[:MAX_MULTI_ROWS], max(0, len(gaps) - MAX_MULTI_ROWS)


def summary_table(report: Report) -> Table:
    """The gaps of ``report`` as a rich table: hardest axis first, then multi-axis conditions.

    Columns: ``condition``, ``gap [CI]`` (nominal minus perturbed success on the
    paired episodes, with its interval), ``n`` (pairs) and ``status`` (empty for ok).
    """
    from rich import box
    from rich.table import Table

    ci = f"{report.confidence * 100:g}% CI"
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("condition", overflow="fold")
    t.add_column(f"gap [{ci}]", no_wrap=True, justify="right")
    t.add_column("n", no_wrap=True, justify="right")
    t.add_column("status", overflow="fold")

    def row(g: AxisGap, end_section: bool = False) -> None:
        t.add_row(g.condition, _gap_text(g), str(g.n_pairs), SHORT_STATUS.get(g.status, g.status),
                  end_section=end_section)

    for k, g in enumerate(report.gaps):
        row(g, end_section=k == len(report.gaps) - 1)
    multis, _ = _multi_rows(report)
    for g in multis:
        row(g)
    return t


def summary_lines(report: Report) -> list[str]:
    """Plain lines printed around :func:`summary_table`: nominal success, order, notes."""
    out = []
    try:
        nom = report.condition("nominal")
    except KeyError:
        nom = None
    if nom is not None and nom.n:
        out.append(f"nominal success {nom.success_rate:.2f} [{nom.ci_low:.2f}, {nom.ci_high:.2f}]"
                   f" over {nom.n} episodes · policy observes {report.policy_obs_mode}")
    if report.difficulty_order:
        out.append(f"hardest first: {' > '.join(report.difficulty_order)}")
    return out


def summary_notes(report: Report) -> list[str]:
    """Lines after the table: left-out rows, shortened statuses, breaking points."""
    from robogen.reports.writers import breaking_text

    out = ["gap = nominal - perturbed success on the same episodes (paired)"]
    _, more = _multi_rows(report)
    if more:
        out.append(f"{more} more multi-axis conditions in report.md")
    if any(g.status == STATUS_NOT_OBSERVED for g in (*report.gaps, *report.combined_gaps)):
        out.append(f"not observed: a visual axis the policy ({report.policy_obs_mode}) cannot "
                   "see; a gap means it also changed the state or dynamics")
    from robogen.reports.sequential_writers import terminal_lines

    out += terminal_lines(report)
    for bp in report.breaking_points:
        out.append(f"breaking point of {bp.axis} (success at {bp.level:g} x nominal): "
                   f"{breaking_text(bp)}")
    return out


def print_summary(report: Report, console: Console | Any) -> None:
    """Print :func:`summary_lines`, :func:`summary_table` and :func:`summary_notes`."""
    for line in summary_lines(report):
        console.print(line, markup=False, highlight=False)
    if report.gaps or report.combined_gaps:
        console.print(summary_table(report))
    for line in summary_notes(report):
        console.print(line, markup=False, highlight=False)
