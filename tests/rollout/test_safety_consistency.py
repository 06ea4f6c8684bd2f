"""The stored contact-force metric is read from a consistent MuJoCo state on every installed env
family: each read of :class:`SafetyMonitor` is recomputed after ``mj_forward`` on a copy of the
``MjData`` it read (contacts rebuilt and solved for that state) over a seeded episode with
contacts and motion. A read one substep before the returned ``qpos`` (the solve's state)
agrees within a substep's change; a read after dm_control's trailing ``mj_step1`` (contacts
rebuilt, forces of the previous solve) was off by up to ~1000 N and could sum to a negative
normal force."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest

from robogen.envs import ENV_FAMILIES, make
from robogen.envs.base import SubstepScene, find_scene
from robogen.rollout.safety import FORCE_PER_STEP, FORCE_SUBSTEPS, SafetyMonitor, force_sampling

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

EPISODE = {
    "robogen": "robogen/Push-v0", "gymnasium": "gymnasium/Walker2d-v5",
    "dm_control": "dm_control/walker-stand", "robosuite": "robosuite/Lift",
    "metaworld": "metaworld/push-v3", "gymnasium-robotics": "gymnasium-robotics/FetchPush-v4",
}
"""A task per family whose robot touches its scene (floor or table) under random actions."""
SUBSTEP_FAMILIES = ("robogen", "dm_control")
"""Families whose scenes show robogen every physics substep (:class:`SubstepScene`)."""
STEPS = 100
ABS_TOL_N, REL_TOL = 2.0, 0.05
"""A read agrees with its recomputation within ``max(ABS_TOL_N, REL_TOL * force)``."""
AGREE = 0.9
"""Share of reads that must agree (a contact made or broken within the one substep between the
solve's state and the returned state changes the force at once)."""


DOWN = ("metaworld", "gymnasium-robotics")
"""Families whose arm is driven down (action[2] = -1) so that it touches the table."""


class RecomputingMonitor(SafetyMonitor):
    """Recomputes every contact-force read with ``mj_forward`` on copies of ``MjData``: of the
    state returned (``now``), and on a substep scene also of the state the read's solve
    started from (``solve``: the state returned at the previous read, with this substep's
    controls and applied forces)."""

    def __init__(self) -> None:
        super().__init__()
        self.now: list[tuple[float, float]] = []
        self.solve: list[tuple[float, float]] = []
        self._previous: mujoco.MjData | None = None
        self._inner = False

    def _consistent(self, model: mujoco.MjModel, state: mujoco.MjData) -> float:
        mujoco.mj_forward(model, state)
        self._inner = True
        try:
            return super().robot_scene_force(model, state)
        finally:
            self._inner = False

    def robot_scene_force(self, model: mujoco.MjModel, data: mujoco.MjData) -> float:
        got = super().robot_scene_force(model, data)
        if self._inner:
            return got
        self.now.append((got, self._consistent(model, copy.copy(data))))
        previous = self._previous
        if self.sampling == FORCE_SUBSTEPS and previous is not None:
            for name in ("ctrl", "qfrc_applied", "xfrc_applied", "mocap_pos", "mocap_quat"):
                getattr(previous, name)[:] = getattr(data, name)
            self.solve.append((got, self._consistent(model, previous)))
        self._previous = copy.copy(data)
        return got


@pytest.mark.parametrize("prefix", ENV_FAMILIES.names())
def test_contact_forces_are_read_from_a_consistent_state(prefix: str) -> None:
    fam = ENV_FAMILIES.get(prefix)
    why = fam.missing()
    if why is not None:
        pytest.skip(f"{prefix} suite not installed: {why}")
    env = make(EPISODE.get(prefix) or fam.ids()[0])
    try:
        scene = find_scene(env)
        expected = FORCE_SUBSTEPS if prefix in SUBSTEP_FAMILIES else FORCE_PER_STEP
        assert force_sampling(scene) == expected
        monitor = RecomputingMonitor()
        env.reset(seed=0)
        monitor.start(scene)
        assert monitor.sampling == expected
        rng = np.random.default_rng(0)
        space = env.action_space
        qpos0 = scene.data.qpos.copy()
        for _ in range(STEPS):
            a = rng.uniform(space.low, space.high).astype(space.dtype)
            if prefix in DOWN:
                a[2] = -1.0
            _, _, terminated, truncated, _ = env.step(a)
            monitor.step(a)
            if terminated or truncated:
                break
        assert np.abs(scene.data.qpos - qpos0).max() > 0.02  # motion
        stored = monitor.metrics()["peak_contact_force_n"]
        if isinstance(scene, SubstepScene):
            assert scene.substep_observer is None  # detached at the episode's end
    finally:
        env.close()
    got, now = np.array(monitor.now).T
    assert (now > 1.0).sum() >= 2, now  # contacts
    assert got.min() >= 0.0 and now.min() >= 0.0  # summed normal force never negative
    assert stored == pytest.approx(got.max())
    if expected == FORCE_SUBSTEPS:
        # each read is the force of the state its solve started from, to solver precision
        got_s, solve = np.array(monitor.solve).T
        assert len(solve) == len(got) - 1 > STEPS
        np.testing.assert_allclose(got_s, solve, rtol=1e-3, atol=1e-3)
    else:
        # one read per env step, one substep before the returned state: within that change
        agree = np.abs(got - now) <= np.maximum(ABS_TOL_N, REL_TOL * now)
        assert agree.mean() >= AGREE, list(zip(got[~agree], now[~agree], strict=True))
        assert stored == pytest.approx(now.max(), rel=0.1)


@pytest.mark.parametrize("prefix", SUBSTEP_FAMILIES)
def test_watching_substeps_changes_no_episode(prefix: str) -> None:
    """The substep observer steps the same physics one substep at a time: bit for bit."""
    fam = ENV_FAMILIES.get(prefix)
    why = fam.missing()
    if why is not None:
        pytest.skip(f"{prefix} suite not installed: {why}")
    runs = []
    for watched in (False, True):
        env = make(EPISODE[prefix])
        try:
            scene = find_scene(env)
            env.reset(seed=3)
            monitor = SafetyMonitor()
            if watched:
                monitor.start(scene)
            rng = np.random.default_rng(3)
            space = env.action_space
            states = []
            for _ in range(20):
                a = rng.uniform(space.low, space.high).astype(space.dtype)
                env.step(a)
                states.append(np.concatenate([scene.data.qpos, scene.data.qvel]))
            runs.append(np.stack(states))
        finally:
            env.close()
    assert np.array_equal(runs[0], runs[1])
