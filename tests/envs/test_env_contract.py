"""The env contract for every id of every registered env family (Gymnasium env checker,
determinism, pickling, varying observations, differing resets), parametrized over the
registry: a new family or a new Gymnasium catalog record is tested without editing a list.

The fast tests take the first id of each family (deterministic: the family's own order);
every other id runs in the ``slow`` tests. Families whose suite is not installed skip with
the install command."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

from robogen.envs import ENV_FAMILIES, MujocoScene, find_scene, make

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

FAST_IDS = tuple(ENV_FAMILIES.get(p).ids()[0] for p in ENV_FAMILIES.names())
"""One env per family (its first id) in the fast tests."""
SLOW_IDS = tuple(i for p in ENV_FAMILIES.names() for i in ENV_FAMILIES.get(p).ids()
                 if i not in FAST_IDS)
ENV_IDS = [*FAST_IDS, *(pytest.param(i, marks=pytest.mark.slow) for i in SLOW_IDS)]
STEPS = 8


def _make(env_id: str, **kwargs):
    fam = ENV_FAMILIES.get(env_id.split("/", 1)[0])
    why = fam.missing()
    if why is not None:
        pytest.skip(f"{fam.prefix} suite not installed: {why}")
    return make(env_id, **kwargs)


def _actions(env, n: int = STEPS) -> np.ndarray:
    space = env.action_space
    rng = np.random.default_rng(0)
    return rng.uniform(space.low, space.high, (n, *space.shape)).astype(space.dtype)


def _rollout(env, seed: int) -> list:
    out = [env.reset(seed=seed)]
    out += [env.step(a) for a in _actions(env)]
    return out


def test_fast_ids_cover_every_family() -> None:
    assert len(FAST_IDS) == len(ENV_FAMILIES) >= 4
    assert {i.split("/", 1)[0] for i in FAST_IDS} == set(ENV_FAMILIES.names())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_env_checker_and_seeding(env_id: str) -> None:
    env = _make(env_id)
    try:
        assert isinstance(find_scene(env), MujocoScene)
        check_env(env, skip_render_check=True)
        a, _ = env.reset(seed=5)
        b, _ = env.reset(seed=5)
        c, _ = env.reset(seed=6)
        assert np.array_equal(a, b) and not np.array_equal(a, c)
        assert a.dtype == np.float32 and env.observation_space.contains(a)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_rollout_and_observations_vary(env_id: str) -> None:
    """Two envs, same seed: equal obs, reward, terminated, truncated and info at every step."""
    a, b = _make(env_id), _make(env_id)
    try:
        ra, rb = _rollout(a, 7), _rollout(b, 7)
        assert data_equivalence(ra, rb, exact=True)
        assert all(isinstance(step[-1]["success"], bool) for step in ra[1:])
        observations = np.stack([np.asarray(step[0]) for step in ra])
        assert np.ptp(observations, axis=0).max() > 0  # not constant over random steps
        o1, _ = a.reset()
        o2, _ = a.reset()  # consecutive resets draw new initial states
        assert not np.array_equal(o1, o2)
    finally:
        a.close()
        b.close()


MUST_PICKLE = ("robogen", "gymnasium", "gymnasium-robotics")
"""Families whose envs round-trip through pickle; another may refuse with a TypeError that
names ``robogen.envs.make`` (Meta-World: :data:`~robogen.envs.metaworld_env.NOT_PICKLABLE`),
never return a broken copy."""


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pickle_round_trip(env_id: str) -> None:
    """A pickled env (pixels on, so the renderer exists) comes back with the same spaces and
    roles, and rolls out exactly like the original from the same seed (state and pixels)."""
    env = _make(env_id, obs_mode="state+pixels", render=None)
    try:
        env.reset(seed=3)
        for act in _actions(env, 2):
            env.step(act)
        try:
            blob = pickle.dumps(env)
        except TypeError as e:
            assert env_id.split("/", 1)[0] not in MUST_PICKLE, e
            assert "cannot be pickled" in str(e) and f"robogen.envs.make({env_id!r})" in str(e)
            return
        clone = pickle.loads(blob)
        try:
            assert clone.observation_space == env.observation_space
            assert clone.action_space == env.action_space
            assert find_scene(clone).roles == find_scene(env).roles
            assert data_equivalence(_rollout(clone, 11), _rollout(env, 11), exact=True)
        finally:
            clone.close()
    finally:
        env.close()
