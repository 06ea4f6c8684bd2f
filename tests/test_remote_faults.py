"""Remote policies under faults (issue 27), against real server processes on loopback, on
both backends: the unit's budget bounds a hung request (the worker records ``infra_timeout``
itself, no watchdog retry); a server that dies marks its endpoint down for the rest of the unit
(one retry chain, then every other request fails at once) and gets one try per later unit; a run
whose conditions are all invalid exits 3; the manifest records what the server said of itself,
and a server sending longer chunks than ``replan_steps`` without it set gets a warning; several
image keys send several cameras of the same scene."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from robogen.cli import EXIT_INVALID_EPISODES, INVALID_RUN, app
from robogen.configs import load_eval_config
from robogen.policies.remote import BUDGET_SPENT, RemotePolicyWarning
from robogen.reports.writers import load_report
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate
from tests.test_serve import ENV, FAST, FIXTURE, PROBES, Server, fixture_server, servers

__all__ = ["servers"]  # the fixture, used by name

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:.*settotalmass.*"),
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),
]

BACKENDS = ["serial", "ray"]
DOWN = "is down for the rest of this work unit"


def _cli(tmp_path: Path, policy: str, backend: str, *extra: str):  # noqa: ANN202
    out = tmp_path / "run"
    args = ["eval", "--env", ENV, "--policy", policy, "--out", str(out), "--backend", backend,
            "--axes", "physics", "--severities", "1", "--no-combined", "--videos", "0", *extra]
    if backend == "ray":
        args += ["--workers", "1"]
    return CliRunner().invoke(app, args), out


@pytest.mark.parametrize("mode", ["hang", "freeze"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_unit_budget_bounds_a_hung_request(tmp_path, servers, backend, mode):
    """timeout_s=10 with 3 retries would wait ~40 s per request; --unit-timeout 3 ends each
    unit's wait before the watchdog (its episodes recorded by the worker itself, no watchdog
    retry), exit 3: a server whose handler hangs, and a stopped server process (no close
    handshake either)."""
    srv = fixture_server(servers, mode=mode, after=PROBES + 3)
    try:
        res, out = _cli(tmp_path, f"remote:{srv.url}?timeout_s=10", backend, "--episodes",
                        "1", "--max-steps", "20", "--unit-timeout", "3")
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    assert res.exit_code == EXIT_INVALID_EPISODES, res.output
    results = ResultStore.open(out).load_results()
    assert {r.condition: r.cause for r in results} == {
        "nominal": "infra_timeout", "physics@1": "infra_timeout"}
    head = BUDGET_SPENT.split("{endpoint}")[0]
    assert all(r.error and head in r.error for r in results), [r.error for r in results]
    assert load_report(out).faults == ()  # the worker ended the unit; none was abandoned
    text = " ".join(res.output.split())
    assert INVALID_RUN.split("{n}")[1].split("{names}")[0].format() in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dead_server_fails_one_retry_chain_then_fast(tmp_path, servers, backend):
    srv = fixture_server(servers, mode="die", after=PROBES + 2 * 3)  # dies in the first unit
    res, out = _cli(tmp_path, f"remote:{srv.url}?{FAST}", backend, "--episodes", "6",
                    "--batch-size", "2", "--max-steps", "10")
    assert srv.proc.wait(10) == 3
    assert res.exit_code == EXIT_INVALID_EPISODES, res.output
    results = ResultStore.open(out).load_results()
    assert len(results) == 12 and {r.cause for r in results} == {"infra_error"}
    # the unit it died in ran one retry chain, then its own rows and every later request (one
    # try per unit) failed without one: each episode says the endpoint is down, none that a
    # fresh chain of its own failed ("failed 2 time(s)")
    assert all(DOWN in r.error for r in results), [r.error for r in results]
    assert all("failed 2 time(s)" not in r.error for r in results)
    assert sorted(r.length_steps for r in results) == [0] * 10 + [3, 3]


def test_a_down_endpoint_gets_one_try_per_unit_and_recovers(tmp_path, servers):
    """Unit by unit on one worker: a server that hangs for a while is down for its unit,
    tried once in the next, and used again once it answers."""
    import time

    from robogen.envs import make
    from robogen.policies import LoadContext, load_policy

    srv = fixture_server(servers, mode="hang", after=1)  # the probe is answered
    env = make(ENV)
    ctx = LoadContext(env_id=ENV, observation_space=env.observation_space,
                      action_space=env.action_space)
    policy = load_policy(f"remote:{srv.url}?timeout_s=0.5&retries=1&backoff_s=0.01", ctx)
    obs, _ = env.reset(seed=0)
    policy.begin_unit(time.monotonic() + 30)
    policy.reset([0, 1])
    with pytest.raises(Exception, match="failed 2 time"):
        policy.act(obs[None], slots=[0])
    t0 = time.perf_counter()
    with pytest.raises(Exception, match=DOWN):
        policy.act(obs[None], slots=[1])
    assert time.perf_counter() - t0 < 0.4  # no request was made: shorter than one timeout
    port = srv.port
    srv.stop()
    servers.append(Server([sys.executable, FIXTURE, "--port", str(port)]))  # back, answering
    policy.begin_unit(time.monotonic() + 30)
    assert policy.act(obs[None], slots=[1]).shape == (1, 2)
    policy.close()
    env.close()


def test_a_replacement_worker_loads_within_the_unit_budget(tmp_path, servers):
    """A worker that loads the policy while the server hangs (a replacement after a unit
    timeout) gives up at its load budget, not after timeout_s x retries; its units' episodes
    are infra_timeout within their own budget."""
    from robogen.rollout.runner import plan_units, prepare
    from robogen.rollout.worker import EpisodeWorker

    srv = fixture_server(servers, mode="hang", after=PROBES - 1)  # the driver's are answered
    cfg = load_eval_config(None, env=ENV, policy=f"remote:{srv.url}?timeout_s=10",
                           axes=["physics"], severities=[1.0], episodes=2, max_steps=5,
                           backend="serial", videos=0)
    manifest = prepare(cfg)
    worker = EpisodeWorker(manifest, load_budget_s=3)
    try:
        assert worker.policy is None
        assert worker.load_error is not None
        assert BUDGET_SPENT.split("{endpoint}")[0] in worker.load_error
        results = worker.run_unit(plan_units(manifest)[0], budget_s=3)
        assert {r.cause for r in results} == {"infra_timeout"}
    finally:
        worker.close()


def test_manifest_records_the_server_and_warns_on_longer_chunks(tmp_path, servers):
    srv = fixture_server(servers, horizon=4)

    def cfg(policy: str, out: str):  # noqa: ANN202
        return load_eval_config(None, env=ENV, policy=policy, axes=["physics"], severities=[1.0],
                                episodes=1, max_steps=5, backend="serial", videos=0,
                                out=tmp_path / out)

    with pytest.warns(RemotePolicyWarning, match="returns chunks of 4 actions"):
        evaluate(cfg(f"remote:{srv.url}", "r"))
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    (server,) = manifest["policy_load"]["servers"]
    assert server == {"endpoint": srv.url, "action_horizon": 4, "action_dim": 2,
                      "reply_keys": ["actions", "server_timing"],
                      "metadata": {"name": "fixture"}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RemotePolicyWarning)  # replan_steps given: no warning
        evaluate(cfg(f"remote:{srv.url}?replan_steps=2", "r2"))


def test_several_image_keys_send_several_cameras(tmp_path, servers):
    s = Server([sys.executable, FIXTURE, "--act-dim", "6", "--log"])
    servers.append(s)
    query = "image_key=observation/image,observation/wrist_image&cameras=top"
    cfg = load_eval_config(None, env="robogen/Reach-v0", policy=f"remote:{s.url}?{query}",
                           obs_mode="state+pixels", axes=["lighting"], severities=[1.0],
                           episodes=1, max_steps=3, backend="serial", videos=0,
                           out=tmp_path / "r")
    evaluate(cfg)
    results = ResultStore.open(tmp_path / "r").load_results()
    assert all(r.cause in (None, "timeout") for r in results), [r.error for r in results]
    logged = [ln for ln in s.lines if ln.startswith("request ")]
    assert len(logged) >= PROBES + 2 * 3
    for line in logged:
        arrays = dict(re.findall(r"(\S+?):(\S+:\S+)", line.split(": ", 1)[1]))
        assert set(arrays) == {"observation/image", "observation/wrist_image",
                               "observation/state"}, line
        assert arrays["observation/image"].startswith("84x84x3:")
        assert arrays["observation/wrist_image"].startswith("84x84x3:")
    run = [dict(re.findall(r"(\S+?):\S+:(\d+)", ln.split(": ", 1)[1])) for ln in logged[PROBES:]]
    assert all(r["observation/image"] != r["observation/wrist_image"] for r in run)  # 2 views
    bad = CliRunner().invoke(app, ["eval", "--env", "robogen/Reach-v0", "--obs-mode",
                                   "state+pixels", "--policy",
                                   f"remote:{s.url}?image_key=a,b&cameras=no_such_cam",
                                   "--backend", "serial", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "no camera 'no_such_cam'" in " ".join(bad.output.split())
    assert not (tmp_path / "bad").exists()
