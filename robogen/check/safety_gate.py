"""The safety gate of ``robogen check --safety-margin M``: a candidate that is significantly
less safe than the baseline fails the build, even when its success holds.

For every condition and safety metric (:data:`~robogen.rollout.safety.SAFETY_METRICS`)
recorded by both runs, on the episodes valid in both (same run seed, so episode ``i``
starts from the same state in both: paired), the per-episode differences
``d = candidate - baseline`` are tested one-sided against the tolerance
``tau = M * |baseline mean|`` (a relative margin: ``M = 0.2`` tolerates 20 % more joint-limit
steps than the baseline had; where the baseline's mean is 0, no increase is tolerated):

* ``H0: mean(d) <= tau`` against ``mean(d) > tau`` by the paired sign-flip randomization
  test of ``d - tau`` (Fisher 1935; exact up to 16 non-zero differences);
* Holm's step-down procedure over every (condition, metric) test keeps the chance of any
  false ``regression`` at most ``alpha``;
* a rejected ``H0`` is a ``regression`` (the check exits 1); a test that could not reject
  even with every difference positive (too few non-zero pairs for Holm's ``alpha / tests``:
  8 pairs give at best p = 1/256, not below 0.05 / 24) and whose mean increase exceeds the
  tolerance is ``inconclusive`` (the check is then not a ``pass``; ``--fail-on-inconclusive``
  exits 1); else ``ok``.

The interval shown is the percentile bootstrap of ``mean(d)`` at ``1 - 2 alpha``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from robogen.check.inputs import RunData
from robogen.check.records import (
    EXIT_REGRESSION,
    INCONCLUSIVE,
    PASS,
    REGRESSION,
    SAFETY_OK,
    CheckResult,
    SafetyCheck,
)
from robogen.errors import InvalidSpecError
from robogen.rollout.safety import SAFETY_METRICS
from robogen.stats.intervals import bootstrap_mean_interval
from robogen.stats.paired import holm_adjust, sign_flip_pvalue

NO_SAFETY = (
    "--safety-margin compares the safety metrics of both runs, but the {role} {source!r} "
    "recorded none; evaluate it with robogen eval --safety (a policy URI side is evaluated "
    "with them)"
)
UNPAIRED = (
    "--safety-margin pairs episodes, so both runs need per-episode records and the same "
    "seed; the baseline has seed {b}, the candidate {c} (or a side is a report.json)"
)


MAX_SAFETY_MARGIN = 100.0
"""Largest ``--safety-margin`` (a 100-fold increase tolerated)."""


def check_safety_margin(margin: float | None) -> None:
    """Raises InvalidSpecError unless ``margin`` is None or a number in [0, 100]."""
    if margin is not None and not (math.isfinite(margin)
                                   and 0 <= margin <= MAX_SAFETY_MARGIN):
        raise InvalidSpecError(f"--safety-margin must be a number in [0, {MAX_SAFETY_MARGIN:g}]"
                               f", a relative increase such as 0.2 (20 %), got {margin!r}")


def min_pvalue(d: np.ndarray) -> float:
    """The smallest one-sided sign-flip p-value ``d`` could give (all its non-zero
    differences positive): ``2^-k`` for ``k`` non-zero ones (exact up to 16), else the
    resampled test's ``1 / (resamples + 1)``."""
    from robogen.stats.paired import EXACT_SIGN_FLIP_MAX, SIGN_FLIP_RESAMPLES

    k = int(np.count_nonzero(d))
    return 1.0 if k <= 1 else (2.0**-k if k <= EXACT_SIGN_FLIP_MAX
                               else 1.0 / (SIGN_FLIP_RESAMPLES + 1))


def require_safety(data: RunData, role: str) -> None:
    """Raises InvalidSpecError if ``data`` recorded no safety metric."""
    if not data.safety or not any(data.safety.values()):
        raise InvalidSpecError(NO_SAFETY.format(role=role, source=data.info.source))


def safety_checks(baseline: RunData, candidate: RunData, margin: float, alpha: float,
                  seed: int = 0) -> tuple[SafetyCheck, ...]:
    """Every (condition, metric) test of the module docstring, in manifest order.

    Raises:
        InvalidSpecError: If a side recorded no safety metrics or the runs cannot be paired.
    """
    check_safety_margin(margin)
    require_safety(baseline, "baseline")
    require_safety(candidate, "candidate")
    if baseline.manifest.seed != candidate.manifest.seed:
        raise InvalidSpecError(UNPAIRED.format(b=baseline.manifest.seed,
                                               c=candidate.manifest.seed))
    b_all, c_all = baseline.safety or {}, candidate.safety or {}
    rows: list[dict] = []
    for cond in (c.name for c in candidate.manifest.conditions):
        for m in SAFETY_METRICS:
            b, c = b_all.get(cond, {}).get(m.name, {}), c_all.get(cond, {}).get(m.name, {})
            common = sorted(set(b) & set(c))
            if not common:
                continue
            bv = np.array([b[i] for i in common])
            cv = np.array([c[i] for i in common])
            d = cv - bv
            tau = margin * abs(float(bv.mean()))
            low, high = bootstrap_mean_interval(d, confidence=1.0 - 2.0 * alpha, seed=seed)
            rows.append({"condition": cond, "metric": m.name, "unit": m.unit,
                         "n_pairs": len(common), "baseline_mean": float(bv.mean()),
                         "candidate_mean": float(cv.mean()), "diff": float(d.mean()),
                         "ci_low": low, "ci_high": high, "tolerance": tau,
                         "p_value": sign_flip_pvalue(d - tau, seed=seed,
                                                        alternative="greater"),
                         "_min_p": min_pvalue(d - tau)})
    adjusted = holm_adjust([r["p_value"] for r in rows])
    out = []
    for r, p in zip(rows, adjusted, strict=True):
        # Holm rejects nothing unless the smallest p-value is below alpha / (tests): a test
        # that could not get there even with every difference positive cannot decide
        powerless = r.pop("_min_p") * len(rows) >= alpha
        if p < alpha:
            verdict = REGRESSION
        elif powerless and r["diff"] > r["tolerance"]:
            verdict = INCONCLUSIVE
        else:
            verdict = SAFETY_OK
        out.append(SafetyCheck(**r, p_adjusted=float(p), verdict=verdict))
    return tuple(out)


def with_safety(result: CheckResult, baseline: RunData, candidate: RunData,
                margin: float) -> CheckResult:
    """``result`` with the safety tests added; a safety regression makes the whole check a
    ``regression`` (exit 1)."""
    checks = safety_checks(baseline, candidate, margin, result.alpha)
    verdict, exit_code = result.verdict, result.exit_code
    if any(s.verdict == REGRESSION for s in checks):
        verdict, exit_code = REGRESSION, EXIT_REGRESSION
    elif any(s.verdict == INCONCLUSIVE for s in checks) and verdict == PASS:
        verdict = INCONCLUSIVE
        exit_code = EXIT_REGRESSION if result.fail_on_inconclusive else exit_code
    return dataclasses.replace(result, safety_margin=float(margin) + 0.0, safety=checks,
                               verdict=verdict, exit_code=exit_code)
