"""End-to-end evaluation on real envs: backends agree, a killed run resumes exactly."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robogen.configs import load_eval_config
from robogen.rollout.runner import plan_units
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate, resume
from tests.fixtures.interrupt import sigint_inherited


def _strip(results):
    return sorted(
        (dataclasses.replace(r, wall_time_s=0.0) for r in results),
        key=lambda r: (r.condition, r.episode_index),
    )


def _cfg(out: Path, backend: str, **kw):
    base = dict(
        env="robogen/Reach-v0",
        policy="expert:reach",
        axes=["physics", "embodiment"],
        severities=[1.0],
        episodes=6,
        batch_size=3,
        seed=3,
        backend=backend,
        out=out,
        videos=0,
    )
    base.update(kw)
    return load_eval_config(None, **base)


def test_serial_and_ray_give_identical_episodes(tmp_path):
    serial = evaluate(_cfg(tmp_path / "serial", "serial"))
    ray_out = evaluate(_cfg(tmp_path / "ray", "ray", workers=2))
    a = _strip(ResultStore.open(serial.run_dir).load_results())
    b = _strip(ResultStore.open(ray_out.run_dir).load_results())
    assert len(a) == 6 * 4  # nominal, 2 singles, combined
    assert a == b
    # common random numbers: episode i has the same reset seed in every condition
    seeds = {}
    for r in a:
        seeds.setdefault(r.episode_index, set()).add(r.seed)
    assert all(len(s) == 1 for s in seeds.values())
    for kind in ("json", "md", "html"):
        assert Path(serial.files[kind]).is_file()


def test_killed_run_resumes_without_lost_or_repeated_episodes(tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "robogen.cli",
        "eval",
        "--env",
        "robogen/Reach-v0",
        "--policy",
        "expert:reach",
        "--axes",
        "physics,object_pose",
        "--severities",
        "0.5,1",
        "--episodes",
        "6",
        "--batch-size",
        "2",
        "--seed",
        "5",
        "--backend",
        "serial",
        "--videos",
        "0",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MUJOCO_GL": "egl"},
    )
    parts = out / "episodes"
    deadline = time.time() + 240
    while time.time() < deadline:
        if parts.is_dir() and len(list(parts.glob("unit-*.parquet"))) >= 3:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ResultStore.open(out)
    n_units = len(plan_units(store.manifest))
    done_before = store.done_units()
    assert 0 < len(done_before) < n_units, "the kill should land mid-run"
    before = {u: store.part_path(u).read_bytes() for u in done_before}
    resume(out, backend="serial", videos=0)
    results = ResultStore.open(out).load_results()
    keys = [(r.condition, r.episode_index) for r in results]
    assert len(keys) == len(set(keys)) == 6 * len(store.manifest.conditions)
    # finished parts were not rewritten
    assert all(store.part_path(u).read_bytes() == b for u, b in before.items())
    # and the resumed run equals an uninterrupted one
    full = evaluate(
        load_eval_config(
            None,
            env="robogen/Reach-v0",
            policy="expert:reach",
            axes=["physics", "object_pose"],
            severities=[0.5, 1.0],
            episodes=6,
            batch_size=2,
            seed=5,
            backend="serial",
            videos=0,
            out=tmp_path / "full",
        )
    )
    assert _strip(results) == _strip(ResultStore.open(full.run_dir).load_results())


def test_the_runner_stores_episodes_and_the_report_is_built_above_it(tmp_path):
    """rollout/ runs and stores a run's episodes and writes no report; the report that
    ``robogen.runs.evaluation`` builds from them is the one ``evaluate`` writes."""
    from robogen.rollout.runner import run_evaluation
    from robogen.runs.evaluation import finish_report

    store = run_evaluation(_cfg(tmp_path / "run", "serial", axes=["physics"], combined=False))
    assert len(store.load_results()) == 6 * 2 and store.done_units()
    assert not list(store.run_dir.glob("report.*"))
    outcome = finish_report(store)
    direct = evaluate(_cfg(tmp_path / "direct", "serial", axes=["physics"], combined=False))
    assert outcome.n_episodes == direct.n_episodes == 12
    assert _strip(store.load_results()) == _strip(ResultStore.open(direct.run_dir).load_results())
    assert sorted(outcome.files) == sorted(direct.files)


def test_a_sequential_run_needs_no_stop_rule_from_above(tmp_path):
    """rollout/ takes the stop rule of --episodes auto from robogen.stats itself: the runner
    alone runs and resumes a sequential run, stopping where evaluate (with a report) does."""
    from robogen.rollout.runner import ResumeOptions, resume_run, run_evaluation

    kw = dict(axes=["physics"], combined=False, episodes="auto", target_halfwidth=0.2,
              max_episodes=16, batch_size=8)
    store = run_evaluation(_cfg(tmp_path / "auto", "serial", **kw))
    direct = evaluate(_cfg(tmp_path / "direct", "serial", **kw))
    assert not list(store.run_dir.glob("report.*"))
    assert _strip(store.load_results()) == _strip(ResultStore.open(direct.run_dir).load_results())
    assert len(store.load_results()) == direct.n_episodes
    done = store.done_units()
    again = resume_run(store.run_dir, ResumeOptions(backend="serial"))  # nothing left to run
    assert again.done_units() == done


_TORCH_PROBE = """
import sys
from robogen.configs import load_eval_config
from robogen.rollout.runner import prepare
from robogen.rollout.worker import EpisodeWorker
cfg = load_eval_config(None, env={env!r}, policy={policy!r}, episodes=2, axes=["physics"],
                       combined=False, backend="serial", videos=0, out={out!r}, {extra})
