from __future__ import annotations

import numpy as np
from gymnasium import spaces

from robogen.policies.simple import RandomPolicy


def _policy(seed: int = 0) -> RandomPolicy:
    obs = spaces.Box(-np.inf, np.inf, (3,), np.float32)
    act = spaces.Box(-1.0, 1.0, (2,), np.float32)
    return RandomPolicy(obs, act, "state", seed)


def test_random_actions_depend_only_on_the_episode_not_on_history_or_batch():
    o1 = np.array([[0.1, 0.2, 0.3]], np.float32)
    o2 = np.array([[0.5, 0.5, 0.5]], np.float32)
    fresh = _policy()
    fresh.reset([0])
    alone = [fresh.act(o1)[0] for _ in range(3)]
    busy = _policy()
    busy.reset([0, 1])
    busy.act(np.concatenate([o2, o2]))  # another episode ran before in slot 0
    busy.reset([0])
    in_batch = [busy.act(np.concatenate([o1, o2]))[0] for _ in range(3)]
    np.testing.assert_array_equal(np.stack(alone), np.stack(in_batch))
    assert np.all(np.abs(np.stack(alone)) <= 1.0)
    assert not np.allclose(alone[0], alone[1])  # a stream, not a constant


def test_random_seed_changes_actions():
    o = np.zeros((1, 3), np.float32)
    a, b = _policy(0), _policy(1)
    a.reset([0])
    b.reset([0])
    assert not np.allclose(a.act(o), b.act(o))


def test_random_seeded_by_episode_seed_ignores_observation():
    a, b = _policy(), _policy()
    a.reset([0], seeds=[1234])
    b.reset([0], seeds=[1234])
    # a visual perturbation changes the observation, not the episode's actions
    np.testing.assert_array_equal(a.act(np.zeros((1, 3), np.float32)),
                                  b.act(np.ones((1, 3), np.float32)))


def test_random_actions_are_the_streams_uniform_draws_in_the_bounds():
    # the values Generator.uniform(low, high) draws from the slot's stream, so runs made
    # before the faster sampling (low + (high - low) * random) resume with the same actions
    obs = spaces.Box(-np.inf, np.inf, (3,), np.float32)
    act = spaces.Box(np.array([-2.0, 0.5, -1.0]), np.array([1.0, 0.75, 3.0]), (3,), np.float64)
    policy = RandomPolicy(obs, act, "state", 7)
    policy.reset([0, 1], seeds=[11, 12])
    got = np.stack([policy.act(np.zeros((2, 3), np.float32), slots=[0, 1]) for _ in range(50)])
    for slot, seed in ((0, 11), (1, 12)):
        rng = np.random.default_rng([7, seed])
        want = np.stack([rng.uniform(act.low, act.high) for _ in range(50)]).astype(np.float32)
        np.testing.assert_array_equal(got[:, slot], want)
    assert got.dtype == np.float32 and got.shape == (50, 2, 3)
    assert np.all(got >= act.low.astype(np.float32)) and np.all(got <= act.high.astype(np.float32))
