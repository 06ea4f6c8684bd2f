"""Writers of a check: ``check.md`` (pull-request comment), JUnit XML and ``check.json``.

JUnit layout: one ``<testcase>`` per axis (``nominal``, each axis,
``combined``), named by the axis, class ``robogen.check.<env>``. A regression
is a ``<failure type="regression">``; an inconclusive axis is ``<skipped>``
(a ``<failure type="inconclusive">`` with ``fail_on_inconclusive``); an axis
that was not applied or has no data is ``<skipped>``; a passing axis has its
numbers in ``<system-out>``.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

from robogen.check.planning import PLANNING_NOTE
from robogen.check.records import (
    INCONCLUSIVE,
    NO_DATA,
    NOT_APPLIED,
    PASS,
    REGRESSION,
    AxisCheck,
    CheckResult,
    ConditionCheck,
    SafetyCheck,
)

CHECK_JSON = "check.json"
CHECK_MD = "check.md"
CHECK_XML = "check.xml"

_MARK = {PASS: "✅ pass", REGRESSION: "❌ regression", INCONCLUSIVE: "⚠️ inconclusive",
         NOT_APPLIED: "➖ not applied", NO_DATA: "➖ no data"}


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.2f}"


def _signed(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:+.2f}"


def _p(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    if x >= 0.995:
        return "1"
    return f"{x:.2g}" if x >= 1e-4 else "<1e-4"


def _rate(c: ConditionCheck, side: str) -> str:
    if side == "b":
        r, lo, hi, k, n = (c.baseline_rate, c.baseline_ci_low, c.baseline_ci_high,
                           c.baseline_successes, c.n_baseline)
    else:
        r, lo, hi, k, n = (c.candidate_rate, c.candidate_ci_low, c.candidate_ci_high,
                           c.candidate_successes, c.n_candidate)
    if not n:
        return "n/a"
    return f"{_pct(r)} [{_pct(lo)}, {_pct(hi)}] ({k}/{n})"


def _diff(c: ConditionCheck) -> str:
    if not math.isfinite(c.difference):
        return "n/a"
    pairs = f"; +{c.candidate_only}/-{c.baseline_only}" if c.paired else ""
    return f"{_signed(c.difference)} [{_signed(c.diff_ci_low)}, {_signed(c.diff_ci_high)}]{pairs}"


def summary_table(result: CheckResult, *, marks: bool = True) -> str:
    """The per-condition table (markdown; readable as plain text too).

    Args:
        result: The check.
        marks: Prefix verdicts with an emoji (off for terminals and assertion messages).
    """
    conf = round(100 * result.confidence)
    head = (f"| axis | condition | baseline [{conf}% CI] | candidate [{conf}% CI] | "
            f"difference [{conf}% CI] | p regression | p non-inferiority | verdict |")
    lines = [head, "|" + "---|" * 8]
    for c in result.conditions:
        v = _MARK[c.verdict] if marks else c.verdict
        lines.append(
            f"| {c.axis} | {c.condition} | {_rate(c, 'b')} | {_rate(c, 'c')} | {_diff(c)} | "
            f"{_p(c.p_regression_adj)} | {_p(c.p_noninferiority_adj)} | {v} |"
        )
    return "\n".join(lines)


def headline(result: CheckResult, *, marks: bool = True) -> str:
    """One line: the overall verdict and the regressing axes."""
    v = _MARK[result.verdict] if marks else result.verdict
    if result.verdict == REGRESSION:
        return f"robogen check: {v} on {', '.join(result.regressions)}"
    return f"robogen check: {v}"


def render_markdown(result: CheckResult) -> str:
    """``check.md``: headline, set-up, the table, the overall line and the method (PR comment)."""
    b, c = result.baseline, result.candidate
    n_tested = sum(x.verdict not in (NOT_APPLIED, NO_DATA) for x in result.conditions)
    design = ("paired exact test (same episode seeds in both runs)" if result.design == "paired"
              else "unpaired exact test")
    parts = [
        f"## {headline(result)}",
        "",
        f"Candidate `{c.policy}` against baseline `{b.policy}` on `{result.env_id}`: "
        f"margin {result.margin:g}, alpha {result.alpha:g}, {design}, Holm over "
        f"{n_tested} conditions.",
        "",
        summary_table(result),
        "",
        f"**Overall**: mean success over tested conditions {_pct(result.baseline_mean)} "
        f"(baseline) vs {_pct(result.candidate_mean)} (candidate); verdict "
        f"{_MARK[result.verdict]}"
        + (f" (exit code {result.exit_code})" if result.exit_code else "") + ".",
    ]
    parts += planning_lines(result)
    if result.safety_margin is not None:
        parts += ["", *safety_lines(result)]
    seq = result.sequential
    if seq is not None:
        pct = 100.0 * seq.episodes_saved / seq.episodes_budget if seq.episodes_budget else 0.0
        parts += [
            "",
            f"**Sequential** ({seq.spending} alpha spending, looks at "
            f"{', '.join(str(n) for n in seq.schedule)} episodes): stopped after "
            f"{seq.looks_run} of {len(seq.schedule)} looks; ran {seq.episodes_run} of "
            f"{seq.episodes_budget} episodes ({seq.episodes_saved} saved, {pct:.0f}%).",
        ]
    parts += [
        "",
        "<details><summary>How to read this</summary>",
        "",
        f"- difference = candidate minus baseline success. *regression*: the candidate is "
        f"worse than the baseline by more than {result.margin:g} (one-sided test of "
        f"H0: difference >= -{result.margin:g} rejected); *pass*: it is shown to be at most "
        f"{result.margin:g} worse (H0: difference <= -{result.margin:g} rejected); "
        "*inconclusive*: neither, more episodes are needed.",
        "- p-values are exact (Hsueh, Liu & Chen 2001 for paired, Chan 1998 for unpaired "
        "outcomes) and Holm-adjusted over conditions; each kind of wrong verdict has "
        f"probability at most {result.alpha:g}. Intervals: Tango (paired) or Newcombe "
        "(unpaired) score intervals, unadjusted. `+k/-j`: episodes only the candidate / only "
        "the baseline solved.",
        "",
        "</details>",
        "",
    ]
    return "\n".join(parts)


def planning_lines(result: CheckResult) -> list[str]:
    """The markdown lines saying how many episodes would decide each inconclusive condition
    (a planning estimate, labelled so); empty when no tested condition is inconclusive."""
    open_ = [c for c in result.conditions if c.verdict == INCONCLUSIVE and c.n_candidate]
    if not open_:
        return []
    k = sum(c.verdict not in (NOT_APPLIED, NO_DATA) and c.n_candidate > 0
            for c in result.conditions)
    unit = "pairs" if result.design == "paired" else "episodes per run"
    items = [f"{c.condition} ~{c.episodes_to_decide} {unit}" if c.episodes_to_decide > 0
             else f"{c.condition}: none (the observed difference sits on the margin)"
             for c in open_]
    worst = max((c.episodes_to_decide for c in open_), default=-1)
    return ["", f"**Episodes to decide** ({PLANNING_NOTE.format(k=max(k, 1))}; now "
            f"{max(c.n_candidate for c in open_)}): " + "; ".join(items)
            + (f". Running both sides with {worst} episodes per condition would decide every "
               "inconclusive condition if the observed rates held." if worst > 0 else ".")]


def _axis_message(a: AxisCheck, conds: list[ConditionCheck], alpha: float) -> str:
    bad = [c for c in conds if c.verdict == a.verdict] or conds
    items = []
    for c in bad:
        items.append(
            f"{c.condition}: success {_pct(c.baseline_rate)} -> {_pct(c.candidate_rate)} "
            f"(difference {_signed(c.difference)} [{_signed(c.diff_ci_low)}, "
            f"{_signed(c.diff_ci_high)}]), adjusted p regression {_p(c.p_regression_adj)}, "
            f"non-inferiority {_p(c.p_noninferiority_adj)}, level {c.level:.3g}"
            + (f"; ~{c.episodes_to_decide} episodes per run would decide (planning estimate)"
               if c.verdict == INCONCLUSIVE and c.episodes_to_decide > 0 else "")
        )
    return f"{a.verdict}: " + "; ".join(items)


def _safety_text(x: SafetyCheck) -> str:
    return (f"{x.condition}: {x.metric} {x.baseline_mean:.3g} -> {x.candidate_mean:.3g} "
            f"{x.unit} (difference {x.diff:+.3g} [{x.ci_low:+.3g}, {x.ci_high:+.3g}], "
            f"tolerated {x.tolerance:.3g}, adjusted p {_p(x.p_adjusted)})")


def safety_lines(result: CheckResult) -> list[str]:
    """The markdown section of the safety gate: what regressed, and the method."""
    bad = [x for x in result.safety if x.verdict == REGRESSION]
    open_ = [x for x in result.safety if x.verdict == INCONCLUSIVE]
    lines = [f"**Safety** (margin {result.safety_margin:g} of the baseline's mean, "
             f"{len(result.safety)} tests, Holm-adjusted): "
             + (f"{len(bad)} regression{'s' if len(bad) != 1 else ''}" if bad
                else "no significant increase" if not open_ else "undecided")
             + (f"; {len(open_)} increase{'s' if len(open_) != 1 else ''} beyond the tolerance "
                "that so few pairs cannot decide (the smallest attainable p-value is not below "
                f"{result.alpha:g} / {len(result.safety)}): run more episodes"
                if open_ else "") + "."]
    bad = bad + open_
    if bad:
        lines += ["", "| condition | metric | baseline | candidate | difference "
                  f"[{result.confidence * 100:g}% CI] | tolerated | adj. p | verdict |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {x.condition} | {x.metric} [{x.unit}] | {x.baseline_mean:.3g} | "
                  f"{x.candidate_mean:.3g} | {x.diff:+.3g} [{x.ci_low:+.3g}, {x.ci_high:+.3g}] "
                  f"| {x.tolerance:.3g} | {_p(x.p_adjusted)} | {x.verdict} |" for x in bad]
    lines += ["", "<sub>Per condition and metric, paired differences candidate - baseline; "
              "one-sided sign-flip test of a mean increase beyond the tolerance (margin x "
              "|baseline mean|); check.json lists every test.</sub>"]
    return lines


def render_junit(result: CheckResult) -> str:
    """JUnit XML with one test case per axis (see the module docstring)."""
    env = result.env_id.split("/")[-1]
    by_axis: dict[str, list[ConditionCheck]] = {}
    for c in result.conditions:
        by_axis.setdefault(c.axis, []).append(c)
    failures = skipped = 0
    cases = []
    for a in result.axes:
        case = ET.Element("testcase", classname=f"robogen.check.{env}", name=a.axis, time="0")
        msg = _axis_message(a, by_axis[a.axis], result.alpha)
        detail = "\n".join(
            f"{c.condition}: baseline {_rate(c, 'b')}, candidate {_rate(c, 'c')}, "
            f"difference {_diff(c)}, verdict {c.verdict}" for c in by_axis[a.axis]
        )
        if a.verdict == REGRESSION or (a.verdict == INCONCLUSIVE and result.fail_on_inconclusive):
            el = ET.SubElement(case, "failure", type=a.verdict, message=msg)
            el.text = detail
            failures += 1
        elif a.verdict != PASS:
            ET.SubElement(case, "skipped", message=msg)
            skipped += 1
        ET.SubElement(case, "system-out").text = detail
        cases.append(case)
    for metric in dict.fromkeys(x.metric for x in result.safety):
        tests = [x for x in result.safety if x.metric == metric]
        case = ET.Element("testcase", classname=f"robogen.check.{env}",
                          name=f"safety: {metric}", time="0")
        detail = "\n".join(_safety_text(x) for x in tests)
        bad = [x for x in tests if x.verdict == REGRESSION]
        if not bad and any(x.verdict == INCONCLUSIVE for x in tests):
            ET.SubElement(case, "skipped", message="inconclusive: " + "; ".join(
                _safety_text(x) for x in tests if x.verdict == INCONCLUSIVE))
            skipped += 1
        if bad:
            el = ET.SubElement(case, "failure", type=REGRESSION,
                               message="regression: " + "; ".join(_safety_text(x) for x in bad))
            el.text = detail
            failures += 1
        ET.SubElement(case, "system-out").text = detail
        cases.append(case)
    attrs = {"tests": str(len(cases)), "failures": str(failures), "errors": "0",
             "skipped": str(skipped), "time": "0"}
    root = ET.Element("testsuites", name="robogen check", **attrs)
    suite = ET.SubElement(root, "testsuite", name=f"robogen check {result.env_id}",
                          timestamp=result.created, **attrs)
    props = ET.SubElement(suite, "properties")
    for k, v in (("verdict", result.verdict), ("margin", f"{result.margin:g}"),
                 ("alpha", f"{result.alpha:g}"), ("design", result.design),
                 ("baseline", result.baseline.policy), ("candidate", result.candidate.policy)):
        ET.SubElement(props, "property", name=k, value=v)
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_json(result: CheckResult) -> str:
    """``check.json``: :meth:`CheckResult.to_dict` as indented strict JSON."""
    return json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n"


def write_outputs(
    result: CheckResult, out_dir: Path, *, junit: Path | None = None
) -> dict[str, Path]:
    """Write check.json, check.md and the JUnit XML atomically.

    Args:
        result: The check.
        out_dir: Folder for ``check.json``/``check.md`` (created if missing).
        junit: JUnit XML path; default ``out_dir / "check.xml"``.

    Returns:
        ``{"json": ..., "md": ..., "junit": ...}`` paths.
    """
    from robogen._atomic import write_atomic

    out_dir = Path(out_dir)
    files = {"json": out_dir / CHECK_JSON, "md": out_dir / CHECK_MD,
             "junit": Path(junit) if junit else out_dir / CHECK_XML}
    write_atomic(files["json"], render_json(result))
    write_atomic(files["md"], render_markdown(result))
    write_atomic(files["junit"], render_junit(result))
    return files


def load_check(path: Path) -> CheckResult:
    """Read ``check.json`` (or a folder holding one).

    Raises:
        RunDirError: If missing, not JSON, or malformed.
    """
    from robogen.errors import RunDirError

    path = Path(path)
    file = path / CHECK_JSON if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise RunDirError(f"no check result at {str(file)!r}; run robogen check first") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunDirError(f"{str(file)!r} is not JSON: {e}") from e
    return CheckResult.from_dict(data)
