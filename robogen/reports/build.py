"""Build a :class:`Report` from episode results and the evaluation manifest.

The report is computed from ``Sequence[EpisodeResult]`` and the
:class:`~robogen.types.EvalManifest` only; it is a frozen record that
serializes to a versioned JSON dict (:meth:`Report.to_dict`) and back.

Pairing: a perturbed episode is compared with the nominal episode of the same
``episode_index`` (same initial state, common random numbers); only indices
present in both conditions count towards a gap.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from robogen.errors import RunDirError
from robogen.reports.in_view import NOT_IN_VIEW, apply_in_view
from robogen.reports.records import (
    INVALID_SHARE_LIMIT,
    REPORT_SCHEMA_VERSION,
    STATUS_INVALID,
    STATUS_NO_DATA,
    STATUS_NOT_APPLIED,
    STATUS_NOT_OBSERVED,
    STATUS_OK,
    AxisGap,
    ConditionStats,
    FailurePair,
    InteractionStats,
    Report,
    SeverityCurve,
)
from robogen.reports.safety import safety_stats
from robogen.rollout.faults import FaultRecord
from robogen.stats.intervals import DEFAULT_N_BOOT, interaction, paired_gap, wilson_interval
from robogen.stats.sweep import BreakingPoint
from robogen.types import (
    CAUSES,
    COMBINED,
    INVALID_CAUSES,
    NOMINAL,
    Condition,
    EpisodeResult,
    EvalManifest,
)

BREAKING_N_BOOT = 2_000
"""Bootstrap resamples of a breaking point (each one refits the monotone curve)."""


def is_invalid(r: EpisodeResult) -> bool:
    """True if the episode's outcome is not the policy's (cause in ``INVALID_CAUSES``)."""
    return r.cause in INVALID_CAUSES


def build_report(
    results: Sequence[EpisodeResult],
    manifest: EvalManifest,
    *,
    policy_obs_mode: str | None = None,
    axis_kinds: Mapping[str, str] | None = None,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_N_BOOT,
    bootstrap_seed: int | None = None,
    created: str | None = None,
    faults: Sequence[FaultRecord] = (),
    hardware: str = "",
) -> Report:
    """Summarize episode results into a :class:`Report`.

    Invalid episodes (cause in :data:`~robogen.types.INVALID_CAUSES`: the simulator
    diverged, the worker died, the unit timed out, an infrastructure call failed) say
    nothing about the policy: they are left out of success, return, length, applied
    counts and paired gaps (a pair drops when either episode is invalid), and counted per
    condition in ``n_invalid``. A level where more than :data:`INVALID_SHARE_LIMIT` of
    the episodes lose their pair this way gets status ``too many invalid episodes``
    instead of a gap.

    Args:
        results: Episode results of one evaluation (any order; conditions may
            be incomplete while a run is in progress).
        manifest: The evaluation's manifest; its conditions define the report's.
        policy_obs_mode: Observation the policy consumes; None takes
            ``manifest.obs_mode``. With ``"state"``, visual axes are flagged
            ``not observed by this policy`` (their gap is still computed).
        axis_kinds: Axis name -> kind (``visual``, ``physical``,
            ``structural``); None means unknown (no axis is flagged as not observed).
        confidence: Two-sided confidence level of all intervals.
        n_boot: Bootstrap resamples per interval.
        bootstrap_seed: Resampling seed; None uses ``manifest.seed``.
        created: Creation timestamp to record; None uses the current UTC time.
        faults: Worker losses and retries of the run, listed in the report.
        hardware: Where the workers ran (one line for the header; ``""``: unrecorded).

    Returns:
        The report.

    Raises:
        RunDirError: If a result names a condition or env the manifest lacks,
            an (condition, episode_index) pair occurs twice, or the manifest
            has no nominal condition.
    """
    obs_mode = manifest.obs_mode if policy_obs_mode is None else policy_obs_mode
    kinds = dict(axis_kinds or {})
    seed = manifest.seed if bootstrap_seed is None else int(bootstrap_seed)
    nominal = _nominal_condition(manifest)
    by_cond, out_of_view = apply_in_view(_group(results, manifest), nominal.name, kinds)
    nom_success = {r.episode_index: r.success for r in by_cond[nominal.name]
                   if not is_invalid(r)}
    nom_invalid = {r.episode_index for r in by_cond[nominal.name] if is_invalid(r)}
    paired = _Paired(manifest, by_cond, nom_success, nom_invalid, confidence, n_boot, seed,
                     out_of_view)

    conditions = tuple(
        _condition_stats(c, by_cond[c.name], confidence) for c in manifest.conditions
    )
    singles: list[AxisGap] = []
    multis: list[AxisGap] = []
    for c in manifest.conditions:
        if c.name == nominal.name or not c.levels:
            continue
        gap = _axis_gap(c, paired, obs_mode, kinds)
        (singles if len(c.levels) == 1 else multis).append(gap)

    seq = None
    if manifest.sequential is not None:
        from robogen.reports.sequential_build import apply_sequential

        conditions, singles, multis, seq = apply_sequential(manifest, by_cond, conditions,
                                                            singles, multis)
    order = _difficulty_order(singles, manifest.axes)
    rank = {a: i for i, a in enumerate(order)}
    for a in (*manifest.axes, *(g.axis for g in singles)):  # axes without a gap go last
        rank.setdefault(a, len(rank))
    singles.sort(key=lambda g: (rank[g.axis], g.severity, g.split, g.condition))
    interactions = _interactions(paired)
    if seq is not None:
        from robogen.reports.sequential_build import label_fixed_n

        interactions = label_fixed_n(interactions)
    curves = _severity_curves(manifest, conditions, singles, multis)
    return Report(
        schema_version=REPORT_SCHEMA_VERSION,
        manifest=manifest,
        policy_obs_mode=obs_mode,
        conditions=conditions,
        gaps=tuple(singles),
        combined_gaps=tuple(multis),
        interactions=interactions,
        severity_curves=curves,
        difficulty_order=order,
        confidence=confidence,
        n_boot=n_boot,
        bootstrap_seed=seed,
        created=created or datetime.now(UTC).isoformat(timespec="seconds"),
        errors=_errors(results),
        breaking_points=_breaking_points(paired, _unobserved_axes(singles)),
        faults=tuple(faults),
        hardware=hardware,
        sequential=seq,
        safety=safety_stats(
            {c.name: [r for r in by_cond[c.name] if not is_invalid(r)]
             for c in manifest.conditions},
            nominal.name, confidence=confidence, n_boot=n_boot, seed=seed),
    )


@dataclass(frozen=True, slots=True)
class _Paired:
    """What the paired estimates of one report read: the valid episodes by condition, the
    nominal outcomes they pair with (by episode index) and the interval settings."""

    manifest: EvalManifest
    by_cond: Mapping[str, Sequence[EpisodeResult]]
    nom_success: Mapping[int, bool]
    nom_invalid: set[int]
    confidence: float
    n_boot: int
    seed: int
    out_of_view: Mapping[str, Mapping[str, int]]
    """Per condition, episodes each visual axis left the first frame unchanged in."""


def _unobserved_axes(singles: Sequence[AxisGap]) -> set[str]:
    """Axes whose every single-axis gap is "not observed by this policy"."""
    by_axis: dict[str, list[str]] = {}
    for g in singles:
        by_axis.setdefault(g.axis, []).append(g.status)
    return {a for a, st in by_axis.items() if all(s == STATUS_NOT_OBSERVED for s in st)}


def _breaking_points(p: _Paired, unobserved: Collection[str] = ()
                     ) -> tuple[BreakingPoint, ...]:
    """Breaking points of a severity sweep, on the episodes every severity of an axis shares
    (none for an axis the policy does not observe: it cannot break there)."""
    from robogen.stats.sweep import breaking_point

    manifest, nom_success = p.manifest, p.nom_success
    out = []
    for axis in manifest.axes if manifest.breaking_levels else ():
        if axis in unobserved:
            continue
        singles = {c.levels[0].severity: c.name for c in manifest.conditions
                   if c.axes == (axis,) and c.split == "all"}
        maps = {s: {r.episode_index: r.success for r in p.by_cond[n] if r.cause not in
                    INVALID_CAUSES} for s, n in singles.items()}
        idx = sorted(set(nom_success).intersection(*maps.values()))
        if not idx:
            continue
        points = {0.0: np.array([nom_success[i] for i in idx], dtype=bool)}
        points.update({s: np.array([m[i] for i in idx], dtype=bool) for s, m in maps.items()})
        for level in manifest.breaking_levels:
            out.append(breaking_point(axis, points, level, n_boot=BREAKING_N_BOOT,
                                      confidence=p.confidence, seed=p.seed))
    return tuple(out)


def _errors(results: Sequence[EpisodeResult], top: int = 10) -> tuple[tuple[str, str, int], ...]:
    """Distinct ``(cause, message, count)`` of episodes that raised, most frequent first."""
    counts = Counter((r.cause or "", r.error) for r in results if r.error)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple((cause, msg, n) for (cause, msg), n in ranked[:top])


def failure_pairs(
    results: Sequence[EpisodeResult], *, per_condition: int = 1
) -> tuple[FailurePair, ...]:
    """Failed perturbed episodes worth a side-by-side video with their nominal episode.

    Per perturbed condition, episodes whose nominal twin succeeded (the
    discordant pairs that make up the gap) come first, then other failures,
    each in episode-index order.

    Args:
        results: Episode results of one evaluation.
        per_condition: Pairs to pick per perturbed condition, >= 0.

    Returns:
        The chosen pairs, grouped by condition in first-seen order.
    """
    nominal = {r.episode_index: r for r in results if not r.axes and not is_invalid(r)}
    by_cond: dict[str, list[EpisodeResult]] = {}
    for r in results:
        if r.axes and not r.success and not is_invalid(r) and r.episode_index in nominal:
            by_cond.setdefault(r.condition, []).append(r)
    out: list[FailurePair] = []
    for name, rs in by_cond.items():
        rs.sort(key=lambda r: (not nominal[r.episode_index].success, r.episode_index))
        for r in rs[:per_condition]:
            assert r.cause is not None  # a failed episode has a cause (EpisodeResult checks)
            out.append(
                FailurePair(
                    name, r.episode_index, r.seed, r.cause, nominal[r.episode_index].success
                )
            )
    return tuple(out)


# ---------------------------------------------------------------------------- internals


def _group(
    results: Iterable[EpisodeResult], manifest: EvalManifest
) -> dict[str, list[EpisodeResult]]:
    by_cond: dict[str, list[EpisodeResult]] = {c.name: [] for c in manifest.conditions}
    seen: set[tuple[str, int]] = set()
    for r in results:
        if r.condition not in by_cond:
            raise RunDirError(
                f"result of episode {r.episode_index} names condition {r.condition!r}, which the "
                f"manifest does not list (have {list(by_cond)}); were results of another "
                "evaluation mixed into this run dir?"
            )
        if r.env_id != manifest.env_id:
            raise RunDirError(
                f"result of condition {r.condition!r} episode {r.episode_index} is for env "
                f"{r.env_id!r}, but the manifest is for {manifest.env_id!r}"
            )
        key = (r.condition, r.episode_index)
        if key in seen:
            raise RunDirError(
                f"episode {r.episode_index} of condition {r.condition!r} occurs twice in the "
                "results; a run dir must hold each episode once"
            )
        seen.add(key)
        by_cond[r.condition].append(r)
    for rs in by_cond.values():
        rs.sort(key=lambda r: r.episode_index)
    return by_cond


def _nominal_condition(manifest: EvalManifest) -> Condition:
    named = [c for c in manifest.conditions if c.name == NOMINAL]
    if named:
        return named[0]
    for c in manifest.conditions:
        if c.is_nominal:
            return c
    raise RunDirError(
        f"the manifest lists no nominal condition (conditions: "
        f"{[c.name for c in manifest.conditions]}); gaps need one to compare against"
    )


def _condition_stats(
    c: Condition, recorded: Sequence[EpisodeResult], confidence: float
) -> ConditionStats:
    rs = [r for r in recorded if not is_invalid(r)]
    n = len(rs)
    k = sum(r.success for r in rs)
    low, high = wilson_interval(k, n, confidence)
    returns = np.array([r.episode_return for r in rs], dtype=np.float64)
    finite = returns[np.isfinite(returns)]
    counts = Counter(r.cause for r in recorded if not r.success)
    causes = {cause: counts[cause] for cause in CAUSES if counts[cause]}
    n_applied = sum(all(a in r.changed_axes for a in c.axes) for r in rs)
    latencies = [r.policy_latency_ms for r in rs if r.policy_latency_ms is not None]
    return ConditionStats(
        condition=c.name,
        axes=c.axes,
        severity=c.severity,
        split=c.split,
        n=n,
        successes=int(k),
        success_rate=k / n if n else math.nan,
        ci_low=low,
        ci_high=high,
        mean_return=float(finite.mean()) if finite.size else math.nan,
        std_return=float(finite.std(ddof=1)) if finite.size > 1 else math.nan,
        mean_length=float(np.mean([r.length_steps for r in rs])) if n else math.nan,
        causes=causes,
        n_applied=int(n_applied),
        n_invalid=len(recorded) - n,
        mean_policy_latency_ms=float(np.mean(latencies)) if latencies else math.nan,
    )


def _gap_label(c: Condition, manifest: EvalManifest) -> str:
    if len(c.levels) == 1:
        return c.axes[0]
    if set(c.axes) == set(manifest.axes) or c.name.startswith(COMBINED):
        return COMBINED
    return "+".join(c.axes)


def _made_physical(rs: Sequence[EpisodeResult], axis: str) -> bool:
    """True if a visual axis's perturbation was physical in some episode (colliding distractors)."""
    for r in rs:
        for rec in json.loads(r.perturbations_json or "[]"):
            if rec.get("axis") == axis and (rec.get("values") or {}).get("physical"):
                return True
    return False


