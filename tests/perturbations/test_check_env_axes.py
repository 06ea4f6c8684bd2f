"""Gymnasium's own env checker on one env of every installed family, wrapped with every
registered axis at severity 1; and no observation of a ``sensor``-corrupted episode shares
memory with an earlier one (a caller that keeps an observation and writes into it must not
change what the env returns later)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from robogen.envs import ENV_FAMILIES, make
from robogen.perturbations import PerturbedEnv
from robogen.perturbations.base import AXES, FilterContext
from robogen.perturbations.sensor import SensorFilter, SensorPerturbation
from robogen.types import AxisLevel

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

CHECKED = {"robogen": "robogen/Push-v0", "gymnasium": "gymnasium/Hopper-v5"}
"""The env checked per family (the first registered id for the others)."""


def _family_env(prefix: str) -> str:
    return CHECKED.get(prefix) or ENV_FAMILIES.get(prefix).ids()[0]


@pytest.mark.parametrize("prefix", ENV_FAMILIES.names())
def test_check_env_passes_with_every_axis_at_severity_1(prefix: str) -> None:
    fam = ENV_FAMILIES.get(prefix)
    why = fam.missing()
    if why is not None:
        pytest.skip(f"{prefix} suite not installed: {why}")
    env = PerturbedEnv(make(_family_env(prefix)), [AxisLevel(a, 1.0) for a in AXES.names()])
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


@pytest.mark.parametrize("obs", [np.arange(4, dtype=np.float32),
                                 {"state": np.arange(4, dtype=np.float32),
                                  "pixels": np.zeros((8, 8, 3), np.uint8)}],
                         ids=["state", "state+pixels"])
def test_dropped_frames_are_fresh_copies(obs) -> None:
    """Every delivered observation is its own object, dropped (repeated) frames included."""
    p = SensorPerturbation(kind="frame_drop", magnitude=1.0, stream_seed=0)
    f = SensorFilter(p, FilterContext(None, None, (4,), lambda: None))
    leaves = []
    for t in range(40):
        fresh = ({k: v + t for k, v in obs.items()} if isinstance(obs, dict) else obs + t)
        out = f.observation(fresh)
        leaves.append(list(out.values()) if isinstance(out, dict) else [out])
    repeats = sum(np.array_equal(a[0], b[0]) for a, b in zip(leaves, leaves[1:], strict=False))
    assert repeats >= 10  # frames were dropped (probability 0.5 each)
    flat = [x for group in leaves for x in group]
    for i, a in enumerate(flat):
        for b in flat[i + 1:]:
            assert not np.shares_memory(a, b)
