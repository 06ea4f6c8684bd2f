"""Frozen records of a report and their JSON (de)serialization.

:class:`Report` and its parts serialize with :meth:`Report.to_dict` to strict
JSON (non-finite floats become ``null``) and back with :meth:`Report.from_dict`,
through :mod:`robogen.serialization` (driven by the field annotations).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from robogen.errors import RunDirError
from robogen.reports.safety import SafetyStats
from robogen.rollout.faults import FaultRecord
from robogen.serialization import Record, decode, encode, find_record
from robogen.stats.sequential import SequentialSummary
from robogen.stats.sweep import BreakingPoint
from robogen.types import Cause, ConditionSplit, EvalManifest

REPORT_SCHEMA_VERSION = 1
"""Version of the ``report.json`` layout; bumped on any change of field meaning."""

STATUS_OK = "ok"
STATUS_NOT_APPLIED = "not applied"
STATUS_NOT_OBSERVED = "not observed by this policy"
STATUS_NO_DATA = "no data"
STATUS_INVALID = "too many invalid episodes"
STATUSES = (STATUS_OK, STATUS_NOT_APPLIED, STATUS_NOT_OBSERVED, STATUS_NO_DATA, STATUS_INVALID)
"""Gap statuses: ``ok``; ``not applied`` (the axis changed nothing, gap hidden);
``not observed by this policy`` (a visual axis on a state-only policy, gap shown
but flagged); ``no data`` (no paired episodes yet, gap hidden); ``too many invalid
episodes`` (more than :data:`INVALID_SHARE_LIMIT` of the level's episodes, or of their
nominal twins, are invalid: the simulator or the machinery failed, gap hidden)."""

INVALID_SHARE_LIMIT = 0.2
"""Largest share of a level's episodes that may be invalid (their own or their nominal
twin's cause in :data:`~robogen.types.INVALID_CAUSES`) for its gap to be reported."""

PLOT_FILES = {
    "gaps": "gaps.png",
    "severity": "severity.png",
    "conditions": "conditions.png",
    "interactions": "interactions.png",
}
"""Plot key -> file name under a run's ``plots/`` (:func:`robogen.reports.plots.save_plots`)."""

SCHEMA_MISMATCH = (
    "report schema version {got!r} is not the supported version {want}; "
    "rebuild it from the run dir with: robogen report RUN_DIR"
)


@dataclass(frozen=True, slots=True)
class ConditionStats(Record):
    """Outcome summary of one condition.

    Attributes:
        condition: Condition name.
        axes: Axes perturbed (empty for nominal).
        severity: Largest severity of the condition, in [0, 1].
        split: Value set (``all``, ``train``, ``test`` or ``mixed``).
        n: Valid episodes: recorded episodes whose outcome is the policy's (success,
            ``timeout``, ``terminated``, ``policy_error``); the statistics below use
            only these.
        successes: Successful episodes. ``policy_error`` episodes are failures.
        success_rate: ``successes / n``; NaN when n is 0.
        ci_low: Lower Wilson bound of the success rate.
        ci_high: Upper Wilson bound of the success rate.
        mean_return: Mean episode return over finite returns [-].
        std_return: Sample standard deviation (ddof=1) of finite returns; NaN below 2.
        mean_length: Mean episode length [steps].
        causes: Failure cause -> episode count (only causes that occurred).
        n_applied: Valid episodes in which every axis of the condition changed the
            scene or state (``n`` for the nominal condition).
        n_invalid: Recorded episodes left out of every statistic because the machinery
            failed, not the policy (cause in :data:`~robogen.types.INVALID_CAUSES`:
            ``sim_unstable``, ``worker_died``, ``infra_timeout``, ``infra_error``);
            their causes are counted in ``causes`` too.
        mean_policy_latency_ms: Mean over the valid episodes of each episode's mean
            policy-server round-trip time [ms] (``remote:`` policies); NaN otherwise.
    """

    condition: str
    axes: tuple[str, ...]
    severity: float
    split: ConditionSplit
    n: int
    successes: int
    success_rate: float
    ci_low: float
    ci_high: float
    mean_return: float
    std_return: float
    mean_length: float
    causes: dict[str, int]
    n_applied: int
    n_invalid: int = 0
    mean_policy_latency_ms: float = math.nan


