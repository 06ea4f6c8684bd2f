"""``robogen serve``: any robogen policy behind openpi's WebSocket policy-server protocol.

The protocol is the one :mod:`robogen.policies.remote` speaks (openpi's
``serving/websocket_policy_server.py``): on connect one msgpack metadata frame; then one
observation map per request, answered with ``{"actions": (1, act_dim) float32,
"server_timing": {"infer_ms": ...}}``; any error is sent as a text frame holding the
traceback, then the connection closes with code 1011. ``GET /healthz`` answers 200.

Requests read the env's observation from the keys ``observation/state`` (``(obs_dim,)``
float) and ``observation/image`` (``(H, W, 3) uint8``), the ``remote:`` adapter's defaults.
Inference runs one request at a time (policies are not thread-safe), as openpi's server
does, but on a thread of its own, off the event loop: a request that has not been answered
within ``request_timeout_s`` gets an error frame (``inference timed out``) and its connection
closes with 1011, requests queued behind a hung ``act`` time out the same way, ``GET
/healthz`` keeps answering (503 while an inference has been running past the timeout), and
SIGINT/SIGTERM stop the server at once (the hung thread is a daemon: it does not hold the
process). Each connection is one env slot of the policy; the
robogen extension ``{"__robogen__": "reset", "seed": s}`` (advertised in the metadata as
``{"robogen": {"reset": true}}``) starts a new episode in it, with ``policy.reset([slot],
seeds=[s])`` so seeded policies draw as they do in-process.

Security: the server binds 127.0.0.1 unless told otherwise, decodes only msgpack (never
pickle), and with an API key answers 401 to any request without ``Authorization: Api-Key
<key>``. Scripted experts read the simulator (privileged) and cannot be served.
"""

from __future__ import annotations

import asyncio
import hmac
import http
import itertools
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from robogen.errors import InvalidSpecError
from robogen.policies.remote import RESET_KEY
from robogen.policies.wire import packb, unpackb

STATE_KEY = "observation/state"
IMAGE_KEY = "observation/image"
PRIVILEGED = (
    "policy {uri!r} reads the simulator (a privileged scripted expert), so it cannot act on "
    "observations sent over the wire; serve a policy that acts on observations (sb3:, flax:, "
    "python:, random)"
)
BAD_REQUEST = "request key {key!r} {what}; expected {expected}"
INFER_TIMED_OUT = (
    "inference timed out after {timeout:g} s (robogen serve --request-timeout){busy}; the "
    "policy's act() did not return"
)
"""Error frame of a request not answered in time (tests reuse it)."""
HEALTH_BUSY = "inference busy for {busy:.1f} s (past --request-timeout {timeout:g} s)\n"
"""Body of ``GET /healthz``'s 503 while an inference hangs."""
DEFAULT_REQUEST_TIMEOUT_S = 60.0
"""Default per-request inference budget of ``robogen serve`` [s]."""


