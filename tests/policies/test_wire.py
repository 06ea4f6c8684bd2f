"""The openpi wire codec and the remote: adapter spec (no server needed)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from robogen.errors import InvalidSpecError, UnknownNameError
from robogen.policies.adapter import BAD_OPTION, AdapterSpec, parse_remote_uri
from robogen.policies.wire import WireError, packb, unpackb


def test_arrays_travel_as_openpi_maps_with_bytes_keys():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    raw = msgpack.unpackb(packb({"actions": a}), raw=False, strict_map_key=False)
    m = raw["actions"]
    assert set(m) == {b"__ndarray__", b"data", b"dtype", b"shape"}
    assert m[b"__ndarray__"] is True and m[b"dtype"] == "<f4" and m[b"shape"] == [2, 3]
    assert m[b"data"] == a.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int64", "bool"])
def test_round_trip(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 2).astype(dtype)
    msg = {"obs": {"x": a}, "prompt": "pick", "n": 3, "s": np.float32(1.5)}
    back = unpackb(packb(msg))
    np.testing.assert_array_equal(back["obs"]["x"], a)
    assert back["obs"]["x"].dtype == a.dtype and back["obs"]["x"].flags.writeable
    assert back["prompt"] == "pick" and back["n"] == 3
    assert back["s"] == np.float32(1.5) and back["s"].dtype == np.float32


def test_str_keys_of_vla_eval_are_read():
    a = np.ones((2,), np.float32)
    frame = msgpack.packb({"a": {"__ndarray__": True, "data": a.tobytes(), "dtype": "<f4",
                                 "shape": [2]}})
    np.testing.assert_array_equal(unpackb(frame)["a"], a)


def test_object_dtypes_are_refused_both_ways():
    with pytest.raises(WireError, match="refusing an array of dtype 'object'"):
        packb({"a": np.array([{}, 1], dtype=object)})
    frame = msgpack.packb({b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "|O",
                           b"shape": [1]})
    with pytest.raises(WireError, match="refusing"):
        unpackb(frame)


def test_truncated_array_and_garbage_are_refused():
    frame = msgpack.packb({b"__ndarray__": True, b"data": b"\0" * 7, b"dtype": "<f4",
                           b"shape": [2]})
    with pytest.raises(WireError, match="7 bytes for shape"):
        unpackb(frame)
    with pytest.raises(WireError, match="not a msgpack message"):
        unpackb(b"\xc1")


def test_remote_uri_options():
    eps, spec = parse_remote_uri(
        "ws://a:1,ws://b:2?replan_steps=5&prompt=pick%20up&image_size=224&action_slice=0:7"
    )
    assert eps == ("ws://a:1", "ws://b:2")
    assert spec == AdapterSpec(replan_steps=5, prompt="pick up", image_size=(224, 224),
                               action_slice=(0, 7))
    assert parse_remote_uri("wss://h:9")[1] == AdapterSpec()


def test_remote_uri_errors():
    with pytest.raises(UnknownNameError, match="did you mean 'replan_steps'"):
        parse_remote_uri("ws://a:1?replan_step=5")
    with pytest.raises(InvalidSpecError, match="not ws://HOST:PORT"):
        parse_remote_uri("http://a:1")
    with pytest.raises(InvalidSpecError, match="not ws://HOST:PORT"):
        parse_remote_uri("ws://a")
    with pytest.raises(InvalidSpecError) as e:
        parse_remote_uri("ws://a:1?replan_steps=0")
    assert str(e.value) == BAD_OPTION.format(name="replan_steps", value="0",
                                             expected="an integer >= 1")
    with pytest.raises(InvalidSpecError, match="start:stop"):
        parse_remote_uri("ws://a:1?action_slice=3:1")