@dataclass(frozen=True, slots=True)
class AxisGap(Record):
    """Paired gap of one perturbed condition against nominal.

    Attributes:
        condition: Name of the perturbed condition.
        axis: The axis, or ``combined`` / ``a+b`` for a multi-axis condition.
        axes: All axes of the condition.
        severity: Largest severity of the condition.
        split: Value set of the condition.
        gap: Nominal minus perturbed success on the paired episodes; NaN when
            ``status`` is ``not applied`` or ``no data``.
        ci_low: Lower bootstrap bound of ``gap`` (NaN like ``gap``).
        ci_high: Upper bootstrap bound of ``gap`` (NaN like ``gap``).
        n_pairs: Episode indices present in both conditions.
        n10: Pairs with nominal success and perturbed failure.
        n01: Pairs with nominal failure and perturbed success.
        nominal_rate: Nominal success over the pairs.
        perturbed_rate: Perturbed success over the pairs.
        relative_drop: ``gap / nominal_rate`` (NaN if that is 0 or gap is NaN).
        status: One of :data:`STATUSES`.
        note: Why the status is not ``ok``, or partial application; else "".
        ci_method: How the interval was computed (``bootstrap`` or ``agresti-min``).
    """

    condition: str
    axis: str
    axes: tuple[str, ...]
    severity: float
    split: ConditionSplit
    gap: float
    ci_low: float
    ci_high: float
    n_pairs: int
    n10: int
    n01: int
    nominal_rate: float
    perturbed_rate: float
    relative_drop: float
    status: str
    note: str
    ci_method: str = "bootstrap"


@dataclass(frozen=True, slots=True)
class InteractionStats(Record):
    """Combined-condition gap against the sum of its single-axis gaps.

    Attributes:
        condition: Name of the multi-axis condition.
        axes: Its axes, in the order of ``single_gaps``.
        severity: Largest severity of the condition.
        split: Value set of the condition.
        interaction: ``combined_gap - sum(single_gaps)``; > 0 the axes compound.
        ci_low: Lower bootstrap bound (episodes resampled jointly).
        ci_high: Upper bootstrap bound.
        combined_gap: Gap of the combined condition on the common episodes.
        single_gaps: Gap of each axis alone at the same level, on the same episodes.
        n: Episodes present in nominal, combined and every single condition.
        ci_method: ``bootstrap`` or ``augmented-wald`` (few non-zero episode terms).
    """

    condition: str
    axes: tuple[str, ...]
    severity: float
    split: ConditionSplit
    interaction: float
    ci_low: float
    ci_high: float
    combined_gap: float
    single_gaps: tuple[float, ...]
    n: int
    ci_method: str = "bootstrap"

    @property
    def sum_single_gaps(self) -> float:
        """Sum of the single-axis gaps (the additive prediction of ``combined_gap``)."""
        return float(sum(self.single_gaps))


@dataclass(frozen=True, slots=True)
class SeverityCurve(Record):
    """Success against severity for one axis (``split == "all"`` conditions plus nominal at 0).

    Attributes:
        axis: Axis name, or ``combined``.
        severities: Severities in increasing order, starting at 0 (nominal).
        success_rates: Success rate at each severity.
        ci_lows: Lower Wilson bounds.
        ci_highs: Upper Wilson bounds.
        ns: Episodes at each severity.
        status: Status of the axis's gap at its highest severity.
    """

    axis: str
    severities: tuple[float, ...]
    success_rates: tuple[float, ...]
    ci_lows: tuple[float, ...]
    ci_highs: tuple[float, ...]
    ns: tuple[int, ...]
    status: str


