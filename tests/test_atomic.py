from __future__ import annotations

import stat

import pytest

from robogen._atomic import atomic_path, write_atomic


def test_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "sub" / "report.json"
    write_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # readable like any output
