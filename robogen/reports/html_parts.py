"""Pieces shared by robogen's HTML and markdown writers (run, comparison and scaling pages).

The stylesheet, an escaped table, and the formatting of levels and gap
intervals, so that every page a user opens reads the same way.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

NA = "n/a"
"""Text of a value that does not exist (no episodes, non-finite estimate)."""

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:980px;color:#222;line-height:1.4;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}
h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:0;font-size:.9em}
.tbl{max-width:100%;overflow-x:auto;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right;overflow-wrap:break-word}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
tr.flag td{color:#777}tr.na td{color:#999;font-style:italic}
.meta{color:#555}.note{color:#555;font-size:.9em}
img{max-width:100%;display:block;margin:.5em 0}
pre{background:#f7f7f7;padding:.8em;overflow:auto;font-size:.8em;white-space:pre-wrap;
overflow-wrap:anywhere}
video{max-width:100%;background:#000}
details{margin:.5em 0}summary{cursor:pointer;color:#444}
code{overflow-wrap:anywhere}
"""
"""Inline stylesheet shared by robogen's self-contained HTML pages."""


def html_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] | None = None
) -> str:
    """An HTML ``<table>`` with escaped cells.

    Args:
        header: Column titles.
        rows: Cell texts, one sequence per row.
        classes: Optional CSS class per row (``""`` for none).

    Returns:
        The table markup.
    """
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = []
    for k, row in enumerate(rows):
        cls = f' class="{classes[k]}"' if classes and classes[k] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>")
    return (f'<div class="tbl"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def folded_table(header: Sequence[str], rows: Sequence[Sequence[str]], shown: Sequence[bool],
                 hidden_label: str) -> str:
    """The rows flagged in ``shown`` as a table, the others behind a ``<details>`` disclosure.

    Long tables (safety metrics of every condition) keep the rows a reader acts on in view.

    Args:
        header: Column titles.
        rows: Cell texts, one sequence per row.
        shown: Per row, whether it stays in view.
        hidden_label: What the hidden rows are, e.g. ``"without a significant change"``;
            the disclosure reads ``N more rows without a significant change``.

    Returns:
        The markup: the table of shown rows (if any), then the disclosure (if any row is hidden).
    """
    keep = [r for r, s in zip(rows, shown, strict=True) if s]
    rest = [r for r, s in zip(rows, shown, strict=True) if not s]
    out = html_table(header, keep) if keep else ""
    if rest:
        more = "more " if keep else ""
        out += (f"<details><summary>{len(rest)} {more}rows {html.escape(hidden_label)}"
                f"</summary>{html_table(header, rest)}</details>")
    return out


def level_label(severity: float, split: str) -> str:
    """``0.5``, ``test`` (severity 1 of a split) or ``test:0.5``."""
    if split == "all":
        return f"{severity:g}"
    return split if severity == 1.0 else f"{split}:{severity:g}"


def gap_ci(gap: float, low: float, high: float) -> str:
    """``+0.12 [+0.05, +0.19]``, or ``n/a`` for a non-finite gap."""
    if not math.isfinite(gap):
        return NA
    return f"{gap:+.2f} [{low:+.2f}, {high:+.2f}]"


SUCCESS_METHOD = "Wilson"
"""Interval method of every per-condition success rate (Wilson score interval,
:func:`robogen.stats.wilson_interval`)."""

METHOD_LABELS = {
    "bootstrap": "paired bootstrap",
    "agresti-min": "Agresti-Min",
    "augmented-wald": "augmented Wald",
    "betting-hedged-capital": "anytime-valid betting CS",
}
"""How report tables name each ``ci_method`` a gap or interaction record carries (the paired
percentile bootstrap over episodes; Agresti & Min 2005's adjusted Wald interval of a paired
difference; the add-pseudo-observation Wald interval; the confidence sequence of
:mod:`robogen.stats.anytime`)."""


def method_label(ci_method: str) -> str:
    """The name a table prints for ``ci_method`` (``bootstrap`` -> ``paired bootstrap``;
    a suffix such as ``, fixed-n ...`` is kept; an unknown method is printed as it is)."""
    head, sep, rest = ci_method.partition(", ")
    return METHOD_LABELS.get(head, head) + sep + rest


def common_method(methods: Sequence[str]) -> str:
    """The most frequent ``ci_method`` of a table's rows (the first seen on a tie), named in
    its header; ``bootstrap`` for no rows."""
    if not methods:
        return "bootstrap"
    return max(dict.fromkeys(methods), key=list(methods).count)


def ci_header(name: str, ci: str, method: str) -> str:
    """A column title naming the interval and its method: ``gap [95% CI, paired bootstrap]``."""
    return f"{name} [{ci}, {method}]"


def with_method(cell: str, ci_method: str, common: str) -> str:
    """``cell`` with its row's interval method appended in parentheses when it differs from
    the table's ``common`` one (named in the header)."""
    if ci_method == common or cell == NA:
        return cell
    return f"{cell} ({method_label(ci_method)})"
