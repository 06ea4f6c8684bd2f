"""A :class:`~robogen.reports.records.Report` as ``report.html``: one self-contained page
(inline CSS, plots embedded as base64 PNG, no external assets) that opens offline; videos are
linked by paths relative to the run dir.

:mod:`robogen.reports.writers` (which writes the files) re-exports every public name here.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping
from urllib.parse import quote

from robogen.reports.html_parts import (
    CSS,
    SUCCESS_METHOD,
    ci_header,
    common_method,
    folded_table,
    gap_ci,
    html_table,
    level_label,
    method_label,
    with_method,
)
from robogen.reports.provenance import policy_load_lines
from robogen.reports.records import STATUS_OK, Report
from robogen.reports.report_markdown import (
    NO_ORDER,
    _all_gaps_zero,
    _breaking_rows,
    _causes,
    _grouped_notes,
    _has_latency,
    _header_line,
    _num,
    _percent,
    _rate_ci,
    _signed,
)
from robogen.reports.safety import SAFETY_NOTE, safety_table, significant_change
from robogen.reports.sequential_writers import html_section
from robogen.reports.video import VideoInfo
from robogen.types import to_dict


def render_html(
    report: Report,
    *,
    images: Mapping[str, bytes] | None = None,
    videos: Mapping[str, str] | None = None,
    video_info: Mapping[str, VideoInfo] | None = None,
    posters: Mapping[str, str] | None = None,
) -> str:
    """The report as one self-contained HTML page.

    Args:
        report: The report.
        images: Plot key -> PNG bytes, embedded as ``data:`` URIs.
        videos: Label -> path relative to the run dir (linked, never embedded).
        video_info: Label -> how that video was composed (render size, scale, camera).
        posters: Label -> ``data:`` URI of the video's poster frame (shown before it plays).

    Returns:
        The HTML text; it references no external resource.
    """
    m = report.manifest
    e = html.escape
    ci = f"{report.confidence * 100:g}% CI"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>robogen report: {e(m.env_id)}</title><style>{CSS}</style></head><body>",
        f"<h1>robogen report: {e(m.env_id)}</h1>",
        f'<p class="meta">policy <code>{e(m.policy)}</code> · {_header_line(report, html_out=True)}'
        f" · built {e(report.created)}</p>",
    ]
    if report.difficulty_order:
        parts.append(
            f"<p><b>Difficulty (hardest first):</b> {e(' > '.join(report.difficulty_order))}</p>"
        )
    elif _all_gaps_zero(report):
        parts.append(f"<p><b>Difficulty:</b> {e(NO_ORDER)}</p>")
    for key, title in (
        ("gaps", "Generalization gaps"),
        ("severity", "Success against severity"),
        ("interactions", "Pair interactions (axes x axes)"),
        ("conditions", "Success per condition"),
    ):
        if images and key in images:
            b64 = base64.b64encode(images[key]).decode("ascii")
            parts.append(f'<img alt="{e(title)}" src="data:image/png;base64,{b64}">')
    gaps = [*report.gaps, *report.combined_gaps]
    if gaps:
        parts.append("<h2>Gaps by axis</h2>")
        common = common_method([g.ci_method for g in gaps])
        rows = [
            [
                g.axis,
                level_label(g.severity, g.split),
                with_method(gap_ci(g.gap, g.ci_low, g.ci_high), g.ci_method, common),
                _percent(g.relative_drop),
                f"{g.n10} / {g.n01}",
                str(g.n_pairs),
                "" if g.status == STATUS_OK else g.status,
            ]
            for g in gaps
        ]
        classes = [
            "" if g.status == STATUS_OK else ("na" if not math.isfinite(g.gap) else "flag")
            for g in gaps
        ]
        parts.append(
            html_table(
                ["axis", "level", ci_header("gap", ci, method_label(common)), "rel. drop",
                 "n10 / n01", "pairs", "status"],
                rows,
                classes,
            )
        )
    if report.interactions:
        parts.append("<h2>Interactions</h2>")
        common = common_method([i.ci_method for i in report.interactions])
        rows = [
            [
                f"{'+'.join(i.axes)} @{level_label(i.severity, i.split)}",
                _signed(i.combined_gap),
                _signed(i.sum_single_gaps),
                with_method(gap_ci(i.interaction, i.ci_low, i.ci_high), i.ci_method, common),
                str(i.n),
            ]
            for i in report.interactions
        ]
        parts.append(
            html_table(
                ["combination", "combined gap", "sum of singles",
                 ci_header("interaction", ci, method_label(common)), "n"], rows
            )
        )
        parts.append(
            '<p class="note">interaction = combined gap − sum of single-axis gaps; '
            "&gt; 0: the axes compound, &lt; 0: they overlap or saturate.</p>"
        )
    if report.breaking_points:
        parts.append("<h2>Breaking points</h2>")
        parts.append(html_table(
            ["axis", "success falls to", ci_header("severity", ci, "bootstrap"),
             "severities run"],
            _breaking_rows(report)))
        parts.append(
            '<p class="note">severity sweep: a coarse grid, then bisection around each crossing; '
            "the success curve is made non-increasing (isotonic regression) and the crossing "
            "interpolated; interval: percentile bootstrap over episodes.</p>"
        )
    parts += html_section(report)
    parts.append("<h2>Conditions</h2>")
    rows = [
        [
            c.condition,
            _rate_ci(c),
            f"{_num(c.mean_return)} ± {_num(c.std_return)}",
            _num(c.mean_length, 0),
            str(c.n),
            str(c.n_invalid),
            _causes(c.causes),
            *([_num(c.mean_policy_latency_ms, 1)] if _has_latency(report) else []),
        ]
        for c in report.conditions
    ]
    parts.append(
        html_table(
            ["condition", ci_header("success", ci, SUCCESS_METHOD), "return (mean ± sd)",
             "length", "n", "invalid",
             "failures", *(["server latency [ms]"] if _has_latency(report) else [])], rows
        )
    )
    if report.safety:
        headers, rows = safety_table(report.safety, report.confidence,
                                     report.manifest.safety_sampling)
        parts.append(f"<h2>Safety</h2><p class=\"note\">{e(SAFETY_NOTE.format(ci=ci))}</p>")
        parts.append(folded_table(headers, rows, [significant_change(x) for x in report.safety],
                                  "without a significant change from nominal"))
    notes = _grouped_notes(gaps)
    if notes:
        parts.append("<h2>Notes</h2><ul>")
        parts += [
            f"<li>{', '.join(f'<code>{e(c)}</code>' for c in conds)}: <b>{e(status)}</b>: "
            f"{e(note)}</li>"
            for (status, note), conds in notes.items()
        ]
        parts.append("</ul>")
    if report.faults:
        parts.append("<h2>Worker faults</h2><p class=\"note\">Worker losses and unit "
                     "retries (faults.jsonl).</p><ul>")
        parts += [f"<li><code>{e(f.kind)}</code> &rarr; {e(f.action)}: unit {f.unit_id}, "
                  f"attempt {f.attempt}, {e(f.worker or '?')} {e(f.node[:12])}: {e(f.error)}</li>"
                  for f in report.faults[:50]]
        parts.append("</ul>")
    if report.errors:
        parts.append("<h2>Errors</h2><p class=\"note\">Episodes that raised; "
                     "<code>policy_error</code> counts as a failure, invalid causes are left "
                     "out of the statistics; never dropped.</p><ul>")
        parts += [f"<li>{k}&times; <code>{e(cause)}</code>: {e(msg)}</li>"
                  for cause, msg, k in report.errors]
        parts.append("</ul>")
    if videos:
        parts.append(
            '<h2>Videos</h2><p class="note">Failed perturbed episode (right) next to '
            "the nominal episode of the same seed (left); files in the run dir.</p><ul>"
        )
        info = video_info or {}
        for label, rel in videos.items():
            href = e(quote(rel), quote=True)
            about = f' <span class="note">{e(info[label].describe())}</span>' if label in info \
                else ""
            parts.append(
                f'<li><a href="{href}">{e(label)}</a>{about}<br>'
                f'<video controls preload="none"{_poster(label, posters)} src="{href}"></video>'
                "</li>"
            )
        parts.append("</ul>")
    loaded = policy_load_lines(m)
    if loaded:
        parts.append("<h2>Policy</h2><ul>" + "".join(f"<li>{e(x)}</li>" for x in loaded)
                     + "</ul>")
    manifest_json = json.dumps(to_dict(m), indent=2, default=str)
    parts.append(f"<h2>Manifest</h2><pre>{e(manifest_json)}</pre>")
    parts.append(
        f'<p class="note">report schema {report.schema_version} · bootstrap '
        f"{report.n_boot} resamples, seed {report.bootstrap_seed}</p></body></html>"
    )
    return "\n".join(parts) + "\n"


def _poster(label: str, posters: Mapping[str, str] | None) -> str:
    """`` poster="data:..."`` for a ``<video>`` tag, or "" without a poster."""
    uri = (posters or {}).get(label)
    return f' poster="{html.escape(uri, quote=True)}"' if uri else ""
