"""The field-type-driven serializer (robogen.serialization) on robogen's own records."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest

import robogen
from robogen.check import CheckResult
from robogen.errors import RunDirError
from robogen.reports import Report
from robogen.serialization import (
    EXPECTED,
    MISSING,
    NOT_ALLOWED,
    Record,
    RecordDecodeError,
    arrow_schema,
    decode,
    encode,
    null_as,
)
from robogen.types import (
    CAUSES,
    SPLITS,
    AxisLevel,
    BackendInfo,
    Condition,
    EpisodeResult,
    EvalManifest,
    WorkUnit,
    to_dict,
)

FIXTURES = Path(__file__).parent / "fixtures"
OLD_MANIFEST = FIXTURES / "manifest_before_record_fields.json"
OLD_REPORT = FIXTURES / "report_before_serializer.json"
"""report.json written by the hand-written serializer (before robogen.serialization): NaN
gaps as null, breaking points with a null (+inf) upper bound, a fault record."""
OLD_CHECK = FIXTURES / "check_before_serializer.json"
"""check.json of a sequential check written by the hand-written serializer."""


def _episode(**kw: Any) -> EpisodeResult:
    base: dict[str, Any] = dict(
        env_id="robogen/Reach-v0", policy_id="random", condition="lighting@1",
        axes=("lighting",), severity=1.0, split="all", episode_index=3, seed=103,
        episode_return=1.5, length_steps=10, success=False, cause="timeout", error=None,
        perturbations_json="[]", changed_axes=("lighting",), wall_time_s=0.01, unit_id=1)
    return EpisodeResult(**{**base, **kw})


def _old_jsonable(x: Any) -> Any:
    """The strict-JSON conversion report.json and check.json used before (the reference)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _old_jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_old_jsonable(v) for v in x]
    return x


def _pop_all(x: Any, key: str) -> list[Any]:
    """Remove ``key`` from every dict nested in ``x``; the values removed."""
    out: list[Any] = []
    if isinstance(x, dict):
        if key in x:
            out.append(x.pop(key))
        for v in x.values():
            out += _pop_all(v, key)
    elif isinstance(x, list):
        for v in x:
            out += _pop_all(v, key)
    return out


def _without_unpinned(x: Any) -> Any:
    """``x`` without the ``value: None`` of axis levels (encoded only when a value is pinned)."""
    if isinstance(x, dict):
        return {k: _without_unpinned(v) for k, v in x.items()
                if not (k == "value" and v is None and "axis" in x)}
    if isinstance(x, list | tuple):
        return [_without_unpinned(v) for v in x]
    return x


def test_old_report_json_loads_and_writes_back_byte_for_byte() -> None:
    text = OLD_REPORT.read_text()
    report = Report.from_dict(json.loads(text))
    written = report.to_dict()
    # fields added since the fixture was written (--episodes auto) are null at their default
    assert written.pop("sequential") is None and written["manifest"].pop("sequential") is None
    assert written["manifest"].pop("plugins") == []  # no plug-in (issue 25)
    assert written["manifest"].pop("policy_inputs") == []  # unknown (issue 24)
    assert written["manifest"].pop("safety") is False  # not recorded (issue 24)
    assert written["manifest"].pop("safety_sampling") == ""  # nor where (issue 40)
    assert written["manifest"].pop("backend") == {  # unknown where it ran (issue 37)
        "kind": "", "device": "", "worlds": None, "float_precision": "", "versions": {}}
    assert written.pop("safety") == []
    assert written.pop("hardware") == ""  # no workers.jsonl (issue 35)
    assert written["manifest"]["policy_load"].pop("servers") == []  # not remote (issue 27)
    # a render without tessellation fields rendered with MuJoCo's 28 x 16 and reads so
    render = written["manifest"]["render"]
    assert (render.pop("numslices"), render.pop("numstacks")) == (28, 16)
    assert json.dumps(written, indent=2, allow_nan=False) + "\n" == text
    assert report.to_dict() == _old_jsonable(_without_unpinned(dataclasses.asdict(report)))
    # null floats read back as NaN, a breaking point's null upper bound as +inf
    assert math.isnan(report.gap("physics@1").gap)
    lighting, physics = report.breaking_points
    assert lighting.ci_high == math.inf and lighting.severities == (0.0, 0.5, 1.0)
    assert math.isnan(physics.severity) and not physics.reached
    assert report.faults[0].unit_id == 3 and report.faults[0].error == "SIGKILL"
    assert report.errors and all(isinstance(e, tuple) for e in report.errors)
    assert isinstance(report.manifest.conditions[1].levels, tuple)


def test_old_check_json_loads_and_writes_back_byte_for_byte() -> None:
    text = OLD_CHECK.read_text()
    check = CheckResult.from_dict(json.loads(text))
    written = check.to_dict()
    # fields added since the fixture was written (the safety gate, issue 24) at their default
    assert written.pop("safety_margin") is None and written.pop("safety") == []
    # no planning estimate in a check made before it (issue 38): -1 on every condition
    estimates = _pop_all(written, "episodes_to_decide")
    assert estimates and set(estimates) == {-1}
    assert json.dumps(written, indent=2, allow_nan=False) + "\n" == text
    assert check.to_dict() == _old_jsonable(_without_unpinned(dataclasses.asdict(check)))
    assert check.sequential is not None and check.sequential.schedule == (20, 40)
    assert check.axis("physics").conditions == ("physics@1",)


