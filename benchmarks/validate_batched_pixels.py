"""Does a shipped pixel policy succeed as often on batch-rendered frames as on OpenGL frames?

Not a timed test: a script that runs the comparison once and prints what it finds.

The same ``--episodes`` nominal episodes (``env.reset(seed=i)``) of ``--env`` are run twice
with a shipped behaviour-cloning policy (``state+pixels``, 84x84, ``front`` camera):

* ``opengl``: the env's own observations (robogen's OpenGL renderer, ``MUJOCO_GL=egl``);
* ``batch``: the same envs (C MuJoCo physics, the same state part of the observation) with
  the pixel part drawn by :class:`robogen.batched.BatchRenderer`: every env step the N
  envs' states are copied into N MJWarp worlds and rendered at once.

Only the renderer differs, so a difference in success is the policy's sensitivity to the
renderers' image distance (``docs/benchmarks.md``). Prints each way's success rate with a
95 % Wilson interval, the episodes where they disagree, and McNemar's exact test on the
paired outcomes. Usage::

    python benchmarks/validate_batched_pixels.py [--policies push_pixels_plain,...]
                                                 [--episodes 200] [--env robogen/Push-v0]
                                                 [--specular]
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from robogen.batched import BatchedWorlds, BatchRenderer  # noqa: E402
from robogen.envs import find_scene, make  # noqa: E402
from robogen.policies import load_policy  # noqa: E402
from robogen.policies.base import LoadContext  # noqa: E402
from robogen.stats import wilson_interval  # noqa: E402

ASSETS = Path(__file__).resolve().parents[1] / "robogen" / "assets" / "policies"


def _run(env_id: str, policy_dir: str, episodes: int, batch: bool, specular: bool = False
         ) -> np.ndarray:
    """Success (bool per episode) of the policy on ``episodes`` nominal episodes."""
    envs = [make(env_id, obs_mode="state+pixels") for _ in range(episodes)]
    e0 = envs[0]
    ctx = LoadContext(env_id=env_id, observation_space=e0.observation_space,
                      action_space=e0.action_space, obs_mode="state+pixels")
    policy: Any = load_policy(f"flax:{ASSETS / policy_dir}", ctx)
    scenes = [find_scene(e) for e in envs]
    obs = [e.reset(seed=i)[0] for i, e in enumerate(envs)]
    policy.reset(list(range(episodes)))
    renderer = None
    if batch:
        model = scenes[0].model
        worlds = BatchedWorlds(model, episodes, data=scenes[0].data)
        renderer = BatchRenderer(worlds, "front", 84, 84, specular=specular)
    done = np.zeros(episodes, dtype=bool)
    success = np.zeros(episodes, dtype=bool)
    while not done.all():
        if renderer is not None:
            datas = [s.data for s in scenes]
            renderer.worlds.set_states_from(datas)
            frames = renderer.render_numpy()
            for i in range(episodes):
                obs[i] = {**obs[i], "pixels": frames[i]}
        live = np.flatnonzero(~done)
        batch_obs = {k: np.stack([obs[i][k] for i in live]) for k in obs[0]}
        actions = policy.act(batch_obs, slots=list(live))
        for row, i in enumerate(live):
            obs[i], _, term, trunc, info = envs[i].step(actions[row])
            success[i] |= bool(info.get("success", False))
            done[i] = term or trunc
    for e in envs:
        e.close()
    return success


def main() -> None:
    """Run both renderers for each policy and print the paired comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="robogen/Push-v0")
    ap.add_argument("--policies", default="push_pixels_plain,push_pixels_augmented")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--specular", action="store_true",
                    help="draw MJWarp's specular highlights (BatchRenderer(specular=True))")
    args = ap.parse_args()
    for name in args.policies.split(","):
        t0 = time.perf_counter()
        gl = _run(args.env, name, args.episodes, batch=False)
        t1 = time.perf_counter()
        bt = _run(args.env, name, args.episodes, batch=True, specular=args.specular)
        t2 = time.perf_counter()
        only_gl, only_bt = int((gl & ~bt).sum()), int((bt & ~gl).sum())
        p = binomtest(only_gl, only_gl + only_bt).pvalue if only_gl + only_bt else 1.0
        for way, s, secs in (("opengl", gl, t1 - t0), ("batch", bt, t2 - t1)):
            lo, hi = wilson_interval(int(s.sum()), len(s))
            print(f"{name:<24} {way:<7} success {s.mean():.3f} [{lo:.3f}, {hi:.3f}] "
                  f"({int(s.sum())}/{len(s)}, {secs:.0f} s)", flush=True)
        print(f"{name:<24} disagree: opengl only {only_gl}, batch only {only_bt}; "
              f"McNemar exact p = {p:.3f}", flush=True)


if __name__ == "__main__":
    main()
