"""Ray workers handed on from one policy's backend to the next (``robogen eval --policy A
--policy B`` on an embedded cluster), and failure videos filmed on them."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from robogen.rollout.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]
LOGGED = ROOT / "tests" / "fixtures" / "logged_policies.py"
POLICIES = {"expert": f"python:{LOGGED}:reach_expert",
            "degraded": f"python:{LOGGED}:nominal_kinematics_reach"}


def _eval(out: Path, backend: str, log: Path) -> int:
    """``robogen eval`` of both logged policies; returns the driver's PID."""
    args = [str(Path(sys.executable).with_name("robogen")), "eval", "--env", "robogen/Reach-v0",
            "--policy", POLICIES["expert"], "--policy", POLICIES["degraded"],
            "--axes", "embodiment,physics", "--severities", "1", "--episodes", "4",
            "--batch-size", "2", "--seed", "1", "--videos", "1", "--backend", backend,
            "--out", str(out)]
    if backend == "ray":
        args += ["--workers", "2"]
    env = {**os.environ, "ROBOGEN_TEST_LOAD_LOG": str(log)}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-3000:]
    return proc.pid


def _episodes(run: Path) -> list:
    return sorted((dataclasses.replace(r, wall_time_s=0.0, policy_id="")
                   for r in ResultStore.open(run).load_results()),
                  key=lambda r: (r.condition, r.episode_index))


def test_the_second_policy_runs_and_films_on_the_first_policys_workers(tmp_path: Path) -> None:
    log = tmp_path / "loads.txt"
    driver = _eval(tmp_path / "ray", "ray", log)
    loads: dict[str, set[tuple[int, int]]] = defaultdict(set)
    lines = log.read_text().split("\n")
    for line in filter(None, lines):
        name, pid, index = line.split()
        if int(pid) != driver:  # the driver probes each policy once
            loads[name].add((int(pid), int(index)))
    workers = loads["reach_expert"]
    assert len(workers) == 2 and {i for _, i in workers} == {0, 1}, lines
    # the same two processes ran the second policy (no new process, nothing loaded twice),
    # and its failure video was filmed on one of them with the policy already loaded
    assert loads["nominal_kinematics_reach"] == workers, lines
    assert len([ln for ln in lines if ln and int(ln.split()[1]) != driver]) == 4, lines
    runs = {"expert": tmp_path / "ray" / "reach_expert",
            "degraded": tmp_path / "ray" / "nominal_kinematics_reach"}
    videos = sorted((runs["degraded"] / "videos").glob("*.mp4"))
    assert [v.name for v in videos] == ["embodiment-1-ep0000.mp4"], videos
    assert "replay differs" not in (runs["degraded"] / "videos" / "index.json").read_text()
    # the same episodes as the serial backend gives, each policy on its own
    _eval(tmp_path / "serial", "serial", tmp_path / "serial-loads.txt")
    for name, run in runs.items():
        serial = _episodes(tmp_path / "serial" / run.name)
        assert _episodes(run) == serial, name
        assert len(serial) == 4 * 4
    assert any(not r.success for r in _episodes(runs["degraded"]))


LOST_PARKED_WORKER = """
import os, signal, time
import ray
from robogen.configs import load_eval_config
from robogen.rollout.backend import BackendOptions
from robogen.rollout.backends import start_ray_cluster, stop_ray_cluster
from robogen.rollout.ray_backend import RayBackend, reuse_workers, _PARKED
import robogen.rollout.ray_backend as rb
from robogen.rollout.runner import plan_units, prepare

def manifest(policy):
    return prepare(load_eval_config(None, env="robogen/Reach-v0", policy=policy,
                                    axes=["physics"], severities=[1.0], episodes=4,
                                    batch_size=2, seed=0, videos=0))

start_ray_cluster(None, num_cpus=2)
try:
    with reuse_workers():
        a = RayBackend(manifest("expert:reach"), BackendOptions(kind="ray"), shutdown=False)
        a.start()
        pids = sorted(x.pid for x in a.idle)
        a.close()
        parked = sorted(x.pid for x in rb._PARKED)
        os.kill(parked[0], signal.SIGKILL)
        time.sleep(1.0)
        m = manifest("random")
        b = RayBackend(m, BackendOptions(kind="ray"), shutdown=False)
        faults = []
        b.fault_sink = faults.append
        results = []
        b.run(plan_units(m), lambda unit, rows: results.extend(rows))
        alive = sorted(x.pid for x in b.idle)
        b.close()
    print("pids", pids == parked, "size", b.size, "episodes", len(results),
          "causes", sorted({str(r.cause) for r in results}),
          "faults", sorted({f.kind for f in faults}),
          "kept", parked[1] in alive, "replaced", parked[0] not in alive and len(alive) == 2)
finally:
    stop_ray_cluster()
"""


def test_a_parked_worker_that_died_is_replaced_and_the_run_completes() -> None:
    done = subprocess.run([sys.executable, "-c", LOST_PARKED_WORKER], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line == ("pids True size 2 episodes 8 causes ['timeout'] faults ['actor_died'] "
                    "kept True replaced True"), line


def test_an_actor_keeps_the_workers_of_its_last_two_manifests(monkeypatch) -> None:
    """Memory stays bounded however many policies an actor runs in turn: the workers (envs
    and policy) of older manifests are closed; filming an older run makes its worker again."""
    from robogen.configs import load_eval_config
    from robogen.rollout import ray_backend
    from robogen.rollout.runner import prepare
    from robogen.rollout.worker import EpisodeWorker
    from robogen.types import to_dict

    monkeypatch.setattr(ray_backend._WorkerActor, "ping", lambda self: {"error": self._error})
    closed: list[str] = []
    monkeypatch.setattr(EpisodeWorker, "close", lambda self: closed.append(self.manifest.policy))
    manifests = [to_dict(prepare(load_eval_config(
        None, env="robogen/Reach-v0", policy=p, axes=["physics"], severities=[1.0],
        episodes=2, seed=0, videos=0))) for p in ("expert:reach", "random:1", "random:2")]
    actor = ray_backend._WorkerActor(manifests[0], "cpu", 0)
    for m in manifests[1:]:
        assert actor.load(m, 0) == {"error": None}
    kept = [w.manifest.policy for w in actor._workers.values()]
    assert kept == ["random:1", "random:2"] and closed == ["expert:reach"]
    policy_of = lambda *, worker: worker.manifest.policy  # noqa: E731
    assert actor.call(policy_of, manifests[0]) == "expert:reach"  # made again, random:1 closed
    assert [w.manifest.policy for w in actor._workers.values()] == ["random:2", "expert:reach"]
    assert closed == ["expert:reach", "random:1"] and actor._worker.manifest.policy == "random:2"
