"""robogen: measure how well robot and RL policies generalize across factors of variation.

Importing robogen picks an offscreen OpenGL backend (``MUJOCO_GL=egl``) when
none is set and there is no display, before MuJoCo is imported.
"""

from __future__ import annotations

import robogen._gl  # noqa: F401  (must run before mujoco is imported)
from robogen.errors import (
    CheckpointError,
    DependencyMissingError,
    InvalidPerturbationError,
    InvalidSpecError,
    RobogenError,
    RunDirError,
    SpaceMismatchError,
    UnknownNameError,
)
from robogen.types import (
    AxisLevel,
    Condition,
    EpisodeResult,
    EvalManifest,
    SequentialRule,
    WorkUnit,
)

__version__ = "0.1.0"

__all__ = [
    "AxisLevel",
    "CheckpointError",
    "Condition",
    "DependencyMissingError",
    "EpisodeResult",
    "EvalManifest",
    "InvalidPerturbationError",
    "InvalidSpecError",
    "RobogenError",
    "RunDirError",
    "SequentialRule",
    "SpaceMismatchError",
    "UnknownNameError",
    "WorkUnit",
    "__version__",
]


def __getattr__(name: str):  # noqa: ANN202 - lazy heavy imports keep `robogen --help` fast
    if name == "evaluate":
        from robogen.runs.evaluation import evaluate

        return evaluate
    if name == "load_eval_config":
        from robogen.configs import load_eval_config

        return load_eval_config
    raise AttributeError(f"module 'robogen' has no attribute {name!r}")
