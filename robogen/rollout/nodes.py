"""Which cluster nodes a run lost: Ray's node table at the run's start against each failure.

A Ray cluster keeps the nodes that died in its node table (``Alive: False``) for its whole
life, so a run on a cluster that lost a node earlier must not count that node as its own
loss. :class:`NodeWatch` remembers the nodes already dead when the run started and, at each
worker loss, names the nodes lost since. Ray marks a node dead only after its health checks
have failed for a while (~15-30 s), long after the actors on it died; so the node of the
worker that died is also asked directly: a raylet that no longer accepts connections on its
node-manager port is a lost node now.

Pure bookkeeping on the rows of ``ray.nodes()`` (this module does not import Ray).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from typing import Any

RAYLET_CONNECT_TIMEOUT_S = 1.0
"""How long the driver waits for a raylet to accept a connection before counting its node as
lost [s]."""


def _dead(table: Iterable[Mapping[str, Any]]) -> set[str]:
    return {str(n["NodeID"]) for n in table if not n.get("Alive", True)}


def raylet_answers(row: Mapping[str, Any], timeout_s: float = RAYLET_CONNECT_TIMEOUT_S) -> bool:
    """Whether the raylet of a ``ray.nodes()`` row accepts a TCP connection on its
    node-manager port (True when the row does not say where it listens: nothing to check)."""
    host, port = row.get("NodeManagerAddress"), row.get("NodeManagerPort")
    if not host or not port:
        return True
    try:
        with socket.create_connection((str(host), int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


class NodeWatch:
    """The nodes a run lost, from ``ray.nodes()`` rows.

    Args:
        table: ``ray.nodes()`` when the run started; the nodes dead then are never reported.
    """

    def __init__(self, table: Iterable[Mapping[str, Any]]) -> None:
        self._gone = _dead(table)

    def lost(self, table: Iterable[Mapping[str, Any]], suspect: str = "") -> list[tuple[str, str]]:
        """The nodes lost since the run started and not reported yet, as ``(node id, why)``.

        Args:
            table: ``ray.nodes()`` now.
            suspect: The node of a worker that just died: lost too if its raylet no longer
                accepts connections, before Ray marks it dead.
        """
        rows = list(table)
        out: list[tuple[str, str]] = []
        for row in rows:
            node = str(row["NodeID"])
            if node in self._gone:
                continue
            if not row.get("Alive", True):
                why = "Ray reports the node dead"
            elif node == suspect and not raylet_answers(row):
                why = (f"its raylet at {row['NodeManagerAddress']}:{row['NodeManagerPort']} "
                       "refuses connections")
            else:
                continue
            self._gone.add(node)
            out.append((node, why))
        return out
