"""One writer per run directory: an advisory lock with its owner's pid and host.

A run (``robogen eval``, ``--resume``) holds ``RUN_DIR/.writer.lock`` while it runs episodes.
A second process that would write the same run (a ``--resume`` of a run still going, two
resumes at once) is refused with the owner named, before it touches anything (it would run the
same units twice and delete the other's temporary parts). The lock is ``flock(2)``: the kernel
releases it when its process ends however it ends, so a lock left by a killed run is stale and
the next writer takes it over; the file only says who held it last. It is advisory and local:
processes on other machines sharing the folder over NFS are not stopped by it.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from pathlib import Path
from types import TracebackType

from robogen.errors import RunDirError

LOCK_FILE = ".writer.lock"
"""The lock file in a run directory."""

RUN_DIR_BUSY = (
    "run directory {run_dir!r} is being written by process {pid} on {host} (since {since}); a "
    "second writer would run the same units twice: wait for it to end, or stop it (kill {pid}) "
    "and then robogen eval --resume {run_dir}"
)
"""Message of the :class:`~robogen.errors.RunDirError` that refuses a second writer."""


class RunDirLock:
    """Hold a run directory's writer lock (a context manager; re-entrant in one process only
    through the same object).

    Args:
        run_dir: The run directory (it must exist).

    Raises:
        RunDirError: On enter, if another live process holds it (:data:`RUN_DIR_BUSY`).
    """

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)
        self._fd: int | None = None

    def acquire(self) -> RunDirLock:
        """Take the lock (a stale one, whose process ended, is taken over); returns self.

        Raises:
            RunDirError: If another live process holds it.
        """
        import fcntl

        if self._fd is not None:
            return self
        path = self.run_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(fd)
            os.close(fd)
            raise RunDirError(RUN_DIR_BUSY.format(
                run_dir=str(self.run_dir), pid=owner.get("pid", "?"),
                host=owner.get("host", "?"), since=owner.get("since", "?"))) from None
        except BaseException:
            os.close(fd)
            raise
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "since": datetime.datetime.now().isoformat(timespec="seconds")})
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Let go of the lock (also done by the kernel when the process ends)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _owner(fd: int) -> dict[str, object]:
    """The pid, host and start time the lock's holder wrote ({} if unreadable)."""
    try:
        data = os.pread(fd, 4096, 0)
        owner = json.loads(data.decode() or "{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}
