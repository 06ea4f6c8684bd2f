"""Episodes/s of the Push pixel demo on one GPU: Ray workers that render and infer on the
GPU, the same workers rendering on the CPU (Mesa llvmpipe), and the serial backend; prints
ratios of the competing ways, run side by side (alternating rounds on a noisy machine).

Each row is one ``robogen eval`` of the shipped pixel policy
(``flax:robogen/assets/policies/push_pixels_plain``, ``state+pixels`` 84x84) on Push with
the lighting axis (2 conditions x ``--episodes`` episodes, ``--max-steps`` steps), through
the library (the same code path as the CLI), into a temporary run directory:

* ``serial``: the serial backend (one process, its render lanes).
* ``ray-cpu N``: N Ray workers, no GPU (``--num-gpus-per-worker 0``), rendering with Mesa.
* ``ray-gpu N``: N Ray workers sharing one GPU (``--num-gpus-per-worker auto``: 1/N each),
  rendering on the GPU through EGL (``--render-device gpu``: a worker that renders on the
  CPU fails the run) and running the policy on it (JAX's memory share 0.9/N each).

The worker counts default to 1, 4, 8, 14. On a machine without an NVIDIA GPU the GPU rows
are skipped (said so) and the CPU rows still run; ``workers.jsonl`` of every run is read to
print where each worker rendered. Usage:

    python benchmarks/bench_gpu.py [--workers 1,4,8,14] [--episodes 64] [--max-steps 100]
                                   [--rounds 2] [--json OUT.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import robogen  # noqa: E402,F401
from robogen.configs import load_eval_config  # noqa: E402
from robogen.rollout.gpu import hardware_summary, query_egl_devices, read_placements  # noqa: E402
from robogen.runs.evaluation import evaluate  # noqa: E402

POLICY = "flax:robogen/assets/policies/push_pixels_plain"


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and any(
        d.cuda_ordinal is not None for d in query_egl_devices())


def _run(way: str, workers: int, args: argparse.Namespace, root: Path) -> dict:
    out = root / f"{way}-{workers}-{time.monotonic_ns()}"
    kw: dict = dict(env="robogen/Push-v0", obs_mode="state+pixels", policy=POLICY,
                    axes=["lighting"], severities=[1.0], combined=False,
                    episodes=args.episodes, batch_size=args.batch_size, seed=0,
                    max_steps=args.max_steps, videos=0, out=out)
    if way == "serial":
        kw.update(backend="serial")
    elif way == "ray-cpu":
        kw.update(backend="ray", workers=workers, num_gpus_per_worker=0.0, render_device="cpu")
    else:
        kw.update(backend="ray", workers=workers, num_gpus_per_worker="auto",
                  render_device="gpu")
    cfg = load_eval_config(None, **kw)
    t0 = time.perf_counter()
    evaluate(cfg)
    wall = time.perf_counter() - t0
    n = 2 * args.episodes
    placements = read_placements(out)
    row = {"way": way, "workers": workers, "episodes": n, "wall_s": round(wall, 3),
           "episodes_per_s": round(n / wall, 3), "hardware": hardware_summary(placements)}
    shutil.rmtree(out, ignore_errors=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,4,8,14")
    ap.add_argument("--episodes", type=int, default=64, help="per condition")
    ap.add_argument("--max-steps", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="append every row as JSON lines")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    gpu = _has_gpu()
    if not gpu:
        print("no NVIDIA GPU with NVIDIA EGL here: GPU rows skipped (unmeasured)")
    ways = [("serial", 1)] + [("ray-cpu", n) for n in counts]
    if gpu:
        ways += [("ray-gpu", n) for n in counts]
    rows: dict[tuple[str, int], list[dict]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory(prefix="rg-bench-gpu-") as tmp:
        for r in range(args.rounds):
            for way in ways if r % 2 == 0 else list(reversed(ways)):
                row = _run(way[0], way[1], args, Path(tmp))
                rows[way].append(row)
                print(json.dumps(row), flush=True)
                if args.json is not None:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(row) + "\n")
    med = {w: statistics.median(r["episodes_per_s"] for r in rs) for w, rs in rows.items()}
    base = med[("serial", 1)]
    print(f"\n{'way':<10}{'workers':>8}{'episodes/s':>12}{'x serial':>10}{'x ray-cpu':>11}  "
          "where")
    for (way, n), eps in med.items():
        cpu = med.get(("ray-cpu", n))
        vs_cpu = f"{eps / cpu:>10.2f}x" if cpu and way == "ray-gpu" else f"{'':>11}"
        print(f"{way:<10}{n:>8}{eps:>12.2f}{eps / base:>9.2f}x{vs_cpu}  "
              f"{rows[(way, n)][-1]['hardware']}")


if __name__ == "__main__":
    main()
