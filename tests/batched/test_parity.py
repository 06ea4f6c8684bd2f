"""Nominal parity: MJWarp (warp CPU device, float32) follows C MuJoCo (float64).

The same fixed ctrl sequence from the same initial states (one per world: the env's reset
for seeds 0, 1, 2) gives the same ``qpos``/``qvel`` in every world within
``QPOS_ATOL``/``QVEL_ATOL`` for the first ``STEPS`` physics steps. Measured maxima over
these cases: ``qpos`` 1.6e-7 .. 5.4e-6, ``qvel`` 8e-7 .. 1.6e-4 (HalfCheetah largest; chaotic
scenes drift apart later: HalfCheetah reaches 4e-2 in ``qpos`` after 200 steps).

The tabletop tasks start with the object resting exactly on the table (signed distance 0
in float64, -1.5e-8 in float32): C MuJoCo makes no contact at the first step, MJWarp one,
and the object's first-step velocity differs by up to 0.26 m/s. They are compared from
``SETTLE`` steps after reset (C MuJoCo, ctrl held), once the object is in contact in both.
"""

from __future__ import annotations

import numpy as np
import pytest

from robogen.envs import find_scene, make
from tests.batched.states import (
    HAVE_MJWARP,
    NO_MJWARP,
    QPOS_ATOL,
    QVEL_ATOL,
    STEPS,
    ctrl_sequence,
    initial_datas,
)

pytestmark = pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP)

WORLDS = 3
SETTLE = 50
"""C MuJoCo steps after reset before comparing the tabletop tasks (0.1 s)."""

CASES = {
    "gymnasium/HalfCheetah-v5": 0,
    "gymnasium/Hopper-v5": 0,
    "gymnasium/Reacher-v5": 0,
    "robogen/Reach-v0": SETTLE,
    "robogen/Push-v0": SETTLE,
}


@pytest.mark.parametrize("env_id", list(CASES), ids=list(CASES))
def test_nominal_trajectories_match_c_mujoco(env_id: str) -> None:
    import mujoco

    from robogen.batched import BatchedWorlds

    env = make(env_id)
    scene = find_scene(env)
    model = scene.model
    datas = initial_datas(model, env, scene, WORLDS, settle_steps=CASES[env_id])
    start = np.stack([d.qpos.copy() for d in datas])
    worlds = BatchedWorlds(model, WORLDS, data=datas[0])
    worlds.set_states_from(datas)
    ctrls = ctrl_sequence(model, STEPS, WORLDS)
    for k in range(STEPS):
        worlds.step(ctrls[k])
        for i, d in enumerate(datas):
            d.ctrl[:] = ctrls[k, i]
            mujoco.mj_step(model, d)
        qpos = np.stack([d.qpos for d in datas])
        qvel = np.stack([d.qvel for d in datas])
        np.testing.assert_allclose(worlds.qpos, qpos, rtol=0, atol=QPOS_ATOL,
                                   err_msg=f"qpos at step {k + 1}")
        np.testing.assert_allclose(worlds.qvel, qvel, rtol=0, atol=QVEL_ATOL,
                                   err_msg=f"qvel at step {k + 1}")
    # the worlds moved and differ from each other: the comparison is not of constants
    moved = np.abs(worlds.qpos - start).max(axis=1)
    assert (moved > 100 * QPOS_ATOL).all(), moved
    assert np.abs(worlds.qpos[0] - worlds.qpos[1]).max() > 100 * QPOS_ATOL


def test_overflowing_buffers_are_reported_per_world() -> None:
    from robogen.batched import BatchedWorlds

    env = make("robogen/Push-v0")
    scene = find_scene(env)
    model = scene.model
    datas = initial_datas(model, env, scene, WORLDS, settle_steps=SETTLE)  # 4 contacts each
    ctrls = ctrl_sequence(model, STEPS, WORLDS)
    small = BatchedWorlds(model, WORLDS, njmax=8)  # fits the contact-free MjData(model)
    default = BatchedWorlds(model, WORLDS, data=datas[0])
    for worlds in (small, default):
        worlds.set_states_from(datas)
        for k in range(STEPS):
            worlds.step(ctrls[k])
    import mujoco_warp

    assert (small.overflows() & int(mujoco_warp.OverflowType.NEFC)).all()
    assert not default.overflows().any()
    small.set_states_from(datas)  # a new state clears the record
    assert not small.overflows().any()
