"""A :class:`~robogen.reports.records.Report` as ``report.md``: compact GitHub markdown that
fits a pull-request comment, and the formatting both report pages share (the header line of
run facts, numbers, rates, breaking points, notes).

:mod:`robogen.reports.writers` (which writes the files) re-exports every public name here.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from urllib.parse import quote

from robogen.reports.html_parts import (
    NA,
    SUCCESS_METHOD,
    ci_header,
    common_method,
    gap_ci,
    level_label,
    method_label,
    with_method,
)
from robogen.reports.provenance import policy_load_lines, run_facts
from robogen.reports.records import (
    STATUS_OK,
    AxisGap,
    ConditionStats,
    InteractionStats,
    Report,
)
from robogen.reports.safety import SAFETY_NOTE, safety_table
from robogen.reports.sequential_writers import header_fact, md_section
from robogen.reports.video import VideoInfo
from robogen.stats.sweep import BreakingPoint

NO_ORDER = "no order: every axis the policy observes left success unchanged (all gaps 0)"


def _all_gaps_zero(report: Report) -> bool:
    ok = [g for g in report.gaps if g.status == STATUS_OK]
    return bool(ok) and all(g.gap == 0 for g in ok)


def render_markdown(report: Report, *, videos: Mapping[str, str] | None = None,
                    video_info: Mapping[str, VideoInfo] | None = None) -> str:
    """The report as compact GitHub markdown (fits a pull-request comment).

    Args:
        report: The report.
        videos: Label -> video path relative to the run dir.
        video_info: Label -> how that video was composed (render size, scale, camera).
    """
    m = report.manifest
    ci = f"{report.confidence * 100:g}% CI"
    out = [f"### robogen report: `{m.env_id}` · `{m.policy}`", "", _header_line(report), ""]
    if report.difficulty_order:
        out += [f"**Difficulty (hardest first):** {' > '.join(report.difficulty_order)}", ""]
    elif _all_gaps_zero(report):
        out += [f"**Difficulty:** {NO_ORDER}", ""]
    gaps = [*report.gaps, *report.combined_gaps]
    if gaps:
        common = common_method([g.ci_method for g in gaps])
        out += [
            f"| axis | level | {ci_header('gap', ci, method_label(common))} | rel. drop "
            "| n10 / n01 | pairs | status |",
            "|---|---|---|---|---|---|---|",
        ]
        out += [_md_gap_row(g, common) for g in gaps]
        out.append("")
    out += md_section(report)
    if report.interactions:
        common = common_method([i.ci_method for i in report.interactions])
        out += [
            "| combination | combined gap | sum of singles "
            f"| {ci_header('interaction', ci, method_label(common))} | n |",
            "|---|---|---|---|---|",
        ]
        out += [_md_interaction_row(i, common) for i in report.interactions]
        out.append("")
    if report.breaking_points:
        out += [
            "| axis | breaking point: success falls to "
            f"| {ci_header('severity', ci, 'bootstrap')} | severities run |",
            "|---|---|---|---|",
        ]
        out += [f"| {' | '.join(r)} |" for r in _breaking_rows(report)]
        out.append("")
    latency = _has_latency(report)
    out += [
        f"| condition | {ci_header('success', ci, SUCCESS_METHOD)} | return (mean ± sd) "
        "| length | n | invalid | failures |"
        + (" server latency [ms] |" if latency else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if latency else ""),
    ]
    out += [_md_condition_row(c) + (f" {_num(c.mean_policy_latency_ms, 1)} |" if latency else "")
            for c in report.conditions]
    if report.safety:
        headers, rows = safety_table(report.safety, report.confidence,
                                     report.manifest.safety_sampling)
        out += ["", f"**Safety** <sub>{_md_escape(SAFETY_NOTE.format(ci=ci))}</sub>", "",
                f"| {' | '.join(headers)} |", "|" + "---|" * len(headers)]
        out += [f"| {' | '.join(_md_escape(x) for x in r)} |" for r in rows]
    notes = _grouped_notes(gaps)
    if notes:
        out += ["", "**Notes**"]
        out += [
            f"- {', '.join(f'`{c}`' for c in conds)}: **{status}**: {_md_escape(note)}"
            for (status, note), conds in notes.items()
        ]
    if report.errors:
        n_err = sum(k for _, _, k in report.errors)
        out += ["", f"**Errors** ({n_err} episodes raised; `policy_error` counts as a failure; "
                "episodes with an invalid cause are left out of every rate)"]
        out += [f"- {k}× `{cause}`: {_md_escape(msg)}" for cause, msg, k in report.errors]
    if report.faults:
        out += ["", f"**Worker faults** ({len(report.faults)}; see faults.jsonl)"]
        out += [f"- `{f.kind}` → {f.action}: unit {f.unit_id}, attempt {f.attempt}, "
                f"{f.worker or '?'}{' on node ' + f.node[:12] if f.node else ''}: "
                f"{_md_escape(f.error)}" for f in report.faults[:20]]
    loaded = policy_load_lines(m)
    if loaded:
        out += ["", "**Policy**"] + [f"- {_md_escape(line)}" for line in loaded]
    if videos:
        info = video_info or {}
        out += ["", "**Videos** (in the run dir; nominal left, perturbed right):"]
        out += [f"- [{_md_escape(k)}]({quote(v)})"
                + (f": {info[k].describe()}" if k in info else "") for k, v in videos.items()]
    out += [
        "",
        "<sub>gap = nominal − perturbed success on the same episodes (paired); "
        "n10 = pairs where only nominal succeeded, n01 = only perturbed; "
        + ("intervals: anytime-valid confidence sequences (see Sequential evaluation)."
           if report.sequential is not None else
           f"{ci} of success rates: Wilson score interval; of gaps and interactions: "
           "percentile bootstrap over paired episodes (Agresti-Min, or an augmented Wald "
           "interval for interactions, when fewer than 10 pairs are discordant; the method of "
           "a row that differs from its column's is named in the row).")
        + "</sub>",
        "",
    ]
    return "\n".join(out)


def _header_line(report: Report, *, html_out: bool = False) -> str:
    """One line of run facts; markdown code spans, or escaped HTML with ``<code>``."""
    if html_out:
        esc = html.escape

        def code(s: str) -> str:
            return f"<code>{html.escape(s)}</code>"
    else:

        def esc(s: str) -> str:
            return s

        def code(s: str) -> str:
            return f"`{s}`"

    m = report.manifest
    parts = [
        header_fact(report) or f"n = {m.n_episodes} episodes/condition",
        f"seed {m.seed}",
        f"max {m.max_steps} steps",
        f"policy observes {code(report.policy_obs_mode)}",
    ]
    if m.success_rule:
        parts.append(f"success: {esc(m.success_rule)}")
    parts += [esc(fact) for fact in run_facts(m)]
    if m.spec_hash:
        parts.append(f"spec {code(m.spec_hash[:12])}")
    versions = ", ".join(f"{k} {v}" for k, v in m.versions.items() if k in ("robogen", "mujoco"))
    if versions:
        parts.append(esc(versions))
    if report.hardware:
        parts.append(esc(report.hardware))
    return " · ".join(parts)


def _md_gap_row(g: AxisGap, common: str) -> str:
    status = g.status if g.status != STATUS_OK else ""
    cell = with_method(gap_ci(g.gap, g.ci_low, g.ci_high), g.ci_method, common)
    return (
        f"| {g.axis} | {level_label(g.severity, g.split)} | {cell} "
        f"| {_percent(g.relative_drop)} | {g.n10} / {g.n01} | {g.n_pairs} | {status} |"
    )


def _md_interaction_row(i: InteractionStats, common: str) -> str:
    cell = with_method(gap_ci(i.interaction, i.ci_low, i.ci_high), i.ci_method, common)
    return (
        f"| {'+'.join(i.axes)} @{level_label(i.severity, i.split)} | {_signed(i.combined_gap)} "
        f"| {_signed(i.sum_single_gaps)} | {cell} | {i.n} |"
    )


def _has_latency(report: Report) -> bool:
    """Whether a policy server was timed (``remote:``): the condition tables get a column."""
    return any(math.isfinite(c.mean_policy_latency_ms) for c in report.conditions)


def _md_condition_row(c: ConditionStats) -> str:
    return (
        f"| {c.condition} | {_rate_ci(c)} | {_num(c.mean_return)} ± {_num(c.std_return)} "
        f"| {_num(c.mean_length, 0)} | {c.n} | {c.n_invalid} | {_causes(c.causes)} |"
    )


def breaking_text(bp: BreakingPoint) -> str:
    """``0.61 [0.55, 0.67]``, ``0.61 [0.55, > 1]`` or ``not reached at severity 1``."""
    if not bp.reached:
        return "not reached at severity 1"
    high = f"{bp.ci_high:.2f}" if math.isfinite(bp.ci_high) else "> 1"
    return f"{bp.severity:.2f} [{bp.ci_low:.2f}, {high}]"


def _breaking_rows(report: Report) -> list[list[str]]:
    return [
        [bp.axis, f"{bp.level:g} × nominal ({bp.target_rate:.2f})", breaking_text(bp),
         str(len(bp.severities) - 1)]
        for bp in report.breaking_points
    ]


def _grouped_notes(gaps: Sequence[AxisGap]) -> dict[tuple[str, str], list[str]]:
    """(status, note) -> conditions sharing it, in first-seen order."""
    out: dict[tuple[str, str], list[str]] = {}
    for g in gaps:
        if g.note:
            out.setdefault((g.status, g.note), []).append(g.condition)
    return out


def _signed(x: float) -> str:
    return f"{x:+.2f}" if math.isfinite(x) else NA


def _num(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else NA


def _percent(x: float) -> str:
    return f"{x * 100:.0f}%" if math.isfinite(x) else NA


def _rate_ci(c: ConditionStats) -> str:
    if c.n == 0:
        return NA
    return f"{c.success_rate:.2f} [{c.ci_low:.2f}, {c.ci_high:.2f}]"


def _causes(causes: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in causes.items()) or "–"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")
