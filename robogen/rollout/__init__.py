"""Episode scheduling: plans, workers, serial and Ray backends, and the results store."""

from __future__ import annotations

from robogen.rollout.plan import build_conditions, episode_seed, make_units, perturbation_seed
from robogen.rollout.store import ResultStore

__all__ = ["ResultStore", "build_conditions", "episode_seed", "make_units", "perturbation_seed"]
