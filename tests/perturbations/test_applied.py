"""Records say what the scene got, not what was sampled: clipped offsets, placed distractors."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robogen.envs import make
from robogen.perturbations import PerturbedEnv
from robogen.perturbations.distractors import SPEC_PREFIX
from robogen.rollout.plan import episode_seed, perturbation_seed

RUN_SEED = 0
EPISODES = 40


def _record(info: dict, axis: str) -> dict:
    (rec,) = [r for r in info["robogen"]["perturbations"] if r["axis"] == axis]
    return rec


def test_object_pose_records_the_clipped_offset_and_the_realized_state():
    env = PerturbedEnv(make("gymnasium/Reacher-v5"), [{"axis": "object_pose", "severity": 1.0}])
    nominal = PerturbedEnv(make("gymnasium/Reacher-v5"))
    model = env.unwrapped.model
    clipped = differ = 0
    try:
        for i in range(EPISODES):
            seed = episode_seed(RUN_SEED, i)
            _, info = env.reset(seed=seed, options={"perturbation_seed":
                                                    perturbation_seed(RUN_SEED, i)})
            nominal.reset(seed=seed)
            q, q0 = env.unwrapped.data.qpos, nominal.unwrapped.data.qpos
            rec = _record(info, "object_pose")
            sampled = rec["values"]["offsets"]
            rows = rec["applied"]["offsets"]
            assert [r["target"] for r in rows] == [s["target"] for s in sampled]
            for r, s in zip(rows, sampled, strict=True):
                adr = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT,
                                                          r["target"])] + r["index"]
                assert r["requested"] == s["offset"]
                assert r["initial"] == q[adr]  # the realized initial pose, exactly
                assert r["offset"] == q[adr] - q0[adr]  # applied = realized - unperturbed
                if r["clipped"]:
                    assert q[adr] in (s["low"], s["high"])
                    assert abs(r["offset"]) < abs(r["requested"])
                else:
                    assert r["offset"] == pytest.approx(r["requested"], abs=1e-12)
            clipped += rec["applied"]["n_clipped"]
            differ += any(r["clipped"] for r in rows)
    finally:
        env.close()
        nominal.close()
    # Reacher at severity 1: the target leaves its range in some episodes (7 of 40 measured)
    assert 0 < differ <= clipped


@pytest.mark.parametrize("env_id", ["gymnasium/Pusher-v5", "robogen/Push-v0"])
def test_distractors_record_only_the_placed_ones(env_id):
    env = PerturbedEnv(make(env_id), [{"axis": "distractors", "severity": 1.0}])
    fewer = 0
    try:
        for i in range(6):
            _, info = env.reset(seed=episode_seed(RUN_SEED, i),
                                options={"perturbation_seed": perturbation_seed(RUN_SEED, i)})
            rec = _record(info, "distractors")
            applied = rec["applied"]
            assert applied["requested"] == len(rec["values"]["items"])
            assert applied["placed"] == len(applied["items"]) <= applied["requested"]
            model, data = env.unwrapped.model, env.unwrapped.data
            if rec["values"]["mode"] == "spec":
                names = {model.geom(g).name for g in range(model.ngeom)}
                shown = sorted(int(n[len(SPEC_PREFIX):]) for n in names
                               if n.startswith(SPEC_PREFIX))
                assert [x["item"] for x in applied["items"]] == shown
                for x in applied["items"]:
                    g = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM,
                                          f"{SPEC_PREFIX}{x['item']}")
                    np.testing.assert_array_equal(x["pos"], model.geom_pos[g])
            else:
                for x in applied["items"]:
                    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, x["slot"])
                    np.testing.assert_array_equal(x["pos"],
                                                  data.mocap_pos[model.body_mocapid[body]])
            fewer += applied["placed"] < applied["requested"]
    finally:
        env.close()
    if env_id == "gymnasium/Pusher-v5":  # a crowded table: some never find a free spot
        assert fewer > 0
