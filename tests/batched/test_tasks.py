"""Batched tasks (robogen.batched.tasks): each env's step on MJWarp worlds follows the serial env.

Per env: ``WORLDS`` serial envs are reset with seeds 0, 1, 2 and their states copied into the
worlds (``set_states_from``); the same random action sequence then goes to the serial envs
(``env.step``) and to the worlds (``apply_action`` + ``advance(frame_skip)`` + ``observe`` /
``outcome``). Observation, reward, termination and success agree at every step within the
float32 tolerances below (MJWarp computes in float32, C MuJoCo in float64, and the two
trajectories drift apart slowly: ``tests/batched/test_parity.py``).

Success is made to vary across worlds: return rules get a threshold between the worlds'
final serial returns (``success_threshold``), distance rules one between their final
distances (the task's ``rule``), so the comparison at the last step is not of constants.

The tabletop tasks start with the box resting exactly on the table, where C MuJoCo and
MJWarp disagree about the first contact (plan's pitfall); both start from the serial env's
reset followed by ``SETTLE`` C MuJoCo steps (ctrl held), once the box is in contact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from robogen.envs import find_scene, make
from tests.batched.states import HAVE_MJWARP, NO_MJWARP

needs_mjwarp = pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP)

WORLDS = 3
STEPS = 12
"""Env steps compared per env (12 x frame_skip physics steps)."""
SETTLE = 50
"""C MuJoCo steps after a tabletop reset before the comparison starts (0.1 s)."""

OBS_ATOL = 2e-3
"""Largest |observation difference| (m, rad, m/s, N) over STEPS env steps."""
OBS_RTOL = 1e-3
REWARD_ATOL = 2e-3
"""Largest |reward difference| over STEPS env steps."""

FAST = ("gymnasium/HalfCheetah-v5", "gymnasium/Hopper-v5", "gymnasium/Reacher-v5")
SLOW = ("gymnasium/Walker2d-v5", "gymnasium/Swimmer-v5",
        "gymnasium/Pusher-v5", "gymnasium/InvertedPendulum-v5",
        "gymnasium/InvertedDoublePendulum-v5")
CASES = [*FAST, *(pytest.param(e, marks=pytest.mark.slow) for e in SLOW)]


@dataclasses.dataclass
class Serial:
    """The serial envs' per-step results: ``(STEPS, WORLDS, ...)`` arrays."""

    obs0: np.ndarray
    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    success: np.ndarray
    metric: np.ndarray
    alive: np.ndarray
    """Whether the world was still in its episode at that step (not terminated before)."""


def _envs(env_id: str, settle: int, edit: Callable[[Any], None] | None = None,
          **kwargs: Any) -> list[Any]:
    import mujoco

    envs = []
    for i in range(WORLDS):
        env = make(env_id, max_steps=STEPS, **kwargs)
        if edit is not None:
            edit(find_scene(env).model)
        env.reset(seed=i)
        if settle:
            scene = find_scene(env)
            mujoco.mj_step(scene.model, scene.data, nstep=settle)
        envs.append(env)
    return envs


def _actions(env: Any) -> np.ndarray:
    space = env.action_space
    rng = np.random.default_rng(0)
    return rng.uniform(space.low, space.high,
                       size=(STEPS, WORLDS, *space.shape)).astype(np.float32)


def _serial(envs: list[Any], actions: np.ndarray) -> Serial:
    n = len(envs)
    obs0 = np.stack([np.asarray(find_scene(e).observe(), np.float32) for e in envs])
    rows: dict[str, list[Any]] = {k: [] for k in ("obs", "reward", "terminated", "success",
                                                   "metric", "alive")}
    done = np.zeros(n, bool)
    last_obs = obs0.copy()
    for k in range(STEPS):
        step = {key: [] for key in rows}
        for i, env in enumerate(envs):
            alive = not done[i]
            step["alive"].append(alive)
            if alive:
                obs, reward, term, trunc, info = env.step(actions[k, i])
                metric = info.get("robogen", {}).get("success_metric", info.get("distance", 0.0))
                last_obs[i] = np.asarray(obs, np.float32)
                done[i] = term or trunc
            else:
                reward, term, info, metric = 0.0, True, {"success": False}, 0.0
            step["obs"].append(last_obs[i].copy())
            step["reward"].append(reward)
            step["terminated"].append(bool(term))
            step["success"].append(bool(info["success"]))
            step["metric"].append(float(metric))
        for key in rows:
            rows[key].append(step[key])
    arr = {k: np.asarray(v) for k, v in rows.items()}
    return Serial(obs0=obs0, **arr)