def _status(
    c: Condition,
    rs: Sequence[EpisodeResult],
    obs_mode: str,
    kinds: Mapping[str, str],
    env_id: str,
    inputs: Sequence[str] = (),
) -> tuple[str, str]:
    n = len(rs)
    if n == 0:
        return STATUS_NO_DATA, "no valid episodes of this condition recorded yet"
    applied = {a: sum(a in r.changed_axes for r in rs) for a in c.axes}
    if all(k == 0 for k in applied.values()):
        what = f"the {c.axes[0]} axis" if len(c.axes) == 1 else f"its axes ({', '.join(c.axes)})"
        return STATUS_NOT_APPLIED, (
            f"{what} changed the scene or state in 0 of {n} episodes on {env_id} "
            "(no scene element it acts on, or no effect)"
        )
    notes = []
    never = [a for a, k in applied.items() if k == 0]
    if never:
        notes.append(f"not applied: {', '.join(never)}")
    partial = [f"{a} {k}/{n}" for a, k in applied.items() if 0 < k < n]
    if partial:
        notes.append(f"applied in only some episodes: {', '.join(partial)}")
    unseen = _unobserved(c, rs, obs_mode, kinds, inputs, applied)
    if unseen:
        active = [a for a in c.axes if applied[a]]
        if len(unseen) == len(active):
            notes.insert(0, next(iter(unseen.values())))
            return STATUS_NOT_OBSERVED, "; ".join(notes)
        notes.append(f"not observed by this policy: {', '.join(unseen)}")
    return STATUS_OK, "; ".join(notes)


