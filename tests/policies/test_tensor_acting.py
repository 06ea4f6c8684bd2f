"""Policies acting on device tensors (robogen.policies.base.TensorActing), the batched backend's
path: the same actions as ``act`` on the host copy of the batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import robogen
from robogen.envs import make
from robogen.policies import LoadContext, load_policy
from robogen.policies.base import TensorActing

CKPT_DIR = Path(robogen.__file__).parent / "assets" / "checkpoints"


def test_sb3_act_tensor_equals_act_on_the_host_batch() -> None:
    env = make("gymnasium/Reacher-v5")
    ctx = LoadContext("gymnasium/Reacher-v5", env.observation_space, env.action_space, "state",
                      str(CKPT_DIR / "ppo_reacher_vecnormalize.pkl"))
    policy = load_policy(f"sb3:{CKPT_DIR / 'ppo_reacher.zip'}", ctx)
    env.close()
    assert isinstance(policy, TensorActing)
    rng = np.random.default_rng(0)
    obs = (rng.standard_normal((16, 10)) * 3).astype(np.float32)  # some rows clip
    want = policy.act(obs, deterministic=True)
    got = policy.act_tensor(torch.from_numpy(obs))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert got.shape == want.shape == (16, 2)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    assert len({tuple(r) for r in want.round(4)}) > 1  # rows differ: not a constant policy


def test_flax_act_tensor_goes_through_dlpack_and_equals_act() -> None:
    from robogen.policies.flax_policy import FlaxBCPolicy
    from robogen.scaling.bc import init_bc

    model = init_bc({"state": (7,)}, 3, seed=1, action_low=np.full(3, -2.0, np.float32),
                    action_high=np.full(3, 2.0, np.float32))
    policy = FlaxBCPolicy(model)
    assert isinstance(policy, TensorActing)
    obs = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    want = policy.act(obs)
    got = policy.act_tensor(torch.from_numpy(obs))
    assert isinstance(got, torch.Tensor) and got.shape == (5, 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    assert np.ptp(want) > 0


def test_flax_act_tensor_takes_state_and_pixels_tensors_and_equals_act() -> None:
    """The shipped ``state+pixels`` Push policy: a dict of a float32 state tensor and a uint8
    frame tensor (the batched backend's pixel observations) gives ``act``'s actions exactly
    (the same jitted row-by-row network); a batch in the wrong layout gives None."""
    from robogen.policies.bc_io import load_bc
    from robogen.policies.flax_policy import FlaxBCPolicy

    model = load_bc(Path(robogen.__file__).parent / "assets" / "policies" / "push_pixels_plain")
    policy = FlaxBCPolicy(model)
    rng = np.random.default_rng(2)
    obs = {"state": rng.standard_normal((3, 30)).astype(np.float32),
           "pixels": rng.integers(0, 256, (3, 84, 84, 3), dtype=np.uint8)}
    want = policy.act(obs)
    got = policy.act_tensor({k: torch.from_numpy(v) for k, v in obs.items()})
    assert isinstance(got, torch.Tensor) and got.shape == (3, 6)
    np.testing.assert_array_equal(got.numpy(), want)
    assert np.ptp(want) > 0
    assert policy.act_tensor(torch.from_numpy(obs["pixels"])) is None  # pixels alone
