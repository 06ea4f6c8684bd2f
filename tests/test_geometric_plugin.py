"""A geometric axis in one module + one registration (issue 36): the ``table_height``
plug-in (``tests/fixtures/plugins/table_height_axis.py``) raises the table through MjSpec,
and the task, its object, the distractor region and the safety drop check follow it with no
edit anywhere in robogen. Run in a child process, so the registration stays out of this
session's registries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parent / "fixtures" / "plugins" / "table_height_axis.py"


def test_a_table_height_axis_is_one_module() -> None:
    proc = subprocess.run([sys.executable, str(PLUGIN)], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["changed"] == ["table_height"]
    raised = got["top"] - got["nominal_top"]
    assert 0.04 - 1e-9 <= raised <= 0.08 + 1e-9  # train split at severity 1: up 4-8 cm
    # the object stands on the raised top, and distractors (and the drop check) use it too
    assert got["object_z"] == pytest.approx(got["top"] + got["object_half"], abs=1e-6)
    assert got["distractor_z"] == pytest.approx(got["top"], abs=1e-9)
