"""``SceneFrames``: the pixel observations of one scene, written once for every env family.

A scene (a built-in task, the Gymnasium/Fetch/Meta-World adapters, the dm_control env)
owns one :class:`SceneFrames`. It creates its :class:`~robogen.envs.render.OffscreenRenderer`
on the first frame, points it at the scene's current model (after a structural perturbation
installed a recompiled one) and render lane (set by the rollout worker), and remembers the
id of the last camera name per model, so the observation camera is looked up by name once,
not at every step. Pickling drops the renderer (GL objects stay in their process).
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from robogen.envs.render import OffscreenRenderer, PendingFrame

__all__ = ["SceneFrames"]


class SceneFrames:
    """The renderer and camera lookup of one scene.

    Args:
        grow: Enlarge the offscreen buffer for a frame larger than the model's
            ``offwidth``/``offheight`` (False: :class:`~robogen.errors.RenderError`).
        hidden_groups: Geom groups not drawn (robosuite: its collision meshes, group 0).
    """

    def __init__(self, *, grow: bool = True, hidden_groups: tuple[int, ...] = ()) -> None:
        self._grow = grow
        self._hidden = tuple(hidden_groups)
        self.renderer: OffscreenRenderer | None = None
        """The renderer, None until the first frame (or after :meth:`close`)."""
        self._cam_cache: tuple[Any, str, int] = (None, "", -1)  # (model, camera name, id)

    def camera_id(self, model: mujoco.MjModel, name: str) -> int:
        """Id of camera ``name`` in ``model``, or -1 if it has none (the caller raises)."""
        cached = self._cam_cache
        if cached[0] is model and cached[1] == name:
            return cached[2]  # the observation camera at every step: no lookup by name
        cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
        self._cam_cache = (model, name, cam)
        return cam

    def draw(self, model: mujoco.MjModel, data: mujoco.MjData, cam: int, width: int,
             height: int, *, lane: int = 0) -> np.ndarray:
        """One ``(height, width, 3) uint8`` RGB frame of camera id ``cam``, drawn now.

        Args:
            model: The scene's current model (the renderer follows it).
            data: Its data.
            cam: Camera id (:meth:`camera_id`).
            width: Image width [px].
            height: Image height [px].
            lane: Render lane that draws it (:mod:`robogen.envs.render`).

        Raises:
            RenderError: If no offscreen GL context can be created, or the frame is too
                large for a renderer made with ``grow=False``.
        """
        return self._renderer(model, lane).render(data, cam, width, height)

    def draw_deferred(self, model: mujoco.MjModel, data: mujoco.MjData, cam: int, width: int,
                      height: int, *, lane: int = 0) -> PendingFrame:
        """The same frame as :meth:`draw`, drawn on the render thread while the caller goes
        on (resolve it with :func:`~robogen.envs.render.resolve_frames`)."""
        return self._renderer(model, lane).render_async(data, cam, width, height)

    def observation(self, model: mujoco.MjModel, data: mujoco.MjData, cam: int, width: int,
                    height: int, *, lane: int, defer: bool) -> np.ndarray | PendingFrame:
        """:meth:`draw_deferred` if ``defer`` (a scene's ``defer_frames``), else :meth:`draw`."""
        if defer:
            return self.draw_deferred(model, data, cam, width, height, lane=lane)
        return self.draw(model, data, cam, width, height, lane=lane)

    def _renderer(self, model: mujoco.MjModel, lane: int) -> OffscreenRenderer:
        r = self.renderer
        if r is None:
            r = self.renderer = OffscreenRenderer(model, grow=self._grow, lane=lane,
                                                  hidden_groups=self._hidden)
        else:
            if r.model is not model:
                r.set_model(model)
            r.set_lane(lane)  # nothing to do when unchanged
        return r

    def set_model(self, model: mujoco.MjModel) -> None:
        """Point an existing renderer at ``model`` (a newly installed one)."""
        if self.renderer is not None:
            self.renderer.set_model(model)

    def upload_textures(self, texture_ids: tuple[int, ...]) -> None:
        """Re-upload edited textures (``model.tex_data``) to an existing renderer."""
        if texture_ids and self.renderer is not None:
            self.renderer.upload_textures(tuple(texture_ids))

    def close(self) -> None:
        """Free the renderer's GL resources (a new one is made on the next frame)."""
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the renderer and the camera cache."""
        return {"grow": self._grow, "hidden_groups": self._hidden}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A fresh instance with the same settings."""
        self.__init__(grow=state["grow"], hidden_groups=state.get("hidden_groups", ()))
