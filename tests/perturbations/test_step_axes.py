"""The per-step axes (``sensor``, ``action``) on real scenes: what the policy gets and what
the robot executes, pinned against the documented formulas, per kind; the physics of a
sensor-corrupted episode is the nominal one, and every episode replays exactly."""

from __future__ import annotations

import numpy as np
import pytest

from robogen.envs import make
from robogen.envs.render import PendingFrame, resolve_frames
from robogen.perturbations import PerturbedEnv, make_axis
from robogen.perturbations.action import (
    ACTION_KINDS,
    ACTION_NOISE_STD,
    MAX_BIAS,
    MAX_REPEAT,
    ActionPerturbation,
)
from robogen.perturbations.base import FilterContext
from robogen.perturbations.sensor import (
    MAX_DROP,
    MAX_LAG,
    SENSOR_KINDS,
    STATE_NOISE_STD,
    SensorPerturbation,
    corrupt_image,
)
from robogen.perturbations.wrapper import axis_rng
from robogen.types import AxisLevel

SEED = 3


def pseed_for(axis: str, kind: str, split: str = "all", scene=None) -> int:
    """The first perturbation seed whose ``axis`` draw at severity 1 is ``kind``."""
    for ps in range(200):
        if make_axis(axis).sample(axis_rng(ps, axis), 1.0, split, scene).kind == kind:
            return ps
    raise AssertionError(f"no seed draws {kind}")


def actions(env, n: int, seed: int = 0) -> np.ndarray:
    low, high = env.action_space.low, env.action_space.high
    return np.random.default_rng(seed).uniform(low, high, (n, *low.shape)).astype(np.float32)


def run(env, acts, pseed: int | None = None):
    """Reset and step ``acts``: (observations, qpos per step, info of the reset)."""
    opts = {} if pseed is None else {"options": {"perturbation_seed": pseed}}
    obs, info = env.reset(seed=SEED, **opts)
    from robogen.envs.base import find_scene

    scene = find_scene(env)
    out, qpos = [obs], [scene.data.qpos.copy()]
    for a in acts:
        obs, *_ = env.step(a)
        out.append(obs)
        qpos.append(scene.data.qpos.copy())
    return out, qpos, info


@pytest.fixture(scope="module")
def reach():
    env, nominal = PerturbedEnv(make("robogen/PickPlace-v0")), make("robogen/PickPlace-v0")
    yield env, nominal
    env.close()
    nominal.close()


def context(env) -> FilterContext:
    return env._filter_context()


# ----------------------------------------------------------------------------- action axis


@pytest.mark.parametrize("kind", [*ACTION_KINDS["train"], *ACTION_KINDS["test"]])
def test_the_scene_executes_what_the_action_filter_returns(reach, kind):
    """The wrapped episode is the nominal env stepped with the filter's actions, exactly."""
    env, nominal = reach
    ps = pseed_for("action", kind)
    env.set_levels([AxisLevel("action", 1.0)])
    acts = actions(env, 30)
    _, w_q, info = run(env, acts, ps)
    (record,) = info["robogen"]["perturbations"]
    assert record["values"]["kind"] == kind and record["changed"] is True
    p = ActionPerturbation(**record["values"])
    f = p.step_filter(context(env))
    executed = [np.array(f.action(a), copy=True) for a in acts]
    _, n_q, _ = run(nominal, executed)
    assert all(np.array_equal(a, b) for a, b in zip(w_q, n_q, strict=True))
    _, plain_q, _ = run(nominal, acts)
    assert not all(np.array_equal(a, b) for a, b in zip(w_q, plain_q, strict=True))
    executed = np.stack(executed)
    low, high = env.action_space.low, env.action_space.high
    assert np.all(executed >= low) and np.all(executed <= high)
    if kind == "latency":  # the no-op, then the policy's actions k steps late
        k = record["values"]["latency_steps"]
        assert 1 <= k <= 4
        assert np.all(executed[:k] == 0) and np.array_equal(executed[k:], acts[:-k])
    elif kind == "bias":  # a constant offset, as recorded, where the bounds do not cut it
        offset = np.array(record["applied"]["offset"])
        inside = (acts + offset > low) & (acts + offset < high)
        assert np.allclose((executed - acts)[inside], np.broadcast_to(offset, acts.shape)[inside],
                           atol=1e-6)
        half = (high - low) / 2
        assert np.allclose(np.abs(offset), MAX_BIAS * p.magnitude * half, atol=1e-6)
    elif kind == "repeat":  # each action is the policy's or the previous one executed
        assert np.array_equal(executed[0], acts[0])
        for t in range(1, len(acts)):
            assert np.array_equal(executed[t], acts[t]) or np.array_equal(executed[t],
                                                                          executed[t - 1])