def _batched(env_id: str, envs: list[Any], actions: np.ndarray, rule: Any = None
             ) -> tuple[np.ndarray, dict[str, np.ndarray], Any]:
    import torch

    from robogen.batched import BatchedWorlds
    from robogen.batched.tasks import batched_task

    scenes = [find_scene(e) for e in envs]
    worlds = BatchedWorlds(scenes[0].model, len(envs), data=scenes[0].data)
    task = batched_task(env_id, envs[0], worlds)
    if rule is not None:
        task.rule = rule  # type: ignore[attr-defined]
    worlds.set_states_from([s.data for s in scenes])
    task.on_reset(worlds, list(range(len(envs))), envs)
    obs0 = task.observe(worlds).numpy().copy()
    ret = torch.zeros(len(envs))
    out: dict[str, list[np.ndarray]] = {"obs": [], "reward": [], "terminated": [], "success": []}
    for k in range(STEPS):
        a = torch.from_numpy(actions[k])
        task.apply_action(worlds, a)
        worlds.advance(task.frame_skip)
        obs = task.observe(worlds)
        res = task.outcome(worlds, a, last=torch.full((len(envs),), k == STEPS - 1),
                           episode_return=ret)
        ret = ret + res.reward
        out["obs"].append(obs.numpy().copy())
        for key in ("reward", "terminated", "success"):
            out[key].append(getattr(res, key).numpy().copy())
    assert not worlds.overflows().any()
    return obs0, {k: np.stack(v) for k, v in out.items()}, (task, worlds)


def _between(values: np.ndarray) -> float:
    """A threshold with the smallest value on one side and the others on the other."""
    v = np.sort(values)
    return float((v[0] + v[1]) / 2)


def _compare(serial: Serial, obs0: np.ndarray, got: dict[str, np.ndarray]) -> None:
    np.testing.assert_allclose(obs0, serial.obs0, rtol=OBS_RTOL, atol=OBS_ATOL,
                               err_msg="observation after reset")
    for k in range(STEPS):
        alive = serial.alive[k]
        np.testing.assert_allclose(got["obs"][k][alive], serial.obs[k][alive], rtol=OBS_RTOL,
                                   atol=OBS_ATOL, err_msg=f"observation at step {k + 1}")
        np.testing.assert_allclose(got["reward"][k][alive], serial.reward[k][alive], rtol=0,
                                   atol=REWARD_ATOL, err_msg=f"reward at step {k + 1}")
        for key in ("terminated", "success"):
            np.testing.assert_array_equal(got[key][k][alive], getattr(serial, key)[k][alive],
                                          err_msg=f"{key} at step {k + 1}")


@needs_mjwarp
@pytest.mark.parametrize("env_id", CASES)
def test_gymnasium_step_matches_serial_env(env_id: str) -> None:
    _check_gymnasium(env_id)


def _elliptic(model: Any) -> None:
    import mujoco

    model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC


@needs_mjwarp
@pytest.mark.slow
def test_ant_step_matches_serial_env_with_elliptic_cones() -> None:
    """Ant's own pyramidal cones are refused (next test); with elliptic cones (invariant to
    the contact's tangent frame) its step, contact forces included, follows the serial env."""
    _check_gymnasium("gymnasium/Ant-v5", _elliptic)


def test_ant_with_pyramidal_cones_is_refused() -> None:
    from robogen.batched.tasks import batched_task
    from robogen.batched.tasks.gymnasium_v5 import ANT_PYRAMIDAL
    from robogen.errors import InvalidSpecError

    env = make("gymnasium/Ant-v5")
    with pytest.raises(InvalidSpecError, match="--backend ray") as e:
        batched_task("gymnasium/Ant-v5", env, None)  # type: ignore[arg-type]  # not read
    assert ANT_PYRAMIDAL in str(e.value)


