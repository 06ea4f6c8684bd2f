"""Backends that follow one another on one embedded Ray cluster (``robogen eval --policy A
--policy B``, both sides of ``robogen check``): the next one gets the whole cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NEXT_BACKEND = """
import ray
from robogen.configs import load_eval_config
from robogen.rollout.backend import BackendOptions
from robogen.rollout.backends import start_ray_cluster, stop_ray_cluster
from robogen.rollout.ray_backend import RayBackend
from robogen.rollout.runner import prepare

cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach", axes=["physics"],
                       severities=[1.0], episodes=2, batch_size=1, seed=0, videos=0)
manifest = prepare(cfg)
start_ray_cluster(None, num_cpus=2)
try:
    sizes, free = [], []
    for _ in range(3):
        backend = RayBackend(manifest, BackendOptions(kind="ray"), shutdown=False)
        backend.start()
        sizes.append(backend.size)
        backend.close()
        free.append(ray.available_resources().get("CPU", 0.0))  # right after close()
finally:
    stop_ray_cluster()
print("sizes", sizes, "free", free)
"""


def test_a_closed_backend_has_given_its_cpus_back_when_close_returns() -> None:
    """Ray frees a killed actor's CPU asynchronously; the next backend sizes its pool from the
    free CPUs, so without the wait it got 1 worker of 2, or none ('no room for a worker',
    seen in ``make demo``'s second policy)."""
    done = subprocess.run([sys.executable, "-c", NEXT_BACKEND], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line == "sizes [2, 2, 2] free [2.0, 2.0, 2.0]", line
