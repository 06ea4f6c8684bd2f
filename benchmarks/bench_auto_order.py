"""Order of a sequential round on Ray: widest interval first vs plan order (round-robin).

``robogen eval --episodes auto`` runs in rounds (``robogen.rollout.sequential``): every
condition that has not stopped gets its next batch, and a round's units go to the Ray
backend at once. This script measures whether handing out the units of the conditions whose
gap interval is widest relative to the target first (``widest``, the default) finishes
sooner than plan order (``plan``: conditions in manifest order, i.e. round-robin over
conditions by unit id), for the same answer: both orders must stop every condition at the
same episode counts (asserted), since decisions depend only on stored outcomes.

Whole runs on one embedded Ray cluster (started once, so its start-up is not timed),
alternating the two orders, ``--repeats`` runs each; the wall time covers policy loading
in the workers and every round, not the report.

Usage::

    RAY_AUTH_MODE=disabled MUJOCO_GL=egl python benchmarks/bench_auto_order.py --workers 2
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from robogen.configs import load_eval_config
from robogen.rollout.backends import make_backend, start_ray_cluster, stop_ray_cluster
from robogen.rollout.runner import backend_options, prepare
from robogen.rollout.sequential import run_sequential
from robogen.rollout.store import ResultStore
from robogen.stats import sequential_planner

POLICY = "python:tests/fixtures/sequential_policies.py:light_sensitive"
"""The Reach expert, blind under relighting: lighting episodes fail and run to the step
limit (~9x longer than the others), so units differ in length as with a real policy."""


def one_run(out: Path, order: str, workers: int, target: float) -> tuple[float, dict, int]:
    cfg = load_eval_config(
        None, env="robogen/Reach-v0", policy=POLICY,
        axes=["lighting", "physics", "object_pose", "embodiment"], severities=[0.5, 1.0],
        combined=True, episodes="auto", target_halfwidth=target, max_episodes=400,
        batch_size=8, seed=1, backend="ray", workers=workers, videos=0, out=out)
    manifest = prepare(cfg)
    backend = make_backend(manifest, backend_options(cfg), max_workers=workers,
                           keep_cluster=True)
    store = ResultStore.create(out, manifest)
    t0 = time.perf_counter()
    rounds = run_sequential(store, backend, sequential_planner(manifest), order=order)
    wall = time.perf_counter() - t0
    counts: dict[str, int] = {}
    for r in store.load_results():
        counts[r.condition] = counts.get(r.condition, 0) + 1
    return wall, counts, rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.1)
    args = ap.parse_args()
    start_ray_cluster(None, num_cpus=args.workers)
    walls: dict[str, list[float]] = {"widest": [], "plan": []}
    answer: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(args.repeats):
                orders = ("widest", "plan") if k % 2 == 0 else ("plan", "widest")
                for order in orders:
                    wall, counts, rounds = one_run(Path(tmp) / f"{order}-{k}", order,
                                                   args.workers, args.target)
                    walls[order].append(wall)
                    answer.setdefault(order, counts)
                    assert counts == answer[order], "a rerun stopped elsewhere"
                    print(f"run {k} {order:6s}: {wall:6.1f} s, {rounds} rounds, "
                          f"{sum(counts.values())} episodes", flush=True)
    finally:
        stop_ray_cluster()
    assert answer["widest"] == answer["plan"], "the order changed the stops"
    print(f"episodes per condition (both orders): {answer['widest']}")
    w, p = statistics.mean(walls["widest"]), statistics.mean(walls["plan"])
    print(f"mean wall: widest-first {w:.1f} s, plan order {p:.1f} s, "
          f"widest/plan = {w / p:.3f} ({args.repeats} runs each, {args.workers} workers)")


if __name__ == "__main__":
    main()
