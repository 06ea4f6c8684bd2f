"""Candidates for the check's end-to-end tests, loaded as ``python:FILE:factory`` policies.

``nominal_kinematics_reach``: the Reach expert with the *nominal* arm's
kinematics baked in, like a checkpoint overfit to one embodiment. It matches
the expert while the arm is nominal (nominal, ``physics``, ``object_pose`` and
visual conditions) and misses the target when the ``embodiment`` axis changes
link lengths, so it regresses on that axis only.

``wrong_action_space``: a policy whose action space (4-D) does not fit Reach's (6-D).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class _NominalView:
    """A scene stand-in holding the nominal model; ``sync`` copies the real state into it."""

    def __init__(self, scene: Any, nominal_model: Any) -> None:
        import mujoco

        self._scene = scene
        self.model = nominal_model
        self.data = mujoco.MjData(nominal_model)

    def sync(self) -> None:
        import mujoco

        real = self._scene.data
        if real.qpos.shape != self.data.qpos.shape or real.ctrl.shape != self.data.ctrl.shape:
            raise ValueError("nominal_kinematics_reach needs axes that keep the state layout")
        self.data.qpos[:] = real.qpos
        self.data.qvel[:] = real.qvel
        self.data.ctrl[:] = real.ctrl
        self.data.mocap_pos[:] = real.mocap_pos
        self.data.mocap_quat[:] = real.mocap_quat
        mujoco.mj_forward(self.model, self.data)


class NominalKinematicsReach:
    """The Reach expert computing its inverse kinematics on the nominal arm.

    Args:
        ctx: The env's :class:`~robogen.policies.base.LoadContext`.
    """

    def __init__(self, ctx: Any) -> None:
        from robogen.envs import find_scene, make
        from robogen.policies import load_policy

        self._inner = load_policy("expert:reach", ctx)
        self.observation_space = self._inner.observation_space
        self.action_space = self._inner.action_space
        self.obs_mode = self._inner.obs_mode
        env = make("robogen/Reach-v0")
        env.reset(seed=0)
        self._nominal = find_scene(env).model
        self._views: list[_NominalView] = []

    def attach(self, scenes: Sequence[Any]) -> None:
        self._views = [_NominalView(s, self._nominal) for s in scenes]
        self._inner.attach(self._views)

    def reset(self, slots: Sequence[int]) -> None:
        self._inner.reset(slots)

    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        for v in self._views[: len(obs)]:
            v.sync()
        return np.asarray(self._inner.act(obs, deterministic=deterministic), np.float32)


def nominal_kinematics_reach(ctx: Any) -> NominalKinematicsReach:
    """Factory of :class:`NominalKinematicsReach`."""
    return NominalKinematicsReach(ctx)


class WrongActionSpace:
    """Zero 4-D actions for an env that expects another action size."""

    def __init__(self, ctx: Any) -> None:
        from gymnasium import spaces

        self.observation_space = ctx.observation_space
        self.action_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.obs_mode = ctx.obs_mode

    def reset(self, slots: Sequence[int]) -> None:
        """No state."""

    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        return np.zeros((len(obs), 4), np.float32)


def wrong_action_space(ctx: Any) -> WrongActionSpace:
    """Factory of :class:`WrongActionSpace`."""
    return WrongActionSpace(ctx)


class NoisyExpert:
    """A built-in task's expert with Gaussian noise on its actions (a close but different policy).

    Args:
        ctx: The env's load context (the task is taken from ``ctx.env_id``).
        std: Noise standard deviation per action component (actions are in [-1, 1]).
        seed: Seed of the noise stream.
    """

    def __init__(self, ctx: Any, std: float = 0.3, seed: int = 0) -> None:
        from robogen.policies import load_policy

        self._inner = load_policy("expert:", ctx)
        self.observation_space = self._inner.observation_space
        self.action_space = self._inner.action_space
        self.obs_mode = self._inner.obs_mode
        self._std = std
        self._rng = np.random.default_rng(seed)

    def attach(self, scenes: Sequence[Any]) -> None:
        self._inner.attach(scenes)

    def reset(self, slots: Sequence[int]) -> None:
        self._inner.reset(slots)

    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        a = np.asarray(self._inner.act(obs, deterministic=deterministic), np.float64)
        a = a + self._std * self._rng.standard_normal(a.shape)
        return np.clip(a, -1.0, 1.0).astype(np.float32)


def noisy_expert(ctx: Any) -> NoisyExpert:
    """Factory of :class:`NoisyExpert` with the default noise."""
    return NoisyExpert(ctx)


class NoisySB3Reacher(NoisyExpert):
    """The shipped PPO Reacher-v5 checkpoint plus Gaussian action noise (a close, other policy)."""

    def __init__(self, ctx: Any, std: float = 0.05, seed: int = 0) -> None:
        from pathlib import Path

        from robogen.policies import load_policy

        ckpt = Path(__file__).resolve().parents[2] / "robogen" / "assets" / "checkpoints"
        self._inner = load_policy(f"sb3:{ckpt / 'ppo_reacher.zip'}", ctx)
        self.observation_space = self._inner.observation_space
        self.action_space = self._inner.action_space
        self.obs_mode = self._inner.obs_mode
        self._std = std
        self._rng = np.random.default_rng(seed)

    def attach(self, scenes: Sequence[Any]) -> None:
        """Not privileged."""


def noisy_ppo_reacher(ctx: Any) -> NoisySB3Reacher:
    """Factory of :class:`NoisySB3Reacher` (give the VecNormalize statistics as usual)."""
    return NoisySB3Reacher(ctx)
