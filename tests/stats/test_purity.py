"""robogen.stats is a library of pure estimators: it reads and writes no file and imports
nothing from robogen but the foundation (read from the AST of every module under stats/)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import robogen.stats

STATS = Path(robogen.stats.__file__).parent

ALLOWED_ROBOGEN = frozenset({"robogen.errors", "robogen.types", "robogen.serialization"})
"""Foundation modules stats/ may import (besides its own modules)."""
ALLOWED_MODULES = frozenset({
    "__future__", "collections", "dataclasses", "functools", "itertools", "math", "numbers",
    "statistics", "typing", "warnings", "numpy", "scipy",
})
"""Top-level modules stats/ may import: the standard library's pure parts, NumPy, SciPy."""
FILE_CALLS = frozenset({
    "open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink",
    "load", "loadtxt", "save", "savez", "savez_compressed", "savetxt", "fromfile", "tofile",
    "genfromtxt", "memmap",
})
"""Call names (functions or methods) that read or write files."""


def violations(source: str, module: str) -> list[str]:
    """Every import outside the allowed set and every file-I/O call in ``source``."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            targets = ["robogen.stats" if node.level else node.module or ""]
        elif isinstance(node, ast.Call):
            f = node.func
            name = (f.id if isinstance(f, ast.Name)
                    else f.attr if isinstance(f, ast.Attribute) else "")
            if name in FILE_CALLS:
                bad.append(f"{module} line {node.lineno}: file I/O call {name}()")
            continue
        else:
            continue
        for t in targets:
            if t.startswith("robogen"):
                if t not in ALLOWED_ROBOGEN and not (t + ".").startswith("robogen.stats."):
                    bad.append(f"{module} line {node.lineno}: imports {t} (foundation only)")
            elif t.split(".")[0] not in ALLOWED_MODULES:
                bad.append(f"{module} line {node.lineno}: imports {t} (numpy/scipy/pure stdlib)")
    return bad


@pytest.mark.parametrize("path", sorted(STATS.glob("*.py")), ids=lambda p: p.name)
def test_stats_modules_are_pure(path: Path) -> None:
    assert violations(path.read_text(), path.name) == []


@pytest.mark.parametrize("source, expected", [
    ("from robogen.rollout.store import ResultStore", "imports robogen.rollout.store"),
    ("import robogen.reports", "imports robogen.reports"),
    ("import pyarrow.parquet as pq", "imports pyarrow.parquet"),
    ("from pathlib import Path", "imports pathlib"),
    ("x = open('f').read()", "file I/O call open()"),
    ("import numpy as np\nnp.save('f.npy', x)", "file I/O call save()"),
    ("p.write_text('x')", "file I/O call write_text()"),
])
def test_the_check_catches_a_planted_violation(source: str, expected: str) -> None:
    assert [v.split(": ", 1)[1].split(" (")[0] for v in violations(source, "x.py")] == [expected]


def test_allowed_imports_pass() -> None:
    src = ("from __future__ import annotations\nimport numpy as np\nfrom scipy.stats import t\n"
           "from robogen.errors import InvalidSpecError\nfrom robogen.stats.anytime import METHOD\n"
           "from .intervals import wilson_interval\n")
    assert violations(src, "x.py") == []
