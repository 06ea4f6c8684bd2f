"""Helpers of the batched-backend tests: whether MJWarp is installed, initial states, ctrls."""

from __future__ import annotations

import importlib.util

import mujoco
import numpy as np

HAVE_MJWARP = (importlib.util.find_spec("mujoco_warp") is not None
               and importlib.util.find_spec("warp") is not None)
NO_MJWARP = ('the batched extra is not installed: pip install "robogen[batched]" '
             "(in a checkout: make setup-batched)")


STEPS = 25
"""Physics steps compared with C MuJoCo (tests/batched/test_parity.py, test_fields.py)."""
QPOS_ATOL = 2e-5
"""Largest |qpos difference| allowed over the first STEPS steps [m or rad]."""
QVEL_ATOL = 1e-3
"""Largest |qvel difference| allowed over the first STEPS steps [m/s or rad/s]."""


def initial_datas(model: mujoco.MjModel, env: object, scene: object, worlds: int,
                  settle_steps: int = 0) -> list[mujoco.MjData]:
    """One host ``MjData`` per world: the env's reset state for seeds 0..worlds-1.

    ``settle_steps`` C MuJoCo steps (ctrl held) follow the reset, so that objects resting
    exactly on a surface are in contact before the comparison starts.
    """
    datas = []
    for i in range(worlds):
        env.reset(seed=i)  # type: ignore[attr-defined]
        src = scene.data  # type: ignore[attr-defined]
        d = mujoco.MjData(model)
        for f in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat", "ctrl"):
            getattr(d, f)[:] = getattr(src, f)
        mujoco.mj_forward(model, d)
        mujoco.mj_step(model, d, nstep=settle_steps)
        datas.append(d)
    return datas


def ctrl_sequence(model: mujoco.MjModel, steps: int, worlds: int, seed: int = 0
                  ) -> np.ndarray:
    """A fixed random ctrl sequence ``(steps, worlds, nu)`` inside the actuators' ctrlrange."""
    lo, hi = model.actuator_ctrlrange.T.copy()
    unlimited = ~model.actuator_ctrllimited.astype(bool)
    lo[unlimited], hi[unlimited] = -1.0, 1.0
    return np.random.default_rng(seed).uniform(lo, hi, size=(steps, worlds, model.nu))
