"""Observation modes: validation, spaces and the per-mode observation, written once.

Every env family (built-in tabletop tasks, Gymnasium/Fetch/Meta-World adapters)
builds its observation space and its observations through these functions, so a
mode means the same thing everywhere. The modes themselves are
:data:`robogen.types.OBS_MODES`:

============  =====================================  ==============================
obs_mode      one observation                        unit
============  =====================================  ==============================
state         ``(obs_dim,) float32``                 the env's own (m, rad, m/s...)
pixels        ``(H, W, 3) uint8``                    RGB from the observation camera
state+pixels  ``{"state": ..., "pixels": ...}``      both
============  =====================================  ==============================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from robogen.errors import InvalidSpecError
from robogen.types import OBS_MODES, ObsMode

BAD_OBS_MODE = "obs_mode must be one of {choices}, got {value!r}"

__all__ = ["BAD_OBS_MODE", "OBS_MODES", "ObsMode", "check_obs_mode", "compose_observation",
           "observation_space", "pixels_digest"]


def check_obs_mode(obs_mode: object) -> ObsMode:
    """Return ``obs_mode`` if it is one of :data:`~robogen.types.OBS_MODES`.

    Raises:
        InvalidSpecError: Otherwise (message :data:`BAD_OBS_MODE`).
    """
    if obs_mode not in OBS_MODES:
        raise InvalidSpecError(BAD_OBS_MODE.format(choices=OBS_MODES, value=obs_mode))
    return obs_mode  # type: ignore[return-value]


def observation_space(obs_mode: str, state_shape: Sequence[int], height: int, width: int
                      ) -> spaces.Space[Any]:
    """The space of one ``obs_mode`` observation.

    Args:
        obs_mode: An observation mode.
        state_shape: Shape of the state vector, e.g. ``(30,)``.
        height: Image height [px].
        width: Image width [px].

    Returns:
        ``Box(-inf, inf, state_shape, float32)``, ``Box(0, 255, (height, width, 3), uint8)``
        or ``Dict(state=..., pixels=...)``.

    Raises:
        InvalidSpecError: On an unknown mode.
    """
    check_obs_mode(obs_mode)
    state = spaces.Box(-np.inf, np.inf, shape=tuple(state_shape), dtype=np.float32)
    pixels = spaces.Box(0, 255, shape=(int(height), int(width), 3), dtype=np.uint8)
    if obs_mode == "state":
        return state
    if obs_mode == "pixels":
        return pixels
    return spaces.Dict({"state": state, "pixels": pixels})


def compose_observation(obs_mode: str, state: Callable[[], Any], pixels: Callable[[], Any]
                        ) -> Any:
    """One observation in ``obs_mode``, computing only the parts the mode needs.

    Args:
        obs_mode: An observation mode.
        state: Returns the state vector (converted to ``float32`` here).
        pixels: Returns the image (an ``(H, W, 3) uint8`` array or a pending frame).

    Returns:
        The state, the image, or ``{"state": ..., "pixels": ...}``.
    """
    if obs_mode == "state":
        return np.asarray(state(), dtype=np.float32)
    img = pixels()
    if obs_mode == "pixels":
        return img
    return {"state": np.asarray(state(), dtype=np.float32), "pixels": img}


def pixels_digest(obs: Any) -> str | None:
    """A 16-hex-digit BLAKE2b digest of the image of a drawn ``pixels`` or ``state+pixels``
    observation (its bytes, shape included), or None if it holds no image: two images
    digest alike only if they are equal (up to a 64-bit collision)."""
    import hashlib

    image = obs.get("pixels") if isinstance(obs, dict) else obs
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3:
        return None
    h = hashlib.blake2b(repr(image.shape).encode(), digest_size=8)
    h.update(np.ascontiguousarray(image).data)
    return h.hexdigest()
