"""GPU placement of workers (robogen.rollout.gpu): the CUDA -> EGL mapping, memory shares,
the software-renderer check and the report's hardware line, with injected device lists
(CI has no GPU), plus the real EGL enumeration and renderer of this machine."""

from __future__ import annotations

import json

import pytest

from robogen.rollout import gpu
from robogen.rollout.gpu import (
    CudaDeviceId,
    EglChoice,
    EglDevice,
    GpuPlacementError,
    WorkerPlacement,
    choose_egl_device,
    hardware_summary,
    memory_settings,
    mujoco_egl_device_id,
    parse_cuda_visible_devices,
    parse_nvidia_smi,
    prepare_worker,
    resolve_gpu_share,
)

MESA = EglDevice(9, None, ("EGL_MESA_device_software",))


def nv(index: int, ordinal: int | None) -> EglDevice:
    return EglDevice(index, ordinal, ("EGL_NV_device_cuda", "EGL_EXT_device_drm"),
                     f"/dev/dri/card{index}")


@pytest.mark.parametrize("value, expected", [
    (None, None),
    ("", ()),
    ("-1", ()),
    ("NoDevFiles", ()),
    ("3", (CudaDeviceId("index", "3"),)),
    ("2, 0", (CudaDeviceId("index", "2"), CudaDeviceId("index", "0"))),
    ("1,-1,2", (CudaDeviceId("index", "1"),)),  # CUDA stops at the first invalid entry
    ("GPU-8e1fa3c2-aaaa", (CudaDeviceId("uuid", "GPU-8e1fa3c2-aaaa"),)),
    ("MIG-4f3e2d1c-0000-1111", (CudaDeviceId("mig", "MIG-4f3e2d1c-0000-1111"),)),
    ("MIG-GPU-8e1f/1/0", (CudaDeviceId("mig", "MIG-GPU-8e1f/1/0"),)),
], ids=["unset", "empty", "minus-one", "nodevfiles", "index", "two", "stops", "uuid", "mig",
        "mig-old"])
def test_parse_cuda_visible_devices(value: str | None, expected: object) -> None:
    assert parse_cuda_visible_devices(value) == expected


def test_relative_ordinals_pick_the_device_of_ordinal_zero() -> None:
    # 4 GPUs; the worker sees physical GPU 3 only. The NVIDIA driver reports ordinals relative
    # to CUDA_VISIBLE_DEVICES: the EGL device of GPU 3 says 0, the hidden ones say nothing.
    # EGL's own order differs from CUDA's (device 1 drives it).
    devices = [nv(0, None), nv(1, 0), nv(2, None), nv(3, None), MESA]
    choice = choose_egl_device(devices, parse_cuda_visible_devices("3"))
    assert choice.egl_index == 1
    # MuJoCo 3.x indexes EGL's enumeration; 4.x the visible CUDA devices
    assert mujoco_egl_device_id(choice, devices, cuda_ordered=False) == "1"
    assert mujoco_egl_device_id(choice, devices, cuda_ordered=True) == "0"


def test_uuid_entry_with_relative_ordinals() -> None:
    devices = [MESA, nv(0, None), nv(1, 0)]
    choice = choose_egl_device(devices, parse_cuda_visible_devices("GPU-aaaa-bbbb"))
    assert choice.egl_index == 1


def test_physical_ordinals_are_matched_by_index() -> None:
    # a driver that reports every GPU's physical ordinal: more ordinals than visible GPUs
    devices = [nv(0, 2), nv(1, 0), nv(2, 3), nv(3, 1)]
    assert choose_egl_device(devices, parse_cuda_visible_devices("3")).egl_index == 2
    assert choose_egl_device(devices, parse_cuda_visible_devices("1,2")).egl_index == 3
    # ... but a UUID cannot be matched to a physical ordinal
    assert choose_egl_device(devices, parse_cuda_visible_devices("GPU-x")).egl_index is None


def test_unset_cuda_visible_devices_means_gpu_zero() -> None:
    devices = [nv(0, 1), nv(1, 0)]
    assert choose_egl_device(devices, None).egl_index == 1


@pytest.mark.parametrize("devices, visible, words", [
    ([MESA], "0", "none of the 1 EGL device(s) reports a CUDA device"),
    ([nv(0, 0)], "MIG-4f3e", "MIG instance"),
    ([nv(0, 0)], "-1", "hides every GPU"),
    ([nv(0, 0), nv(1, 0)], "0", "2 EGL devices report CUDA ordinal 0"),
], ids=["no-nvidia-egl", "mig", "hidden", "ambiguous"])
def test_no_egl_device_drives_the_gpu(devices: list[EglDevice], visible: str,
                                      words: str) -> None:
    choice = choose_egl_device(devices, parse_cuda_visible_devices(visible))
    assert choice.egl_index is None and words in choice.reason
    assert mujoco_egl_device_id(choice, devices, cuda_ordered=True) is None


