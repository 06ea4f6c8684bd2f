"""Behaviour-cloning networks for inference: config, network, model, checkpoint-free predict.

This is the half of behaviour cloning a ``flax:PATH`` policy needs at evaluation
time (:mod:`robogen.policies.flax_policy`); training (Flax + optax, many models at
once with ``vmap``) lives in :mod:`robogen.scaling.bc`, which imports from here.

Networks:
    ``mlp``: state observations ``(D,) float32``, normalized by the training
    subset's mean and standard deviation (features with std < ``STD_FLOOR`` are
    only centred; normalized values are clipped to ``[-NORM_CLIP, NORM_CLIP]``),
    then ``hidden`` ReLU layers and a ``tanh`` output.
    ``cnn``: pixel observations ``(H, W, 3) uint8`` scaled to ``[0, 1]`` (NHWC),
    a Nature-DQN style conv stack (Mnih et al., 2015, "Human-level control
    through deep reinforcement learning") with configurable channels, a
    ``feature_dim`` projection with LayerNorm and ``tanh``, joined with the
    normalized state when the observation mode is ``state+pixels``, then the
    same MLP head.

The network outputs actions in ``[-1, 1]``; :meth:`BCModel.predict` rescales them
to the env's action bounds. JAX and Flax are imported with this module, which
is imported only when a ``flax:`` policy is loaded or a model is trained.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike, NDArray

from robogen.errors import InvalidSpecError

ARCHS = ("mlp", "cnn")
STD_FLOOR = 1e-3
"""State features whose training std is below this [obs units] are centred, not scaled."""
NORM_CLIP = 10.0
"""Normalized state features are clipped to ``[-NORM_CLIP, NORM_CLIP]``."""

BAD_ARCH = "arch {arch!r} cannot read {obs_mode!r} observations; use {fix}"


@dataclass(frozen=True)
class BCConfig:
    """Network and optimisation settings of a behaviour-cloning model."""

    arch: str = "mlp"
    """``mlp`` (state observations) or ``cnn`` (pixels, optionally with state)."""
    hidden: tuple[int, ...] = (256, 256)
    """Widths of the ReLU layers of the MLP head."""
    conv_channels: tuple[int, ...] = (16, 32, 32)
    """Output channels of the conv layers (``cnn``)."""
    conv_kernels: tuple[int, ...] = (8, 4, 3)
    """Square kernel sizes [px] of the conv layers."""
    conv_strides: tuple[int, ...] = (4, 2, 1)
    """Strides [px] of the conv layers."""
    feature_dim: int = 128
    """Width of the image feature after the conv stack (``cnn``)."""
    keypoints: int = 0
    """Spatial-softmax keypoints taken from the last conv map (``cnn``; 0: none): a 1x1 conv to
    ``keypoints`` maps, a softmax over each map's pixels and its expected ``(x, y)`` in [-1, 1]
    (Levine, Finn, Darrell & Abbeel 2016, "End-to-End Training of Deep Visuomotor Policies"),
    joined with the projected features."""
    steps: int = 2000
    """Gradient steps per model."""
    batch_size: int = 256
    """Minibatch size (samples drawn with replacement from the model's subset)."""
    lr: float = 1e-3
    """Adam learning rate (the peak rate with ``lr_schedule="cosine"``)."""
    lr_schedule: str = "constant"
    """``constant`` or ``cosine`` (decay to 0 over ``steps``; Loshchilov & Hutter 2017, SGDR)."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW); 0 gives Adam."""
    max_grad_norm: float | None = 1.0
    """Global gradient-norm clip; None disables it."""
    augment: bool = False
    """DrQ random-shift augmentation of pixel observations during training."""
    shift_pad: int = 4
    """Random-shift padding [px]."""
    color_jitter: float = 0.0
    """Colour-jitter strength ``s`` during training (pixels; 0 disables it): per image a
    brightness, contrast and saturation factor in ``[1 - s, 1 + s]`` and a per-channel gain in
    ``[1 - s/2, 1 + s/2]`` (see :func:`color_jitter`)."""
    state_indices: tuple[int, ...] | None = None
    """Indices of the state features the network reads (e.g. proprioception only); None: all."""
    chunk_steps: int | None = None
    """Steps per compiled call (None: all steps in one call); a progress hook runs between."""

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise InvalidSpecError(f"BC arch must be one of {ARCHS}, got {self.arch!r}")
        for name in ("steps", "batch_size", "feature_dim"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise InvalidSpecError(f"BC {name} must be a positive integer, got {value!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InvalidSpecError(f"BC lr must be a finite number > 0, got {self.lr!r}")
        if not (self.weight_decay >= 0):
            raise InvalidSpecError(f"BC weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise InvalidSpecError(
                f"BC max_grad_norm must be > 0 or None, got {self.max_grad_norm!r}")
        if not (isinstance(self.shift_pad, int) and self.shift_pad >= 0):
            raise InvalidSpecError(f"BC shift_pad must be an integer >= 0, got {self.shift_pad!r}")
        if self.chunk_steps is not None and not (
                isinstance(self.chunk_steps, int) and self.chunk_steps > 0):
            raise InvalidSpecError(
                f"BC chunk_steps must be a positive integer or None, got {self.chunk_steps!r}")
        if self.lr_schedule not in ("constant", "cosine"):
            raise InvalidSpecError(
                f"BC lr_schedule must be 'constant' or 'cosine', got {self.lr_schedule!r}")
        if not (isinstance(self.keypoints, int) and self.keypoints >= 0):
            raise InvalidSpecError(f"BC keypoints must be an integer >= 0, got {self.keypoints!r}")
        if not (isinstance(self.color_jitter, (int, float)) and 0 <= self.color_jitter < 1):
            raise InvalidSpecError(
                f"BC color_jitter must be a number in [0, 1), got {self.color_jitter!r}")
        if self.state_indices is not None and not (
                len(self.state_indices) > 0 and len(set(self.state_indices)) ==
                len(self.state_indices) and all(isinstance(i, int) and i >= 0
                                                for i in self.state_indices)):
            raise InvalidSpecError(
                "BC state_indices must be None or distinct non-negative integers, got "
                f"{self.state_indices!r}")
        if not (len(self.conv_channels) == len(self.conv_kernels) == len(self.conv_strides)):
            raise InvalidSpecError(
                "BC conv_channels, conv_kernels and conv_strides must have the same length, got "
                f"{self.conv_channels}, {self.conv_kernels}, {self.conv_strides}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BCConfig:
        """Inverse of :meth:`to_dict` (lists become tuples; unknown keys are an error)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise InvalidSpecError(
                f"unknown BC config field(s) {unknown}; expected {sorted(names)}")
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**fields)


def min_image_size(config: BCConfig) -> int:
    """Smallest square image side [px] whose conv stack (``VALID`` padding) leaves >= 1 px.

    Each layer maps a side ``n`` to ``(n - kernel) // stride + 1``; the bound is
    found by running that map backwards from 1.
    """
    side = 1
    for k, s in zip(reversed(config.conv_kernels), reversed(config.conv_strides), strict=True):
        side = (side - 1) * s + k
    return side


def check_image_size(config: BCConfig, size: int) -> None:
    """Raise :class:`InvalidSpecError` if ``size`` [px] is too small for the CNN of ``config``."""
    need = min_image_size(config)
    if config.arch == "cnn" and size < need:
        raise InvalidSpecError(
            f"images of {size}x{size} px are too small for the BC CNN (kernels "
            f"{list(config.conv_kernels)}, strides {list(config.conv_strides)}): it needs at least "
            f"{need}x{need}; use --image-size {need} or more (84 is the default)")


def _spatial_softmax(maps: jax.Array) -> jax.Array:
    """Expected image coordinates of each map: ``(..., H, W, K)`` -> ``(..., 2K)`` in [-1, 1]."""
    h, w, k = maps.shape[-3:]
    flat = maps.reshape((*maps.shape[:-3], h * w, k))
    prob = jax.nn.softmax(flat, axis=-2)
    ys, xs = jnp.meshgrid(jnp.linspace(-1.0, 1.0, h), jnp.linspace(-1.0, 1.0, w), indexing="ij")
    ex = jnp.einsum("...pk,p->...k", prob, xs.reshape(-1))
    ey = jnp.einsum("...pk,p->...k", prob, ys.reshape(-1))
    return jnp.concatenate([ex, ey], axis=-1)


S2D_MIN_STRIDE = 4
"""Convs with at least this stride (and a kernel that is a multiple of it) run as space-to-depth
convs in row-by-row inference (:class:`PolicyNet` with ``space_to_depth``)."""


def space_to_depth_conv(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    """A ``VALID`` conv of stride ``s`` whose kernel side ``k`` is a multiple of ``s``, computed
    as a stride-1 conv of kernel side ``k / s`` on the image folded into ``s x s`` blocks.

    The same function as ``lax.conv_general_dilated(x, kernel, (s, s), "VALID")`` (each output
    sums the same products, in another order: equal to float32 rounding). On one 84x84x3 image
    XLA:CPU runs the Nature-DQN first layer (``k = 8``, ``s = 4``) in ~0.11 ms instead of
    ~0.18 ms (the strided conv reads 3-channel pixels; the folded one 48-channel blocks); at a
    training batch of 64 it is slower (the fold's transpose), so only inference uses it.

    Args:
        x: ``(B, H, W, C) float32`` NHWC images.
        kernel: ``(k, k, C, F) float32`` HWIO kernel, ``k % stride == 0``.
        stride: The conv's stride ``s`` [px].

    Returns:
        ``(B, (H - k) // s + 1, (W - k) // s + 1, F) float32``.
    """
    k, s = kernel.shape[0], stride
    m = k // s
    b, h, w, c = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    qh, qw = oh - 1 + m, ow - 1 + m  # blocks the output reads (the rest of the image is unread)
    x = x[:, :qh * s, :qw * s].reshape(b, qh, s, qw, s, c).transpose(0, 1, 3, 2, 4, 5)
    x = x.reshape(b, qh, qw, s * s * c)
    folded = kernel.reshape(m, s, m, s, c, -1).transpose(0, 2, 1, 3, 4, 5)
    folded = folded.reshape(m, m, s * s * c, kernel.shape[-1])
    return jax.lax.conv_general_dilated(x, folded, (1, 1), "VALID",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


class _Conv(nn.Conv):
    """``nn.Conv`` (same parameters) that may run as :func:`space_to_depth_conv`."""

    space_to_depth: bool = False

    @nn.compact
    def __call__(self, inputs: jax.Array) -> jax.Array:
        k, s = self.kernel_size[0], self.strides[0]  # type: ignore[index]
        if not (self.space_to_depth and s >= S2D_MIN_STRIDE and k % s == 0
                and self.padding == "VALID"):
            return super().__call__(inputs)
        kernel = self.param("kernel", self.kernel_init, (k, k, inputs.shape[-1], self.features),
                            self.param_dtype)
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype)
        return space_to_depth_conv(inputs, kernel, s) + bias


@jax.custom_vjp
def dense_matmul(x: jax.Array, w: jax.Array) -> jax.Array:
    """``x @ w`` over the last axis of ``x`` (a ``Dense`` layer's product) whose weight gradient
    runs as an untransposed matmul on XLA:CPU.

    The forward pass is ``lax.dot_general`` exactly as ``flax.linen.Dense`` calls it (same
    result, bit for bit). In the backward pass autodiff computes the weight gradient
    ``x^T @ g`` with the contraction over ``x``'s leading (batch) axis, which XLA:CPU hands to a
    kernel that reads ``x`` transposed: measured at batch 256, K x (256x256)^T @ (256x256)
    products of 4 models run at ~165 GFLOP/s against ~205 for the untransposed product on the
    same 2 cores. Here ``x^T`` is materialized first (an ``optimization_barrier`` keeps XLA from
    folding the transpose back into the dot), so the product is a plain matmul; the copy is one
    pass over the layer's input. On other backends the usual product is used.

    Args:
        x: ``(..., D) float32`` inputs.
        w: ``(D, F) float32`` kernel.

    Returns:
        ``(..., F) float32``; the gradients equal autodiff's to float32 rounding (another
        summation order).
    """
    return jax.lax.dot_general(x, w, (((x.ndim - 1,), (0,)), ((), ())))


def _dense_matmul_fwd(x: jax.Array, w: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    return dense_matmul(x, w), (x, w)


def _dense_matmul_bwd(res: tuple[jax.Array, jax.Array], g: jax.Array
                      ) -> tuple[jax.Array, jax.Array]:
    x, w = res
    dx = jax.lax.dot_general(g, w, (((g.ndim - 1,), (1,)), ((), ())))
    return dx, transposed_matmul(x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1]))


dense_matmul.defvjp(_dense_matmul_fwd, _dense_matmul_bwd)


def transposed_matmul(x: jax.Array, g: jax.Array) -> jax.Array:
    """``x^T @ g`` (a weight gradient) for ``(B, D)`` and ``(B, F)`` float32 arrays ->
    ``(D, F)``. On XLA:CPU ``x^T`` is materialized first, behind an ``optimization_barrier``
    (else XLA folds the transpose back into a slower transposed-input product, see
    :func:`dense_matmul`); elsewhere the usual contraction over the batch axis."""
    if jax.default_backend() != "cpu":
        return jax.lax.dot_general(x, g, (((0,), (0,)), ((), ())))
    return jax.lax.optimization_barrier(x.T) @ g


def _dense_dot_general(lhs: jax.Array, rhs: jax.Array, dimension_numbers: Any,
                       precision: Any = None, preferred_element_type: Any = None) -> jax.Array:
    """``lax.dot_general`` for ``flax.linen.Dense`` computed by :func:`dense_matmul` (Dense's
    own contraction: the last axis of ``lhs`` with the kernel's first, no batch axes)."""
    if (dimension_numbers != (((lhs.ndim - 1,), (0,)), ((), ())) or rhs.ndim != 2
            or precision is not None or preferred_element_type is not None):
        return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                                   preferred_element_type=preferred_element_type)
    return dense_matmul(lhs, rhs)


def _dense(features: int) -> nn.Dense:
    """``nn.Dense(features)`` (same parameters and names) whose weight gradient is computed by
    :func:`dense_matmul`."""
    return nn.Dense(features, dot_general=_dense_dot_general)


class PolicyNet(nn.Module):
    """MLP or CNN(+state) trunk with a ``tanh`` action head; inputs are pre-normalized.

    ``space_to_depth``: run convs of stride >= :data:`S2D_MIN_STRIDE` as
    :func:`space_to_depth_conv` (same parameters, same function to float32 rounding; faster on
    one image, slower on a training batch): row-by-row inference (:func:`predict_fn`) sets it.
    """

    config: BCConfig
    act_dim: int
    space_to_depth: bool = False

    @nn.compact
    def __call__(self, state: jax.Array | None, pixels: jax.Array | None) -> jax.Array:
        cfg = self.config
        parts = []
        if pixels is not None:
            x = pixels.astype(jnp.float32) / 255.0
            for i, (ch, k, s) in enumerate(zip(cfg.conv_channels, cfg.conv_kernels,
                                               cfg.conv_strides, strict=True)):
                x = nn.relu(_Conv(ch, (k, k), strides=(s, s), padding="VALID",
                                  space_to_depth=self.space_to_depth, name=f"Conv_{i}")(x))
            if cfg.keypoints:
                parts.append(_spatial_softmax(
                    nn.Conv(cfg.keypoints, (1, 1), name=f"Conv_{len(cfg.conv_channels)}")(x)))
            x = x.reshape((*x.shape[:-3], -1))
            x = jnp.tanh(nn.LayerNorm()(_dense(cfg.feature_dim)(x)))
            parts.append(x)
        if state is not None:
            if cfg.state_indices is not None:
                state = state[..., jnp.asarray(cfg.state_indices)]
            parts.append(state)
        h = jnp.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
        for width in cfg.hidden:
            h = nn.relu(_dense(width)(h))
        return jnp.tanh(_dense(self.act_dim)(h))


@dataclass(frozen=True, eq=False)
class BCModel:
    """A trained behaviour-cloning policy.

    Attributes:
        config: Network/optimisation settings it was trained with.
        params: Flax parameter tree (numpy arrays).
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        obs_shapes: Shape of one observation per key: ``{"state": (D,)}``,
            ``{"pixels": (H, W, 3)}`` or both.
        act_dim: Action dimension A.
        action_low: ``(A,) float32`` lower action bounds (env units).
        action_high: ``(A,) float32`` upper action bounds.
        obs_mean: ``(D,) float32`` state normalization mean, or None without state.
        obs_std: ``(D,) float32`` state normalization std (floored to 1 below ``STD_FLOOR``).
        train_info: Seed, steps, subset size, final loss, a short loss curve.
    """

    config: BCConfig
    params: Any
    obs_mode: str
    obs_shapes: Mapping[str, tuple[int, ...]]
    act_dim: int
    action_low: NDArray[np.float32]
    action_high: NDArray[np.float32]
    obs_mean: NDArray[np.float32] | None
    obs_std: NDArray[np.float32] | None
    train_info: Mapping[str, Any] = field(default_factory=dict)

    def predict(self, obs: ArrayLike | Mapping[str, ArrayLike]) -> NDArray[np.float32]:
        """Deterministic actions for a batch; each row's action depends on that row only.

        Row ``i``'s action is a function of ``obs[i]`` alone, bit for bit: not of the batch
        size, the row's place in the batch or the other rows (see :func:`predict_fn`). An
        episode therefore gets the same actions whichever batch it runs in (``--batch-size``,
        a replay alone, a worker acting on part of its envs at a time).

        Args:
            obs: ``(B, D) float32`` state, ``(B, H, W, 3) uint8`` pixels, or a dict of both.

        Returns:
            ``(B, A) float32`` actions in ``[action_low, action_high]`` (env units).
        """
        batch = obs_dict(obs, self.obs_mode)
        b = len(next(iter(batch.values())))
        padded = 1 << max(0, (b - 1).bit_length())  # bucket batch sizes: few recompiles
        batch = {k: pad_rows(v, padded) for k, v in batch.items()}
        fn = predict_fn(self.config, self.act_dim)
        params, stats = self._on_device
        out = np.asarray(fn(params, stats, batch, b))[:b]
        return (self.action_low + (out + 1.0) * 0.5 * (self.action_high - self.action_low)
                ).astype(np.float32)

    def _stats(self) -> dict[str, Any]:
        if self.obs_mean is None:
            return {}
        return {"mean": self.obs_mean, "std": self.obs_std}

    @property
    def device_arrays(self) -> tuple[Any, dict[str, Any]]:
        """``(params, stats)`` as JAX arrays on JAX's default device (copied once)."""
        return self._on_device

    @functools.cached_property
    def _on_device(self) -> tuple[Any, dict[str, Any]]:
        """``(params, stats)`` as JAX arrays, copied once instead of at every :meth:`predict`."""
        return jax.device_put(self.params), jax.device_put(self._stats())


def obs_dict(obs: Any, obs_mode: str) -> dict[str, NDArray[Any]]:
    """Split a batch of ``obs_mode`` observations into ``{"state": ..., "pixels": ...}``."""
    if obs_mode == "state+pixels":
        return {"state": np.asarray(obs["state"], np.float32), "pixels": np.asarray(obs["pixels"])}
    if obs_mode == "pixels":
        return {"pixels": np.asarray(obs)}
    return {"state": np.asarray(obs, np.float32)}


def pad_rows(a: NDArray[Any], rows: int) -> NDArray[Any]:
    """``a`` with zero rows appended up to ``rows`` rows."""
    if len(a) == rows:
        return a
    return np.concatenate([a, np.zeros((rows - len(a), *a.shape[1:]), a.dtype)])


def forward(net: PolicyNet, params: Any, stats: Mapping[str, jax.Array],
            obs: Mapping[str, jax.Array]) -> jax.Array:
    """Network output for pre-batched observations, state normalized with ``stats``.

    Args:
        net: The network.
        params: Its Flax parameter tree.
        stats: ``{"mean": (D,), "std": (D,)}`` float32 state statistics, or empty without state.
        obs: ``{"state": (B, D) float32, "pixels": (B, H, W, 3) uint8}`` (either or both).

    Returns:
        ``(B, A) float32`` actions in ``[-1, 1]``.
    """
    state = obs.get("state")
    if state is not None:
        state = normalize_state(state, stats)
    return cast(jax.Array, net.apply({"params": params}, state, obs.get("pixels")))


def normalize_state(state: jax.Array, stats: Mapping[str, jax.Array]) -> jax.Array:
    """``(state - mean) / std`` clipped to ``[-NORM_CLIP, NORM_CLIP]``: the network's input
    normalization (``(..., D) float32`` states, ``stats`` as in :func:`forward`)."""
    return jnp.clip((state - stats["mean"]) / stats["std"], -NORM_CLIP, NORM_CLIP)


@functools.lru_cache(maxsize=32)
def predict_fn(cfg: BCConfig, act_dim: int) -> Callable[..., jax.Array]:
    """The jitted row-by-row :func:`forward` of the network of ``cfg`` (cached per config and
    act_dim).

    The returned ``fn(params, stats, obs, count)`` takes ``obs`` of ``(C, ...)`` rows and
    returns ``(C, A) float32`` outputs in ``[-1, 1]``, of which the first ``count`` (a traced
    int, so one compile serves every count up to ``C``) are computed; the rest are 0. Each row
    runs through the network as a batch of one inside a ``lax.fori_loop``: XLA:CPU's batched
    convolutions and matrix products give a row a result that differs in the last bits with
    the batch size and the row's place in it (measured: up to 1e-6 on the shipped Push
    policy), which would make an episode's actions depend on the batch it ran in. Per row,
    inference costs about the same as batched on CPU for these small networks.
    """
    net = PolicyNet(cfg, act_dim, space_to_depth=True)

    def rows(params: Any, stats: Mapping[str, jax.Array], obs: Mapping[str, jax.Array],
             count: jax.Array) -> jax.Array:
        capacity = next(iter(obs.values())).shape[0]

        def one(i: jax.Array, out: jax.Array) -> jax.Array:
            row = {k: jax.lax.dynamic_slice_in_dim(v, i, 1) for k, v in obs.items()}
            return jax.lax.dynamic_update_slice_in_dim(out, forward(net, params, stats, row),
                                                       i, 0)

        return jax.lax.fori_loop(0, count, one, jnp.zeros((capacity, act_dim), jnp.float32))

    return jax.jit(rows)
