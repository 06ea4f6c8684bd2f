"""Batched safety metrics (robogen.batched.safety) equal the serial SafetyMonitor's, per world.

Per env, ``WORLDS`` serial envs are reset (seeds 0, 1, 2; the tabletop task then ``SETTLE``
C MuJoCo steps, the plan's pitfall), given a per-world scenario and copied into the worlds.
Then ``STEPS`` env steps of each world's action sequence run three ways:

* batched: ``apply_action``, :meth:`BatchedSafety.advance`, :meth:`BatchedSafety.after_step`;
* the same states: after every physics substep each world's MJWarp state is copied into a
  host ``MjData`` (``mujoco_warp.get_data_into``) and shown to a serial
  :class:`SafetyMonitor` exactly as the serial env shows it (substep observer, ``step``).
  The two read the same contacts and constraint forces, so they agree to float32 rounding
  (:data:`SAME_RTOL`) and the counts exactly: this pins the reading (contact pool, world ids,
  efc rows, force decoding, masks);
* the serial env (C MuJoCo, float64) with its own monitor: the trajectories drift apart
  in float32, so the force agrees within :data:`FORCE_RTOL` and the counts within
  :data:`COUNT_ATOL` steps; this pins where each metric is read (substeps, after the step).

At step ``RESET_AT`` world ``RESET_ROW`` starts a new episode (a new reset state written into
its row): its metrics restart, the other worlds' do not.

Push scenarios (so that a world's metrics leaking into another would show): world 0 presses
the arm into the table (contact force), world 1 drives the elbow to its limit with a
distractor resting on the box, world 2 starts with the box beside the table (it drops) and is
the world reset at ``RESET_AT`` (its new episode keeps the box on the table).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from robogen.envs import find_scene, make
from tests.batched.states import HAVE_MJWARP, NO_MJWARP

pytestmark = pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP)

WORLDS = 3
STEPS = 27
PRESS_STEPS = 14
"""Push world 0 moves its shoulder forward for this many steps, then holds (steady force:
the hand sliding on the table under a rising force is a stick-slip that float32 and float64
trajectories resolve a step apart)."""
SETTLE = 50
"""C MuJoCo steps after a tabletop reset before the comparison starts (box in contact)."""
RESET_AT, RESET_ROW = 12, 2

SAME_RTOL = 1e-9
"""Relative force tolerance on the same states (the same float32 forces, summed in float64 in
another order)."""
FORCE_RTOL = 1e-4
"""Relative tolerance of ``peak_contact_force_n`` against the serial env's trajectory (float32
against float64 physics; measured up to 1.6e-6 on Push and Hopper)."""
COUNT_ATOL = 1
"""Steps by which a count may differ from the serial env's (a limit reached one step apart
along a drifting float32 trajectory; measured 0)."""

PUSH_ACTIONS = (
    (0.0, 1.0, 0.0, 0.0, 0.0, 0.0),   # shoulder forward: the hand presses into the table
    (0.0, 0.0, 1.0, 0.0, 0.0, 0.0),   # elbow to its upper limit
    (0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
)


class Shim:
    """What SafetyMonitor reads of a scene, over a host copy of one world's MJWarp state."""

    def __init__(self, model: Any, roles: Any, substeps: bool) -> None:
        import mujoco

        self.model, self.roles, self.data = model, roles, mujoco.MjData(model)
        if substeps:
            self.substep_observer = None


@dataclasses.dataclass
class Run:
    batched: list[dict[str, Any]]
    same: list[dict[str, Any]]
    serial: list[dict[str, Any]]
    before_reset: dict[str, dict[str, Any]]
    """Row ``RESET_ROW``'s metrics just before its reset, per way (batched/same/serial)."""
    at_reset: dict[str, Any]
    """Row ``RESET_ROW``'s batched metrics right after its reset (no step yet)."""
    safety: Any
    worlds: Any


def _push_scenario(envs: list[Any], roles: tuple[str, ...] = ("", "distractor", "off_table")
                   ) -> None:
    """Distractor slot 0 collides (every env's model); in the ``distractor`` env it rests on
    the box; the ``off_table`` env's box starts beside the table."""
    import mujoco

    from robogen.envs import scene as sc

    for env, role in zip(envs, roles, strict=True):
        scene = find_scene(env)
        model, data = scene.model, scene.data
        box = model.geom("distractor_0_box").id
        model.geom_contype[box] = model.geom_conaffinity[box] = 1
        model.body_contype[model.geom_bodyid[box]] |= 1
        obj = sc.SceneIds(model).object_qadr
        if role == "distractor":  # 2 mm into the box's top face: in contact at every step
            top = data.qpos[obj:obj + 3] + (0.0, 0.0, sc.OBJECT_HALF_SIZE + 0.02 - 0.002)
            data.mocap_pos[model.body("distractor_0").mocapid[0]] = top
        if role == "off_table":
            data.qpos[obj + 1] = 0.5  # the table ends at y = 0.4
            data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)


