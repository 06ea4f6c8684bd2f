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

Ceiling: each trainer's arithmetic rate (GFLOP/s: 3x the forward matmul FLOPs
per sample, the usual forward + backward estimate, times batch, steps and K)
is printed next to this machine's peak, measured in the same run as the best
rate of a large XLA matmul, and next to the ceiling: the best rate of the
``K x (batch x width @ width x width)`` batched matmul of the net's widest layer
("of ceiling"; the goal for the vmapped trainer is >= 80%). The ceiling is measured after
each timed call of the vmapped trainer (alternating, so load from others on a shared machine
slows both alike) and the best of each is compared; "(CPU time)" is the same fraction per CPU
second of this process (all threads), steadier than wall time when other processes compete for
the cores. No trainer can beat the sequential one by more than peak / sequential rate: when
that bound is below a speed-up goal, the goal is out of reach on this machine whatever the
trainer does.

Usage::

    python benchmarks/bench_bc_vmap.py            # K=8, N=2000, D=20, A=5, two net sizes
    python benchmarks/bench_bc_vmap.py --hidden 256,256 --batch-size 256 --steps 1000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
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
        v_first, v_best, v_cpu, v_models = _time(
            train_bc_ensemble, args.repeats,
            between=lambda c=ceilings, shape=layer_shape: c.append(_matmul_rates(shape)),
            threads=args.threads, **kw)
        s_first, s_best, s_cpu, s_models = _time(train_bc_sequential, args.repeats, **kw)
        rows = [("vmapped", v_first, v_best, v_cpu), ("sequential", s_first, s_best, s_cpu)]
        if not args.no_per_step:
            p_first, p_best, p_cpu, _ = _time(train_bc_sequential, max(1, args.repeats - 1),
                                              chunk_steps=1, **kw)
            rows.append(("per-step loop", p_first, p_best, p_cpu))
        gflop = _train_gflop(args.obs_dim, hidden, args.act_dim, bs, args.steps, args.k)
        # The ceiling is measured between the vmapped trainer's timed calls (alternating, so a
        # busy shared machine slows both alike); best of each, per wall and per CPU second.
        layer = max(c[0] for c in ceilings)
        layer_cpu = max(c[1] for c in ceilings)
        peak = max(peak, layer)  # a small product faster than "peak": peak was measured under load
        best_rate = layer
        print(f"  {'trainer':<14} {'incl. compile [s]':>18} {'excl. compile [s]':>18} "
              f"{'GFLOP/s':>8} {'of peak':>8} {'of ceiling':>11} {'(CPU time)':>11}")
        for name, first, best, cpu in rows:
            print(f"  {name:<14} {first:>18.2f} {best:>18.2f} {gflop / best:>8.0f} "
                  f"{gflop / best / peak:>8.0%} {gflop / best / best_rate:>11.0%} "
                  f"{gflop / cpu / layer_cpu:>11.0%}")
        for name, first, best, _ in rows[1:]:
            print(f"  ratio {name} / vmapped: excl. compile {best / v_best:.2f}x, "
                  f"incl. compile {first / v_first:.2f}x")
        print(f"  ceiling: the K x ({bs}x{hidden[-1]} @ {hidden[-1]}x{hidden[-1]}) products "
              f"of this net run at {layer:.0f} GFLOP/s at best ({layer_cpu:.0f} per CPU second; "
              f"best of {len(ceilings)}, alternating with the vmapped trainer), so no trainer "
              f"can be more than {best_rate / (gflop / s_best):.1f}x faster than the sequential "
              f"one here")
        diff = max(float(np.abs(a.predict(obs) - b.predict(obs)).max())
                   for a, b in zip(v_models, s_models, strict=True))
        loss = np.mean([m.train_info["final_loss"] for m in v_models])
        print(f"  max |action(vmapped) - action(sequential)| = {diff:.2e}; "
              f"mean final training MSE {loss:.2e}")


if __name__ == "__main__":
    main()