worker = EpisodeWorker(prepare(cfg))
torch = sys.modules.get("torch")
print("threads", None if torch is None else torch.get_num_threads())
"""


@pytest.mark.parametrize(("env", "policy", "extra", "threads"), [
    ("robogen/Reach-v0", "expert:reach", "", "None"),  # torch is never imported
    ("gymnasium/Reacher-v5", "sb3:robogen/assets/checkpoints/ppo_reacher.zip",
     "vecnormalize='robogen/assets/checkpoints/ppo_reacher_vecnormalize.pkl'", "1"),
])
def test_a_worker_imports_torch_only_for_a_torch_policy(tmp_path, env, policy, extra, threads):
    code = _TORCH_PROBE.format(env=env, policy=policy, out=str(tmp_path / "r"), extra=extra)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=Path(__file__).resolve().parents[2], check=True)
    assert out.stdout.split()[-2:] == ["threads", threads]


def test_ray_workers_run_xla_on_one_thread_after_the_users_flags(monkeypatch):
    """Ray workers get XLA:CPU on one thread (their envs' render thread and the other workers
    use the other cores); a user's own ``XLA_FLAGS`` come after robogen's, so they win."""
    from robogen.rollout.ray_backend import _worker_env

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert _worker_env()["XLA_FLAGS"] == (
        "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
    flags = _worker_env()["XLA_FLAGS"].split()
    assert flags[-1] == "--xla_cpu_multi_thread_eigen=true" and len(flags) == 3


def test_ctrl_c_on_a_serial_eval_stops_its_unit_and_exits_130(tmp_path):
    """Ctrl-C: the worker thread stops its unit between two steps and is waited for, so the
    process exits 130 with the resume command; before, that thread was still inside MuJoCo
    when the interpreter exited and the process crashed (SIGSEGV) in most tries."""
    degraded = Path(__file__).resolve().parents[1] / "check" / "degraded_policies.py"
    out = tmp_path / "run"
    with sigint_inherited():
        proc = subprocess.Popen(
            [sys.executable, "-m", "robogen.cli", "eval", "--env", "robogen/Reach-v0", "--policy",
             f"python:{degraded}:nominal_kinematics_reach", "--axes", "embodiment",
             "--severities", "1", "--episodes", "60", "--batch-size", "2", "--backend",
             "serial", "--videos", "0", "--out", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list((out / "episodes").glob("unit-*.parquet")) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert f"interrupted; finish it with: robogen eval --resume {out}" in err
    store = ResultStore.open(out)
    assert 0 < len(store.done_units()) < len(plan_units(store.manifest))
