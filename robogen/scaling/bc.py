"""Behaviour cloning in JAX (Flax + optax): many small policies trained at once with ``vmap``.

A BC policy maps an observation to an action and is trained by regression on
expert demonstrations: mean squared error between the network's ``tanh``
output and the expert action rescaled from the env's action bounds to
``[-1, 1]``.

Networks:
    ``mlp``: state observations ``(D,) float32``, normalized by the training
    subset's mean and standard deviation (stored in the checkpoint; features
    with std < 1e-3 are only centred; normalized values are clipped to
    ``[-10, 10]``), then ``hidden`` ReLU layers and a ``tanh`` output.
    ``cnn``: pixel observations ``(H, W, 3) uint8`` scaled to ``[0, 1]``
    (NHWC), a Nature-DQN style conv stack (Mnih et al., 2015) with configurable
    channels, a ``feature_dim`` projection with LayerNorm and ``tanh``, joined
    with the normalized state when the observation mode is ``state+pixels``,
    then the same MLP head.
    Optional DrQ random-shift augmentation for pixels (Kostrikov, Yarats &
    Fergus, 2021, "Image Augmentation Is All You Need"): pad each image by
    ``shift_pad`` pixels (edge replication) and crop back to ``H x W`` at a
    uniformly random integer offset.

Training many models at once:
    :func:`train_bc_ensemble` trains ``K`` models that differ in their data
    subset (one row of a ``(K, N)`` mask, or an index array) and their seed.
    The whole dataset is passed once; each model draws its minibatches
    uniformly with replacement from its own subset. The per-step program is
    ``jax.vmap``-ed over the models, so the ``K`` models share one compiled
    program and every matrix multiply runs on all of them at once. MLPs run
    the steps as one jit-compiled ``lax.scan``; CNNs run one jitted call per
    step from Python, because XLA:CPU runs convolutions inside a while loop
    10-15x slower than at the top level (84x84 CNN, batch 64: ~830 vs ~56 ms
    per step on 2 cores). :func:`train_bc_sequential` runs the very
    same per-model program one model after another (same seeds, same batches);
    its results equal the ensemble's up to floating-point reassociation.
    On XLA:CPU the models are split into one group per CPU core
    (:func:`model_groups`), each group one vmapped program, the groups run
    concurrently from threads: one vmapped program of small operations keeps
    about one core busy, and XLA:CPU runs calls from different threads at once.
    MLP results are the same bit for bit whatever the grouping.
    The MLP trains on each Dense layer's kernel and bias as one bias-augmented
    matrix (:func:`augment_dense`, :func:`mlp_forward`; the same network and the
    same Adam steps to float32 rounding, converted back to Flax's tree when
    training ends): on XLA:CPU the transposed layer inputs of the weight
    gradients are then plain copies (with a separate bias XLA recomputed
    ``relu(h + bias)`` in a ~5x slower strided loop) and the bias gradients come
    out of the weight-gradient products.
    Speed (``benchmarks/bench_bc_vmap.py``, 2 CPU cores, K=8): see the
    benchmark's rows in the README; vmapped groups save per-operation overhead
    and fill both cores, so they pay most for small networks; on a GPU the one
    batched program is the one that fills it (one group there).

The network, :class:`BCConfig` and :class:`BCModel` (inference) live in
:mod:`robogen.policies.bc_net` and are re-exported here; this module trains them.

Checkpoints (:func:`robogen.policies.bc_io.save_bc` / ``load_bc``, re-exported by
:mod:`robogen.scaling.bc_io`): a directory with
``params.msgpack`` (``flax.serialization``) and ``bc.json`` (metadata: schema,
observation mode and shapes, action bounds, normalization statistics, the
:class:`BCConfig`, training information). ``bc.json`` is written last, so a
directory without it is an incomplete save. The ``flax:PATH`` policy scheme
(:mod:`robogen.policies.flax_policy`) loads them for ``robogen eval``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct
from numpy.typing import ArrayLike, NDArray

from robogen._cores import usable_cores
from robogen.errors import InvalidSpecError
from robogen.policies.bc_net import (
    ARCHS,
    BAD_ARCH,
    NORM_CLIP,
    STD_FLOOR,
    BCConfig,
    BCModel,
    PolicyNet,
    check_image_size,
    dense_matmul,
    forward,
    min_image_size,
    normalize_state,
)

__all__ = [
    "ARCHS", "BAD_ACTIONS", "BAD_ARCH", "BAD_OBS", "BAD_SEEDS", "BAD_SUBSETS", "NORM_CLIP",
    "STD_FLOOR", "BCConfig", "BCModel", "TrainState", "bc_loss", "check_image_size",
    "color_jitter", "init_bc", "min_image_size", "model_groups", "random_shift",
    "train_bc_ensemble", "train_bc_sequential",
]

BAD_OBS = (
    "BC observations must be a (N, obs_dim) float array (state), a (N, H, W, 3) uint8 array "
    "(pixels) or a dict with keys 'state' and 'pixels'; got {got}"
)
BAD_ACTIONS = "BC actions must be a finite (N, act_dim) float array with N = {n} rows; got {got}"
BAD_SUBSETS = (
    "subsets must be a (K, N={n}) boolean mask or a sequence of K index arrays with indices in "
    "[0, {n}); {why}"
)
BAD_SEEDS = "seeds must be {k} non-negative integers (one per subset), got {seeds!r}"


@struct.dataclass
class TrainState:
    """Per-model training state carried through ``lax.scan`` (one leading axis per model when
    vmapped)."""

    params: Any
    opt_state: Any
    key: jax.Array
    step: jax.Array


def train_bc_ensemble(
    obs: ArrayLike | Mapping[str, ArrayLike],
    actions: ArrayLike,
    subsets: ArrayLike | Sequence[ArrayLike],
    *,
    seeds: Sequence[int],
    config: BCConfig | None = None,
    action_low: ArrayLike | None = None,
    action_high: ArrayLike | None = None,
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    **overrides: Any,
) -> list[BCModel]:
    """Train ``K`` BC models at once with ``jax.vmap`` (one model per subset and seed).

    Args:
        obs: ``(N, D) float32`` states, ``(N, H, W, 3) uint8`` images, or a dict
            ``{"state": ..., "pixels": ...}``.
        actions: ``(N, A) float32`` expert actions in env units.
        subsets: ``(K, N) bool`` mask, or ``K`` integer index arrays (repeats weight a row).
        seeds: ``K`` seeds; seed ``k`` drives model ``k``'s initialisation and minibatches.
        config: Settings (default :class:`BCConfig`; ``arch`` defaults to ``cnn`` for pixels).
        action_low: ``(A,)`` lower action bounds (default -1); targets are rescaled to [-1, 1]
            and clipped.
        action_high: ``(A,)`` upper action bounds (default +1).
        progress: Called as ``progress(steps_done, steps)`` after each compiled chunk.
        threads: Model groups trained concurrently, one thread each (:func:`model_groups`;
            default: the CPU cores this process may use on XLA:CPU, 1 on a GPU). MLP results
            do not depend on it; CNN results agree to float32 rounding (XLA batches the
            convolutions of a group together, and the reduction order follows the group size).
        **overrides: :class:`BCConfig` fields overriding ``config`` (``steps=500, lr=3e-4``).

    Returns:
        ``K`` :class:`BCModel`, in subset order.

    Raises:
        InvalidSpecError: On malformed observations, actions, subsets, seeds or config.
    """
    prep = _prepare(obs, actions, subsets, seeds, config, action_low, action_high, overrides)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise InvalidSpecError(f"threads must be a positive integer or None, got {threads!r}")
    fns = _train_fns(prep.config, prep.untrained.act_dim)
    groups = model_groups(len(prep.seeds), _default_threads() if threads is None else threads)

    inputs = [prep.rows(rows) for rows in groups]  # (idx, count, stats, keys) per group
    states, curves = _run_chunks(  # one (state, (m, steps) curves) per group
        [lambda s, n, i=i, c=c, st=st: fns.run_many(s, i, c, st, prep.data, prep.targets, n)
         for i, c, st, _ in inputs],
        [fns.init_many(keys, prep.dummy) for *_, keys in inputs], prep.config,
        None if progress is None else lambda done: progress(done, prep.config.steps))
    models: dict[int, BCModel] = {}
    for rows, state, curve in zip(groups, states, curves, strict=True):
        params = jax.tree_util.tree_map(np.asarray, fns.params_of(state.params))
        for j, k in enumerate(rows.tolist()):
            models.setdefault(k, prep.model(
                k, jax.tree_util.tree_map(lambda p, j=j: p[j], params), curve[j]))
    return [models[k] for k in range(len(prep.seeds))]


def model_groups(k: int, threads: int) -> list[NDArray[np.int64]]:
    """Split ``k`` models into ``min(k, threads)`` groups of equal size ``ceil(k / groups)``.

    The groups train concurrently, one thread each (:func:`train_bc_ensemble`); equal
    sizes mean one compiled program. The last group is padded by repeating its last
    model (trained twice, identically, and kept once).

    Returns:
        One ``(m,) int64`` array of model indices per group, in order.
    """
    n_groups = max(1, min(k, threads))
    size = -(-k // n_groups)
    return [np.minimum(np.arange(g * size, (g + 1) * size), k - 1)
            for g in range(n_groups) if g * size < k]


def _default_threads() -> int:
    """Concurrent model groups by default: the CPU cores this process may use on XLA:CPU,
    one elsewhere (a GPU runs the one batched program best)."""
    return usable_cores() if jax.default_backend() == "cpu" else 1


def train_bc_sequential(
    obs: ArrayLike | Mapping[str, ArrayLike],
    actions: ArrayLike,
    subsets: ArrayLike | Sequence[ArrayLike],
    *,
    seeds: Sequence[int],
    config: BCConfig | None = None,
    action_low: ArrayLike | None = None,
    action_high: ArrayLike | None = None,
    progress: Callable[[int, int], None] | None = None,
    **overrides: Any,
) -> list[BCModel]:
    """Train the same ``K`` models as :func:`train_bc_ensemble`, one after another.

    Same arguments, data, seeds, minibatches and compiled per-model program,
    without ``vmap``: the reference for the ensemble trainer and its benchmark.
    ``progress`` is called as ``progress(steps_done_all_models, K * steps)``.
    """
    prep = _prepare(obs, actions, subsets, seeds, config, action_low, action_high, overrides)
    fns = _train_fns(prep.config, prep.untrained.act_dim)
    models = []
    total = len(prep.seeds) * prep.config.steps
    for k in range(len(prep.seeds)):
        offset = k * prep.config.steps
        idx, count, stats, key = prep.rows(k)
        (state,), (curve,) = _run_chunks(
            [lambda s, n, idx=idx, count=count, stats=stats: fns.run_one(
                s, idx, count, stats, prep.data, prep.targets, n)],
            [fns.init_one(key, prep.dummy)], prep.config,
            None if progress is None else lambda done, o=offset: progress(o + done, total))
        params = jax.tree_util.tree_map(np.asarray, fns.params_of(state.params))
        models.append(prep.model(k, params, curve))
    return models


def init_bc(
    obs_shapes: Mapping[str, Sequence[int]],
    act_dim: int,
    *,
    seed: int = 0,
    config: BCConfig | None = None,
    action_low: ArrayLike | None = None,
    action_high: ArrayLike | None = None,
) -> BCModel:
    """An untrained model with freshly initialised parameters (shape checks, loader tests).

    Args:
        obs_shapes: ``{"state": (D,)}``, ``{"pixels": (H, W, 3)}`` or both.
        act_dim: Action dimension A.
        seed: Initialisation seed (the same as :func:`train_bc_ensemble` uses for its init).
        config: Architecture (default: ``mlp`` for state, ``cnn`` with pixels).
        action_low: ``(A,)`` lower action bounds (default -1).
        action_high: ``(A,)`` upper action bounds (default +1).

    Returns:
        A :class:`BCModel` with zero-mean, unit-std state normalization.

    Raises:
        InvalidSpecError: On unknown observation keys or an arch that cannot read them.
    """
    shapes = {k: tuple(int(d) for d in v) for k, v in obs_shapes.items()}
    modes = {("state",): "state", ("pixels",): "pixels", ("pixels", "state"): "state+pixels"}
    obs_mode = modes.get(tuple(sorted(shapes)))
    if obs_mode is None:
        raise InvalidSpecError(BAD_OBS.format(got=f"observation keys {sorted(shapes)}"))
    config = config or BCConfig(arch="cnn" if "pixels" in shapes else "mlp")
    if (config.arch == "cnn") != ("pixels" in shapes):
        raise InvalidSpecError(BAD_ARCH.format(arch=config.arch, obs_mode=obs_mode,
                                               fix="arch='cnn'" if "pixels" in shapes else
                                               "arch='mlp'"))
    _check_state_indices(config, shapes["state"][0] if "state" in shapes else None)
    dummy = {k: jnp.zeros((1, *s), jnp.uint8 if k == "pixels" else jnp.float32)
             for k, s in shapes.items()}
    fns = _train_fns(config, int(act_dim))
    state = fns.init_one(jax.random.PRNGKey(seed), dummy)
    low, high = _action_bounds(action_low, action_high, int(act_dim))
    d = shapes.get("state")
    params = jax.tree_util.tree_map(np.asarray, fns.params_of(state.params))
    return BCModel(
        config, params, obs_mode, shapes, int(act_dim),
        low, high, None if d is None else np.zeros(d, np.float32),
        None if d is None else np.ones(d, np.float32), {"seed": seed, "steps": 0},
    )


def bc_loss(model: BCModel, obs: ArrayLike | Mapping[str, ArrayLike], actions: ArrayLike) -> float:
    """Mean squared error of ``model`` on ``(obs, actions)``, in rescaled [-1, 1] action units."""
    pred = model.predict(obs)
    scale = 0.5 * (model.action_high - model.action_low)
    target = np.clip((np.asarray(actions, np.float32) - model.action_low) / scale - 1.0, -1, 1)
    return float(np.mean(((pred - model.action_low) / scale - 1.0 - target) ** 2))


# ---- input preparation -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Prepared:
    untrained: BCModel  # config, observation shapes, action bounds; no parameters yet
    data: dict[str, jax.Array]
    targets: jax.Array  # (N, A) in [-1, 1]
    # Per-model inputs stay NumPy arrays until a group's rows are taken (eager JAX indexing
    # costs ~0.5 ms a call: most of a small ensemble's fixed cost per training call).
    idx: NDArray[np.int32]  # (K, N): subset rows first, padded with 0
    count: NDArray[np.int32]  # (K,)
    stats: dict[str, NDArray[np.float32]]  # mean/std (K, D) or empty
    seeds: tuple[int, ...]
    keys: NDArray[np.uint32]  # (K, 2) PRNG keys
    dummy: dict[str, jax.Array]
    clipped_fraction: float

    @property
    def config(self) -> BCConfig:
        return self.untrained.config

    def rows(self, rows: Any) -> tuple[jax.Array, jax.Array, dict[str, jax.Array], jax.Array]:
        """``(idx, count, stats, keys)`` of the models ``rows`` (an index array, or one index
        for a single model's unbatched arrays), as device arrays."""
        return (jnp.asarray(self.idx[rows]), jnp.asarray(self.count[rows]),
                {n: jnp.asarray(v[rows]) for n, v in self.stats.items()},
                jnp.asarray(self.keys[rows]))

    def model(self, k: int, params: Any, loss_curve: NDArray[np.floating]) -> BCModel:
        stats = {n: v[k].copy() for n, v in self.stats.items()}
        n_pts = min(len(loss_curve), 50)
        curve = [float(np.mean(c)) for c in np.array_split(loss_curve, n_pts)]
        info = {
            "seed": self.seeds[k], "steps": self.config.steps, "n_train": int(self.count[k]),
            "final_loss": float(np.mean(loss_curve[-max(1, len(loss_curve) // 20):])),
            "loss_curve": curve, "clipped_action_fraction": self.clipped_fraction,
        }
        return dataclasses.replace(self.untrained, params=params, obs_mean=stats.get("mean"),
                                   obs_std=stats.get("std"), train_info=info)


def _prepare(obs: Any, actions: Any, subsets: Any, seeds: Sequence[int], config: BCConfig | None,
             action_low: Any, action_high: Any, overrides: Mapping[str, Any]) -> _Prepared:
    data, obs_mode = _obs_arrays(obs)
    n = len(next(iter(data.values())))
    try:
        config = dataclasses.replace(config or BCConfig(**(
            {"arch": "cnn"} if "pixels" in data and "arch" not in overrides else {})), **overrides)
    except TypeError as e:
        raise InvalidSpecError(f"unknown BC option: {e}") from e
    if config.arch == "mlp" and "pixels" in data:
        raise InvalidSpecError(BAD_ARCH.format(arch="mlp", obs_mode=obs_mode, fix="arch='cnn'"))
    if config.arch == "cnn" and "pixels" not in data:
        raise InvalidSpecError(BAD_ARCH.format(arch="cnn", obs_mode=obs_mode, fix="arch='mlp'"))
    if config.arch == "cnn":
        check_image_size(config, min(data["pixels"].shape[1:3]))
    _check_state_indices(config, data["state"].shape[1] if "state" in data else None)
    act = np.asarray(actions, dtype=np.float32)
    if act.ndim != 2 or len(act) != n or not np.all(np.isfinite(act)):
        raise InvalidSpecError(BAD_ACTIONS.format(n=n, got=f"shape {act.shape}"))
    a_dim = act.shape[1]
    low, high = _action_bounds(action_low, action_high, a_dim)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        raise InvalidSpecError(f"action bounds must be finite with high > low, got low={low}, "
                               f"high={high}")
    scaled = 2.0 * (act - low) / (high - low) - 1.0
    clipped = float(np.mean(np.abs(scaled) > 1.0 + 1e-6))
    idx_rows = _subset_indices(subsets, n)
    k = len(idx_rows)
    seeds_t = tuple(int(s) for s in seeds) if np.ndim(seeds) == 1 else ()
    if len(seeds_t) != k or any(s < 0 for s in seeds_t):
        raise InvalidSpecError(BAD_SEEDS.format(k=k, seeds=seeds))
    idx = np.zeros((k, n), np.int32)
    for i, rows in enumerate(idx_rows):
        idx[i, : len(rows)] = rows
    stats: dict[str, NDArray[np.float32]] = {}
    if "state" in data:
        st = data["state"].astype(np.float64)
        mean = np.stack([st[r].mean(0) for r in idx_rows])
        std = np.stack([st[r].std(0) for r in idx_rows])
        std = np.where(std < STD_FLOOR, 1.0, std)
        stats = {"mean": mean.astype(np.float32), "std": std.astype(np.float32)}
    keys = np.stack([_prng_key(s) for s in seeds_t])
    shapes = {name: tuple(int(d) for d in a.shape[1:]) for name, a in data.items()}
    dummy = {name: jnp.zeros((1, *s), a.dtype) for (name, a), s in zip(data.items(),
                                                                      shapes.values(), strict=True)}
    return _Prepared(
        untrained=BCModel(config, None, obs_mode, shapes, a_dim, low, high, None, None),
        data={name: jnp.asarray(a) for name, a in data.items()},
        targets=jnp.asarray(np.clip(scaled, -1.0, 1.0)), idx=idx,
        count=np.asarray([len(r) for r in idx_rows], np.int32), stats=stats, seeds=seeds_t,
        keys=keys, dummy=dummy, clipped_fraction=clipped,
    )


@functools.lru_cache(maxsize=4096)
def _prng_key(seed: int) -> NDArray[np.uint32]:
    """``jax.random.PRNGKey(seed)`` as a NumPy array (cached: an eager call costs ~0.2 ms, and
    scaling runs train the same seeds again and again)."""
    key = np.asarray(jax.random.PRNGKey(seed))
    key.setflags(write=False)
    return key


def _action_bounds(low: Any, high: Any, act_dim: int) -> tuple[NDArray[np.float32], ...]:
    """``(A,) float32`` lower and upper action bounds (defaults -1 and +1, scalars broadcast)."""
    return tuple(np.broadcast_to(np.asarray(d if v is None else v, np.float32), (act_dim,)).copy()
                 for v, d in ((low, -1.0), (high, 1.0)))


def _check_state_indices(config: BCConfig, state_dim: int | None) -> None:
    if config.state_indices is None:
        return
    if state_dim is None:
        raise InvalidSpecError("BC state_indices select state features, but the observations "
                               "have no state; drop state_indices or pass state+pixels")
    bad = [i for i in config.state_indices if i >= state_dim]
    if bad:
        raise InvalidSpecError(f"BC state_indices {bad} are out of range for a state of "
                               f"{state_dim} features (valid: 0..{state_dim - 1})")


def _obs_arrays(obs: Any) -> tuple[dict[str, NDArray[Any]], str]:
    if isinstance(obs, Mapping):
        if set(obs) != {"state", "pixels"}:
            raise InvalidSpecError(BAD_OBS.format(got=f"dict with keys {sorted(obs)}"))
        state = np.asarray(obs["state"], np.float32)
        pixels = np.asarray(obs["pixels"])
        ok = (state.ndim == 2 and pixels.ndim == 4 and pixels.shape[-1] == 3
              and pixels.dtype == np.uint8 and len(state) == len(pixels) and len(state) > 0)
        if not ok:
            raise InvalidSpecError(BAD_OBS.format(
                got=f"state {state.shape}, pixels {pixels.shape} {pixels.dtype}"))
        return {"state": state, "pixels": pixels}, "state+pixels"
    a = np.asarray(obs)
    if a.ndim == 4 and a.dtype == np.uint8 and a.shape[-1] == 3 and len(a) > 0:
        return {"pixels": a}, "pixels"
    if a.ndim == 2 and len(a) > 0 and np.issubdtype(a.dtype, np.number):
        a = a.astype(np.float32)
        if not np.all(np.isfinite(a)):
            raise InvalidSpecError(BAD_OBS.format(got="a state array with NaN or inf"))
        return {"state": a}, "state"
    raise InvalidSpecError(BAD_OBS.format(got=f"shape {a.shape} dtype {a.dtype}"))


def _subset_indices(subsets: Any, n: int) -> list[NDArray[np.int64]]:
    if isinstance(subsets, np.ndarray) and subsets.dtype == np.bool_:
        if subsets.ndim != 2 or subsets.shape[1] != n:
            raise InvalidSpecError(BAD_SUBSETS.format(n=n, why=f"got mask shape {subsets.shape}"))
        rows = [np.flatnonzero(m) for m in subsets]
    else:
        rows = [np.asarray(r).reshape(-1) for r in subsets]
        for r in rows:
            if r.size and (not np.issubdtype(r.dtype, np.integer) or r.min() < 0 or r.max() >= n):
                raise InvalidSpecError(BAD_SUBSETS.format(
                    n=n, why=f"got indices of dtype {r.dtype} in [{r.min()}, {r.max()}]"))
    if not rows:
        raise InvalidSpecError(BAD_SUBSETS.format(n=n, why="got no subsets"))
    empty = [i for i, r in enumerate(rows) if r.size == 0]
    if empty:
        raise InvalidSpecError(BAD_SUBSETS.format(n=n, why=f"subsets {empty} are empty"))
    return [r.astype(np.int64) for r in rows]


def _run_chunks(runs: Sequence[Callable[[Any, int], tuple[Any, jax.Array]]], states: Sequence[Any],
                config: BCConfig, on_chunk: Callable[[int], None] | None
                ) -> tuple[list[Any], list[NDArray[np.float32]]]:
    """Take ``config.steps`` gradient steps as compiled chunks ``runs[g](states[g], n_steps)``.

    Each chunk runs every group at once, one thread per group when there are several:
    XLA:CPU executes calls from different threads concurrently, while one vmapped program
    of small operations keeps about one core busy (measured in
    ``benchmarks/bench_bc_vmap.py``).

    Returns:
        Per group, the final state and the per-step losses, chunks joined on the last
        (step) axis; ``on_chunk(steps_done)`` is called after each chunk, from this thread.
    """
    states = list(states)
    losses: list[list[NDArray[np.float32]]] = [[] for _ in runs]

    def one(g: int, n_steps: int) -> None:
        states[g], loss = runs[g](states[g], n_steps)
        losses[g].append(np.asarray(loss))  # waits for the result, in this group's thread

    with ThreadPoolExecutor(len(runs), thread_name_prefix="bc-group") as pool:
        for n_steps, done in _chunks(config):
            if len(runs) == 1:
                one(0, n_steps)
            else:
                for f in [pool.submit(one, g, n_steps) for g in range(len(runs))]:
                    f.result()
            if on_chunk is not None:
                on_chunk(done)
    return states, [np.concatenate(g, axis=-1) for g in losses]


def _chunks(config: BCConfig) -> list[tuple[int, int]]:
    size = config.chunk_steps or config.steps
    out, done = [], 0
    while done < config.steps:
        n = min(size, config.steps - done)
        done += n
        out.append((n, done))
    return out


# ---- compiled functions ----------------------------------------------------------------------


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


@dataclass(frozen=True)
class _TrainFns:
    init_one: Callable[..., TrainState]
    init_many: Callable[..., TrainState]
    run_one: Callable[..., tuple[TrainState, jax.Array]]
    run_many: Callable[..., tuple[TrainState, jax.Array]]
    params_of: Callable[[Any], Any]
    """The Flax parameter tree of a :class:`TrainState`'s ``params`` (any leading axes)."""


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


def _optimizer(cfg: BCConfig) -> optax.GradientTransformation:
    lr: Any = cfg.lr if cfg.lr_schedule == "constant" else \
        optax.cosine_decay_schedule(cfg.lr, cfg.steps)
    opt = optax.adamw(lr, weight_decay=cfg.weight_decay) if cfg.weight_decay else \
        optax.adam(lr)
    if cfg.max_grad_norm is not None:
        opt = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), opt)
    return opt


@functools.lru_cache(maxsize=32)
def _train_fns(cfg: BCConfig, act_dim: int) -> _TrainFns:
    net = PolicyNet(cfg, act_dim)
    tx = _optimizer(cfg)
    # MLPs train on bias-augmented layer matrices (mlp_forward); the optimizer sees them as
    # its parameters: Adam, AdamW and the global-norm clip are elementwise or sum over all
    # entries, so the updates are the kernel's and bias's. CNNs train on Flax's tree.
    mlp = cfg.arch == "mlp"

    def init(key: jax.Array, dummy: Mapping[str, jax.Array]) -> TrainState:
        k_init, k_train = jax.random.split(key)
        params = net.init(k_init, dummy.get("state"), dummy.get("pixels"))["params"]
        if mlp:
            params = augment_dense(params)
        return TrainState(params, tx.init(params), k_train, jnp.zeros((), jnp.int32))

    def loss_fn(params: Any, stats: Any, obs: Any, target: jax.Array) -> jax.Array:
        pred = mlp_forward(params, stats, obs["state"], cfg) if mlp else \
            forward(net, params, stats, obs)
        return jnp.mean((pred - target) ** 2)

    def update(params: Any, opt_state: Any, stats: Any, obs: Mapping[str, jax.Array],
               target: jax.Array) -> tuple[Any, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, stats, obs, target)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def step(st: TrainState, idx: jax.Array, count: jax.Array, stats: Any,
             data: Mapping[str, jax.Array], targets: jax.Array) -> tuple[TrainState, jax.Array]:
        key, k_batch, k_aug = jax.random.split(st.key, 3)
        rows = idx[jax.random.randint(k_batch, (cfg.batch_size,), 0, count)]
        obs = {name: a[rows] for name, a in data.items()}
        if cfg.augment and "pixels" in obs:
            obs["pixels"] = random_shift(k_aug, obs["pixels"], cfg.shift_pad)
        if cfg.color_jitter and "pixels" in obs:
            obs["pixels"] = color_jitter(jax.random.fold_in(k_aug, 1), obs["pixels"],
                                         cfg.color_jitter)
        params, opt_state, loss = update(st.params, st.opt_state, stats, obs, targets[rows])
        return TrainState(params, opt_state, key, st.step + 1), loss

    def run(state: TrainState, idx: jax.Array, count: jax.Array, stats: Any,
            data: Mapping[str, jax.Array], targets: jax.Array, n_steps: int
            ) -> tuple[TrainState, jax.Array]:
        # The MLP step's only randomness is its minibatch. The key chain (the same splits as
        # `step`) and the rows of all n_steps minibatches are drawn up front, vectorized over
        # the steps: XLA:CPU lowers each threefry call to a small while loop, so drawing them
        # inside the training scan ran four nested loops per step (most of the step's
        # per-operation overhead for small nets). Same random stream, same results as `step`.
        def next_key(key: jax.Array, _: None) -> tuple[jax.Array, jax.Array]:
            key, k_batch, _k_aug = split_key(key, 3)
            return key, k_batch

        key, k_batches = jax.lax.scan(next_key, state.key, None, length=n_steps)
        draws = jax.vmap(lambda k: jax.random.randint(k, (cfg.batch_size,), 0, count))(k_batches)
        all_rows = idx[draws]  # (n_steps, batch_size)

        def body(st: TrainState, rows: jax.Array) -> tuple[TrainState, jax.Array]:
            params, opt_state, loss = update(st.params, st.opt_state, stats,
                                             {name: a[rows] for name, a in data.items()},
                                             targets[rows])
            return TrainState(params, opt_state, st.key, st.step + 1), loss

        state, losses = jax.lax.scan(body, state, all_rows)
        return TrainState(state.params, state.opt_state, key, state.step), losses

    many_axes = (0, 0, 0, 0, None, None)
    if cfg.arch == "cnn":
        # XLA:CPU runs convolutions inside a while loop (lax.scan, even unrolled) 10-15x
        # slower than the same program at the top level (measured: 830 vs 56 ms per step of
        # the 84x84 CNN at batch 64), so CNN steps are one jitted call each, looped in Python.
        # Same per-step program, same random stream: results equal the scan's.
        return _TrainFns(
            init_one=jax.jit(init),
            init_many=jax.jit(jax.vmap(init, in_axes=(0, None))),
            run_one=_python_loop(jax.jit(step)),
            run_many=_python_loop(jax.jit(jax.vmap(step, in_axes=many_axes)), axis=1),
            params_of=lambda params: params,
        )

    def run_many(state: TrainState, idx: jax.Array, count: jax.Array, stats: Any,
                 data: Mapping[str, jax.Array], targets: jax.Array, n_steps: int
                 ) -> tuple[TrainState, jax.Array]:
        many = jax.vmap(functools.partial(run, n_steps=n_steps), in_axes=many_axes)
        return many(state, idx, count, stats, data, targets)

    return _TrainFns(
        init_one=jax.jit(init),
        init_many=jax.jit(jax.vmap(init, in_axes=(0, None))),
        run_one=jax.jit(run, static_argnums=6),
        run_many=jax.jit(run_many, static_argnums=6),
        params_of=flax_dense,
    )


def _python_loop(step: Callable[..., tuple[TrainState, jax.Array]], axis: int = 0
                 ) -> Callable[..., tuple[TrainState, jax.Array]]:
    """``run(state, *args, n_steps)`` calling the jitted ``step`` ``n_steps`` times.

    Returns the final state and the per-step losses stacked on ``axis`` (``(n_steps,)``
    for one model, ``(K, n_steps)`` for a vmapped step), like ``lax.scan`` would.
    """

    def run(state: TrainState, *args: Any) -> tuple[TrainState, jax.Array]:
        *rest, n_steps = args
        losses = []
        for _ in range(n_steps):
            state, loss = step(state, *rest)
            losses.append(loss)
        return state, jnp.stack(losses, axis=axis)

    return run
