"""Camera placement: orientations of cameras aimed at a point, in MuJoCo's conventions.

MuJoCo cameras look along their local ``-z`` axis with ``+y`` up in the image.
Both helpers build the camera frame from a viewing direction ``forward`` and a
horizontal ``right`` axis (``forward x world-z``, normalized), with
``up = right x forward``, and convert it with ``mju_mat2Quat``. Used by the
built-in tabletop scenes (:mod:`robogen.envs.scene`) and the cameras the
adapters add to third-party envs (:mod:`robogen.envs.gym_adapter` and the
suites built on it).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

__all__ = ["camera_pose", "look_at_quat"]


def _frame_quat(forward: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z) of the camera frame with columns ``right, up, -forward``."""
    right = right / np.linalg.norm(right)
    up = np.cross(right, forward)
    mat = np.column_stack([right, up, -forward])  # camera x, y, z axes (looks along -z)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.ravel())
    return quat


def look_at_quat(pos: tuple[float, float, float], target: tuple[float, float, float]) -> np.ndarray:
    """Quaternion of a camera at ``pos`` looking at ``target`` with world z up.

    Args:
        pos: Camera position [m].
        target: Point to look at [m].

    Returns:
        ``(4,) float64`` quaternion (w, x, y, z) of the camera frame
        (MuJoCo cameras look along their -z axis, y up). Looking within ~2.6 deg
        of straight down or up, ``+x`` of the world is the image's "down".
    """
    forward = np.asarray(target, float) - np.asarray(pos, float)
    forward /= np.linalg.norm(forward)
    up = np.array([0.0, 0.0, 1.0])
    if abs(float(forward @ up)) > 0.999:  # looking straight down/up: pick +x as image up
        up = np.array([-1.0, 0.0, 0.0])
    return _frame_quat(forward, np.cross(forward, up))


def camera_pose(
    look_at: tuple[float, float, float], distance: float, azimuth: float, elevation: float
) -> tuple[np.ndarray, np.ndarray]:
    """Position and orientation of a camera aimed at ``look_at`` from spherical coordinates.

    Uses MuJoCo's free-camera convention: the viewing direction is
    ``(cos el cos az, cos el sin az, sin el)``; negative elevation looks down.

    Args:
        look_at: Target point [m].
        distance: Distance from the target [m].
        azimuth: Azimuth [deg].
        elevation: Elevation [deg], in (-90, 90].

    Returns:
        ``pos``: (3,) float64 [m]; ``quat``: (4,) float64 (w, x, y, z).
    """
    az, el = math.radians(azimuth), math.radians(elevation)
    fwd = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    pos = np.asarray(look_at, dtype=float) - distance * fwd
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    if np.linalg.norm(right) < 1e-9:  # looking straight down
        right = np.array([math.sin(az), -math.cos(az), 0.0])
    return pos, _frame_quat(fwd, right)
