"""The ``camera`` axis: the observation camera moved on a sphere around the look-at point.

The observation camera (``roles.cameras[0]``) is orbited about
``roles.look_at``: its nominal world pose at the qpos0 configuration is
rotated by an azimuth turn (about the world vertical through ``look_at``) and an
elevation change (about the horizontal axis perpendicular to the viewing
plane), its distance to ``look_at`` is scaled, and its vertical field of view
changes. Position and orientation rotate together, so a camera that looked at
``look_at`` still does (its roll stays zero), and framing relative to that
point is kept.

Ranges at severity 1: azimuth 22.5-45 deg, elevation +-(7.5-15) deg (kept
within +-85 deg), distance x[1/1.4, 1.4], fovy +-(5-10) deg (kept in [10, 150]).

Tracking cameras (``trackcom``/``track`` mode, as in Gymnasium's locomotion
envs) are handled: the new pose is written into ``cam_pos``/``cam_quat`` in the
camera's body frame and their qpos0-derived offsets (``cam_pos0``,
``cam_poscom0``, ``cam_mat0``) are recomputed with ``mj_setConst``, so the
camera keeps following the robot from the new viewpoint. Cameras in
``targetbody`` modes compute their orientation each step, so only their
position and fovy change.

Splits: ``train`` turns counter-clockwise (positive azimuth), ``test``
clockwise: disjoint azimuth sectors.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import numpy as np

from robogen.perturbations import helpers as u
from robogen.perturbations.base import Axis, Perturbation, register_axis

if TYPE_CHECKING:
    from robogen.envs.base import MujocoScene

MAX_AZIMUTH_DEG = 45.0
MAX_ELEVATION_DEG = 15.0
MAX_DISTANCE_FACTOR = 1.4
MAX_FOVY_DEG = 10.0
ELEVATION_LIMIT_DEG = 85.0
FOVY_RANGE_DEG = (10.0, 150.0)


def camera_pose_at_qpos0(model: mujoco.MjModel, cam: int
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """World pose of camera ``cam`` and of its body at qpos0.

    Returns:
        ``(cam_pos (3,), cam_mat (3, 3), body_pos (3,), body_mat (3, 3))`` [m].
    """
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    mujoco.mj_camlight(model, data)
    body = int(model.cam_bodyid[cam])
    return (data.cam_xpos[cam].copy(), data.cam_xmat[cam].reshape(3, 3).copy(),
            data.xpos[body].copy(), data.xmat[body].reshape(3, 3).copy())


@dataclass(frozen=True, slots=True)
class CameraPerturbation(Perturbation):
    """Concrete camera change of one episode.

    Attributes:
        camera: Name of the camera moved (the observation camera).
        azimuth_rad: Turn about the vertical through ``look_at`` [rad].
        elevation_rad: Change of elevation seen from ``look_at`` [rad].
        distance_scale: Factor on the distance to ``look_at`` [-].
        fovy_delta_deg: Change of the vertical field of view [deg].
    """

    axis: ClassVar[str] = "camera"
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = (
        "cam_pos", "cam_quat", "cam_fovy", *u.SET_CONST_FIELDS,
    )

    camera: str
    azimuth_rad: float
    elevation_rad: float
    distance_scale: float
    fovy_delta_deg: float

    def apply_model(self, model: mujoco.MjModel, nominal: mujoco.MjModel, scene: MujocoScene
                    ) -> bool:
        """Write the orbited pose (body frame) and field of view of the camera."""
        if not self.camera:  # the scene names no camera
            return False
        (cam,) = u.ids_of(model, mujoco.mjtObj.mjOBJ_CAMERA, (self.camera,), "camera")
        pos0, mat0, body_pos, body_mat = camera_pose_at_qpos0(nominal, cam)
        look_at = np.asarray(scene.roles.look_at, dtype=float)
        v = pos0 - look_at
        r = float(np.linalg.norm(v))
        if r < 1e-9:  # camera sits on the look-at point: orbiting is a pure turn
            v, r = -mat0[:, 2] * 1e-9, 1e-9
        elev = math.asin(float(np.clip(v[2] / r, -1.0, 1.0)))
        lim = math.radians(ELEVATION_LIMIT_DEG)
        new_elev = float(np.clip(elev + self.elevation_rad, min(-lim, elev), max(lim, elev)))
        axis = np.cross(v, (0.0, 0.0, 1.0))
        if np.linalg.norm(axis) < 1e-9 * r:  # camera straight above/below: use its x axis
            axis = mat0[:, 0]
        rot = u.rotation((0.0, 0.0, 1.0), self.azimuth_rad) @ u.rotation(axis, new_elev - elev)
        pos1 = look_at + self.distance_scale * (rot @ v)
        mat1 = rot @ mat0
        model.cam_pos[cam] = body_mat.T @ (pos1 - body_pos)
        model.cam_quat[cam] = u.mat_to_quat(body_mat.T @ mat1)
        model.cam_fovy[cam] = float(np.clip(nominal.cam_fovy[cam] + self.fovy_delta_deg,
                                            *FOVY_RANGE_DEG))
        if int(model.cam_mode[cam]) != int(mujoco.mjtCamLight.mjCAMLIGHT_FIXED):
            u.set_const(model, nominal)
        return True


@register_axis("camera")
class CameraAxis(Axis):
    """Observation camera pose on a sphere around the look-at point, and field of view."""

    kind: ClassVar[str] = "visual"
    description: ClassVar[str] = (
        "observation camera azimuth, elevation and distance around the look-at point, and fovy"
    )

    required_roles: ClassVar[Mapping[str, str]] = {"cameras": "camera"}

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The side of the azimuth shift."""
        return frozenset({math.copysign(1.0, values["azimuth_rad"])})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> CameraPerturbation:
        """Draw one camera change; see the module docstring for ranges and splits."""
        size = u.check_and_magnitude(rng, severity, split)
        el_sign, dist_sign, fovy_sign = np.where(rng.random(3) < 0.5, -1.0, 1.0)
        if split == "train":
            az_sign = 1.0
        elif split == "test":
            az_sign = -1.0
        else:
            az_sign = 1.0 if rng.random() < 0.5 else -1.0
        cameras = scene.roles.cameras
        return CameraPerturbation(
            camera=cameras[0] if cameras else "",
            azimuth_rad=round(az_sign * size * math.radians(MAX_AZIMUTH_DEG), 6),
            elevation_rad=round(float(el_sign) * size * math.radians(MAX_ELEVATION_DEG), 6),
            distance_scale=round(u.log_factor(float(dist_sign), size, MAX_DISTANCE_FACTOR), 6),
            fovy_delta_deg=round(float(fovy_sign) * size * MAX_FOVY_DEG, 6),
        )
