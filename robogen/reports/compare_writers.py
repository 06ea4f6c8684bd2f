"""Write a :class:`~robogen.reports.compare.Comparison` as compare.json, .md and .html.

Like the eval report: strict JSON, markdown that fits a pull-request comment,
and one self-contained HTML page (heatmap embedded as base64 PNG). Every file
is written atomically.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from pathlib import Path

from robogen._atomic import write_atomic
from robogen.reports.comparison import Comparison, PolicyDifference, Ranking
from robogen.reports.html_parts import CSS, folded_table, gap_ci, html_table, level_label
from robogen.reports.safety import difference_table

COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"
COMPARE_HTML = "compare.html"
HEATMAP_PNG = "compare_gaps.png"

METHODS = (
    "gap = nominal − perturbed success on the same episodes; Δgap = gap(A) − gap(B) on the "
    "episodes valid in both runs (> 0: B loses less, B is more robust); interval: paired "
    "bootstrap over episodes (add-pseudo-episode Wald when fewer than 10 episodes differ); "
    "p: two-sided sign-flip (paired randomization) test; Δsuccess = perturbed success A − B "
    "with the exact McNemar test; both families Holm-adjusted over every pair and condition."
)


def write_comparison(comparison: Comparison, out_dir: Path) -> dict[str, Path]:
    """Write compare.json, compare.md, compare.html and the heatmap PNG into ``out_dir``.

    Returns:
        Keys ``json``, ``md``, ``html``, ``heatmap`` -> written path.
    """
    from robogen.reports.heatmaps import gap_heatmap_png

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = gap_heatmap_png(comparison)
    text = json.dumps(comparison.to_dict(), indent=2, allow_nan=False) + "\n"
    return {
        "heatmap": write_atomic(out_dir / HEATMAP_PNG, png),
        "json": write_atomic(out_dir / COMPARE_JSON, text.encode()),
        "md": write_atomic(out_dir / COMPARE_MD,
                                 render_compare_markdown(comparison).encode()),
        "html": write_atomic(out_dir / COMPARE_HTML,
                             render_compare_html(comparison, png, out_dir=out_dir).encode()),
    }


def _p(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:.3f}" if x >= 0.001 else "<0.001"


def _runs_rows(c: Comparison) -> list[list[str]]:
    return [[r.label, r.policy, r.policy_obs_mode,
             f"{r.nominal_rate:.2f} [{r.nominal_ci_low:.2f}, {r.nominal_ci_high:.2f}]"]
            for r in c.runs]


def _gap_rows(c: Comparison) -> list[list[str]]:
    by = [{g.condition: g for g in r.gaps} for r in c.runs]
    rows = []
    for name in c.conditions:
        g0 = by[0][name]
        cells = []
        for b in by:
            g = b.get(name)
            cells.append("n/a" if g is None else (gap_ci(g.gap, g.ci_low, g.ci_high)
                                                  if math.isfinite(g.gap) else g.status))
        rows.append([g0.axis, level_label(g0.severity, g0.split), *cells])
    return rows


def _diff_rows(c: Comparison) -> list[list[str]]:
    rows = []
    for d in c.differences:
        rows.append([
            d.axis, level_label(d.severity, d.split), f"{d.run_a} − {d.run_b}",
            gap_ci(d.difference, d.ci_low, d.ci_high) if not d.note else d.note,
            _p(d.p_value), _p(d.p_holm),
            gap_ci(d.success_difference, d.success_ci_low, d.success_ci_high)
            if not d.note else "n/a",
            _p(d.mcnemar_p_holm), str(d.n),
        ])
    return rows


def _ranking_line(r: Ranking, c: Comparison | None = None) -> str:
    """``a (+0.10) ≈ b (+0.30)``; with ``c``, each relation carries its Holm-adjusted p."""
    parts = [f"{r.order[0]} ({r.gaps[0]:+.2f})" if math.isfinite(r.gaps[0]) else r.order[0]]
    for k in range(1, len(r.order)):
        rel = " < " if r.separated[k - 1] else " ≈ "
        if c is not None and r.condition:
            d = next((x for x in c.differences if x.condition == r.condition
                      and {x.run_a, x.run_b} == {r.order[k - 1], r.order[k]}), None)
            if d is not None and math.isfinite(d.p_holm):
                rel = f" {rel.strip()} (Holm p {_p(d.p_holm)}) "
        g = r.gaps[k]
        parts.append(rel + (f"{r.order[k]} ({g:+.2f})" if math.isfinite(g) else r.order[k]))
    return "".join(parts)


def _rank_title(r: Ranking) -> str:
    return "overall (mean gap)" if r.axis == "overall" else f"{r.axis} ({r.condition})"


_RANK_NOTE = ("most robust (smallest gap) first; `<`: the Holm-adjusted sign-flip test separates "
              "the neighbours, `≈`: it does not; overall: mean gap over the axes at their highest "
              "severity (not tested)")
RANK_TEST_NOTE = (
    "The ranking uses the sign-flip test of Δgap Holm-adjusted over all {m} (pair, "
    "condition) tests (the p (Holm) column; shown next to each relation), at level "
    "{alpha:g}. The Δgap intervals of the paired differences are per condition and "
    "unadjusted: one can exclude 0 where the adjusted test does not separate the policies "
    "(≈), and with few episodes the exact test cannot reach the adjusted level at all.")
"""What compare.html says about the ranking's test next to it (``m`` tests, level ``alpha``)."""
_DIFF_HEAD = ["axis", "level", "A − B", "Δgap [{ci}, unadjusted]", "p", "p (Holm)",
              "Δsuccess [{ci}]", "McNemar p (Holm)", "n"]


