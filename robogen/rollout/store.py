"""The run directory: manifest plus one Parquet part per finished work unit.

Layout::

    RUN_DIR/
      manifest.json            EvalManifest (written first, atomically)
      episodes/unit-000012.parquet   one part per finished WorkUnit
      damaged_parts/             parts a resume found unreadable (their units ran again)
      report.json|md|html, plots/, videos/   written by the report step

Parts are written to a temporary name and renamed (``os.replace``), so a run
killed at any moment leaves only complete parts; resuming skips the units
whose part exists and never repeats or loses a finished episode. A part damaged on disk
anyway (truncated by a full disk, overwritten) is set aside by the resume, named, and its unit
runs again.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from robogen._atomic import atomic_path, write_atomic
from robogen.errors import RunDirError, StoreWriteError
from robogen.rollout.faults import UnitPlacement
from robogen.serialization import arrow_schema
from robogen.types import EpisodeResult, EvalManifest, to_dict

MANIFEST = "manifest.json"
EPISODES_DIR = "episodes"
STORE_WRITE_FAILED = (
    "cannot write {path!r} ({why}); {n} episodes are stored in {run_dir!r}; make room (or make "
    "it writable) and finish the run with: robogen eval --resume {run_dir}"
)
"""Message of :class:`~robogen.errors.StoreWriteError` (tests reuse it)."""
PLACEMENT_KEY = "robogen.ran_on"
"""Parquet metadata key of an episode part: the :class:`~robogen.rollout.faults.UnitPlacement`
(worker and Ray node) that ran the unit, as JSON."""
DAMAGED_DIR = "damaged_parts"
"""Folder of the run directory where a resume sets aside unreadable parts (their units rerun);
outside ``episodes/``, so ``pandas.read_parquet("RUN_DIR/episodes")`` never reads them."""
_PART = re.compile(r"^unit-(\d{6})\.parquet$")

_SCHEMA = arrow_schema(EpisodeResult)
"""Columns of an episode part: one per :class:`EpisodeResult` field, typed from its
annotation (``str`` -> string, ``int`` -> int64, ``float`` -> float64, ``bool`` -> bool,
``tuple[str, ...]`` -> list<string>). Parts written before a later field existed lack its
column; it reads as the field's default."""


def episode_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """The Arrow table (schema :data:`_SCHEMA`) of episode rows (``to_dict`` of results).

    Built with Arrow's JSON reader from the rows as JSON lines, which gives the table
    ``pa.Table.from_pylist(rows, schema=_SCHEMA)`` gives (floats round-trip exactly;
    ``tests/rollout/test_store_table.py``) without importing pandas: pyarrow's
    Python-object converters import pandas and ``pyarrow.compute`` on their first call,
    about 0.4 s of CPU per process, the largest import of a ``robogen eval`` that a plain
    evaluation loop does not pay. Rows JSON cannot hold (a non-finite float) take
    ``from_pylist``.
    """
    try:
        if not rows:
            raise ValueError("no rows")
        data = "\n".join(json.dumps(r, allow_nan=False) for r in rows).encode()
    except ValueError:
        return pa.Table.from_pylist(list(rows), schema=_SCHEMA)
    return pa_json.read_json(
        io.BytesIO(data),
        read_options=pa_json.ReadOptions(use_threads=False, block_size=max(len(data), 1 << 20)),
        parse_options=pa_json.ParseOptions(explicit_schema=_SCHEMA,
                                           unexpected_field_behavior="error"),
    )


