"""What scenes and env families declare (issue 36 §5): one typed capabilities record per
scene, suite packages and scripted experts from the family registry, heights from the model."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import robogen.envs.scene as sc
from robogen.envs import ENV_FAMILIES, SceneCapabilities, find_scene, make
from robogen.envs.families import EnvFamily, expert_families, suite_packages
from robogen.policies.suite_experts import handles, suite_expert_factory
from robogen.rollout.manifest import package_versions

CORE_IDS = ("robogen/PickPlace-v0", "gymnasium/Pusher-v5", "gymnasium/Hopper-v5")


@pytest.mark.parametrize("env_id", CORE_IDS)
def test_every_scene_declares_its_capabilities(env_id: str) -> None:
    env = make(env_id)
    try:
        caps = find_scene(env).capabilities
    finally:
        env.close()
    assert isinstance(caps, SceneCapabilities)
    assert caps.rebuildable_objects  # the built-in tasks and Gymnasium find objects by body
    assert not caps.step_checks_state  # they step with mj_step


def test_suite_packages_and_experts_come_from_the_families(monkeypatch) -> None:
    # the manifest's suite versions, in the order runs have always recorded them
    assert suite_packages() == ("dm_control", "robosuite", "metaworld", "gymnasium-robotics")
    assert set(expert_families()) == {"robosuite", "metaworld", "gymnasium-robotics"}
    assert set(package_versions()) >= {"robogen", "mujoco", "gymnasium"}

    # a family registered with a package and an expert gets both, without another list
    monkeypatch.setattr(ENV_FAMILIES, "_entries", dict(ENV_FAMILIES._entries))
    ENV_FAMILIES.register("toyexp", module=__name__)(EnvFamily(
        prefix="toyexp", description="test", module=__name__, package="numpy",
        expert=f"{__name__}:toy_expert"))
    assert suite_packages()[-1] == "numpy"
    assert "numpy" in package_versions()
    assert handles("toyexp/Thing-v0", None)
    assert not handles("robogen/Reach-v0", None)
    assert suite_expert_factory("toyexp") is toy_expert
    assert suite_expert_factory("robogen") is None


def toy_expert(name: str, ctx: object) -> str:
    """The toy family's expert factory."""
    return f"expert of {name}"


def test_tasks_read_the_table_top_from_the_model() -> None:
    env = make("robogen/Push-v0")
    try:
        scene = find_scene(env)
        assert sc.table_top_z(scene.model) == sc.TABLE_TOP_Z  # nominal: the constant, exactly
        assert scene.roles.distractor_region == sc.DISTRACTOR_REGION
        spec = scene.nominal_spec()
        raise_by = 0.05
        table = spec.body("table")
        table.pos = [table.pos[0], table.pos[1], table.pos[2] + raise_by]
        scene.install_model(spec.compile())
        assert sc.table_top_z(scene.model) == pytest.approx(sc.TABLE_TOP_Z + raise_by)
        # distractors stand on (and the safety drop check measures from) the raised top
        assert scene.roles.distractor_region[4] == pytest.approx(sc.TABLE_TOP_Z + raise_by)
        env.reset(seed=0)
        obj = scene.data.qpos[sc.SceneIds(scene.model).object_qadr:][:3]
        np.testing.assert_allclose(obj[2], sc.TABLE_TOP_Z + raise_by + sc.OBJECT_HALF_SIZE)
    finally:
        env.close()


def test_no_scene_opt_in_is_read_by_getattr() -> None:
    root = Path(importlib.import_module("robogen").__file__).parent
    names = ("step_checks_state", "rebuildable_objects", "transposes_images", '"env_id"')
    hits = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if "getattr(" in line and any(n in line for n in names)]
    assert hits == []