def test_action_noise_and_repeat_rates_follow_the_magnitude(reach):
    env, _ = reach
    ctx = context(env)
    half = (env.action_space.high - env.action_space.low) / 2
    noise = ActionPerturbation("noise", 0.5, 0, 7).step_filter(ctx)
    zero = np.zeros(env.action_space.shape, np.float32)
    draws = np.stack([noise.action(zero) for _ in range(4000)])
    assert np.allclose(draws.std(axis=0), ACTION_NOISE_STD * 0.5 * half, rtol=0.06)
    repeat = ActionPerturbation("repeat", 0.8, 0, 7).step_filter(ctx)
    rng = np.random.default_rng(1)
    outs = [repeat.action(rng.uniform(-1, 1, zero.shape).astype(np.float32))
            for _ in range(4000)]
    repeats = sum(np.array_equal(a, b) for a, b in zip(outs[1:], outs[:-1], strict=True))
    p = MAX_REPEAT * 0.8
    assert abs(repeats / 3999 - p) < 4 * np.sqrt(p * (1 - p) / 3999)


# ----------------------------------------------------------------------------- sensor axis


@pytest.mark.parametrize("kind", [*SENSOR_KINDS["train"], *SENSOR_KINDS["test"]])
def test_state_corruptions_follow_the_formulas_and_leave_the_physics_nominal(reach, kind):
    env, nominal = reach
    ps = pseed_for("sensor", kind)
    env.set_levels([AxisLevel("sensor", 1.0)])
    acts = actions(env, 40)
    w_obs, w_q, info = run(env, acts, ps)
    n_obs, n_q, _ = run(nominal, acts)
    assert all(np.array_equal(a, b) for a, b in zip(w_q, n_q, strict=True))  # same motion
    assert any(not np.array_equal(a, b) for a, b in zip(w_obs, n_obs, strict=True))
    (record,) = info["robogen"]["perturbations"]
    m = record["values"]["magnitude"]
    spread = env.state_spread()
    assert w_obs[0].dtype == n_obs[0].dtype and w_obs[0].shape == n_obs[0].shape
    w, n = np.stack(w_obs).astype(np.float64), np.stack(n_obs).astype(np.float64)
    if kind == "gaussian_noise":  # standardized residuals: N(0, 1) where the spread > 0
        live = spread > 0
        z = (w - n)[:, live] / (STATE_NOISE_STD * m * spread[live])
        assert abs(z.std() - 1.0) < 0.1 and abs(z.mean()) < 0.1
        assert np.array_equal(w[:, ~live], n[:, ~live])
    elif kind == "jpeg":  # quantized to steps of m * spread
        step = (m * spread).astype(np.float32)
        live = step > 0
        assert np.all(np.abs(w - n)[:, live] <= step[live] / 2 + 1e-5)
        assert np.allclose(w[:, live] / step[live], np.round(w[:, live] / step[live]), atol=1e-3)
    elif kind == "blur":  # a first-order lag
        a = MAX_LAG * m
        expect = [n[0]]
        for x in n[1:]:
            expect.append(a * expect[-1] + (1 - a) * x)
        assert np.allclose(w, np.stack(expect), atol=1e-5)
    else:  # frame_drop: each observation is the current one or the previous one delivered
        dropped = 0
        for t in range(1, len(w)):
            if np.array_equal(w[t], n[t]):
                continue
            assert np.array_equal(w[t], w[t - 1])
            dropped += 1
        n, rate = len(w) - 1, MAX_DROP * m  # drops follow the documented probability
        assert abs(dropped - n * rate) < 4 * np.sqrt(n * rate * (1 - rate)), (dropped, n, rate)


