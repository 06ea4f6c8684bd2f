"""Pixel frames/s: MJWarp's batch renderer (N worlds at once) vs robogen's OpenGL renderer.

GPU speed is NOT measured by this script as run on a machine without a GPU: by default it
uses warp's CPU device (``--device cpu``), where MJWarp's render kernel traces the worlds'
pixels one thread after another; on a GPU run ``--device cuda:0``.

Both ways draw the same states (the env's reset states for seeds 0..N-1 of ``--env``) from
the policy camera at the policy's size (``front``, 84x84):

* ``opengl``: the serial path's renderer (``SceneFrames.draw``: ``mjv_updateScene``, then
  ``mjr_render`` + ``mjr_readPixels`` on robogen's render thread, ``MUJOCO_GL=egl``), one
  frame after another, each a ``(84, 84, 3) uint8`` host array.
* ``batch N``: :class:`robogen.batched.BatchRenderer` over N worlds: BVH refit, the ray
  tracer, and unpacking into one ``(N, 84, 84, 3) uint8`` torch tensor on the device (no
  host copy; ``--host`` adds it).

The render context (BVH build, texture upload) and the first batch frame, which compiles
the render kernel (cached after that in ``$WARP_CACHE_PATH`` or ``~/.cache/warp``), are
untimed and printed separately ("warm-up s").
Rounds alternate the two ways (the machine is noisy); the median round is reported.

``--distance ENV:CAMERA,...`` prints instead the image distance between the two renderers'
frames of the same states (4 states per env: reset seeds 0-3, seed ``s`` followed by
``5 s`` random env steps): the mean absolute difference in 0-255 levels per channel, and
the fraction of pixels whose channels all differ by at most 16 levels (the measures
``tests/batched/test_batch_render.py`` bounds); ``--no-specular`` zeroes the lights' specular
colour in both renderers first (the specular highlights are where the two differ most).
Usage:

    python benchmarks/bench_batched_render.py [--env robogen/Push-v0] [--worlds 16,64,256]
                                              [--frames 5] [--rounds 3] [--size 84]
                                              [--device cpu] [--host] [--json OUT.jsonl]
    python benchmarks/bench_batched_render.py --distance robogen/Push-v0:front,\
        gymnasium/HalfCheetah-v5:track
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

from robogen.batched import BatchedWorlds, BatchRenderer  # noqa: E402
from robogen.envs import find_scene, make  # noqa: E402
from robogen.envs.frames import SceneFrames  # noqa: E402


def _states(env_id: str, n: int) -> tuple[mujoco.MjModel, list[mujoco.MjData]]:
    env = make(env_id)
    scene = find_scene(env)
    datas = []
    for seed in range(n):
        env.reset(seed=seed)
        d = mujoco.MjData(scene.model)
        for f in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat", "ctrl"):
            getattr(d, f)[:] = getattr(scene.data, f)
        mujoco.mj_forward(scene.model, d)
        datas.append(d)
    return scene.model, datas


def _opengl(frames: SceneFrames, model: mujoco.MjModel, datas: list[mujoco.MjData], cam: int,
            size: int, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        for d in datas:
            frames.draw(model, d, cam, size, size)
    return time.perf_counter() - t0


def _batch(renderer: BatchRenderer, reps: int, host: bool) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        if host:
            renderer.render_numpy()
        else:
            renderer.render()
    renderer.worlds.synchronize()
    return time.perf_counter() - t0


def distance(env_id: str, camera: str, size: int, device: str, specular: bool = True,
             batch_specular: bool = True) -> None:
    """Print the image distance of the batch renderer's frames to the OpenGL frames
    (``specular=False``: with the lights' and headlight's specular colour zeroed in both)."""
    env = make(env_id)
    scene = find_scene(env)
    model, datas = scene.model, []
    if not specular:
        model.light_specular[:] = 0.0
        model.vis.headlight.specular[:] = 0.0
    env.action_space.seed(0)
    for seed in range(4):
        env.reset(seed=seed)
        for _ in range(5 * seed):
            env.step(env.action_space.sample())
        d = mujoco.MjData(model)
        for f in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat", "ctrl"):
            getattr(d, f)[:] = getattr(scene.data, f)
        mujoco.mj_forward(model, d)
        datas.append(d)
    worlds = BatchedWorlds(model, len(datas), device=device, data=datas[0])
    worlds.set_states_from(datas)
    batch = BatchRenderer(worlds, camera, size, size, specular=batch_specular).render_numpy(
    ).astype(np.int64)
    frames = SceneFrames()
    cam = frames.camera_id(model, camera)
    mad, agree = [], []
    for i, d in enumerate(datas):
        diff = np.abs(frames.draw(model, d, cam, size, size).astype(np.int64) - batch[i])
        mad.append(float(diff.mean()))
        agree.append(float((diff.max(axis=-1) <= 16).mean()))
    frames.close()
    tag = ("" if specular else "no-spec ") + ("" if batch_specular else "batch-no-spec ")
    print(f"{env_id:<26} {camera:<8} {tag}mean |diff| {min(mad):.2f}-{max(mad):.2f} levels, "
          f"pixels within 16 levels {min(agree):.3f}-{max(agree):.3f}", flush=True)


def main() -> None:
    """Run the comparison and print frames/s and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="robogen/Push-v0")
    ap.add_argument("--camera", default="front")
    ap.add_argument("--worlds", default="16,64,256")
    ap.add_argument("--frames", type=int, default=5, help="frames per world per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=84, help="image width and height [px]")
    ap.add_argument("--device", default="cpu", help="warp device: cpu, cuda:0")
    ap.add_argument("--host", action="store_true", help="copy each batch of frames to the host")
    ap.add_argument("--json", default=None, help="append one JSON line per row here")
    ap.add_argument("--distance", default=None,
                    help="ENV:CAMERA,...: print image distances to OpenGL instead")
    ap.add_argument("--no-specular", action="store_true",
                    help="with --distance: zero the lights' specular colour in both renderers")
    ap.add_argument("--batch-specular", type=int, default=1,
                    help="with --distance: BatchRenderer(specular=...) (0: no highlights)")
    args = ap.parse_args()
    if args.distance:
        for item in args.distance.split(","):
            env_id, _, camera = item.rpartition(":")
            distance(env_id, camera, args.size, args.device, not args.no_specular,
                     bool(args.batch_specular))
        return
    print(f"env={args.env} device={args.device} {args.size}x{args.size} "
          f"frames/round={args.frames} rounds={args.rounds} host-copy={args.host} "
          f"(GPU speed is unmeasured unless --device is a GPU)")
    print(f"{'worlds':>6} {'opengl fr/s':>12} {'batch fr/s':>11} {'batch/opengl':>13} "
          f"{'warm-up s':>10}")
    for n in (int(x) for x in args.worlds.split(",")):
        model, datas = _states(args.env, n)
        worlds = BatchedWorlds(model, n, device=args.device, data=datas[0])
        worlds.set_states_from(datas)
        t0 = time.perf_counter()
        renderer = BatchRenderer(worlds, args.camera, args.size, args.size)
        renderer.render()  # compiles (or loads) the render kernel
        worlds.synchronize()
        warm = time.perf_counter() - t0
        frames = SceneFrames()
        cam = frames.camera_id(model, args.camera)
        frames.draw(model, datas[0], cam, args.size, args.size)  # GL context and upload
        gl_times, b_times = [], []
        for _ in range(args.rounds):
            gl_times.append(_opengl(frames, model, datas, cam, args.size, args.frames))
            b_times.append(_batch(renderer, args.frames, args.host))
        frames.close()
        gl_rate = n * args.frames / statistics.median(gl_times)
        b_rate = n * args.frames / statistics.median(b_times)
        print(f"{n:>6} {gl_rate:>12.0f} {b_rate:>11.0f} {b_rate / gl_rate:>13.3f} "
              f"{warm:>10.1f}", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({"env": args.env, "worlds": n, "device": args.device,
                                    "size": args.size, "host_copy": args.host,
                                    "opengl_frames_per_s": gl_rate,
                                    "batch_frames_per_s": b_rate,
                                    "ratio": b_rate / gl_rate, "warmup_s": warm}) + "\n")


if __name__ == "__main__":
    main()
