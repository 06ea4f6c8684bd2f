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
