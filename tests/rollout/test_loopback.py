"""The embedded Ray cluster of ``robogen eval`` (no ``--address``) listens on loopback only."""

from __future__ import annotations

import contextlib
import ipaddress

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


def test_embedded_cluster_listens_on_loopback_only(tmp_path):
    shutdown_ray()  # the run must start its own embedded cluster
    seen: list[list[tuple[str, str, int]]] = []

    def progress(done: int, total: int) -> None:
        if done < total and ray_is_up():  # mid-run: every Ray process is up
            seen.append(_listening())

    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach",
                           axes=["physics"], severities=[1.0], combined=False, episodes=4,
                           batch_size=1, seed=0, max_steps=10, videos=0, backend="ray",
                           workers=2, out=tmp_path / "r")
    out = evaluate(cfg, progress=progress)
    assert out.n_episodes == 8
    assert seen, "the progress callback never ran while the cluster was up"
    sockets = seen[0]
    names = {name for name, _, _ in sockets}
    # the check sees the cluster's own servers (else it could not fail)
    assert {"gcs_server", "raylet"} <= names, sockets
    assert [s for s in sockets if not _is_loopback(s[1])] == []
