"""The batched extra's absence and bad input: clear errors, checked without MJWarp."""

from __future__ import annotations

import sys

import pytest

from robogen.batched import BatchedWorlds, load_mjwarp, sample_perturbations
from robogen.envs import find_scene, make
from robogen.errors import DependencyMissingError, InvalidSpecError
from robogen.types import AxisLevel


def test_missing_extra_names_the_install_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # makes `import mujoco_warp` fail
    with pytest.raises(DependencyMissingError) as e:
        load_mjwarp()
    assert 'pip install "robogen[batched]"' in str(e.value)
    assert "make setup-batched" in str(e.value)


@pytest.mark.parametrize("worlds", [0, -3, 2.5, True])
def test_bad_world_count_is_refused_before_loading(worlds: object) -> None:
    model = find_scene(make("gymnasium/Reacher-v5")).model
    with pytest.raises(InvalidSpecError, match="worlds must be an int >= 1"):
        BatchedWorlds(model, worlds)  # type: ignore[arg-type]


@pytest.mark.parametrize(("env_id", "levels", "match"), [
    ("robogen/Push-v0", (AxisLevel("sensor", 1.0),),
     "axis 'sensor' cannot run on the batched backend"),
    ("robogen/Push-v0", (AxisLevel("embodiment", 1.0),), "edits the model structure"),
    ("robogen/Push-v0", (AxisLevel("distractors", 1.0),), "physical distractors"),
    ("gymnasium/Reacher-v5", (AxisLevel("lighting", 1.0),), "edits the headlight"),
], ids=["sensor", "embodiment-lengths", "physical-distractors", "headlight"])
def test_unbatchable_draws_are_refused_naming_the_ray_backend(
        env_id: str, levels: tuple[AxisLevel, ...], match: str) -> None:
    scene = find_scene(make(env_id))
    with pytest.raises(InvalidSpecError, match=match) as e:
        sample_perturbations(scene, levels, 3)
    assert "--backend ray" in str(e.value)
