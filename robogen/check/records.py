"""Frozen records of a regression check and their JSON (de)serialization (``check.json``).

Verdicts (per condition, per axis and overall), with ``delta = p_candidate -
p_baseline`` and margin ``m``; every test is one-sided at the Holm-adjusted
level (see :mod:`robogen.check.gate`):

* ``pass``: non-inferiority shown: ``H0: delta <= -m`` rejected.
* ``regression``: the candidate is shown worse than the baseline by more than
  the margin: ``H0: delta >= -m`` rejected.
* ``inconclusive``: neither (too few episodes for the size of the effect).
* ``not applied``: the condition's axes changed nothing in the scene (it
  repeats nominal), so it is not tested.
* ``no data``: a run has no episode of the condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from robogen.errors import RunDirError
from robogen.serialization import Record, decode, encode, find_record
from robogen.types import ConditionSplit

CHECK_SCHEMA_VERSION = 1
"""Version of the ``check.json`` layout."""

PASS = "pass"
REGRESSION = "regression"
INCONCLUSIVE = "inconclusive"
NOT_APPLIED = "not applied"
NO_DATA = "no data"
VERDICTS = (PASS, REGRESSION, INCONCLUSIVE, NOT_APPLIED, NO_DATA)

DEFAULT_MARGIN = 0.05
"""Default non-inferiority margin: a tolerated drop of 5 points of success rate."""
DEFAULT_ALPHA = 0.05
"""Default family-wise error rate of each kind of verdict."""
DEFAULT_LOOKS = 4
"""Default planned looks of the sequential mode."""
DEFAULT_SPENDING = "obrien-fleming"
"""Default alpha-spending function of the sequential mode."""

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_INVALID = 2

SCHEMA_MISMATCH = "check.json schema version {got!r} is not the supported version {want}"


@dataclass(frozen=True, slots=True)
class RunInfo(Record):
    """Where one side of the comparison came from.

    Attributes:
        source: What the user passed (path or policy URI).
        kind: ``run_dir`` (episodes), ``report`` (report.json counts only) or
            ``evaluated`` (a policy robogen ran for this check).
        policy: Policy URI from the run's manifest.
        run_dir: Run directory holding its episodes, if any.
        seed: Run seed (episode i's initial state depends on it and i only).
        n_episodes: Planned episodes per condition.
        episodes_run: Episodes that ran for this check (0 for saved runs).
    """

    source: str
    kind: str
    policy: str
    run_dir: str | None
    seed: int
    n_episodes: int
    episodes_run: int = 0


@dataclass(frozen=True, slots=True)
class ConditionCheck(Record):
    """The test of one condition.

    Attributes:
        condition: Condition name (``nominal``, ``lighting@1``, ``combined@0.5``).
        axis: Group it is reported under: ``nominal``, the axis, or ``combined``.
        severity: Largest severity of the condition, in [0, 1].
        split: Value set of the condition.
        paired: Whether the test paired episodes by index (same initial states).
        n_baseline: Baseline episodes analysed.
        n_candidate: Candidate episodes analysed (== n_baseline when paired).
        baseline_successes: Baseline successes among them.
        candidate_successes: Candidate successes among them.
        baseline_rate: Baseline success rate (NaN without data).
        baseline_ci_low: Lower Wilson bound at ``confidence``.
        baseline_ci_high: Upper Wilson bound.
        candidate_rate: Candidate success rate.
        candidate_ci_low: Lower Wilson bound.
        candidate_ci_high: Upper Wilson bound.
        difference: ``candidate_rate - baseline_rate`` [-].
        diff_ci_low: Lower bound of the difference (Tango score interval if
            paired, Newcombe hybrid score interval if not) at ``confidence``.
        diff_ci_high: Upper bound.
        candidate_only: Paired: episodes only the candidate solved (-1 unpaired).
        baseline_only: Paired: episodes only the baseline solved (-1 unpaired).
        p_noninferiority: Raw exact p-value of ``H0: delta <= -margin``.
        p_noninferiority_adj: Holm-adjusted within its family and look.
        p_regression: Raw exact p-value of ``H0: delta >= -margin``.
        p_regression_adj: Holm-adjusted.
        level: Significance level the adjusted p-values were compared with
            (alpha, or the alpha spent at the deciding look in sequential mode).
        verdict: One of :data:`VERDICTS`.
        decided_at: Sequential mode: episodes per condition at the deciding
            look (the last look run if undecided); else the episodes analysed.
        note: Why a condition is not tested, or other remarks; else "".
        episodes_to_decide: Inconclusive conditions: a planning estimate of the episodes
            per run (pairs when paired) at which the observed success rates would decide
            (:func:`robogen.check.planning.episodes_to_decide`); -1 for decided or untested
            conditions, or when no number would decide at the observed difference.
    """

    condition: str
    axis: str
    severity: float
    split: ConditionSplit
    paired: bool
    n_baseline: int
    n_candidate: int
    baseline_successes: int
    candidate_successes: int
    baseline_rate: float
    baseline_ci_low: float
    baseline_ci_high: float
    candidate_rate: float
    candidate_ci_low: float
    candidate_ci_high: float
    difference: float
    diff_ci_low: float
    diff_ci_high: float
    candidate_only: int
    baseline_only: int
    p_noninferiority: float
    p_noninferiority_adj: float
    p_regression: float
    p_regression_adj: float
    level: float
    verdict: str
    decided_at: int
    note: str
    episodes_to_decide: int = -1


@dataclass(frozen=True, slots=True)
class AxisCheck(Record):
    """An axis (all its conditions: severities and splits) as one CI test case.

    Attributes:
        axis: ``nominal``, an axis name, or ``combined``.
        conditions: Its condition names.
        verdict: ``regression`` if any condition regressed, ``pass`` if every
            tested condition passed, ``not applied`` if none was tested, else
            ``inconclusive``.
        worst_difference: Smallest ``difference`` among its tested conditions.
        p_regression_adj: Smallest adjusted regression p-value among them.
        p_noninferiority_adj: Largest adjusted non-inferiority p-value among them.
    """

    axis: str
    conditions: tuple[str, ...]
    verdict: str
    worst_difference: float
    p_regression_adj: float
    p_noninferiority_adj: float


@dataclass(frozen=True, slots=True)
class SequentialInfo(Record):
    """How a sequential check ran.

    Attributes:
        spending: Alpha-spending function name.
        schedule: Planned episodes per condition at each look.
        levels: Alpha spent at each planned look (sums to alpha).
        looks_run: Looks actually run before every condition was decided.
        episodes_run: Episodes run for this check (candidate plus evaluated baseline).
        episodes_budget: Episodes a fixed-size check would have run.
        episodes_saved: ``episodes_budget - episodes_run``.
    """

    spending: str
    schedule: tuple[int, ...]
    levels: tuple[float, ...]
    looks_run: int
    episodes_run: int
    episodes_budget: int
    episodes_saved: int


SAFETY_OK = "ok"
"""Verdict of a safety test that found no significant increase."""


@dataclass(frozen=True, slots=True)
class SafetyCheck(Record):
    """The safety test of one condition and metric.

    Attributes:
        condition: Condition name.
        metric: Metric name.
        unit: Its unit.
        n_pairs: Episodes valid and measured in both runs.
        baseline_mean: Baseline mean over them.
        candidate_mean: Candidate mean over them.
        diff: Mean paired difference ``candidate - baseline``.
        ci_low: Lower bootstrap bound of ``diff`` (level ``1 - 2 alpha``).
        ci_high: Upper bootstrap bound of ``diff``.
        tolerance: ``margin * |baseline_mean|``, in the metric's unit.
        p_value: One-sided p-value of ``H0: mean(d) <= tolerance``.
        p_adjusted: Holm-adjusted over every test of the check.
        verdict: ``regression``, ``inconclusive`` (an increase beyond the tolerance that
            the test cannot decide with so few pairs) or ``ok``.
    """

    condition: str
    metric: str
    unit: str
    n_pairs: int
    baseline_mean: float
    candidate_mean: float
    diff: float
    ci_low: float
    ci_high: float
    tolerance: float
    p_value: float
    p_adjusted: float
    verdict: str


@dataclass(frozen=True, slots=True)
class CheckResult(Record):
    """Everything a regression check decided; serialized as ``check.json``.

    Attributes:
        schema_version: :data:`CHECK_SCHEMA_VERSION`.
        verdict: Overall: ``regression`` if any axis regressed, ``pass`` if every
            tested axis passed, else ``inconclusive``.
        exit_code: 0 no regression, 1 regression (or inconclusive when
            ``fail_on_inconclusive``).
        env_id: Env id of both runs.
        margin: Non-inferiority margin on the success rate [-].
        alpha: Family-wise error rate of each kind of decision.
        confidence: Two-sided level of the intervals shown (``1 - 2 alpha``,
            so each bound is a one-sided ``1 - alpha`` bound).
        design: ``paired``, ``unpaired`` or ``mixed`` (per condition).
        fail_on_inconclusive: Whether an inconclusive check exits 1.
        baseline: The baseline's provenance.
        candidate: The candidate's provenance.
        conditions: One test per condition, in manifest order.
        axes: Per-axis verdicts, in manifest order (nominal first).
        baseline_mean: Baseline success averaged over tested conditions.
        candidate_mean: Candidate success averaged over tested conditions.
        sequential: Sequential-mode details, or None for a fixed-size check.
        created: ISO 8601 UTC time of the check.
        safety_margin: ``--safety-margin`` (relative tolerated increase of a safety
            metric), or None when safety was not checked.
        safety: The safety tests (:mod:`robogen.check.safety_gate`), condition by condition;
            a ``regression`` among them makes the check's verdict ``regression``.
    """

    schema_version: int
    verdict: str
    exit_code: int
    env_id: str
    margin: float
    alpha: float
    confidence: float
    design: str
    fail_on_inconclusive: bool
    baseline: RunInfo
    candidate: RunInfo
    conditions: tuple[ConditionCheck, ...]
    axes: tuple[AxisCheck, ...]
    baseline_mean: float
    candidate_mean: float
    sequential: SequentialInfo | None
    created: str
    safety_margin: float | None = None
    safety: tuple[SafetyCheck, ...] = ()

    def condition(self, name: str) -> ConditionCheck:
        """The test of condition ``name`` (KeyError listing the names if absent)."""
        return find_record(self.conditions, "condition", name)

    def axis(self, name: str) -> AxisCheck:
        """The verdict of axis ``name`` (KeyError listing the axes if absent)."""
        return find_record(self.axes, "axis", name)

    @property
    def regressions(self) -> tuple[str, ...]:
        """Axes with a regression verdict, then ``safety: METRIC`` for each safety metric
        with a regression in some condition."""
        safety = dict.fromkeys(f"safety: {s.metric}" for s in self.safety
                               if s.verdict == REGRESSION)
        return (*(a.axis for a in self.axes if a.verdict == REGRESSION), *safety)

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON dict (non-finite floats become ``null``)."""
        return encode(self, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`to_dict` (``null`` floats read as NaN).

        Raises:
            RunDirError: On another schema version or a malformed dict (naming the field).
        """
        if d.get("schema_version") != CHECK_SCHEMA_VERSION:
            raise RunDirError(SCHEMA_MISMATCH.format(got=d.get("schema_version"),
                                                     want=CHECK_SCHEMA_VERSION))
        try:
            return decode(cls, d)
        except ValueError as e:
            raise RunDirError(f"check.json is malformed: {e}") from e