def test_memory_share_sets_jax_fraction_unless_the_user_did() -> None:
    m = memory_settings(0.25, {})
    assert m.env == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.225"}
    assert m.torch_fraction == pytest.approx(0.225) and m.jax == "mem_fraction=0.225"
    user = memory_settings(0.25, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    assert user.env == {} and user.user_set == ("XLA_PYTHON_CLIENT_PREALLOCATE",)
    assert user.jax == "user: XLA_PYTHON_CLIENT_PREALLOCATE=false"
    whole = memory_settings(1.0, {})
    assert whole.env == {} and whole.torch_fraction is None


@pytest.mark.parametrize("requested, gpus, workers, share", [
    ("auto", 0.0, 8, 0.0),
    ("auto", 1.0, 8, 0.125),
    ("auto", 1.0, 14, 0.0714),
    ("auto", 4.0, 2, 1.0),
    (0.25, 1.0, 8, 0.25),
    ("0.5", 1.0, 8, 0.5),
], ids=["no-gpu", "eighth", "fourteenth", "capped", "number", "string-number"])
def test_resolve_gpu_share(requested: float | str, gpus: float, workers: int,
                           share: float) -> None:
    assert resolve_gpu_share(requested, gpus, workers) == pytest.approx(share)


@pytest.mark.parametrize("bad", ["most", -0.5, float("nan")])
def test_resolve_gpu_share_refuses(bad: float | str) -> None:
    with pytest.raises(ValueError, match="number >= 0 or 'auto'"):
        resolve_gpu_share(bad, 1.0, 4)


def test_a_share_that_leaves_no_memory_is_refused() -> None:
    env: dict[str, str] = {"CUDA_VISIBLE_DEVICES": "0"}
    row = {"index": 0, "uuid": "GPU-1", "name": "NVIDIA H200", "memory_mib": 143771.0}
    with pytest.raises(GpuPlacementError, match=r"--num-gpus-per-worker 0.001 leaves each "
                                                r"worker 129 MiB of the 143771 MiB"):
        prepare_worker(0.001, "auto", worker="w", node="n", environ=env,
                       egl_devices=[nv(0, 0)], gpu=row)
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in env  # refused before anything is set


def test_prepare_worker_sets_egl_device_and_memory() -> None:
    env: dict[str, str] = {"CUDA_VISIBLE_DEVICES": "GPU-1"}
    row = {"index": 2, "uuid": "GPU-1", "name": "NVIDIA H200", "memory_mib": 143771.0}
    p = prepare_worker(0.125, "auto", worker="w", node="n", environ=env,
                       egl_devices=[MESA, nv(1, None), nv(2, 0)], gpu=row)
    expected_id = "0" if gpu.mujoco_orders_by_cuda() else "2"
    assert env["MUJOCO_EGL_DEVICE_ID"] == expected_id == p.egl_device
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.1125"
    assert (p.gpu_name, p.gpu_uuid, p.gpu_memory_mib) == ("NVIDIA H200", "GPU-1", 143771.0)
    # the user's own EGL device wins
    env2 = {"CUDA_VISIBLE_DEVICES": "0", "MUJOCO_EGL_DEVICE_ID": "5"}
    p2 = prepare_worker(0.5, "auto", worker="w", node="n", environ=env2,
                        egl_devices=[nv(0, 0)], gpu=row)
    assert env2["MUJOCO_EGL_DEVICE_ID"] == "5" and "user" in p2.egl_reason


def test_prepare_worker_without_nvidia_egl_is_a_setup_error() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(GpuPlacementError, match="no EGL device drives its CUDA device"):
        prepare_worker(0.5, "auto", worker="w", node="n", environ=env, egl_devices=[MESA],
                       gpu={})
    # CPU rendering asked for: no EGL choice needed
    p = prepare_worker(0.5, "cpu", worker="w", node="n", environ=dict(env),
                       egl_devices=[MESA], gpu={})
    assert p.egl_device is None and p.egl_reason == "CPU rendering requested"


def test_software_renderer_on_a_gpu_worker_names_the_vendor_files(tmp_path) -> None:
    vendor = tmp_path / "egl_vendor.d"
    vendor.mkdir()
    (vendor / "50_mesa.json").write_text(json.dumps(
        {"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_mesa.so.0"}}))
    env = {"__EGL_VENDOR_LIBRARY_DIRS": str(vendor)}
    p = WorkerPlacement(worker="ray:abc", node="n", host="h", pid=1, gpu_share=0.25)
    with pytest.raises(GpuPlacementError) as e:
        gpu.finish_placement(p, renderer="llvmpipe (LLVM 15.0.6, 256 bits)", environ=env)
    msg = str(e.value)
    assert "renders on the CPU: OpenGL renderer 'llvmpipe (LLVM 15.0.6, 256 bits)'" in msg
    assert "50_mesa.json -> libEGL_mesa.so.0 (no NVIDIA one)" in msg
    assert str(vendor) in msg and "10_nvidia.json" in msg and "--render-device cpu" in msg
    # a CPU worker, or a GPU worker told to render on the CPU, is fine on llvmpipe
    ok = gpu.finish_placement(WorkerPlacement("w", "n", "h", 1), renderer="llvmpipe", environ=env)
    assert ok.gl_renderer == "llvmpipe" and ok.renders_on_gpu is False
    cpu = WorkerPlacement("w", "n", "h", 1, gpu_share=0.25, render="cpu")
    assert gpu.finish_placement(cpu, renderer="llvmpipe", environ=env).gl_renderer == "llvmpipe"
    nvidia = gpu.finish_placement(p, renderer="NVIDIA H200/PCIe/SSE2", environ=env)
    assert nvidia.renders_on_gpu is True