def render_compare_markdown(c: Comparison) -> str:
    """The comparison as compact GitHub markdown."""
    m = c.manifest
    ci = f"{c.confidence * 100:g}% CI"
    out = [f"### robogen compare: `{m.env_id}` · {len(c.runs)} policies", "",
           f"n = {m.n_episodes} episodes/condition · seed {m.seed} · max {m.max_steps} steps "
           "· same episodes and perturbation values for every policy (paired)", "",
           f"| run | policy | observes | nominal success [{ci}] |", "|---|---|---|---|"]
    out += ["| " + " | ".join(r) + " |" for r in _runs_rows(c)]
    out += ["", f"**Gaps** [{ci}]", "",
            "| axis | level | " + " | ".join(r.label for r in c.runs) + " |",
            "|---|---|" + "---|" * len(c.runs)]
    out += ["| " + " | ".join(r) + " |" for r in _gap_rows(c)]
    out += ["", "**Paired differences between policies**", "",
            "| " + " | ".join(h.format(ci=ci) for h in _DIFF_HEAD) + " |",
            "|" + "---|" * len(_DIFF_HEAD)]
    out += ["| " + " | ".join(r) + " |" for r in _diff_rows(c)]
    missing = list(c.no_safety)
    if missing and len(missing) < len(c.runs):
        out += ["", f"**Safety between policies**: not compared: {', '.join(missing)} "
                "recorded no safety metrics (evaluate with robogen eval --safety)"]
    elif c.safety:
        worse = [d for d in c.safety if d.ci_low > 0 or d.ci_high < 0]
        headers, rows = difference_table(worse, c.confidence)
        out += ["", f"**Safety between policies** ({len(worse)} of {len(c.safety)} paired "
                "differences with an interval excluding 0; compare.json and compare.html "
                "list all)", ""]
        if rows:
            out += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            out += ["| " + " | ".join(r) + " |" for r in rows]
    if c.rankings:
        tested = sum(math.isfinite(d.p_value) for d in c.differences)
        out += ["", f"**Ranking** ({_RANK_NOTE}). "
                f"{RANK_TEST_NOTE.format(m=tested, alpha=1 - c.confidence)}", ""]
        out += [f"- {_rank_title(r)}: {_ranking_line(r, c)}" for r in c.rankings]
    out += ["", f"<sub>{METHODS}</sub>", ""]
    return "\n".join(out)