def _check_gymnasium(env_id: str, edit: Callable[[Any], None] | None = None) -> None:
    actions = _actions(_envs(env_id, 0, edit)[0])
    probe = _serial(_envs(env_id, 0, edit), actions)  # chooses the thresholds
    rule = find_scene(_envs(env_id, 0, edit)[0]).rule  # type: ignore[attr-defined]
    ended = probe.alive[-1]
    kwargs: dict[str, Any] = {}
    if rule.kind == "return":  # a return threshold between the worlds' returns
        kwargs["success_threshold"] = (_between(probe.reward.sum(axis=0)[ended])
                                       if ended.sum() > 1 else 0.0)
        rule = None
    else:  # a distance threshold between the worlds' final distances
        rule = dataclasses.replace(rule, threshold=_between(probe.metric[-1]))
    serial = _serial(_envs(env_id, 0, edit, **kwargs), actions)
    if rule is not None:  # the serial env's success under that threshold
        serial.success[-1] = serial.metric[-1] < rule.threshold
    obs0, got, _ = _batched(env_id, _envs(env_id, 0, edit, **kwargs), actions, rule)
    _compare(serial, obs0, got)
    # the comparison is not of constants: worlds differ, success varies where it can
    assert np.abs(got["obs"][-1][0] - got["obs"][-1][1]).max() > 100 * OBS_ATOL
    if ended.sum() > 1:
        assert 0 < serial.success[-1][ended].sum() < ended.sum()


@pytest.mark.parametrize("env_id", ["dm_control/cartpole-swingup", "metaworld/reach-v3"])
def test_python_stepped_families_are_refused_naming_the_ray_backend(env_id: str) -> None:
    from robogen.batched.tasks import batched_task
    from robogen.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError, match="--backend ray") as e:
        batched_task(env_id, None, None)  # type: ignore[arg-type]  # refused before either is read
    assert env_id in str(e.value) and "gymnasium/" in str(e.value)


TABLETOP = ("robogen/Reach-v0", "robogen/Push-v0",
            pytest.param("robogen/PickPlace-v0", marks=pytest.mark.slow))


def _tabletop_envs(env_id: str, threshold: float) -> list[Any]:
    envs = _envs(env_id, SETTLE)
    for env in envs:
        find_scene(env).threshold = threshold  # type: ignore[attr-defined]
    return envs


@needs_mjwarp
@pytest.mark.parametrize("env_id", TABLETOP)
def test_tabletop_step_matches_serial_env(env_id: str) -> None:
    envs = _envs(env_id, SETTLE)
    actions = _actions(envs[0])
    probe = _serial(envs, actions)  # distances without success (the nominal threshold)
    # a threshold the closest world reaches at some step and the others never do
    threshold = _between(probe.metric.min(axis=0))
    serial = _serial(_tabletop_envs(env_id, threshold), actions)
    envs = _tabletop_envs(env_id, threshold)
    obs0, got, (task, worlds) = _batched(env_id, envs, actions)
    _compare(serial, obs0, got)
    won = serial.success.any(axis=0)
    assert won.sum() == 1  # one world succeeded (and terminated)
    # the latch: set where success held; a reset of that world clears it (bonus paid again)
    np.testing.assert_array_equal(task.succeeded.numpy(), won)
    task.on_reset(worlds, [int(np.flatnonzero(won)[0])], envs[:1])
    assert not task.succeeded.any()
    assert np.abs(got["obs"][-1][0] - got["obs"][-1][1]).max() > 100 * OBS_ATOL


@needs_mjwarp
def test_push_success_reads_each_worlds_table_top() -> None:
    """Push's "box on the table" uses each world's table height (a per-world ``body_pos``),
    as the serial env reads its own model's: a box at the target, resting on the nominal
    table, succeeds in the nominal world and not where the table was raised 5 cm."""
    import mujoco
    import torch

    from robogen.batched import BatchedWorlds
    from robogen.batched.tasks import batched_task
    from robogen.envs import scene as sc

    env = make("robogen/Push-v0")
    env.reset(seed=0)
    scene: Any = find_scene(env)
    model, data = scene.model, scene.data
    adr = model.joint(sc.OBJECT_JOINT).qposadr[0]
    data.qpos[adr:adr + 2] = data.mocap_pos[model.body_mocapid[model.body("target").id], :2]
    mujoco.mj_forward(model, data)
    assert scene.step(np.zeros(6))[2]  # the serial env: success (terminated) here
    worlds = BatchedWorlds(model, 2, data=data)
    body_pos = np.repeat(model.body_pos[None], 2, axis=0)
    body_pos[1, model.body("table").id, 2] += 0.05
    worlds.set_fields({"body_pos": body_pos})
    task = batched_task("robogen/Push-v0", env, worlds)
    worlds.set_states_from([data, data])
    out = task.outcome(worlds, torch.zeros(2, 6), last=torch.zeros(2, dtype=torch.bool),
                       episode_return=torch.zeros(2))
    assert out.success.tolist() == [True, False]
    assert out.terminated.tolist() == [True, False]
