"""One serializer for robogen's frozen records, driven by their field annotations.

:func:`encode` turns a record (a dataclass instance, nested records, tuples, dicts,
scalars) into JSON-compatible data; :func:`decode` turns such data back into a
value of a given type, reading what to build from the type hints of the record's
fields (:func:`typing.get_type_hints`). The rules, the same for every record:

===========================  ========================  =====================================
annotation                   encoded as                decoded from
===========================  ========================  =====================================
record (dataclass)           object, fields in order   object; unknown keys ignored, a
                                                       missing key takes the field's
                                                       default (``None`` if Optional), else
                                                       an error
``float``                    number; non-finite ->     number; ``null`` -> NaN (or the
                             ``null`` when             field's :func:`null_as` value)
                             ``allow_nan=False``
``int`` / ``bool`` / ``str`` the value                 a value of that type (an integral
                                                       float is accepted as ``int``)
``X | None``                 ``null`` or X             ``null`` or NaN -> ``None``, else X
``Literal[...]``             the value                 one of the allowed values, else an
                                                       error naming field and choices
``tuple[X, ...]``,           array                     array (lengths checked for fixed
``tuple[A, B]``                                        tuples)
``dict[str, X]``/``Mapping`` object                    object
``Any``                      as is (JSON data)         as is
===========================  ========================  =====================================

Decoders are compiled once per type, so loading thousands of episodes costs one
dict lookup and one call per field. :func:`arrow_schema` derives a Parquet schema
from the same annotations.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar, Union, get_args, get_origin

from robogen.errors import RobogenError

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")

NULL_AS = "robogen.null_as"
"""Field-metadata key: the float a ``null`` of that field decodes to (default NaN)."""
MISSING_AS = "robogen.missing_as"
"""Field-metadata key: the value a *missing* key of that field decodes to, instead of the
field's default (files written before the field existed meant that value)."""
OMIT_AT_DEFAULT = "robogen.omit_at_default"
"""Field-metadata key: :func:`encode` leaves the field out while it holds its default (a
field added later keeps the files of records that do not use it byte for byte)."""

EXPECTED = "expected {expected}, got {value!r}"
NOT_ALLOWED = "must be one of {allowed}, got {value!r}"
MISSING = "missing field {field!r} of {record} (it has no default)"
INVALID = "not a valid {record}: {why}"
"""Message templates of :class:`RecordDecodeError` (after ``"<field path>: "``)."""

Decoder = Callable[[Any], Any]


class RecordDecodeError(RobogenError, ValueError):
    """Data that does not match a record's field types.

    The message is ``"<path>: <detail>"``, e.g. ``EvalManifest.conditions[1].levels[0].split:
    must be one of ['all', 'train', 'test'], got 'tset'``.

    Attributes:
        path: Record name, field names and list indices down to the bad value.
        detail: What was expected and what arrived (one of the templates above).
    """

    def __init__(self, path: tuple[str | int, ...], detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"{_where(path)}: {detail}")

    def within(self, step: str | int) -> RecordDecodeError:
        """The same error one level further out (``step`` prepended to the path)."""
        return RecordDecodeError((step, *self.path), self.detail)


