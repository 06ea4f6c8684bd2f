"""remote: policies on rollout workers: endpoints by worker index, a server lost before the
workers load the policy, per-episode server latency (issue 10 §1)."""

from __future__ import annotations

import json
import sys

import gymnasium as gym
import numpy as np
import pytest

from robogen.configs import load_eval_config
from robogen.policies.adapter import parse_remote_uri
from robogen.policies.base import LatencyReporting, LoadContext
from robogen.policies.remote import RemotePolicy
from robogen.rollout.runner import RETRIED_ON_RESUME
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate, resume
from tests.test_serve import ENV, FAST, FIXTURE, Server, servers  # noqa: F401 (fixture)

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),  # servers start by fork+exec
]


def _ctx(worker_index: int) -> LoadContext:
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    return LoadContext(ENV, box, box, worker_index=worker_index)


def test_endpoints_are_taken_round_robin_by_worker_index():
    endpoints, spec = parse_remote_uri("ws://127.0.0.1:1,ws://127.0.0.1:2,ws://127.0.0.1:3")
    for w in range(5):
        policy = RemotePolicy(endpoints, spec, _ctx(w))  # connects lazily: no server needed
        assert isinstance(policy, LatencyReporting)
        assert [policy.endpoint_of(k) for k in range(3)] == [
            endpoints[(w + k) % 3] for k in range(3)]
        assert np.isnan(policy.episode_latency_ms(0))  # no request made yet


def _server(started: list[Server], port: int = 0) -> Server:
    s = Server([sys.executable, FIXTURE, "--port", str(port)])
    started.append(s)
    return s


def test_a_server_lost_before_the_ray_workers_load_is_infra_error_and_resume_reruns_it(
        tmp_path, servers):  # noqa: F811
    srv = _server(servers)
    port = srv.port

    def server_dies(_manifest):  # noqa: ANN001, ANN202 - after the driver's probe
        srv.stop()

    cfg = load_eval_config(None, env=ENV, policy=f"remote:{srv.url}?{FAST}", axes=["physics"],
                           severities=[1.0], combined=False, episodes=2, batch_size=1,
                           max_steps=10, backend="ray", workers=1, videos=0,
                           out=tmp_path / "r")
    out = evaluate(cfg, check_manifest=server_dies)
    results = ResultStore.open(out.run_dir).load_results()
    assert len(results) == 4  # the run completed
    assert {r.cause for r in results} == {"infra_error"}  # not sim_unstable, not worker_died
    assert all("could not load the policy" in r.error and f"policy server {srv.url}" in r.error
               for r in results)
    assert all(r.policy_latency_ms is None for r in results)
    report = json.loads((out.run_dir / "report.json").read_text())
    assert all(c["n"] == 0 and c["n_invalid"] == 2 for c in report["conditions"])

    assert "infra_error" in RETRIED_ON_RESUME
    _server(servers, port)  # back on the same port: --resume reruns the infra_error cells
    resume(out.run_dir, backend="serial")
    again = ResultStore.open(out.run_dir).load_results()
    assert len(again) == 4
    assert all(r.cause == "timeout" and r.length_steps == 10 for r in again), again
    assert all(r.policy_latency_ms is not None and r.policy_latency_ms > 0 for r in again)
    report = json.loads((out.run_dir / "report.json").read_text())
    for c in report["conditions"]:
        mine = [r.policy_latency_ms for r in again if r.condition == c["condition"]]
        assert c["mean_policy_latency_ms"] == pytest.approx(float(np.mean(mine)))
    assert "server latency [ms]" in (out.run_dir / "report.md").read_text()
    assert "server latency [ms]" in (out.run_dir / "report.html").read_text()
