"""How a checkpoint was loaded is recorded, and load errors name what users must know."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import robogen
from robogen.cli import app
from robogen.errors import CheckpointError
from robogen.policies import load_policy
from robogen.policies.base import MADE_WITH, non_default_env_kwargs, policy_load_info
from robogen.policies.sb3 import LOAD_FAILED, load_model
from robogen.rollout.manifest import spec_hash
from robogen.rollout.worker import make_env, policy_context
from robogen.types import REWARD_SOURCE_ENV, EvalManifest, PolicyLoadInfo

pytestmark = pytest.mark.filterwarnings("ignore:.*settotalmass.*")

ASSETS = Path(robogen.__file__).parent / "assets" / "checkpoints"
CKPT = ASSETS / "ppo_reacher.zip"
STATS = ASSETS / "ppo_reacher_vecnormalize.pkl"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest_before_record_fields.json"
SAVED = {"Python": "3.11.7", "Stable-Baselines3": "2.9.2", "PyTorch": "2.13.0+cpu"}
"""The shipped checkpoint's system_info.txt (pinned: the assets README names them)."""


def _reacher_ctx(**env_kwargs):
    from robogen.envs import make
    from robogen.perturbations import PerturbedEnv

    env = PerturbedEnv(make("gymnasium/Reacher-v5", **env_kwargs))
    return env, policy_context("gymnasium/Reacher-v5", "state", str(STATS), env)


def test_manifests_written_before_the_record_fields_keep_their_hash():
    d = json.loads(FIXTURE.read_text())
    assert "policy_load" not in d and "deterministic_actions" not in d
    m = EvalManifest.from_dict(d)
    assert (m.deterministic_actions, m.reward_source, m.policy_load) == (
        True, REWARD_SOURCE_ENV, PolicyLoadInfo())
    assert spec_hash(m) == d["spec_hash"]
    loaded = dataclasses.replace(m, policy_load=PolicyLoadInfo(("lr_schedule",), SAVED, SAVED))
    assert spec_hash(loaded) == d["spec_hash"]  # provenance, not protocol
    again = EvalManifest.from_dict(json.loads(json.dumps(dataclasses.asdict(loaded))))
    assert again == loaded


def test_sb3_load_records_replaced_entries_and_versions():
    env, ctx = _reacher_ctx()
    try:
        policy = load_policy(f"sb3:{CKPT}", ctx)
    finally:
        env.close()
    info = policy_load_info(policy)
    assert info.replaced == ("learning_rate", "lr_schedule", "clip_range")
    assert info.saved_versions == SAVED
    assert set(info.current_versions) == set(SAVED)
    assert policy_load_info(object()) == PolicyLoadInfo()


def _mixed(tmp_path: Path, replace: dict[str, bytes]) -> Path:
    out = tmp_path / "mixed.zip"
    with zipfile.ZipFile(CKPT) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, replace.get(name, src.read(name)))
    return out


def test_weights_that_do_not_fit_the_network_name_the_parameter_and_versions(tmp_path):
    from stable_baselines3 import PPO

    small = PPO("MlpPolicy", gym.make("Reacher-v5"), policy_kwargs={"net_arch": [8]},
                n_steps=64, device="cpu")
    small.save(tmp_path / "small.zip")
    with zipfile.ZipFile(tmp_path / "small.zip") as zf:
        weights = zf.read("policy.pth")
    with pytest.raises(CheckpointError) as e:
        load_model(_mixed(tmp_path, {"policy.pth": weights}))
    text = str(e.value)
    assert ("size mismatch: mlp_extractor.policy_net.0.weight is (8, 10) in the weights but "
            "(64, 10) in the network") in text
    assert "saved with Python 3.11.7, Stable-Baselines3 2.9.2, PyTorch 2.13.0+cpu; running" in text
    assert "copying a param" not in text and "torch.Size" not in text  # not torch's raw text


def test_unreadable_weights_name_the_entry_and_versions(tmp_path):
    with pytest.raises(CheckpointError) as e:
        load_model(_mixed(tmp_path, {"policy.pth": b"not a torch file"}))
    text = str(e.value)
    assert text.startswith(LOAD_FAILED.split("{why}")[0].format(path=tmp_path / "mixed.zip"))
    assert "policy.pth is not a readable torch file (UnpicklingError" in text
    assert "saved with Python 3.11.7" in text and "\n" not in text


def test_space_mismatch_names_the_non_default_env_kwargs(tmp_path):
    env = make_env(EvalManifest.from_dict({
        **json.loads(FIXTURE.read_text()), "env_id": "gymnasium/Hopper-v5",
        "env_kwargs": {"exclude_current_positions_from_observation": False}}))
    try:
        assert non_default_env_kwargs(env) == {"exclude_current_positions_from_observation": False}
    finally:
        env.close()
    nominal, _ = _reacher_ctx()
    assert non_default_env_kwargs(nominal) == {}
    nominal.close()
    spec = tmp_path / "eval.toml"
    spec.write_text(f'env = "gymnasium/Hopper-v5"\npolicy = "sb3:{CKPT}"\n'
                    f'vecnormalize = "{STATS}"\n'
                    "env_kwargs = {exclude_current_positions_from_observation = false}\n")
    res = CliRunner().invoke(app, ["eval", "--spec", str(spec), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert MADE_WITH.format(kwargs="exclude_current_positions_from_observation=False") in text
    assert "(10,)" in text and "(12,)" in text
    assert not (tmp_path / "r").exists()


def test_a_policy_server_run_says_pairing_is_by_initial_state_only() -> None:
    from robogen.reports.provenance import REMOTE_PAIRING, policy_load_lines

    m = EvalManifest.from_dict(json.loads(FIXTURE.read_text()))
    assert REMOTE_PAIRING not in policy_load_lines(m)
    served = dataclasses.replace(m, policy="remote:ws://127.0.0.1:8000")
    assert policy_load_lines(served)[0] == REMOTE_PAIRING
