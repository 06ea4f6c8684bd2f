"""Episodes/s of ``robogen eval``: the batched backend (N worlds) vs the serial backend.

The same evaluation (env, policy, axes, episodes, step limit, seed) runs on the serial
backend and on the batched backend at each ``--worlds`` N, in this process, through
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
worlds one after another (``--sim-device cuda:0`` on a GPU). Usage:

    python benchmarks/bench_batched_eval.py [--env gymnasium/Reacher-v5] [--episodes 200]
        [--worlds 64,400] [--rounds 1] [--sim-device cpu] [--max-steps N] [--safety]
        [--torch-threads T] [--pixels]

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
    cfg = load_eval_config(None, **base, **how, out=out)
    start = time.perf_counter()
    store = run_evaluation(cfg)
    took = time.perf_counter() - start
    outcomes = {(r.condition, r.episode_index): (r.success, r.cause)
                for r in store.load_results()}
    return took, outcomes


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
    for way, ts in times.items():
        s = statistics.median(ts)
        print(f"{way:>18}: {s:7.2f} s  {episodes / s:8.1f} episodes/s  "
              f"{serial_s / s:5.2f}x serial")


if __name__ == "__main__":
    main()
