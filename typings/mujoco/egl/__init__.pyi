"""``mujoco.egl`` (pure Python over PyOpenGL's EGL bindings, untyped): its names are ``Any``."""

from typing import Any

from . import egl_ext as egl_ext

def __getattr__(name: str) -> Any: ...