def test_malformed_check_json_names_the_field() -> None:
    d = json.loads(OLD_CHECK.read_text())
    d["conditions"][1]["n_baseline"] = "forty"
    with pytest.raises(RunDirError, match=r"check.json is malformed: CheckResult.conditions\[1\]"
                                          r".n_baseline: expected an integer, got 'forty'"):
        CheckResult.from_dict(d)


def test_old_manifest_loads_with_the_defaults_of_later_fields() -> None:
    old = json.loads(OLD_MANIFEST.read_text())
    m = EvalManifest.from_dict(old)
    d = to_dict(m)
    # MuJoCo's 28 x 16, what a manifest before the tessellation fields rendered with
    assert (d["render"].pop("numslices"), d["render"].pop("numstacks")) == (28, 16)
    assert {k: d[k] for k in old} == old  # every value it had is kept as it was
    d = to_dict(m)
    assert set(d) - set(old) == {
        "deterministic_actions", "reward_source", "policy_load", "sequential", "plugins",
        "policy_inputs", "safety", "safety_sampling", "backend"}
    assert m.sequential is None and m.plugins == () and m.policy_inputs == ()
    assert m.safety is False and m.safety_sampling == ""
    assert m.backend == BackendInfo()  # where it ran is unknown
    assert m.policy_load.replaced == () and m.deterministic_actions is True
    assert EvalManifest.from_dict(json.loads(json.dumps(d))) == m


def test_manifest_json_is_what_the_json_round_trip_of_asdict_wrote() -> None:
    m = EvalManifest.from_dict(json.loads(OLD_MANIFEST.read_text()))
    m = dataclasses.replace(m, env_kwargs={"frame_skip": 2, "xy": (1.0, 2.0)},
                            success_threshold=-3.5)
    old = _without_unpinned(json.loads(json.dumps(dataclasses.asdict(m))))  # to_dict until now
    assert json.dumps(to_dict(m), indent=2) == json.dumps(old, indent=2)


def test_records_round_trip_through_strict_json_with_nan_as_null() -> None:
    unit = WorkUnit(4, Condition("lighting@test", (AxisLevel("lighting", 1.0, "test"),)), (0, 5))
    assert WorkUnit.from_dict(json.loads(json.dumps(to_dict(unit)))) == unit
    r = _episode(policy_latency_ms=12.5, video_path="videos/a.mp4")
    assert EpisodeResult.from_dict(json.loads(json.dumps(to_dict(r)))) == r
    # an unstable episode's non-finite return: kept by to_dict (Ray transport), null in
    # strict JSON, read back as NaN
    bad = _episode(cause="sim_unstable", episode_return=math.inf, error="diverged")
    assert EpisodeResult.from_dict(to_dict(bad)).episode_return == math.inf
    strict = json.loads(json.dumps(encode(bad, allow_nan=False), allow_nan=False))
    assert strict["episode_return"] is None
    assert math.isnan(EpisodeResult.from_dict(strict).episode_return)
    # an Optional float reads NaN (a pandas null) and null as None: records compare with ==
    assert EpisodeResult.from_dict({**to_dict(r), "policy_latency_ms": math.nan}) == \
        dataclasses.replace(r, policy_latency_ms=None)


def test_bad_literals_name_the_field_and_the_allowed_values() -> None:
    d = to_dict(_episode())
    with pytest.raises(RecordDecodeError) as e:
        EpisodeResult.from_dict({**d, "cause": "exploded"})
    assert str(e.value) == "EpisodeResult.cause: " + NOT_ALLOWED.format(
        allowed=list(CAUSES), value="exploded")
    assert e.value.path == ("EpisodeResult", "cause")
    m = to_dict(EvalManifest.from_dict(json.loads(OLD_MANIFEST.read_text())))
    m["conditions"][1]["levels"][0]["split"] = "tset"
    with pytest.raises(ValueError, match=r"^EvalManifest.conditions\[1\].levels\[0\].split: "
                                         r"must be one of \['all', 'train', 'test'\], got 'tset'"):
        EvalManifest.from_dict(m)
    assert SPLITS == ("all", "train", "test")


