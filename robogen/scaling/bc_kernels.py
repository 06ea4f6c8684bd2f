"""The pure JAX pieces of behaviour-cloning training: image augmentations, the MLP on
bias-augmented layer matrices, and an unrolled Threefry key split.

Part of :mod:`robogen.scaling.bc` (which re-exports these names); every function here is
traceable under ``jit`` and ``vmap``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from robogen.policies.bc_net import BCConfig, dense_matmul, normalize_state


def random_shift(key: jax.Array, pixels: jax.Array, pad: int) -> jax.Array:
    """DrQ random shift: edge-pad ``(B, H, W, C)`` images by ``pad`` and crop each back at a
    random integer offset in ``[0, 2 * pad]`` (Kostrikov et al., 2021)."""
    if pad == 0:
        return pixels
    b, h, w, c = pixels.shape
    padded = jnp.pad(pixels, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    offsets = jax.random.randint(key, (b, 2), 0, 2 * pad + 1)

    def crop(img: jax.Array, off: jax.Array) -> jax.Array:
        return jax.lax.dynamic_slice(img, (off[0], off[1], 0), (h, w, c))

    return jax.vmap(crop)(padded, offsets)


def color_jitter(key: jax.Array, pixels: jax.Array, strength: float) -> jax.Array:
    """Random photometric jitter of ``(B, H, W, 3)`` images, one draw per image.

    Brightness (a factor on all pixels), contrast (around the image mean) and
    saturation (around the per-pixel grey) each scale by a factor drawn from
    ``U[1 - s, 1 + s]``, then each channel by a gain from ``U[1 - s/2, 1 + s/2]``
    (a colour cast); the result is clipped to ``[0, 255]``. This is the colour
    jitter of the image-augmentation studies in RL (Laskin et al. 2020, "RAD:
    Reinforcement Learning with Augmented Data"; Hansen & Wang 2021, SODA).

    Args:
        key: PRNG key.
        pixels: ``(B, H, W, 3)`` images, uint8 or float in [0, 255].
        strength: ``s`` in [0, 1).

    Returns:
        ``(B, H, W, 3) float32`` images in [0, 255].
    """
    b = pixels.shape[0]
    k_b, k_c, k_s, k_g = jax.random.split(key, 4)
    lo, hi = 1.0 - strength, 1.0 + strength
    x = pixels.astype(jnp.float32)
    x = x * jax.random.uniform(k_b, (b, 1, 1, 1), minval=lo, maxval=hi)
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    x = (x - mean) * jax.random.uniform(k_c, (b, 1, 1, 1), minval=lo, maxval=hi) + mean
    grey = x.mean(axis=-1, keepdims=True)
    x = (x - grey) * jax.random.uniform(k_s, (b, 1, 1, 1), minval=lo, maxval=hi) + grey
    x = x * jax.random.uniform(k_g, (b, 1, 1, 3), minval=1.0 - strength / 2,
                               maxval=1.0 + strength / 2)
    return jnp.clip(x, 0.0, 255.0)


# ---- the MLP's training parameters: each Dense layer as one bias-augmented matrix --------------


def augment_dense(params: Mapping[str, Any]) -> tuple[jax.Array, ...]:
    """The MLP's Flax parameters (``{"Dense_i": {"kernel": (in, out), "bias": (out,)}}``,
    float32, ``i`` = 0 .. layers - 1) as one ``(in + 1, out)`` matrix per layer: the kernel with
    the bias appended as its last row, so ``[x, 1] @ W`` is the layer's ``x @ kernel + bias``.
    Arrays may carry leading (model) axes. Inverse: :func:`flax_dense`."""
    return tuple(jnp.concatenate([params[f"Dense_{i}"]["kernel"],
                                  params[f"Dense_{i}"]["bias"][..., None, :]], axis=-2)
                 for i in range(len(params)))


def flax_dense(aug: Sequence[jax.Array]) -> dict[str, dict[str, jax.Array]]:
    """The Flax parameter tree (``Dense_i`` kernel and bias) of :func:`augment_dense`'s
    matrices."""
    return {f"Dense_{i}": {"kernel": a[..., :-1, :], "bias": a[..., -1, :]}
            for i, a in enumerate(aug)}


def _with_ones(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x, jnp.ones((*x.shape[:-1], 1), x.dtype)], axis=-1)


def mlp_forward(aug: Sequence[jax.Array], stats: Mapping[str, jax.Array], state: jax.Array,
                config: BCConfig) -> jax.Array:
    """:func:`robogen.policies.bc_net.forward` of the ``mlp`` network on its
    :func:`augment_dense` parameters: the same function, each layer one product
    ``[x, 1] @ W`` (the bias inside the matmul; equal to Flax's ``x @ kernel + bias`` to float32
    rounding).

    Why the trainer uses it: a layer's weight gradient needs its input transposed
    (:func:`robogen.policies.bc_net.dense_matmul`). With a separate bias XLA:CPU recomputes
    ``relu(h + bias)`` inside that transpose, a strided loop ~5x slower than the plain
    transpose it makes of ``[relu(h), 1]`` (measured: 4 models, batch 256, 256-256 net, two
    groups at once: 250 vs 65-83 ms of kernel time per 500 steps and transpose), and the
    bias gradients come out of the weight-gradient matmul instead of separate reductions.

    Args:
        aug: ``(in + 1, out) float32`` matrix per layer (:func:`augment_dense`).
        stats: ``{"mean": (D,), "std": (D,)}`` float32 state statistics.
        state: ``(B, D) float32`` raw states.
        config: The network's settings (``hidden``, ``state_indices``).

    Returns:
        ``(B, A) float32`` actions in ``[-1, 1]``.
    """
    x = normalize_state(state, stats)
    if config.state_indices is not None:
        x = x[..., jnp.asarray(config.state_indices)]
    for w in aug[:-1]:
        x = jax.nn.relu(dense_matmul(_with_ones(x), w))
    return jnp.tanh(dense_matmul(_with_ones(x), aug[-1]))


_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _threefry2x32(k1: jax.Array, k2: jax.Array, x1: jax.Array, x2: jax.Array
                  ) -> tuple[jax.Array, jax.Array]:
    """The Threefry-2x32 block cipher, 20 rounds (Salmon, Moraes, Dror & Shaw 2011, "Parallel
    random numbers: as easy as 1, 2, 3"), unrolled: the hash behind ``jax.random``'s default
    keys. All arguments are ``uint32`` arrays of one shape (or scalars); returns two."""
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x1, x2 = x1 + ks[0], x2 + ks[1]
    for i in range(5):
        for r in _THREEFRY_ROTATIONS[i % 2]:
            x1 = x1 + x2
            x2 = jax.lax.shift_left(x2, np.uint32(r)) | jax.lax.shift_right_logical(
                x2, np.uint32(32 - r))
            x2 = x1 ^ x2
        x1 = x1 + ks[(i + 1) % 3]
        x2 = x2 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x1, x2


def _partitionable() -> bool:
    """JAX's ``jax_threefry_partitionable`` setting (a dynamic config attribute)."""
    return bool(getattr(jax.config, "jax_threefry_partitionable", True))  # noqa: B009


def _threefry_split(key: jax.Array, num: int) -> jax.Array:
    """``jax.random.split(key, num)`` of a raw ``(2,) uint32`` threefry key, in either of JAX's
    split modes (``jax_threefry_partitionable``), with the hash unrolled."""
    k1, k2 = key[0], key[1]
    if _partitionable():
        hi, lo = jnp.zeros(num, jnp.uint32), jnp.arange(num, dtype=jnp.uint32)
        return jnp.stack(_threefry2x32(k1, k2, hi, lo), axis=-1)
    counts = jnp.arange(2 * num, dtype=jnp.uint32)
    out = jnp.concatenate(_threefry2x32(k1, k2, counts[:num], counts[num:]))
    return out.reshape(num, 2)


@functools.lru_cache(maxsize=4)
def _unrolled_split_agrees(partitionable: bool) -> bool:
    """Whether :func:`_threefry_split` gives ``jax.random.split``'s keys in this JAX (checked
    once per split mode on a few keys; else the trainer uses ``jax.random.split``)."""
    try:
        with jax.ensure_compile_time_eval():  # concrete values also while a caller is traced
            keys = [jax.random.PRNGKey(s) for s in (0, 1, 42, 2**31 - 1)]
            return all(np.array_equal(np.asarray(_threefry_split(k, 3)),
                                      np.asarray(jax.random.split(k, 3))) for k in keys)
    except Exception:  # noqa: BLE001 - another key type or API: use JAX's own split
        return False


def split_key(key: jax.Array, num: int) -> jax.Array:
    """``jax.random.split(key, num)``, the same keys, faster inside a compiled loop on XLA:CPU.

    JAX lowers its Threefry hash on the CPU as a loop of 5 iterations (to keep compile times
    down); a chain of splits, one per training step (the MLP trainer's minibatch keys), then
    runs 5 tiny loop iterations per step: ~80 us a step, about a third of a 64-64 MLP
    ensemble's training time on 2 cores. :func:`_threefry_split` is the same hash unrolled
    (a few fused kernels a step). Used only where it was checked to give JAX's keys
    (:func:`_unrolled_split_agrees`); otherwise ``jax.random.split``.

    Args:
        key: A raw ``(2,) uint32`` key (``jax.random.PRNGKey``).
        num: Number of keys.

    Returns:
        ``(num, 2) uint32`` keys.
    """
    if (isinstance(key, jax.Array | np.ndarray) and key.dtype == np.uint32
            and key.shape == (2,)
            and _unrolled_split_agrees(_partitionable())):
        return _threefry_split(key, num)
    return jax.random.split(key, num)