def _envs(env_id: str, seeds: range | list[int]) -> list[Any]:
    import mujoco

    envs = []
    for seed in seeds:
        env = make(env_id, max_steps=100)
        env.reset(seed=seed)
        if env_id.startswith("robogen/"):
            scene = find_scene(env)
            mujoco.mj_step(scene.model, scene.data, nstep=SETTLE)
        envs.append(env)
    return envs


def _actions(env_id: str, env: Any) -> np.ndarray:
    space = env.action_space
    rng = np.random.default_rng(0)
    noise = rng.uniform(space.low, space.high, size=(STEPS, WORLDS, *space.shape))
    if env_id.startswith("robogen/"):
        actions = np.clip(np.asarray(PUSH_ACTIONS) + 0.2 * noise, -1, 1)
        actions[PRESS_STEPS:, 0, 1] = 0.0
        return actions.astype(np.float32)
    return noise.astype(np.float32)


def _state_rows(worlds: Any) -> dict[str, np.ndarray]:
    return {f: getattr(worlds.d, f).numpy().astype(np.float64)
            for f in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat", "ctrl")}


def _run(env_id: str) -> Run:
    import torch

    from robogen.batched import BatchedWorlds, load_mjwarp
    from robogen.batched.safety import BatchedSafety
    from robogen.batched.tasks import batched_task
    from robogen.envs.base import SubstepScene
    from robogen.rollout.safety import SafetyMonitor

    _, mjw = load_mjwarp()
    envs = _envs(env_id, range(WORLDS))
    tabletop = env_id.startswith("robogen/")
    if tabletop:
        _push_scenario(envs)
    scenes = [find_scene(e) for e in envs]
    model = scenes[0].model
    substeps = isinstance(scenes[0], SubstepScene)
    actions = _actions(env_id, envs[0])

    worlds = BatchedWorlds(model, WORLDS, data=scenes[0].data)
    task = batched_task(env_id, envs[0], worlds)
    safety = BatchedSafety(worlds, envs[0])
    assert safety.substeps == substeps
    shims = [Shim(model, scenes[0].roles, substeps) for _ in range(WORLDS)]
    same = [SafetyMonitor() for _ in range(WORLDS)]
    serial = [SafetyMonitor() for _ in range(WORLDS)]

    def pull(rows: Any) -> None:
        for i in rows:
            mjw.get_data_into(shims[i].data, model, worlds.d, i)

    advance = worlds.advance

    def advance_and_show(nstep: int = 1) -> None:  # what the serial env shows its observer
        advance(nstep)
        if substeps:
            assert nstep == 1
            pull(range(WORLDS))
            for shim in shims:
                shim.substep_observer(model, shim.data)

    worlds.advance = advance_and_show  # type: ignore[method-assign]

    worlds.set_states_from([s.data for s in scenes])
    task.on_reset(worlds, range(WORLDS), envs)
    safety.reset_rows(worlds, range(WORLDS), envs)
    pull(range(WORLDS))
    for i in range(WORLDS):
        same[i].start(shims[i])
        serial[i].start(scenes[i])
    before: dict[str, dict[str, Any]] = {}
    at_reset: dict[str, Any] = {}
    for k in range(STEPS):
        if k == RESET_AT:  # row RESET_ROW: a new episode from a new reset state
            r = RESET_ROW
            before = {"batched": safety.summary([r])[0], "same": same[r].metrics(),
                      "serial": serial[r].metrics()}
            (new,) = _envs(env_id, [7])
            if tabletop:
                _push_scenario([new], ("",))
            envs[r], scenes[r] = new, find_scene(new)
            rows = _state_rows(worlds)
            for f in rows:
                rows[f][r] = getattr(scenes[r].data, f)
            worlds.set_state(**rows)
            task.on_reset(worlds, [r], [new])
            safety.reset_rows(worlds, [r], [new])
            at_reset = safety.summary([r])[0]
            pull([r])
            same[r].start(shims[r])
            serial[r].start(scenes[r])
        a = torch.from_numpy(actions[k])
        task.apply_action(worlds, a)
        safety.advance(worlds, task.frame_skip)
        safety.after_step(worlds, a)
        if not substeps:
            pull(range(WORLDS))
        for i in range(WORLDS):
            same[i].step(actions[k, i])
            envs[i].step(actions[k, i])
            serial[i].step(actions[k, i])
    assert not worlds.overflows().any()
    del worlds.advance  # the shims' monitors are done
    return Run(batched=safety.summary(range(WORLDS)), same=[m.metrics() for m in same],
               serial=[m.metrics() for m in serial], before_reset=before, at_reset=at_reset,
               safety=safety, worlds=worlds)


_RUNS: dict[str, Run] = {}


def _cached(env_id: str) -> Run:
    if env_id not in _RUNS:
        _RUNS[env_id] = _run(env_id)
    return _RUNS[env_id]


ENVS = ("robogen/Push-v0", "gymnasium/Hopper-v5")


def _assert_close(got: dict[str, Any], want: dict[str, Any], *, rtol: float, counts: int,
                  what: str) -> None:
    assert got.keys() == want.keys()
    for name, w in want.items():
        g = got[name]
        if w is None or isinstance(w, bool):
            assert g == w, f"{what}: {name} {g!r} != {w!r}"
        elif name.endswith("_steps"):
            assert abs(g - w) <= counts, f"{what}: {name} {g!r} != {w!r}"
        elif name.startswith("action_"):
            assert g == pytest.approx(w, rel=1e-12), f"{what}: {name}"
        else:
            assert g == pytest.approx(w, rel=rtol, abs=1e-3), f"{what}: {name} {g} != {w}"


@pytest.mark.parametrize("env_id", ENVS)
def test_metrics_equal_the_serial_monitor_on_the_same_states(env_id: str) -> None:
    run = _cached(env_id)
    for i in range(WORLDS):
        _assert_close(run.batched[i], run.same[i], rtol=SAME_RTOL, counts=0, what=f"world {i}")
    _assert_close(run.before_reset["batched"], run.before_reset["same"], rtol=SAME_RTOL,
                  counts=0, what="row before its reset")


@pytest.mark.parametrize("env_id", ENVS)
def test_metrics_follow_the_serial_env(env_id: str) -> None:
    run = _cached(env_id)
    for i in range(WORLDS):
        _assert_close(run.batched[i], run.serial[i], rtol=FORCE_RTOL, counts=COUNT_ATOL,
                      what=f"world {i}")
    # the comparison is not of zeros: forces and limits are measured in some world
    assert max(m["peak_contact_force_n"] for m in run.serial) > 100.0
    assert max(m["joint_limit_steps"] for m in run.serial) > 3


def test_push_worlds_do_not_leak_into_each_other() -> None:
    """Each Push world's event shows in its own metrics only."""
    run = _cached("robogen/Push-v0")
    force = [m["peak_contact_force_n"] for m in run.batched]
    assert force[0] > 100.0 and force[1] < 1.0 and force[2] < 1.0
    assert [m["joint_limit_steps"] > 0 for m in run.batched] == [False, True, False]
    assert [m["distractor_contact_steps"] for m in run.batched] == [0, STEPS + 1, 0]
    assert run.before_reset["batched"]["object_dropped"] is True  # world 2, first episode
    assert [m["object_dropped"] for m in run.batched] == [False, False, False]


@pytest.mark.parametrize("env_id", ENVS)
def test_a_row_reset_restarts_only_that_row(env_id: str) -> None:
    run = _cached(env_id)
    r = RESET_ROW
    # right after the reset: nothing stepped yet, the reset state read (SafetyMonitor.start)
    assert run.at_reset["action_magnitude"] is None and run.at_reset["action_jerk"] is None
    # the row's new episode has its own STEPS - RESET_AT actions (the serial monitor started
    # at the reset agrees: the tests above), the others all STEPS
    before, after = run.before_reset["batched"], run.batched[r]
    serial_before = run.before_reset["serial"]
    assert before["action_magnitude"] == pytest.approx(serial_before["action_magnitude"])
    assert after["action_magnitude"] == pytest.approx(run.serial[r]["action_magnitude"])
    assert after["action_magnitude"] != pytest.approx(before["action_magnitude"])


def test_columns_a_scene_does_not_name_are_none() -> None:
    from robogen.rollout.safety import SAFETY_NAMES

    hopper = _cached("gymnasium/Hopper-v5").batched[0]
    assert list(hopper) == list(SAFETY_NAMES)
    assert hopper["object_dropped"] is None  # no manipulated object
    assert all(v is not None for v in _cached("robogen/Push-v0").batched[0].values())


def test_a_substep_scene_stepped_without_advance_is_refused() -> None:
    import torch

    from robogen.errors import RobogenError

    run = _cached("robogen/Push-v0")
    with pytest.raises(RobogenError, match=r"BatchedSafety\.advance"):
        run.safety.after_step(run.worlds, torch.zeros(WORLDS, 6))


def test_inactive_rows_are_stepped_but_not_read() -> None:
    """A world outside an episode (``active`` False: finished, waiting for a refill) keeps
    its finished episode's metrics while the others go on."""
    import torch

    from robogen.envs.scene import FRAME_SKIP

    run = _cached("robogen/Push-v0")
    safety, worlds = run.safety, run.worlds
    before = safety.summary(range(WORLDS))
    active = torch.tensor([False, True, True])
    a = torch.ones(WORLDS, 6)
    safety.advance(worlds, FRAME_SKIP, active)
    safety.after_step(worlds, a, active)
    after = safety.summary(range(WORLDS))
    assert after[0] == before[0]
    # the distractor still rests on world 1's box: one more step counted
    assert after[1]["distractor_contact_steps"] == before[1]["distractor_contact_steps"] + 1
    assert after[2]["action_magnitude"] != before[2]["action_magnitude"]

