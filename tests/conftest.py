"""Shared pytest set-up: offscreen GL before MuJoCo loads, MuJoCo's log out of the repo."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# CLI output is checked by text: the same terminal width everywhere (CI runners differ).
os.environ["COLUMNS"] = "80"

import robogen  # noqa: E402,F401  (sets the GL backend before any test imports mujoco)
