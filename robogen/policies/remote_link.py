"""The connection under a ``remote:`` policy: one WebSocket to a policy server (openpi's
protocol: a msgpack metadata frame on connect, one binary msgpack frame per request and reply,
a text frame holding a traceback for an error), and what robogen records of a server.

Used by :mod:`robogen.policies.remote` (retries, endpoints, deadlines live there).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from robogen.policies.adapter import AdapterSpec
from robogen.policies.wire import WireError, packb, unpackb

CLOSE_TIMEOUT_S = 0.1
"""How long closing a connection waits for the server's close frame [s]: a failed link is
closed while the unit's deadline runs, and a stopped server never answers."""
class ServerError(RuntimeError):
    """The server answered with an error (a text frame holding its traceback)."""


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` (a decoded msgpack frame) made JSON-safe for the manifest: maps with text
    keys, lists, text cut at 500 characters, arrays as their shape and dtype, non-finite
    floats as None, anything else as its ``repr``."""
    if depth > 6:
        return "..."
    if isinstance(value, dict):
        return {(k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)):
                jsonable(v, depth + 1) for k, v in list(value.items())[:100]}
    if isinstance(value, list | tuple):
        return [jsonable(v, depth + 1) for v in value[:100]]
    if isinstance(value, np.ndarray):
        return {"ndarray_shape": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bool | int) or value is None:
        return value
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 500 else text[:497] + "..."


def tail(text: str, n: int = 300) -> str:
    """The last non-blank line of ``text`` (all of it if none), cut to ``n`` characters with
    ``...`` (a server's traceback shortened to its error for a message)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else text
    return last if len(last) <= n else last[: n - 3] + "..."


@functools.cache
def _connect_kwargs() -> dict[str, Any]:
    """``legacy=True`` where websockets (>= 17) asks for it to return the connection directly."""
    import inspect

    from websockets.sync.client import connect

    return {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}


class Link:
    """One WebSocket connection to a policy server (opened lazily, reopened on failure)."""

    def __init__(self, endpoint: str, spec: AdapterSpec, api_key: str | None) -> None:
        self.endpoint = endpoint
        self._spec = spec
        self._api_key = api_key
        self._ws: Any = None
        self.metadata: Any = None

    def open(self, timeout: float | None = None) -> None:
        """Connect and read the metadata frame, within ``timeout`` [s] each (default
        ``timeout_s``)."""
        from websockets.sync.client import connect

        wait = self._spec.timeout_s if timeout is None else timeout
        headers = {"Authorization": f"Api-Key {self._api_key}"} if self._api_key else None
        ws = connect(self.endpoint, compression=None, max_size=None,
                     open_timeout=wait, close_timeout=CLOSE_TIMEOUT_S,
                     additional_headers=headers, **_connect_kwargs())
        try:
            self.metadata = self._decode(ws.recv(timeout=wait))
        except BaseException:
            ws.close()
            raise
        self._ws = ws

    @staticmethod
    def _decode(frame: Any) -> Any:
        if isinstance(frame, str):
            raise ServerError(frame)
        return unpackb(frame)

    def request(self, message: dict[str, Any], timeout: float | None = None) -> Any:
        """Send ``message`` and return the decoded reply (one try, opening if needed), waiting
        at most ``timeout`` [s] (default ``timeout_s``)."""
        wait = self._spec.timeout_s if timeout is None else timeout
        if self._ws is None:
            self.open(wait)
        ws = self._ws
        assert ws is not None  # open() set it or raised
        ws.send(packb(message))
        return self._decode(ws.recv(timeout=wait))

    @property
    def is_open(self) -> bool:
        """Whether a connection is open (:meth:`open` succeeded and nothing closed it since)."""
        return self._ws is not None

    @property
    def resets(self) -> bool:
        """Whether the server advertised robogen's reset extension (metadata
        ``{"robogen": {"reset": true}}``, as ``robogen serve`` does): it then takes a reset
        message with the episode seed when an episode starts in a slot."""
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        robogen = meta.get("robogen")
        return isinstance(robogen, dict) and robogen.get("reset") is True

    def close(self) -> None:
        """Close the connection, if open (best effort: a broken socket's error is dropped);
        the next request opens a new one."""
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:  # noqa: BLE001 - closing a broken socket is best effort
                pass


def retryable_errors() -> tuple[type[BaseException], ...]:
    """The exceptions after which a request is retried on a new connection: socket and
    timeout errors, a closed stream, WebSocket protocol and handshake errors, an error frame
    from the server (:class:`ServerError`) and an undecodable reply
    (:class:`~robogen.policies.wire.WireError`). Imports ``websockets`` (hence a function)."""
    from websockets.exceptions import InvalidHandshake, WebSocketException

    return (OSError, TimeoutError, EOFError, WebSocketException, InvalidHandshake, ServerError,
            WireError)
