"""``SuiteScene``: what the non-Gymnasium suite envs (dm_control, robosuite) share.

A suite env is a ``gym.Env`` that is itself the :class:`~robogen.envs.base.MujocoScene`.
This base holds the parts that do not depend on the suite: render settings and the
observation space, writing them into every installed model, pixel observations through
:class:`~robogen.envs.frames.SceneFrames` (render lanes, deferred frames), camera lookup,
texture re-upload, and pickling as the constructor arguments. A subclass sets
``self._args`` (its constructor keywords, ``render`` as a dict), ``self._label`` (the env id
for messages) and ``self._roles``, and implements ``model``, ``data``, ``nominal_spec``,
``install_model`` (calling :meth:`_write_render_settings` first), ``observe``, ``reset`` and
``step``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from robogen.envs.base import SceneCapabilities, SceneRoles
from robogen.envs.frames import SceneFrames
from robogen.envs.observations import compose_observation, observation_space
from robogen.errors import InvalidSpecError, SceneError
from robogen.types import RenderSettings


class SuiteScene(gym.Env[Any, np.ndarray]):
    """Shared base of :class:`~robogen.envs.dm_control_env.DMControlEnv` and
    :class:`~robogen.envs.robosuite_env.RobosuiteEnv` (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's contract

    capabilities: SceneCapabilities = SceneCapabilities()
    """Nothing declared (the suites refer to their objects' geoms); dm_control's legacy step
    checks the state (:class:`~robogen.envs.dm_control_env.DMControlEnv` sets it)."""
    _args: dict[str, Any]
    _label: str
    _roles: SceneRoles
    obs_mode: str

    def _init_pixels(self, hidden_groups: tuple[int, ...] = ()) -> None:
        """The renderer state; call before the first :meth:`install_model`."""
        self._frames = SceneFrames(hidden_groups=hidden_groups)
        self.defer_frames = False
        """Pixel observations are pending frames drawn on the render thread (set by the
        rollout worker; see :mod:`robogen.envs.render`)."""
        self.render_lane = 0
        """Render lane drawing this env's frames (set by the rollout worker)."""

    def _init_render_settings(self, render: RenderSettings | None) -> None:
        """``render_settings`` from ``render`` (None: 84x84 from ``roles.cameras[0]``).

        Raises:
            InvalidSpecError: On a width or height below 1 px.
        """
        settings = render or RenderSettings()
        if settings.width < 1 or settings.height < 1:
            raise InvalidSpecError(
                f"render width and height must be >= 1 px, got {settings.width}x{settings.height}")
        self.render_settings = dataclasses.replace(
            settings, camera=settings.camera or self._roles.cameras[0],
            mujoco_gl=os.environ.get("MUJOCO_GL", ""))

    def _finish_init(self, state_dim: int) -> None:
        """After the first install: check the camera, put it first in the roles, set the
        observation space (``state_dim`` state values).

        Raises:
            SceneError: On an unknown observation camera.
        """
        cam = self.render_settings.camera
        self._camera_id(cam)
        self._roles = dataclasses.replace(
            self._roles, cameras=(cam, *(c for c in self._roles.cameras if c != cam)))
        s = self.render_settings
        self.observation_space = observation_space(self.obs_mode, (state_dim,), s.height,
                                                   s.width)

    # -- MujocoScene -------------------------------------------------------------------------

    @property
    def model(self) -> mujoco.MjModel:  # pragma: no cover - every subclass overrides it
        """The compiled model currently simulated."""
        raise NotImplementedError

    @property
    def data(self) -> mujoco.MjData:  # pragma: no cover - every subclass overrides it
        """Its ``MjData``."""
        raise NotImplementedError

    @property
    def roles(self) -> SceneRoles:
        """Scene roles of this env (the subclass's module docstring)."""
        return self._roles

    @property
    def suite_env(self) -> Any:
        """The wrapped suite env."""
        return self._env  # type: ignore[attr-defined]

    def textures_changed(self, texture_ids: tuple[int, ...]) -> None:
        """Re-upload ``model.tex_data`` of ``texture_ids`` to the pixel renderer."""
        self._frames.upload_textures(texture_ids)

    def render_frame(self, camera: str | None = None, width: int = 84, height: int = 84
                     ) -> np.ndarray:
        """Render ``(height, width, 3) uint8`` RGB from ``camera`` (default: the observation
        camera).

        Raises:
            SceneError: On an unknown camera name.
            RenderError: If no offscreen GL context can be created.
        """
        cam = self._camera_id(camera or self._roles.cameras[0])
        return self._frames.draw(self.model, self.data, cam, int(width), int(height),
                                 lane=self.render_lane)

    # -- pickling, closing -------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Pickle as the constructor arguments (the suite's simulator and GL objects are
        rebuilt)."""
        return {"args": self._args}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Rebuild from the constructor arguments: the copy is the env as constructed."""
        args = dict(state["args"])
        render = args.pop("render")
        init: Any = self.__init__  # the subclass's constructor, with its own keywords
        init(render=None if render is None else RenderSettings(**render), **args)

    def close(self) -> None:
        """Free the pixel renderer."""
        self._frames.close()

    # -- helpers -----------------------------------------------------------------------------

    def _write_render_settings(self, model: mujoco.MjModel) -> None:
        """Write the render settings into a model about to be installed (``model.vis``)."""
        s = self.render_settings
        model.vis.quality.shadowsize = s.shadowsize
        model.vis.quality.offsamples = s.offsamples
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, s.width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, s.height)

    def _camera_id(self, name: str) -> int:
        cid = self._frames.camera_id(self.model, name)
        if cid < 0:
            names = [self.model.camera(i).name for i in range(self.model.ncam)]
            raise SceneError(f"{self._label} has no camera {name!r}; cameras: {names}")
        return cid

    def _transform(self, state: np.ndarray) -> Any:
        """The observation in ``obs_mode`` of a state vector (pixels drawn as needed)."""
        if self.obs_mode == "state":
            return np.asarray(state, dtype=np.float32)
        s = self.render_settings
        return compose_observation(
            self.obs_mode, lambda: state,
            lambda: self._frames.observation(self.model, self.data,
                                             self._camera_id(s.camera), s.width, s.height,
                                             lane=self.render_lane, defer=self.defer_frames))
