"""One writer per run directory, and SIGTERM ends a run like Ctrl-C (issue 26).

SIGTERM (a batch scheduler, ``docker stop``) sent to a real ``robogen eval`` driver on the
serial backend, on an embedded Ray cluster, and to the driver's whole process group (its Ray
processes too): the driver keeps the stored parts, leaves no temporary file, prints the resume
command and exits 143 (before: 143 with no message, Ray's 15 with its stack dump, 134 Aborted);
the resumed run has every episode once. Two real processes on one run directory: the second
writer is refused, a dead writer's lock is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robogen._console import EXIT_TERMINATED
from robogen.rollout.runner import plan_units
from robogen.rollout.store import EPISODES_DIR, ResultStore

pytestmark = pytest.mark.timeout(300)

ARGS = ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach", "--axes", "embodiment",
        "--severities", "1", "--episodes", "60", "--batch-size", "2", "--videos", "0"]


@pytest.mark.parametrize("how", ["serial", "ray", "ray-process-group"])
def test_sigterm_keeps_the_parts_prints_the_resume_and_exits_143(tmp_path: Path, how: str
                                                                  ) -> None:
    out = tmp_path / "run"
    backend = "serial" if how == "serial" else "ray"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen([sys.executable, "-m", "robogen.cli", *ARGS, "--backend", backend,
                             "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    deadline = time.time() + 180
    while not list((out / EPISODES_DIR).glob("unit-*.parquet")) and time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)
    if how == "ray-process-group":
        os.killpg(proc.pid, signal.SIGTERM)  # the driver and the Ray processes it started
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_TERMINATED, err[-3000:]
    assert f"terminated (SIGTERM); finish it with: robogen eval --resume {out}" in err
    assert "SIGTERM received" not in err and "Traceback" not in err, err[-3000:]
    store = ResultStore.open(out)
    total = len(plan_units(store.manifest))
    assert 0 < len(store.done_units()) < total
    assert not list((out / EPISODES_DIR).glob(".unit-*"))  # no half-written part
    resumed = subprocess.run([sys.executable, "-m", "robogen.cli", "eval", "--resume", str(out),
                              "--backend", "serial"], capture_output=True, text=True, env=env,
                             timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    results = ResultStore.open(out).load_results()
    assert sorted((r.condition, r.episode_index) for r in results) == sorted(
        (c, i) for c in ("nominal", "embodiment@1") for i in range(60))


def test_a_second_writer_is_refused_and_a_dead_ones_lock_is_taken_over(tmp_path: Path) -> None:
    """Two real processes on one run directory: a --resume of a run still going exits 2
    naming the running process (and touches nothing); once that process is killed (SIGKILL:
    no clean-up at all), --resume takes its stale lock over and finishes the run. The first
    writer is held inside its second unit by a policy that hangs there while a flag file
    exists (``tests/fixtures/infra_policies.py:hang``), so it is surely still running."""
    from robogen.rollout.lock import LOCK_FILE, RUN_DIR_BUSY

    out = tmp_path / "run"
    flag = tmp_path / "hang"
    flag.touch()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["ROBOGEN_TEST_HANG_FLAG"] = str(flag)
    args = ["eval", "--env", "robogen/Reach-v0", "--policy",
            "python:tests/fixtures/infra_policies.py:hang", "--axes", "embodiment",
            "--severities", "1", "--episodes", "4", "--batch-size", "1", "--max-steps", "20",
            "--videos", "0", "--backend", "serial", "--out", str(out)]
    first = subprocess.Popen([sys.executable, "-m", "robogen.cli", *args],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 180
        while not list((out / EPISODES_DIR).glob("unit-*.parquet")) and time.time() < deadline:
            assert first.poll() is None
            time.sleep(0.05)
        parts = {p.name for p in (out / EPISODES_DIR).iterdir()}
        second = subprocess.run([sys.executable, "-m", "robogen.cli", "eval", "--resume",
                                 str(out), "--backend", "serial"], capture_output=True,
                                text=True, env=env, timeout=120)
        assert second.returncode == 2, second.stderr[-2000:]
        text = " ".join(second.stderr.split())
        assert RUN_DIR_BUSY.split("{pid}")[0].format(run_dir=str(out)) + str(first.pid) in text
        assert first.poll() is None  # the first writer goes on, its files untouched
        assert parts == {p.name for p in (out / EPISODES_DIR).iterdir()}
    finally:
        first.kill()
        first.wait(30)
    assert (out / LOCK_FILE).is_file()  # left behind by the killed writer: stale
    flag.unlink()
    resumed = subprocess.run([sys.executable, "-m", "robogen.cli", "eval", "--resume", str(out),
                              "--backend", "serial"], capture_output=True, text=True, env=env,
                             timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(ResultStore.open(out).load_results()) == 2 * 4
