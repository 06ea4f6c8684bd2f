"""What ``--safety`` and the per-step axes cost a rollout, measured side by side.

For each case the serial backend's worker runs the same units with and without the
safety monitor (``manifest.safety``), alternating the two sides ``--repeats`` times, and
prints env steps per second of each and their ratio (this machine is noisy: read the
spread, not one run). ``--only filters`` compares the nominal condition with the
``sensor`` and ``action`` axes at severity 1 (per-step filters in the wrapper), steps per
second again (their episodes differ in length, the rate does not depend on it).

Run: ``.venv/bin/python benchmarks/bench_safety.py [--repeats 3] [--only safety|filters]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robogen.configs import load_eval_config  # noqa: E402
from robogen.rollout.runner import plan_units, prepare  # noqa: E402
from robogen.rollout.worker import EpisodeWorker  # noqa: E402

PIXEL_POLICY = "flax:robogen/assets/policies/push_pixels_plain"
CASES = {
    "pickplace-state": ("robogen/PickPlace-v0", "expert:pick_place", "state", 32),
    "hopper-state": ("gymnasium/Hopper-v5", "random:0", "state", 32),
    "push-pixels": ("robogen/Push-v0", PIXEL_POLICY, "state+pixels", 16),
}


def manifest(env: str, policy: str, obs_mode: str, episodes: int, axes: list[str]):
    cfg = load_eval_config(None, env=env, policy=policy, episodes=episodes, axes=axes,
                           severities=[1.0], combined=False, backend="serial",
                           obs_mode=obs_mode, videos=0, max_steps=200)
    return prepare(cfg)


def steps_per_s(m, conditions: set[str]) -> float:
    """Env steps per second of the worker over the units of ``conditions``."""
    worker = EpisodeWorker(m, render_lanes=2 if m.obs_mode != "state" else 1)
    units = [u for u in plan_units(m) if u.condition.name in conditions]
    worker._ensure_envs(max(len(u.episode_indices) for u in units))
    worker.run_unit(units[0])  # warm up (first frames, XLA compile)
    t0 = time.perf_counter()
    steps = sum(r.length_steps for u in units for r in worker.run_unit(u))
    dt = time.perf_counter() - t0
    worker.close()
    return steps / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("safety", "filters"), default=None)
    args = ap.parse_args()
    if args.only in (None, "safety"):
        print("safety monitor: env steps/s without | with --safety (ratio with/without)")
        for name, (env, policy, obs_mode, n) in CASES.items():
            base = manifest(env, policy, obs_mode, n, ["physics"])
            safe = dataclasses.replace(base, safety=True)
            ratios = []
            for _ in range(args.repeats):
                a = steps_per_s(base, {"nominal"})
                b = steps_per_s(safe, {"nominal"})
                ratios.append(b / a)
                print(f"  {name:16s} {a:8.0f} | {b:8.0f}   {b / a:.2f}", flush=True)
            print(f"  {name:16s} median ratio {statistics.median(ratios):.2f}")
    if args.only in (None, "filters"):
        print("per-step axes: env steps/s nominal | sensor@1 | action@1 (ratios to nominal)")
        for name, (env, policy, obs_mode, n) in CASES.items():
            m = manifest(env, policy, obs_mode, n, ["sensor", "action"])
            for _ in range(args.repeats):
                a = steps_per_s(m, {"nominal"})
                s = steps_per_s(m, {"sensor@1"})
                c = steps_per_s(m, {"action@1"})
                print(f"  {name:16s} {a:8.0f} | {s:8.0f} | {c:8.0f}   "
                      f"{s / a:.2f} {c / a:.2f}", flush=True)


if __name__ == "__main__":
    main()