@dataclass(frozen=True, slots=True)
class Report(Record):
    """Everything a report shows; serialized as ``report.json``.

    Attributes:
        schema_version: :data:`REPORT_SCHEMA_VERSION` at build time.
        manifest: The evaluation manifest.
        policy_obs_mode: Observation the policy consumed (``state``, ``pixels``, ...).
        conditions: Per-condition stats, in manifest order (nominal first).
        gaps: Single-axis gaps, hardest axis first, then by severity and split;
            axes without a gap (not applied, no data) last.
        combined_gaps: Gaps of multi-axis conditions (the all-axes ``combined`` ones).
        interactions: Multi-axis conditions against the sum of their single gaps.
        severity_curves: Success against severity per axis.
        difficulty_order: Axes by gap at their highest severity, hardest first;
            axes without a gap are left out.
        confidence: Two-sided confidence level of every interval.
        n_boot: Bootstrap resamples per interval.
        bootstrap_seed: Seed of the bootstrap resampling.
        created: ISO 8601 UTC time the report was built.
        breaking_points: Per axis and breaking level of a severity sweep
            (:class:`robogen.stats.sweep.BreakingPoint`); empty for fixed grids.
        errors: Distinct error messages of episodes that raised (``policy_error``,
            ``sim_unstable``) as ``(cause, message, count)``, most frequent first
            (at most 10).
        faults: Worker losses and unit retries of the run (``faults.jsonl``), oldest first.
        sequential: Of an ``--episodes auto`` run: the stop rule, the interval method and
            each condition's episodes used and stop reason
            (:class:`robogen.stats.sequential.SequentialSummary`); its gap and success
            intervals are then the anytime-valid ones. None for a fixed-n run.
        safety: Safety metrics per condition with paired differences to nominal
            (:class:`robogen.reports.safety.SafetyStats`); empty unless the run recorded
            them (``robogen eval --safety``).
        hardware: Where the workers ran (``"8 workers on 1x NVIDIA H200, rendering on the
            GPU"``; :func:`robogen.rollout.gpu.hardware_summary` of ``workers.jsonl``);
            ``""`` when unrecorded.
    """

    schema_version: int
    manifest: EvalManifest
    policy_obs_mode: str
    conditions: tuple[ConditionStats, ...]
    gaps: tuple[AxisGap, ...]
    combined_gaps: tuple[AxisGap, ...]
    interactions: tuple[InteractionStats, ...]
    severity_curves: tuple[SeverityCurve, ...]
    difficulty_order: tuple[str, ...]
    confidence: float
    n_boot: int
    bootstrap_seed: int
    created: str
    errors: tuple[tuple[str, str, int], ...] = ()
    breaking_points: tuple[BreakingPoint, ...] = ()
    faults: tuple[FaultRecord, ...] = ()
    sequential: SequentialSummary | None = None
    safety: tuple[SafetyStats, ...] = ()
    hardware: str = ""

    def condition(self, name: str) -> ConditionStats:
        """Stats of the condition called ``name`` (KeyError if absent)."""
        return find_record(self.conditions, "condition", name)

    def gap(self, condition: str) -> AxisGap:
        """Gap of the (single- or multi-axis) condition called ``condition``."""
        for g in (*self.gaps, *self.combined_gaps):
            if g.condition == condition:
                return g
        raise KeyError(f"no gap for condition {condition!r}")

    def invalid_conditions(self) -> tuple[str, ...]:
        """Conditions with too many invalid episodes: more than :data:`INVALID_SHARE_LIMIT`
        of their recorded episodes invalid (any condition, nominal included), or a gap of
        status :data:`STATUS_INVALID`. Their numbers are not measurements of the policy
        (``robogen eval`` then exits 3)."""
        bad = [c.condition for c in self.conditions
               if c.n_invalid > INVALID_SHARE_LIMIT * (c.n + c.n_invalid)]
        bad += [g.condition for g in (*self.gaps, *self.combined_gaps)
                if g.status == STATUS_INVALID]
        return tuple(dict.fromkeys(bad))

    def policy_always_raised(self) -> str | None:
        """The error of a policy that raised in every valid episode of the nominal condition
        (every one ended in ``policy_error``: the run measured no behaviour of the policy, and
        ``robogen eval`` exits 3), else None."""
        nominal = next((c for c in self.conditions if c.condition == "nominal"), None)
        if nominal is None or nominal.n == 0 or nominal.causes.get("policy_error", 0) < nominal.n:
            return None
        return next((msg for cause, msg, _ in self.errors if cause == "policy_error"), "")

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON dict (non-finite floats become ``null``)."""
        return encode(self, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`to_dict` (``null`` floats read as NaN, or +inf where a field
        says so: :attr:`BreakingPoint.ci_high`).

        Raises:
            RunDirError: If ``schema_version`` is not :data:`REPORT_SCHEMA_VERSION`.
            RecordDecodeError: (a ``ValueError``) naming a field that does not match its type.
        """
        if d.get("schema_version") != REPORT_SCHEMA_VERSION:
            raise RunDirError(
                SCHEMA_MISMATCH.format(got=d.get("schema_version"), want=REPORT_SCHEMA_VERSION)
            )
        return decode(cls, d)


@dataclass(frozen=True, slots=True)
class FailurePair(Record):
    """A failed perturbed episode and the nominal episode of the same index, for a video.

    Attributes:
        condition: Perturbed condition name.
        episode_index: Shared episode index.
        seed: Reset seed of the episode.
        cause: Failure cause of the perturbed episode.
        nominal_success: Whether the nominal episode of that index succeeded.
    """

    condition: str
    episode_index: int
    seed: int
    cause: Cause
    nominal_success: bool
