"""``remote:`` policies: a policy server spoken to over openpi's WebSocket protocol.

Protocol (openpi's ``openpi_client.websocket_client_policy`` and ``serving/
websocket_policy_server.py``, Physical Intelligence, Apache-2.0): a plain WebSocket with
binary frames and no size limit; on connect the server sends one msgpack frame of metadata;
each request is one observation as a msgpack map (arrays as in :mod:`robogen.policies.wire`);
the reply holds ``actions`` shaped ``(horizon, action_dim)`` plus timing fields; a server
error is a text frame holding the traceback, then close code 1011. No reset message exists,
so a plain openpi server sees no episode boundaries. A server whose metadata carries
``{"robogen": {"reset": true}}`` (``robogen serve``) is also sent
``{"__robogen__": "reset", "seed": <episode seed>}`` when an episode starts in a slot.

URI and adapter spec: see :mod:`robogen.policies.adapter`.

Batches and endpoints:
    Every env slot has its own connection; a batch's requests run concurrently. Slot ``k``
    of a worker starts on endpoint ``(w + k) % n`` of the ``n`` endpoints, ``w`` being the
    worker's index (``LoadContext.worker_index``: workers 0, 1, 2, ... of a backend take
    the endpoints round-robin); a failed request moves the slot to the next endpoint for
    good. The mean round-trip time of each episode's requests is stored with the episode
    (``EpisodeResult.policy_latency_ms``).
    An openpi server infers one request at a time, so parallelism comes from endpoints.

Action chunking:
    A reply's first ``replan_steps`` actions are executed in turn before the slot's next
    request (``replan_steps=1``: closed loop, a request per step).

Faults:
    A request that times out (``timeout_s``), loses its connection or gets an error frame is
    retried ``retries`` times with back-off (``backoff_s``, doubled each time, reconnecting
    each time); then :class:`~robogen.errors.InfrastructureError` is raised, which the rollout
    worker records as cause ``infra_error`` (an invalid episode, never a policy failure).

Pairing:
    A deterministic server gives paired episodes. Servers whose policy samples (openpi
    advances one RNG per call) answer in the order requests arrive, which concurrent
    workers do not fix: for them pairing across conditions is by initial state only.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np

from robogen.errors import InfrastructureError, InvalidSpecError, SpaceMismatchError
from robogen.policies.adapter import AdapterSpec, parse_remote_uri
from robogen.policies.base import LoadContext, PolicyCapabilities, register_policy_scheme
from robogen.policies.wire import WireError, packb, unpackb

API_KEY_ENV = "ROBOGEN_API_KEY"
RESET_KEY = "__robogen__"
UNREACHABLE = (
    "policy server {endpoint} failed {attempts} time(s) (last: {why}); check that it runs "
    "(robogen serve ... --port P, or curl http://HOST:PORT/healthz) and the address"
)
PROBE_MISMATCH = (
    "policy server {endpoint} answered the probe observation with {what}; expected {expected}. "
    "{fix}"
)
PROBE_ERROR = (
    "policy server {endpoint} raised on the probe observation (keys {keys}): {tail}. Do the "
    "adapter's state_key/image_key/prompt match what the server expects?"
)


class ServerError(RuntimeError):
    """The server answered with an error (a text frame holding its traceback)."""


def _tail(text: str, n: int = 300) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else text
    return last if len(last) <= n else last[: n - 3] + "..."


@functools.cache
def _connect_kwargs() -> dict[str, Any]:
    """``legacy=True`` where websockets (>= 17) asks for it to return the connection directly."""
    import inspect

    from websockets.sync.client import connect

    return {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}


class _Link:
    """One WebSocket connection to a policy server (opened lazily, reopened on failure)."""

    def __init__(self, endpoint: str, spec: AdapterSpec, api_key: str | None) -> None:
        self.endpoint = endpoint
        self._spec = spec
        self._api_key = api_key
        self._ws: Any = None
        self.metadata: Any = None

    def open(self) -> None:
        from websockets.sync.client import connect

        headers = {"Authorization": f"Api-Key {self._api_key}"} if self._api_key else None
        ws = connect(self.endpoint, compression=None, max_size=None,
                     open_timeout=self._spec.timeout_s, close_timeout=1.0,
                     additional_headers=headers, **_connect_kwargs())
        try:
            self.metadata = self._decode(ws.recv(timeout=self._spec.timeout_s))
        except BaseException:
            ws.close()
            raise
        self._ws = ws

    @staticmethod
    def _decode(frame: Any) -> Any:
        if isinstance(frame, str):
            raise ServerError(frame)
        return unpackb(frame)

    def request(self, message: dict[str, Any]) -> Any:
        """Send ``message`` and return the decoded reply (one try, opening if needed)."""
        if self._ws is None:
            self.open()
        self._ws.send(packb(message))
        return self._decode(self._ws.recv(timeout=self._spec.timeout_s))

    @property
    def is_open(self) -> bool:
        return self._ws is not None

    @property
    def resets(self) -> bool:
        meta = self.metadata if isinstance(self.metadata, dict) else {}
        robogen = meta.get("robogen")
        return isinstance(robogen, dict) and robogen.get("reset") is True

    def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:  # noqa: BLE001 - closing a broken socket is best effort
                pass


def _retryable() -> tuple[type[BaseException], ...]:
    from websockets.exceptions import InvalidHandshake, WebSocketException

    return (OSError, TimeoutError, EOFError, WebSocketException, InvalidHandshake, ServerError,
            WireError)


def _resize_with_pad(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """``(H, W, 3) uint8`` -> ``(height, width, 3) uint8``: bilinear, aspect kept, zero pad."""
    from PIL import Image

    h, w = img.shape[:2]
    if (h, w) == (height, width):
        return img
    ratio = max(w / width, h / height)
    nh, nw = int(h / ratio), int(w / ratio)
    small = np.asarray(Image.fromarray(img).resize((nw, nh), Image.Resampling.BILINEAR))
    out = np.zeros((height, width, img.shape[2]), dtype=np.uint8)
    top, left = (height - nh) // 2, (width - nw) // 2
    out[top:top + nh, left:left + nw] = small
    return out


class RemotePolicy:
    """A policy served over openpi's WebSocket protocol (see the module docstring).

    Args:
        endpoints: ``ws://HOST:PORT`` URLs.
        spec: The adapter spec.
        ctx: The env's spaces and observation mode.
        api_key: Sent as ``Authorization: Api-Key <key>`` when given.

    Attributes:
        observation_space, action_space, obs_mode: The env's (the server's fit is probed).
        server_latency_ms: Per slot, the round-trip times [ms] of the current episode's
            requests (cleared at reset).
    """

    capabilities: ClassVar[PolicyCapabilities] = PolicyCapabilities(slots=True, seeds=True)

    def __init__(self, endpoints: Sequence[str], spec: AdapterSpec, ctx: LoadContext,
                 api_key: str | None = None) -> None:
        self.endpoints = tuple(endpoints)
        self.spec = spec
        self.observation_space = ctx.observation_space
        self.action_space = ctx.action_space
        self.obs_mode = ctx.obs_mode
        self._act_shape = tuple(getattr(ctx.action_space, "shape", ()) or ())
        self._api_key = api_key
        self._base = ctx.worker_index % len(self.endpoints)
        self._links: dict[int, _Link] = {}
        self._route: dict[int, int] = {}
        self._queues: dict[int, deque[np.ndarray]] = {}
        self._seeds: dict[int, int] = {}
        self.server_latency_ms: dict[int, list[float]] = {}
        self._pool: ThreadPoolExecutor | None = None

    # -- messages --------------------------------------------------------------------
    def observation_message(self, obs: Any) -> dict[str, Any]:
        """The request map of one observation (``(obs_dim,)``, ``(H, W, 3)`` or a dict)."""
        s = self.spec
        state = obs.get("state") if isinstance(obs, dict) else (
            obs if self.obs_mode == "state" else None)
        image = obs.get("pixels") if isinstance(obs, dict) else (
            obs if self.obs_mode == "pixels" else None)
        msg: dict[str, Any] = {}
        if state is not None and s.state_key:
            msg[s.state_key] = np.asarray(state, dtype=np.float32)
        if image is not None and s.image_key:
            img = np.asarray(image, dtype=np.uint8)
            if s.image_size is not None:
                img = _resize_with_pad(img, *s.image_size)
            msg[s.image_key] = img
        if s.prompt:
            msg["prompt"] = s.prompt
        return msg

    def chunk(self, reply: Any, endpoint: str | None = None) -> np.ndarray:
        """``(horizon, act_dim) float32`` actions of a reply, sliced per the spec.

        Raises:
            SpaceMismatchError: Naming the key, dtype or shape that does not fit.
        """
        s = self.spec
        where = endpoint or ", ".join(self.endpoints)
        if not isinstance(reply, dict) or s.action_key not in reply:
            what = (f"a map with keys {sorted(map(str, reply))}" if isinstance(reply, dict)
                    else f"a {type(reply).__name__}")
            raise SpaceMismatchError(PROBE_MISMATCH.format(
                endpoint=where, what=what, expected=f"a map with key {s.action_key!r}",
                fix="Set action_key to the server's action key."))
        a = reply[s.action_key]
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
            what = f"{s.action_key!r} of dtype {getattr(a, 'dtype', type(a).__name__)}"
            raise SpaceMismatchError(PROBE_MISMATCH.format(
                endpoint=where, what=what, expected="a float array (horizon, action_dim)",
                fix="The server must send actions as a float ndarray."))
        chunk = a[None] if a.ndim == 1 else a
        if chunk.ndim != 2:
            raise SpaceMismatchError(PROBE_MISMATCH.format(
                endpoint=where, what=f"{s.action_key!r} of shape {a.shape}",
                expected="(horizon, action_dim)", fix=""))
        if s.action_slice is not None:
            chunk = chunk[:, s.action_slice[0]:s.action_slice[1]]
        if chunk.shape[1:] != self._act_shape or chunk.shape[0] < 1:
            sl = f" after action_slice {s.action_slice}" if s.action_slice else ""
            raise SpaceMismatchError(PROBE_MISMATCH.format(
                endpoint=where, what=f"{s.action_key!r} of shape {a.shape}{sl}",
                expected=f"(horizon, {', '.join(map(str, self._act_shape))}) for the env's "
                         f"action space {self.action_space}",
                fix="Set action_slice=start:stop to pick the env's action dims."))
        return chunk.astype(np.float32)

    # -- requests with retries ---------------------------------------------------------
    def _link(self, slot: int) -> _Link:
        """The connection of ``slot`` to its current endpoint (see :meth:`_fail_over`)."""
        link = self._links.get(slot)
        if link is None:
            index = self._route.setdefault(slot, (self._base + slot) % len(self.endpoints))
            link = self._links[slot] = _Link(self.endpoints[index], self.spec, self._api_key)
        return link

    def endpoint_of(self, slot: int) -> str:
        """The endpoint the requests of env slot ``slot`` go to now (see the module doc)."""
        index = self._route.get(int(slot), (self._base + int(slot)) % len(self.endpoints))
        return self.endpoints[index]

    def _fail_over(self, slot: int) -> None:
        """Close ``slot``'s connection; it moves to the next endpoint and stays there."""
        link = self._links.pop(slot, None)
        if link is not None:
            link.close()
        self._route[slot] = (self._route.get(slot, self._base + slot) + 1) % len(self.endpoints)

    def _call(self, slot: int, message: dict[str, Any], replay_reset: bool = True) -> Any:
        s = self.spec
        why = ""
        for attempt in range(s.retries + 1):
            link = self._link(slot)
            try:
                if not link.is_open:
                    link.open()
                    if replay_reset and link.resets and slot in self._seeds:
                        link.request({RESET_KEY: "reset", "seed": self._seeds[slot]})
                start = time.perf_counter()
                reply = link.request(message)
                if RESET_KEY not in message:  # observations only
                    self.server_latency_ms.setdefault(slot, []).append(
                        1000 * (time.perf_counter() - start))
                return reply
            except _retryable() as e:
                self._fail_over(slot)
                why = f"{link.endpoint}: {type(e).__name__}: {_tail(str(e)) or 'no detail'}"
                if attempt < s.retries:
                    time.sleep(s.backoff_s * 2**attempt)
        raise InfrastructureError(UNREACHABLE.format(
            endpoint=", ".join(self.endpoints), attempts=s.retries + 1, why=why))

    def episode_latency_ms(self, slot: int) -> float:
        """Mean round-trip time [ms] of the observation requests of ``slot``'s episode
        since its reset (NaN if it made none); see :class:`LatencyReporting`."""
        times = self.server_latency_ms.get(int(slot))
        return float(np.mean(times)) if times else math.nan

    # -- Policy protocol ------------------------------------------------------------
    def reset(self, slots: Sequence[int], *, seeds: Sequence[int] | None = None) -> None:
        """Start episodes in ``slots``: drop queued actions; tell a robogen server the seeds.

        Raises:
            InfrastructureError: If a robogen server cannot be told after the retries.
        """
        for i, k in enumerate(slots):
            k = int(k)
            self._queues[k] = deque()
            self.server_latency_ms[k] = []
            if seeds is not None:
                self._seeds[k] = int(seeds[i])
            link = self._links.get(k)
            if seeds is not None and link is not None and link.is_open and link.resets:
                self._call(k, {RESET_KEY: "reset", "seed": self._seeds[k]}, replay_reset=False)

    def act(self, obs: Any, *, deterministic: bool = True,
            slots: Sequence[int] | None = None) -> np.ndarray:
        """``(B, act_dim) float32`` actions: the next queued action of each row's slot.

        Slots with an empty queue query the server (concurrently); nothing is dequeued
        unless every query succeeded, so a failed batch can be retried row by row.

        Args:
            obs: ``(B, obs_dim) float32``, ``(B, H, W, 3) uint8`` or a dict of such batches.
            deterministic: Ignored (the server decides).
            slots: Env slot of each row (default ``0..B-1``).

        Raises:
            InfrastructureError: A server that timed out, dropped or answered an error.
        """
        batch = len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)
        rows = [int(k) for k in (range(batch) if slots is None else slots)]
        need = [i for i, k in enumerate(rows) if not self._queues.get(k)]

        def query(i: int) -> np.ndarray:
            row = {key: v[i] for key, v in obs.items()} if isinstance(obs, dict) else obs[i]
            try:
                return self.chunk(self._call(rows[i], self.observation_message(row)))
            except SpaceMismatchError as e:  # passed the probe: the server broke the contract
                raise InfrastructureError(str(e)) from e

        if len(need) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="remote")
            chunks = list(self._pool.map(query, need))
        else:
            chunks = [query(i) for i in need]
        for i, c in zip(need, chunks, strict=True):
            self._queues[rows[i]] = deque(c[: self.spec.replan_steps])
        return np.stack([self._queues[k].popleft() for k in rows])

    def probe(self, ctx: LoadContext) -> None:
        """Handshake with every endpoint and check one reply's action key, dtype and shape.

        Raises:
            InfrastructureError: If an endpoint cannot be reached after the retries.
            SpaceMismatchError: If the reply's action has the wrong key, dtype or shape.
            InvalidSpecError: If the server raises on the probe observation, or its
                action horizon is shorter than ``replan_steps``.
        """
        space = ctx.observation_space
        space.seed(0)
        msg = self.observation_message(space.sample())
        for endpoint in self.endpoints:
            link = _Link(endpoint, self.spec, self._api_key)
            try:
                for attempt in range(self.spec.retries + 1):
                    try:
                        link.open()
                        break
                    except _retryable() as e:
                        link.close()
                        if attempt == self.spec.retries:
                            raise InfrastructureError(UNREACHABLE.format(
                                endpoint=endpoint, attempts=attempt + 1,
                                why=f"{type(e).__name__}: {_tail(str(e))}")) from e
                        time.sleep(self.spec.backoff_s * 2**attempt)
                try:
                    reply = link.request(msg)
                except ServerError as e:
                    raise InvalidSpecError(PROBE_ERROR.format(
                        endpoint=endpoint, keys=sorted(msg), tail=_tail(str(e)))) from e
                except _retryable() as e:
                    raise InfrastructureError(UNREACHABLE.format(
                        endpoint=endpoint, attempts=1,
                        why=f"{type(e).__name__}: {_tail(str(e))}")) from e
            finally:
                link.close()
            chunk = self.chunk(reply, endpoint)
            if chunk.shape[0] < self.spec.replan_steps:
                raise InvalidSpecError(
                    f"policy server {endpoint} returns action chunks of horizon {chunk.shape[0]} "
                    f"but replan_steps={self.spec.replan_steps}; use replan_steps <= "
                    f"{chunk.shape[0]}")

    def close(self) -> None:
        """Close every connection (also done when the process exits)."""
        for link in self._links.values():
            link.close()
        self._links.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


@register_policy_scheme("remote", form="remote:ws://HOST:PORT[?options]")
def load_remote(rest: str, ctx: LoadContext) -> RemotePolicy:
    """Load ``remote:ws://HOST:PORT[,...][?options]`` and probe every endpoint.

    Raises:
        InvalidSpecError, UnknownNameError: On a malformed URI or option.
        InfrastructureError: If an endpoint cannot be reached.
        SpaceMismatchError: If the server's actions do not fit the env's action space.
    """
    endpoints, spec = parse_remote_uri(rest)
    if ctx.obs_mode == "state" and not spec.state_key:
        raise InvalidSpecError("remote policy: state_key is empty, so a state observation "
                               "would send nothing; give state_key=KEY")
    if ctx.obs_mode == "pixels" and not spec.image_key:
        raise InvalidSpecError("remote policy: image_key is empty, so a pixel observation "
                               "would send nothing; give image_key=KEY")
    policy = RemotePolicy(endpoints, spec, ctx, api_key=os.environ.get(API_KEY_ENV) or None)
    policy.probe(ctx)
    return policy
