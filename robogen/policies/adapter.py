"""The adapter spec of a ``remote:`` policy: how robogen observations map to a server's keys.

A ``remote:`` URI carries its adapter spec as URL query options, so the policy id recorded
in the evaluation manifest (and hashed into its ``spec_hash``) holds the whole spec::

    remote:ws://HOST:PORT[,ws://HOST2:PORT2][?option=value&option=value...]

Options (all optional; values are URL-encoded):

=================  ====================  ================================================
option             default               meaning
=================  ====================  ================================================
``state_key``      ``observation/state`` request key of the state vector; empty: not sent
``image_key``      ``observation/image`` request key of the camera image; empty: not sent;
                                         several keys, comma-separated: one per camera
``cameras``        (none)                with several image keys: the camera of each key
                                         after the first (which gets the observation)
``image_size``     (env's size)          ``HxW`` or ``N``: resize with padding [px]
``prompt``         (none)                text sent under ``prompt`` with every request
``action_key``     ``actions``           reply key of the ``(horizon, dim)`` action chunk
``action_slice``   (all)                 ``start:stop`` of the server's action dims to use
``replan_steps``   ``1``                 actions of each chunk executed before re-querying
``timeout_s``      ``30``                seconds to wait for one reply (and to connect)
``retries``        ``3``                 retries of a failed request before giving up
``backoff_s``      ``0.5``               first back-off between retries [s], doubled each time
=================  ====================  ================================================

Several cameras: ``image_key=observation/image,observation/wrist_image&cameras=robot0_eye_in_hand``
sends the env's pixel observation (its observation camera, which the ``camera`` axis moves)
under the first key and a frame of each named camera of the same scene, at the same size,
under the others (openpi's LIBERO policies take an agent view and a wrist view).

An API key is never part of the URI (it would land in the manifest): it is read from the
environment variable ``ROBOGEN_API_KEY`` and sent as ``Authorization: Api-Key <key>``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from urllib.parse import parse_qsl, urlsplit

from robogen.errors import InvalidSpecError, UnknownNameError

REMOTE_URI = (
    "remote policy URI must be 'remote:ws://HOST:PORT[,ws://HOST2:PORT2][?option=value&...]', "
    "got {uri!r} ({why})"
)
BAD_OPTION = "remote policy option {name}={value!r} is invalid: expected {expected}"


@dataclass(frozen=True, slots=True)
class AdapterSpec:
    """Mapping between robogen observations/actions and a policy server's messages.

    Attributes:
        state_key: Request key of the ``(obs_dim,) float32`` state; ``""``: not sent.
        image_key: Request key of the ``(H, W, 3) uint8`` camera image; ``""``: not sent.
            Comma-separated keys send several cameras (:attr:`image_keys`).
        cameras: Camera of each image key after the first, in order (the first key gets
            the env's pixel observation); empty with one key.
        image_size: ``(height, width)`` [px] the image is resized to (aspect kept, zero
            padding, as openpi's ``resize_with_pad``); None: sent at the env's size.
        prompt: Language instruction sent as ``prompt``; ``""``: not sent.
        action_key: Reply key holding the action chunk ``(horizon, action_dim)``.
        action_slice: ``(start, stop)`` of the server's action dims used; None: all.
        replan_steps: Actions of each chunk executed before the server is asked again (>= 1).
        timeout_s: Seconds to wait for a reply or a connection [s] (> 0).
        retries: Retries of a failed request (timeout, dropped connection, error frame).
        backoff_s: First wait between retries [s]; doubled after each retry.
    """

    state_key: str = "observation/state"
    image_key: str = "observation/image"
    image_size: tuple[int, int] | None = None
    cameras: tuple[str, ...] = ()
    prompt: str = ""
    action_key: str = "actions"
    action_slice: tuple[int, int] | None = None
    replan_steps: int = 1
    timeout_s: float = 30.0
    retries: int = 3
    backoff_s: float = 0.5


    def __post_init__(self) -> None:
        keys = [k for k in (self.state_key, *self.image_keys) if k] + (
            ["prompt"] if self.prompt else [])
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise InvalidSpecError(BAD_OPTION.format(
                name="image_key", value=self.image_key,
                expected=f"request keys that differ from each other, state_key and prompt "
                         f"({twice[0]!r} would be sent twice, one value overwriting the other)"))
        extra = len(self.image_keys) - 1
        if len(self.cameras) != max(extra, 0):
            raise InvalidSpecError(BAD_OPTION.format(
                name="cameras", value=",".join(self.cameras),
                expected=f"one camera per image key after the first ({max(extra, 0)} for "
                         f"image_key={self.image_key!r}: the first key gets the env's pixel "
                         "observation)"))

    @property
    def image_keys(self) -> tuple[str, ...]:
        """The request keys of the images, first the observation's (empty: none sent)."""
        return tuple(k.strip() for k in self.image_key.split(",") if k.strip())


OPTIONS = tuple(f.name for f in fields(AdapterSpec))


def _int(name: str, value: str, low: int) -> int:
    try:
        v = int(value)
    except ValueError:
        v = low - 1
    if v < low:
        raise InvalidSpecError(BAD_OPTION.format(name=name, value=value,
                                                 expected=f"an integer >= {low}"))
    return v


def _float(name: str, value: str, positive: bool) -> float:
    try:
        v = float(value)
    except ValueError:
        v = float("nan")
    if not (v > 0 if positive else v >= 0):
        raise InvalidSpecError(BAD_OPTION.format(
            name=name, value=value, expected="a number > 0" if positive else "a number >= 0"))
    return v


def _size(value: str) -> tuple[int, int]:
    parts = value.lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        dims = []
    if len(dims) == 1:
        dims = dims * 2
    if len(dims) != 2 or min(dims) < 1:
        raise InvalidSpecError(BAD_OPTION.format(
            name="image_size", value=value, expected="HxW or N in pixels, e.g. 224x224"))
    return dims[0], dims[1]


def _slice(value: str) -> tuple[int, int]:
    try:
        a, b = (int(p) for p in value.split(":"))
    except ValueError:
        a, b = 0, 0
    if not 0 <= a < b:
        raise InvalidSpecError(BAD_OPTION.format(
            name="action_slice", value=value, expected="start:stop with 0 <= start < stop"))
    return a, b


def parse_remote_uri(rest: str) -> tuple[tuple[str, ...], AdapterSpec]:
    """Split the part after ``remote:`` into endpoints and the adapter spec.

    Args:
        rest: ``ws://HOST:PORT[,ws://...][?option=value&...]``.

    Returns:
        ``(endpoints, spec)``: the ``ws://``/``wss://`` URLs in the given order, and the spec.

    Raises:
        InvalidSpecError: On a missing or malformed endpoint or a bad option value.
        UnknownNameError: On an unknown option (lists the close matches).
    """
    uri = f"remote:{rest}"
    where, _, query = rest.partition("?")
    endpoints = tuple(e.strip() for e in where.split(",") if e.strip())
    if not endpoints:
        raise InvalidSpecError(REMOTE_URI.format(uri=uri, why="no endpoint"))
    for e in endpoints:
        parts = urlsplit(e)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("ws", "wss") or not parts.hostname or port is None:
            raise InvalidSpecError(REMOTE_URI.format(
                uri=uri, why=f"endpoint {e!r} is not ws://HOST:PORT or wss://HOST:PORT"))
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as err:
        raise InvalidSpecError(REMOTE_URI.format(uri=uri, why=f"bad query {query!r}")) from err
    kw: dict[str, object] = {}
    for name, value in pairs:
        if name not in OPTIONS:
            raise UnknownNameError("remote policy option", name, OPTIONS)
        if name in kw:
            raise InvalidSpecError(REMOTE_URI.format(uri=uri, why=f"option {name!r} given twice"))
        if name == "image_size":
            kw[name] = _size(value)
        elif name == "action_slice":
            kw[name] = _slice(value)
        elif name == "cameras":
            kw[name] = tuple(c.strip() for c in value.split(",") if c.strip())
        elif name == "replan_steps":
            kw[name] = _int(name, value, 1)
        elif name == "retries":
            kw[name] = _int(name, value, 0)
        elif name in ("timeout_s", "backoff_s"):
            kw[name] = _float(name, value, positive=name == "timeout_s")
        else:
            kw[name] = value
    return endpoints, AdapterSpec(**kw)  # type: ignore[arg-type]


def given_options(rest: str) -> frozenset[str]:
    """The option names a ``remote:`` URI's query sets (``replan_steps`` left at its default
    is not one of them). ``rest`` is as for :func:`parse_remote_uri`, which validates it."""
    query = rest.partition("?")[2]
    return frozenset(name for name, _ in parse_qsl(query, keep_blank_values=True))
