"""The sequential part of report.md, report.html and the terminal summary.

For an ``--episodes auto`` run each writer shows, per condition, the episodes used and why
it stopped, the rule, and the interval method with its citation
(:class:`~robogen.stats.sequential.SequentialSummary`).
"""

from __future__ import annotations

import html
import math

from robogen.reports.html_parts import html_table
from robogen.reports.records import Report
from robogen.reports.sequential_build import FIXED_N_LABEL
from robogen.stats.sequential import REASON_TEXT, SequentialSummary


def rule_text(s: SequentialSummary) -> str:
    """``target ±0.05, cap 1000, batches of 8[, threshold 0.1]``."""
    r = s.rule
    out = f"target half-width {r.target_halfwidth:g}, cap {r.max_episodes}, batches of " \
          f"{r.batch_size}"
    if r.gap_threshold is not None:
        out += f", gap threshold {r.gap_threshold:+g}"
    return out


def method_text(s: SequentialSummary) -> str:
    """The interval method and its source, one sentence."""
    return (f"gap and success intervals are anytime-valid {s.rule.confidence:.0%} confidence "
            f"sequences ({s.rule.method}: {s.citation}), valid at the data-dependent stop")


def _rows(s: SequentialSummary) -> list[list[str]]:
    rows = []
    for st in s.stops:
        ci = (f"{st.estimate:+.2f} [{st.ci_low:+.2f}, {st.ci_high:+.2f}] ±{st.halfwidth:.3f}"
              if math.isfinite(st.ci_low) and st.n_pairs else "–")
        rows.append([st.condition, str(st.episodes), str(st.n_pairs),
                     REASON_TEXT.get(st.reason, st.reason), ci])
    return rows


HEADERS = ["condition", "episodes used", "pairs", "stopped because", "gap [CS] ± half-width"]


def md_section(report: Report) -> list[str]:
    """Markdown lines of the sequential section (empty for a fixed-n run)."""
    s = report.sequential
    if s is None:
        return []
    out = [f"**Sequential evaluation** (`--episodes auto`: {rule_text(s)})", "",
           "| " + " | ".join(HEADERS) + " |", "|---|---|---|---|---|"]
    out += ["| " + " | ".join(r) + " |" for r in _rows(s)]
    out += ["", f"<sub>{method_text(s)}. Interaction intervals: {FIXED_N_LABEL}.</sub>", ""]
    return out


def html_section(report: Report) -> list[str]:
    """HTML parts of the sequential section (empty for a fixed-n run)."""
    s = report.sequential
    if s is None:
        return []
    e = html.escape
    return [f"<h2>Sequential evaluation</h2><p class=\"note\"><code>--episodes auto</code>: "
            f"{e(rule_text(s))}. {e(method_text(s))}. Interaction intervals: "
            f"{e(FIXED_N_LABEL)}.</p>", html_table(HEADERS, _rows(s))]


def header_fact(report: Report) -> str | None:
    """``episodes auto (...)`` for the header line of an auto run, else None."""
    s = report.sequential
    if s is None:
        return None
    used = "/".join(str(st.episodes) for st in s.stops)
    return f"episodes auto ({rule_text(s)}; used {used} per condition)"


def terminal_lines(report: Report) -> list[str]:
    """Plain lines after the terminal table: each condition's stop, and the method."""
    s = report.sequential
    if s is None:
        return []
    stops = ", ".join(f"{st.condition} {st.episodes} ({st.reason})" for st in s.stops)
    return [f"sequential ({rule_text(s)}): episodes used: {stops}",
            f"intervals: anytime-valid betting confidence sequences ({s.citation})"]
