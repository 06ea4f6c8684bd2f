"""The one manifest module: field groups, pinned hashes, protocol views, config round trip."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from robogen.configs import load_eval_config
from robogen.rollout import manifest as mf
from robogen.rollout.runner import prepare
from robogen.types import (
    AxisLevel,
    BackendInfo,
    Condition,
    EvalManifest,
    PolicyLoadInfo,
    RenderSettings,
    SequentialRule,
    to_dict,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*settotalmass.*")

FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest_before_record_fields.json"

CONFIGS = {
    "reach": dict(env="robogen/Reach-v0", policy="expert:reach", axes=["physics", "embodiment"],
                  severities=[1.0], episodes=6, batch_size=3, seed=3),
    "sweep": dict(env="robogen/Reach-v0", policy="expert:reach",
                  axes=["physics", "object_pose", "lighting"], severities="sweep",
                  breaking_level=0.8, pairs=["physics+object_pose"], episodes=5, batch_size=2,
                  seed=7, width=64, height=48, max_steps=40),
    "reacher": dict(env="gymnasium/Reacher-v5", policy="random:3", axes=["physics"],
                    severities=[0.5, 1.0], success_threshold=-5.0,
                    env_kwargs={"reward_control_weight": 0.2}, episodes=4, seed=2,
                    combined=False),
}
PINNED = {
    "reach": "b6dff6e7729be488278e21f7332aef8847a501c6f1569f52d2c69a225023d9c2",
    "sweep": "cd3ce9e32bbb606088c001513be40185e3ff0048eeda5faddc990662b3b8cd1d",
    "reacher": "67076cdc4506313339a2659b3e012ee61b6c137760302eac1d9ac3a6cbc93da2",
}
"""spec_hash of each config as robogen computed it before the manifest had one module
(commit 9de2bca): stored runs resume and compare only while these stay."""
SCALE_PINNED = "ee16ab9f077ab2284c385586a54ff2274599eed3dc4896884d1c6949dbb2a40d"
SHADOW_MAP_PINNED = {
    "reach": "c40be1bd0199f3ae1cc600bccd62e80c51e389a52866e658d055f64bafb6d1ad",
    "sweep": "f1873a8c5e603ec51ac667fb01847ebde1469cd1913cf5c5b4f86dd93a40fe64",
}
"""spec_hash of the tabletop configs since the tabletop shadow map is sized to the image
(256 px for images up to 128 px, was 1024): the one change to what their episodes are, so
with ``shadowsize=1024`` their hash is :data:`PINNED`'s. A stored run keeps the shadow map
of its manifest (and its hash) when it resumes."""
TESSELLATION_PINNED = {
    "reach": "e50755d2015ea798bd36c0ee377223330c7900390854312fce8b876a3a8ec1f5",
    "sweep": "a7ac48c8b1e151efaa4c437759be91d781050f0d3d09ce97b0ca59bf5557e42b",
}
"""spec_hash of the tabletop configs since round geoms are drawn with 12 x 8 (slices x
stacks, was MuJoCo's 28 x 16): with 28 x 16 their hash is :data:`SHADOW_MAP_PINNED`'s, and
a stored manifest without the fields reads as 28 x 16 (the tessellation it rendered with)."""


def _cfg(name: str, **kw):
    return load_eval_config(None, **{**CONFIGS[name], "backend": "serial", **kw})


@pytest.fixture(scope="module")
def manifests() -> dict[str, EvalManifest]:
    return {name: prepare(_cfg(name)) for name in CONFIGS}


def test_field_groups_partition_the_manifest():
    """Every manifest field is hashed or record-only, never both: a new field must choose."""
    names = [f.name for f in dataclasses.fields(EvalManifest)]
    groups = [mf.PROTOCOL_FIELDS, mf.PAIRING_FIELDS, mf.POLICY_FIELDS, mf.SCHEDULE_FIELDS,
              mf.RECORD_ONLY_FIELDS]
    grouped = [n for g in groups for n in g]
    assert sorted(grouped) == sorted(names)
    assert len(grouped) == len(set(grouped))
    assert set(mf.HASHED_FIELDS) == set(names) - set(mf.RECORD_ONLY_FIELDS)
    assert set(mf.HASH_OMITTED_AT_DEFAULT) <= set(mf.HASHED_FIELDS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hashes_of_stored_runs_are_unchanged(manifests, name):
    m = manifests[name]
    assert m.spec_hash == mf.spec_hash(m) == TESSELLATION_PINNED.get(name, PINNED[name])
    if name in TESSELLATION_PINNED:
        assert (m.render.numslices, m.render.numstacks) == (12, 8)
        coarse = dataclasses.replace(m.render, numslices=28, numstacks=16)
        assert mf.spec_hash(dataclasses.replace(m, render=coarse)) == SHADOW_MAP_PINNED[name]
        legacy = {k: v for k, v in to_dict(m.render).items()
                  if k not in ("numslices", "numstacks")}
        assert RenderSettings.from_dict(legacy) == coarse  # a stored run keeps 28 x 16
        assert m.render.shadowsize == 256
        before = dataclasses.replace(coarse, shadowsize=1024)
        assert mf.spec_hash(dataclasses.replace(m, render=before)) == PINNED[name]


def test_fixture_and_scale_hashes_are_unchanged():
    from robogen.scaling.demos import factor_condition
    from robogen.scaling.pipeline import eval_manifest

    d = json.loads(FIXTURE.read_text())
    assert mf.spec_hash(EvalManifest.from_dict(d)) == d["spec_hash"]
    m = eval_manifest("robogen/Reach-v0", "expert:reach",
                      [factor_condition("physics", 1.0, "test")], n_episodes=4, seed=1)
    assert m.spec_hash == SCALE_PINNED


def _changed(m: EvalManifest, name: str) -> EvalManifest:
    other = {
        "schema_version": 2, "env_id": "robogen/Push-v0", "policy": "expert:push",
        "vecnormalize": "/stats.pkl", "obs_mode": "pixels", "axes": ("lighting",),
        "severities": (0.5,), "splits": ("test",), "combined": not m.combined,
        "n_episodes": m.n_episodes + 1, "seed": m.seed + 1, "max_steps": m.max_steps + 1,
        "batch_size": m.batch_size + 1, "success_threshold": 1.5,
        "conditions": m.conditions[:1], "render": dataclasses.replace(m.render, width=9),
        "env_kwargs": {"x": 1}, "policy_obs_mode": "pixels", "success_rule": "other",
        "breaking_levels": (0.5,), "versions": {"mujoco": "0"}, "spec_hash": "0" * 64,
        "deterministic_actions": False, "reward_source": "other",
        "policy_load": PolicyLoadInfo(("lr_schedule",)),
        "sequential": SequentialRule(0.1, m.n_episodes, m.batch_size),
        "plugins": ("my_pkg.robogen_plugin",), "policy_inputs": ("simulator",),
        "safety": True, "safety_sampling": "sampled per env step",
        "backend": BackendInfo("batched", "cuda:0", 4096, "float32"),
    }
    assert set(other) == {f.name for f in dataclasses.fields(EvalManifest)}
    return dataclasses.replace(m, **{name: other[name]})


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(EvalManifest)])
def test_a_field_changes_the_hash_iff_it_is_hashed(manifests, name):
    m = manifests["reach"]
    changed = mf.spec_hash(_changed(m, name)) != mf.spec_hash(m)
    assert changed == (name in mf.HASHED_FIELDS)
    # the GL backend never does
    gl = dataclasses.replace(m, render=dataclasses.replace(m.render, mujoco_gl="osmesa"))
    assert mf.spec_hash(gl) == mf.spec_hash(m)


@pytest.mark.parametrize("name", mf.PROTOCOL_FIELDS)
def test_differences_name_each_protocol_field(manifests, name):
    m = manifests["reach"]
    assert mf.differences(m, m) == []
    diffs = mf.differences(m, _changed(m, name), names=("a", "b"))
    assert [d.split(":")[0] for d in diffs] == [name]
    assert " a " in diffs[0] and " vs b " in diffs[0]


def test_protocol_ignores_order_and_the_gl_backend(manifests):
    m = manifests["reach"]
    shuffled = dataclasses.replace(
        m, axes=m.axes[::-1], conditions=m.conditions[::-1],
        render=dataclasses.replace(m.render, mujoco_gl="osmesa"))
    assert mf.protocol(shuffled) == mf.protocol(m)
    assert mf.spec_hash(shuffled) != mf.spec_hash(m)  # order fixes the unit ids


@pytest.mark.parametrize("name", ["reach", "reacher"])
def test_config_rebuilt_from_a_manifest_reproduces_it(manifests, name):
    m = manifests[name]
    again = prepare(mf.to_config(m, backend="serial"))
    assert again.spec_hash == m.spec_hash
    other = prepare(mf.to_config(m, policy="random:5", backend="serial"))
    assert mf.differences(m, other, fields=(*mf.PROTOCOL_FIELDS, *mf.PAIRING_FIELDS)) == []
    assert other.policy == "random:5" and other.spec_hash != m.spec_hash


def test_demo_manifest_records_the_collection():
    conds = [Condition("physics@1", (AxisLevel("physics", 1.0, "train"),))]
    m = mf.demo_manifest("robogen/Reach-v0", "expert:reach", conds, severity=1.0,
                         split="train", seed=4, max_steps=30, batch_size=5, image_size=32)
    assert (m.obs_mode, m.n_episodes, m.conditions, m.spec_hash) == (
        "state+pixels", 0, tuple(conds), "")
    assert m.render == RenderSettings(width=32, height=32, camera="front")
    assert m.schema_version == mf.MANIFEST_SCHEMA_VERSION


def _episodes(run_dir: Path) -> list:
    from robogen.rollout.store import ResultStore

    results = ResultStore.open(run_dir).load_results()
    return sorted((dataclasses.replace(r, wall_time_s=0.0) for r in results),
                  key=lambda r: (r.condition, r.episode_index))


def test_a_run_stored_before_the_newer_fields_resumes(tmp_path):
    """A manifest.json without the fields added since (as the fixture) loads, keeps its hash
    and resumes to the episodes an uninterrupted run stores."""
    from robogen.rollout.store import MANIFEST, ResultStore
    from robogen.runs.evaluation import evaluate, resume

    out = tmp_path / "old"
    evaluate(_cfg("reach", episodes=4, batch_size=2, axes=["physics"], out=out, videos=0))
    full = _episodes(out)
    d = json.loads((out / MANIFEST).read_text())
    newer = set(d) - set(json.loads(FIXTURE.read_text()))
    assert newer == {"deterministic_actions", "reward_source", "policy_load", "sequential",
                     "plugins", "policy_inputs", "safety", "safety_sampling", "backend"}
    old = {k: v for k, v in d.items() if k not in newer}
    del old["breaking_levels"]
    (out / MANIFEST).write_text(json.dumps(old))
    store = ResultStore.open(out)
    assert mf.spec_hash(store.manifest) == d["spec_hash"]
    for unit in sorted(store.done_units())[::2]:
        store.part_path(unit).unlink()
    resume(out, backend="serial", videos=0)
    assert _episodes(out) == full
