"""The suite families' throughput: robogen's serial backend against the suite's own bare loop.

For each env (``dm_control/cartpole-swingup``, ``dm_control/cheetah-run``, ``robosuite/Lift``)
and observation (state, pixels), the same random actions over the same number of episodes
and steps:

* **robogen**: the serial backend's worker (:class:`robogen.rollout.worker.EpisodeWorker`)
  running the plan's nominal units with ``random:0`` on one render lane like the bare loop
  (robogen's env, the perturbation wrapper at nominal, the episode records), twice: with
  one env per unit (``--batch-size 1``: the bare loop's shape) and with robogen's default
  batch of 8 envs stepped together (one policy call per batch: what a user runs);
* **bare**: what a user of the suite writes by hand: ``suite.load(domain, task)`` and
  ``env.step`` (pixels: ``physics.render(84, 84, camera_id=0)`` each step), or
  ``robosuite.make(task, robots="Panda", use_camera_obs=...)`` and ``env.step`` (pixels:
  robosuite's own ``agentview`` camera observation), one episode after the other. Both
  sides render with robogen's settings (shadows and multisampling off: the suite's model is
  edited the same way), so the ratio is robogen's overhead, not a difference in what is
  drawn. Both sides draw uniform actions the same way (``low + (high - low) *
  rng.random(n)``: what ``Generator.uniform(low, high)`` computes, without its ~20 us of
  set-up per call with array bounds, which robogen's random policy avoids too). Neither
  side's time includes building the env (robogen builds it when its worker starts).

Prints steps/s of each side and bare/robogen time for both batch sizes (goal >= 0.9:
robogen at least 90% of the bare loop's speed). Each case starts with an untimed episode of
each side (imports, numba's compile of robosuite's controller, GL contexts); then runs
alternate (robogen, bare, robogen, bare, ...); the machine is noisy, read the ratios. The
state cases run 32 episodes a side (8 gave runs of ~0.2 s, too short to read). Runs on the
MuJoCo 3.x track (``make setup-suites``)::

    .venv-suites/bin/python benchmarks/bench_suites.py [--repeats 2] [--only dm_control]
        [--obs state]
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
    ("dm_control/cartpole-swingup", "state", 32, None),
    ("dm_control/cartpole-swingup", "pixels", 8, 250),
    ("dm_control/cheetah-run", "state", 32, None),
    ("dm_control/cheetah-run", "pixels", 8, 250),
    ("robosuite/Lift", "state", 8, 100),
    ("robosuite/Lift", "pixels", 8, 100),
)
"""(env id, obs mode, episodes, max steps or None for the suite's horizon)."""


def bare_dm_control(name: str, obs_mode: str, episodes: int, max_steps: int | None
                    ) -> tuple[float, int]:
    """dm_control's own loop: (seconds, steps)."""
    from dm_control import suite

    domain, task = name.split("-", 1)
    env = suite.load(domain, task, task_kwargs={"random": 0})
    model = env.physics.model.ptr
    model.vis.quality.shadowsize, model.vis.quality.offsamples = 0, 0
    spec = env.action_spec()
    low, span = spec.minimum, spec.maximum - spec.minimum
    rng = np.random.default_rng(0)
    steps = 0
    t0 = time.perf_counter()
    for _ in range(episodes):
        ts, n = env.reset(), 0
        while not ts.last() and n != max_steps:
            ts = env.step(low + span * rng.random(low.shape))
            n += 1
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
    env = robosuite.make(task, robots="Panda", seed=0, hard_reset=False, has_renderer=False,
                         has_offscreen_renderer=pixels, use_camera_obs=pixels,
                         camera_names="agentview", camera_heights=84, camera_widths=84,
                         horizon=horizon)
    model = env.sim.model._model
    model.vis.quality.shadowsize, model.vis.quality.offsamples = 0, 0
    low, high = env.action_spec
    span = high - low
    rng = np.random.default_rng(0)
    steps = 0
    t0 = time.perf_counter()
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            _, _, done, _ = env.step(low + span * rng.random(low.shape))
            steps += 1
    dt = time.perf_counter() - t0
    env.close()
    return dt, steps


def robogen_side(env_id: str, obs_mode: str, episodes: int, max_steps: int | None,
                 batch_size: int) -> tuple[float, int]:
    """robogen's serial worker on the nominal units: (seconds, steps)."""
    from robogen.configs import load_eval_config
    from robogen.rollout.runner import prepare

    cfg = load_eval_config(None, env=env_id, policy="random:0", episodes=episodes,
                           axes=["physics"], severities=[1.0], combined=False,
                           backend="serial", obs_mode=obs_mode, batch_size=batch_size,
                           max_steps=max_steps, videos=0)
    return robogen_serial(prepare(cfg), lanes=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--only", default="", help="dm_control or robosuite")
    p.add_argument("--obs", default="", help="state or pixels (default: both)")
    args = p.parse_args()
    print(f"{'env':30s} {'obs':7s} {'robogen steps/s':>16s} {'batch 8':>8s} {'bare':>6s} "
          f"{'bare/robogen time, batch 1':>27s} {'batch 8':>15s}")
    for env_id, obs_mode, episodes, max_steps in CASES:
        if (args.only and not env_id.startswith(args.only)) or args.obs not in ("", obs_mode):
            continue
        name = env_id.split("/", 1)[1]
        # warm-up, untimed: imports, robosuite's numba-compiled controller code, GL contexts
        # (the first robosuite run paid ~3x for numba's compile before this)
        robogen_side(env_id, obs_mode, 1, max_steps, 1)
        if env_id.startswith("dm_control/"):
            bare_dm_control(name, obs_mode, 1, max_steps)
        else:
            bare_robosuite(name, obs_mode, 1, max_steps or 400)
        one, eight, theirs = [], [], []
        for _ in range(args.repeats):
            t_1, n_1 = robogen_side(env_id, obs_mode, episodes, max_steps, 1)
            if env_id.startswith("dm_control/"):
                t_b, n_b = bare_dm_control(name, obs_mode, episodes, max_steps)
            else:
                t_b, n_b = bare_robosuite(name, obs_mode, episodes, max_steps or 400)
            t_8, n_8 = robogen_side(env_id, obs_mode, episodes, max_steps, 8)
            one.append(n_1 / t_1)
            eight.append(n_8 / t_8)
            theirs.append(n_b / t_b)
        r1 = [a / b for a, b in zip(one, theirs, strict=True)]
        r8 = [a / b for a, b in zip(eight, theirs, strict=True)]
        print(f"{env_id:30s} {obs_mode:7s} {np.median(one):16.0f} {np.median(eight):8.0f} "
              f"{np.median(theirs):6.0f} {' '.join(f'{r:.2f}' for r in r1):>27s} "
              f"{' '.join(f'{r:.2f}' for r in r8):>15s}", flush=True)

if __name__ == "__main__":
    main()
