"""``NodeWatch``: a run counts as lost only the nodes that died after it started."""

from __future__ import annotations

import socket

from robogen.rollout.nodes import NodeWatch, raylet_answers


def _row(node: str, alive: bool = True, port: int = 0) -> dict:
    return {"NodeID": node, "Alive": alive, "NodeManagerAddress": "127.0.0.1",
            "NodeManagerPort": port}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once closed


def test_nodes_dead_before_the_run_are_not_its_losses():
    with socket.socket() as raylet:  # a node whose raylet still answers
        raylet.bind(("127.0.0.1", 0))
        raylet.listen()
        up = raylet.getsockname()[1]
        gone = _closed_port()
        watch = NodeWatch([_row("old", alive=False), _row("a", port=up), _row("b", port=gone)])
        assert raylet_answers(_row("a", port=up)) and not raylet_answers(_row("b", port=gone))
        now = [_row("old", alive=False), _row("a", port=up), _row("b", port=gone)]
        assert watch.lost(now) == []  # Ray still says b is alive, and b is not suspected
        assert watch.lost(now, suspect="a") == []  # a worker of a died; its node answers
        lost = watch.lost(now, suspect="b")  # a worker of b died; b's raylet is gone
        assert [n for n, _ in lost] == ["b"] and "refuses connections" in lost[0][1]
        later = [_row("old", alive=False), _row("a", alive=False, port=up),
                 _row("b", alive=False, port=gone)]
        assert watch.lost(later) == [("a", "Ray reports the node dead")]  # b reported once
        assert watch.lost(later) == []
