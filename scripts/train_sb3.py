"""Train a small Stable-Baselines3 policy on a Gymnasium MuJoCo v5 env (or any robogen env id)
and save it for robogen.

Usage (from the repository root)::

    python scripts/train_sb3.py --env Reacher-v5 --algo ppo --timesteps 800000 \\
        --out robogen/assets/checkpoints/ppo_reacher
    .venv-suites/bin/python scripts/train_sb3.py --env dm_control/cartpole-swingup \\
        --algo sac --timesteps 100000 --out robogen/assets/checkpoints/sac_cartpole_swingup

An ``--env`` with a ``/`` is a robogen env id (``robogen.envs.make(id)``, state
observations): the dm_control family trains on the MuJoCo 3.x track (``make setup-suites``).

Writes, next to ``--out``:

* ``<out>.zip``: the SB3 model (``model.save``);
* ``<out>_vecnormalize.pkl``: the VecNormalize statistics (observation mean/var,
  clip), needed by ``robogen eval --vecnormalize``;
* ``<out>.json``: metadata: env id, algorithm, timesteps, hyper-parameters,
  training seconds, final evaluation return and robogen's success rate under the
  adapter's success rule (:mod:`robogen.envs.gym_adapter`), and
  ``"vecnormalize": true`` so that loading the checkpoint without its statistics
  is an error.

Hyper-parameters come from the RL Baselines3 Zoo (``hyperparams/ppo.yml``,
``Reacher-v2``/``-v3`` entry, carried over to v5): ``normalize: true`` (observation
and reward normalization), ``n_envs: 1``, ``n_steps: 512``, ``batch_size: 32``,
``gamma: 0.9``, ``learning_rate: 1.04019e-4``, ``ent_coef: 7.52585e-8``,
``clip_range: 0.3``, ``n_epochs: 5``, ``gae_lambda: 1.0``, ``max_grad_norm: 0.9``,
``vf_coef: 0.950368``, default ``MlpPolicy`` (64x64 tanh). The Zoo trains 1e6
steps; the shipped checkpoint uses 800k (about 15 minutes on two shared CPU cores),
which reaches a nominal success rate of about 0.69 and leaves room for
perturbations to show a gap.

``--eval-only`` reloads a saved checkpoint and rewrites the evaluation numbers
of its metadata file (e.g. after the success rule changed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ZOO_HYPERPARAMS: dict[str, dict[str, dict[str, Any]]] = {
    "ppo": {
        "Reacher-v5": dict(
            normalize=True, n_envs=1, n_steps=512, batch_size=32, gamma=0.9,
            learning_rate=1.04019e-4, ent_coef=7.52585e-08, clip_range=0.3, n_epochs=5,
            gae_lambda=1.0, max_grad_norm=0.9, vf_coef=0.950368,
        ),
        "Hopper-v5": dict(
            normalize=True, n_envs=1, n_steps=512, batch_size=32, gamma=0.999,
            learning_rate=9.80828e-05, ent_coef=0.00229519, clip_range=0.2, n_epochs=5,
            gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671,
        ),
    },
    "sac": {
        "Reacher-v5": dict(normalize=False, n_envs=1, learning_starts=10000),
        "Hopper-v5": dict(normalize=False, n_envs=1, learning_starts=10000),
        # SB3's SAC defaults (256-256 MLP, lr 3e-4, batch 256, tau 0.005, gamma 0.99)
        "dm_control/cartpole-swingup": dict(normalize=False, n_envs=1, learning_starts=5000),
        "dm_control/reacher-easy": dict(normalize=False, n_envs=1, learning_starts=5000),
    },
}
"""RL-Zoo hyper-parameters per algorithm and env (``normalize`` and ``n_envs`` are env-side)."""


def _algo_class(name: str) -> Any:
    import stable_baselines3 as sb3

    classes = {"ppo": sb3.PPO, "sac": sb3.SAC, "td3": sb3.TD3, "a2c": sb3.A2C}
    if name not in classes:
        raise SystemExit(f"--algo must be one of {sorted(classes)}, got {name!r}")
    return classes[name]


def evaluate(model_path: Path, vecnorm_path: Path | None, env_id: str, episodes: int,
             seed: int) -> dict[str, float]:
    """Mean return and robogen success rate of a saved checkpoint on the adapted env.

    Runs ``episodes`` episodes (deterministic actions) through robogen's own loader
    and ``gymnasium/<env_id>`` env, so the numbers match ``robogen eval``'s nominal
    condition for the same episode seeds ``seed + i``.
    """
    import numpy as np

    from robogen.envs import make
    from robogen.policies import LoadContext, load_policy

    robogen_id = _robogen_id(env_id)
    env = make(robogen_id)
    ctx = LoadContext(
        env_id=robogen_id, observation_space=env.observation_space,
        action_space=env.action_space, obs_mode="state",
        vecnormalize=str(vecnorm_path) if vecnorm_path else None,
    )
    policy = load_policy(f"sb3:{model_path}", ctx)
    returns, successes = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        policy.reset([0])
        done, info = False, {}
        while not done:
            act = policy.act(np.asarray(obs)[None], deterministic=True)[0]
            obs, _, term, trunc, info = env.step(act)
            done = term or trunc
        returns.append(float(info["episode_return"]))
        successes.append(bool(info["success"]))
    env.close()
    return {
        "eval_episodes": episodes,
        "eval_seed": seed,
        "eval_mean_return": float(np.mean(returns)),
        "eval_std_return": float(np.std(returns)),
        "success_rate": float(np.mean(successes)),
    }


def _robogen_id(env_id: str) -> str:
    """``Reacher-v5`` -> ``gymnasium/Reacher-v5``; an id with a family prefix is kept."""
    return env_id if "/" in env_id else "gymnasium/" + env_id


def _make_env(env_id: str) -> Any:
    """The training env: Gymnasium's own, or robogen's for a prefixed id (state obs)."""
    import gymnasium as gym

    if "/" not in env_id:
        return gym.make(env_id)
    from robogen.envs import make

    return make(env_id)


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Train and save model zip, VecNormalize stats and metadata; return the metadata."""
    import torch
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    hp = dict(ZOO_HYPERPARAMS.get(args.algo, {}).get(args.env, {}))
    normalize = bool(hp.pop("normalize", True))
    n_envs = int(hp.pop("n_envs", 1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    venv = make_vec_env(lambda: _make_env(args.env), n_envs=n_envs, seed=args.seed)
    if normalize:
        venv = VecNormalize(venv, norm_obs=True, norm_reward=True, gamma=hp.get("gamma", 0.99))
    algo = _algo_class(args.algo)
    model = algo("MlpPolicy", venv, seed=args.seed, device="cpu", verbose=0, **hp)
    t0 = time.perf_counter()
    model.learn(total_timesteps=args.timesteps, progress_bar=False)
    train_s = time.perf_counter() - t0
    model.save(str(out) + ".zip")
    vec_path = None
    if normalize:
        assert isinstance(venv, VecNormalize)
        vec_path = Path(str(out) + "_vecnormalize.pkl")
        venv.save(str(vec_path))
    meta: dict[str, Any] = {
        "env_id": args.env,
        "robogen_env_id": _robogen_id(args.env),
        "algo": args.algo,
        "timesteps": args.timesteps,
        "seed": args.seed,
        "n_envs": n_envs,
        "vecnormalize": normalize,
        "vecnormalize_file": vec_path.name if vec_path else None,
        "hyperparameters": {k: v for k, v in hp.items()},
        "hyperparameters_source": f"rl-baselines3-zoo hyperparams/{args.algo}.yml",
        "policy": ("MlpPolicy (SB3 default net_arch 64x64, tanh)" if args.algo in ("ppo", "a2c")
                   else "MlpPolicy (SB3 default net_arch 256x256, relu)"),
        "training_seconds": round(train_s, 1),
        "torch_threads": 1,
        "versions": _versions(),
    }
    return meta


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {p: version(p) for p in ("stable-baselines3", "torch", "gymnasium", "mujoco")}
    try:
        out["dm_control"] = version("dm_control")
    except Exception:  # noqa: BLE001 - not installed: not recorded
        pass
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="Reacher-v5", help="Gymnasium MuJoCo v5 id")
    p.add_argument("--algo", default="ppo", help="ppo, sac, td3 or a2c")
    p.add_argument("--timesteps", type=int, default=800_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="robogen/assets/checkpoints/ppo_reacher",
                   help="output path without extension")
    p.add_argument("--eval-episodes", type=int, default=200)
    p.add_argument("--eval-seed", type=int, default=10_000)
    p.add_argument("--eval-only", action="store_true",
                   help="only re-evaluate <out>.zip and update <out>.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    meta_path = Path(str(out) + ".json")
    if args.eval_only:
        meta = json.loads(meta_path.read_text())
    else:
        meta = train(args)
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    vec_path = Path(str(out) + "_vecnormalize.pkl")
    from robogen.envs import find_scene, make

    env = make(_robogen_id(args.env))
    meta["success_rule"] = find_scene(env).success_rule
    env.close()
    meta.update(evaluate(Path(str(out) + ".zip"), vec_path if vec_path.exists() else None,
                         args.env, args.eval_episodes, args.eval_seed))
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main()
