"""Deliberately degraded candidates of the Reach expert, loaded as ``python:`` policies in tests.

``slow_reach``: the expert's actions scaled by ``SLOW_FACTOR`` (a "checkpoint"
that moves slower); it still reaches nominal targets within the time limit but
not targets displaced by the ``object_pose`` axis, so it regresses on that axis
only. ``noisy_reach``: Gaussian action noise on every step (hurts every axis).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SLOW_FACTOR = 0.35
NOISE_STD = 0.8


class _Wrapped:
    def __init__(self, ctx: Any, scale: float = 1.0, noise: float = 0.0, seed: int = 0) -> None:
        from robogen.policies import load_policy

        self._inner = load_policy("expert:reach", ctx)
        self.observation_space = self._inner.observation_space
        self.action_space = self._inner.action_space
        self.obs_mode = self._inner.obs_mode
        self._scale = scale
        self._noise = noise
        self._rng = np.random.default_rng(seed)

    def attach(self, scenes: Sequence[Any]) -> None:
        self._inner.attach(scenes)

    def reset(self, slots: Sequence[int]) -> None:
        self._inner.reset(slots)

    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        a = self._scale * np.asarray(self._inner.act(obs, deterministic=deterministic))
        if self._noise:
            a = a + self._noise * self._rng.standard_normal(a.shape)
        return np.clip(a, -1.0, 1.0).astype(np.float32)


def slow_reach(ctx: Any) -> _Wrapped:
    """The Reach expert moving at ``SLOW_FACTOR`` of its speed."""
    return _Wrapped(ctx, scale=SLOW_FACTOR)


def noisy_reach(ctx: Any) -> _Wrapped:
    """The Reach expert with N(0, NOISE_STD^2) noise added to every action component."""
    return _Wrapped(ctx, noise=NOISE_STD)


class _NominalView:
    """A scene stand-in whose model is the *nominal* model, synced to the real state on ``sync``."""

    def __init__(self, scene: Any, nominal_model: Any) -> None:
        import mujoco

        self._scene = scene
        self.model = nominal_model
        self.data = mujoco.MjData(nominal_model)

    def sync(self) -> None:
        import mujoco

        real = self._scene.data
        if real.qpos.shape != self.data.qpos.shape or real.ctrl.shape != self.data.ctrl.shape:
            raise ValueError("nominal_kinematics_reach supports axes that keep the state layout")
        self.data.qpos[:] = real.qpos
        self.data.qvel[:] = real.qvel
        self.data.ctrl[:] = real.ctrl
        self.data.mocap_pos[:] = real.mocap_pos
        self.data.mocap_quat[:] = real.mocap_quat
        mujoco.mj_forward(self.model, self.data)


class _NominalKinematics(_Wrapped):
    """The expert computing its inverse kinematics on the nominal arm, whatever the real one."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        from robogen.envs import find_scene, make

        env = make("robogen/Reach-v0")
        env.reset(seed=0)
        self._nominal = find_scene(env).model
        self._views: list[_NominalView] = []

    def attach(self, scenes: Sequence[Any]) -> None:
        self._views = [_NominalView(s, self._nominal) for s in scenes]
        self._inner.attach(self._views)

    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        batch = len(obs)
        for v in self._views[:batch]:
            v.sync()
        return super().act(obs, deterministic=deterministic)


def nominal_kinematics_reach(ctx: Any) -> _NominalKinematics:
    """The Reach expert with the nominal arm's kinematics baked in (overfit to one embodiment).

    It matches the expert while the arm is nominal (nominal, ``object_pose``,
    ``physics`` and visual axes) and misses targets when the ``embodiment`` axis
    changes link lengths.
    """
    return _NominalKinematics(ctx)