class ResultStore:
    """Crash-safe storage of one evaluation's episodes.

    Use :meth:`create` for a new run and :meth:`open` to resume or report.
    """

    def __init__(self, run_dir: Path, manifest: EvalManifest) -> None:
        self.run_dir = Path(run_dir)
        self.manifest = manifest

    @staticmethod
    def require_new(run_dir: Path) -> None:
        """Check that a new run can start in ``run_dir`` (absent or an empty directory).

        Raises:
            RunDirError: If ``run_dir`` is a file, or a directory that already holds a run
                (resume it instead) or other files.
        """
        run_dir = Path(run_dir)
        if run_dir.exists() and not run_dir.is_dir():
            raise RunDirError(f"--out {str(run_dir)!r} is a file; give a new or empty directory")
        if run_dir.exists() and any(run_dir.iterdir()):
            hint = (
                f"resume it with: robogen eval --resume {run_dir}"
                if (run_dir / MANIFEST).exists()
                else "choose an empty or new --out directory"
            )
            raise RunDirError(f"run directory {str(run_dir)!r} is not empty; {hint}")

    @classmethod
    def create(cls, run_dir: Path, manifest: EvalManifest) -> ResultStore:
        """Start a new run directory.

        Raises:
            RunDirError: If ``run_dir`` already holds a run (resume it instead) or files.
        """
        run_dir = Path(run_dir)
        cls.require_new(run_dir)
        (run_dir / EPISODES_DIR).mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / MANIFEST, json.dumps(to_dict(manifest), indent=2))
        return cls(run_dir, manifest)

    @classmethod
    def open(cls, run_dir: Path) -> ResultStore:
        """Open an existing run directory.

        Raises:
            RunDirError: If it does not exist, has no manifest, or the manifest is corrupt.
        """
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise RunDirError(f"run directory {str(run_dir)!r} does not exist")
        path = run_dir / MANIFEST
        if not path.is_file():
            runs = sorted(str(d) for d in run_dir.iterdir() if (d / MANIFEST).is_file())
            hint = (f"; it holds the runs {', '.join(runs)} (of a several-policy evaluation?): "
                    "give those" if runs else " (start a run with robogen eval --out DIR)")
            raise RunDirError(
                f"{str(run_dir)!r} is not a robogen run directory: it has no {MANIFEST}{hint}")
        try:
            manifest = EvalManifest.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError) as e:
            raise RunDirError(f"{str(path)!r} is corrupt: {type(e).__name__}: {e}") from e
        return cls(run_dir, manifest)

    def remove_stale_temporaries(self) -> int:
        """Delete temporary part files a killed run left behind; returns how many.

        Call only when no other process writes to this run (before resuming it).
        """
        stale = list((self.run_dir / EPISODES_DIR).glob(".unit-*.tmp"))
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)

    def set_aside_damaged(self) -> list[tuple[Path, str]]:
        """Move every unreadable episode part to :data:`DAMAGED_DIR` so that its unit runs
        again; returns ``(where it went, why)`` for each.

        A part is damaged when Parquet cannot read it (truncated, empty, overwritten), a row
        is not an episode, it holds no row, or a row names another unit. Call only when no
        other process writes to this run (before resuming it).
        """
        moved: list[tuple[Path, str]] = []
        for uid in sorted(self.done_units()):
            path = self.part_path(uid)
            why = self._damage(uid, path)
            if why is None:
                continue
            folder = self.run_dir / DAMAGED_DIR
            folder.mkdir(exist_ok=True)
            target = folder / path.name
            n = 1
            while target.exists():
                target = folder / f"{path.name}.{n}"
                n += 1
            path.replace(target)
            moved.append((target, why))
        return moved

    @staticmethod
    def _damage(uid: int, path: Path) -> str | None:
        """Why the part of unit ``uid`` at ``path`` cannot be used, or None."""
        try:
            with pq.ParquetFile(path) as part:
                rows: list[dict[str, Any]] = part.read().to_pylist()
            results = [EpisodeResult.from_dict(r) for r in rows]
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for damaged files
            return f"{type(e).__name__}: {str(e)[:200]}"
        if not results:
            return "it holds no episode"
        other = sorted({r.unit_id for r in results} - {uid})
        return f"it holds episodes of unit {other[0]}" if other else None

    def part_path(self, unit_id: int) -> Path:
        """The Parquet file holding unit ``unit_id``'s episodes
        (``RUN_DIR/episodes/unit-NNNNNN.parquet``; it may not exist yet)."""
        return self.run_dir / EPISODES_DIR / f"unit-{unit_id:06d}.parquet"

    def done_units(self) -> set[int]:
        """Ids of units whose part is complete on disk."""
        folder = self.run_dir / EPISODES_DIR
        if not folder.is_dir():
            return set()
        return {int(m.group(1)) for p in folder.iterdir() if (m := _PART.match(p.name))}

    def write_unit(self, unit_id: int, results: Sequence[EpisodeResult],
                   ran_on: UnitPlacement | None = None) -> Path:
        """Write one finished unit atomically. Rewriting the same unit replaces it.

        Args:
            unit_id: The unit.
            results: Its episodes.
            ran_on: The worker and node that ran it, kept in the part's Parquet metadata
                (:data:`PLACEMENT_KEY`; :meth:`unit_placement` reads it).

        Raises:
            StoreWriteError: If the part cannot be written (no space, a read-only or removed
                run directory): names the path, the episodes stored and how to resume.
        """
        table = episode_table([to_dict(r) for r in results])
        if ran_on is not None:
            table = table.replace_schema_metadata(
                {**(table.schema.metadata or {}), PLACEMENT_KEY: json.dumps(to_dict(ran_on))})
        path = self.part_path(unit_id)
        try:
            with atomic_path(path) as tmp:
                pq.write_table(table, tmp)
        except OSError as e:
            raise StoreWriteError(STORE_WRITE_FAILED.format(
                path=str(path), why=e.strerror or str(e), n=self.stored_episodes(),
                run_dir=str(self.run_dir))) from e
        return path

    def unit_placement(self, unit_id: int) -> UnitPlacement | None:
        """Where unit ``unit_id``'s stored episodes ran (None: no part, or a part written
        without it)."""
        try:
            meta = pq.read_schema(self.part_path(unit_id)).metadata or {}
            return UnitPlacement.from_dict(json.loads(meta[PLACEMENT_KEY.encode()]))
        except (OSError, KeyError, ValueError, TypeError, pa.ArrowInvalid):
            return None

    def stored_episodes(self) -> int:
        """Episodes in the parts on disk (from the Parquet footers; unreadable parts: 0)."""
        n = 0
        for uid in self.done_units():
            try:
                n += pq.ParquetFile(self.part_path(uid)).metadata.num_rows
            except Exception:  # noqa: BLE001 - a damaged part counts as nothing stored
                pass
        return n

    def units_with_causes(self, causes: Sequence[str]) -> frozenset[int]:
        """Ids of stored units with at least one episode whose cause is in ``causes``."""
        files = [self.part_path(u) for u in sorted(self.done_units())]
        if not files:
            return frozenset()
        table = pq.read_table(files, columns=["unit_id", "cause"]).to_pydict()
        wanted = set(causes)
        return frozenset(int(u) for u, c in zip(table["unit_id"], table["cause"], strict=True)
                         if c in wanted)

    def load_results(self) -> list[EpisodeResult]:
        """All stored episodes, ordered by (unit id, episode index).

        Raises:
            RunDirError: If a part cannot be read or holds a row that is not an episode.
        """
        out: list[EpisodeResult] = []
        for uid in sorted(self.done_units()):
            path = self.part_path(uid)
            try:
                # ParquetFile, not pq.read_table: the latter imports pyarrow.dataset, pandas
                # and pyarrow.compute (about 0.4 s of CPU) to read one file
                with pq.ParquetFile(path) as part:
                    rows: list[dict[str, Any]] = part.read().to_pylist()
            except Exception as e:  # pyarrow raises several types for damaged files
                raise RunDirError(
                    f"episode part {str(path)!r} is unreadable: {e}; robogen eval --resume "
                    f"{str(self.run_dir)!r} sets it aside and redoes its episodes"
                ) from e
            try:
                out.extend(EpisodeResult.from_dict(r) for r in rows)
            except ValueError as e:
                raise RunDirError(
                    f"episode part {str(path)!r} holds a malformed episode: {e}; robogen eval "
                    f"--resume {str(self.run_dir)!r} sets it aside and redoes its episodes"
                ) from e
        return out

    def load_frame(self):  # noqa: ANN201 - pandas is imported lazily
        """All stored episodes as a ``pandas.DataFrame`` (one row per episode)."""
        import pandas as pd

        files = [self.part_path(u) for u in sorted(self.done_units())]
        if not files:
            return pd.DataFrame(columns=_SCHEMA.names)
        # parts written before a column existed lack it: it reads as null there
        tables = [pq.read_table(f) for f in files]
        return pa.concat_tables(tables, promote_options="default").to_pandas()
