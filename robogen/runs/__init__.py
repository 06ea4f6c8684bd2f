"""Run an evaluation end to end: episodes, then the report (the jobs behind ``robogen eval``).

``evaluate(config)`` runs a new evaluation and writes its report, ``resume(run_dir)``
finishes a killed one, ``rebuild_report(run_dir)`` rewrites the report from the stored
episodes, and ``evaluate_policies(config, policies)`` runs several policies under one
manifest and compares them::

    from robogen.runs import evaluate

    outcome = evaluate(load_eval_config("eval.yaml"))   # outcome.files["html"]

The episodes run in :mod:`robogen.rollout` (which builds no report), the reports are
built and written by :mod:`robogen.reports`; failure videos replay stored episodes
(:mod:`robogen.runs.failure_videos`).
"""

from __future__ import annotations

from robogen.runs.evaluation import EvalOutcome, evaluate, finish_report, rebuild_report, resume
from robogen.runs.multi import MultiOutcome, evaluate_policies

__all__ = [
    "EvalOutcome",
    "MultiOutcome",
    "evaluate",
    "evaluate_policies",
    "finish_report",
    "rebuild_report",
    "resume",
]
