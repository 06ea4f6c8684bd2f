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
:mod:`robogen.policies.bc_net` and are re-exported here; this module trains them, with the
pure JAX pieces in :mod:`robogen.scaling.bc_kernels` and the compiled training programs in
:mod:`robogen.scaling.bc_step` (their names are re-exported here too).

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
    check_image_size,
    min_image_size,
)
from robogen.scaling.bc_kernels import (  # noqa: F401 - re-exported (tests, benchmarks)
    _unrolled_split_agrees,
    augment_dense,
    color_jitter,
    flax_dense,
    mlp_forward,
    random_shift,
    split_key,
)
from robogen.scaling.bc_step import TrainState, _optimizer, _train_fns  # noqa: F401

__all__ = [
    "ARCHS", "BAD_ACTIONS", "BAD_ARCH", "BAD_OBS", "BAD_SEEDS", "BAD_SUBSETS", "BCConfig",
    "BCModel", "NORM_CLIP", "STD_FLOOR", "TrainState", "augment_dense", "bc_loss",
    "check_image_size", "color_jitter", "flax_dense", "init_bc", "min_image_size",
    "mlp_forward", "model_groups", "random_shift", "split_key", "train_bc_ensemble",
    "train_bc_sequential",
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
    cnn_default = "pixels" in data and "arch" not in overrides
    default: dict[str, Any] = {"arch": "cnn"} if cnn_default else {}
    try:
        config = dataclasses.replace(config or BCConfig(**default), **overrides)
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
