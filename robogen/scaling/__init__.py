"""Factored scaling curves: behaviour cloning, curve fitting and a data-collection planner.

Modules:
    :mod:`~robogen.scaling.bc`: JAX/Flax behaviour cloning; many models trained at once
    with ``vmap`` (:func:`train_bc_ensemble`); the network and checkpoints it trains live in
    :mod:`robogen.policies.bc_net` / :mod:`robogen.policies.bc_io` (re-exported). Checkpoints
    (:func:`save_bc`, :func:`load_bc`; loaded by the ``flax:PATH`` policy scheme).
    :mod:`~robogen.scaling.curves`: fitting ``success(x) = 1 - a (x + n0)^b`` with bootstrap
    bands, ``curves.json``. :mod:`~robogen.scaling.curves_plot`: the figure.
    :mod:`~robogen.scaling.planner`: budget allocation across factors.
    :mod:`~robogen.scaling.loop`: the ``robogen scale`` loop (collect, train, evaluate, fit;
    resumable), built from :mod:`~robogen.scaling.pipeline`.
    :mod:`~robogen.scaling.adaptive`: the closed loop of ``robogen plan --rounds``
    (plan a share of the budget, collect, measure, refit, replan; resumable).
    :mod:`~robogen.scaling.report`: ``scaling.html``.
    :mod:`~robogen.scaling.diversity`: diversity curves (``robogen scale --vary values``:
    distinct values x demonstrations per value); :mod:`~robogen.scaling.value_planner`:
    splitting a budget into (values, demonstrations per value) per factor.

JAX and matplotlib are imported only when a name that needs them is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "BCConfig": "bc", "BCModel": "bc", "bc_loss": "bc", "init_bc": "bc", "random_shift": "bc",
    "train_bc_ensemble": "bc", "train_bc_sequential": "bc",
    "load_bc": "bc_io", "save_bc": "bc_io",
    "CurveFit": "curves", "CurvePoint": "curves", "CurvesFile": "curves",
    "FactorCurve": "curves", "build_curve": "curves", "fit_curve": "curves",
    "fit_curve_bootstrap": "curves", "load_curves": "curves", "predict": "curves",
    "write_curves": "curves",
    "curves_plot_png": "curves_plot",
    "Allocation": "planner", "FactorAllocation": "planner", "plan_budget": "planner",
    "Collection": "demos", "DemoStore": "demos", "collect": "demos",
    "demo_episode_index": "demos", "factor_condition": "demos",
    "ScaleConfig": "loop", "ScaleOutcome": "loop", "default_bc_config": "loop",
    "run_scale": "loop",
    "AdaptiveConfig": "adaptive", "AdaptiveOutcome": "adaptive", "RoundResult": "adaptive",
    "run_adaptive": "adaptive",
    "ModelJob": "pipeline", "collect_demos": "pipeline", "eval_manifest": "pipeline",
    "run_eval": "pipeline", "train_models": "pipeline",
    "render_scaling_html": "report", "write_scaling_html": "report",
    "DiversityConfig": "diversity", "DiversityOutcome": "diversity", "run_diversity": "diversity",
    "value_factor": "demos",
    "DiversityModel": "value_planner", "ValuePlan": "value_planner",
    "compare_values_with_equal": "value_planner", "diversity_models": "value_planner",
    "plan_values": "value_planner",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'robogen.scaling' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"robogen.scaling.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
