"""remote: policies against real policy-server processes on loopback.

Two servers are used: ``robogen serve`` (robogen's own) and ``tests/fixtures/openpi_server.py``,
written from openpi's protocol with its own codec (and able to fail on purpose).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import robogen
from robogen.cli import app
from robogen.configs import load_eval_config
from robogen.envs import make
from robogen.errors import InfrastructureError
from robogen.policies import LoadContext, load_policy
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate
from robogen.serve import PRIVILEGED

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore:.*settotalmass.*"),
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),  # servers start by fork+exec
]

ENV = "gymnasium/Reacher-v5"
CKPT_DIR = Path(robogen.__file__).parent / "assets" / "checkpoints"
CKPT, VECNORM = CKPT_DIR / "ppo_reacher.zip", CKPT_DIR / "ppo_reacher_vecnormalize.pkl"
FIXTURE = "tests/fixtures/openpi_server.py"
FAST = "timeout_s=1&retries=1&backoff_s=0.05"


class Server:
    """A server subprocess; ``port`` is read from its ``listening on`` line."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: list[str] = []
        self.port = 0
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            m = re.search(r"listening on (?:ws://[\d.]+:)?(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        assert self.port, "".join(self.lines)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        s.stop()


def robogen_serve(started: list[Server], *args: str) -> Server:
    s = Server([sys.executable, "-m", "robogen.cli", "serve", "--env", ENV, "--port", "0", *args])
    started.append(s)
    return s


def fixture_server(started: list[Server], mode: str = "ok", after: int = 0,
                   horizon: int = 4) -> Server:
    s = Server([sys.executable, FIXTURE, "--mode", mode, "--after", str(after),
                "--horizon", str(horizon)])
    started.append(s)
    return s


def run(tmp_path: Path, name: str, policy: str, **kw):  # noqa: ANN003, ANN201
    args = dict(env=ENV, policy=policy, axes=["physics"], severities=[1.0], combined=False,
                episodes=3, max_steps=50, batch_size=2, backend="serial", videos=0,
                out=tmp_path / name)
    args.update(kw)
    out = evaluate(load_eval_config(None, **args))
    return ResultStore.open(out.run_dir).load_results()


def outcomes(results):  # noqa: ANN001, ANN201
    return sorted((r.condition, r.episode_index, r.success, r.episode_return, r.length_steps,
                   r.cause) for r in results)


@pytest.mark.parametrize("served", ["sb3", "random"])
def test_served_policy_gives_the_in_process_episodes(tmp_path, servers, served):
    if served == "sb3":
        uri, extra = f"sb3:{CKPT}", {"vecnormalize": str(VECNORM)}
        srv = robogen_serve(servers, "--policy", uri, "--vecnormalize", str(VECNORM))
    else:
        uri, extra = "random:3", {}
        srv = robogen_serve(servers, "--policy", uri)
    # in-process one episode per policy call, as the server sees it
    ref = run(tmp_path, "ref", uri, batch_size=1, **extra)
    got = run(tmp_path, "remote", f"remote:{srv.url}")
    assert outcomes(got) == outcomes(ref)
    assert all(r.cause in (None, "timeout") for r in got)
    if served == "sb3":
        assert any(r.success for r in got)  # the comparison covers successes too
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/healthz", timeout=5) as resp:
        assert resp.status == 200


@pytest.mark.parametrize("replan", [1, 3])
def test_action_chunks_match_in_process_chunking(tmp_path, servers, replan):
    srv = fixture_server(servers, horizon=4)
    ref = run(tmp_path, "ref", f"python:{FIXTURE}:replan{replan}", max_steps=20)
    got = run(tmp_path, "remote", f"remote:{srv.url}?replan_steps={replan}", max_steps=20)
    assert outcomes(got) == outcomes(ref)
    other = run(tmp_path, "other", f"python:{FIXTURE}:replan{4 - replan}", max_steps=20)
    assert outcomes(other) != outcomes(ref)  # chunking changes the episodes: the test can fail


# probes: 1 (loader in the driver) + 1 + 2 (the runner's probe: batches of 1 and 2) + 1 (the
# worker's loader)
PROBES = 5


@pytest.mark.parametrize("mode", ["error", "hang", "die"])
def test_server_fault_mid_run_is_an_infra_error(tmp_path, servers, mode):
    srv = fixture_server(servers, mode=mode, after=PROBES + 2 * 5)  # 5 steps of the first unit
    got = run(tmp_path, "r", f"remote:{srv.url}?{FAST}", episodes=2, max_steps=10)
    assert len(got) == 4  # nothing dropped, no hang
    assert {r.cause for r in got} == {"infra_error"}
    assert not any(r.success for r in got)
    assert sorted(r.length_steps for r in got) == [0, 0, 5, 5]
    # one retry chain failed (2 tries), then the endpoint was down for the unit, and got one
    # try in the next unit (tests/test_remote_faults.py)
    assert all(f"policy server {srv.url} is down for the rest of this work unit" in r.error
               for r in got), [r.error for r in got]
    if mode == "error":
        assert all("fixture fault" in r.error for r in got)  # the server's traceback tail


def test_failover_to_a_live_endpoint(tmp_path, servers):
    dying = fixture_server(servers, mode="die", after=PROBES + 3)
    live = fixture_server(servers)
    ref = run(tmp_path, "ref", f"python:{FIXTURE}:replan1", max_steps=20, episodes=2)
    got = run(tmp_path, "r", f"remote:{dying.url},{live.url}?{FAST}", max_steps=20, episodes=2)
    assert dying.proc.wait(10) == 3  # it did die mid-run
    assert outcomes(got) == outcomes(ref)


def _eval(tmp_path: Path, policy: str):  # noqa: ANN202
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["eval", "--env", ENV, "--policy", policy, "--out", str(out),
                                   "--episodes", "1", "--backend", "serial", "--axes", "physics"])
    return res, out


