"""Retrain robogen's shipped pixel policies (behaviour cloning on robogen/Push-v0, robosuite/Lift).

Recipe (see ``robogen/assets/policies/README.md`` for the measured results):

1. **Demonstrations**: the scripted ``expert:push`` on the *nominal* scene, 84x84
   RGB from the ``front`` camera plus the state vector. Actions executed during
   collection carry Gaussian noise (DART, Laskey et al. 2017, "DART: Noise
   Injection for Robust Imitation Learning"), while the stored label is the
   expert's clean action, so the data covers the states a slightly wrong
   policy drifts into. Demonstration seeds come from robogen's demonstration
   index range (>= 10^6, :func:`robogen.scaling.demos.demo_episode_index`), so
   no evaluation episode's initial state is ever trained on.
2. **Observation**: the image and proprioception only (arm joint positions and
   velocities, gripper gap, end-effector position: state indices 0-13). Object
   and target positions are never an input: the policy must find them in the
   image.
3. **Two variants** trained on the same demonstrations with the same seed and
   steps: ``plain`` (no augmentation) and ``augmented`` (DrQ random shift,
   Kostrikov et al. 2021, plus colour jitter).

No visual axis's held-out ``test`` values are used (the demonstrations are
nominal), so every visual axis is unseen by both policies.

Usage::

    .venv/bin/python scripts/train_pixel_policies.py            # collect, train, save
    .venv/bin/python scripts/train_pixel_policies.py --episodes 40 --steps 500 --out /tmp/p
    .venv-suites/bin/python scripts/train_pixel_policies.py --env robosuite/Lift \\
        --episodes 300 --steps 6000 --variants plain     # on the MuJoCo 3.x track

Each env has a recipe (:data:`RECIPES`): its expert, the state indices the policy reads
(proprioception only), the action dims that get DART noise, the output name.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

SEED = 0


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How one env's pixel policies are trained.

    Attributes:
        expert: Policy URI of the demonstrator.
        proprio: State indices the policy reads (the objects' state is never an input).
        proprio_fields: What those indices are, in words (saved with the policy).
        noise_dims: Action dims that get DART noise during collection.
        name: Output directory prefix (``<name>_<variant>``).
        camera: The observation camera (recorded).
        dense_steps: Every step of an episode before this one is kept; after it, one step
            in ``keep_every`` (long episodes that mostly hold a reached pose, such as
            dm_control's 1000 steps, would otherwise fill memory with near-copies).
        keep_every: See ``dense_steps``.

    The demonstrator is a scripted expert or a trained state policy (``sb3:`` teacher:
    it reads ``obs["state"]`` only; the student is distilled onto pixels, as in
    "privileged teacher, pixel student" distillation, Chen et al. 2019, "Learning by
    Cheating").
    """

    expert: str
    proprio: tuple[int, ...]
    proprio_fields: str
    noise_dims: tuple[int, ...]
    name: str
    camera: str
    dense_steps: int = 10**9
    keep_every: int = 1


RECIPES = {
    "robogen/Push-v0": Recipe(
        "expert:push", tuple(range(14)), "arm_qpos, arm_qvel, gripper_gap, ee_pos",
        tuple(range(5)), "push_pixels", "front"),
    "robosuite/Lift": Recipe(
        "expert:robosuite/Lift", tuple(range(50)),
        "robot0_proprio-state (joint pos/cos/sin/vel/acc, eef pos/quat, gripper qpos/qvel)",
        tuple(range(3)), "lift_pixels", "agentview"),
    "dm_control/reacher-easy": Recipe(
        "sb3:robogen/assets/checkpoints/sac_reacher_easy.zip", (0, 1, 4, 5),
        "position (2 joint angles), velocity (2 joint velocities); to_target is left out",
        (0, 1), "reacher_pixels", "camera 0 (fixed, top-down)", dense_steps=200,
        keep_every=5),
}
"""Env id -> its :class:`Recipe`."""


