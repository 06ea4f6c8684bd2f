"""The regression gate's decisions: per-condition tests, Holm over conditions, verdicts.

For every condition of the evaluation (nominal, each axis at each severity or
split, the combined conditions) two one-sided tests are run on ``delta =
p_candidate - p_baseline`` with margin ``m`` (:mod:`robogen.check.noninferiority`):

* non-inferiority, ``H0: delta <= -m``; rejected -> ``pass``;
* regression, ``H0: delta >= -m``; rejected -> ``regression``.

Each family (all non-inferiority tests; all regression tests) is corrected
with Holm's step-down procedure over the tested conditions, so the chance of
*any* false ``regression`` verdict is at most alpha whenever the candidate is
truly within the margin on every condition (and likewise for a false
``pass``). The two tests cannot both reject for alpha < 0.5. A condition that
neither test decides is ``inconclusive``. An axis groups its conditions (its
severities and splits); the overall verdict is ``regression`` if any axis
regressed, ``pass`` if every tested axis passed, else ``inconclusive``.

Pairing: when both runs have per-episode outcomes and the same run seed,
episode i of a condition starts from the same initial state in both runs
(common random numbers), so the test is paired on the common episode indices;
otherwise it is unpaired on the counts.

:func:`compare` is the fixed-size check; :func:`sequential_check` adds
looks with alpha spending (:mod:`robogen.check.sequential`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from robogen.check.inputs import RunData, check_protocols
from robogen.check.noninferiority import (
    TestResult,
    holm_adjust,
    newcombe_interval,
    paired_noninferiority,
    tango_interval,
    unpaired_noninferiority,
)
from robogen.check.planning import episodes_to_decide
from robogen.check.records import (
    CHECK_SCHEMA_VERSION,
    DEFAULT_ALPHA,
    DEFAULT_LOOKS,
    DEFAULT_MARGIN,
    DEFAULT_SPENDING,
    EXIT_OK,
    EXIT_REGRESSION,
    INCONCLUSIVE,
    NO_DATA,
    NOT_APPLIED,
    PASS,
    REGRESSION,
    AxisCheck,
    CheckResult,
    ConditionCheck,
    SequentialInfo,
)
from robogen.check.sequential import look_levels, look_schedule
from robogen.errors import MUST_BE_IN_RANGE, InvalidSpecError
from robogen.reports.records import INVALID_SHARE_LIMIT
from robogen.stats.intervals import wilson_interval
from robogen.types import NOMINAL, Condition, EvalManifest

CANNOT_PAIR = (
    "a paired test needs per-episode outcomes of both runs with the same run seed; "
    "{why}. Drop paired=True (the check then pairs when it can), or evaluate the candidate "
    "with the baseline's manifest"
)


@dataclass(frozen=True, slots=True)
class _Test:
    paired: bool
    n_b: int
    n_c: int
    x_b: int
    x_c: int
    cand_only: int
    base_only: int
    ni: TestResult
    reg: TestResult
    ci: tuple[float, float]


@dataclass
class _State:
    cond: Condition
    axis: str
    test: _Test | None = None
    verdict: str | None = None
    adj_ni: float = math.nan
    adj_reg: float = math.nan
    level: float = math.nan
    decided_at: int = 0
    note: str = ""


class OutcomeSource(Protocol):
    """Supplies outcomes look by look to :func:`sequential_check`."""

    manifest: EvalManifest
    """The protocol both runs follow (conditions, ``n_episodes``, ``batch_size``)."""
    sides_evaluated: int
    """How many of the two sides run episodes for the check (1 or 2; 0 for stored data)."""

    def advance(self, n: int, conditions: Sequence[str]) -> tuple[RunData, RunData]:
        """Make episodes ``0..n-1`` of ``conditions`` available; return (baseline, candidate)."""
        ...


class StaticSource:
    """An :class:`OutcomeSource` over outcomes already known (synthetic or stored runs).

    Args:
        baseline: Baseline outcomes.
        candidate: Candidate outcomes (its manifest gives the protocol).
        sides_evaluated: Sides counted as run for the check when reporting
            episodes saved (1: only the candidate would have been evaluated).
    """

    def __init__(self, baseline: RunData, candidate: RunData, sides_evaluated: int = 1) -> None:
        self.baseline = baseline
        self.candidate = candidate
        self.manifest = candidate.manifest
        self.sides_evaluated = sides_evaluated

    def advance(self, n: int, conditions: Sequence[str]) -> tuple[RunData, RunData]:
        """The first n episodes of ``conditions`` on the evaluated sides."""
        cand = self.candidate.first(n, conditions)
        base = self.baseline.first(n, conditions) if self.sides_evaluated == 2 else self.baseline
        return base, cand


def axis_of(cond: Condition) -> str:
    """The group a condition is reported under: ``nominal``, its axis, or its name before ``@``."""
    if not cond.levels:
        return NOMINAL
    if len(cond.levels) == 1:
        return cond.levels[0].axis
    return cond.name.split("@", 1)[0]


def _check_args(margin: float, alpha: float) -> None:
    if not (math.isfinite(margin) and 0.0 <= margin < 1.0):
        raise InvalidSpecError(MUST_BE_IN_RANGE.format(field="margin", low=0, high="1 (exclusive)",
                                                       value=margin))
    if not (math.isfinite(alpha) and 0.0 < alpha < 0.5):
        raise InvalidSpecError(MUST_BE_IN_RANGE.format(field="alpha", low="0 (exclusive)",
                                                       high="0.5 (exclusive)", value=alpha))


def _pairing(baseline: RunData, candidate: RunData, paired: bool | None) -> bool:
    why = ""
    if baseline.episodes is None or candidate.episodes is None:
        side = "baseline" if baseline.episodes is None else "candidate"
        why = f"the {side} is a report.json without its episodes"
    elif baseline.manifest.seed != candidate.manifest.seed:
        why = (f"the run seeds differ (baseline {baseline.manifest.seed}, candidate "
               f"{candidate.manifest.seed})")
    if paired is None:
        return not why
    if paired and why:
        raise InvalidSpecError(CANNOT_PAIR.format(why=why))
    return paired


def _condition_test(
    name: str, base: RunData, cand: RunData, margin: float, pair: bool, confidence: float
) -> _Test | None:
    if pair:
        assert base.episodes is not None and cand.episodes is not None
        eb, ec = base.episodes.get(name), cand.episodes.get(name)
        if eb is None or ec is None:
            return None
        _, ib, ic = np.intersect1d(eb.episode_index, ec.episode_index, assume_unique=True,
                                   return_indices=True)
        n = int(ib.size)
        if n == 0:
            return None
        yb, yc = eb.success[ib], ec.success[ic]
        b, c = int(np.sum(yc & ~yb)), int(np.sum(~yc & yb))
        return _Test(
            True, n, n, int(yb.sum()), int(yc.sum()), b, c,
            paired_noninferiority(b, c, n, float(margin)),
            paired_noninferiority(c, b, n, -float(margin)),
            tango_interval(b, c, n, confidence),
        )
    x_b, n_b = base.counts.get(name, (0, 0))
    x_c, n_c = cand.counts.get(name, (0, 0))
    if n_b == 0 or n_c == 0:
        return None
    return _Test(
        False, n_b, n_c, x_b, x_c, -1, -1,
        unpaired_noninferiority(x_c, n_c, x_b, n_b, float(margin)),
        unpaired_noninferiority(x_b, n_b, x_c, n_c, -float(margin)),
        newcombe_interval(x_c, n_c, x_b, n_b, confidence),
    )


def _test_look(
    states: dict[str, _State], active: Sequence[str], base: RunData, cand: RunData,
    margin: float, pair: bool, level: float, confidence: float,
) -> None:
    """Test the ``active`` conditions on the data so far and decide those that Holm rejects."""
    tests: dict[str, _Test] = {}
    for name in active:
        st = states[name]
        if name in base.not_applied or name in cand.not_applied:
            st.verdict, st.note = NOT_APPLIED, "the condition's axes changed nothing in the scene"
            continue
        shares = {side: d.invalid_share(name) for side, d in (("baseline", base),
                                                               ("candidate", cand))}
        if any(v > INVALID_SHARE_LIMIT for v in shares.values()):
            st.verdict, st.note = INCONCLUSIVE, (
                "too many invalid episodes (simulator or infrastructure failures: "
                + ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
                + f"; limit {INVALID_SHARE_LIMIT:.0%}); the check cannot pass or fail on "
                "them: fix the cause and re-run (robogen eval --resume retries infra "
                "failures)")
            continue
        t = _condition_test(name, base, cand, margin, pair, confidence)
        if t is None:
            st.verdict, st.note = NO_DATA, "a run has no episode of this condition"
            continue
        tests[name] = t
    names = list(tests)
    adj_ni = holm_adjust([tests[n].ni.p_value for n in names])
    adj_reg = holm_adjust([tests[n].reg.p_value for n in names])
    for k, name in enumerate(names):
        st = states[name]
        st.test, st.adj_ni, st.adj_reg, st.level = tests[name], adj_ni[k], adj_reg[k], level
        st.decided_at = tests[name].n_c
        if adj_reg[k] <= level:
            st.verdict = REGRESSION
        elif adj_ni[k] <= level:
            st.verdict = PASS


def compare(
    baseline: RunData,
    candidate: RunData,
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = DEFAULT_ALPHA,
    paired: bool | None = None,
    fail_on_inconclusive: bool = False,
) -> CheckResult:
    """Fixed-size check of a candidate against a baseline.

    Args:
        baseline: Baseline outcomes.
        candidate: Candidate outcomes under the same protocol.
        margin: Non-inferiority margin on the success rate, in [0, 1).
        alpha: Family-wise error rate of each kind of verdict, in (0, 0.5).
        paired: Force (True) or forbid (False) pairing; None pairs when possible.
        fail_on_inconclusive: Make an inconclusive check exit 1.

    Returns:
        The :class:`CheckResult`.

    Raises:
        InvalidSpecError: On a bad margin/alpha, different protocols (naming
            the fields), or ``paired=True`` when the runs cannot be paired.
    """
    _check_args(margin, alpha)
    check_protocols(baseline, candidate)
    pair = _pairing(baseline, candidate, paired)
    states = {c.name: _State(c, axis_of(c)) for c in candidate.manifest.conditions}
    conf = 1.0 - 2.0 * alpha
    _test_look(states, list(states), baseline, candidate, margin, pair, alpha, conf)
    return _result(states, baseline, candidate, margin, alpha, pair, fail_on_inconclusive, None)


def sequential_check(
    source: OutcomeSource,
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = DEFAULT_ALPHA,
    looks: int = DEFAULT_LOOKS,
    spending: str = DEFAULT_SPENDING,
    paired: bool | None = None,
    fail_on_inconclusive: bool = False,
) -> CheckResult:
    """Group-sequential check: test after each batch, stop conditions once decided.

    Look k (``n_k`` episodes per condition, :func:`~robogen.check.sequential.look_schedule`)
    tests the undecided conditions with Holm at the alpha spent at that look
    (:func:`~robogen.check.sequential.look_levels`); a decided condition runs
    no further episodes. The union bound over looks keeps each family-wise
    error at most alpha.

    Args:
        source: Supplies the outcomes of both sides look by look.
        margin: Non-inferiority margin, in [0, 1).
        alpha: Total family-wise error rate of each kind of verdict, in (0, 0.5).
        looks: Planned number of looks, >= 1 (1 is the fixed-size check).
        spending: Alpha-spending function (``obrien-fleming`` or ``pocock``).
        paired: As in :func:`compare`.
        fail_on_inconclusive: Make an inconclusive check exit 1.

    Returns:
        The :class:`CheckResult` with its :class:`SequentialInfo`.
    """
    _check_args(margin, alpha)
    m = source.manifest
    schedule = look_schedule(m.n_episodes, looks, m.batch_size)
    levels = look_levels(schedule, alpha, spending)
    states = {c.name: _State(c, axis_of(c)) for c in m.conditions}
    used = dict.fromkeys(states, 0)
    conf = 1.0 - 2.0 * alpha
    pair = False
    base = cand = None
    looks_run = 0
    for k, (n_k, level) in enumerate(zip(schedule, levels, strict=True)):
        active = [n for n, st in states.items() if st.verdict is None]
        if not active:
            break
        base, cand = source.advance(n_k, active)
        looks_run += 1
        for n in active:
            used[n] = n_k
        if k == 0:
            check_protocols(base, cand)
            pair = _pairing(base, cand, paired)
        _test_look(states, active, base, cand, margin, pair, level, conf)
    assert base is not None and cand is not None
    sides = source.sides_evaluated
    run = sum(used.values()) * sides
    budget = m.n_episodes * len(states) * sides
    info = SequentialInfo(spending, schedule, levels, looks_run, run, budget, budget - run)
    return _result(states, base, cand, margin, alpha, pair, fail_on_inconclusive, info)


def _rate(x: int, n: int) -> float:
    return x / n if n else math.nan


def _condition_record(st: _State, confidence: float, plan_level: float) -> ConditionCheck:
    verdict = st.verdict or INCONCLUSIVE
    t = st.test
    nan = math.nan
    if t is None:
        return ConditionCheck(
            st.cond.name, st.axis, st.cond.severity, st.cond.split, False, 0, 0, 0, 0,
            nan, nan, nan, nan, nan, nan, nan, nan, nan, -1, -1, nan, nan, nan, nan, nan,
            verdict, 0, st.note,
        )
    bl, bh = wilson_interval(t.x_b, t.n_b, confidence)
    cl, ch = wilson_interval(t.x_c, t.n_c, confidence)
    rb, rc = _rate(t.x_b, t.n_b), _rate(t.x_c, t.n_c)
    need = (episodes_to_decide(t.ni.statistic, min(t.n_b, t.n_c), plan_level)
            if verdict == INCONCLUSIVE else -1)
    return ConditionCheck(
        condition=st.cond.name, axis=st.axis, severity=st.cond.severity, split=st.cond.split,
        paired=t.paired, n_baseline=t.n_b, n_candidate=t.n_c, baseline_successes=t.x_b,
        candidate_successes=t.x_c, baseline_rate=rb, baseline_ci_low=bl, baseline_ci_high=bh,
        candidate_rate=rc, candidate_ci_low=cl, candidate_ci_high=ch, difference=rc - rb,
        diff_ci_low=t.ci[0], diff_ci_high=t.ci[1], candidate_only=t.cand_only,
        baseline_only=t.base_only, p_noninferiority=t.ni.p_value,
        p_noninferiority_adj=float(st.adj_ni), p_regression=t.reg.p_value,
        p_regression_adj=float(st.adj_reg), level=float(st.level), verdict=verdict,
        decided_at=st.decided_at, note=st.note, episodes_to_decide=need,
    )


def _axis_records(conds: Sequence[ConditionCheck]) -> tuple[AxisCheck, ...]:
    groups: dict[str, list[ConditionCheck]] = {}
    for c in conds:
        groups.setdefault(c.axis, []).append(c)
    out = []
    for axis, cs in groups.items():
        tested = [c for c in cs if c.verdict not in (NOT_APPLIED, NO_DATA)]
        if any(c.verdict == REGRESSION for c in tested):
            verdict = REGRESSION
        elif tested and all(c.verdict == PASS for c in tested):
            verdict = PASS
        elif not tested:
            verdict = cs[0].verdict if len({c.verdict for c in cs}) == 1 else NOT_APPLIED
        else:
            verdict = INCONCLUSIVE
        out.append(AxisCheck(
            axis=axis, conditions=tuple(c.condition for c in cs), verdict=verdict,
            worst_difference=min((c.difference for c in tested), default=math.nan),
            p_regression_adj=min((c.p_regression_adj for c in tested), default=math.nan),
            p_noninferiority_adj=max((c.p_noninferiority_adj for c in tested), default=math.nan),
        ))
    return tuple(out)


def _result(
    states: dict[str, _State], baseline: RunData, candidate: RunData, margin: float,
    alpha: float, pair: bool, fail_on_inconclusive: bool, seq: SequentialInfo | None,
) -> CheckResult:
    conf = 1.0 - 2.0 * alpha
    k = max(1, sum(st.test is not None for st in states.values()))
    conds = tuple(_condition_record(st, conf, alpha / k) for st in states.values())
    axes = _axis_records(conds)
    tested = [a for a in axes if a.verdict not in (NOT_APPLIED, NO_DATA)]
    if any(a.verdict == REGRESSION for a in tested):
        verdict = REGRESSION
    elif tested and all(a.verdict == PASS for a in tested):
        verdict = PASS
    else:
        verdict = INCONCLUSIVE
    failing = verdict == REGRESSION or (verdict == INCONCLUSIVE and fail_on_inconclusive)
    rated = [c for c in conds if c.verdict not in (NOT_APPLIED, NO_DATA)]
    return CheckResult(
        schema_version=CHECK_SCHEMA_VERSION, verdict=verdict,
        exit_code=EXIT_REGRESSION if failing else EXIT_OK, env_id=candidate.manifest.env_id,
        margin=float(margin), alpha=float(alpha), confidence=conf,
        design="paired" if pair else "unpaired", fail_on_inconclusive=fail_on_inconclusive,
        baseline=baseline.info, candidate=candidate.info, conditions=conds, axes=axes,
        baseline_mean=float(np.mean([c.baseline_rate for c in rated])) if rated else math.nan,
        candidate_mean=float(np.mean([c.candidate_rate for c in rated])) if rated else math.nan,
        sequential=seq, created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
