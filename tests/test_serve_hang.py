"""A hung policy behind a real ``robogen serve`` (issue 26): inference runs off the event loop
with a per-request timeout, so the hung request and the ones queued behind it get an error
frame, ``/healthz`` keeps answering (503 while the act() hangs), a ``remote:`` evaluation
against it ends with invalid episodes instead of waiting, and SIGTERM stops the server at
once (before: one hung act() blocked every connection and /healthz, and SIGTERM was
ignored)."""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import msgpack
import numpy as np
import pytest

from robogen.serve import INFER_TIMED_OUT
from tests.fixtures.infra_policies import HANG_SEED
from tests.test_serve import ENV, Server, servers

__all__ = ["servers"]

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")]

HANG = "python:tests/fixtures/infra_policies.py:hang"


def _serve(started: list[Server], flag: Path, timeout_s: float) -> Server:
    os.environ["ROBOGEN_TEST_HANG_FLAG"] = str(flag)  # the server process inherits it
    try:
        s = Server([sys.executable, "-m", "robogen.cli", "serve", "--env", ENV, "--port", "0",
                    "--policy", HANG, "--request-timeout", str(timeout_s)])
    finally:
        del os.environ["ROBOGEN_TEST_HANG_FLAG"]
    started.append(s)
    return s


def _health(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _obs() -> bytes:
    state = np.zeros(10, np.float32)  # Reacher-v5's observation
    return msgpack.packb({"observation/state": {
        b"__ndarray__": True, b"data": state.tobytes(), b"dtype": state.dtype.str,
        b"shape": list(state.shape)}})


def test_a_hung_act_times_out_health_stays_up_and_sigterm_stops_the_server(tmp_path, servers):
    from websockets.sync.client import connect

    flag = tmp_path / "hang"
    flag.touch()
    srv = _serve(servers, flag, timeout_s=2)
    hung = connect(srv.url, max_size=None)
    hung.recv(timeout=10)  # metadata
    hung.send(msgpack.packb({"__robogen__": "reset", "seed": HANG_SEED}))
    hung.recv(timeout=10)
    hung.send(_obs())  # this act() never returns while the flag exists
    t0 = time.monotonic()
    error = hung.recv(timeout=30)
    assert isinstance(error, str), error
    assert INFER_TIMED_OUT.split("{timeout")[0] in error and "after 2 s" in error
    assert time.monotonic() - t0 < 20  # answered at its timeout, not never
    status, body = _health(srv.port)  # the event loop is free: health answers, and says why
    assert status == 503 and "inference busy for" in body, (status, body)
    other = connect(srv.url, max_size=None)  # a request queued behind the hung act()
    other.recv(timeout=10)
    other.send(_obs())
    queued = other.recv(timeout=30)
    assert isinstance(queued, str) and "another request's act() has been running" in queued
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(30) == 0  # stopped although a thread is still inside act()
    assert time.monotonic() - t0 < 20


def test_a_remote_evaluation_of_a_hung_served_policy_ends_invalid(tmp_path, servers):
    from typer.testing import CliRunner

    from robogen.cli import EXIT_INVALID_EPISODES, app
    from robogen.rollout.store import ResultStore

    flag = tmp_path / "hang"
    flag.touch()
    srv = _serve(servers, flag, timeout_s=1)
    out = tmp_path / "run"
    res = CliRunner().invoke(app, [
        "eval", "--env", ENV, "--policy", f"remote:{srv.url}?timeout_s=5&retries=1&backoff_s=0.1",
        "--axes", "physics", "--severities", "1", "--no-combined", "--episodes", "2",
        "--batch-size", "1", "--max-steps", "10", "--videos", "0", "--backend", "serial",
        "--out", str(out)])
    assert res.exit_code == EXIT_INVALID_EPISODES, res.output
    results = ResultStore.open(out).load_results()
    hung = [r for r in results if r.episode_index == 1]  # the episode whose seed hangs
    assert hung and all(r.cause == "infra_error" for r in hung), [(r.cause, r.error)
                                                                for r in results]
    assert any("inference timed out after 1 s" in (r.error or "") for r in hung)