def _unobserved(
    c: Condition,
    rs: Sequence[EpisodeResult],
    obs_mode: str,
    kinds: Mapping[str, str],
    inputs: Sequence[str],
    applied: Mapping[str, int],
) -> dict[str, str]:
    """The applied axes of ``c`` that cannot reach the policy, with why: a visual axis on a
    state policy (unless it also changed the dynamics), a sensor axis on a policy that reads
    the simulator instead of its observation (a privileged expert), a language axis on a
    policy without a prompt."""
    out: dict[str, str] = {}
    for a in c.axes:
        if not applied[a]:
            continue
        kind = kinds.get(a)
        if kind == "visual" and obs_mode == "state" and not _made_physical(rs, a):
            out[a] = (f"the policy observes {obs_mode!r} only, so this visual change cannot "
                      "reach it; a gap means the axis also changed the state or dynamics")
        elif kind == "sensor" and inputs and "observation" not in inputs:
            out[a] = ("the policy reads the simulator's state (a privileged expert), not its "
                      "observation, so this sensor corruption cannot reach it")
        elif kind == "language" and inputs and "prompt" not in inputs:
            out[a] = ("the policy takes no instruction (no prompt), so this rewritten prompt "
                      "cannot reach it")
    return out


def _axis_gap(c: Condition, p: _Paired, obs_mode: str, kinds: Mapping[str, str]) -> AxisGap:
    recorded = p.by_cond[c.name]
    rs = [r for r in recorded if not is_invalid(r)]
    status, note = _status(c, rs, obs_mode, kinds, p.manifest.env_id, p.manifest.policy_inputs)
    hidden = p.out_of_view.get(c.name)
    if hidden and status not in (STATUS_NO_DATA,):
        what = ", ".join(f"{a} in {k} of {len(rs)} episodes" for a, k in sorted(hidden.items()))
        extra = f"{NOT_IN_VIEW} (first frame identical to nominal): {what}"
        note = f"{note}; {extra}" if note else extra
    lost = [r for r in recorded if is_invalid(r) or r.episode_index in p.nom_invalid]
    if recorded and len(lost) > INVALID_SHARE_LIMIT * len(recorded):
        own = sum(is_invalid(r) for r in recorded)
        status, note = STATUS_INVALID, (
            f"{len(lost)} of {len(recorded)} episodes are invalid here or in their nominal "
            f"twin ({own} here; causes: "
            f"{', '.join(sorted({str(r.cause) for r in recorded if is_invalid(r)}) or ['–'])}"
            f"), above the {INVALID_SHARE_LIMIT:.0%} limit: the simulator or the machinery "
            "failed, so no gap is reported")
    pairs = [(p.nom_success[r.episode_index], r.success) for r in rs
             if r.episode_index in p.nom_success]
    arr = np.array(pairs, dtype=bool).reshape(-1, 2)
    pg = paired_gap(arr[:, 0], arr[:, 1], n_boot=p.n_boot, confidence=p.confidence, seed=p.seed)
    if pg.n == 0 and status not in (STATUS_NOT_APPLIED, STATUS_NO_DATA, STATUS_INVALID):
        status, note = STATUS_NO_DATA, "no episode index is shared with the nominal condition yet"
    hide = status in (STATUS_NOT_APPLIED, STATUS_NO_DATA, STATUS_INVALID)
    nan = math.nan
    return AxisGap(
        condition=c.name,
        axis=_gap_label(c, p.manifest),
        axes=c.axes,
        severity=c.severity,
        split=c.split,
        gap=nan if hide else pg.gap,
        ci_low=nan if hide else pg.ci_low,
        ci_high=nan if hide else pg.ci_high,
        n_pairs=pg.n,
        n10=pg.n10,
        n01=pg.n01,
        nominal_rate=pg.nominal_rate,
        perturbed_rate=pg.perturbed_rate,
        relative_drop=nan if hide else pg.relative_drop,
        status=status,
        note=note,
        ci_method=pg.ci_method,
    )


