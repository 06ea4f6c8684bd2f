"""The CI regression gate: is a candidate checkpoint significantly less robust than a baseline?

::

    outcome = run_check(CheckConfig("runs/baseline", "sb3:new.zip", margin=0.05, alpha=0.05))
    outcome.result.verdict        # "pass" | "regression" | "inconclusive"
    outcome.result.exit_code      # 0 / 1 (2 is raised as a RobogenError)

Per condition: exact one-sided non-inferiority and regression tests of the
success difference (:mod:`~robogen.check.noninferiority`), Holm over
conditions and per-axis verdicts (:mod:`~robogen.check.gate`), optional
group-sequential looks with alpha spending (:mod:`~robogen.check.sequential`),
outputs check.md / JUnit XML / check.json (:mod:`~robogen.check.outputs`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # decisions
    "compare": "gate", "sequential_check": "gate", "OutcomeSource": "gate",
    "StaticSource": "gate", "axis_of": "gate",
    # inputs
    "PROTOCOL_FIELDS": "inputs", "ConditionOutcomes": "inputs", "RunData": "inputs",
    "load_saved": "inputs", "protocol_differences": "inputs", "run_data_from_arrays": "inputs",
    # statistics
    "TestResult": "noninferiority", "holm_adjust": "noninferiority",
    "newcombe_interval": "noninferiority", "paired_noninferiority": "noninferiority",
    "tango_interval": "noninferiority", "unpaired_noninferiority": "noninferiority",
    "SPENDING_FUNCTIONS": "sequential", "look_levels": "sequential",
    "look_schedule": "sequential",
    # outputs
    "load_check": "outputs", "render_junit": "outputs", "render_markdown": "outputs",
    "write_outputs": "outputs",
    # records
    "DEFAULT_ALPHA": "records", "DEFAULT_MARGIN": "records", "INCONCLUSIVE": "records",
    "NOT_APPLIED": "records", "NO_DATA": "records", "PASS": "records", "REGRESSION": "records",
    "VERDICTS": "records", "AxisCheck": "records", "CheckResult": "records",
    "ConditionCheck": "records", "RunInfo": "records", "SequentialInfo": "records",
    # end to end
    "CheckConfig": "config", "PAIRINGS": "config", "CheckOutcome": "run", "run_check": "run",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:  # lazy: `robogen --help` must not import scipy
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"robogen.check.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'robogen.check' has no attribute {name!r}")
