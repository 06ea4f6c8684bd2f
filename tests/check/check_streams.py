"""Synthetic outcome streams for the check's statistical tests (seeded, reproducible).

Episode i has a latent difficulty ``u_i`` shared by both policies (the common
initial state); the baseline succeeds when ``u_i < p_b``; the candidate
reuses the same latent with probability ``rho`` (correlated outcomes, as
under common random numbers) and an independent draw otherwise, so its
success rate is exactly ``p_c`` in expectation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from robogen.check.inputs import RunData, run_data_from_arrays


def paired_outcomes(
    rng: np.random.Generator, n: int, p_b: float, p_c: float, rho: float
) -> tuple[np.ndarray, np.ndarray]:
    """(baseline, candidate) (n,) bool outcomes with marginal rates p_b, p_c."""
    u = rng.random(n)
    v = rng.random(n)
    base = u < p_b
    cand = np.where(rng.random(n) < rho, u < p_c, v < p_c)
    return base, cand


def stream_pair(
    rng: np.random.Generator,
    n: int,
    p_b: Mapping[str, float],
    p_c: Mapping[str, float],
    rho: float = 0.7,
) -> tuple[RunData, RunData]:
    """Baseline and candidate RunData over the conditions of ``p_b`` (same seed: paired)."""
    base, cand = {}, {}
    for name, pb in p_b.items():
        base[name], cand[name] = paired_outcomes(rng, n, pb, p_c[name], rho)
    return run_data_from_arrays(base), run_data_from_arrays(cand)


CONDITIONS: Sequence[str] = ("nominal", "lighting@1", "physics@1", "embodiment@1")
