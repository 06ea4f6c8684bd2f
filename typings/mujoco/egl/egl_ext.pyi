"""``mujoco.egl.egl_ext`` (PyOpenGL's EGL functions and extensions, untyped): ``Any``."""

from typing import Any

def __getattr__(name: str) -> Any: ...
