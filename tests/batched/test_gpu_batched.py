"""The batched backend on a CUDA device (``--sim-device cuda:0``) against the serial backend.

The other tests of ``tests/batched`` run MJWarp on warp's CPU device; these are the only
ones that run the backend's CUDA paths (warp's stream and torch's, the DLPack hand-over to
the policy on the GPU, the batch renderer on the GPU, ``--worlds``' GPU default). Each skips,
saying why, where warp sees no CUDA device.

* State: the shipped Reacher PPO on nominal and ``physics@1``, 32 episodes each: the
  manifest and the report header name ``cuda:0``, and at least :data:`STATE_AGREEMENT` of the
  episodes end as on the serial backend (on the CPU device every episode does; float32
  trajectories drift apart from float64 ones over 50 steps, which can move an episode that
  ends near the success threshold).
* Pixels and safety: the shipped ``state+pixels`` Push policy on nominal and ``lighting@1``
  with ``--safety``, 16 episodes each: every episode has a first-frame digest and the safety
  columns, lighting changes episode ``i``'s first frame, and at least
  :data:`PIXEL_AGREEMENT` of the outcomes match the serial backend's (batch-rendered frames
  differ from OpenGL's by about one level: on the CPU device 56 of 64 matched).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

import robogen
from tests.batched.runs import episodes_table as _table
from tests.batched.runs import eval_ok
from tests.batched.states import HAVE_MJWARP, NO_MJWARP

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP),
              pytest.mark.timeout(900)]

CKPT = Path(robogen.__file__).parent / "assets" / "checkpoints"
POLICIES = Path(robogen.__file__).parent / "assets" / "policies"
REACHER = ["--env", "gymnasium/Reacher-v5", "--policy", f"sb3:{CKPT / 'ppo_reacher.zip'}",
           "--vecnormalize", str(CKPT / "ppo_reacher_vecnormalize.pkl"),
           "--axes", "physics", "--severities", "1", "--episodes", "32"]
PUSH = ["--env", "robogen/Push-v0", "--obs-mode", "state+pixels",
        "--policy", f"flax:{POLICIES / 'push_pixels_plain'}", "--axes", "lighting",
        "--severities", "1", "--episodes", "16", "--max-steps", "60", "--safety"]
STATE_AGREEMENT = 0.9
"""Least fraction of state episodes whose (success, cause) equals the serial backend's."""
PIXEL_AGREEMENT = 0.75
"""Least fraction of pixel episodes whose (success, cause) equals the serial backend's."""
SAFETY = ["peak_contact_force_n", "joint_limit_steps", "object_dropped", "action_magnitude"]


@pytest.fixture(scope="module")
def cuda() -> str:
    """``cuda:0`` where warp sees a CUDA device, else the test skips saying why.
    ``ROBOGEN_GPU_TEST_DEVICE=cpu`` runs these tests on warp's CPU device instead (a dry run
    of the test itself on a machine without a GPU)."""
    from robogen.batched import load_mjwarp

    dry = os.environ.get("ROBOGEN_GPU_TEST_DEVICE")
    if dry:
        return dry
    wp, _ = load_mjwarp()
    if wp.get_cuda_device_count() < 1:
        pytest.skip("needs an NVIDIA GPU that warp sees (a CUDA driver and device); warp "
                    "sees none here: the batched backend's CUDA paths are untested")
    return "cuda:0"




def _agreement(a: pd.DataFrame, b: pd.DataFrame) -> float:
    same = (a.success == b.success) & (a.cause.fillna("") == b.cause.fillna(""))
    return float(same.mean())


def _both(tmp_path: Path, args: list[str], device: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    eval_ok(*args, "--backend", "batched", "--sim-device", device,
            "--out", str(tmp_path / "gpu"))
    eval_ok(*args, "--backend", "serial", "--videos", "0",
            "--out", str(tmp_path / "serial"))
    return _table(tmp_path / "gpu"), _table(tmp_path / "serial")


def test_state_episodes_on_cuda_end_as_on_the_serial_backend(tmp_path: Path, cuda: str
                                                            ) -> None:
    gpu, serial = _both(tmp_path, REACHER, cuda)
    assert len(gpu) == len(serial) == 64
    assert (gpu.episode_index == serial.episode_index).all()
    assert _agreement(gpu, serial) >= STATE_AGREEMENT
    backend = json.loads((tmp_path / "gpu" / "manifest.json").read_text())["backend"]
    assert backend["kind"] == "batched" and backend["device"] == cuda
    assert backend["worlds"] == 64  # the GPU default, bounded by the episodes to run
    header = (tmp_path / "gpu" / "report.md").read_text().splitlines()[2]
    assert f"batched backend: 64 worlds on {cuda}" in header


def test_pixel_policy_with_safety_on_cuda(tmp_path: Path, cuda: str) -> None:
    gpu, serial = _both(tmp_path, PUSH, cuda)
    assert len(gpu) == len(serial) == 32
    assert gpu.first_frame_digest.notna().all()
    nominal = gpu[gpu.condition == "nominal"].set_index("episode_index")
    lit = gpu[gpu.condition == "lighting@1"].set_index("episode_index")
    assert (nominal.first_frame_digest != lit.first_frame_digest).all()
    for col in SAFETY:
        assert gpu[col].notna().all(), col
    assert _agreement(gpu, serial) >= PIXEL_AGREEMENT
