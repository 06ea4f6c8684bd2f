"""The records of a policy comparison (``compare.json``): runs, paired differences, ranks.

Built by :func:`robogen.reports.compare.compare_runs` and written by
:mod:`robogen.reports.compare_writers`; kept apart from both so that neither
imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robogen.reports.records import AxisGap
from robogen.reports.safety import SafetyDifference
from robogen.serialization import encode
from robogen.types import EvalManifest

COMPARE_SCHEMA_VERSION = 1
"""Version of the ``compare.json`` layout."""


@dataclass(frozen=True, slots=True)
class ComparedRun:
    """One policy's run in a comparison.

    Attributes:
        label: Short name used in tables (the run dir's name, made unique).
        run_dir: Path of the run directory.
        policy: Policy URI from the manifest.
        policy_obs_mode: What the policy observes.
        nominal_rate: Nominal success rate over valid episodes.
        nominal_ci_low: Lower Wilson bound.
        nominal_ci_high: Upper Wilson bound.
        gaps: The run's paired gaps (single-axis first, then multi-axis), as in its report.
    """

    label: str
    run_dir: str
    policy: str
    policy_obs_mode: str
    nominal_rate: float
    nominal_ci_low: float
    nominal_ci_high: float
    gaps: tuple[AxisGap, ...]


@dataclass(frozen=True, slots=True)
class PolicyDifference:
    """Paired difference between two runs on one perturbed condition.

    Attributes:
        condition: Perturbed condition name.
        axis: Axis label (``texture``, ``combined``, ``lighting+texture``).
        severity: Largest severity of the condition.
        split: Value set of the condition.
        run_a: Label of the first run.
        run_b: Label of the second run.
        n: Episode indices valid in nominal and the condition for both runs.
        gap_a: Paired gap of A on those episodes.
        gap_b: Paired gap of B on those episodes.
        difference: ``gap_a - gap_b`` = mean of ``d_i``; > 0: B is more robust.
        ci_low: Lower bound of ``difference`` (paired bootstrap over episodes,
            add-pseudo-episode Wald with fewer than 10 non-zero ``d_i``).
        ci_high: Upper bound.
        ci_method: ``bootstrap`` or ``augmented-wald``.
        p_value: Two-sided sign-flip (paired randomization) test of ``difference == 0``.
        p_holm: ``p_value`` Holm-adjusted over every (pair, condition) of the comparison.
        success_difference: Perturbed success of A minus B on the same episodes.
        success_ci_low: Lower bound (bootstrap, or Agresti-Min with few discordant pairs).
        success_ci_high: Upper bound.
        mcnemar_p: Exact McNemar p-value of equal perturbed success.
        mcnemar_p_holm: ``mcnemar_p`` Holm-adjusted over the same family.
        note: Why no test was made (an axis not applied in a run, no data), else "".
    """

    condition: str
    axis: str
    severity: float
    split: str
    run_a: str
    run_b: str
    n: int
    gap_a: float
    gap_b: float
    difference: float
    ci_low: float
    ci_high: float
    ci_method: str
    p_value: float
    p_holm: float
    success_difference: float
    success_ci_low: float
    success_ci_high: float
    mcnemar_p: float
    mcnemar_p_holm: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class Ranking:
    """Runs ordered by robustness on one axis (or overall), most robust first.

    Attributes:
        axis: Axis label, or ``overall`` (mean gap over the axes ranked).
        condition: The condition ranked on (the axis's highest severity), "" for overall.
        order: Run labels, smallest gap first.
        gaps: Their gaps, in the same order.
        separated: ``separated[k]``: ``order[k]`` is significantly more robust
            than ``order[k + 1]`` (Holm-adjusted sign-flip p < 1 - confidence);
            always False for ``overall``, which is not tested.
    """

    axis: str
    condition: str
    order: tuple[str, ...]
    gaps: tuple[float, ...]
    separated: tuple[bool, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything ``compare.{json,md,html}`` shows.

    Attributes:
        schema_version: :data:`COMPARE_SCHEMA_VERSION`.
        manifest: Manifest of the first run (the shared protocol; its policy is the first run's).
        runs: The compared runs, in the order given.
        conditions: Perturbed condition names, in the first run's report order.
        differences: Every (pair of runs, condition) paired difference.
        rankings: One per single axis (hardest-first order of the first run), then ``overall``.
        confidence: Two-sided level of every interval; tests use ``1 - confidence``.
        n_boot: Bootstrap resamples per interval.
        created: ISO 8601 UTC build time.
        safety: Paired differences of the safety metrics between the runs (runs recorded
            with ``--safety``), per condition (nominal first); empty otherwise.
        no_safety: Labels of the runs that recorded no safety metrics (their pairs are not
            compared; the markdown says so when only some runs recorded them).
    """

    schema_version: int
    manifest: EvalManifest
    runs: tuple[ComparedRun, ...]
    conditions: tuple[str, ...]
    differences: tuple[PolicyDifference, ...]
    rankings: tuple[Ranking, ...]
    confidence: float
    n_boot: int
    created: str
    safety: tuple[SafetyDifference, ...] = ()
    no_safety: tuple[str, ...] = ()

    def difference(self, condition: str, run_a: str, run_b: str) -> PolicyDifference:
        """The difference of ``run_a`` minus ``run_b`` on ``condition`` (KeyError if absent)."""
        for d in self.differences:
            if d.condition == condition and (d.run_a, d.run_b) == (run_a, run_b):
                return d
        raise KeyError(f"no difference {run_a!r} - {run_b!r} on {condition!r}")

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON dict (non-finite floats become ``null``)."""
        return encode(self, allow_nan=False)
