"""Compare policies evaluated under one protocol: gaps side by side, paired differences, ranks.

Runs made under the same manifest protocol (env, axes, severities, splits,
conditions, seed, episodes per condition, step limit, render settings, ...)
start episode ``i`` of every condition from the same initial state with the
same perturbation values, whichever policy runs it. So the outcomes of two
policies on episode ``i`` are paired, and the difference of their gaps is a
paired difference too::

    d_i = (yA_nominal_i - yA_perturbed_i) - (yB_nominal_i - yB_perturbed_i)   in [-2, 2]

The comparison reports, per perturbed condition and pair of runs, the mean of
``d_i`` (gap of A minus gap of B; > 0: A loses more success to the axis, so B
is the more robust) with a paired interval and a sign-flip test p-value, and
the difference of perturbed success rates with the exact McNemar test; both
families are Holm-adjusted. Invalid episodes (:data:`robogen.types.INVALID_CAUSES`)
are left out of every pair.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from robogen.errors import InvalidSpecError, RunDirError
from robogen.reports.comparison import (
    COMPARE_SCHEMA_VERSION,
    ComparedRun,
    Comparison,
    PolicyDifference,
    Ranking,
)
from robogen.reports.records import STATUS_NO_DATA, STATUS_NOT_APPLIED, AxisGap, Report
from robogen.reports.safety import episode_values, safety_differences
from robogen.rollout.manifest import PAIRING_FIELDS, PROTOCOL_FIELDS, differences
from robogen.stats.intervals import DEFAULT_N_BOOT, paired_gap
from robogen.stats.paired import (
    bounded_mean_interval,
    holm_adjust,
    mcnemar_exact_pvalue,
    sign_flip_pvalue,
)
from robogen.types import INVALID_CAUSES, EpisodeResult, EvalManifest

COMPARE_FIELDS = PAIRING_FIELDS
"""Manifest fields compared in addition to the check protocol: pairing needs equal seeds and n."""

TOO_FEW_RUNS = (
    "compare needs at least two run directories, got {n}; e.g. robogen compare runs/a runs/b "
    "--out cmp (or evaluate several policies at once: robogen eval --policy A --policy B ...)"
)
PROTOCOL_DIFFERS = (
    "runs {a!r} and {b!r} were evaluated under different protocols, so their episodes are not "
    "paired; differing fields: {fields}. Evaluate both policies under one manifest: "
    "robogen eval --policy A --policy B ..."
)
__all__ = [
    "COMPARE_FIELDS", "COMPARE_SCHEMA_VERSION", "INCOMPLETE_RUN", "PROTOCOL_DIFFERS",
    "TOO_FEW_RUNS", "ComparedRun", "Comparison", "LoadedRun", "PolicyDifference", "Ranking",
    "check_same_protocol", "compare_dirs", "compare_runs", "load_run",
]

INCOMPLETE_RUN = (
    "run {path!r} is incomplete: {missing} of {total} work units have no episodes; finish it "
    "with: robogen eval --resume {path}"
)


@dataclass(frozen=True, slots=True)
class LoadedRun:
    """A finished run directory read for a comparison.

    Attributes:
        path: The run directory.
        manifest: Its manifest.
        results: Every stored episode.
        report: Its report, built from ``results``.
    """

    path: Path
    manifest: EvalManifest
    results: tuple[EpisodeResult, ...]
    report: Report


SEQUENTIAL_RUN = (
    "{path!r} was evaluated with --episodes auto: its conditions stopped at data-dependent "
    "episode counts, so it cannot be compared under one fixed protocol; evaluate each policy "
    "with the same --episodes N to compare them"
)


def load_run(path: str | Path) -> LoadedRun:
    """Read a finished run directory and build its report.

    Raises:
        RunDirError: If ``path`` is not a run directory, has no episodes, or is unfinished.
        InvalidSpecError: If it is an ``--episodes auto`` run (:data:`SEQUENTIAL_RUN`).
    """
    from robogen.perturbations import AXES
    from robogen.reports.build import build_report
    from robogen.rollout.runner import plan_units
    from robogen.rollout.store import ResultStore

    store = ResultStore.open(Path(path))
    m = store.manifest
    if m.sequential is not None:
        raise InvalidSpecError(SEQUENTIAL_RUN.format(path=str(path)))
    total = len(plan_units(m))
    missing = total - len(store.done_units() & {u.unit_id for u in plan_units(m)})
    if missing:
        raise RunDirError(INCOMPLETE_RUN.format(path=str(path), missing=missing, total=total))
    results = store.load_results()
    kinds = {a: AXES.get(a).kind for a in m.axes if a in AXES}
    report = build_report(results, m, policy_obs_mode=m.policy_obs_mode, axis_kinds=kinds)
    return LoadedRun(Path(path), m, tuple(results), report)


def check_same_protocol(runs: Sequence[LoadedRun]) -> None:
    """Raise unless every run shares the first run's protocol, seed and episodes per condition.

    Raises:
        InvalidSpecError: With fewer than two runs, or naming each differing field.
    """
    if len(runs) < 2:
        raise InvalidSpecError(TOO_FEW_RUNS.format(n=len(runs)))
    first = runs[0]
    for other in runs[1:]:
        diffs = differences(
            first.manifest, other.manifest, fields=(*PROTOCOL_FIELDS, *COMPARE_FIELDS),
            names=(first.path.name, other.path.name),
        )
        if diffs:
            raise InvalidSpecError(
                PROTOCOL_DIFFERS.format(a=str(first.path), b=str(other.path),
                                        fields="; ".join(diffs))
            )


def compare_runs(
    runs: Sequence[LoadedRun],
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_N_BOOT,
    created: str | None = None,
) -> Comparison:
    """Compare runs made under one protocol (see the module docstring).

    Args:
        runs: Two or more loaded runs (see :func:`load_run`).
        confidence: Two-sided level of every interval, in (0, 1).
        n_boot: Bootstrap resamples per interval.
        created: Timestamp to record; None uses the current UTC time.

    Returns:
        The comparison.

    Raises:
        InvalidSpecError: If fewer than two runs are given or their protocols differ.
    """
    check_same_protocol(runs)
    labels = _labels([r.path for r in runs])
    seed = runs[0].manifest.seed
    outcomes = [_valid_outcomes(r.results) for r in runs]
    gaps = [{g.condition: g for g in (*r.report.gaps, *r.report.combined_gaps)} for r in runs]
    conds = tuple(g.condition for g in (*runs[0].report.gaps, *runs[0].report.combined_gaps))
    nominal = runs[0].report.conditions[0].condition
    raw: list[PolicyDifference] = []
    for ia in range(len(runs)):
        for ib in range(ia + 1, len(runs)):
            for c in conds:
                raw.append(_difference(c, (labels[ia], labels[ib]), (gaps[ia][c], gaps[ib][c]),
                                       (outcomes[ia], outcomes[ib]), nominal, confidence,
                                       n_boot, seed))
    holm = holm_adjust([d.p_value for d in raw])
    holm_mc = holm_adjust([d.mcnemar_p for d in raw])
    diffs = tuple(dataclasses.replace(d, p_holm=h, mcnemar_p_holm=hm)
                  for d, h, hm in zip(raw, holm, holm_mc, strict=True))
    compared = tuple(
        ComparedRun(label, str(r.path), r.manifest.policy, r.report.policy_obs_mode,
                    r.report.conditions[0].success_rate, r.report.conditions[0].ci_low,
                    r.report.conditions[0].ci_high,
                    (*r.report.gaps, *r.report.combined_gaps))
        for label, r in zip(labels, runs, strict=True)
    )
    return Comparison(
        schema_version=COMPARE_SCHEMA_VERSION,
        manifest=runs[0].manifest,
        runs=compared,
        conditions=conds,
        differences=diffs,
        rankings=_rankings(runs[0], labels, gaps, diffs, 1.0 - confidence),
        confidence=confidence,
        n_boot=n_boot,
        created=created or datetime.now(UTC).isoformat(timespec="seconds"),
        safety=safety_differences(labels, [episode_values(r.results) for r in runs],
                                  (nominal, *conds), confidence=confidence, n_boot=n_boot,
                                  seed=seed),
        no_safety=tuple(label for label, r in zip(labels, runs, strict=True)
                        if not r.manifest.safety),
    )


# ---------------------------------------------------------------------------- internals


def _labels(paths: Sequence[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        name = p.resolve().name or str(p)
        label, k = name, 2
        while label in out:
            label, k = f"{name}#{k}", k + 1
        out.append(label)
    return out


def _valid_outcomes(results: Sequence[EpisodeResult]) -> dict[str, dict[int, bool]]:
    out: dict[str, dict[int, bool]] = {}
    for r in results:
        if r.cause not in INVALID_CAUSES:
            out.setdefault(r.condition, {})[r.episode_index] = r.success
    return out


def _difference(
    condition: str,
    labels: tuple[str, str],
    gaps: tuple[AxisGap, AxisGap],
    outcomes: tuple[dict[str, dict[int, bool]], dict[str, dict[int, bool]]],
    nominal: str,
    confidence: float,
    n_boot: int,
    seed: int,
) -> PolicyDifference:
    ga, gb = gaps
    oa, ob = outcomes
    maps = [oa.get(nominal, {}), oa.get(condition, {}), ob.get(nominal, {}), ob.get(condition, {})]
    common = sorted(set(maps[0]).intersection(*maps[1:]))
    y = np.array([[m[i] for m in maps] for i in common], dtype=np.float64).reshape(-1, 4)
    nan = math.nan
    note = ""
    skipped = {STATUS_NOT_APPLIED, STATUS_NO_DATA}
    if ga.status in skipped or gb.status in skipped:
        note = f"{labels[0]}: {ga.status}, {labels[1]}: {gb.status}"
    elif not common:
        note = "no episode index valid in both runs"
    if note:
        return PolicyDifference(condition, ga.axis, ga.severity, ga.split, labels[0], labels[1],
                                len(common), nan, nan, nan, nan, nan, "", nan, nan, nan, nan,
                                nan, nan, nan, note)
    d = (y[:, 0] - y[:, 1]) - (y[:, 2] - y[:, 3])
    low, high, method = bounded_mean_interval(d, 2.0, n_boot=n_boot, confidence=confidence,
                                              seed=seed)
    succ = paired_gap(y[:, 1].astype(bool), y[:, 3].astype(bool), n_boot=n_boot,
                      confidence=confidence, seed=seed)
    return PolicyDifference(
        condition=condition, axis=ga.axis, severity=ga.severity, split=ga.split,
        run_a=labels[0], run_b=labels[1], n=len(common),
        gap_a=float((y[:, 0] - y[:, 1]).mean()), gap_b=float((y[:, 2] - y[:, 3]).mean()),
        difference=float(d.mean()), ci_low=low, ci_high=high, ci_method=method,
        p_value=sign_flip_pvalue(d, seed=seed), p_holm=nan,
        success_difference=succ.gap, success_ci_low=succ.ci_low, success_ci_high=succ.ci_high,
        mcnemar_p=mcnemar_exact_pvalue(succ.n10, succ.n01), mcnemar_p_holm=nan,
    )


def _rankings(
    first: LoadedRun,
    labels: Sequence[str],
    gaps: Sequence[dict[str, AxisGap]],
    diffs: Sequence[PolicyDifference],
    alpha: float,
) -> tuple[Ranking, ...]:
    top: dict[str, AxisGap] = {}
    for g in first.report.gaps:  # single axes, hardest first
        if g.split == "all" and (g.axis not in top or g.severity > top[g.axis].severity):
            top[g.axis] = g
    out = []
    per_axis: dict[str, list[float]] = {lb: [] for lb in labels}
    for axis, g0 in top.items():
        vals = {lb: gaps[k][g0.condition].gap for k, lb in enumerate(labels)}
        order = sorted(labels, key=lambda lb: (not math.isfinite(vals[lb]),
                                               vals[lb] if math.isfinite(vals[lb]) else 0.0))
        sep = []
        for a, b in zip(order, order[1:], strict=False):
            d = _find(diffs, g0.condition, a, b)
            sep.append(d is not None and math.isfinite(d.p_holm) and d.p_holm < alpha)
        out.append(Ranking(axis, g0.condition, tuple(order), tuple(vals[lb] for lb in order),
                           tuple(sep)))
        if all(math.isfinite(v) for v in vals.values()):
            for lb in labels:
                per_axis[lb].append(vals[lb])
    if any(per_axis.values()):
        mean = {lb: float(np.mean(v)) for lb, v in per_axis.items()}
        order = sorted(labels, key=lambda lb: mean[lb])
        out.append(Ranking("overall", "", tuple(order), tuple(mean[lb] for lb in order),
                           tuple(False for _ in order[1:])))
    return tuple(out)


def _find(diffs: Sequence[PolicyDifference], condition: str, a: str, b: str
          ) -> PolicyDifference | None:
    for d in diffs:
        if d.condition == condition and {d.run_a, d.run_b} == {a, b}:
            return d
    return None


def compare_dirs(
    run_dirs: Sequence[str | Path], out: str | Path, *, fresh_out: bool = True,
    confidence: float = 0.95, n_boot: int = DEFAULT_N_BOOT,
) -> dict[str, Path]:
    """Load run directories, compare them and write compare.{json,md,html} into ``out``.

    Every input is checked (at least two runs, each a finished run directory,
    one protocol, ``out`` usable) before anything is computed or written.

    Args:
        run_dirs: Two or more run directories.
        out: Output directory.
        fresh_out: Require ``out`` to be new or empty (``robogen eval --policy A
            --policy B`` writes the comparison next to the runs it made).
        confidence: Two-sided level of every interval.
        n_boot: Bootstrap resamples per interval.

    Returns:
        Written files by kind (``json``, ``md``, ``html``, ``heatmap``).

    Raises:
        InvalidSpecError: Fewer than two runs, or differing protocols.
        RunDirError: A path that is not a finished run directory, or an unusable ``out``.
    """
    from robogen.reports.compare_writers import write_comparison

    if len(run_dirs) < 2:
        raise InvalidSpecError(TOO_FEW_RUNS.format(n=len(run_dirs)))
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {str(out)!r} is a file; give a new or empty directory")
    if fresh_out and out.exists() and any(out.iterdir()):
        raise RunDirError(f"--out {str(out)!r} is not empty; give a new or empty directory")
    resolved = [Path(p).resolve() for p in run_dirs]
    if out.resolve() in resolved:
        raise RunDirError(f"--out {str(out)!r} is one of the compared runs; give another directory")
    runs = [load_run(p) for p in run_dirs]  # each run's own errors first
    twice = sorted({str(p) for p in run_dirs if resolved.count(Path(p).resolve()) > 1})
    if twice:
        raise InvalidSpecError(f"the same run directory is given twice: {', '.join(twice)}; "
                               "compare different runs")
    comparison = compare_runs(runs, confidence=confidence, n_boot=n_boot)
    return write_comparison(comparison, out)
