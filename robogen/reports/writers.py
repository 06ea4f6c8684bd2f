"""Write a :class:`Report` as ``report.json``, ``report.md`` and ``report.html``.

* ``report.json``: :meth:`Report.to_dict` as strict JSON (versioned schema).
* ``report.md``: compact enough for a pull-request comment.
* ``report.html``: one self-contained file (inline CSS, plots embedded as
  base64 PNG, no external assets) that opens offline; videos are linked by
  paths relative to the run dir.

Every file is written to a temporary name in the same directory and moved into
place with :func:`os.replace`, so a reader never sees a half-written report.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from robogen._atomic import write_atomic
from robogen.errors import InvalidSpecError, RunDirError, StoreWriteError
from robogen.reports.html_parts import (
    CSS,
    NA,
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
from robogen.reports.plot_worker import draw_in_process
from robogen.reports.provenance import (
    policy_load_lines,
    run_facts,
    video_infos,
    video_posters,
)
from robogen.reports.records import (
    PLOT_FILES,
    REPORT_SCHEMA_VERSION,
    STATUS_OK,
    AxisGap,
    ConditionStats,
    InteractionStats,
    Report,
)
from robogen.reports.safety import SAFETY_NOTE, safety_table, significant_change
from robogen.reports.sequential_writers import header_fact, html_section, md_section
from robogen.reports.video import VideoInfo
from robogen.stats.sweep import BreakingPoint
from robogen.types import to_dict

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS_DIR = "plots"

NO_REPORT = "no {name} in {path}; build it with: robogen report {run_dir}"
REPORT_WRITE_FAILED = (
    "cannot write {path!r} ({why}); all {n} episodes of the run are stored in {run_dir!r}; "
    "make room (or make it writable) and rebuild the report with: robogen report {run_dir}"
)
"""Message of the :class:`~robogen.errors.StoreWriteError` of a report file that could not be
written (a full disk): the episodes are all stored, ``robogen report`` rebuilds it."""
CORRUPT_REPORT = (
    "{path} is not a valid robogen report ({why}); rebuild it with: robogen report {run_dir}"
)


def write_report(
    report: Report,
    run_dir: Path,
    *,
    plots: bool = True,
    videos: Mapping[str, str] | None = None,
    draw: Callable[[Report], dict[str, bytes]] | None = None,
) -> dict[str, Path]:
    """Write ``report.json``, ``report.md``, ``report.html`` (and plots) into ``run_dir``.

    Args:
        report: The report to write.
        run_dir: Existing run directory.
        plots: Also draw the figures: saved as ``plots/*.png`` and embedded in the HTML.
        videos: Label -> video path (relative to ``run_dir``, or absolute inside
            it), e.g. ``{"texture@1 ep 3": "videos/texture@1_ep3.mp4"}``;
            linked from the HTML and listed in the markdown.
        draw: Draws the figures (plot key -> PNG bytes), e.g. a started
            :class:`~robogen.reports.plot_worker.PlotWorker`'s ``draw``; default: in
            this process.

    Returns:
        Keys ``json``, ``md``, ``html`` (and ``plot_gaps``, ``plot_severity``,
        ``plot_conditions`` when ``plots``) -> written path.

    Raises:
        RunDirError: If ``run_dir`` is not a directory.
        InvalidSpecError: If a video path is a URL or lies outside ``run_dir``.
        StoreWriteError: If a file cannot be written (a full disk, a read-only folder):
            :data:`REPORT_WRITE_FAILED`, naming the file; no partial file is left (each is
            written to a temporary and moved into place).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run dir {str(run_dir)!r} does not exist or is not a directory")
    links = _video_links(run_dir, videos or {})
    written: dict[str, Path] = {}
    images: dict[str, bytes] = {}

    def put(path: Path, data: bytes) -> Path:
        try:
            return atomic_write_bytes(path, data)
        except OSError as e:
            raise report_write_error(report, run_dir, path, e) from e

    # the small files first: on a nearly full disk the numbers are kept
    text = json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n"
    written["json"] = put(run_dir / REPORT_JSON, text.encode())
    infos = video_infos(run_dir, links)
    written["md"] = put(
        run_dir / REPORT_MD, render_markdown(report, videos=links, video_info=infos).encode()
    )
    if plots:
        images = (draw or draw_in_process)(report)
        (run_dir / PLOTS_DIR).mkdir(exist_ok=True)
        for key, data in images.items():
            written[f"plot_{key}"] = put(run_dir / PLOTS_DIR / PLOT_FILES[key], data)
    page = render_html(report, images=images, videos=links, video_info=infos,
                       posters=video_posters(run_dir, links, infos))
    written["html"] = put(run_dir / REPORT_HTML, page.encode())
    return written


def report_write_error(report: Report, run_dir: Path, path: Path | str,
                       e: OSError) -> StoreWriteError:
    """The :data:`REPORT_WRITE_FAILED` error of ``path`` (a report file, plot or video of
    ``report``'s run in ``run_dir``) that failed with ``e``; the episode count is the
    report's (every recorded episode, valid or not)."""
    n = sum(c.n + c.n_invalid for c in report.conditions)
    why = e.strerror or (str(e).strip().splitlines() or [type(e).__name__])[0]
    return StoreWriteError(REPORT_WRITE_FAILED.format(
        path=str(path), why=why, n=n, run_dir=str(run_dir)))


def load_report(path: Path) -> Report:
    """Read a report from ``report.json`` (or a run dir holding one).

    Raises:
        RunDirError: If the file is missing, not JSON, from another schema
            version, or lacks fields.
    """
    path = Path(path)
    file = path / REPORT_JSON if path.is_dir() else path
    run_dir = file.parent
    if not file.is_file():
        raise RunDirError(NO_REPORT.format(name=file.name, path=str(run_dir), run_dir=run_dir))
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunDirError(
            CORRUPT_REPORT.format(path=file, why=f"not JSON: {e}", run_dir=run_dir)
        ) from e
    if not isinstance(data, dict):
        why = f"top level is {type(data).__name__}, expected an object"
        raise RunDirError(CORRUPT_REPORT.format(path=file, why=why, run_dir=run_dir))
    if data.get("schema_version") != REPORT_SCHEMA_VERSION:
        got = data.get("schema_version")
        why = f"schema_version {got!r}, this robogen reads {REPORT_SCHEMA_VERSION}"
        raise RunDirError(CORRUPT_REPORT.format(path=file, why=why, run_dir=run_dir))
    try:
        return Report.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        why = f"missing or malformed field: {type(e).__name__}: {e}"
        raise RunDirError(CORRUPT_REPORT.format(path=file, why=why, run_dir=run_dir)) from e


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`robogen._atomic.write_atomic`)."""
    return write_atomic(path, data)


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


# ---------------------------------------------------------------------------- html

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


# ---------------------------------------------------------------------------- formatting


def _video_links(run_dir: Path, videos: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for label, p in videos.items():
        s = str(p)
        if "://" in s or s.startswith("//"):
            raise InvalidSpecError(
                f"video {label!r} path {s!r} is a URL; expected a file path relative to the run dir"
            )
        path = Path(s)
        if path.is_absolute():
            try:
                path = path.resolve().relative_to(run_dir.resolve())
            except ValueError as exc:
                raise InvalidSpecError(
                    f"video {label!r} path {s!r} is outside the run dir {str(run_dir)!r}; "
                    "expected a file inside it so the report stays self-contained"
                ) from exc
        elif ".." in path.parts:
            raise InvalidSpecError(
                f"video {label!r} path {s!r} leaves the run dir; expected a path inside it"
            )
        out[str(label)] = path.as_posix()
    return out


def _poster(label: str, posters: Mapping[str, str] | None) -> str:
    """`` poster="data:..."`` for a ``<video>`` tag, or "" without a poster."""
    uri = (posters or {}).get(label)
    return f' poster="{html.escape(uri, quote=True)}"' if uri else ""


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
