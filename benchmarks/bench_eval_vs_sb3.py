"""Time ``robogen eval`` against the evaluation loop a Stable-Baselines3 user would write.

Both sides are whole processes (interpreter start, imports, loading, rollouts,
output), run alternately so that they share the machine's load, ``--runs``
times each:

* (A) ``robogen eval --env gymnasium/Reacher-v5 --policy sb3:<shipped PPO Reacher>
  --vecnormalize <its statistics> --axes physics --severities 1 --episodes 200
  --backend serial --videos 0 --out <tmp>``: nominal + physics at severity 1,
  400 episodes, with the episodes table, report.{json,md,html} and plots.
* (B) a plain script: SB3's ``evaluate_policy`` over a ``DummyVecEnv`` of 8
  ``Reacher-v5`` envs wrapped in ``VecNormalize`` with the same statistics
  (``training=False``, ``norm_reward=False``), 400 episodes, deterministic actions,
  torch on one thread, as robogen's workers run it (``--sb3-torch-threads 0``: torch's
  default thread count, as a plain script has; on a loaded machine torch's default threads
  cost the SB3 script several times its single-thread CPU time).

Wall time is the child's elapsed time; CPU time is its user + system time
(``resource.getrusage(RUSAGE_CHILDREN)``). The ratios are A over B (< 1: robogen
is faster), medians over the runs, with every run's pair printed. Then (unless
``--no-breakdown``) one more run of each side, as a script that times its stages
in-process, prints where the time went: imports, set-up (config, env, policy load,
probe), the worker's start, rollouts with the Parquet parts, and the report; for SB3:
imports, envs, ``PPO.load``, ``evaluate_policy``.

``--fit`` on a loaded 2-core machine (load ~12; N=40 and 10, 2-17 conditions, one run each):
CPU 3.37 s + 0.033 s per condition + 4.65 ms per episode (wall 10.5 s + 0.78 s per condition +
15 ms per episode, too noisy under that load to read: a 9-condition run finished before a
5-condition one). In-process stages of a 17-condition run: 0.06 s of wall per condition in the
episodes (unit hand-over, resets), figures 0.16 -> 0.34 s CPU from 2 to 17 conditions, report
build 0.02 s: no fixed per-condition cost of ~0.5 s is left to remove there.

Last measured (N=200, 2 x 4 pairs, load 1.5-5): against SB3 on one torch thread wall 1.05x,
CPU 1.10x and 1.11x (pairs 1.04-1.17); staged: robogen imports 0.38 s CPU (CLI, configs, store,
reports) + 0.95 s (torch, SB3, gymnasium, MuJoCo), set-up 0.05 s, rollouts and Parquet 1.16 s,
report 0.05 s in-process (plots in the plot process); SB3 imports 1.06 s, envs 0.07 s,
``PPO.load`` 0.87 s, ``evaluate_policy`` 1.00 s. Against SB3 on torch's default threads the
ratio is 0.93-1.02 on a quiet machine and 0.16 under load (its threads contend), so only the
one-thread comparison measures robogen's own cost.
What made ``robogen eval`` cheaper (numbers in docs/benchmarks.md):

* SB3 policy: deterministic PPO/A2C actions are the Gaussian's mean computed directly
  (``robogen.policies.sb3._mean_action_fn``, bitwise ``predict``), half of ``predict``'s
  time per batch; the policy's device read once.
* Store: episode parts built by Arrow's JSON reader and read with ``ParquetFile``, so
  the process never imports pandas, ``pyarrow.compute`` or ``pyarrow.dataset``
  (pyarrow's Python-object converters import them on first use).
* Per step: actions clipped and checked for finiteness once per batch; the state and
  warning checks and the success distance read cached ``MjData`` views instead of
  building them (and a body lookup by name) every step.
* Per reset: ``mj_setConst`` (physics axis) reuses a scratch ``MjData`` per model
  instead of allocating one (about 1 ms each).
* Serial backend: the next unit is queued before the last one's results are stored, so
  the worker never waits for the driver thread.
* Report: the figures are drawn by a helper process (``robogen.reports.plot_worker``)
  started with the evaluation, so matplotlib is imported on the other core while the
  episodes run (report stage 1.4 -> 0.74 s).

``--fit`` instead times ``robogen eval`` alone over a grid of condition counts (2, 5, 9
and 17: the physics, action, sensor and embodiment axes at 1 or 4 severities) and episodes
per condition (``--episodes`` and a quarter of it), and fits wall and CPU time as
``a + b * conditions + c * episodes`` by least squares: ``b`` is the fixed cost of a
condition beyond its episodes.

Usage::

    python benchmarks/bench_eval_vs_sb3.py              # 4 runs each, 200 episodes per condition
    python benchmarks/bench_eval_vs_sb3.py --runs 1 --episodes 50
    python benchmarks/bench_eval_vs_sb3.py --fit --episodes 40
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "robogen" / "assets" / "checkpoints"
MODEL = CKPT / "ppo_reacher.zip"
STATS = CKPT / "ppo_reacher_vecnormalize.pkl"

SB3_SCRIPT = textwrap.dedent("""
    import sys
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    model_path, stats_path, episodes, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4])
    if threads > 0:
        import torch
        torch.set_num_threads(threads)
    venv = DummyVecEnv([lambda: gym.make("Reacher-v5") for _ in range(8)])
    venv = VecNormalize.load(stats_path, venv)
    venv.training = False
    venv.norm_reward = False
    venv.seed(0)
    model = PPO.load(model_path, device="cpu")
    returns, lengths = evaluate_policy(model, venv, n_eval_episodes=episodes, deterministic=True,
                                       return_episode_rewards=True)
    print(f"sb3: {len(returns)} episodes, mean return {sum(returns) / len(returns):.3f}")