def test_wrong_action_shape_stops_before_any_episode(tmp_path, servers):
    srv = fixture_server(servers, mode="shape")
    res, out = _eval(tmp_path, f"remote:{srv.url}")
    assert res.exit_code == 2, res.output
    msg = " ".join(res.output.split())
    assert f"policy server {srv.url} answered the probe observation with 'actions' of shape " \
           "(4, 3)" in msg
    assert "action_slice=start:stop" in msg
    assert not out.exists()
    res, _ = _eval(tmp_path, f"remote:{srv.url}?action_slice=0:2")  # the fix works
    assert res.exit_code == 0, res.output


def test_unreachable_or_raising_server_stops_before_any_episode(tmp_path, servers):
    srv = fixture_server(servers, mode="error")
    res, out = _eval(tmp_path, f"remote:{srv.url}")
    assert res.exit_code == 2 and not out.exists()
    assert "raised on the probe observation" in " ".join(res.output.split())
    port = srv.port
    srv.stop()
    res, out = _eval(tmp_path, f"remote:ws://127.0.0.1:{port}?retries=0")
    assert res.exit_code == 2 and not out.exists()
    assert f"policy server ws://127.0.0.1:{port} failed 1 time(s)" in " ".join(res.output.split())


def test_api_key_is_required_when_given(servers, monkeypatch):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    monkeypatch.delenv("ROBOGEN_API_KEY", raising=False)
    srv = robogen_serve(servers, "--policy", "random", "--api-key", "s3cret")
    env = make(ENV)
    ctx = LoadContext(ENV, env.observation_space, env.action_space)
    env.close()
    with pytest.raises(InvalidStatus, match="401"):
        connect(srv.url, open_timeout=5)
    with pytest.raises(InfrastructureError, match="HTTP 401"):
        load_policy(f"remote:{srv.url}?retries=0", ctx)
    monkeypatch.setenv("ROBOGEN_API_KEY", "s3cret")
    policy = load_policy(f"remote:{srv.url}", ctx)
    obs = np.zeros((2, 10), np.float32)
    a = policy.act(obs, slots=[0, 1])
    assert a.shape == (2, 2) and a.dtype == np.float32 and np.all(np.abs(a) <= 1)
    policy.close()


def test_experts_cannot_be_served():
    res = CliRunner().invoke(app, ["serve", "--policy", "expert:reach", "--env",
                                   "robogen/Reach-v0", "--port", "0"])
    assert res.exit_code == 2
    assert PRIVILEGED.format(uri="expert:reach") in " ".join(res.output.split())
