"""The ``sensor`` axis: what the policy's sensors deliver, corrupted at every step.

One corruption is drawn per episode and applied in the wrapper to every observation
the policy gets (the reset's included); the scene, its physics and its renderer are
untouched. Each corruption has an image form (ImageNet-C's, Hendrycks & Dietterich 2019,
"Benchmarking Neural Network Robustness to Common Corruptions and Perturbations") and a
state form (the same kind of loss on a state vector, scaled per dimension by the state's
nominal spread ``sigma_d``, :meth:`~robogen.perturbations.wrapper.PerturbedEnv.state_spread`):

================  ==========================================  ===============================
kind              image ``(H, W, 3) uint8``                   state ``(obs_dim,) float32``
================  ==========================================  ===============================
gaussian_noise    ``+ N(0, (m * 0.38 * 255)^2)`` per pixel    ``+ N(0, (m 0.5 sigma_d)^2)``
jpeg              JPEG at quality ``round(100 - 93 m)``       quantized to ``m sigma_d`` steps
blur              Gaussian blur, ``sigma = m * 6 * W / 224``  lag ``y_t = a y_{t-1} +
                  px (ImageNet-C's 6 px at 224 px)            (1 - a) x_t``, ``a = 0.8 m``
frame_drop        with probability ``0.5 m`` the previous observation is delivered again
                  (the whole observation: image and state together, as a fresh copy)
================  ==========================================  ===============================

``m`` is the episode's magnitude, drawn in ``[severity / 2, severity]``. A
``state+pixels`` observation gets the corruption on both parts.

Splits: train draws ``gaussian_noise`` or ``jpeg``, test ``blur`` or ``frame_drop`` (held-out
corruption kinds, disjoint), ``all`` any of the four.

Noise is drawn from the episode's own stream (``stream_seed``, recorded), so an episode
replays exactly and a condition's episodes are paired with the nominal ones like every axis.
Privileged policies (the scripted experts) read the simulator, not the observation: the
sensor axis does not reach them.
"""

from __future__ import annotations

import io
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from robogen.envs.render import PendingFrame, map_frame
from robogen.perturbations import helpers as u
from robogen.perturbations.base import (
    Axis,
    FilterContext,
    Perturbation,
    StepFilter,
    register_axis,
)

SENSOR_KINDS = {"train": ("gaussian_noise", "jpeg"), "test": ("blur", "frame_drop")}
"""Corruption kinds of each split (disjoint); ``all`` draws from both."""
IMAGE_NOISE_STD = 0.38
"""Pixel noise standard deviation at magnitude 1, as a fraction of 255 (ImageNet-C's
severity 5)."""
STATE_NOISE_STD = 0.5
"""State noise standard deviation at magnitude 1, as a fraction of the nominal spread."""
MIN_JPEG_QUALITY = 7
"""JPEG quality at magnitude 1 (ImageNet-C's severity 5); 100 at magnitude 0."""
BLUR_SIGMA_AT_224 = 6.0
"""Gaussian blur sigma at magnitude 1 [px] for a 224 px wide image; scaled with the width."""
MAX_LAG = 0.8
"""State low-pass coefficient ``a`` at magnitude 1."""
MAX_DROP = 0.5
"""Probability that a frame is dropped (the previous one delivered again) at magnitude 1."""


@dataclass(frozen=True, slots=True)
class SensorPerturbation(Perturbation):
    """The sensor corruption of one episode.

    Attributes:
        kind: ``gaussian_noise``, ``jpeg``, ``blur`` or ``frame_drop``.
        magnitude: ``m`` in [0, 1] (see the module table).
        stream_seed: Seed of the episode's noise stream.
    """

    axis: ClassVar[str] = "sensor"

    kind: str
    magnitude: float
    stream_seed: int

    def step_filter(self, context: FilterContext) -> StepFilter | None:
        """A :class:`SensorFilter` (None at magnitude 0)."""
        if self.magnitude <= 0:
            return None
        return SensorFilter(self, context)


