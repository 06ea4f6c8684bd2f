"""Scripted experts of the third-party env families (``expert:<family>/<name>`` URIs).

* ``expert:metaworld/<task>``: Meta-World's own scripted policy of the task
  (``metaworld.policies.ENV_POLICY_MAP[<task>]``, e.g. ``SawyerPickPlaceV3Policy``),
  given the 39-value observation the env last returned. Known success at nominal
  on MT1's first 10 tasks (metaworld 3.1.1, mujoco 4.0): pick-place 10/10.
* ``expert:gymnasium-robotics/FetchReach-v4`` / ``FetchPush-v4`` /
  ``FetchPickAndPlace-v4``: a proportional controller on the suite's dict
  observation (gain ``GAIN`` on the position error, clipped to the action box):
  Reach moves the gripper to the goal; PickAndPlace opens above the object,
  descends, closes, and carries it to the goal; Push lowers the closed gripper
  behind the object (opposite the goal) and pushes along the object-goal line.

* ``expert:robosuite/Lift`` / ``Stack`` / ``PickPlaceCan``: a proportional OSC_POSE
  pick-and-place controller on robosuite's observation dict (:class:`RobosuiteExpert`).

All are :class:`~robogen.policies.base.PrivilegedPolicy` objects: they read the
observation from the scene bound to each env slot, so they act in every
observation mode. ``expert:`` alone picks the expert of the env evaluated.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from robogen.envs.families import expert_families
from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.policies.base import LoadContext, PolicyCapabilities, attached_rows

GAIN = 10.0
"""Proportional gain of the Fetch experts [1/m] (action 1 = 0.05 m per step)."""
FETCH_EXPERTS = ("FetchReach-v4", "FetchPush-v4", "FetchPickAndPlace-v4")
WRONG_ENV = "expert:{name} is the scripted expert of {name}; it cannot act in {env!r}"


class _SuiteExpert:
    """Slot bookkeeping shared by the suite experts (one scene per env slot)."""

    capabilities: ClassVar[PolicyCapabilities] = PolicyCapabilities(slots=True, seeds=False)

    def __init__(self, name: str, ctx: LoadContext | None, action_dim: int = 4) -> None:
        self.name = name
        self.observation_space = None if ctx is None else ctx.observation_space
        self.obs_mode = "state" if ctx is None else ctx.obs_mode
        self.action_space = spaces.Box(-1.0, 1.0, (action_dim,), np.float32)
        self._scenes: list[Any] = []
        self._mem: list[dict[str, Any]] = []

    def attach(self, scenes: Sequence[Any]) -> None:
        """Bind env slot k to ``scenes[k]`` (read at every :meth:`act`)."""
        self._scenes = list(scenes)
        self._mem = [{} for _ in self._scenes]

    def reset(self, slots: Sequence[int]) -> None:
        """Clear the per-episode memory of ``slots``."""
        for k in slots:
            if k < len(self._mem):
                self._mem[k] = {}

    def act(self, obs: Any, *, deterministic: bool = True,
            slots: Sequence[int] | None = None) -> np.ndarray:
        """Return ``(B, action_dim) float32`` actions; row i acts in attached scene ``slots[i]``.

        Raises:
            InvalidSpecError: If a slot has no attached scene.
        """
        batch = len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)
        rows = attached_rows(self.name, slots, batch, len(self._scenes))
        out = np.zeros((batch, self.action_space.shape[0]), np.float32)
        for i, k in enumerate(rows):
            out[i] = self._act_one(self._scenes[k], self._mem[k])
        return out

    def _act_one(self, scene: Any, mem: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError


class MetaWorldExpert(_SuiteExpert):
    """Meta-World's scripted policy of one task, on the env's last observation."""

    def __init__(self, task: str, ctx: LoadContext | None = None) -> None:
        from metaworld.policies import ENV_POLICY_MAP

        super().__init__(f"metaworld/{task}", ctx)
        self._policy = ENV_POLICY_MAP[task]()

    def _act_one(self, scene: Any, mem: dict[str, Any]) -> np.ndarray:
        import warnings

        with warnings.catch_warnings():  # "Constant(s) may be too high" on every call
            warnings.simplefilter("ignore", UserWarning)
            return np.asarray(self._policy.get_action(scene.suite_observation()), np.float32)


class FetchExpert(_SuiteExpert):
    """Proportional scripted controller of FetchReach, FetchPush and FetchPickAndPlace."""

    def __init__(self, gym_id: str, ctx: LoadContext | None = None) -> None:
        super().__init__(f"gymnasium-robotics/{gym_id}", ctx)
        self.gym_id = gym_id

    def _act_one(self, scene: Any, mem: dict[str, Any]) -> np.ndarray:
        o = scene.goal_observation()
        obs, goal = np.asarray(o["observation"]), np.asarray(o["desired_goal"])
        grip = obs[:3]
        a = np.zeros(4)
        if self.gym_id == "FetchReach-v4":
            a[:3] = GAIN * (goal - grip)
            return np.clip(a, -1, 1).astype(np.float32)
        obj = obs[3:6]
        if self.gym_id == "FetchPickAndPlace-v4":
            phase = mem.setdefault("phase", 0)
            if phase == 0:  # above the object, open
                target, a[3] = obj + [0.0, 0.0, 0.05], 1.0
                if np.linalg.norm(target - grip) < 0.01:
                    mem["phase"] = 1
            elif phase == 1:  # down to the object, open
                target, a[3] = obj, 1.0
                if np.linalg.norm(obj - grip) < 0.01:
                    mem["phase"], mem["closing"] = 2, 0
            elif phase == 2:  # close
                target, a[3] = obj, -1.0
                mem["closing"] += 1
                if mem["closing"] >= 3:
                    mem["phase"] = 3
            else:  # carry to the goal
                target, a[3] = goal, -1.0
            a[:3] = GAIN * (target - grip)
            return np.clip(a, -1, 1).astype(np.float32)
        # push: behind the object on the goal-object line, then along it
        d = goal[:2] - obj[:2]
        d = d / max(float(np.linalg.norm(d)), 1e-6)
        behind = np.array([*(obj[:2] - 0.06 * d), obj[2]])
        phase = mem.setdefault("phase", 0)
        a[3] = -1.0
        if phase == 0:
            target = behind + [0.0, 0.0, 0.06]
            if np.linalg.norm(target - grip) < 0.015:
                mem["phase"] = 1
        elif phase == 1:
            target = behind
            if np.linalg.norm(target - grip) < 0.01:
                mem["phase"] = 2
        else:
            target = np.array([*(goal[:2] - 0.02 * d), obj[2]])
            target[:2] += (goal[:2] - obj[:2]) * 0.5
        a[:3] = GAIN * (target - grip)
        return np.clip(a, -1, 1).astype(np.float32)


OSC_GAIN = 10.0
"""Proportional gain of the robosuite experts [1/m] (action 1 = 0.05 m per step under
OSC_POSE)."""
ROBOSUITE_EXPERTS = ("Lift", "Stack", "PickPlaceCan")


class RobosuiteExpert(_SuiteExpert):
    """Scripted pick-and-place controller for robosuite's Lift, Stack and PickPlaceCan.

    Reads robosuite's observation dict (end-effector and object positions [m]) and drives
    OSC_POSE deltas: above the object with the gripper open, down, close for
    :data:`CLOSE_STEPS` steps, lift; Lift ends there, Stack carries cube A above cube B and
    lowers it until it rests, then opens; PickPlaceCan carries the can over its target bin
    (``target_bin_placements``) and opens; then it backs away upward. A grasp that closed on
    nothing (fingers below :attr:`EMPTY_GRIP`) starts over. Orientation deltas
    stay 0 (the Panda starts pointing down; a 4 cm cube fits the open gripper at any yaw).
    """

    CLOSE_STEPS = 12
    EMPTY_GRIP = 0.006
    """Finger joint position [m] below which the closed gripper holds nothing (open 0.04,
    on a 4 cm cube ~0.02)."""
    GRASP_DZ: ClassVar[dict[str, float]] = {"PickPlaceCan": 0.015}
    """Grasp height above the object's centre [m] (default -0.005)."""

    def __init__(self, task: str, ctx: LoadContext | None = None) -> None:
        super().__init__(f"robosuite/{task}", ctx, action_dim=7)
        self.task = task

    def _act_one(self, scene: Any, mem: dict[str, Any]) -> np.ndarray:
        o = scene.suite_observation()
        eef = np.asarray(o["robot0_eef_pos"], float)
        obj_key = {"Lift": "cube_pos", "Stack": "cubeA_pos", "PickPlaceCan": "Can_pos"}[self.task]
        obj = np.asarray(o[obj_key], float)
        phase = mem.setdefault("phase", 0)
        grip = -1.0
        if phase == 0:  # above the object, open
            target = obj + [0.0, 0.0, 0.08]
            if np.linalg.norm(target - eef) < 0.01:
                mem["phase"] = 1
        elif phase == 1:  # down around it (the can's fingers meet the bin floor first)
            target = obj + [0.0, 0.0, self.GRASP_DZ.get(self.task, -0.005)]
            mem["down"] = mem.get("down", 0) + 1
            err = target - eef
            if (np.linalg.norm(err[:2]) < 0.008 and abs(err[2]) < 0.012) or mem["down"] > 30:
                mem["phase"], mem["closing"], mem["grasp_at"] = 2, 0, target
        elif phase == 2:  # close in place
            target, grip = mem["grasp_at"], 1.0
            mem["closing"] += 1
            if mem["closing"] >= self.CLOSE_STEPS:
                mem["phase"], mem["lift_from"] = 3, obj.copy()
        elif float(np.asarray(o["robot0_gripper_qpos"])[0]) < self.EMPTY_GRIP and \
                "release_at" not in mem:  # the fingers closed on nothing: start over
            mem.clear()
            mem["phase"], target = 0, obj + [0.0, 0.0, 0.08]
        else:
            grip = 1.0
            goal = self._carry(scene, o, obj, mem)
            # move the grasped object, not the hand, to the goal (a grasp off centre stays so)
            target = None if goal is None else eef + (goal - obj)
            if target is None:  # release, then back away (PickPlace needs the gripper clear)
                mem["open_for"] = mem.get("open_for", 0) + 1
                held = mem.setdefault("release_at", eef.copy())
                target = held + [0.0, 0.0, 0.1 if mem["open_for"] > 5 else 0.0]
                grip = -1.0
        a = np.zeros(7)
        a[:3] = OSC_GAIN * (target - eef)
        a[6] = grip
        return np.clip(a, -1, 1).astype(np.float32)

    def _carry(self, scene: Any, o: dict[str, Any], obj: np.ndarray, mem: dict[str, Any]
               ) -> np.ndarray | None:
        """Where the grasped object should go [m] (None: open the gripper now)."""
        up = mem["lift_from"] + [0.0, 0.0, 0.25 if self.task == "PickPlaceCan" else 0.12]
        if self.task == "Lift":
            return up
        if self.task == "Stack":
            goal = np.asarray(o["cubeB_pos"], float)
            above = np.array([goal[0], goal[1], up[2]])
            stage = mem.setdefault("stage", 0)
            if stage == 0:
                if np.linalg.norm(obj[:2] - goal[:2]) < 0.01 and obj[2] > goal[2] + 0.06:
                    mem["stage"] = 1
                return above
            if stage == 1:  # lower until cube A rests on B (4 cm apart), then release
                if obj[2] - goal[2] < 0.047:
                    mem["stage"] = 2
                return np.array([goal[0], goal[1], goal[2] + 0.035])
            return None
        env = scene.suite_env
        target = np.asarray(env.target_bin_placements[env.object_to_id["can"]], float)
        above = np.array([target[0], target[1], up[2]])
        stage = mem.setdefault("stage", 0)
        if stage == 0:
            if obj[2] > up[2] - 0.1:
                mem["stage"] = 1
            return up
        if stage == 1:
            if np.linalg.norm(obj[:2] - target[:2]) < 0.02:
                mem["stage"] = 2
            return above
        if stage == 2:  # lower into the bin, then release
            if obj[2] < target[2] + 0.1:
                mem["stage"] = 3
            return np.array([target[0], target[1], target[2] + 0.05])
        return None