def _where(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out or "value"


def _bad(expected: str, value: Any) -> RecordDecodeError:
    return RecordDecodeError((), EXPECTED.format(expected=expected, value=value))


class Record:
    """Base of frozen records: ``Cls.from_dict(data)`` is ``decode(Cls, data)``.

    Has no fields and no instance dict (``__slots__ = ()``), so ``slots=True`` dataclasses
    deriving from it stay slotted.
    """

    __slots__ = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """The record that JSON data ``d`` encodes (inverse of :func:`encode`).

        Unknown keys are ignored and a missing key takes the field's default, so files
        written before a field existed keep loading.

        Raises:
            RecordDecodeError: (a ``ValueError``) naming the bad field, what was expected
                and what arrived.
        """
        return decode(cls, d)


def find_record(records: Iterable[T], key: str, name: str) -> T:
    """The record among ``records`` whose field ``key`` equals ``name``.

    Example: ``find_record(report.conditions, "condition", "nominal")``.

    Raises:
        KeyError: ``no <key> <name>; have [...]``, listing every record's ``key``.
    """
    records = tuple(records)
    for r in records:
        if getattr(r, key) == name:
            return r
    raise KeyError(f"no {key} {name!r}; have {[getattr(r, key) for r in records]}")


def null_as(value: float) -> dict[str, float]:
    """Field metadata making ``null`` decode to ``value`` instead of NaN.

    Example: ``ci_high: float = field(metadata=null_as(math.inf))`` for a bound that is
    +inf when unreached (strict JSON writes both NaN and inf as ``null``).
    """
    return {NULL_AS: value}


def missing_as(value: Any) -> dict[str, Any]:
    """Field metadata making a missing key decode to ``value`` instead of the field's default.

    Example: ``numslices: int = field(default=0, metadata=missing_as(28))``: a record
    built now defaults to 0, a file written before the field existed meant 28.
    """
    return {MISSING_AS: value}


def omit_at_default() -> dict[str, bool]:
    """Field metadata making :func:`encode` leave the field out while it equals its default.

    Example: ``value: int | None = field(default=None, metadata=omit_at_default())``; a
    missing key decodes to the default, so the round trip is exact.
    """
    return {OMIT_AT_DEFAULT: True}


def encode(value: Any, *, allow_nan: bool = True) -> Any:
    """JSON-compatible data of a record or value.

    Records become dicts (fields in declaration order), tuples and lists become lists,
    numpy scalars their Python value; dict keys must be strings (ints are written as
    their decimal string, like :func:`json.dumps`).

    Args:
        value: A record (dataclass instance) or any nesting of records, tuples, lists,
            dicts, ``str``, ``int``, ``float``, ``bool`` and ``None``.
        allow_nan: Keep non-finite floats (Python data, like ``json.dumps``'s default);
            False writes them as ``None`` so the result is strict JSON.

    Returns:
        Nested dicts, lists and scalars.

    Raises:
        TypeError: For a value JSON cannot hold (naming its type).
    """
    return _encode(value, allow_nan)


def _encode(v: Any, allow_nan: bool) -> Any:
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return v
    if t is float:
        return v if allow_nan or math.isfinite(v) else None
    names = _field_names(t)
    if names is not None:
        omit = _OMITTED.get(t)
        if omit:
            return {n: _encode(getattr(v, n), allow_nan) for n in names
                    if n not in omit or getattr(v, n) != omit[n]}
        return {n: _encode(getattr(v, n), allow_nan) for n in names}
    if t is tuple or t is list:
        return [_encode(x, allow_nan) for x in v]
    if isinstance(v, Mapping):
        return {_key(k): _encode(x, allow_nan) for k, x in v.items()}
    if isinstance(v, tuple | list):
        return [_encode(x, allow_nan) for x in v]
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):  # IntEnum and other int subclasses
        return int(v)
    if isinstance(v, float):  # numpy float64 is a float subclass
        return _encode(float(v), allow_nan)
    if isinstance(v, str):
        return str(v)
    if t.__module__ == "numpy" and hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        return _encode(v.item(), allow_nan)
    raise TypeError(f"cannot encode a {t.__module__}.{t.__qualname__} as JSON data: {v!r}")


def _key(k: Any) -> str:
    if isinstance(k, str):
        return str(k)
    if isinstance(k, int) and not isinstance(k, bool):
        return str(int(k))
    raise TypeError(f"dict keys must be strings, got {k!r}")


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}
_OMITTED: dict[type, dict[str, Any]] = {}
"""Per record type: the fields marked :func:`omit_at_default` and their defaults."""


def _field_names(t: type) -> tuple[str, ...] | None:
    try:
        return _FIELD_NAMES[t]
    except KeyError:
        names = (tuple(f.name for f in dataclasses.fields(t))
                 if dataclasses.is_dataclass(t) else None)
        if names is not None:
            _OMITTED[t] = {f.name: f.default for f in dataclasses.fields(t)
                           if f.metadata.get(OMIT_AT_DEFAULT)}
        _FIELD_NAMES[t] = names
        return names