def collect(env_id: str, episodes: int, noise: float, seed: int, log=print
            ) -> dict[str, np.ndarray]:
    """Run the env's expert on the nominal scene with DART noise; return the step arrays.

    Returns:
        ``pixels (N, 84, 84, 3) uint8``, ``state (N, obs_dim) float32``, ``actions (N,
        act_dim) float32`` (clean expert labels), ``episode (N,) int64``, ``success (E,)
        bool``.
    """
    import robogen.envs as envs
    from robogen.envs.base import find_scene
    from robogen.policies import LoadContext, load_policy
    from robogen.rollout.plan import episode_seed
    from robogen.scaling.demos import demo_episode_index

    recipe = RECIPES[env_id]
    env = envs.make(env_id, obs_mode="state+pixels")
    scene = find_scene(env)
    teacher = recipe.expert.startswith("sb3:")
    if teacher:  # a state policy: it sees the state vector only
        ctx = LoadContext(env_id, env.observation_space["state"], env.action_space, "state")
    else:
        ctx = LoadContext(env_id, env.observation_space, env.action_space, "state+pixels")
    expert = load_policy(recipe.expert, ctx)
    if hasattr(expert, "attach"):
        expert.attach([scene])
    rng = np.random.default_rng(seed + 12345)
    pix, st, act, ep, succ = [], [], [], [], []
    t0 = time.time()
    for j in range(episodes):
        obs, _ = env.reset(seed=episode_seed(seed, demo_episode_index("none", j)))
        expert.reset([0])
        done, ok, t = False, False, 0
        while not done:
            feed = obs["state"][None] if teacher else {
                "state": obs["state"][None], "pixels": obs["pixels"][None]}
            label = expert.act(feed)[0]
            if t < recipe.dense_steps or (t - recipe.dense_steps) % recipe.keep_every == 0:
                pix.append(obs["pixels"])
                st.append(obs["state"])
                act.append(label)
                ep.append(j)
            t += 1
            executed = label.copy()
            dims = list(recipe.noise_dims)
            executed[dims] += rng.normal(0.0, noise, len(dims))
            obs, _, term, trunc, info = env.step(np.clip(executed, -1, 1).astype(np.float32))
            ok = ok or bool(info["success"])
            done = term or trunc
        succ.append(ok)
        if (j + 1) % 20 == 0:
            log(f"  collected {j + 1}/{episodes} episodes, {len(act)} steps, "
                f"success {np.mean(succ):.2f}, {time.time() - t0:.0f} s")
    env.close()
    return {"pixels": np.stack(pix), "state": np.stack(st).astype(np.float32),
            "actions": np.stack(act).astype(np.float32), "episode": np.asarray(ep),
            "success": np.asarray(succ)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="robogen/Push-v0", choices=sorted(RECIPES))
    p.add_argument("--episodes", type=int, default=600, help="demonstrations")
    p.add_argument("--noise", type=float, default=0.3, help="DART action noise std")
    p.add_argument("--steps", type=int, default=12000, help="gradient steps per policy")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--variants", default="plain,augmented")
    p.add_argument("--work", type=Path, default=Path("runs/pixel-policies"),
                   help="cache of the demonstrations")
    p.add_argument("--out", type=Path, default=Path("robogen/assets/policies"))
    p.add_argument("--collect-only", action="store_true")
    args = p.parse_args(argv)

    args.work.mkdir(parents=True, exist_ok=True)
    tag = "" if args.env == "robogen/Push-v0" else RECIPES[args.env].name + "-"
    cache = args.work / f"{tag}demos-e{args.episodes}-n{args.noise}-s{SEED}.npz"
    t0 = time.time()
    if cache.exists():
        data = dict(np.load(cache))
        print(f"demonstrations: {cache} ({len(data['actions'])} steps)")
    else:
        print(f"collecting {args.episodes} {RECIPES[args.env].expert} demonstrations "
              f"(DART noise {args.noise})")
        data = collect(args.env, args.episodes, args.noise, SEED)
        np.savez(cache, **data)
    collect_s = time.time() - t0
    print(f"demonstrations: {len(data['actions'])} steps, expert success under noise "
          f"{data['success'].mean():.2f}, {collect_s:.0f} s")
    if args.collect_only:
        return 0
    train(data, args, collect_s)
    return 0


def train(data: dict[str, np.ndarray], args: argparse.Namespace, collect_s: float) -> None:
    """Train and save each variant (same data, seed and steps)."""
    from robogen.scaling.bc import BCConfig, train_bc_ensemble
    from robogen.scaling.bc_io import save_bc

    recipe = RECIPES[args.env]
    n = len(data["actions"])
    obs = {"state": data["state"], "pixels": data["pixels"]}
    base = dict(arch="cnn", hidden=(256, 256), feature_dim=64, keypoints=32, steps=args.steps,
                batch_size=args.batch_size, lr=1e-3, lr_schedule="cosine", chunk_steps=500,
                state_indices=recipe.proprio)
    variants = {
        "plain": BCConfig(**base),
        "augmented": BCConfig(**base, augment=True, shift_pad=4, color_jitter=0.3),
    }
    for name in args.variants.split(","):
        t0 = time.time()
        print(f"training {name} ({args.steps} steps, batch {args.batch_size}, {n} samples)")

        def progress(done: int, total: int, t0: float = t0) -> None:
            print(f"  {done}/{total} steps, {time.time() - t0:.0f} s", flush=True)

        (model,) = train_bc_ensemble(obs, data["actions"], [np.arange(n)], seeds=[SEED],
                                     config=variants[name], action_low=-1.0, action_high=1.0,
                                     progress=progress)
        train_s = time.time() - t0
        model = dataclasses.replace(model, train_info={
            **model.train_info, "env_id": args.env, "obs_camera": recipe.camera,
            "variant": name, "proprio_fields": recipe.proprio_fields})
        out = args.out / f"{recipe.name}_{name}"
        save_bc(model, out)
        info = {"env_id": args.env, "expert": recipe.expert, "variant": name,
                "episodes": args.episodes, "samples": n, "dart_noise": args.noise, "seed": SEED,
                "collect_s": round(collect_s), "train_s": round(train_s),
                "final_loss": model.train_info["final_loss"]}
        (out / "recipe.json").write_text(json.dumps(info, indent=2) + "\n")
        print(f"saved {out} in {train_s:.0f} s, final loss {info['final_loss']:.4f}")


if __name__ == "__main__":
    sys.exit(main())