""")


ROBOGEN_STAGES = textwrap.dedent("""
    import sys, time
    t0, c0 = time.perf_counter(), time.process_time()
    rows = []

    def mark(label):
        global t0, c0
        t, c = time.perf_counter(), time.process_time()
        rows.append((label, t - t0, c - c0))
        t0, c0 = t, c

    import robogen.cli  # noqa: F401 - the CLI's own imports (typer, rich, pydantic, pyarrow)
    from robogen.configs import EvalConfig
    from robogen.rollout import runner
    from robogen.rollout.backends import make_backend
    from robogen.rollout.store import ResultStore
    from robogen.runs.evaluation import finish_report
    from robogen.reports.plot_worker import PlotWorker
    mark("imports: CLI, configs, store, reports")
    plotter = PlotWorker()  # as evaluate() does: matplotlib loads in it while episodes run
    plotter.start()
    import gymnasium, mujoco, stable_baselines3, torch  # noqa: F401, E401
    mark("imports: torch, SB3, gymnasium, MuJoCo")
    model, stats, episodes, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    cfg = EvalConfig(env="gymnasium/Reacher-v5", policy=f"sb3:{model}", vecnormalize=stats,
                     axes=["physics"], severities=[1.0], episodes=episodes, backend="serial",
                     videos=0, out=out)
    manifest = runner.prepare(cfg)
    mark("config, env, policy load, probe")
    backend = make_backend(manifest, runner.backend_options(cfg))
    backend.start()
    store = ResultStore.create(out, manifest)
    mark("worker start (env + policy again)")
    runner.run_session(store, runner.backend_options(cfg), backend=backend)
    mark("rollouts + Parquet parts")
    finish_report(store, videos=0, plotter=plotter)
    mark("report: build, plots, json/md/html")
    for label, wall, cpu in rows:
        print(f"robogen  {label:<40} wall {wall:6.2f} s  cpu {cpu:6.2f} s")
""")

SB3_STAGES = textwrap.dedent("""
    import sys, time
    t0, c0 = time.perf_counter(), time.process_time()
    rows = []

    def mark(label):
        global t0, c0
        t, c = time.perf_counter(), time.process_time()
        rows.append((label, t - t0, c - c0))
        t0, c0 = t, c

    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
    mark("imports: torch, SB3, gymnasium, MuJoCo")
    model_path, stats_path, episodes, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4])
    if threads > 0:
        torch.set_num_threads(threads)
    venv = DummyVecEnv([lambda: gym.make("Reacher-v5") for _ in range(8)])
    venv = VecNormalize.load(stats_path, venv)
    venv.training = False
    venv.norm_reward = False
    venv.seed(0)
    mark("8 envs, VecNormalize")
    model = PPO.load(model_path, device="cpu")
    mark("PPO.load")
    evaluate_policy(model, venv, n_eval_episodes=episodes, deterministic=True)
    mark("evaluate_policy")
    for label, wall, cpu in rows:
        print(f"sb3      {label:<40} wall {wall:6.2f} s  cpu {cpu:6.2f} s")
