"""Env steps/s of MuJoCo Warp (N worlds, one warp device) vs C MuJoCo stepping serially.

GPU speed is NOT measured by this script as run on a machine without a GPU: by default it
uses warp's CPU device (``--device cpu``), where MJWarp's kernels run one thread of
worlds after another, so the ratios below say what the CPU device costs (for development
and tests), not what the batched backend is for. On a GPU run ``--device cuda:0``.

Both ways step the same compiled model (the nominal scene of ``--envs``) from the env's
reset state with the same random ctrl batch, one *env step* = the env's physics steps per
action (HalfCheetah-v5: 5, robogen Push/Reach: 10), and read ``qpos``/``qvel`` back to
the host after every env step (what a host-side policy would need):

* ``c-serial``: one ``MjData`` per world, ``mj_step(model, data, nstep=frame_skip)`` for
  each world in turn, in this process (no Python env wrapper: physics only).
* ``mjwarp N``: :class:`robogen.batched.BatchedWorlds` with N worlds,
  ``step(ctrl, nstep=frame_skip)`` then ``qpos``/``qvel`` (device -> host copies).

warp compiles the kernels at the first step (tens of seconds on a CPU; cached after that
in ``$WARP_CACHE_PATH`` or ``~/.cache/warp``): one untimed warm-up step runs first and its
time is printed separately. Rounds alternate the two ways (the machine is noisy); the
median round is reported. Usage:

    python benchmarks/bench_batched.py [--envs gymnasium/HalfCheetah-v5,robogen/Push-v0]
                                       [--worlds 64,256,1024] [--steps 10] [--rounds 3]
                                       [--device cpu] [--json OUT.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from robogen.batched import BatchedWorlds  # noqa: E402
from robogen.envs import find_scene, make  # noqa: E402
from robogen.envs.scene import FRAME_SKIP  # noqa: E402

GYM_FRAME_SKIP = {"gymnasium/HalfCheetah-v5": 5, "gymnasium/Hopper-v5": 4,
                  "gymnasium/Reacher-v5": 2}
"""Physics steps per env step of the Gymnasium MuJoCo v5 envs (their ``frame_skip``)."""


def _setup(env_id: str, worlds: int) -> tuple[mujoco.MjModel, mujoco.MjData, int, np.ndarray]:
    env = make(env_id)
    scene = find_scene(env)
    env.reset(seed=0)
    model = scene.model
    data = mujoco.MjData(model)
    for f in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat", "ctrl"):
        getattr(data, f)[:] = getattr(scene.data, f)
    mujoco.mj_forward(model, data)
    lo, hi = model.actuator_ctrlrange.T
    ctrl = np.random.default_rng(0).uniform(lo, hi, size=(worlds, model.nu))
    return model, data, GYM_FRAME_SKIP.get(env_id, FRAME_SKIP), ctrl


def _c_serial(model: mujoco.MjModel, start: mujoco.MjData, ctrl: np.ndarray, skip: int,
              steps: int) -> float:
    datas = []
    for row in ctrl:
        d = mujoco.MjData(model)
        for f in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat"):
            getattr(d, f)[:] = getattr(start, f)
        d.ctrl[:] = row
        datas.append(d)
    t0 = time.perf_counter()
    for _ in range(steps):
        for d in datas:
            mujoco.mj_step(model, d, nstep=skip)
        np.stack([d.qpos for d in datas]), np.stack([d.qvel for d in datas])
    return time.perf_counter() - t0


def _mjwarp(worlds: BatchedWorlds, ctrl: np.ndarray, skip: int, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        worlds.step(ctrl, nstep=skip)
        worlds.qpos, worlds.qvel  # noqa: B018 - the host copies are part of the cost
    worlds.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    """Run the comparison and print env steps/s and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", default="gymnasium/HalfCheetah-v5,robogen/Push-v0")
    ap.add_argument("--worlds", default="64,256,1024")
    ap.add_argument("--steps", type=int, default=10, help="env steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="warp device: cpu, cuda:0")
    ap.add_argument("--json", default=None, help="append one JSON line per row here")
    args = ap.parse_args()
    print(f"device={args.device} steps/round={args.steps} rounds={args.rounds} "
          f"(GPU speed is unmeasured unless --device is a GPU)")
    print(f"{'env':<26} {'worlds':>6} {'c-serial st/s':>14} {'mjwarp st/s':>12} "
          f"{'mjwarp/c':>9} {'warm-up s':>10}")
    for env_id in args.envs.split(","):
        for n in (int(x) for x in args.worlds.split(",")):
            model, start, skip, ctrl = _setup(env_id, n)
            t0 = time.perf_counter()
            worlds = BatchedWorlds(model, n, device=args.device, data=start)
            worlds.step(ctrl, nstep=1)  # compiles (or loads) the kernels
            worlds.synchronize()
            warm = time.perf_counter() - t0
            c_times, w_times = [], []
            for _ in range(args.rounds):
                c_times.append(_c_serial(model, start, ctrl, skip, args.steps))
                w_times.append(_mjwarp(worlds, ctrl, skip, args.steps))
            c_rate = n * args.steps / statistics.median(c_times)
            w_rate = n * args.steps / statistics.median(w_times)
            print(f"{env_id:<26} {n:>6} {c_rate:>14.0f} {w_rate:>12.0f} "
                  f"{w_rate / c_rate:>9.3f} {warm:>10.1f}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"env": env_id, "worlds": n, "device": args.device,
                                        "c_serial_steps_per_s": c_rate,
                                        "mjwarp_steps_per_s": w_rate,
                                        "ratio": w_rate / c_rate, "warmup_s": warm}) + "\n")


if __name__ == "__main__":
    main()
