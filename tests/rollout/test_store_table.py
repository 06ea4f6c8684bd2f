"""Episode parts come from Arrow's JSON reader: the table ``from_pylist`` gives, no pandas."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from robogen.rollout.store import _SCHEMA, episode_table
from robogen.types import EpisodeResult, to_dict

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> list[dict]:
    rng = np.random.default_rng(0)
    base = EpisodeResult(
        env_id="gymnasium/Reacher-v5", policy_id="sb3:/x/ppo.zip", condition="physics@1",
        axes=("physics",), severity=1.0, split="all", episode_index=0, seed=2**62 + 7,
        episode_return=-4.25, length_steps=50, success=False, cause="timeout", error=None,
        perturbations_json='[{"axis": "physics", "mass": 1.3}]', changed_axes=("physics",),
        wall_time_s=0.0123, unit_id=3)
    rows = []
    for i in range(40):
        r = dataclasses.replace(
            base, episode_index=i,
            episode_return=float(rng.normal() * 10.0 ** rng.integers(-30, 30)),
            wall_time_s=float(rng.random()), success=bool(i % 3 == 0),
            cause=None if i % 3 == 0 else ("timeout" if i % 2 else "policy_error"),
            error=None if i % 2 else 'ValueError: naïve ✓ "q" \\ \n\t 😀 \x00',
            axes=() if i % 5 == 0 else ("physics", "lighting"),
            policy_latency_ms=None if i % 4 else 1.0 / 3.0)
        rows.append(to_dict(r))
    return rows


def test_json_built_table_equals_from_pylist() -> None:
    rows = _rows()
    table = episode_table(rows)
    want = pa.Table.from_pylist(rows, schema=_SCHEMA)
    assert table.schema.equals(want.schema, check_metadata=True)
    assert table.equals(want)
    assert table.to_pylist() == want.to_pylist()


def test_rows_json_cannot_hold_fall_back_to_from_pylist() -> None:
    rows = _rows()[:3]
    rows[1]["episode_return"] = math.inf
    rows[2]["policy_latency_ms"] = math.nan
    table = episode_table(rows)
    assert table.column("episode_return").to_pylist()[1] == math.inf
    assert math.isnan(table.column("policy_latency_ms").to_pylist()[2])
    assert episode_table([]).num_rows == 0


def test_writing_and_reading_parts_imports_no_pandas(tmp_path: Path) -> None:
    code = f"""
import sys
from pathlib import Path
from tests.rollout.test_store import _manifest, _result
from robogen.rollout.store import ResultStore
store = ResultStore.create(Path({str(tmp_path / "run")!r}), _manifest())
store.write_unit(0, [_result(0, True), _result(1, False)])
assert [r.episode_index for r in store.load_results()] == [0, 1]
print(sorted(m for m in ("pandas", "pyarrow.compute", "pyarrow.dataset") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]"
