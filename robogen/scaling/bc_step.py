"""The compiled training programs of behaviour cloning: one model's or K vmapped models'
initialization and ``n_steps`` Adam steps (``lax.scan`` for MLPs, a Python loop of jitted steps
for CNNs), cached per (config, action dimension).

Part of :mod:`robogen.scaling.bc` (which re-exports these names).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from robogen.policies.bc_net import BCConfig, PolicyNet, forward
from robogen.scaling.bc_kernels import (
    augment_dense,
    color_jitter,
    flax_dense,
    mlp_forward,
    random_shift,
    split_key,
)


@struct.dataclass
class TrainState:
    """Per-model training state carried through ``lax.scan`` (one leading axis per model when
    vmapped)."""

    params: Any
    opt_state: Any
    key: jax.Array
    step: jax.Array


@dataclass(frozen=True)
class _TrainFns:
    init_one: Callable[..., TrainState]
    init_many: Callable[..., TrainState]
    run_one: Callable[..., tuple[TrainState, jax.Array]]
    run_many: Callable[..., tuple[TrainState, jax.Array]]
    params_of: Callable[[Any], Any]
    """The Flax parameter tree of a :class:`TrainState`'s ``params`` (any leading axes)."""


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
