"""Worker placement recorded end to end: ``workers.jsonl`` and the report's hardware line, on
the serial backend and on a real loopback Ray cluster that declares a GPU (Ray then hands
each actor ``CUDA_VISIBLE_DEVICES`` whether or not the machine has one), plus the GPU runs
themselves (``-m gpu``, skipped without a GPU)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robogen.configs import load_eval_config
from robogen.rollout.backend import WorkerSetupError
from robogen.rollout.gpu import WORKERS, is_software_renderer, query_egl_devices, read_placements
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate
from tests.rollout.cluster import LoopbackCluster

PIXEL_POLICY = "flax:robogen/assets/policies/push_pixels_plain"
NVIDIA_EGL = any(d.cuda_ordinal is not None for d in query_egl_devices())
HAS_GPU = shutil.which("nvidia-smi") is not None and NVIDIA_EGL


def _cfg(out: Path, **kw):
    base = dict(env="robogen/Push-v0", obs_mode="state+pixels", policy=PIXEL_POLICY,
                axes=["lighting"], severities=[1.0], combined=False, episodes=4, batch_size=2,
                seed=5, max_steps=10, videos=0, out=out)
    base.update(kw)
    return load_eval_config(None, **base)


def _outcomes(run_dir: Path) -> list[tuple[str, int, bool, float]]:
    return sorted((r.condition, r.episode_index, r.success, round(r.episode_return, 9))
                  for r in ResultStore.open(run_dir).load_results())


@pytest.fixture
def gpu_cluster():
    c = LoopbackCluster()
    try:
        c.add_node(num_cpus=2, num_gpus=1)
        yield c
    finally:
        c.close()


@pytest.mark.render
def test_serial_pixel_run_records_its_renderer(tmp_path: Path) -> None:
    out = evaluate(_cfg(tmp_path / "run", backend="serial"))
    (p,) = read_placements(out.run_dir)
    assert p.worker.startswith("serial:") and p.gpu_share == 0 and p.gl_renderer
    header = (out.run_dir / "report.md").read_text().splitlines()[2]
    if NVIDIA_EGL:
        assert "1 worker on CPUs, rendering on the GPU" in header
    else:
        assert is_software_renderer(p.gl_renderer)
        assert "1 worker on CPUs, rendering on the CPU (llvmpipe)" in header
    assert json.loads((out.run_dir / "report.json").read_text())["hardware"] == (
        header.split(" · ")[-1])


@pytest.mark.render
@pytest.mark.skipif(NVIDIA_EGL, reason="this machine's EGL reaches an NVIDIA GPU")
def test_gpu_worker_that_cannot_render_on_its_gpu_is_a_setup_error(gpu_cluster,
                                                                   tmp_path: Path) -> None:
    """A worker holding a GPU share whose GPU no EGL device drives (no NVIDIA EGL here) is
    refused before anything is stored, naming the fix."""
    cfg = _cfg(tmp_path / "run", backend="ray", address=gpu_cluster.address, workers=1,
               num_gpus_per_worker=0.5)
    with pytest.raises(WorkerSetupError, match="no EGL device drives its CUDA device") as e:
        evaluate(cfg)
    assert "--render-device cpu" in str(e.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.render
def test_auto_share_on_a_gpu_cluster_records_each_worker(gpu_cluster, tmp_path: Path) -> None:
    """``auto`` splits the cluster's one GPU over two workers; each records its CUDA device,
    JAX memory share and renderer; the episodes equal the serial backend's."""
    cfg = _cfg(tmp_path / "ray", backend="ray", address=gpu_cluster.address, workers=2,
               num_gpus_per_worker="auto", render_device="cpu")
    out = evaluate(cfg)
    placements = read_placements(out.run_dir)
    assert len(placements) == 2 and len((out.run_dir / WORKERS).read_text().splitlines()) == 2
    for p in placements:
        assert p.worker.startswith("ray:") and p.gpu_share == 0.5
        assert p.cuda_visible_devices == "0" and p.render == "cpu"
        assert p.jax_memory == "mem_fraction=0.45" and p.torch_memory_fraction == 0.45
        assert p.egl_reason == "CPU rendering requested" and p.gl_renderer
    header = (out.run_dir / "report.md").read_text().splitlines()[2]
    assert "2 workers on 1x GPU, rendering on the CPU" in header
    serial = evaluate(_cfg(tmp_path / "serial", backend="serial"))
    assert _outcomes(out.run_dir) == _outcomes(serial.run_dir)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU with NVIDIA EGL (nvidia-smi and "
                                        "an EGL device that reports a CUDA device)")
def test_eight_workers_share_one_gpu_and_render_on_it(tmp_path: Path) -> None:
    """8 workers on one GPU with a flax pixel policy: no OOM, every worker renders on the
    NVIDIA GPU, and success per condition equals the serial CPU run within sampling error."""
    import ray

    ray.init(address="local", num_cpus=8, num_gpus=1, include_dashboard=False)
    try:
        cfg = _cfg(tmp_path / "gpu", backend="ray", workers=8, num_gpus_per_worker="auto",
                   episodes=32, max_steps=60)
        out = evaluate(cfg)
    finally:
        ray.shutdown()
    placements = read_placements(out.run_dir)
    assert len(placements) == 8
    assert all(p.renders_on_gpu and p.gpu_share == 0.125 for p in placements)
    serial = evaluate(_cfg(tmp_path / "cpu", backend="serial", episodes=32, max_steps=60))
    from scipy.stats import fisher_exact

    gpu_runs, cpu_runs = _outcomes(out.run_dir), _outcomes(serial.run_dir)
    for cond in ("nominal", "lighting@1"):
        a = sum(s for c, _, s, _ in gpu_runs if c == cond)
        b = sum(s for c, _, s, _ in cpu_runs if c == cond)
        assert fisher_exact([[a, 32 - a], [b, 32 - b]])[1] > 0.01, (cond, a, b)
