from __future__ import annotations

import json

import pytest

from robogen.errors import RunDirError
from robogen.rollout.plan import build_conditions
from robogen.rollout.store import ResultStore
from robogen.types import EpisodeResult, EvalManifest, RenderSettings


def _manifest() -> EvalManifest:
    return EvalManifest(
        schema_version=1,
        env_id="robogen/Reach-v0",
        policy="random",
        vecnormalize=None,
        obs_mode="state",
        axes=("lighting",),
        severities=(1.0,),
        splits=(),
        combined=False,
        n_episodes=3,
        seed=0,
        max_steps=10,
        batch_size=3,
        success_threshold=None,
        conditions=build_conditions(["lighting"], [1.0]),
        render=RenderSettings(),
    )


def _result(i: int, success: bool, unit: int = 0) -> EpisodeResult:
    return EpisodeResult(
        env_id="robogen/Reach-v0",
        policy_id="random",
        condition="nominal",
        axes=(),
        severity=0.0,
        split="all",
        episode_index=i,
        seed=100 + i,
        episode_return=1.5 * i,
        length_steps=10,
        success=success,
        cause=None if success else "timeout",
        error=None,
        perturbations_json="[]",
        changed_axes=(),
        wall_time_s=0.01,
        unit_id=unit,
    )


def test_roundtrip_and_resume_bookkeeping(tmp_path):
    store = ResultStore.create(tmp_path / "run", _manifest())
    assert store.done_units() == set()
    rs = [_result(0, True), _result(1, False), _result(2, True)]
    store.write_unit(0, rs)
    again = ResultStore.open(tmp_path / "run")
    assert again.manifest == store.manifest
    assert again.done_units() == {0}
    assert again.load_results() == rs
    df = again.load_frame()
    assert list(df["success"]) == [True, False, True]
    assert df["cause"].tolist()[1] == "timeout"


def test_no_temporary_files_left(tmp_path):
    store = ResultStore.create(tmp_path / "run", _manifest())
    store.write_unit(5, [_result(0, True, 5)])
    names = sorted(p.name for p in (tmp_path / "run" / "episodes").iterdir())
    assert names == ["unit-000005.parquet"]


def test_create_refuses_existing_run(tmp_path):
    ResultStore.create(tmp_path / "run", _manifest())
    with pytest.raises(RunDirError, match="resume it with"):
        ResultStore.create(tmp_path / "run", _manifest())


@pytest.mark.parametrize("case", ["missing", "empty", "corrupt"])
def test_open_bad_run_dir(tmp_path, case):
    d = tmp_path / "run"
    if case != "missing":
        d.mkdir()
    if case == "corrupt":
        (d / "manifest.json").write_text(json.dumps({"env_id": "x"}))
    with pytest.raises(
        RunDirError,
        match={"missing": "does not exist", "empty": "no manifest", "corrupt": "corrupt"}[case],
    ):
        ResultStore.open(d)


def test_failed_episode_needs_cause():
    with pytest.raises(ValueError, match="needs a cause"):
        EpisodeResult(
            env_id="e",
            policy_id="p",
            condition="nominal",
            axes=(),
            severity=0.0,
            split="all",
            episode_index=0,
            seed=0,
            episode_return=0.0,
            length_steps=1,
            success=False,
            cause=None,
            error=None,
            perturbations_json="[]",
            changed_axes=(),
            wall_time_s=0.0,
            unit_id=0,
        )


def test_stale_temporaries_of_a_killed_run_are_removed(tmp_path):
    store = ResultStore.create(tmp_path / "run", _manifest())
    store.write_unit(0, [_result(0, True)])
    stale = tmp_path / "run" / "episodes" / ".unit-000001.parquet.abc.tmp"
    stale.write_bytes(b"half a part")
    assert store.remove_stale_temporaries() == 1
    assert not stale.exists() and store.done_units() == {0}


def test_parts_written_before_policy_latency_existed_still_load(tmp_path):
    import dataclasses

    import pyarrow as pa
    import pyarrow.parquet as pq

    from robogen.rollout import store as store_mod

    store = ResultStore.create(tmp_path / "r", _manifest())
    timed = dataclasses.replace(_result(1, True, unit=1), policy_latency_ms=12.5)
    store.write_unit(1, [timed])
    old_schema = pa.schema([f for f in store_mod._SCHEMA if f.name != "policy_latency_ms"])
    row = {k: v for k, v in dataclasses.asdict(_result(0, False, unit=0)).items()
           if k != "policy_latency_ms"}
    pq.write_table(pa.Table.from_pylist([row], schema=old_schema), store.part_path(0))

    results = store.load_results()
    assert [r.policy_latency_ms for r in results] == [None, 12.5]
    assert results[0] == _result(0, False, unit=0)  # None, not NaN: records compare with ==
    frame = store.load_frame()
    assert frame["policy_latency_ms"].isna().tolist() == [True, False]
    assert frame["policy_latency_ms"].iloc[1] == 12.5
