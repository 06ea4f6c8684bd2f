"""msgpack codec of openpi's policy-server wire protocol (numpy arrays as msgpack maps).

Written after openpi's ``openpi_client.msgpack_numpy`` (Physical Intelligence, Apache-2.0) so
that robogen speaks to openpi servers without depending on ``openpi-client`` (whose wheel pins
``numpy<2``). An array travels as a msgpack map with **bytes** keys::

    {b"__ndarray__": True, b"data": <raw bytes, C order>, b"dtype": "<f4", b"shape": [10, 7]}

and a numpy scalar as ``{b"__npgeneric__": True, b"data": <python value>, b"dtype": "<f4"}``.
Decoding also accepts str keys (``"__ndarray__"``, as allenai/vla-evaluation-harness writes).

Security: only msgpack is ever decoded; nothing from the network is unpickled. Object, void
(structured) and complex dtypes are refused both ways, and an array's byte count must match
its dtype and shape.
"""

from __future__ import annotations

from typing import Any, cast

import msgpack
import numpy as np

from robogen.errors import RobogenError

REFUSED_KINDS = ("O", "V", "c")
BAD_DTYPE = (
    "wire: refusing an array of dtype {dtype!r} (object, structured and complex arrays never "
    "travel); send a numeric or bool array"
)
BAD_ARRAY = "wire: malformed array map ({why}); expected __ndarray__, data, dtype and shape"


class WireError(RobogenError, ValueError):
    """A message that is not valid msgpack of the protocol (bad array map, refused dtype)."""


def _check_dtype(dtype: np.dtype[Any]) -> None:
    if dtype.kind in REFUSED_KINDS or dtype.hasobject:
        raise WireError(BAD_DTYPE.format(dtype=str(dtype)))


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        return {
            b"__ndarray__": True,
            b"data": np.ascontiguousarray(obj).tobytes(),
            b"dtype": obj.dtype.str,
            b"shape": list(obj.shape),
        }
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"wire: cannot encode a {type(obj).__name__}; send dicts, lists, "
                    "numbers, strings, bytes and numpy arrays")


def _field(obj: dict[Any, Any], name: str) -> Any:
    if name.encode() in obj:
        return obj[name.encode()]
    if name in obj:
        return obj[name]
    raise WireError(BAD_ARRAY.format(why=f"no {name!r}"))


def _decode(obj: dict[Any, Any]) -> Any:
    if obj.get(b"__ndarray__") is True or obj.get("__ndarray__") is True:
        try:
            dtype = np.dtype(_field(obj, "dtype"))
        except TypeError as e:
            raise WireError(BAD_ARRAY.format(why=f"dtype {_field(obj, 'dtype')!r}")) from e
        _check_dtype(dtype)
        data, shape = _field(obj, "data"), _field(obj, "shape")
        if not isinstance(data, bytes) or not isinstance(shape, list | tuple):
            raise WireError(BAD_ARRAY.format(why="data must be bytes and shape a list"))
        if not all(isinstance(s, int) and s >= 0 for s in shape):
            raise WireError(BAD_ARRAY.format(why=f"shape {shape!r}"))
        if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(data):
            raise WireError(BAD_ARRAY.format(
                why=f"{len(data)} bytes for shape {list(shape)} of {dtype.str}"))
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    if obj.get(b"__npgeneric__") is True or obj.get("__npgeneric__") is True:
        dtype = np.dtype(_field(obj, "dtype"))
        _check_dtype(dtype)
        return dtype.type(_field(obj, "data"))
    return obj


def packb(obj: Any) -> bytes:
    """Encode ``obj`` (dicts, lists, scalars, str, bytes, numpy arrays) as one msgpack frame.

    Raises:
        WireError: On an object, structured or complex array.
        TypeError: On any other type msgpack cannot encode.
    """
    return cast(bytes, msgpack.packb(obj, default=_encode, use_bin_type=True))  # never None


def unpackb(data: bytes) -> Any:
    """Decode one msgpack frame; array maps become writable numpy arrays.

    Raises:
        WireError: If ``data`` is not msgpack, or holds a malformed or refused array.
    """
    try:
        return msgpack.unpackb(data, object_hook=_decode, raw=False, strict_map_key=False)
    except WireError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise WireError(f"wire: not a msgpack message ({type(e).__name__}: {e})") from e
