"""``map_calls``: several calls as parallel Ray tasks on the embedded cluster, or in process.

``robogen eval --policy A --policy B`` films each run's failure videos this way.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from robogen.rollout.backends import map_calls

CALLS = [("the quick brown fox", 12), ("jumps over", 20), ("the lazy dog again", 10)]
EXPECTED = ["the [...]", "jumps over", "the [...]"]
BAD = [("fine", 10), ("too narrow", 2)]  # textwrap.shorten: "placeholder too large"


def test_in_process_keeps_call_order_and_raises_the_calls_error() -> None:
    assert map_calls(textwrap.shorten, CALLS, on_ray=False) == EXPECTED
    with pytest.raises(ValueError, match="placeholder too large"):
        map_calls(textwrap.shorten, BAD, on_ray=False)
    assert map_calls(textwrap.shorten, [], on_ray=True) == []  # nothing needs no cluster


RAY_SIDE = """
import textwrap
import pytest
from robogen.rollout.backends import map_calls, start_ray_cluster, stop_ray_cluster
start_ray_cluster(None, num_cpus=2)
try:
    assert map_calls(textwrap.shorten, {calls!r}, on_ray=True) == {expected!r}
    # Ray's wrapper is removed: the call's own exception type arrives
    with pytest.raises(ValueError, match="placeholder too large"):
        map_calls(textwrap.shorten, {bad!r}, on_ray=True)
finally:
    stop_ray_cluster()
print("ok")
"""


def test_ray_tasks_keep_call_order_and_raise_the_calls_own_error() -> None:
    """On a real embedded cluster, in a process of its own: Ray's local start switches the
    process to token auth for good (``RAY_AUTH_MODE=token``, also cached inside Ray), and the
    loopback clusters of later tests in this process run with auth disabled."""
    code = RAY_SIDE.format(calls=CALLS, expected=EXPECTED, bad=BAD)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]
