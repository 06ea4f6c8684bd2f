"""EGL displays of render lanes past lane 0: under Mesa llvmpipe each such lane gets a display
of its own (:class:`_OwnDisplayContext`), so that lanes draw their frames' pixels at once.

Part of :mod:`robogen.envs.render` (which makes the lanes' contexts).
"""

from __future__ import annotations

import logging
import os
from typing import Any

_log = logging.getLogger("robogen.envs.render")

_EGL_PLATFORM_SURFACELESS_MESA = 0x31DD  # EGL_MESA_platform_surfaceless


def _gl_renderer() -> str:
    """``GL_RENDERER`` of the current context (e.g. ``"llvmpipe (LLVM 15.0.6, 256 bits)"``)."""
    from OpenGL import GL  # PyOpenGL: mujoco's EGL and OSMesa contexts are made with it

    name = GL.glGetString(GL.GL_RENDERER)
    return name.decode(errors="replace") if isinstance(name, bytes) else str(name or "")


class _OwnDisplayContext:
    """An EGL context on an EGL display of its own (Mesa's surfaceless platform), for a render
    lane past lane 0: Mesa llvmpipe rasterizes a frame under a lock of its screen, one per EGL
    display (``rast_mutex``, held by the drawing thread when ``LP_NUM_THREADS=0``), so two
    lanes' contexts on MuJoCo's one display drew their frames' pixels in turn; on a display
    each they draw at once (PickPlace, 84x84 with shadows, two threads: 1.86x one thread's
    frames/s against 1.3-1.45x on one display).

    Same interface as ``mujoco.GLContext`` (``make_current``, ``free``).

    Raises:
        RuntimeError: If the platform, display, configuration or context is unavailable.
    """

    def __init__(self) -> None:
        import ctypes

        from mujoco import egl
        from mujoco.egl import egl_ext as EGL  # noqa: N812 - EGL's own names

        self._egl = EGL
        display = EGL.eglGetPlatformDisplayEXT(_EGL_PLATFORM_SURFACELESS_MESA,
                                               EGL.EGL_DEFAULT_DISPLAY, None)
        if display == EGL.EGL_NO_DISPLAY or not EGL.eglInitialize(display, None, None):
            raise RuntimeError("no EGL surfaceless display")
        configs, found = (EGL.EGLConfig * 1)(), ctypes.c_long()
        EGL.eglChooseConfig(display, egl.EGL_ATTRIBUTES, configs, 1, found)
        if found.value < 1:
            raise RuntimeError("no EGL configuration for an offscreen context")
        EGL.eglBindAPI(EGL.EGL_OPENGL_API)
        context = EGL.eglCreateContext(display, configs[0], EGL.EGL_NO_CONTEXT, None)
        if not context:
            raise RuntimeError("no EGL context on the surfaceless display")
        self._display, self._context = display, context

    def make_current(self) -> None:
        EGL = self._egl  # noqa: N806
        if not EGL.eglMakeCurrent(self._display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE,
                                  self._context):
            raise RuntimeError("failed to make the EGL context current")

    def free(self) -> None:
        EGL = self._egl  # noqa: N806
        if self._context:
            EGL.eglMakeCurrent(self._display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE,
                               EGL.EGL_NO_CONTEXT)
            EGL.eglDestroyContext(self._display, self._context)
            self._context = None


def _own_display_context(gl: Any) -> Any:
    """``gl`` (current on a lane past 0), or a context on a display of its own
    (:class:`_OwnDisplayContext`, made current) where that draws on the same renderer:
    Mesa llvmpipe under ``MUJOCO_GL=egl``. A GPU driver has no such lock, and a second
    display could pick another renderer (e.g. llvmpipe beside an NVIDIA device), so
    anything else keeps ``gl``."""
    if os.environ.get("MUJOCO_GL") != "egl":
        return gl
    own = None
    try:
        name = _gl_renderer()
        if name.startswith("llvmpipe"):
            own = _OwnDisplayContext()
            own.make_current()
            if _gl_renderer() == name:
                gl.free()
                own.make_current()  # whatever freeing the other one released
                return own
    except Exception as e:  # noqa: BLE001 - the shared display still works
        _log.debug("render lane keeps MuJoCo's EGL display: %s", e)
    if own is not None:
        own.free()
    gl.make_current()
    return gl
