from __future__ import annotations

import dataclasses
import json
import math

import pytest

from robogen.errors import RunDirError
from robogen.rollout.plan import build_conditions
from robogen.rollout.store import ResultStore
from robogen.serialization import encode
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


OLD_SCHEMA_COLUMNS = [
    ("env_id", "string"), ("policy_id", "string"), ("condition", "string"),
    ("axes", "list<item: string>"), ("severity", "double"), ("split", "string"),
    ("episode_index", "int64"), ("seed", "int64"), ("episode_return", "double"),
    ("length_steps", "int64"), ("success", "bool"), ("cause", "string"), ("error", "string"),
    ("perturbations_json", "string"), ("changed_axes", "list<item: string>"),
    ("wall_time_s", "double"), ("unit_id", "int64"), ("video_path", "string"),
    ("policy_latency_ms", "double"),
]
"""The explicit episode-part schema robogen wrote before it was derived from EpisodeResult."""
SAFETY_COLUMNS = [
    ("peak_contact_force_n", "double"), ("joint_limit_steps", "int64"),
    ("object_dropped", "bool"), ("distractor_contact_steps", "int64"),
    ("action_magnitude", "double"), ("action_jerk", "double"),
]
"""The safety metrics' columns (issue 24), appended."""
EPISODE_COLUMNS = [("first_success_step", "int64"), ("first_frame_digest", "string")]
"""The first step of success and the first frame's digest (issue 40), appended."""


def test_episode_schema_is_derived_from_the_record_with_the_old_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from robogen.rollout import store as store_mod

    old = pa.schema([(name, {"string": pa.string(), "double": pa.float64(),
                             "int64": pa.int64(), "bool": pa.bool_()}.get(t, pa.list_(pa.string())))
                     for name, t in OLD_SCHEMA_COLUMNS])
    assert [(f.name, str(f.type)) for f in store_mod._SCHEMA] == [
        *OLD_SCHEMA_COLUMNS, *SAFETY_COLUMNS, *EPISODE_COLUMNS]
    assert all(f.nullable for f in store_mod._SCHEMA)
    # a part written by the old explicit schema loads into equal records (NaN return of an
    # unstable episode stays NaN, a missing error stays None)
    store = ResultStore.create(tmp_path / "r", _manifest())
    unstable = dataclasses.replace(_result(1, False, unit=0), cause="sim_unstable",
                                   episode_return=math.nan, error="MuJoCo warning")
    rows = [encode(_result(0, True)), encode(unstable)]
    pq.write_table(pa.Table.from_pylist(rows, schema=old), store.part_path(0))
    back = store.load_results()
    assert back[0] == _result(0, True)
    assert math.isnan(back[1].episode_return) and back[1].cause == "sim_unstable"
    assert dataclasses.replace(back[1], episode_return=0.0) == dataclasses.replace(
        unstable, episode_return=0.0)
    # the new writer writes the old table plus the safety columns (null unless recorded)
    store.write_unit(1, [_result(0, True, unit=1)])
    new = pq.read_schema(store.part_path(1)).remove_metadata()
    assert new.equals(old.append(pa.field("peak_contact_force_n", pa.float64()))
                      .append(pa.field("joint_limit_steps", pa.int64()))
                      .append(pa.field("object_dropped", pa.bool_()))
                      .append(pa.field("distractor_contact_steps", pa.int64()))
                      .append(pa.field("action_magnitude", pa.float64()))
                      .append(pa.field("action_jerk", pa.float64()))
                      .append(pa.field("first_success_step", pa.int64()))
                      .append(pa.field("first_frame_digest", pa.string())))
    frame = store.load_frame()  # an old part and a new one: the old one's safety reads null
    assert len(frame) == 3 and frame["peak_contact_force_n"].isna().all()
    assert frame["first_success_step"].isna().all() and back[0].first_success_step is None


def test_a_part_with_a_bad_row_names_the_field_and_the_fix(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from robogen.rollout import store as store_mod

    store = ResultStore.create(tmp_path / "r", _manifest())
    row = {**encode(_result(0, False)), "cause": "exploded"}
    pq.write_table(pa.Table.from_pylist([row], schema=store_mod._SCHEMA), store.part_path(0))
    with pytest.raises(RunDirError) as e:
        store.load_results()
    text = str(e.value)
    assert "EpisodeResult.cause: must be one of ['timeout', 'terminated'" in text
    assert "got 'exploded'" in text and "robogen eval --resume" in text


def test_the_first_step_of_success_is_stored_per_episode(tmp_path):
    """Reach's expert succeeds and the task ends there: the first success step is the
    episode's length; a failed episode stores None."""
    from robogen.configs import load_eval_config
    from robogen.runs.evaluation import evaluate

    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="expert:reach", axes=["physics"],
                           severities=[1.0], episodes=2, batch_size=2, combined=False,
                           videos=0, backend="serial", out=tmp_path / "r")
    results = ResultStore.open(evaluate(cfg).run_dir).load_results()
    assert any(r.success for r in results)
    for r in results:
        assert r.first_success_step == (r.length_steps if r.success else None)
    short = load_eval_config(None, env="robogen/Reach-v0", policy="random:0", axes=["physics"],
                             severities=[1.0], episodes=2, batch_size=2, combined=False,
                             max_steps=3, videos=0, backend="serial", out=tmp_path / "s")
    failed = ResultStore.open(evaluate(short).run_dir).load_results()
    assert all(not r.success and r.first_success_step is None for r in failed)
