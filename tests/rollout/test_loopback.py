"""The embedded Ray cluster of ``robogen eval`` (no ``--address``) listens on loopback only.

The run happens in a child process (this file run as a script): an embedded cluster started
in pytest's own process would stay that process's last Ray session, and a later test that
joins a ``ray start`` cluster from the same process starts no worker (a Ray-level limit of
one driver process meeting two clusters).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import subprocess
import sys
from pathlib import Path

import psutil

from robogen.configs import load_eval_config
from robogen.rollout.ray_backend import ray_is_up, shutdown_ray
from robogen.runs.evaluation import evaluate


def _is_loopback(host: str) -> bool:
    ip = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a dual-stack socket bound to ::ffff:127.0.0.1
    return ip.is_loopback


def _listening() -> list[tuple[str, str, int]]:
    """(process name, host, port) of every listening TCP socket and every bound UDP socket
    of this process and its descendants (the embedded cluster's GCS, raylet, agents and
    workers are all started under the driver)."""
    me = psutil.Process()
    out = []
    for p in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
            name = p.name()
            for c in p.net_connections(kind="inet"):
                if c.laddr and (c.status == psutil.CONN_LISTEN or c.status == psutil.CONN_NONE):
                    out.append((name, c.laddr.ip, c.laddr.port))
    return out


def _run(out: Path) -> dict:
    """The embedded run, in this (child) process; the sockets seen mid-run."""
    shutdown_ray()  # the run must start its own embedded cluster
    seen: list[list[tuple[str, str, int]]] = []

    def progress(done: int, total: int) -> None:
        if done < total and ray_is_up():  # mid-run: every Ray process is up
            seen.append(_listening())

    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach",
                           axes=["physics"], severities=[1.0], combined=False, episodes=4,
                           batch_size=1, seed=0, max_steps=10, videos=0, backend="ray",
                           workers=2, out=out)
    outcome = evaluate(cfg, progress=progress)
    return {"n_episodes": outcome.n_episodes, "seen": seen}


def test_embedded_cluster_listens_on_loopback_only(tmp_path):
    proc = subprocess.run([sys.executable, __file__, str(tmp_path / "r")], capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["n_episodes"] == 8
    assert got["seen"], "the progress callback never ran while the cluster was up"
    sockets = [tuple(s) for s in got["seen"][0]]
    names = {name for name, _, _ in sockets}
    # the check sees the cluster's own servers (else it could not fail)
    assert {"gcs_server", "raylet"} <= names, sockets
    assert [s for s in sockets if not _is_loopback(s[1])] == []


if __name__ == "__main__":
    print(json.dumps(_run(Path(sys.argv[1]))))