def decode(tp: type[T] | Any, data: Any) -> T:
    """The value of type ``tp`` that ``data`` encodes (inverse of :func:`encode`).

    Args:
        tp: A record class or any annotation the module docstring's table lists.
        data: JSON-compatible data (from ``json.loads``, a Parquet row, ...).

    Returns:
        A new value of type ``tp``; records are built through their constructor, so
        their ``__post_init__`` checks run.

    Raises:
        RecordDecodeError: (a ``ValueError``) naming the field path, what was expected
            and what arrived: a wrong type, a value outside a ``Literal``, a missing field
            without default, or a record whose constructor rejected the values.
        TypeError: If ``tp`` has an annotation this module cannot decode (a bug).
    """
    try:
        return _decoder(tp)(data)
    except RecordDecodeError as e:
        name = getattr(tp, "__name__", None)
        raise (e.within(name) if name and dataclasses.is_dataclass(tp) else e) from None


@cache
def record_hints(cls: type) -> dict[str, Any]:
    """Resolved annotations of a record's fields (``typing.get_type_hints``), cached.

    Raises:
        TypeError: If ``cls`` is not a dataclass.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass record")
    return typing.get_type_hints(cls)


@cache
def _decoder(tp: Any) -> Decoder:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _record_decoder(tp)
    if tp is Any or tp is object:
        return _identity
    if tp is float:
        return _float_decoder(math.nan)
    if tp is int:
        return _int
    if tp is bool:
        return _bool
    if tp is str:
        return _str
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return _literal_decoder(args)
    if origin is Union or origin is types.UnionType:
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) == 1 and len(args) == 2:
            return _optional_decoder(_decoder(rest[0]))
        raise TypeError(f"cannot decode the union {tp!r}: only `X | None` is supported")
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _tuple_decoder(_decoder(args[0]))
        return _fixed_tuple_decoder(tuple(_decoder(a) for a in args))
    if origin in (dict, Mapping, typing.Mapping):
        key, val = args or (str, Any)
        if key is not str and key is not Any:
            raise TypeError(f"cannot decode {tp!r}: JSON object keys are strings")
        return _dict_decoder(_decoder(val))
    raise TypeError(f"cannot decode the annotation {tp!r}")


def _identity(v: Any) -> Any:
    return v


def _float_decoder(null: float) -> Decoder:
    def dec(v: Any) -> float:
        if type(v) is float:
            return v
        if v is None:
            return null
        if isinstance(v, numbers.Real) and not isinstance(v, bool):
            return float(v)
        raise _bad("a number", v)

    return dec


def _int(v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise _bad("an integer", v)


def _bool(v: Any) -> bool:
    if v is True or v is False:
        return v
    if getattr(getattr(v, "dtype", None), "kind", None) == "b":  # numpy bool_
        return bool(v)
    raise _bad("true or false", v)


def _str(v: Any) -> str:
    if type(v) is str:
        return v
    if isinstance(v, str):
        return str(v)
    raise _bad("a string", v)


def _literal_decoder(allowed: tuple[Any, ...]) -> Decoder:
    def dec(v: Any) -> Any:
        for a in allowed:
            if v == a and type(v) is type(a):
                return a
        raise RecordDecodeError((), NOT_ALLOWED.format(allowed=list(allowed), value=v))

    return dec


def _optional_decoder(inner: Decoder) -> Decoder:
    def dec(v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        return inner(v)

    return dec


def _sequence(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return v
    if type(v).__module__ == "numpy" and getattr(v, "ndim", 0) == 1:
        return v.tolist()
    raise _bad("an array", v)


def _tuple_decoder(item: Decoder) -> Decoder:
    def dec(v: Any) -> tuple[Any, ...]:
        seq = _sequence(v)
        try:
            return tuple([item(x) for x in seq])
        except RecordDecodeError:
            for i, x in enumerate(seq):  # the failing index, for the message
                try:
                    item(x)
                except RecordDecodeError as e:
                    raise e.within(i) from None
            raise

    return dec


def _fixed_tuple_decoder(items: tuple[Decoder, ...]) -> Decoder:
    def dec(v: Any) -> tuple[Any, ...]:
        seq = _sequence(v)
        if len(seq) != len(items):
            raise _bad(f"an array of {len(items)} items", v)
        out = []
        for i, (d, x) in enumerate(zip(items, seq, strict=True)):
            try:
                out.append(d(x))
            except RecordDecodeError as e:
                raise e.within(i) from None
        return tuple(out)

    return dec


def _dict_decoder(val: Decoder) -> Decoder:
    def dec(v: Any) -> dict[str, Any]:
        if not isinstance(v, Mapping):
            raise _bad("an object", v)
        out: dict[str, Any] = {}
        for k, x in v.items():
            try:
                out[_str(k)] = val(x)
            except RecordDecodeError as e:
                raise e.within(str(k)) from None
        return out

    return dec


_DEFAULT, _NONE, _REQUIRED, _MISSING_AS = 0, 1, 2, 3
"""What a record decoder does with a missing key: let the constructor apply the
field's default, pass ``None`` (an Optional field without default), raise, or pass the
field's :func:`missing_as` value."""


