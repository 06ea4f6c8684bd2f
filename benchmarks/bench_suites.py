"""The suite families' throughput: robogen's serial backend against the suite's own bare loop.

For each env (``dm_control/cartpole-swingup``, ``dm_control/cheetah-run``, ``robosuite/Lift``)
and observation (state, pixels), the same random actions over the same number of episodes
and steps:

* **robogen**: the serial backend's worker (:class:`robogen.rollout.worker.EpisodeWorker`)
  running the plan's nominal units with ``random:0``, one env (batch 1) on one render lane
  like the bare loop (robogen's env, the perturbation wrapper at nominal, the episode
  records);
* **bare**: what a user of the suite writes by hand: ``suite.load(domain, task)`` and
  ``env.step`` (pixels: ``physics.render(84, 84, camera_id=0)`` each step), or
  ``robosuite.make(task, robots="Panda", use_camera_obs=...)`` and ``env.step`` (pixels:
  robosuite's own ``agentview`` camera observation). Both sides render with robogen's
  settings (shadows and multisampling off: the suite's model is edited the same way), so
  the ratio is robogen's overhead, not a difference in what is drawn. Both sides' times
  include building the env (robogen builds it in the worker's first unit).

Prints steps/s of each side and bare/robogen time (goal >= 0.9: robogen at least 90% of the
bare loop's speed). Runs alternate (robogen, bare, robogen, bare, ...); the machine is noisy,
read the ratios. Runs on the MuJoCo 3.x track (``make setup-suites``)::

    .venv-suites/bin/python benchmarks/bench_suites.py [--repeats 2] [--only dm_control]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("LP_NUM_THREADS", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bench_rollout import robogen_serial  # noqa: E402

CASES = (
    ("dm_control/cartpole-swingup", "state", 4, None),
    ("dm_control/cartpole-swingup", "pixels", 2, None),
    ("dm_control/cheetah-run", "state", 4, None),
    ("dm_control/cheetah-run", "pixels", 2, None),
    ("robosuite/Lift", "state", 4, 100),
    ("robosuite/Lift", "pixels", 2, 100),
)
"""(env id, obs mode, episodes, max steps or None for the suite's horizon)."""


def bare_dm_control(name: str, obs_mode: str, episodes: int) -> tuple[float, int]:
    """dm_control's own loop: (seconds, steps)."""
    from dm_control import suite

    domain, task = name.split("-", 1)
    t0 = time.perf_counter()
    env = suite.load(domain, task, task_kwargs={"random": 0})
    model = env.physics.model.ptr
    model.vis.quality.shadowsize, model.vis.quality.offsamples = 0, 0
    spec = env.action_spec()
    rng = np.random.default_rng(0)
    steps = 0
    for _ in range(episodes):
        ts = env.reset()
        while not ts.last():
            ts = env.step(rng.uniform(spec.minimum, spec.maximum))
            if obs_mode == "pixels":
                env.physics.render(84, 84, camera_id=0)
            steps += 1
    return time.perf_counter() - t0, steps


def bare_robosuite(task: str, obs_mode: str, episodes: int, horizon: int) -> tuple[float, int]:
    """robosuite's own loop: (seconds, steps)."""
    import robosuite

    from robogen.envs.robosuite_env import patch_robosuite

    patch_robosuite()  # robosuite 1.5.2 needs these fixes on mujoco 3.17 (as robogen does)
    pixels = obs_mode == "pixels"
    t0 = time.perf_counter()
    env = robosuite.make(task, robots="Panda", seed=0, hard_reset=False, has_renderer=False,
                         has_offscreen_renderer=pixels, use_camera_obs=pixels,
                         camera_names="agentview", camera_heights=84, camera_widths=84,
                         horizon=horizon)
    model = env.sim.model._model
    model.vis.quality.shadowsize, model.vis.quality.offsamples = 0, 0
    low, high = env.action_spec
    rng = np.random.default_rng(0)
    steps = 0
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            _, _, done, _ = env.step(rng.uniform(low, high))
            steps += 1
    dt = time.perf_counter() - t0
    env.close()
    return dt, steps


def robogen_side(env_id: str, obs_mode: str, episodes: int, max_steps: int | None
                 ) -> tuple[float, int]:
    """robogen's serial worker on the nominal units: (seconds, steps)."""
    from robogen.configs import load_eval_config
    from robogen.rollout.runner import prepare

    cfg = load_eval_config(None, env=env_id, policy="random:0", episodes=episodes,
                           axes=["physics"], severities=[1.0], combined=False,
                           backend="serial", obs_mode=obs_mode, batch_size=1,
                           max_steps=max_steps, videos=0)
    return robogen_serial(prepare(cfg), lanes=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--only", default="", help="dm_control or robosuite")
    args = p.parse_args()
    print(f"{'env':30s} {'obs':7s} {'robogen steps/s':>16s} {'bare steps/s':>13s} "
          f"{'bare/robogen time':>18s}")
    for env_id, obs_mode, episodes, max_steps in CASES:
        if args.only and not env_id.startswith(args.only):
            continue
        name = env_id.split("/", 1)[1]
        ratios, ours, theirs = [], [], []
        for _ in range(args.repeats):
            t_r, n_r = robogen_side(env_id, obs_mode, episodes, max_steps)
            if env_id.startswith("dm_control/"):
                t_b, n_b = bare_dm_control(name, obs_mode, episodes)
            else:
                t_b, n_b = bare_robosuite(name, obs_mode, episodes, max_steps or 400)
            ours.append(n_r / t_r)
            theirs.append(n_b / t_b)
            ratios.append((n_r / t_r) / (n_b / t_b))
        print(f"{env_id:30s} {obs_mode:7s} {np.median(ours):16.0f} {np.median(theirs):13.0f} "
              f"{' '.join(f'{r:.2f}' for r in ratios):>18s}", flush=True)


if __name__ == "__main__":
    main()