def robosuite_expert(name: str, ctx: LoadContext | None) -> _SuiteExpert:
    """The robosuite expert of task ``name`` (:data:`ROBOSUITE_EXPERTS`).

    Raises:
        UnknownNameError: On another task (lists the tasks).
    """
    if name not in ROBOSUITE_EXPERTS:
        raise UnknownNameError("robosuite expert", name, ROBOSUITE_EXPERTS)
    return RobosuiteExpert(name, ctx)


def metaworld_expert(name: str, ctx: LoadContext | None) -> _SuiteExpert:
    """The Meta-World expert of task ``name`` (its scripted policy).

    Raises:
        UnknownNameError: On a task Meta-World has no policy for (lists the tasks).
    """
    from robogen.envs.metaworld_env import TASKS

    if name not in TASKS:
        raise UnknownNameError("Meta-World expert", name, TASKS)
    return MetaWorldExpert(name, ctx)


def fetch_expert(name: str, ctx: LoadContext | None) -> _SuiteExpert:
    """The Fetch expert of task ``name`` (:data:`FETCH_EXPERTS`).

    Raises:
        UnknownNameError: On another task (lists the tasks).
    """
    if name not in FETCH_EXPERTS:
        raise UnknownNameError("Fetch expert", name, FETCH_EXPERTS)
    return FetchExpert(name, ctx)


