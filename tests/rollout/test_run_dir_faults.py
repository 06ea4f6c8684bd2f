"""What disks do to a run directory (issue 26): a damaged episode part is named, set aside
under ``damaged_parts/`` and its unit rerun by ``robogen eval --resume`` (``robogen report``
on the damaged run says so, exit 2); a full disk mid-run (a real small tmpfs where it can be
mounted, else an injected ENOSPC) stops the run with the path, the episodes stored and the
resume command, leaving no partial file, and the resumed run loses and repeats nothing."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from robogen.cli import app
from robogen.rollout.runner import DAMAGED_PART
from robogen.rollout.store import DAMAGED_DIR, EPISODES_DIR, STORE_WRITE_FAILED, ResultStore

EVAL = ["eval", "--env", "robogen/Reach-v0", "--policy", "expert:reach", "--axes", "physics",
        "--severities", "1", "--max-steps", "30", "--videos", "0", "--backend", "serial"]


def _episodes(run_dir: Path) -> list:
    return sorted((dataclasses.replace(r, wall_time_s=0.0)
                   for r in ResultStore.open(run_dir).load_results()),
                  key=lambda r: (r.condition, r.episode_index))


def test_resume_sets_damaged_parts_aside_and_reruns_their_units(tmp_path: Path) -> None:
    out = tmp_path / "run"
    runner = CliRunner()
    made = runner.invoke(app, [*EVAL, "--episodes", "6", "--batch-size", "2", "--out", str(out)])
    assert made.exit_code == 0, made.output
    before = _episodes(out)
    parts = sorted((out / EPISODES_DIR).glob("unit-*.parquet"))
    assert len(parts) == 6
    data = parts[1].read_bytes()
    parts[1].write_bytes(data[: len(data) // 2])  # truncated (a full disk, a killed copy)
    parts[3].write_bytes(b"")  # empty
    parts[4].write_bytes(parts[0].read_bytes())  # another unit's episodes
    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 2
    assert "sets it aside and redoes its episodes" in " ".join(report.output.split())

    resumed = runner.invoke(app, ["eval", "--resume", str(out), "--backend", "serial"])
    assert resumed.exit_code == 0, resumed.output
    text = " ".join(resumed.output.split())
    head = DAMAGED_PART.split("{why}")[0]
    assert text.count(head) == 3, text
    assert "it holds episodes of unit 0" in text
    damaged = sorted(p.name for p in (out / DAMAGED_DIR).iterdir())
    assert damaged == [parts[i].name for i in (1, 3, 4)]
    assert _episodes(out) == before  # nothing lost, nothing repeated
    import pandas as pd

    assert len(pd.read_parquet(out / EPISODES_DIR)) == len(before)  # the set-aside parts too


@contextlib.contextmanager
def _small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on a 64 KiB tmpfs; where mounting is not allowed, a folder whose 10th episode
    part write fails with ENOSPC."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                             capture_output=True).returncode == 0
    if not mounted:
        import pyarrow.parquet as pq

        from robogen.rollout import store

        real, calls = pq.write_table, [0]

        def full(table, where, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
            calls[0] += 1
            if calls[0] >= 10:
                raise OSError(errno.ENOSPC, "No space left on device", str(where))
            return real(table, where, *a, **kw)

        monkeypatch.setattr(store.pq, "write_table", full)
    try:
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_names_the_path_the_episodes_stored_and_the_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    ref = tmp_path / "ref"
    full_run = runner.invoke(app, [*EVAL, "--episodes", "20", "--batch-size", "1",
                                   "--out", str(ref)])
    assert full_run.exit_code == 0, full_run.output
    with _small_disk(tmp_path, monkeypatch) as disk:
        out = disk / "run"
        res = runner.invoke(app, [*EVAL, "--episodes", "20", "--batch-size", "1",
                                  "--out", str(out)])
        assert res.exit_code == 2, res.output
        text = " ".join(res.output.split())
        stored = ResultStore.open(out).stored_episodes()
        assert 0 < stored < 40
        head = STORE_WRITE_FAILED.split("{path!r}")[0]
        assert head in text and "No space left on device" in text, text
        assert f"{stored} episodes are stored in {str(out)!r}" in text
        assert f"robogen eval --resume {out}" in text
        assert "Traceback" not in res.output
        assert not list((out / EPISODES_DIR).glob(".unit-*"))  # no partial part left
        moved = tmp_path / "moved"
        shutil.copytree(out, moved)  # room elsewhere: the run resumes there
    resumed = runner.invoke(app, ["eval", "--resume", str(moved), "--backend", "serial"])
    assert resumed.exit_code == 0, resumed.output
    assert _episodes(moved) == _episodes(ref)
