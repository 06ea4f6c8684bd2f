from __future__ import annotations

import numpy as np

from robogen.rollout.plan import build_conditions, episode_seed, make_units, perturbation_seed


def test_conditions_nominal_first_singles_then_combined():
    conds = build_conditions(["lighting", "physics"], [0.5, 1.0], ["test"], combined=True)
    names = [c.name for c in conds]
    assert names == [
        "nominal",
        "lighting@0.5",
        "lighting@1",
        "lighting@test",
        "physics@0.5",
        "physics@1",
        "physics@test",
        "combined@0.5",
        "combined@1",
        "combined@test",
    ]
    assert conds[0].is_nominal and conds[0].levels == ()
    assert conds[-2].axes == ("lighting", "physics") and conds[-2].severity == 1.0
    assert conds[3].split == "test"


def test_single_axis_has_no_combined_and_zero_severity_is_dropped():
    conds = build_conditions(["camera"], [0.0, 1.0], combined=True)
    assert [c.name for c in conds] == ["nominal", "camera@1"]


def test_units_cover_every_episode_once_with_stable_ids():
    conds = build_conditions(["lighting"], [1.0])
    units = make_units(conds, n_episodes=10, batch_size=4)
    assert [len(u.episode_indices) for u in units] == [4, 4, 2, 4, 4, 2]
    assert [u.unit_id for u in units] == list(range(6))
    per_cond = {}
    for u in units:
        per_cond.setdefault(u.condition.name, []).extend(u.episode_indices)
    assert per_cond == {"nominal": list(range(10)), "lighting@1": list(range(10))}
    assert make_units(conds, 10, 4) == units


def test_seeds_depend_only_on_run_seed_and_episode():
    # pinned: changing the derivation would silently change every stored run's episodes
    seeds = [episode_seed(0, i) for i in range(100)]
    assert len(set(seeds)) == 100
    assert episode_seed(1, 0) != episode_seed(0, 0)
    assert perturbation_seed(0, 0) != episode_seed(0, 0)
    ss = np.random.SeedSequence(0, spawn_key=(3, 0))
    assert episode_seed(0, 3) == int(ss.generate_state(1, dtype=np.uint32)[0])
