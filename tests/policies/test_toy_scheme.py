"""A policy scheme is one module and one registration: loading, ``robogen list``, ``robogen eval
--help`` and config validation all see a toy scheme registered here, with no edit elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from robogen.cli import app
from robogen.configs import EvalConfig
from robogen.envs import make
from robogen.policies import (
    POLICY_SCHEMES,
    LoadContext,
    PolicyCapabilities,
    load_policy,
    policy_uri_forms,
    register_policy_scheme,
)

FORM = "toy_const:VALUE"


class ConstPolicy:
    """The toy scheme's policy: every action component is the URI's VALUE."""

    capabilities = PolicyCapabilities()
    obs_mode = "state"

    def __init__(self, value: float, ctx: LoadContext) -> None:
        self.value = value
        self.observation_space, self.action_space = ctx.observation_space, ctx.action_space

    def reset(self, slots) -> None:  # noqa: ANN001
        pass

    def act(self, obs, *, deterministic: bool = True) -> np.ndarray:  # noqa: ANN001
        return np.full((len(obs), *self.action_space.shape), self.value, np.float32)


@pytest.fixture
def toy_scheme(monkeypatch: pytest.MonkeyPatch) -> str:
    """Register ``toy_const`` in copies of the registries (undone after the test)."""
    from robogen.policies import base

    monkeypatch.setattr(POLICY_SCHEMES, "_entries", dict(POLICY_SCHEMES._entries))
    monkeypatch.setattr(base, "_URI_FORMS", dict(base._URI_FORMS))
    register_policy_scheme("toy_const", form=FORM)(
        lambda rest, ctx: ConstPolicy(float(rest), ctx))
    return "toy_const"


def test_toy_scheme_loads_and_acts(toy_scheme: str) -> None:
    env = make("robogen/Reach-v0")
    try:
        ctx = LoadContext(env_id="robogen/Reach-v0", observation_space=env.observation_space,
                          action_space=env.action_space)
        policy = load_policy("toy_const:0.25", ctx)
        obs, _ = env.reset(seed=0)
        action = policy.act(obs[None])
        assert action.shape == (1, *env.action_space.shape)
        assert np.all(action == np.float32(0.25))
    finally:
        env.close()
    assert policy_uri_forms()[toy_scheme] == FORM


def test_toy_scheme_in_list_and_eval_help(toy_scheme: str) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["list"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "toy_const:" in listed.output and FORM in listed.output
    helped = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "400"})
    assert helped.exit_code == 0, helped.output
    assert FORM in helped.output and "sb3:PATH.zip" in helped.output


def test_toy_scheme_absent_from_help_when_not_registered() -> None:
    """The help is built from the registry, not a list: without the module, no toy form."""
    helped = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "400"})
    assert helped.exit_code == 0 and "sb3:PATH.zip" in helped.output
    assert "toy_const" not in helped.output


def test_config_validation_uses_the_registry(toy_scheme: str) -> None:
    assert EvalConfig(env="robogen/Reach-v0", policy="toy_const:1").policy == "toy_const:1"
    with pytest.raises(ValidationError, match="did you mean 'toy_const'"):
        EvalConfig(env="robogen/Reach-v0", policy="toy_cnst:1")