def _difficulty_order(gaps: Sequence[AxisGap], axes: Sequence[str]) -> tuple[str, ...]:
    """Axes by gap at their highest severity, hardest first.

    Only gaps with status ``ok`` count (not an axis the policy cannot see, nor one
    that changed nothing); empty when every such gap is 0, as there is no order.
    """
    best: dict[str, tuple[float, int, float]] = {}
    for g in gaps:
        if not math.isfinite(g.gap) or g.status != STATUS_OK:
            continue
        key = (g.severity, int(g.split == "all"))
        if g.axis not in best or key > best[g.axis][:2]:
            best[g.axis] = (*key, g.gap)
    if all(v[2] == 0 for v in best.values()):
        return ()
    position = {a: i for i, a in enumerate(axes)}
    return tuple(sorted(best, key=lambda a: (-best[a][2], position.get(a, len(position)), a)))


def _interactions(p: _Paired) -> tuple[InteractionStats, ...]:
    manifest, by_cond, nom_success = p.manifest, p.by_cond, p.nom_success
    single_by_level = {c.levels[0]: c.name for c in manifest.conditions if len(c.levels) == 1}
    out = []
    for c in manifest.conditions:
        if len(c.levels) < 2 or not all(lv in single_by_level for lv in c.levels):
            continue
        names = [single_by_level[lv] for lv in c.levels]
        maps = [{r.episode_index: r.success for r in by_cond[nm] if not is_invalid(r)}
                for nm in names]
        comb = {r.episode_index: r.success for r in by_cond[c.name] if not is_invalid(r)}
        common = sorted(set(nom_success).intersection(comb, *maps))
        it = interaction(
            np.array([nom_success[i] for i in common], dtype=bool),
            [np.array([m[i] for i in common], dtype=bool) for m in maps],
            np.array([comb[i] for i in common], dtype=bool),
            n_boot=p.n_boot,
            confidence=p.confidence,
            seed=p.seed,
        )
        out.append(
            InteractionStats(
                condition=c.name,
                axes=c.axes,
                severity=c.severity,
                split=c.split,
                interaction=it.interaction,
                ci_low=it.ci_low,
                ci_high=it.ci_high,
                combined_gap=it.combined_gap,
                single_gaps=it.single_gaps,
                n=it.n,
                ci_method=it.ci_method,
            )
        )
    return tuple(out)


def _severity_curves(
    manifest: EvalManifest,
    stats: Sequence[ConditionStats],
    singles: Sequence[AxisGap],
    multis: Sequence[AxisGap],
) -> tuple[SeverityCurve, ...]:
    by_name = {s.condition: s for s in stats}
    nominal = by_name[_nominal_condition(manifest).name]
    curves = []
    groups: dict[str, list[AxisGap]] = {}
    for g in (*singles, *multis):
        if g.split == "all":
            groups.setdefault(g.axis, []).append(g)
    for axis, gs in groups.items():
        gs = sorted(gs, key=lambda g: g.severity)
        pts = [nominal, *(by_name[g.condition] for g in gs)]
        curves.append(
            SeverityCurve(
                axis=axis,
                severities=(0.0, *(g.severity for g in gs)),
                success_rates=tuple(p.success_rate for p in pts),
                ci_lows=tuple(p.ci_low for p in pts),
                ci_highs=tuple(p.ci_high for p in pts),
                ns=tuple(p.n for p in pts),
                status=gs[-1].status,
            )
        )
    return tuple(curves)
