"""Pick an offscreen OpenGL backend before MuJoCo is first imported.

MuJoCo reads ``MUJOCO_GL`` once, at import time. On a machine without a display
(CI, servers, this project's default machine) the GLFW default cannot open a
context, so robogen selects ``egl`` (Mesa llvmpipe works without a GPU) unless
the user already chose a backend.
"""

from __future__ import annotations

import os
import sys


def select_gl_backend() -> str | None:
    """Set ``MUJOCO_GL=egl`` (and ``PYOPENGL_PLATFORM``) if unset and no display exists.

    Returns:
        The backend now in ``os.environ["MUJOCO_GL"]``, or None if none is set
        (a display is available and the user chose nothing).
    """
    if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
        if "mujoco" in sys.modules:  # too late to choose; leave it as it is
            return os.environ.get("MUJOCO_GL")
        os.environ["MUJOCO_GL"] = "egl"
    if os.environ.get("MUJOCO_GL") in ("egl", "osmesa"):
        os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    # (MuJoCo's warnings and ./MUJOCO_LOG.TXT: see robogen._console.route_mujoco_warnings.)
    return os.environ.get("MUJOCO_GL")


select_gl_backend()