class SensorFilter(StepFilter):
    """Applies a :class:`SensorPerturbation` to every observation of one episode.

    Observations are a state vector (float), an image (``(H, W, 3) uint8`` or a
    :class:`~robogen.envs.render.PendingFrame`, corrupted once drawn) or a dict of both
    (``state``, ``pixels``). Image noise is seeded per frame from the episode's stream at the
    step it is delivered, so a frame drawn late on the render thread gets the same noise.
    """

    def __init__(self, p: SensorPerturbation, context: FilterContext) -> None:
        self.p = p
        self.rng = np.random.default_rng(p.stream_seed)
        self.context = context
        self.last: Any = None
        self.lagged: np.ndarray | None = None

    def observation(self, obs: Any) -> Any:
        """The corrupted observation (see the module table)."""
        p = self.p
        if p.kind == "frame_drop":
            if self.last is not None and self.rng.random() < MAX_DROP * p.magnitude:
                return _copy(self.last)  # a new object every time: callers keep and edit them
            self.last = _copy(obs)
            return obs
        if isinstance(obs, dict):
            return {k: self._image(v) if k == "pixels" else self._state(v) if k == "state"
                    else v for k, v in obs.items()}
        if _is_image(obs):
            return self._image(obs)
        return self._state(obs)

    def _state(self, x: Any) -> Any:
        x = np.asarray(x)
        spread = self.context.state_spread()
        if spread is None or spread.shape != x.shape:
            return x
        p = self.p
        if p.kind == "gaussian_noise":
            out = x + self.rng.normal(size=x.shape) * (STATE_NOISE_STD * p.magnitude * spread)
        elif p.kind == "jpeg":
            step = p.magnitude * spread
            safe = np.where(step > 0, step, 1.0)
            out = np.where(step > 0, np.round(x / safe) * safe, x)
        else:  # blur: a first-order lag
            a = MAX_LAG * p.magnitude
            out = x if self.lagged is None else a * self.lagged + (1.0 - a) * x
            self.lagged = np.array(out, dtype=np.float64)
        return np.asarray(out, dtype=x.dtype)

    def _image(self, frame: Any) -> Any:
        p = self.p
        seed = int(self.rng.integers(2**63)) if p.kind == "gaussian_noise" else 0
        return map_frame(frame, lambda image: corrupt_image(image, p.kind, p.magnitude, seed))


def corrupt_image(image: np.ndarray, kind: str, magnitude: float, seed: int = 0) -> np.ndarray:
    """One image corruption of the module table.

    Args:
        image: ``(H, W, 3) uint8`` RGB.
        kind: ``gaussian_noise``, ``jpeg`` or ``blur``.
        magnitude: ``m`` in [0, 1].
        seed: Seed of the pixel noise (``gaussian_noise``).

    Returns:
        A new ``(H, W, 3) uint8`` image.

    Raises:
        ValueError: On another kind.
    """
    if kind == "gaussian_noise":
        noise = np.random.default_rng(seed).normal(size=image.shape)
        out = image + noise * (IMAGE_NOISE_STD * 255.0 * magnitude)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)
    if kind == "jpeg":
        from PIL import Image

        quality = max(1, round(100 - (100 - MIN_JPEG_QUALITY) * magnitude))
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
        return np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    if kind == "blur":
        from scipy.ndimage import gaussian_filter

        sigma = BLUR_SIGMA_AT_224 * magnitude * image.shape[1] / 224.0
        out = gaussian_filter(image.astype(np.float32), sigma=(sigma, sigma, 0), mode="nearest")
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)
    raise ValueError(f"image corruption must be gaussian_noise, jpeg or blur, got {kind!r}")


def _is_image(x: Any) -> bool:
    if isinstance(x, PendingFrame):
        return True
    return isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 3


def _copy(obs: Any) -> Any:
    """A copy sharing no array with ``obs`` (a pending frame resolves to its own copy)."""
    if isinstance(obs, dict):
        return {k: _copy(v) for k, v in obs.items()}
    if isinstance(obs, PendingFrame):
        return map_frame(obs, np.copy)
    return obs.copy() if isinstance(obs, np.ndarray) else obs


@register_axis("sensor")
class SensorAxis(Axis):
    """Observation corruptions: pixel/state noise, JPEG/quantization, blur/lag, dropped frames."""

    kind: ClassVar[str] = "sensor"
    distinct_values: ClassVar[str] = ""  # a per-step process / an instruction, not a scene
    description: ClassVar[str] = (
        "observation corruption per step: noise, JPEG/quantization, blur/lag, frame drops")

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The kind of corruption (held-out kinds)."""
        return frozenset({values["kind"]})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: Any
               ) -> SensorPerturbation:
        """Draw a kind from the split's set, a magnitude and the episode's noise seed."""
        m = u.check_and_magnitude(rng, severity, split)
        kinds = SENSOR_KINDS.get(split) or (*SENSOR_KINDS["train"], *SENSOR_KINDS["test"])
        kind = kinds[int(rng.integers(len(kinds)))]
        return SensorPerturbation(kind=kind, magnitude=round(m, 6),
                                  stream_seed=int(rng.integers(2**63)))
