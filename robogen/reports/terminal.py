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
from collections.abc import Mapping
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


def _interval_text(value: float | None, low: float, high: float) -> str:
    """``+0.96 [+0.90, +1.00]``; :data:`NA` for a missing or non-finite value."""
    text = _value_text(value)
    return text if text == NA else f"{text} [{low:+.2f}, {high:+.2f}]"


def _value_text(value: float | None) -> str:
    """``+0.96``; :data:`NA` for a missing or non-finite value."""
    return NA if value is None or not math.isfinite(value) else f"{value:+.2f}"


def _gap_text(g: AxisGap) -> str:
    return _interval_text(g.gap, g.ci_low, g.ci_high)


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
        out.append("not observed: the policy cannot perceive that axis (a visual axis for a "
                   f"{report.policy_obs_mode!r} policy, a sensor axis for a privileged "
                   "expert, a language axis for a policy without a prompt); see the "
                   "report's notes")
    worse = [s for s in report.safety if s.diff_low > 0]
    if worse:
        from robogen.reports.safety import format_value

        worse.sort(key=lambda s: s.diff_low / max(abs(s.mean - s.diff), 1e-9), reverse=True)
        shown = [f"{s.condition} {s.metric} +{format_value(s.metric, s.diff)}" for s in worse[:4]]
        out.append(f"less safe than nominal (paired interval above 0): {', '.join(shown)}"
                   + (f" and {len(worse) - 4} more (report.md)" if len(worse) > 4 else ""))
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


MAX_CI_RUNS = 3
"""Most runs whose gaps the comparison table shows with intervals (more: gaps alone, to fit
80 columns; ``compare.md`` has them all)."""


def _letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def comparison_lines(data: Mapping[str, Any]) -> list[str]:
    """Lines printed before :func:`comparison_table`: each run's letter, label and nominal
    success (``data``: ``compare.json`` as a dict)."""
    out = []
    for i, r in enumerate(data["runs"]):
        out.append(f"{_letter(i)} = {r['label']}: nominal success {r['nominal_rate']:.2f} "
                   f"[{r['nominal_ci_low']:.2f}, {r['nominal_ci_high']:.2f}]")
    return out


def comparison_table(data: Mapping[str, Any]) -> Table:
    """The runs' gaps side by side, hardest condition first (``compare.json``'s order).

    Columns: ``condition``; one ``gap`` per run (with its interval for up to
    :data:`MAX_CI_RUNS` runs); for two runs the paired difference ``Δgap A-B`` with its
    interval, starred when the Holm-adjusted sign-flip test has p < 0.05.
    """
    from rich import box
    from rich.table import Table

    runs = data["runs"]
    with_ci = len(runs) <= MAX_CI_RUNS
    gaps = [{g["condition"]: g for g in r["gaps"]} for r in runs]
    diffs = {d["condition"]: d for d in data["differences"]
             if len(runs) == 2 and (d["run_a"], d["run_b"]) == (runs[0]["label"],
                                                                 runs[1]["label"])}
    ci = f" [{data['confidence'] * 100:g}% CI]" if with_ci else ""
    # one space between columns: two runs with intervals and their difference fit 80 columns
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1),
              collapse_padding=True)
    t.add_column("condition", overflow="fold")
    for i in range(len(runs)):
        t.add_column(f"{_letter(i)} gap{ci}", no_wrap=True, justify="right")
    if diffs:
        t.add_column(f"Δgap A-B{ci}", no_wrap=True, justify="right")
    for cond in data["conditions"]:
        cells = []
        for by_cond in gaps:
            g = by_cond.get(cond) or {"gap": None, "ci_low": 0.0, "ci_high": 0.0}
            cells.append(_interval_text(g["gap"], g["ci_low"], g["ci_high"]) if with_ci
                         else _value_text(g["gap"]))
        if diffs:
            d = diffs.get(cond) or {"difference": None, "ci_low": 0.0, "ci_high": 0.0,
                                    "p_holm": None}
            text = _interval_text(d["difference"], d["ci_low"], d["ci_high"])
            decided = text != NA and d["p_holm"] is not None and d["p_holm"] < 0.05
            cells.append(text + ("*" if decided else " "))
        t.add_row(cond, *cells)
    return t


def ranking_table(data: Mapping[str, Any]) -> Table:
    """One row per axis (and ``overall``): the runs most robust first, ``<`` where the
    Holm-adjusted test separates neighbours, ``≈`` where it does not."""
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("axis")
    t.add_column("order", overflow="fold")
    for r in data["rankings"]:
        rel = [" < " if s else " ≈ " for s in r["separated"]]
        t.add_row(r["axis"], r["order"][0] + "".join(
            f"{x}{o}" for x, o in zip(rel, r["order"][1:], strict=True)))
    return t


def print_comparison(data: Mapping[str, Any], console: Console | Any) -> None:
    """Print the comparison of ``compare.json`` (as a dict): runs, gaps side by side, notes,
    then the ranking per axis."""
    for line in comparison_lines(data):
        console.print(line, markup=False, highlight=False)
    if data["conditions"]:
        console.print(comparison_table(data))
    notes = ["gap = nominal - perturbed success on the same episodes (paired)"]
    if len(data["runs"]) == 2:
        notes.append("Δgap A-B > 0: B loses less; *: Holm-adjusted sign-flip p < 0.05")
    elif len(data["runs"]) > MAX_CI_RUNS:
        notes.append("intervals and paired differences in compare.md")
    for line in notes:
        console.print(line, markup=False, highlight=False)
    console.print()
    console.print("ranking, most robust first (<: separated by the Holm test, ≈: not)",
                  markup=False, highlight=False)
    console.print(ranking_table(data))