def test_missing_wrong_and_unknown_keys() -> None:
    d = to_dict(_episode())
    assert EpisodeResult.from_dict({**d, "added_by_a_later_version": 1}) == _episode()
    without = {k: v for k, v in d.items() if k not in ("video_path", "policy_latency_ms")}
    assert EpisodeResult.from_dict(without) == _episode()  # defaults of later fields
    with pytest.raises(RecordDecodeError) as e:
        EpisodeResult.from_dict({k: v for k, v in d.items() if k != "seed"})
    assert str(e.value) == "EpisodeResult: " + MISSING.format(field="seed", record="EpisodeResult")
    with pytest.raises(RecordDecodeError) as e:
        EpisodeResult.from_dict({**d, "axes": ["lighting", 3]})
    assert str(e.value) == "EpisodeResult.axes[1]: " + EXPECTED.format(expected="a string", value=3)
    with pytest.raises(RecordDecodeError, match="length_steps: expected an integer, got 2.5"):
        EpisodeResult.from_dict({**d, "length_steps": 2.5})
    with pytest.raises(RecordDecodeError, match="success: expected true or false, got 'no'"):
        EpisodeResult.from_dict({**d, "success": "no"})
    # the record's own checks run: a failed episode needs a cause
    with pytest.raises(RecordDecodeError, match="not a valid EpisodeResult: a failed episode"):
        EpisodeResult.from_dict({**d, "cause": None})


def test_numpy_and_pandas_values_decode_and_encode() -> None:
    d = {**to_dict(_episode()), "seed": np.int64(103), "severity": np.float64(1.0),
         "success": np.bool_(False), "axes": np.array(["lighting"])}
    assert EpisodeResult.from_dict(d) == _episode()
    assert encode({"a": np.float32(0.5), "b": (np.int64(2),)}) == {"a": 0.5, "b": [2]}
    assert type(encode(np.int64(2))) is int
    with pytest.raises(TypeError, match="cannot encode a builtins.object"):
        encode({"x": object()})


@dataclass(frozen=True, slots=True)
class _Inner(Record):
    name: str
    scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Outer(Record):
    kind: Literal["a", "b"]
    inner: _Inner
    pairs: tuple[tuple[str, int], ...]
    bound: float = field(default=0.0, metadata=null_as(math.inf))
    maybe: _Inner | None = None
    added_later: tuple[float, ...] = (1.0,)


def test_a_record_with_a_new_field_needs_no_serializer_code() -> None:
    v = _Outer("a", _Inner("x", {"p": math.nan}), (("k", 1),), math.inf, _Inner("y"), (2.0,))
    data = json.loads(json.dumps(encode(v, allow_nan=False), allow_nan=False))
    assert data["bound"] is None and data["inner"]["scores"]["p"] is None
    back = _Outer.from_dict(data)
    assert back.bound == math.inf and math.isnan(back.inner.scores["p"])
    assert dataclasses.replace(back, inner=_Inner("x")) == dataclasses.replace(v, inner=_Inner("x"))
    old = {k: x for k, x in data.items() if k != "added_later"}  # written before it existed
    assert _Outer.from_dict(old).added_later == (1.0,)
    with pytest.raises(RecordDecodeError, match=r"_Outer.pairs\[0\]: expected an array of 2"):
        _Outer.from_dict({**data, "pairs": [["k", 1, 2]]})
    assert decode(tuple[int, ...], [1, 2.0]) == (1, 2)


def _record_classes() -> list[type]:
    for info in pkgutil.walk_packages(robogen.__path__, "robogen."):
        if info.name.rsplit(".", 1)[-1].endswith("_mjx") or "metaworld" in info.name:
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
    seen: list[type] = []
    todo = list(Record.__subclasses__())
    while todo:
        c = todo.pop()
        # `slots=True` makes a new class; the one it replaced is a subclass too: skip it
        public = getattr(sys.modules[c.__module__], c.__qualname__, None) is c
        if c.__module__.startswith("robogen.") and public and c not in seen:
            seen.append(c)
        todo.extend(c.__subclasses__())
    return sorted(seen, key=lambda c: f"{c.__module__}.{c.__qualname__}")


RECORDS = _record_classes()


def test_the_records_are_found() -> None:
    names = {c.__name__ for c in RECORDS}
    assert {"EpisodeResult", "EvalManifest", "Report", "CheckResult", "FaultRecord",
            "VideoInfo"} <= names


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_every_record_annotation_is_decodable(cls: type) -> None:
    """Every field type of every record is one the serializer handles: decoding an empty
    object names a missing field or builds the all-defaults record, never a TypeError."""
    try:
        decode(cls, {})
    except RecordDecodeError as e:
        assert "missing field" in str(e)


def test_parquet_schema_of_a_record() -> None:
    schema = arrow_schema(EpisodeResult)
    assert schema.names == [f.name for f in dataclasses.fields(EpisodeResult)]
    assert str(schema.field("cause").type) == "string"  # a Literal of strings
    with pytest.raises(TypeError, match="_Outer.inner: no Parquet column type"):
        arrow_schema(_Outer)


def test_split_of_narrows_config_strings_and_names_the_splits() -> None:
    from robogen.errors import InvalidSpecError
    from robogen.rollout.plan import build_conditions
    from robogen.types import SPLIT_UNKNOWN, split_of

    assert split_of("test") == "test"
    with pytest.raises(InvalidSpecError) as e:
        build_conditions(["lighting"], [1.0], ["tset"])
    assert str(e.value) == SPLIT_UNKNOWN.format(choices="all, train, test", value="tset")
