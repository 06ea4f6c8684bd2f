"""A full disk while the report is written (by ``robogen eval`` or ``robogen report``): the
message names the file, says every episode is stored and that ``robogen report RUN_DIR``
rebuilds the report; exit 2, no partial file. On a real small tmpfs where mounting works,
else with an injected ENOSPC."""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.reports.writers import REPORT_HTML, REPORT_JSON, REPORT_MD, REPORT_WRITE_FAILED
from robogen.rollout.store import ResultStore

EVAL = ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach", "--axes", "physics",
        "--severities", "1", "--max-steps", "20", "--videos", "0", "--backend", "serial",
        "--episodes", "4", "--batch-size", "2"]
N_EPISODES = 8
DISK = 128 * 1024
"""Room for the run's episodes, manifest and config (~50 KB), not for its report (~130 KB of
plots and HTML)."""


@contextlib.contextmanager
def _small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on a :data:`DISK` tmpfs; where mounting is not allowed, a folder where every
    report file write fails with ENOSPC (the episodes are written)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mnt)],
                             capture_output=True).returncode == 0
    if not mounted:
        from robogen.reports import writers

        def full(path: Path, data: bytes) -> Path:
            raise OSError(errno.ENOSPC, "No space left on device")  # no file name, as write()

        monkeypatch.setattr(writers, "atomic_write_bytes", full)
    try:
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _check_message(output: str, out: Path, *, first: bool) -> None:
    text = " ".join(output.split())
    head = REPORT_WRITE_FAILED.split("{path!r}")[0]
    assert head in text and "No space left on device" in text, text
    named = Path(text.split(head, 1)[1].split(" (", 1)[0].strip("'"))
    assert named.parent in (out, out / "plots"), named  # a report file of the run
    if first:
        assert not named.exists()  # no partial file
    assert f"all {N_EPISODES} episodes of the run are stored in {str(out)!r}" in text
    assert f"rebuild the report with: robogen report {out}" in text
    assert "Traceback" not in output
    assert not [p for p in out.rglob(".*") if p.name != ".writer.lock"]  # no temporaries


def test_a_full_disk_at_the_report_stage_names_the_file_and_the_rebuild(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    with _small_disk(tmp_path, monkeypatch) as disk:
        out = disk / "run"
        res = runner.invoke(app, [*EVAL, "--out", str(out)])
        assert res.exit_code == 2, res.output
        _check_message(res.output, out, first=True)
        assert ResultStore.open(out).stored_episodes() == N_EPISODES
        again = runner.invoke(app, ["report", str(out)])  # still full: the same message
        assert again.exit_code == 2, again.output
        _check_message(again.output, out, first=False)
        moved = tmp_path / "moved"
        shutil.copytree(out, moved)
    monkeypatch.undo()
    rebuilt = runner.invoke(app, ["report", str(moved)])  # room elsewhere: the report is built
    assert rebuilt.exit_code == 0, rebuilt.output
    report = json.loads((moved / REPORT_JSON).read_text())
    assert sum(c["n"] + c["n_invalid"] for c in report["conditions"]) == N_EPISODES
    assert (moved / REPORT_HTML).is_file() and (moved / REPORT_MD).is_file()
