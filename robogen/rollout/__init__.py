"""Episode scheduling: plans, workers, serial and Ray backends, the results store, and the
observers that run per-episode side jobs in the workers."""

from __future__ import annotations

from robogen.rollout.observers import (
    OBSERVERS,
    EpisodeObserver,
    EpisodeState,
    Observer,
    register_observer,
)
from robogen.rollout.plan import build_conditions, episode_seed, make_units, perturbation_seed
from robogen.rollout.store import ResultStore

__all__ = [
    "OBSERVERS", "EpisodeObserver", "EpisodeState", "Observer", "ResultStore",
    "build_conditions", "episode_seed", "make_units", "perturbation_seed", "register_observer",
]