def suite_expert_factory(prefix: str) -> Callable[[str, LoadContext | None], Any] | None:
    """The expert factory ``(name, ctx) -> policy`` of env family ``prefix``, as the family
    declares it (:attr:`~robogen.envs.families.EnvFamily.expert`); None: it has none."""
    family = expert_families().get(prefix)
    if family is None:
        return None
    module, _, name = family.expert.partition(":")
    return getattr(importlib.import_module(module), name)


def handles(rest: str, ctx: LoadContext | None) -> bool:
    """True if ``expert:<rest>`` (or ``expert:`` in a suite env) names a suite expert."""
    target = rest or (ctx.env_id if ctx is not None else "")
    return "/" in target and target.split("/", 1)[0] in expert_families()


def load_suite_expert(rest: str, ctx: LoadContext | None) -> _SuiteExpert:
    """Create the expert of ``<family>/<name>`` (``""``: the env of ``ctx``).

    Raises:
        UnknownNameError: If the family has no expert of that name (lists them).
        InvalidSpecError: If the expert belongs to another env than ``ctx.env_id``.
    """
    target = rest or (ctx.env_id if ctx is not None else "")
    prefix, name = target.split("/", 1)
    factory = suite_expert_factory(prefix)
    if factory is None:
        raise UnknownNameError("env family with experts", prefix, expert_families())
    expert = factory(name, ctx)
    if ctx is not None and ctx.env_id and ctx.env_id != target:
        raise InvalidSpecError(WRONG_ENV.format(name=target, env=ctx.env_id))
    return expert
