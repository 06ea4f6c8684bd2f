"""Atomic file writes: a temporary file in the same folder, then ``os.replace``.

Every file robogen writes that a reader (or a resumed run) may open goes
through here, so a process killed at any moment leaves either the old file or
the complete new one, never half of it. Temporaries are named
``.<name>.<random><suffix>`` so that resumes can find and delete stale ones.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` (mode 0644).

    Args:
        path: Final file path (its folder is created if missing).
        suffix: Suffix of the temporary (a writer that picks its format from
            the extension, like imageio, needs the real one).

    On an exception the temporary is deleted and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically; returns ``path``."""
    raw = data.encode() if isinstance(data, str) else data
    with atomic_path(path) as tmp:
        tmp.write_bytes(raw)
    return Path(path)