def _run_media(c: Comparison, out_dir: Path) -> list[str]:
    """HTML of each run's report link and failure videos, as paths relative to ``out_dir``."""
    from robogen.reports.provenance import video_posters
    from robogen.rollout.replay import existing_videos

    e = html.escape
    parts = ["<h2>Failure videos</h2>",
             '<p class="note">Each video: the nominal episode (left) and the failed perturbed '
             "episode of the same seed (right), from the reset frame on.</p>"]
    for r in c.runs:
        run_dir = Path(r.run_dir)
        rel = Path(os.path.relpath(run_dir, out_dir))
        report = rel / "report.html"
        parts.append(f'<h3>{e(r.label)} · <a href="{e(report.as_posix())}">full report</a></h3>')
        videos = existing_videos(run_dir)
        if not videos:
            parts.append('<p class="note">no failure videos in this run</p>')
            continue
        parts.append('<div class="videos">')
        posters = video_posters(run_dir, {k: str(v) for k, v in videos.items()})
        for label, path in videos.items():
            src = e((rel / path).as_posix())
            poster = f' poster="{e(posters[label])}"' if label in posters else ""
            parts.append(f'<figure><video controls muted loop preload="metadata"{poster} '
                         f'src="{src}">'
                         f"</video><figcaption>{e(label)}</figcaption></figure>")
        parts.append("</div>")
    return parts


def render_compare_html(c: Comparison, heatmap_png: bytes | None = None, *,
                        out_dir: Path | None = None) -> str:
    """The comparison as one HTML page (the heatmap embedded; with ``out_dir``, each run's
    failure videos play inline from its run dir, linked relative to ``out_dir``)."""
    e = html.escape
    m = c.manifest
    ci = f"{c.confidence * 100:g}% CI"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>robogen compare: {e(m.env_id)}</title>"
        f"<style>{CSS}tr.sig td{{font-weight:600}}.videos{{display:flex;flex-wrap:wrap;gap:12px}}"
        "figure{margin:0}figcaption{font-size:12px}video{max-width:520px}</style></head><body>",
        f"<h1>robogen compare: {e(m.env_id)}</h1>",
        f'<p class="meta">{len(c.runs)} policies · n = {m.n_episodes} episodes/condition · seed '
        f"{m.seed} · max {m.max_steps} steps · spec <code>{e(m.spec_hash[:12])}</code> · built "
        f"{e(c.created)}</p>",
        "<h2>Policies</h2>",
        html_table(["run", "policy", "observes", f"nominal success [{ci}]"], _runs_rows(c)),
    ]
    if heatmap_png:
        b64 = base64.b64encode(heatmap_png).decode("ascii")
        parts.append(f'<img alt="gap heatmap" src="data:image/png;base64,{b64}">')
    parts += ["<h2>Gaps</h2>",
              html_table(["axis", "level", *(r.label for r in c.runs)], _gap_rows(c))]
    if c.rankings:
        tested = sum(math.isfinite(d.p_value) for d in c.differences)
        parts.append(f"<h2>Ranking</h2><p class=\"note\">{e(_RANK_NOTE.replace('`', ''))}. "
                     f"{e(RANK_TEST_NOTE.format(m=tested, alpha=1 - c.confidence))}</p><ul>")
        parts += [f"<li><b>{e(_rank_title(r))}</b>: {e(_ranking_line(r, c))}</li>"
                  for r in c.rankings]
        parts.append("</ul>")
    classes = ["sig" if _significant(d, c.confidence) else "" for d in c.differences]
    parts += ["<h2>Paired differences between policies</h2>",
              html_table([h.format(ci=ci) for h in _DIFF_HEAD], _diff_rows(c), classes),
              f'<p class="note">{e(METHODS)} Rows in bold: Holm-adjusted p &lt; '
              f"{1 - c.confidence:g}.</p>"]
    if c.safety:
        headers, rows = difference_table(c.safety, c.confidence)
        sig = ["sig" if d.ci_low > 0 or d.ci_high < 0 else "" for d in c.safety]
        parts += ["<h2>Safety between policies</h2>",
                  '<p class="note">Safety metrics (robogen eval --safety) of each pair of '
                  "policies on the same episodes: b - a, positive when b is less safe. In "
                  "view: the differences whose percentile-bootstrap interval excludes 0.</p>",
                  folded_table(headers, rows, [bool(x) for x in sig],
                               "whose interval includes 0")]
    if out_dir is not None:
        parts += _run_media(c, Path(out_dir))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _significant(d: PolicyDifference, confidence: float) -> bool:
    return math.isfinite(d.p_holm) and d.p_holm < 1 - confidence
