"""Policy paths in a manifest are absolute: a run resumes from any working directory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from robogen.configs import load_eval_config
from robogen.policies import resolve_policy_uri
from robogen.rollout.runner import plan_units
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate, resume
from robogen.types import INVALID_CAUSES

pytestmark = pytest.mark.filterwarnings("ignore:.*settotalmass.*")

ENV = "robogen/Reach-v0"
POLICY_FILE = '''
def make(ctx):
    from robogen.policies import load_policy

    return load_policy("random:1", ctx)
'''


def _strip(results):
    return sorted((dataclasses.replace(r, wall_time_s=0.0) for r in results),
                  key=lambda r: (r.condition, r.episode_index))


def _flax_checkpoint(path: Path) -> None:
    from robogen.envs import make
    from robogen.policies.bc_io import save_bc
    from robogen.scaling.bc import init_bc

    env = make(ENV, obs_mode="state")
    space = env.action_space
    env.close()
    save_bc(init_bc({"state": env.observation_space.shape}, space.shape[0], seed=2,
                    action_low=space.low, action_high=space.high), path)


@pytest.mark.parametrize("kind", ["flax", "python_file"])
def test_run_with_a_relative_policy_path_resumes_from_another_directory(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made, other = tmp_path / "made_here", tmp_path / "elsewhere"
    made.mkdir()
    other.mkdir()
    monkeypatch.chdir(made)
    if kind == "flax":
        _flax_checkpoint(made / "bc")
        uri, absolute = "flax:bc", f"flax:{made / 'bc'}"
    else:
        (made / "my_policy.py").write_text(POLICY_FILE)
        uri, absolute = "python:my_policy.py:make", f"python:{made / 'my_policy.py'}:make"
    out = tmp_path / "run"
    cfg = load_eval_config(None, env=ENV, policy=uri, axes=["physics"], severities=[1.0],
                           episodes=4, batch_size=2, seed=6, backend="serial", videos=0,
                           out=out)
    evaluate(cfg)
    store = ResultStore.open(out)
    assert store.manifest.policy == absolute
    full = _strip(store.load_results())
    assert len(full) == 8
    done = sorted(store.done_units())
    assert len(done) == len(plan_units(store.manifest)) == 4
    for unit in done[1::2]:  # as if the run had been killed before these units
        store.part_path(unit).unlink()

    monkeypatch.chdir(other)
    outcome = resume(out, backend="serial", videos=0)
    assert outcome.n_episodes == 8
    resumed = _strip(ResultStore.open(out).load_results())
    assert resumed == full
    assert not {r.cause for r in resumed} & set(INVALID_CAUSES)  # every episode ran


def test_each_scheme_resolves_its_own_path(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt.zip").write_bytes(b"")
    (tmp_path / "bc").mkdir()
    (tmp_path / "pol.py").write_text(POLICY_FILE)
    assert resolve_policy_uri("sb3:ckpt.zip") == f"sb3:{tmp_path / 'ckpt.zip'}"
    assert resolve_policy_uri("ckpt.zip") == f"sb3:{tmp_path / 'ckpt.zip'}"
    assert resolve_policy_uri("sb3:ckpt") == f"sb3:{tmp_path / 'ckpt'}"  # .zip may be omitted
    assert resolve_policy_uri("flax:bc") == f"flax:{tmp_path / 'bc'}"
    assert resolve_policy_uri("python:pol.py:make") == f"python:{tmp_path / 'pol.py'}:make"
    unchanged = [
        "python:pkg.module:factory", "expert:reach", "random", "random:3",
        "remote:ws://127.0.0.1:8000?obs=state", "flax:missing", "sb3:missing.zip",
        "python:missing.py:make", "sb4:ckpt.zip", "flax:", f"flax:{tmp_path / 'bc'}",
    ]
    assert [resolve_policy_uri(u) for u in unchanged] == unchanged