""")


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``cmd``; return its wall time [s], CPU time [s] (user + system) and stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


FIT_GRID = (("physics", "1"), ("physics", "0.25,0.5,0.75,1"),
            ("physics,action", "0.25,0.5,0.75,1"),
            ("physics,action,sensor,embodiment", "0.25,0.5,0.75,1"))
"""(axes, severities) of ``--fit``: 2, 5, 9 and 17 conditions (nominal + one per level)."""


def _fit(episodes: int, runs: int, env: dict[str, str]) -> None:
    """Time ``robogen eval`` over :data:`FIT_GRID` x (episodes, episodes // 4) and print the
    least-squares fit ``time = a + b * conditions + c * episodes`` of wall and CPU time."""
    import numpy as np

    rows: list[tuple[int, int, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench_fit_") as tmp:
        for run in range(runs):
            for n_ep in (episodes, max(1, episodes // 4)):
                for i, (axes, sevs) in enumerate(FIT_GRID):
                    n_cond = 1 + len(axes.split(",")) * len(sevs.split(","))
                    cmd = [sys.executable, "-m", "robogen.cli", "eval",
                           "--env", "gymnasium/Reacher-v5", "--policy", f"sb3:{MODEL}",
                           "--vecnormalize", str(STATS), "--axes", axes, "--severities", sevs,
                           "--no-combined", "--episodes", str(n_ep), "--backend", "serial",
                           "--videos", "0", "--out", str(Path(tmp) / f"r{run}-{n_ep}-{i}")]
                    wall, cpu, _ = _timed(cmd, env)
                    rows.append((n_cond, n_cond * n_ep, wall, cpu))
                    print(f"{n_cond:3d} conditions x {n_ep:4d} episodes: wall {wall:6.2f} s  "
                          f"cpu {cpu:6.2f} s", flush=True)
    x = np.array([[1.0, c, e] for c, e, _, _ in rows])
    for k, name in ((2, "wall"), (3, "cpu")):
        a, b, c = np.linalg.lstsq(x, np.array([r[k] for r in rows]), rcond=None)[0]
        print(f"{name}: {a:.2f} s + {b:.3f} s per condition + {1000 * c:.2f} ms per episode")


def main() -> None:
    """Run A and B alternately ``--runs`` times each and print times and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=4, help="runs of each side (alternating)")
    ap.add_argument("--episodes", type=int, default=200,
                    help="episodes per robogen condition (SB3 runs twice as many)")
    ap.add_argument("--sb3-torch-threads", type=int, default=1,
                    help="torch threads of the SB3 script (default 1, as robogen's workers; "
                         "0: torch's default, as a plain script has)")
    ap.add_argument("--fit", action="store_true",
                    help="fit robogen's time as a + b * conditions + c * episodes instead")
    ap.add_argument("--no-breakdown", action="store_true",
                    help="skip the extra run of each side that prints where its time went")
    args = ap.parse_args()
    if args.runs < 1 or args.episodes < 1:
        sys.exit(f"--runs and --episodes must be >= 1, got {args.runs} and {args.episodes}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    if args.fit:
        _fit(args.episodes, args.runs, env)
        return
    rows: dict[str, list[tuple[float, float]]] = {"robogen": [], "sb3": []}
    with tempfile.TemporaryDirectory(prefix="bench_eval_") as tmp:
        script = Path(tmp) / "sb3_eval.py"
        script.write_text(SB3_SCRIPT)
        for run in range(args.runs):
            order = ["robogen", "sb3"] if run % 2 == 0 else ["sb3", "robogen"]
            for side in order:
                if side == "robogen":
                    cmd = [sys.executable, "-m", "robogen.cli", "eval",
                           "--env", "gymnasium/Reacher-v5", "--policy", f"sb3:{MODEL}",
                           "--vecnormalize", str(STATS), "--axes", "physics", "--severities", "1",
                           "--episodes", str(args.episodes), "--backend", "serial",
                           "--videos", "0", "--out", str(Path(tmp) / f"run{run}")]
                else:
                    cmd = [sys.executable, str(script), str(MODEL), str(STATS),
                           str(2 * args.episodes), str(args.sb3_torch_threads)]
                wall, cpu, _ = _timed(cmd, env)
                rows[side].append((wall, cpu))
                print(f"run {run + 1}: {side:<8} wall {wall:6.2f} s  cpu {cpu:6.2f} s", flush=True)
        if not args.no_breakdown:
            print("where the time went (one more run of each side, in-process stages; CPU is "
                  "the process's, all threads):")
            for name, code, extra in (
                ("robogen_stages.py", ROBOGEN_STAGES,
                 [str(args.episodes), str(Path(tmp) / "breakdown")]),
                ("sb3_stages.py", SB3_STAGES, [str(2 * args.episodes),
                                               str(args.sb3_torch_threads)]),
            ):
                path = Path(tmp) / name
                path.write_text(code)
                _, _, out = _timed([sys.executable, str(path), str(MODEL), str(STATS), *extra], env)
                print(out, end="", flush=True)
    for i, ((wa, ca), (wb, cb)) in enumerate(zip(rows["robogen"], rows["sb3"], strict=True)):
        print(f"pair {i + 1}: wall ratio {wa / wb:.2f}, cpu ratio {ca / cb:.2f}")
    wall_r = statistics.median(a[0] / b[0] for a, b in zip(rows["robogen"], rows["sb3"],
                                                           strict=True))
    cpu_r = statistics.median(a[1] / b[1] for a, b in zip(rows["robogen"], rows["sb3"],
                                                          strict=True))
    print(f"robogen eval ({2 * args.episodes} episodes, report included) / SB3 evaluate_policy "
          f"({2 * args.episodes} episodes): wall {wall_r:.2f}x, cpu {cpu_r:.2f}x (median of "
          f"{args.runs} alternating pairs; < 1: robogen is faster)")


if __name__ == "__main__":
    main()