class _InferenceThread:
    """One daemon thread running inference calls in order (policies are not thread-safe).

    :meth:`submit` returns an asyncio future for the event loop; :attr:`busy_since` is the
    ``time.monotonic()`` the running call started (None when idle).
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.busy_since: float | None = None
        threading.Thread(target=self._main, name="robogen-serve-inference", daemon=True).start()

    def _main(self) -> None:
        while True:
            loop, fut, fn, args = self._jobs.get()
            self.busy_since = time.monotonic()
            try:
                result, error = fn(*args), None
            except BaseException as e:  # noqa: BLE001 - handed to the event loop
                result, error = None, e
            finally:
                self.busy_since = None
            loop.call_soon_threadsafe(_settle, fut, result, error)

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((loop, fut, fn, args))
        return fut


def _settle(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():  # the request timed out meanwhile
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class PolicyServer:
    """A loaded robogen policy answering openpi-protocol requests.

    Args:
        policy: The loaded policy (not privileged).
        uri: Its URI (sent in the metadata).
        ctx: The :class:`~robogen.policies.base.LoadContext` it was loaded with.
        api_key: If given, every connection must send ``Authorization: Api-Key <key>``.
        request_timeout_s: Longest wait for one request's inference [s] (> 0), queueing
            behind another included.

    Raises:
        InvalidSpecError: If ``request_timeout_s`` is not > 0.
    """

    def __init__(self, policy: Any, uri: str, ctx: Any, api_key: str | None = None,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        from robogen.policies.base import policy_capabilities

        if not request_timeout_s > 0:
            raise InvalidSpecError(f"--request-timeout must be > 0 seconds, got "
                                   f"{request_timeout_s!r}")
        self.request_timeout_s = float(request_timeout_s)
        self._inference: _InferenceThread | None = None
        self._waiting: set[asyncio.Future[Any]] = set()  # cancelled when the server stops
        self.policy = policy
        self.uri = uri
        self.ctx = ctx
        self.api_key = api_key
        self._slots = itertools.count()
        caps = policy_capabilities(policy)
        self._takes_slots, self._takes_seeds = caps.slots, caps.seeds
        self._act_shape = tuple(getattr(ctx.action_space, "shape", ()) or ())
        spaces = getattr(ctx.observation_space, "spaces", None)
        self._state_space = spaces["state"] if spaces else (
            ctx.observation_space if ctx.obs_mode == "state" else None)
        self._image_space = spaces["pixels"] if spaces else (
            ctx.observation_space if ctx.obs_mode == "pixels" else None)
        self.metadata = {
            "robogen": {"protocol": 1, "reset": True},
            "policy": uri,
            "env_id": ctx.env_id,
            "obs_mode": ctx.obs_mode,
            "observation_keys": {k: list(s.shape) for k, s in
                                 ((STATE_KEY, self._state_space), (IMAGE_KEY, self._image_space))
                                 if s is not None},
            "action_shape": list(self._act_shape),
        }

    def _field(self, msg: dict[str, Any], key: str, space: Any, dtype: Any) -> np.ndarray:
        if key not in msg:
            keys = sorted(self.metadata["observation_keys"])
            raise KeyError(BAD_REQUEST.format(key=key, what="is missing", expected=f"keys {keys}"))
        x = msg[key]
        if not isinstance(x, np.ndarray) or x.shape != tuple(space.shape):
            got = x.shape if isinstance(x, np.ndarray) else type(x).__name__
            raise ValueError(BAD_REQUEST.format(key=key, what=f"holds {got}",
                                                expected=f"an array of shape {space.shape}"))
        return x.astype(dtype, copy=False)

    def observation(self, msg: Any) -> Any:
        """The policy's batch of one (``(1, obs_dim)``, ``(1, H, W, 3)`` or a dict) of a request.

        Raises:
            KeyError, ValueError: On a missing key or an array of the wrong shape.
        """
        if not isinstance(msg, dict):
            raise ValueError(f"a request must be a map of observation keys, got "
                             f"{type(msg).__name__}")
        state = image = None
        if self._state_space is not None:
            state = self._field(msg, STATE_KEY, self._state_space, np.float32)[None]
        if self._image_space is not None:
            image = self._field(msg, IMAGE_KEY, self._image_space, np.uint8)[None]
        if state is not None and image is not None:
            return {"state": state, "pixels": image}
        return state if state is not None else image

    def infer(self, slot: int, msg: Any) -> dict[str, Any]:
        """Answer one request of connection ``slot`` (a reset or an observation)."""
        if isinstance(msg, dict) and msg.get(RESET_KEY) == "reset":
            seed = int(msg.get("seed", 0))
            if self._takes_seeds:
                self.policy.reset([slot], seeds=[seed])
            else:
                self.policy.reset([slot])
            return {"reset": True}
        obs = self.observation(msg)
        start = time.perf_counter()
        if self._takes_slots:
            out = self.policy.act(obs, deterministic=True, slots=[slot])
        else:
            out = self.policy.act(obs, deterministic=True)
        actions = np.asarray(out, dtype=np.float32).reshape(1, -1)
        return {"actions": actions,
                "server_timing": {"infer_ms": 1000 * (time.perf_counter() - start)}}

    def _busy_s(self) -> float:
        """How long the running inference has run [s] (0 when idle)."""
        since = self._inference.busy_since if self._inference is not None else None
        return 0.0 if since is None else time.monotonic() - since

    def _process_request(self, connection: Any, request: Any) -> Any:
        if request.path == "/healthz":
            busy = self._busy_s()
            if busy > self.request_timeout_s:
                return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, HEALTH_BUSY.format(
                    busy=busy, timeout=self.request_timeout_s))
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.api_key is not None:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Api-Key {self.api_key}".encode()):
                return connection.respond(http.HTTPStatus.UNAUTHORIZED,
                                          "missing or wrong 'Authorization: Api-Key <key>'\n")
        return None

    async def _handler(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed
        from websockets.frames import CloseCode

        slot = next(self._slots)
        await ws.send(packb(self.metadata))
        try:
            while True:
                frame = await ws.recv()
                try:
                    if isinstance(frame, str):
                        raise ValueError("text frame received; requests are binary msgpack")
                    reply = packb(await self._infer_off_loop(slot, unpackb(frame)))
                except Exception:  # noqa: BLE001 - every error goes back to the client
                    await ws.send(traceback.format_exc())
                    await ws.close(code=CloseCode.INTERNAL_ERROR,
                                   reason="Internal server error. Traceback in previous frame.")
                    return
                await ws.send(reply)
        except ConnectionClosed:
            return
        finally:
            if self._busy_s() == 0.0:  # not behind a hung act(): forget the slot's state
                try:
                    self.policy.reset([slot])
                except Exception:  # noqa: BLE001 - best effort
                    pass

    async def _infer_off_loop(self, slot: int, msg: Any) -> dict[str, Any]:
        """:meth:`infer` on the inference thread, within ``request_timeout_s``.

        Raises:
            TimeoutError: :data:`INFER_TIMED_OUT` (the call goes on in the background).
        """
        if self._inference is None:
            self._inference = _InferenceThread()
        fut = self._inference.submit(self.infer, slot, msg)
        self._waiting.add(fut)
        try:
            return await asyncio.wait_for(fut, self.request_timeout_s)
        except TimeoutError:
            busy = self._busy_s()
            note = (f"; another request's act() has been running for {busy:.1f} s"
                    if busy > self.request_timeout_s else "")
            raise TimeoutError(INFER_TIMED_OUT.format(timeout=self.request_timeout_s,
                                                      busy=note)) from None
        finally:
            self._waiting.discard(fut)

    async def run(self, host: str, port: int, on_ready: Callable[[str, int], None] | None = None
                  ) -> None:
        """Serve until SIGINT/SIGTERM; ``on_ready(host, port)`` once listening (port 0: any)."""
        from websockets.asyncio.server import serve

        stop = asyncio.get_running_loop().create_future()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.cancel)
        async with serve(self._handler, host, port, compression=None, max_size=None,
                         process_request=self._process_request) as server:
            bound = next(iter(server.sockets)).getsockname()[1]
            if on_ready is not None:
                on_ready(host, int(bound))
            try:
                await stop
            except asyncio.CancelledError:
                pass
            for fut in list(self._waiting):  # handlers waiting on inference end now, not
                fut.cancel()  # at their request timeout (a hung act() is left behind)


def load_server(uri: str, env_id: str, *, obs_mode: str = "state",
                vecnormalize: str | None = None, api_key: str | None = None,
                device: str = "cpu",
                request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> PolicyServer:
    """Load ``uri`` for env ``env_id`` (its spaces build the LoadContext) as a server.

    Raises:
        InvalidSpecError: If the policy is privileged (an expert) or the API key is empty.
        UnknownNameError, CheckpointError, SpaceMismatchError: As :func:`load_policy`.
    """
    from robogen.envs import make
    from robogen.policies import PrivilegedPolicy, load_policy
    from robogen.rollout.worker import policy_context

    if api_key is not None and not api_key.strip():
        raise InvalidSpecError("--api-key is empty; give a non-empty key or leave it out")
    env = make(env_id, obs_mode=obs_mode)
    try:
        ctx = policy_context(env_id, obs_mode, vecnormalize, env, device)
        policy = load_policy(uri, ctx)
    finally:
        env.close()
    if isinstance(policy, PrivilegedPolicy):
        raise InvalidSpecError(PRIVILEGED.format(uri=uri))
    return PolicyServer(policy, uri, ctx, api_key, request_timeout_s)


def serve_forever(server: PolicyServer, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run ``server`` on ``host:port``; prints ``listening on ws://HOST:PORT`` to stderr."""

    def ready(h: str, p: int) -> None:
        sys.stderr.write(f"robogen serve: {server.uri} for {server.ctx.env_id} "
                         f"listening on ws://{h}:{p}\n")
        sys.stderr.flush()

    asyncio.run(server.run(host, port, ready))
