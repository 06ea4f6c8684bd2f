"""A real Ray cluster of separate nodes on loopback, started with ``ray start`` (tests only).

Each node gets ``--num-cpus`` CPUs; all share one private ``--temp-dir``, so other
clusters on the machine (other users, other test runs) are never touched: processes are
found by that directory in their command line and stopped by PID, never with
``ray stop`` (which stops every Ray cluster of the machine).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    for _ in range(50):
        port = random.randint(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


class LoopbackCluster:
    """Nodes of one Ray cluster on 127.0.0.1; :meth:`close` kills every process it started."""

    def __init__(self) -> None:
        self.temp_dir = tempfile.mkdtemp(prefix="rg-ray-", dir="/tmp")
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
        self.env.pop("RAY_ADDRESS", None)
        self.raylets: list[int] = []

    def _ours(self) -> list[psutil.Process]:
        out = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            with contextlib.suppress(psutil.Error):
                if any(self.temp_dir in a for a in (p.info["cmdline"] or [])):
                    out.append(p)
        return out

    def _raylet_pids(self) -> set[int]:
        pids = set()
        for p in self._ours():
            with contextlib.suppress(psutil.Error):
                if Path(p.cmdline()[0]).name == "raylet":
                    pids.add(p.pid)
        return pids

    def add_node(self, num_cpus: int = 1, num_gpus: int = 0) -> int:
        """Start a node (the first is the head); returns its raylet's PID. ``num_gpus``
        declares GPUs Ray hands out (``CUDA_VISIBLE_DEVICES`` per actor) whether or not the
        machine has them."""
        before = self._raylet_pids()
        args = [RAY, "start", f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}",
                "--node-ip-address=127.0.0.1", f"--temp-dir={self.temp_dir}",
                "--disable-usage-stats"]
        if not self.raylets:
            args += ["--head", f"--port={self.port}", "--include-dashboard=false"]
        else:
            args += [f"--address={self.address}"]
        subprocess.run(args, env=self.env, check=True, capture_output=True, timeout=180)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            new = self._raylet_pids() - before
            if new:
                pid = min(new)
                self.raylets.append(pid)
                return pid
            time.sleep(0.2)
        raise RuntimeError("the node's raylet did not appear")

    @staticmethod
    def node_id(raylet_pid: int) -> str:
        """The Ray node id of the node whose raylet has ``raylet_pid``."""
        for arg in psutil.Process(raylet_pid).cmdline():
            if arg.startswith("--node_id="):
                return arg.split("=", 1)[1]
        raise RuntimeError(f"process {raylet_pid} is not a raylet")

    def raylets_running(self, marker: str) -> list[int]:
        """Raylets (PIDs, head excluded) with a worker process whose title contains
        ``marker`` (e.g. an actor class name)."""
        out = []
        for pid in self.raylets[1:]:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if marker in " ".join(child.cmdline()):
                            out.append(pid)
                            break
        return out

    def kill_node(self, raylet_pid: int) -> None:
        """SIGKILL a node's raylet and its worker processes at once, as a lost machine."""
        procs = [psutil.Process(raylet_pid)]
        with contextlib.suppress(psutil.Error):
            procs += procs[0].children(recursive=True)
        for p in procs:
            with contextlib.suppress(psutil.Error):
                os.kill(p.pid, signal.SIGKILL)

    def close(self) -> None:
        for _ in range(3):
            procs = self._ours()
            if not procs:
                break
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            psutil.wait_procs(procs, timeout=10)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
