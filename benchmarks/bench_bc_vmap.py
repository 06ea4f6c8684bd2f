"""Time K behaviour-cloning models trained at once (``jax.vmap``) against one after another.

Data: synthetic Reach-like demonstrations, ``N`` state observations of
dimension ``D`` (standard normal) and actions ``tanh(W obs)`` of dimension
``A``. Each of the ``K`` models trains on its own random half of the rows with
its own seed, for the same number of steps and batch size.

Three trainers, all on the CPU, same data, seeds and minibatches:

* ``vmapped``: :func:`robogen.scaling.bc.train_bc_ensemble`, one compiled
  ``lax.scan`` over the steps, ``vmap``-ed over the models of a group, one group
  per CPU core run concurrently from threads (K=8 on 2 cores: two groups of 4);
  ``--threads 1`` runs all K in one vmapped program, as before.
* ``sequential``: :func:`robogen.scaling.bc.train_bc_sequential`, the same
  compiled per-model scan run K times.
* ``per-step loop``: ``train_bc_sequential`` with ``chunk_steps=1``: one
  jitted call per gradient step from Python, like a hand-written training loop.

"incl. compile" is the first call (tracing + XLA compile + run); "excl. compile"
is the best of ``--repeats`` further calls. Ratios are sequential time over
vmapped time (> 1: vmap is faster).

Ceilings: each trainer's arithmetic rate (GFLOP/s: 3x the forward matmul FLOPs
per sample, the usual forward + backward estimate, times batch, steps and K) is
printed next to this machine's peak (the best rate of a large XLA matmul) and two ceilings:

* "of net" (the goal: the vmapped trainer >= 80%): the time of the net's own matmuls run
  alone over time of the trainer. A compiled loop of the same steps, in the trainer's groups
  and threads, holds every product a training step needs at the net's shapes (each layer's
  forward, weight-gradient and input-gradient products, chained like backpropagation) and
  nothing else (:func:`_net_matmul_seconds`): what a trainer with free elementwise work,
  optimizer and data gathering would take. It counts the small layers (e.g. 20 -> 256 and
  256 -> 5) at the rate XLA runs their shapes. The MLP trainer's products are one row wider
  (its bias rides in the matmul: :func:`robogen.scaling.bc.mlp_forward`); GFLOP/s counts the
  net's own FLOPs, so the trainer is credited a little less than it computes.
* "of layer" (stricter, the ceiling of earlier runs): the best rate of the widest layer's
  ``K x (batch x width @ width x width)`` batched matmul, one call at a time, as if every
  product of the net ran at that rate. Measured in-loop (as the trainer runs) that product is
  ~10% faster than one call at a time (2026-12-02: ~205 vs 178-198 GFLOP/s), so this column
  reads high by about that much.

Both are measured after each timed call of the vmapped trainer (alternating, so load from
others on a shared machine slows all alike) and the best of each is compared ("of net": one
call per timed trainer call, so both sides get as many samples, the faster of its two
weight-gradient programs chosen beforehand; more samples on one side only would favour
it); "(CPU)" is "of net" per CPU second of this process (all threads), steadier than wall
time when other processes compete for the cores. No trainer can beat the sequential one by more than
sequential time / net time: when that bound is below a speed-up goal, the goal is out of
reach on this machine whatever the trainer does.

Usage::

    python benchmarks/bench_bc_vmap.py            # K=8, N=2000, D=20, A=5, two net sizes
    python benchmarks/bench_bc_vmap.py --hidden 256,256 --batch-size 256 --steps 1000
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from robogen.scaling.bc import train_bc_ensemble, train_bc_sequential  # noqa: E402


def _data(n: int, d: int, a: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, d)).astype(np.float32)
    w = rng.normal(size=(d, a)) / np.sqrt(d)
    actions = np.tanh(1.5 * obs @ w).astype(np.float32)
    masks = np.zeros((k, n), bool)
    for i in range(k):
        masks[i, rng.permutation(n)[: n // 2]] = True
    return obs, actions, masks


def _time(fn, repeats: int, between=None, **kw) -> tuple[float, float, float, list]:
    """First call's wall time, best wall and best CPU time [s] of ``repeats`` more calls, and
    the models; ``between()`` (if given) runs after each timed call, so that a reference
    measured there alternates with the trainer on a shared machine."""
    t0 = time.perf_counter()
    models = fn(**kw)
    first = time.perf_counter() - t0
    best = best_cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        models = fn(**kw)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
        if between is not None:
            between()
    return first, best, best_cpu, models


def _matmul_rates(shape: tuple[int, int, int, int] = (1, 2048, 2048, 2048),
                  repeats: int = 5) -> tuple[float, float]:
    """Best GFLOP/s of XLA's float32 ``(k, m, n) @ (k, n, p)`` for ``shape = (k, m, n, p)``,
    per wall-clock second and per CPU second (all threads of this process).

    The default (one 2048^3 product) is this machine's peak; a training run's own
    layer shapes (``(K, batch, width, width)``) give the best any trainer reaches
    with matrices that small.
    """
    import jax
    import jax.numpy as jnp

    k, m, n, p = shape
    a, b = jnp.ones((k, m, n), jnp.float32), jnp.ones((k, n, p), jnp.float32)
    f = jax.jit(lambda x, y: jnp.einsum("kmn,knp->kmp", x, y))
    f(a, b).block_until_ready()
    calls = max(1, int(2e9 // (2 * k * m * n * p)))  # ~2 GFLOP per timing
    best = best_cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            out = f(a, b)
        out.block_until_ready()
        best = min(best, (time.perf_counter() - t0) / calls)
        best_cpu = min(best_cpu, (time.process_time() - c0) / calls)
    flop = 2 * k * m * n * p
    return flop / best / 1e9, flop / best_cpu / 1e9


@functools.lru_cache(maxsize=8)
def _net_matmul_program(obs_dim: int, hidden: tuple[int, ...], act_dim: int, batch: int,
                        steps: int, k: int, threads: int | None) -> Callable[[], None]:
    """The net's matmuls alone, compiled and warmed up: a call runs them once, as the trainer
    runs its model groups, and returns when all are done. The ceiling of any trainer.

    One compiled ``lax.scan`` of ``steps`` steps per model group, the groups run
    concurrently from threads exactly as :func:`train_bc_ensemble` runs them
    (:func:`robogen.scaling.bc.model_groups`). A step holds every product a training
    step of the MLP needs, at its shapes, for the group's models: per layer the forward
    product ``(batch x in) @ (in x out)``, the weight gradient ``(in x batch) @ (batch x out)``
    and, past the first layer, the input gradient ``(batch x out) @ (out x in)``, chained
    through the activations like backpropagation, and nothing else but ``W -= 1e-9 dW`` (so
    no product is loop-invariant; the values stay far from denormals). The weight gradient
    can run two ways (autodiff's transposed-input product, or an explicit transpose then a
    plain product); both are timed here (best of 3 calls each, not counted as samples) and
    the faster program is the one returned.
    """
    import jax
    import jax.numpy as jnp

    from robogen.policies.bc_net import transposed_matmul
    from robogen.scaling.bc import _default_threads, model_groups

    widths = (obs_dim, *hidden, act_dim)
    groups = model_groups(k, _default_threads() if threads is None else threads)
    m = len(groups[0])

    def program(transpose_first: bool):
        def weight_grad(a, g):  # (m, batch, in), (m, batch, out) -> (m, in, out)
            if transpose_first:  # as the trainer's Dense layers compute it on XLA:CPU
                return jax.vmap(transposed_matmul)(a, g)
            return jnp.einsum("kbi,kbo->kio", a, g)

        def step(ws, x):
            acts = [x]
            for w in ws:
                acts.append(jnp.einsum("kbi,kio->kbo", acts[-1], w))
            g, new = acts[-1], list(ws)
            for i in range(len(ws) - 1, -1, -1):
                new[i] = ws[i] - 1e-9 * weight_grad(acts[i], g)
                if i:
                    g = jnp.einsum("kbo,kio->kbi", g, ws[i])
            return tuple(new), None

        return jax.jit(lambda ws, x: jax.lax.scan(lambda c, _: step(c, x), ws, None,
                                                  length=steps)[0])

    ws = tuple(jnp.full((m, a, b), 0.01, jnp.float32)
               for a, b in zip(widths[:-1], widths[1:], strict=True))
    x = jnp.ones((m, batch, obs_dim), jnp.float32)
    pool = ThreadPoolExecutor(len(groups))

    def runner(run) -> Callable[[], None]:
        def call() -> None:
            list(pool.map(lambda _: jax.block_until_ready(run(ws, x)), groups))
        return call

    calls = [runner(program(t)) for t in (False, True)]
    best = []
    for call in calls:
        call()  # compile
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        best.append(min(times))
    return calls[int(np.argmin(best))]


def _net_matmul_seconds(obs_dim: int, hidden: tuple[int, ...], act_dim: int, batch: int,
                        steps: int, k: int, threads: int | None) -> tuple[float, float]:
    """Wall and CPU time [s] of one call of :func:`_net_matmul_program` (one sample: taken
    once after each timed call of the vmapped trainer, so both sides get as many samples)."""
    call = _net_matmul_program(obs_dim, hidden, act_dim, batch, steps, k, threads)
    t0, c0 = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - t0, time.process_time() - c0


def _peak_gflops(shape: tuple[int, int, int, int] = (1, 2048, 2048, 2048),
                 repeats: int = 5) -> float:
    """Best wall-clock GFLOP/s of :func:`_matmul_rates` (the default shape: this machine's peak)."""
    return _matmul_rates(shape, repeats)[0]


def _train_gflop(obs_dim: int, hidden: tuple[int, ...], act_dim: int, batch: int, steps: int,
                 k: int) -> float:
    """Matmul GFLOP of training k MLPs: 3 x forward (forward + backward), per sample."""
    widths = (obs_dim, *hidden, act_dim)
    forward = sum(2 * a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    return 3 * forward * batch * steps * k / 1e9


def main() -> None:
    """Parse arguments, run the three trainers per network size, print times and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=8, help="models trained together")
    ap.add_argument("--n", type=int, default=2000, help="dataset rows")
    ap.add_argument("--obs-dim", type=int, default=20)
    ap.add_argument("--act-dim", type=int, default=5)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=2, help="timed calls after the first")
    ap.add_argument("--hidden", action="append", default=None,
                    help="MLP widths, e.g. 256,256 (repeatable; default: 256,256 and 64,64)")
    ap.add_argument("--batch-size", type=int, action="append", default=None,
                    help="batch size per --hidden (default 256 and 64)")
    ap.add_argument("--no-per-step", action="store_true", help="skip the per-step loop")
    ap.add_argument("--threads", type=int, default=None,
                    help="concurrent model groups of the vmapped trainer (default: CPU cores)")
    args = ap.parse_args()
    hiddens = args.hidden or ["256,256", "64,64"]
    batches = args.batch_size or [256, 64][: len(hiddens)] or [256]
    if len(batches) < len(hiddens):
        batches = batches + [batches[-1]] * (len(hiddens) - len(batches))

    obs, actions, masks = _data(args.n, args.obs_dim, args.act_dim, args.k)
    seeds = list(range(args.k))
    peak = _peak_gflops()
    print(f"K={args.k} models, N={args.n}, obs dim {args.obs_dim}, action dim {args.act_dim}, "
          f"{args.steps} steps each, subsets of {args.n // 2} rows; {os.cpu_count()} CPU(s); "
          f"peak matmul {peak:.0f} GFLOP/s")
    for hidden_s, bs in zip(hiddens, batches, strict=True):
        hidden = tuple(int(h) for h in hidden_s.split(","))
        kw = dict(obs=obs, actions=actions, subsets=masks, seeds=seeds, steps=args.steps,
                  batch_size=bs, hidden=hidden)
        print(f"\nMLP {hidden}, batch {bs}")
        layer_shape = (args.k, bs, hidden[-1], hidden[-1])
        ceilings: list[tuple[float, float]] = []
        net: list[tuple[float, float]] = []

        def between(shape=layer_shape, hidden=hidden, bs=bs, ceilings=ceilings,
                    net=net) -> None:
            ceilings.append(_matmul_rates(shape))
            net.append(_net_matmul_seconds(args.obs_dim, hidden, args.act_dim, bs, args.steps,
                                           args.k, args.threads))

        v_first, v_best, v_cpu, v_models = _time(
            train_bc_ensemble, args.repeats, between=between, threads=args.threads, **kw)
        s_first, s_best, s_cpu, s_models = _time(train_bc_sequential, args.repeats, **kw)
        rows = [("vmapped", v_first, v_best, v_cpu), ("sequential", s_first, s_best, s_cpu)]
        if not args.no_per_step:
            p_first, p_best, p_cpu, _ = _time(train_bc_sequential, max(1, args.repeats - 1),
                                              chunk_steps=1, **kw)
            rows.append(("per-step loop", p_first, p_best, p_cpu))
        gflop = _train_gflop(args.obs_dim, hidden, args.act_dim, bs, args.steps, args.k)
        # Both ceilings are measured between the vmapped trainer's timed calls (alternating,
        # so a busy shared machine slows them alike); best of each, per wall and CPU second.
        layer = max(c[0] for c in ceilings)
        net_s, net_cpu = min(t[0] for t in net), min(t[1] for t in net)
        peak = max(peak, layer)  # a small product faster than "peak": peak was measured under load
        print(f"  {'trainer':<14} {'incl. compile [s]':>18} {'excl. compile [s]':>18} "
              f"{'GFLOP/s':>8} {'of peak':>8} {'of layer':>9} {'of net':>7} {'(CPU)':>6}")
        for name, first, best, cpu in rows:
            print(f"  {name:<14} {first:>18.2f} {best:>18.3f} {gflop / best:>8.0f} "
                  f"{gflop / best / peak:>8.0%} {gflop / best / layer:>9.0%} "
                  f"{net_s / best:>7.0%} {net_cpu / cpu:>6.0%}")
        for name, first, best, _ in rows[1:]:
            print(f"  ratio {name} / vmapped: excl. compile {best / v_best:.2f}x, "
                  f"incl. compile {first / v_first:.2f}x")
        print(f"  of net (the goal's ceiling): the net's own matmuls alone, every layer's forward, "
              f"input- and weight-gradient products in the trainer's groups: {net_s:.3f} s "
              f"({gflop / net_s:.0f} GFLOP/s, {net_cpu:.2f} CPU s; best of {len(net)}, "
              f"alternating with the vmapped trainer), so no trainer can be more than "
              f"{s_best / net_s:.1f}x faster than the sequential one here")
        print(f"  of layer: the K x ({bs}x{hidden[-1]} @ {hidden[-1]}x{hidden[-1]}) product of the "
              f"widest layer, one call at a time: {layer:.0f} GFLOP/s at best (as if every "
              f"product of the net ran at the widest layer's rate)")
        diff = max(float(np.abs(a.predict(obs) - b.predict(obs)).max())
                   for a, b in zip(v_models, s_models, strict=True))
        loss = np.mean([m.train_info["final_loss"] for m in v_models])
        print(f"  max |action(vmapped) - action(sequential)| = {diff:.2e}; "
              f"mean final training MSE {loss:.2e}")


if __name__ == "__main__":
    main()