def _record_decoder(cls: type) -> Decoder:
    hints = record_hints(cls)
    specs: list[tuple[str, Decoder, int]] = []
    legacy: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints[f.name]
        if NULL_AS in f.metadata:
            if hint is not float:
                raise TypeError(f"{cls.__name__}.{f.name}: null_as needs a float field")
            dec = _float_decoder(float(f.metadata[NULL_AS]))
        else:
            dec = _decoder(hint)
        if MISSING_AS in f.metadata:
            legacy[f.name] = f.metadata[MISSING_AS]
            specs.append((f.name, dec, _MISSING_AS))
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            specs.append((f.name, dec, _DEFAULT))
        else:
            specs.append((f.name, dec, _NONE if _is_optional(hint) else _REQUIRED))
    record = cls.__name__

    def dec_record(v: Any) -> Any:
        if not isinstance(v, Mapping):
            raise _bad(f"an object ({record})", v)
        kw: dict[str, Any] = {}
        for name, dec, missing in specs:
            if name in v:
                try:
                    kw[name] = dec(v[name])
                except RecordDecodeError as e:
                    raise e.within(name) from None
            elif missing == _NONE:
                kw[name] = None
            elif missing == _MISSING_AS:
                kw[name] = legacy[name]
            elif missing == _REQUIRED:
                raise RecordDecodeError((), MISSING.format(field=name, record=record))
        try:
            return cls(**kw)
        except (TypeError, ValueError) as e:
            raise RecordDecodeError((), INVALID.format(record=record, why=e)) from e

    return dec_record


def _is_optional(hint: Any) -> bool:
    return (get_origin(hint) in (Union, types.UnionType)) and type(None) in get_args(hint)


def arrow_schema(cls: type) -> pa.Schema:
    """Parquet/Arrow schema of a flat record, one column per field in declaration order.

    ``str`` and string ``Literal``s -> ``string``, ``int`` -> ``int64``, ``float`` ->
    ``float64``, ``bool`` -> ``bool``, ``tuple[X, ...]`` -> ``list<X>``; every column is
    nullable (``X | None`` maps to X's type).

    Raises:
        TypeError: For a field type with no column type (a nested record, a dict).
    """
    import pyarrow as pa

    scalars = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}

    def column(hint: Any, name: str) -> pa.DataType:
        origin, args = get_origin(hint), get_args(hint)
        if hint in scalars:
            return scalars[hint]
        if origin is Literal and all(isinstance(a, str) for a in args):
            return pa.string()
        if _is_optional(hint):
            (inner,) = (a for a in args if a is not type(None))
            return column(inner, name)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return pa.list_(column(args[0], name))
        raise TypeError(f"{cls.__name__}.{name}: no Parquet column type for {hint!r}")

    hints = record_hints(cls)
    return pa.schema([(f.name, column(hints[f.name], f.name)) for f in dataclasses.fields(cls)])
