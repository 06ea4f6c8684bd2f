"""Faults on real processes: a two-node Ray cluster on loopback that loses a node, more
workers than CPUs, a policy that hangs, a worker killed by the OS (issue 8)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from robogen.configs import load_eval_config
from robogen.rollout.faults import load_faults
from robogen.rollout.plan import episode_seed
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate, resume
from tests.rollout.cluster import LoopbackCluster

HANG = "python:tests/fixtures/infra_policies.py:hang"
SUICIDE = "python:tests/fixtures/infra_policies.py:suicide"


@pytest.fixture
def cluster():
    c = LoopbackCluster()
    try:
        yield c
    finally:
        c.close()


def _cfg(out: Path, **kw):
    base = dict(env="robogen/Reach-v0", policy="expert:reach", axes=["physics"],
                severities=[1.0], combined=False, episodes=8, batch_size=2, seed=3,
                max_steps=20, videos=0, out=out)
    base.update(kw)
    return load_eval_config(None, **base)


def _key(results):
    return sorted((dataclasses.replace(r, wall_time_s=0.0) for r in results),
                  key=lambda r: (r.condition, r.episode_index))


def test_run_finishes_on_the_survivor_when_a_node_is_lost(cluster, tmp_path, capsys,
                                                          monkeypatch):
    """Three nodes, two workers: the node of a worker is killed mid-run; the run finishes,
    its lost node (only it) is recorded, a replacement worker starts on the spare node, the
    terminal says so, and every stored unit names the node that ran it."""
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("ROBOGEN_TEST_MARK_DIR", str(marks))
    cluster.env["ROBOGEN_TEST_MARK_DIR"] = str(marks)  # the nodes' workers inherit it
    cluster.add_node()  # the head (the driver's node)
    cluster.add_node()
    cluster.add_node()
    nodes = {cluster.node_id(pid) for pid in cluster.raylets}
    killed: list[str] = []
    waited: list[int] = []
    run_dir = tmp_path / "ray"

    def progress(done: int, total: int) -> None:
        if done >= 4 and not killed:  # four units stored: kill a node running a worker
            busy = cluster.raylets_running("_WorkerActor")
            if busy:
                killed.append(cluster.node_id(busy[0]))
                cluster.kill_node(busy[0])
        elif killed and not waited and any(f.kind == "actor_died" for f in load_faults(run_dir)):
            waited.append(done)
            # the driver saw the loss and asked for a replacement: let it load its policy
            # (the driver's, the two workers' and the replacement's marks) before the run
            # ends on the survivor
            deadline = time.monotonic() + 60
            while len(list(marks.iterdir())) < 4 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1.0)  # its load returns, then its ping

    cfg = _cfg(run_dir, backend="ray", address=cluster.address, workers=2, batch_size=1,
               policy="python:tests/fixtures/infra_policies.py:marked_reach")
    out = evaluate(cfg, progress=progress)
    assert killed
    got = ResultStore.open(out.run_dir).load_results()
    want = ResultStore.open(evaluate(cfg.model_copy(
        update={"backend": "serial", "out": tmp_path / "serial"})).run_dir).load_results()
    # nothing lost, nothing repeated, and the same episodes as the serial backend
    assert Counter((r.condition, r.episode_index) for r in got) == Counter(
        (c, i) for c in ("nominal", "physics@1") for i in range(8))
    assert _key(got) == _key(want)
    faults = load_faults(out.run_dir)
    died = [f for f in faults if f.kind == "actor_died" and f.action == "retried"]
    assert died and all(f.unit_id >= 0 and f.worker.startswith("ray:") for f in died)
    assert {f.node for f in died} == set(killed)
    # the node lost in this run, named once, and no other
    assert [f.node for f in faults if f.kind == "node_lost"] == killed
    replaced = [f for f in faults if f.action == "replaced"]
    assert len(replaced) == 1 and replaced[0].kind == "actor_died"
    assert replaced[0].node in nodes - set(killed)
    assert died[0].worker in replaced[0].error and replaced[0].worker != died[0].worker
    err = " ".join(capsys.readouterr().err.split())
    assert f"node {killed[0][:12]} lost" in err and "died running unit" in err
    assert "started in place of a lost one" in err
    # every unit names its worker and node; after the loss, only surviving nodes
    store = ResultStore.open(out.run_dir)
    placed = {u: store.unit_placement(u) for u in store.done_units()}
    assert all(p is not None and p.worker.startswith("ray:") and p.node in nodes
               for p in placed.values()), placed
    retried = {f.unit_id for f in died}
    assert all(placed[u].node not in killed for u in retried)  # type: ignore[union-attr]
    report = json.loads((out.run_dir / "report.json").read_text())
    assert any(f["kind"] == "actor_died" for f in report["faults"])
    assert "actor_died" in (out.run_dir / "report.md").read_text()


@pytest.mark.slow
def test_more_workers_than_cluster_cpus_completes_with_a_warning(cluster, tmp_path):
    cluster.add_node()
    cluster.add_node()
    from robogen.rollout.ray_backend import ClusterWarning

    with pytest.warns(ClusterWarning, match="--workers 3"):
        out = evaluate(_cfg(tmp_path / "r", backend="ray", address=cluster.address, workers=3,
                            episodes=4))
    assert out.n_episodes == 8


@pytest.mark.parametrize("backend", ["serial", "ray"])
def test_hung_policy_ends_as_infra_timeout_and_resume_retries_it(backend, tmp_path,
                                                                 monkeypatch):
    flag = tmp_path / "hang.flag"
    flag.write_text("hang")
    monkeypatch.setenv("ROBOGEN_TEST_HANG_FLAG", str(flag))
    cfg = load_eval_config(None, env="gymnasium/Reacher-v5", policy=HANG, axes=["physics"],
                           severities=[1.0], combined=False, episodes=3, batch_size=1, seed=0,
                           max_steps=20, videos=0, backend=backend, workers=2,
                           unit_timeout=6.0, out=tmp_path / "r")
    out = evaluate(cfg)
    results = ResultStore.open(out.run_dir).load_results()
    assert len(results) == 6
    hung = [r for r in results if r.cause == "infra_timeout"]
    assert sorted((r.condition, r.episode_index) for r in hung) == [
        ("nominal", 1), ("physics@1", 1)]
    assert all(r.seed == episode_seed(0, 1) and "6 s" in r.error and "worker" in r.error
               for r in hung)
    assert all(r.cause != "infra_timeout" and r.length_steps == 20
               for r in results if r.episode_index != 1)
    faults = [f for f in load_faults(out.run_dir) if f.kind == "unit_timeout"]
    # (and a "replaced" record for each killed worker's replacement that came up in time)
    assert Counter(f.action for f in faults if f.action != "replaced") == {
        "retried": 2, "recorded": 2}
    report = json.loads((out.run_dir / "report.json").read_text())
    nominal = next(c for c in report["conditions"] if c["condition"] == "nominal")
    assert nominal["n_invalid"] == 1 and nominal["n"] == 2

    flag.unlink()  # the policy works now: --resume retries the timed-out cells
    resume(out.run_dir, backend=backend, workers=2)
    again = ResultStore.open(out.run_dir).load_results()
    assert len(again) == 6 and not [r for r in again if r.cause == "infra_timeout"]


def test_a_worker_killed_by_the_os_is_worker_died_and_left_out(tmp_path, monkeypatch):
    flag = tmp_path / "kill.flag"
    flag.write_text("kill")
    monkeypatch.setenv("ROBOGEN_TEST_HANG_FLAG", str(flag))
    cfg = load_eval_config(None, env="gymnasium/Reacher-v5", policy=SUICIDE, axes=["physics"],
                           severities=[1.0], combined=False, episodes=3, batch_size=1, seed=0,
                           max_steps=20, videos=0, backend="ray", workers=2,
                           out=tmp_path / "r")
    out = evaluate(cfg)
    results = ResultStore.open(out.run_dir).load_results()
    died = [r for r in results if r.cause == "worker_died"]
    assert sorted((r.condition, r.episode_index) for r in died) == [
        ("nominal", 1), ("physics@1", 1)]
    report = json.loads((out.run_dir / "report.json").read_text())
    for c in report["conditions"]:
        assert c["n_invalid"] == 1 and c["n"] == 2
        assert c["mean_length"] == 20.0  # the dead episode's length 0 is not averaged in


@pytest.mark.parametrize("flags, expected", [
    (["--address", "127.0.0.1:1"], "no Ray cluster answers at --address '127.0.0.1:1'"),
    (["--num-gpus-per-worker", "4"], "--num-gpus-per-worker 4 asks for GPUs"),
    (["--unit-timeout", "0"], "unit_timeout"),
])
def test_cluster_setup_errors_exit_2_and_leave_no_run_dir(flags, expected, tmp_path):
    from typer.testing import CliRunner

    from robogen.cli import app

    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["eval", "--env", "robogen/Reach-v0", "--policy",
                                   "expert:reach", "--axes", "physics", "--episodes", "2",
                                   "--max-steps", "5", "--videos", "0", "--out", str(out),
                                   *flags])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and expected in text, text
    assert not out.exists()