def test_the_state_spread_is_measured_once_on_the_nominal_scene(reach):
    env, _ = reach
    spread = env.state_spread()
    assert spread is env.state_spread()  # kept
    fresh = PerturbedEnv(make("robogen/PickPlace-v0"))
    fresh.set_levels([AxisLevel("embodiment", 1.0)])
    fresh.reset(seed=SEED, options={"perturbation_seed": 0})  # an edited model installed
    try:
        assert np.array_equal(fresh.state_spread(), spread)  # measured on the nominal one
    finally:
        fresh.close()
    assert spread.shape == env.observation_space.shape and np.all(np.isfinite(spread))
    assert (spread > 0).sum() >= spread.size - 4  # a few constant dimensions
    pixels = PerturbedEnv(make("robogen/PickPlace-v0", obs_mode="pixels"))
    try:
        assert pixels.state_spread() is None
    finally:
        pixels.close()


def test_measuring_the_spread_does_not_change_the_next_episodes(reach):
    """The calibration resets and steps the env; the next episode is still the nominal one."""
    _, nominal = reach
    env = PerturbedEnv(make("robogen/PickPlace-v0"))
    try:
        acts = actions(env, 10)
        env.set_levels([AxisLevel("sensor", 1.0)])
        env.reset(seed=SEED, options={"perturbation_seed": 0})  # measures the spread
        env.set_levels([])
        w_obs, w_q, _ = run(env, acts)
        n_obs, n_q, _ = run(nominal, acts)
        assert all(np.array_equal(a, b) for a, b in zip(w_obs, n_obs, strict=True))
        assert all(np.array_equal(a, b) for a, b in zip(w_q, n_q, strict=True))
    finally:
        env.close()


@pytest.mark.parametrize("axis", ["sensor", "action"])
def test_an_episode_replays_exactly_and_nothing_carries_over(reach, axis):
    env, _ = reach
    env.set_levels([AxisLevel(axis, 1.0)])
    acts = actions(env, 15)
    first = run(env, acts, 5)
    run(env, actions(env, 15, seed=9), 6)  # another episode in between
    again = run(env, acts, 5)
    for a, b in zip(first[0], again[0], strict=True):
        assert np.array_equal(a, b)
    assert first[2]["robogen"]["perturbations"] == again[2]["robogen"]["perturbations"]


# ----------------------------------------------------------------------------- images


@pytest.fixture(scope="module")
def frame():
    env = make("robogen/PickPlace-v0", obs_mode="pixels")
    obs, _ = env.reset(seed=SEED)
    env.close()
    return obs


MIN_IMAGE_DIFF = {"gaussian_noise": 20.0, "jpeg": 1.0, "blur": 1.0}
"""Smallest mean |pixel difference| (0-255) at magnitude 1 on the 84x84 PickPlace frame;
measured 61.0 (noise), 3.3 (JPEG at quality 7), 2.9 (blur, sigma 2.25 px)."""


