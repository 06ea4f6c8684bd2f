"""Episodes/s and env steps/s of ``robogen eval``: the batched backend (N worlds) vs the
serial backend (and the Ray backend with ``--ray-workers K``).

The same evaluation (env, policy, axes, episodes, step limit, seed) runs on the serial
backend, on the Ray backend with K workers (an embedded cluster started and stopped by each
run: its start-up is counted) and on the batched backend at each ``--worlds`` N, in this
process, through
:func:`robogen.rollout.runner.run_evaluation` (the episodes stored, no report). Before the
timed runs one small untimed batched run loads the scene's kernels (a cold kernel cache
compiles them: tens of seconds on a CPU). The time of a run includes its start-up (policy
load, env, worlds). Rounds alternate the ways (the machine is noisy); the median round is
reported, with the ratio batched / serial. Every batched run's outcomes are compared with the
serial run's (same success and cause per episode).

``--pixels`` evaluates the shipped pixel policy instead: ``robogen/Push-v0`` with
``flax:push_pixels_plain`` (``state+pixels``, 84x84 ``front`` camera) on ``lighting@0.3``;
the batched backend draws its frames with MuJoCo Warp's batch renderer, the serial one with
OpenGL, so outcomes may differ (the renderers' frames differ, ``docs/benchmarks.md``).

GPU speed is not measured on a machine without a GPU: by default warp's CPU device runs the
worlds one after another. On a GPU: ``--sim-device cuda:0 --worlds 64,1024,8192,32768
--episodes 20000 --ray-workers <the machine's cores>`` (the issue's goals there: >= 1 M
perturbed state steps/s, >= 50k 84x84 policy frames/s with ``--pixels``, >= 100x the Ray
backend on the same machine's CPUs). Usage:

    python benchmarks/bench_batched_eval.py [--env gymnasium/Reacher-v5] [--episodes 200]
        [--worlds 64,400] [--rounds 1] [--sim-device cpu] [--max-steps N] [--safety]
        [--torch-threads T] [--pixels] [--ray-workers K]

``--torch-threads T`` adds, at each N, a batched run with torch on T intra-op threads (the
backend runs torch on one thread on the CPU device; torch's default is one per core): the
ratio shows what that choice buys. Every way starts with torch's thread count reset (the
serial worker also sets one thread when torch is imported).

Envs other than Reacher run the ``random`` policy (its per-episode action streams are the
same on both backends). ``--safety`` records the safety metrics on both backends.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import robogen
from robogen.configs import load_eval_config
from robogen.rollout.runner import run_evaluation

CKPT = Path(robogen.__file__).parent / "assets" / "checkpoints"
REACHER = {"policy": f"sb3:{CKPT / 'ppo_reacher.zip'}",
           "vecnormalize": str(CKPT / "ppo_reacher_vecnormalize.pkl")}
PIXELS = {"env": "robogen/Push-v0", "obs_mode": "state+pixels", "axes": ["lighting"],
          "policy": f"flax:{Path(robogen.__file__).parent / 'assets' / 'policies'}"
                    "/push_pixels_plain"}


def _run(base: dict, out: Path, **how: object) -> tuple[float, dict]:
    """(seconds, outcomes) of one evaluation; env steps go to ``STEPS[out.name]``."""
    cfg = load_eval_config(None, **base, **how, out=out)
    start = time.perf_counter()
    store = run_evaluation(cfg)
    took = time.perf_counter() - start
    results = store.load_results()
    STEPS[out.name.rsplit("-", 1)[0]] = sum(r.length_steps for r in results)
    outcomes = {(r.condition, r.episode_index): (r.success, r.cause) for r in results}
    return took, outcomes


STEPS: dict[str, int] = {}
"""Env steps of the last run of each way (way -> steps)."""


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Within: the batched backend sets torch to ``threads`` threads (None: as it does)."""
    import torch

    import robogen.batched.backend as backend

    if threads is None:
        yield
        return
    own = backend.one_torch_thread
    backend.one_torch_thread = lambda device: torch.set_num_threads(threads)
    try:
        yield
    finally:
        backend.one_torch_thread = own


def main() -> None:
    """Run the comparison and print one line per way and the ratios."""
    import robogen.batched.backend  # noqa: F401  (registers the batched backend)

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="gymnasium/Reacher-v5")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--worlds", default="64,400")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--sim-device", default="cpu")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--safety", action="store_true")
    p.add_argument("--torch-threads", type=int, default=None)
    p.add_argument("--pixels", action="store_true",
                   help="Push with the shipped state+pixels CNN on lighting@0.3")
    p.add_argument("--ray-workers", type=int, default=0,
                   help="also run the Ray backend with this many workers (0: not)")
    a = p.parse_args()
    import torch

    default_threads = torch.get_num_threads()
    base = {"env": a.env, **(REACHER if a.env == "gymnasium/Reacher-v5" else
                             {"policy": "random"}),
            "axes": ["physics"], "severities": [0.3], "episodes": a.episodes,
            "batch_size": 8, "seed": 0, "safety": a.safety, **(PIXELS if a.pixels else {})}
    if a.max_steps is not None:
        base["max_steps"] = a.max_steps
    worlds = [int(w) for w in a.worlds.split(",")]
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _run({**base, "episodes": 2, "max_steps": 2}, root / "warm-up", backend="batched",
             worlds=2, sim_device=a.sim_device)
        for r in range(a.rounds):
            took, serial = _run(base, root / f"serial-{r}", backend="serial", videos=0)
            times.setdefault("serial", []).append(took)
            if a.ray_workers:
                way = f"ray {a.ray_workers}"
                took, ray = _run(base, root / f"{way}-{r}", backend="ray",
                                 workers=a.ray_workers, videos=0)
                times.setdefault(way, []).append(took)
                same = sum(ray[k] == serial[k] for k in serial)
                print(f"round {r}: {way} workers: {same}/{len(serial)} episodes with the "
                      "serial outcome")
            for n in worlds:
                for threads in (None, a.torch_threads) if a.torch_threads else (None,):
                    torch.set_num_threads(default_threads)
                    way = f"batched {n}" + (f" t{threads}" if threads else "")
                    with _torch_threads(threads):
                        took, batched = _run(base, root / f"{way}-{r}", backend="batched",
                                             worlds=n, sim_device=a.sim_device)
                    times.setdefault(way, []).append(took)
                    same = sum(batched[k] == serial[k] for k in serial)
                    print(f"round {r}: {way} worlds: {same}/{len(serial)} episodes with "
                          "the serial outcome")
    episodes = 2 * a.episodes
    serial_s = statistics.median(times["serial"])
    ray_s = statistics.median(times[f"ray {a.ray_workers}"]) if a.ray_workers else None
    for way, ts in times.items():
        s = statistics.median(ts)
        vs_ray = f"  {ray_s / s:5.2f}x ray" if ray_s is not None else ""
        print(f"{way:>18}: {s:7.2f} s  {episodes / s:8.1f} episodes/s  "
              f"{STEPS.get(way, 0) / s:9.0f} env steps/s  {serial_s / s:5.2f}x serial{vs_ray}")


if __name__ == "__main__":
    main()
