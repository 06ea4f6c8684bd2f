"""The SB3 loader builds no training optimizer and acts exactly like SB3's own ``PPO.load``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from robogen.policies.sb3 import SB3Policy, load_model

ROOT = Path(__file__).resolve().parents[2]
CKPT = ROOT / "robogen" / "assets" / "checkpoints" / "ppo_reacher.zip"


def test_loaded_policy_acts_like_plain_sb3_load():
    from stable_baselines3 import PPO

    model, algo = load_model(CKPT)
    policy = SB3Policy(model, algo, CKPT)
    plain = PPO.load(str(CKPT), device="cpu")
    obs = np.random.default_rng(0).normal(size=(8, 10)).astype(np.float32)
    for _ in range(2):  # the second call runs with the eval mode already set
        np.testing.assert_array_equal(policy.act(obs, deterministic=True),
                                      plain.predict(obs, deterministic=True)[0])
    assert not model.policy.training
    model.policy.set_training_mode(True)  # a real switch still switches
    assert model.policy.training
    model.policy.set_training_mode(False)
    assert not model.policy.training


def test_loading_does_not_import_torch_dynamo():
    code = ("import sys; from pathlib import Path; from robogen.policies.sb3 import load_model; "
            f"load_model(Path({str(CKPT)!r})); print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_deterministic_fast_path_is_bitwise_predict():
    """PPO's deterministic actions skip building the Gaussian (``_mean_action_fn``) and stay
    bitwise SB3's ``predict``: float32 and float64 (VecNormalize) batches, out-of-range
    actions clipped, a single row."""
    model, algo = load_model(CKPT)
    policy = SB3Policy(model, algo, CKPT)
    assert policy._mean_action is not None  # the shipped PPO takes the fast path
    rng = np.random.default_rng(1)
    for batch, scale, dtype in ((1, 1.0, np.float32), (8, 1.0, np.float64),
                                (64, 30.0, np.float64)):
        obs = (scale * rng.normal(size=(batch, 10))).astype(dtype)
        want = np.asarray(model.predict(obs, deterministic=True)[0], np.float32)
        got = policy.act(obs, deterministic=True)
        np.testing.assert_array_equal(got, want)
        assert got.shape == (batch, 2) and got.dtype == np.float32
    import torch

    with torch.no_grad():  # actions far outside [-1, 1]: both paths clip them the same
        model.policy.action_net.weight.mul_(100.0)
    obs = rng.normal(size=(64, 10))
    big = policy.act(obs)
    np.testing.assert_array_equal(big, model.predict(obs, deterministic=True)[0])
    assert np.abs(big).max() == 1.0


def test_fast_path_declines_what_it_does_not_mirror():
    from robogen.policies.sb3 import _mean_action_fn

    model, _ = load_model(CKPT)
    assert _mean_action_fn(None) is None

    class Custom(type(model.policy)):
        def _predict(self, observation, deterministic=False):  # noqa: ANN001, ANN202
            return super()._predict(observation, deterministic)

    model.policy.__class__ = Custom  # a user subclass: SB3's predict is used
    assert _mean_action_fn(model.policy) is None
