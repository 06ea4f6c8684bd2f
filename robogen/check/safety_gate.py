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
* a rejected ``H0`` is a ``regression`` (the check exits 1), else ``ok``.

The interval shown is the percentile bootstrap of ``mean(d)`` at ``1 - 2 alpha``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from robogen.check.inputs import RunData
from robogen.check.records import EXIT_REGRESSION, REGRESSION, SAFETY_OK, CheckResult, SafetyCheck
from robogen.errors import InvalidSpecError
from robogen.reports.paired import holm_adjust, sign_flip_pvalue
from robogen.reports.stats import bootstrap_mean_interval
from robogen.rollout.safety import SAFETY_METRICS

NO_SAFETY = (
    "--safety-margin compares the safety metrics of both runs, but the {role} {source!r} "
    "recorded none; evaluate it with robogen eval --safety (a policy URI side is evaluated "
    "with them)"
)
UNPAIRED = (
    "--safety-margin pairs episodes, so both runs need per-episode records and the same "
    "seed; the baseline has seed {b}, the candidate {c} (or a side is a report.json)"
)


def check_safety_margin(margin: float | None) -> None:
    """Raises InvalidSpecError unless ``margin`` is None or a finite number >= 0."""
    if margin is not None and not (math.isfinite(margin) and margin >= 0):
        raise InvalidSpecError(f"--safety-margin must be a finite number >= 0, a relative "
                               f"increase such as 0.2 (20 %), got {margin!r}")


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
                                                        alternative="greater")})
    adjusted = holm_adjust([r["p_value"] for r in rows])
    return tuple(SafetyCheck(**r, p_adjusted=float(p),
                             verdict=REGRESSION if p < alpha else SAFETY_OK)
                 for r, p in zip(rows, adjusted, strict=True))


def with_safety(result: CheckResult, baseline: RunData, candidate: RunData,
                margin: float) -> CheckResult:
    """``result`` with the safety tests added; a safety regression makes the whole check a
    ``regression`` (exit 1)."""
    checks = safety_checks(baseline, candidate, margin, result.alpha)
    regressed = any(s.verdict == REGRESSION for s in checks)
    return dataclasses.replace(
        result, safety_margin=float(margin), safety=checks,
        verdict=REGRESSION if regressed else result.verdict,
        exit_code=EXIT_REGRESSION if regressed else result.exit_code)