def test_nvidia_smi_rows_and_the_workers_gpu() -> None:
    text = ("0, GPU-aaaa-1111, NVIDIA H200, 143771, 00000000:19:00.0\n"
            "1, GPU-bbbb-2222, NVIDIA H200, 143771, 00000000:3B:00.0\n")
    rows = parse_nvidia_smi(text)
    assert [r["index"] for r in rows] == [0, 1] and rows[1]["memory_mib"] == 143771.0
    assert gpu.gpu_of(rows, parse_cuda_visible_devices("1"))["uuid"] == "GPU-bbbb-2222"
    assert gpu.gpu_of(rows, parse_cuda_visible_devices("GPU-aaaa"))["index"] == 0
    assert gpu.gpu_of(rows, parse_cuda_visible_devices("MIG-x")) is None


def test_hardware_summary() -> None:
    def w(i: int, share: float, renderer: str | None, node: str = "n1") -> WorkerPlacement:
        return WorkerPlacement(f"w{i}", node, "h", i, gpu_share=share, gpu_name="NVIDIA H200",
                               gpu_uuid="GPU-1" if share else None, gl_renderer=renderer)

    gpu_workers = [w(i, 0.125, "NVIDIA H200/PCIe/SSE2") for i in range(8)]
    assert hardware_summary(gpu_workers) == "8 workers on 1x NVIDIA H200, rendering on the GPU"
    cpu_workers = [w(0, 0, "llvmpipe (LLVM 15.0.6, 256 bits)", "n1"),
                   w(1, 0, "llvmpipe (LLVM 15.0.6, 256 bits)", "n2")]
    assert hardware_summary(cpu_workers) == (
        "2 workers on CPUs (2 nodes), rendering on the CPU (llvmpipe)")
    assert hardware_summary([w(0, 0, None)]) == "1 worker on CPUs"
    assert hardware_summary([]) == ""


def test_placement_round_trips_through_json() -> None:
    p = WorkerPlacement("w", "n", "h", 3, gpu_share=0.5,
                        user_set=("XLA_PYTHON_CLIENT_PREALLOCATE",), gl_renderer="x")
    assert WorkerPlacement.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_this_machines_egl_devices_and_renderer() -> None:
    """The real enumeration (ctypes on libEGL) and the real first context: on a machine
    without the NVIDIA EGL library the devices report no CUDA ordinal and the renderer is a
    software one, which a GPU worker refuses."""
    devices = gpu.query_egl_devices()
    renderer = gpu.gl_renderer()
    assert renderer
    if any(d.cuda_ordinal is not None for d in devices):
        pytest.skip("this machine has NVIDIA EGL: covered by the gpu-marked tests")
    assert gpu.is_software_renderer(renderer), renderer
    choice = choose_egl_device(devices, parse_cuda_visible_devices("0"))
    assert choice == EglChoice(None, choice.reason) and "reports a CUDA device" in choice.reason


@pytest.mark.parametrize("flags, message", [
    (["--num-gpus-per-worker", "most"], "--num-gpus-per-worker must be a number >= 0 or 'auto'"),
    (["--num-gpus-per-worker", "-1"], "must be a number >= 0 or 'auto'"),
    (["--render-device", "tpu"], "render_device"),
], ids=["word", "negative", "device"])
def test_cli_refuses_bad_gpu_options(flags: list[str], message: str, tmp_path) -> None:
    from typer.testing import CliRunner

    from robogen.cli import app

    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach",
                                 "--out", str(out), *flags])
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split())
    assert not out.exists()
