"""What ``--safety`` costs the batched backend: env steps/s of N MJWarp worlds with and without
:class:`robogen.batched.safety.BatchedSafety`'s device reads.

Both ways run the env's batched task on the same worlds (one compiled model, the env's reset
state in every world, a fixed random action batch), one *env step* = ``apply_action`` and
the env's physics steps; neither reads anything back to the host:

* ``plain``: ``worlds.advance(frame_skip)``;
* ``safety``: ``safety.advance(worlds, frame_skip)`` (on a substep scene, the tabletop
  tasks: one physics step at a time with the contact force read after each) then
  ``safety.after_step``; one ``summary`` of every world at the end of the round.

torch runs on ``--torch-threads`` threads (default 1, as robogen's workers run it): on the
CPU device with a loaded machine, torch's intra-op threads spin against MJWarp's and each
other (measured: the force read at 256 worlds 44 ms per call on two threads of two busy
cores, 0.6 ms on one).

GPU speed is NOT measured by this script as run on a machine without a GPU: by default it
uses warp's CPU device (``--device cpu``), where the ratio says what the reads cost next to
MJWarp's CPU kernels. Rounds alternate the two ways; the median round is reported. warp
compiles the kernels at the first step (cached after that); one untimed step of each way
runs first. Usage:

    python benchmarks/bench_batched_safety.py [--envs robogen/Push-v0,gymnasium/Hopper-v5]
                                              [--worlds 64,256] [--steps 10] [--rounds 3]
                                              [--device cpu] [--torch-threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from robogen.batched import BatchedWorlds  # noqa: E402
from robogen.batched.safety import BatchedSafety  # noqa: E402
from robogen.batched.tasks import batched_task  # noqa: E402
from robogen.envs import find_scene, make  # noqa: E402


def _round(worlds: BatchedWorlds, task: Any, safety: BatchedSafety | None,
           actions: torch.Tensor, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        task.apply_action(worlds, actions)
        if safety is None:
            worlds.advance(task.frame_skip)
        else:
            safety.advance(worlds, task.frame_skip)
            safety.after_step(worlds, actions)
    if safety is not None:
        safety.summary(range(worlds.worlds))
    worlds.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    """Run the comparison and print env steps/s and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", default="robogen/Push-v0,gymnasium/Hopper-v5")
    ap.add_argument("--worlds", default="64,256")
    ap.add_argument("--steps", type=int, default=10, help="env steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="warp device: cpu, cuda:0")
    ap.add_argument("--torch-threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.torch_threads)
    print(f"device={args.device} steps/round={args.steps} rounds={args.rounds} "
          f"torch threads={args.torch_threads} "
          f"(GPU speed is unmeasured unless --device is a GPU)")
    print(f"{'env':<26} {'worlds':>6} {'plain st/s':>11} {'safety st/s':>12} "
          f"{'safety/plain':>13}")
    for env_id in args.envs.split(","):
        env = make(env_id)
        env.reset(seed=0)
        scene = find_scene(env)
        space = env.action_space
        for n in (int(x) for x in args.worlds.split(",")):
            worlds = BatchedWorlds(scene.model, n, device=args.device, data=scene.data)
            task = batched_task(env_id, env, worlds)
            safety = BatchedSafety(worlds, env)
            safety.reset_rows(worlds, range(n))
            device = worlds.tensor("qpos").device
            actions = torch.as_tensor(np.random.default_rng(0).uniform(
                space.low, space.high, size=(n, *space.shape)), dtype=torch.float32,
                device=device)
            _round(worlds, task, None, actions, 1)  # compiles (or loads) the kernels
            _round(worlds, task, safety, actions, 1)
            plain, with_safety = [], []
            for _ in range(args.rounds):
                plain.append(_round(worlds, task, None, actions, args.steps))
                with_safety.append(_round(worlds, task, safety, actions, args.steps))
            p_rate = n * args.steps / statistics.median(plain)
            s_rate = n * args.steps / statistics.median(with_safety)
            print(f"{env_id:<26} {n:>6} {p_rate:>11.0f} {s_rate:>12.0f} "
                  f"{s_rate / p_rate:>13.3f}", flush=True)


if __name__ == "__main__":
    main()