@pytest.mark.parametrize("kind", ["gaussian_noise", "jpeg", "blur"])
def test_image_corruptions_change_the_frame(frame, kind):
    out = corrupt_image(frame, kind, 1.0, seed=4)
    assert out.shape == frame.shape and out.dtype == np.uint8
    diff = np.abs(out.astype(float) - frame).mean()
    assert diff >= MIN_IMAGE_DIFF[kind], diff
    assert np.array_equal(out, corrupt_image(frame, kind, 1.0, seed=4))
    weaker = np.abs(corrupt_image(frame, kind, 0.3, seed=4).astype(float) - frame).mean()
    assert weaker < diff  # grows with the magnitude
    if kind == "blur":  # fewer edges: the mean gradient drops
        def grad(x):
            return np.abs(np.diff(x.astype(float), axis=1)).mean()
        assert grad(out) < 0.8 * grad(frame)
    with pytest.raises(ValueError, match="got 'frame_drop'"):
        corrupt_image(frame, "frame_drop", 1.0)


@pytest.mark.parametrize("obs_mode", ["pixels", "state+pixels"])
def test_pixel_observations_are_corrupted_also_when_drawn_on_the_render_thread(obs_mode):
    """A deferred frame (the rollout worker's) gets the same corruption as a drawn one."""
    from robogen.envs.base import find_scene

    direct = PerturbedEnv(make("robogen/PickPlace-v0", obs_mode=obs_mode))
    deferred = PerturbedEnv(make("robogen/PickPlace-v0", obs_mode=obs_mode))
    nominal = make("robogen/PickPlace-v0", obs_mode=obs_mode)
    find_scene(deferred).defer_frames = True
    try:
        ps = pseed_for("sensor", "gaussian_noise")
        acts = actions(direct, 3)
        for env in (direct, deferred):
            env.set_levels([AxisLevel("sensor", 1.0)])
        a, _, _ = run(direct, acts, ps)
        b, _, _ = run(deferred, acts, ps)
        n, _, _ = run(nominal, acts)
        pix = (lambda o: o) if obs_mode == "pixels" else (lambda o: o["pixels"])
        assert isinstance(pix(b[1]), PendingFrame)
        b = [resolve_frames(o) for o in b]
        for x, y, z in zip(a, b, n, strict=True):
            assert np.array_equal(pix(x), pix(y))
            assert np.abs(pix(x).astype(float) - pix(z)).mean() > MIN_IMAGE_DIFF["gaussian_noise"]
            if obs_mode == "state+pixels":  # both parts corrupted
                assert np.array_equal(x["state"], y["state"])
                assert not np.array_equal(x["state"], z["state"])
    finally:
        for env in (direct, deferred, nominal):
            env.close()


def test_a_dropped_frame_is_the_previous_observation_delivered_again():
    env = PerturbedEnv(make("robogen/PickPlace-v0", obs_mode="state+pixels"))
    nominal = make("robogen/PickPlace-v0", obs_mode="state+pixels")
    try:
        env.set_levels([AxisLevel("sensor", 1.0)])
        acts = actions(env, 20)
        w, _, _ = run(env, acts, pseed_for("sensor", "frame_drop"))
        n, _, _ = run(nominal, acts)
        dropped = 0
        for t in range(1, len(w)):
            same = [np.array_equal(w[t][k], n[t][k]) for k in ("state", "pixels")]
            if all(same):
                continue
            assert not any(same)  # image and state dropped together
            assert all(np.array_equal(w[t][k], w[t - 1][k]) for k in ("state", "pixels"))
            dropped += 1
        assert dropped > 0
    finally:
        env.close()
        nominal.close()


def test_a_perturbation_record_round_trips(reach):
    env, _ = reach
    for axis, cls in (("sensor", SensorPerturbation), ("action", ActionPerturbation)):
        env.set_levels([AxisLevel(axis, 0.7, "test")])
        _, info = env.reset(seed=SEED, options={"perturbation_seed": 2})
        (record,) = info["robogen"]["perturbations"]
        assert record["type"] == cls.__name__
        assert record["values"]["kind"] in (SENSOR_KINDS if axis == "sensor"
                                            else ACTION_KINDS)["test"]
        assert 0.35 <= record["values"]["magnitude"] <= 0.7
        assert cls(**record["values"]).to_record() == {k: record[k] for k in
                                                       ("axis", "type", "values")}
