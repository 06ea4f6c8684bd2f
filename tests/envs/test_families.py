"""The env-family registry: ids, routing, unknown names, missing suites, a toy family."""

from __future__ import annotations

import sys
import types

import gymnasium as gym
import pytest

from robogen.envs import ENV_FAMILIES, EnvFamily, SuiteMissingError, list_env_ids, make
from robogen.envs.families import SUITE_MISSING, family_of, register_env_family
from robogen.envs.tabletop import make_task
from robogen.errors import UnknownNameError

FAMILIES = ENV_FAMILIES.names()


def family_ids() -> tuple[str, ...]:
    """This module doubles as the module of the "absent" family below."""
    return ("Thing-v0",)


@pytest.mark.parametrize("prefix", FAMILIES, ids=FAMILIES)
def test_every_family_lists_prefixed_ids(prefix: str) -> None:
    fam = ENV_FAMILIES.get(prefix)
    ids = fam.ids()
    assert ids and all(i.startswith(prefix + "/") for i in ids)
    assert set(ids) <= set(list_env_ids())
    assert all(family_of(i) is fam for i in ids)


def test_list_env_ids_is_the_union_of_the_families() -> None:
    ids = list_env_ids()
    assert len(ids) == len(set(ids))
    assert ids == tuple(i for p in FAMILIES for i in ENV_FAMILIES.get(p).ids())
    # the ids users rely on
    for env_id in ("robogen/PickPlace-v0", "gymnasium/Reacher-v5", "metaworld/pick-place-v3",
                   "gymnasium-robotics/FetchReach-v4"):
        assert env_id in ids


def test_unknown_prefix_and_name_list_close_matches() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'robogen/PickPlace-v0'"):
        make("robogen/PickPlac-v0")
    with pytest.raises(UnknownNameError, match="unknown env id 'nope/x'"):
        make("nope/x")
    with pytest.raises(UnknownNameError, match="metaworld/pick-place-v3"):
        make("metaworld/pick-place")


def test_missing_suite_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    fam = EnvFamily(prefix="absent", description="a suite that is not installed",
                    module=__name__, requires="robogen_no_such_suite", install="make setup-x")
    monkeypatch.setitem(ENV_FAMILIES._entries, "absent", fam)
    assert "absent/Thing-v0" in list_env_ids()
    assert fam.missing() is not None
    with pytest.raises(SuiteMissingError) as err:
        make("absent/Thing-v0")
    assert str(err.value) == SUITE_MISSING.format(
        what="env 'absent/Thing-v0'", module="robogen_no_such_suite", install="make setup-x",
        python=sys.executable)


def test_a_toy_family_is_one_module_and_one_registration(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A new family needs no edit elsewhere: make(), list_env_ids() and family_of() see it."""
    mod = types.ModuleType("toy_family_mod")

    def family_make(name: str, options, **kwargs):
        assert name == "Reach-v0"
        return make_task("robogen/Reach-v0", options, **kwargs)

    mod.family_ids = lambda: ("Reach-v0",)  # type: ignore[attr-defined]
    mod.family_make = family_make  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_family_mod", mod)
    monkeypatch.setattr(ENV_FAMILIES, "_entries", dict(ENV_FAMILIES._entries))
    register_env_family(EnvFamily(prefix="toy", description="toy", module="toy_family_mod"))
    assert "toy/Reach-v0" in list_env_ids()
    env = make("toy/Reach-v0", max_steps=7)
    try:
        assert isinstance(env, gym.Env) and env.spec.max_episode_steps == 7
    finally:
        env.close()
    with pytest.raises(ValueError, match="already registered"):
        register_env_family(EnvFamily(prefix="toy", description="again", module="x"))
    with pytest.raises(ValueError, match="without '/'"):
        register_env_family(EnvFamily(prefix="a/b", description="bad", module="x"))


def test_a_toy_family_and_a_toy_policy_scheme_run_through_robogen_eval(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One module each, no edits elsewhere: ``robogen eval`` (serial) runs toy/ with toy:."""
    import json

    import numpy as np
    from typer.testing import CliRunner

    from robogen.cli import app
    from robogen.policies import (
        POLICY_SCHEMES,
        PolicyCapabilities,
        policy_uri_forms,
        register_policy_scheme,
    )
    from robogen.policies.base import _URI_FORMS

    env_mod = types.ModuleType("toy_env_family")  # the family's one module
    env_mod.family_ids = lambda: ("Reach-v0",)  # type: ignore[attr-defined]
    env_mod.family_make = lambda name, options, **kw: make_task(  # type: ignore[attr-defined]
        "robogen/Reach-v0", options, **kw)
    monkeypatch.setitem(sys.modules, "toy_env_family", env_mod)
    monkeypatch.setattr(ENV_FAMILIES, "_entries", dict(ENV_FAMILIES._entries))
    monkeypatch.setattr(POLICY_SCHEMES, "_entries", dict(POLICY_SCHEMES._entries))
    monkeypatch.setattr("robogen.policies.base._URI_FORMS", dict(_URI_FORMS))
    register_env_family(EnvFamily(prefix="toy", description="toy", module="toy_env_family"))

    class ZeroPolicy:  # the scheme's one module would hold this and its loader
        capabilities = PolicyCapabilities()
        obs_mode = "state"

        def __init__(self, ctx) -> None:  # noqa: ANN001
            self.observation_space, self.action_space = ctx.observation_space, ctx.action_space
            self.resets = 0

        def reset(self, slots) -> None:  # noqa: ANN001
            self.resets += len(slots)

        def act(self, obs, *, deterministic=True):  # noqa: ANN001, ANN201
            return np.zeros((len(obs), *self.action_space.shape), np.float32)

    register_policy_scheme("toy_zero", form="toy_zero:")(lambda rest, ctx: ZeroPolicy(ctx))
    assert policy_uri_forms()["toy_zero"] == "toy_zero:"
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "eval", "--env", "toy/Reach-v0", "--policy", "toy_zero:", "--backend", "serial",
        "--axes", "lighting", "--severities", "1", "--episodes", "2", "--max-steps", "5",
        "--videos", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["env_id"], manifest["policy"]) == ("toy/Reach-v0", "toy_zero:")
    report = json.loads((out / "report.json").read_text())
    n = {c["condition"]: c["n"] for c in report["conditions"]}
    assert n == {"nominal": 2, "lighting@1": 2}
    assert all(c["success_rate"] == 0.0 for c in report["conditions"])  # zero actions never reach
