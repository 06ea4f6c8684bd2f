"""Worker losses and unit retries of a run, kept in ``RUN_DIR/faults.jsonl``.

Every event where the machinery failed rather than the policy is one
:class:`FaultRecord`: an actor or node that died, an actor that never started, a unit
that ran past its wall-clock budget, and what was done about it (the unit retried, or its
episodes recorded with an invalid cause). The report lists them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from robogen.serialization import Record, encode

FAULTS = "faults.jsonl"

FaultKind = Literal["actor_died", "actor_start_timeout", "unit_timeout", "node_lost"]
FaultAction = Literal["retried", "recorded", "dropped", "replaced"]


@dataclass(frozen=True, slots=True)
class FaultRecord(Record):
    """One loss or retry.

    Attributes:
        time_unix_s: When the driver saw it [s since the epoch].
        kind: ``actor_died`` (the worker process or its node died), ``actor_start_timeout``
            (an actor not placed/started in time), ``unit_timeout`` (a unit past its
            budget; its worker was killed), ``node_lost`` (a cluster node went away).
        action: ``retried`` (the unit went back to the queue), ``recorded`` (its episodes
            were stored with cause ``cause``), ``dropped`` (the pool shrank),
            ``replaced`` (a new worker was started).
        unit_id: The unit affected (-1 if none).
        attempt: Which start of the unit this was (1 = first; 0 if no unit).
        worker: The worker (``ray:<actor id>`` or ``serial:<pid>``).
        node: Ray node id of the worker ("" if unknown or serial).
        cause: Episode cause the fault maps to (``worker_died``, ``infra_timeout``).
        error: What the driver saw.
    """

    time_unix_s: float
    kind: str
    action: str
    unit_id: int = -1
    attempt: int = 0
    worker: str = ""
    node: str = ""
    cause: str = ""
    error: str = ""

    @classmethod
    def now(cls, kind: FaultKind, *, action: FaultAction, **fields: Any) -> FaultRecord:
        """A record stamped with the current time."""
        return cls(time.time(), kind, action, **fields)


FaultSink = Callable[[FaultRecord], None]


@dataclass(frozen=True, slots=True)
class UnitPlacement(Record):
    """Where a unit's stored episodes ran (its last attempt), kept in its part's metadata.

    Attributes:
        worker: The worker (``ray:<actor id>`` or ``serial:<pid>``).
        node: Ray node id of the worker ("" for the serial backend).
    """

    worker: str
    node: str = ""


def _short(node: str) -> str:
    return node[:12] or "?"


def fault_line(record: FaultRecord) -> str:
    """One terminal line for ``record``: what was lost or started, where, and what follows."""
    r = record
    where = f"{r.worker or 'a worker'} on node {_short(r.node)}" if r.node else (
        r.worker or "a worker")
    unit = f"unit {r.unit_id}" if r.unit_id >= 0 else ""
    then = {"retried": f"{unit} runs again", "recorded": f"the episodes of {unit} are recorded "
            f"as {r.cause}", "dropped": "the run goes on with the other workers"}
    if r.action == "replaced":
        return f"worker {where} started in place of a lost one ({r.error})"
    if r.kind == "node_lost":
        return f"node {_short(r.node)} lost ({r.error}); its units run on the other nodes"
    what = {"actor_died": f"worker {where} died" + (f" running {unit}" if unit else ""),
            "unit_timeout": f"{unit} ran past its budget on worker {where}",
            "actor_start_timeout": f"worker {where} did not start"}.get(r.kind, r.kind)
    return f"{what} ({r.error}); {then.get(r.action, r.action)}"


def append_fault(run_dir: Path, record: FaultRecord) -> None:
    """Append ``record`` as one JSON line to ``run_dir/faults.jsonl`` (flushed at once)."""
    with open(Path(run_dir) / FAULTS, "a", encoding="utf-8") as f:
        f.write(json.dumps(encode(record)) + "\n")
        f.flush()


def load_faults(run_dir: Path) -> list[FaultRecord]:
    """The faults of a run, oldest first (none if the file is absent; a torn last line
    from a killed run is skipped)."""
    path = Path(run_dir) / FAULTS
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(FaultRecord.from_dict(json.loads(line)))
        except (ValueError, TypeError):
            continue
    return out
