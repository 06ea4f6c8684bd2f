"""``set_const`` reuses a scratch ``MjData`` per model and gives the constants a fresh one gives."""

from __future__ import annotations

import copy

import mujoco
import numpy as np

from robogen.envs import make
from robogen.envs.base import find_scene
from robogen.perturbations import helpers as u


def _array_fields(model: mujoco.MjModel) -> list[str]:
    return [f for f in dir(model) if not f.startswith("_")
            and isinstance(getattr(model, f, None), np.ndarray)]


def test_cached_scratch_matches_fresh_data() -> None:
    env = make("gymnasium/Reacher-v5")
    model = find_scene(env).model
    rng = np.random.default_rng(0)
    mass, inertia = model.body_mass.copy(), model.body_inertia.copy()
    for _ in range(5):
        model.body_mass[:] = mass * rng.uniform(0.5, 2.0, model.nbody)
        model.body_inertia[:] = inertia * rng.uniform(0.5, 2.0, (model.nbody, 1))
        fresh = copy.copy(model)
        mujoco.mj_setConst(fresh, mujoco.MjData(fresh))
        u.set_const(model)  # the cached scratch data, dirtied below between calls
        scratch = u._SCRATCH.by_model[id(model)][1]
        scratch.qpos[:] = rng.normal(size=model.nq)
        scratch.qvel[:] = rng.normal(size=model.nv)
        mujoco.mj_step(model, scratch)
        for f in _array_fields(model):
            assert getattr(model, f).tobytes() == getattr(fresh, f).tobytes(), f
        assert (model.stat.meanmass, model.stat.meaninertia) == (
            fresh.stat.meanmass, fresh.stat.meaninertia)
        # a set_const after the scratch was stepped gives the same constants again
        again = copy.copy(model)
        u.set_const(again)
        for f in _array_fields(model):
            assert getattr(again, f).tobytes() == getattr(fresh, f).tobytes(), f
    assert u._SCRATCH.by_model[id(model)][0] is model
    assert len(u._SCRATCH.by_model) <= u._SCRATCH_MODELS
    env.close()
