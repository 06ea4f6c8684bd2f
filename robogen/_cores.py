"""The CPU cores this process may run on (its affinity mask, not the machine's count)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """CPU cores this process may use: ``os.sched_getaffinity`` where the OS has it (a
    container or ``taskset`` may allow fewer than ``os.cpu_count()``), else ``os.cpu_count()``;
    at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
