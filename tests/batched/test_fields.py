"""Per-world model fields: world i gets what the CPU axis writes for its episode, no leaks.

The reference is the CPU path itself: ``PerturbedEnv.reset`` with the episode's
``perturbation_seed``, whose scene model is compared field by field with the MJWarp
world's rows (equal to the float64 value cast to float32, MJWarp's precision, exactly).
"""

from __future__ import annotations

import copy
from typing import Any

import mujoco
import numpy as np
import pytest

from robogen.envs import find_scene, make
from robogen.perturbations.embodiment import EmbodimentPerturbation
from robogen.perturbations.physics import PhysicsPerturbation
from robogen.perturbations.wrapper import PerturbedEnv
from robogen.types import AxisLevel
from tests.batched.states import (
    HAVE_MJWARP,
    NO_MJWARP,
    QPOS_ATOL,
    QVEL_ATOL,
    STEPS,
    ctrl_sequence,
    initial_datas,
)

pytestmark = pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP)

PUSH = "robogen/Push-v0"
# (levels, perturbation_seed) per world; world 0 is the nominal condition (severity 0)
WORLDS = (
    ((AxisLevel("physics", 0.0),), 7),
    ((AxisLevel("physics", 1.0),), 11),
    ((AxisLevel("physics", 0.5),), 12),
    ((AxisLevel("physics", 1.0, "test"),), 13),
)


def _cpu_episode(env_id: str, levels: tuple[AxisLevel, ...], pseed: int
                 ) -> tuple[mujoco.MjModel, list[dict[str, Any]]]:
    env = PerturbedEnv(make(env_id), levels)
    _, info = env.reset(seed=0, options={"perturbation_seed": pseed})
    return copy.copy(find_scene(env).model), info["robogen"]["perturbations"]


def test_physics_worlds_get_the_cpu_axis_fields() -> None:
    from robogen.batched import (
        BatchedWorlds,
        get_field,
        install_world_fields,
        sample_perturbations,
        world_fields,
    )

    scene = find_scene(make(PUSH))
    nominal = copy.copy(scene.model)
    per_world = [sample_perturbations(scene, levels, ps) for levels, ps in WORLDS]
    cpu = [_cpu_episode(PUSH, levels, ps) for levels, ps in WORLDS]
    # the same draws as the serial backend's wrapper
    for perts, (_, records) in zip(per_world, cpu, strict=True):
        assert [p.to_record() for p in perts] == [
            {k: v for k, v in r.items() if k not in ("changed", "applied")} for r in records]
    assert per_world[0] == ()
    fields = world_fields(nominal, scene, per_world)
    assert {"geom_friction", "body_mass", "body_inertia", "opt.gravity"} <= set(fields)
    for values in fields.values():  # the nominal world's rows are the nominal values exactly
        assert values.dtype == np.float64
    for path, values in fields.items():
        assert np.array_equal(values[0], get_field(nominal, path)), path
    worlds = BatchedWorlds(nominal, len(WORLDS))
    installed = install_world_fields(worlds, fields)
    assert {"opt.gravity", "dof_invweight0"} <= set(installed)  # derived constants per world too
    checked = 0
    for path in PhysicsPerturbation.MODEL_FIELDS:
        if not worlds.known_field(path):
            continue  # not in MJWarp's model (stat.*, dof_M0): does not enter its physics
        rows = worlds.field(path)
        for i, (model, _) in enumerate(cpu):
            want = get_field(model, path).astype(np.float32).astype(np.float64)
            assert np.array_equal(rows[i], want), (path, i)
            checked += 1
    assert checked >= 4 * 10
    # each perturbed world really differs from nominal, and from the others
    friction = worlds.field("geom_friction")[:, :, 0]
    assert len({round(float(f), 6) for f in friction[:, 0]}) == len(WORLDS)


@pytest.mark.parametrize("env_id", ["gymnasium/HalfCheetah-v5", PUSH])
def test_perturbed_world_follows_c_mujoco_and_nominal_worlds_do_not_move(env_id: str) -> None:
    from robogen.batched import (
        BatchedWorlds,
        install_world_fields,
        perturbed_model,
        sample_perturbations,
        world_fields,
    )

    env = make(env_id)
    scene = find_scene(env)
    nominal = copy.copy(scene.model)
    perturbed = sample_perturbations(scene, (AxisLevel("physics", 1.0),), 11)
    per_world = [(), perturbed, ()]
    settle = 50 if env_id == PUSH else 0
    (start,) = initial_datas(nominal, env, scene, 1, settle_steps=settle)
    worlds = BatchedWorlds(nominal, 3, data=start)
    install_world_fields(worlds, world_fields(nominal, scene, per_world))
    worlds.set_states_from([start] * 3)
    cpu_model = perturbed_model(nominal, perturbed, scene)
    cpu = copy.copy(start)
    ctrls = ctrl_sequence(nominal, STEPS, 1)
    for k in range(STEPS):
        worlds.step(np.repeat(ctrls[k], 3, axis=0))
        cpu.ctrl[:] = ctrls[k, 0]
        mujoco.mj_step(cpu_model, cpu)
        np.testing.assert_allclose(worlds.qpos[1], cpu.qpos, rtol=0, atol=QPOS_ATOL)
        np.testing.assert_allclose(worlds.qvel[1], cpu.qvel, rtol=0, atol=QVEL_ATOL)
    qpos = worlds.qpos
    assert np.array_equal(qpos[0], qpos[2])  # the nominal worlds are bit-identical
    assert np.abs(qpos[1] - qpos[0]).max() > 10 * QPOS_ATOL  # the perturbed one is not


def test_embodiment_model_fields_are_per_world() -> None:
    from robogen.batched import BatchedWorlds, install_world_fields, perturbed_model, world_fields

    scene = find_scene(make(PUSH))
    nominal = copy.copy(scene.model)
    p = EmbodimentPerturbation(length_scale=1.0, mass_scale=1.5, damping_scale=2.0,
                               gain_scale=0.8)
    fields = world_fields(nominal, scene, [(), (p,)])
    assert {"body_mass", "dof_damping", "actuator_gainprm", "actuator_biasprm"} <= set(fields)
    worlds = BatchedWorlds(nominal, 2)
    install_world_fields(worlds, fields)
    model = perturbed_model(nominal, (p,), scene)
    for path in ("body_mass", "body_inertia", "dof_damping", "actuator_gainprm",
                 "actuator_biasprm", "body_subtreemass", "actuator_acc0"):
        rows = worlds.field(path)
        f32 = np.float32
        assert np.array_equal(rows[0], getattr(nominal, path).astype(f32).astype(float)), path
        assert np.array_equal(rows[1], getattr(model, path).astype(f32).astype(float)), path
    robot_dofs = np.flatnonzero(nominal.dof_damping)
    assert np.array_equal(worlds.field("dof_damping")[1, robot_dofs],
                          (nominal.dof_damping[robot_dofs] * 2.0).astype(np.float32))
