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
    The endpoints that failed such a chain are then **down** for the rest of the work unit:
    every later request of any slot skips them, and with all endpoints down it fails at once
    (``infra_error`` in microseconds, not a retry chain per slot); in the next unit a down
    endpoint gets one try, no retries, and is up again if it answers.
    The unit's wall-clock budget bounds everything: the rollout worker tells the policy its
    deadline (:meth:`RemotePolicy.begin_unit`), every connect and reply wait is cut to the
    time left, a back-off that would pass it is not slept, and a request still waiting at the
    deadline raises :class:`~robogen.errors.InfrastructureTimeoutError` (``infra_timeout``).

Pairing:
    A deterministic server gives paired episodes. Servers whose policy samples (openpi
    advances one RNG per call) answer in the order requests arrive, which concurrent
    workers do not fix: for them pairing across conditions is by initial state only.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np

from robogen.errors import (
    InfrastructureError,
    InfrastructureTimeoutError,
    InvalidSpecError,
    SpaceMismatchError,
)
from robogen.policies.adapter import AdapterSpec, given_options, parse_remote_uri
from robogen.policies.base import LoadContext, PolicyCapabilities, register_policy_scheme
from robogen.policies.remote_link import (
    Link,
    ServerError,
    jsonable,
    retryable_errors,
    tail,
)
from robogen.types import PolicyLoadInfo, ServerInfo

API_KEY_ENV = "ROBOGEN_API_KEY"
RESET_KEY = "__robogen__"
UNREACHABLE = (
    "policy server {endpoint} failed {attempts} time(s) (last: {why}); check that it runs "
    "(robogen serve ... --port P, or curl http://HOST:PORT/healthz) and the address"
)
ENDPOINTS_DOWN = (
    "policy server {endpoint} is down for the rest of this work unit (it failed a request's "
    "retries: {why}); the episode is recorded as infra_error without waiting, and the server "
    "is tried once more in the next unit"
)
BUDGET_SPENT = (
    "the work unit's wall-clock budget ran out waiting for policy server {endpoint} "
    "(last: {why}); raise --unit-timeout, or lower timeout_s/retries in the remote: URI"
)
LONGER_CHUNKS = (
    "policy server {endpoint} returns chunks of {horizon} actions, but robogen executes "
    "{replan} of each before asking again (replan_steps={replan}, the default: closed loop, "
    "one request per step); if the policy was trained to execute more of each chunk, set "
    "replan_steps=N in the remote: URI (openpi's LIBERO examples execute 5)"
)
PROBE_MISMATCH = (
    "policy server {endpoint} answered the probe observation with {what}; expected {expected}. "
    "{fix}"
)
PROBE_ERROR = (
    "policy server {endpoint} raised on the probe observation (keys {keys}): {tail}. Do the "
    "adapter's state_key/image_key/prompt match what the server expects?"
)


class RemotePolicyWarning(UserWarning):
    """A policy server's replies do not look like what the adapter spec assumes."""


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
                 api_key: str | None = None, *, replan_given: bool = True) -> None:
        self.endpoints = tuple(endpoints)
        self.spec = spec
        self.load_info = PolicyLoadInfo()
        """What each endpoint said when probed (:meth:`probe`), recorded in the manifest."""
        self._replan_given = replan_given
        self.observation_space = ctx.observation_space
        self.action_space = ctx.action_space
        self.obs_mode = ctx.obs_mode
        self._act_shape = tuple(getattr(ctx.action_space, "shape", ()) or ())
        self._api_key = api_key
        self._base = ctx.worker_index % len(self.endpoints)
        self._links: dict[int, Link] = {}
        self._route: dict[int, int] = {}
        self._prompts: dict[int, str] = {}
        self._queues: dict[int, deque[np.ndarray]] = {}
        self._seeds: dict[int, int] = {}
        self.server_latency_ms: dict[int, list[float]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._scenes: list[Any] = []
        self._deadline: float | None = None
        self._down: dict[int, str] = {}
        """Endpoint index -> why it is down for the rest of this unit."""
        self._one_try: set[int] = set()
        """Down endpoints that get one try in this unit (they were down in the last)."""

    # -- messages --------------------------------------------------------------------
    @property
    def prompt(self) -> str:
        """The language instruction sent with every request (``""``: none)."""
        return self.spec.prompt

    def set_prompts(self, prompts: Mapping[int, str]) -> None:
        """Send ``prompts[k]`` instead of :attr:`prompt` with env slot ``k``'s requests (the
        ``language`` axis's rewritten instruction of the slot's episode)."""
        self._prompts.update({int(k): str(v) for k, v in prompts.items()})

    def view_scenes(self, scenes: Sequence[Any]) -> None:
        """Bind env slot k to ``scenes[k]``, whose :attr:`AdapterSpec.cameras` are rendered
        for the image keys after the first (see :class:`~robogen.policies.base.SceneViewing`).

        Raises:
            SceneError: If a scene has no such camera (lists its cameras).
        """
        from robogen.errors import SceneError

        for scene in dict.fromkeys(scenes):
            model = scene.model
            names = [model.camera(i).name for i in range(model.ncam)]
            missing = [c for c in self.spec.cameras if c not in names]
            if missing:
                raise SceneError(
                    f"remote policy option cameras={','.join(self.spec.cameras)!r}: the scene "
                    f"has no camera {missing[0]!r}; its cameras: {[n for n in names if n]}")
        self._scenes = list(scenes)

    def _extra_images(self, slot: int, image: Any) -> list[np.ndarray]:
        """Frames of :attr:`AdapterSpec.cameras` from ``slot``'s scene, at ``image``'s size
        (copies of ``image`` when no scene is bound: the probe's random observation)."""
        if not self.spec.cameras:
            return []
        h, w = np.shape(image)[:2]
        if not self._scenes:
            return [np.asarray(image, np.uint8)] * len(self.spec.cameras)
        scene = self._scenes[slot]
        return [np.asarray(scene.render_frame(c, w, h), np.uint8) for c in self.spec.cameras]

    def observation_message(self, obs: Any, extra: Sequence[np.ndarray] = (),
                            prompt: str | None = None) -> dict[str, Any]:
        """The request map of one observation (``(obs_dim,)``, ``(H, W, 3)`` or a dict), with
        ``extra`` images (``(H, W, 3) uint8``, one per key after the first) and ``prompt``
        instead of :attr:`prompt` when given (sent only if the adapter has a prompt)."""
        s = self.spec
        state = obs.get("state") if isinstance(obs, dict) else (
            obs if self.obs_mode == "state" else None)
        image = obs.get("pixels") if isinstance(obs, dict) else (
            obs if self.obs_mode == "pixels" else None)
        msg: dict[str, Any] = {}
        if state is not None and s.state_key:
            msg[s.state_key] = np.asarray(state, dtype=np.float32)
        if image is not None and s.image_keys:
            for key, frame in zip(s.image_keys, (image, *extra), strict=False):
                img = np.asarray(frame, dtype=np.uint8)
                if s.image_size is not None:
                    img = _resize_with_pad(img, *s.image_size)
                msg[key] = img
        if s.prompt:
            msg["prompt"] = s.prompt if prompt is None else prompt
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
    def begin_unit(self, deadline: float | None) -> None:
        """A work unit starts: requests end by ``deadline`` (``time.monotonic()``; None: no
        bound), and each endpoint that was down gets one try (see the module docstring)."""
        self._deadline = deadline
        self._one_try = set(self._down)

    def _left(self) -> float:
        """Seconds until the unit's deadline (inf without one)."""
        return math.inf if self._deadline is None else self._deadline - time.monotonic()

    def _link(self, slot: int) -> Link:
        """The connection of ``slot`` to its current endpoint (see :meth:`_fail_over`)."""
        link = self._links.get(slot)
        if link is None:
            index = self._route.setdefault(slot, (self._base + slot) % len(self.endpoints))
            link = self._links[slot] = Link(self.endpoints[index], self.spec, self._api_key)
        return link

    def _usable(self, slot: int) -> int | None:
        """The endpoint ``slot`` sends to now: its route, or the next endpoint that is not
        down (the slot moves there); None if every endpoint is down."""
        n = len(self.endpoints)
        start = self._route.setdefault(slot, (self._base + slot) % n)
        for j in range(n):
            index = (start + j) % n
            if index not in self._down or index in self._one_try:
                if index != start:
                    link = self._links.pop(slot, None)
                    if link is not None:
                        link.close()
                    self._route[slot] = index
                return index
        return None

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
        """One request of ``slot`` with retries, bounded by the unit's deadline.

        Raises:
            InfrastructureError: Every endpoint is down, or the retries failed (the
                endpoints that failed are then down for the rest of the unit).
            InfrastructureTimeoutError: The unit's deadline passed first.
        """
        s = self.spec
        why = "no request made"
        failed: list[int] = []
        for attempt in range(s.retries + 1):
            index = self._usable(slot)
            if index is None:
                downs = sorted(self._down)
                raise InfrastructureError(ENDPOINTS_DOWN.format(
                    endpoint=", ".join(self.endpoints[i] for i in downs),
                    why=self._down[downs[-1]]))
            left = self._left()
            if left <= 0:
                raise InfrastructureTimeoutError(BUDGET_SPENT.format(
                    endpoint=self.endpoints[index], why=why))
            wait = min(s.timeout_s, left)
            link = self._link(slot)
            last_try = index in self._one_try
            self._one_try.discard(index)
            try:
                if not link.is_open:
                    link.open(wait)
                    if replay_reset and link.resets and slot in self._seeds:
                        link.request({RESET_KEY: "reset", "seed": self._seeds[slot]},
                                     max(min(wait, self._left()), 1e-3))
                start = time.perf_counter()
                reply = link.request(message, min(wait, max(self._left(), 1e-3)))
                if RESET_KEY not in message:  # observations only
                    self.server_latency_ms.setdefault(slot, []).append(
                        1000 * (time.perf_counter() - start))
                self._down.pop(index, None)
                return reply
            except retryable_errors() as e:
                self._fail_over(slot)
                why = f"{link.endpoint}: {type(e).__name__}: {tail(str(e)) or 'no detail'}"
                if last_try:  # a down endpoint's one try in this unit: down again at once
                    self._down[index] = why
                else:
                    failed.append(index)
                if self._left() <= 0:
                    raise InfrastructureTimeoutError(BUDGET_SPENT.format(
                        endpoint=link.endpoint, why=why)) from e
                if attempt < s.retries and not last_try:
                    pause = s.backoff_s * 2**attempt
                    if pause >= self._left():
                        raise InfrastructureTimeoutError(BUDGET_SPENT.format(
                            endpoint=link.endpoint, why=why)) from e
                    time.sleep(pause)
        for index in failed:
            self._down[index] = why
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

        def row_of(i: int) -> Any:
            return {key: v[i] for key, v in obs.items()} if isinstance(obs, dict) else obs[i]

        extra = {}  # extra cameras, drawn here (one GL thread) before the concurrent queries
        if self.spec.cameras:
            for i in need:
                row = row_of(i)
                extra[i] = self._extra_images(rows[i], row["pixels"] if isinstance(row, dict)
                                              else row)

        def query(i: int) -> np.ndarray:
            message = self.observation_message(row_of(i), extra.get(i, ()),
                                               self._prompts.get(rows[i]))
            try:
                return self.chunk(self._call(rows[i], message))
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
        sample = space.sample()
        image = sample.get("pixels") if isinstance(sample, dict) else (
            sample if ctx.obs_mode == "pixels" else None)
        msg = self.observation_message(
            sample, self._extra_images(0, image) if image is not None else ())
        self._deadline = ctx.deadline  # a worker loading inside a unit: the unit's deadline
        servers: list[ServerInfo] = []

        def spent(endpoint: str, why: str) -> InfrastructureTimeoutError:
            return InfrastructureTimeoutError(BUDGET_SPENT.format(endpoint=endpoint, why=why))

        for endpoint in self.endpoints:
            link = Link(endpoint, self.spec, self._api_key)
            try:
                for attempt in range(self.spec.retries + 1):
                    if self._left() <= 0:
                        raise spent(endpoint, "connecting")
                    try:
                        link.open(min(self.spec.timeout_s, self._left()))
                        break
                    except retryable_errors() as e:
                        link.close()
                        why = f"{type(e).__name__}: {tail(str(e))}"
                        pause = self.spec.backoff_s * 2**attempt
                        if attempt < self.spec.retries and pause >= self._left():
                            raise spent(endpoint, why) from e
                        if attempt == self.spec.retries:
                            raise InfrastructureError(UNREACHABLE.format(
                                endpoint=endpoint, attempts=attempt + 1, why=why)) from e
                        time.sleep(pause)
                try:
                    reply = link.request(msg, max(min(self.spec.timeout_s, self._left()), 1e-3))
                except ServerError as e:
                    raise InvalidSpecError(PROBE_ERROR.format(
                        endpoint=endpoint, keys=sorted(msg), tail=tail(str(e)))) from e
                except retryable_errors() as e:
                    why = f"{type(e).__name__}: {tail(str(e))}"
                    if self._left() <= 0:
                        raise spent(endpoint, why) from e
                    raise InfrastructureError(UNREACHABLE.format(
                        endpoint=endpoint, attempts=1, why=why)) from e
            finally:
                link.close()
            chunk = self.chunk(reply, endpoint)
            raw = reply[self.spec.action_key]
            meta = jsonable(link.metadata)
            servers.append(ServerInfo(
                endpoint=endpoint, action_horizon=int(chunk.shape[0]),
                action_dim=int(raw.shape[-1]) if getattr(raw, "ndim", 0) else 1,
                reply_keys=tuple(sorted(map(str, reply))),
                metadata=meta if isinstance(meta, dict) else {"value": meta}))
            if chunk.shape[0] > self.spec.replan_steps and not self._replan_given:
                warnings.warn(LONGER_CHUNKS.format(endpoint=endpoint, horizon=chunk.shape[0],
                                                   replan=self.spec.replan_steps),
                              RemotePolicyWarning, stacklevel=2)
            if chunk.shape[0] < self.spec.replan_steps:
                raise InvalidSpecError(
                    f"policy server {endpoint} returns action chunks of horizon {chunk.shape[0]} "
                    f"but replan_steps={self.spec.replan_steps}; use replan_steps <= "
                    f"{chunk.shape[0]}")
        self.load_info = PolicyLoadInfo(servers=tuple(servers))

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
    if spec.cameras and ctx.obs_mode == "state":
        raise InvalidSpecError(
            f"remote policy: image_key={spec.image_key!r} sends several cameras, which needs "
            "pixel observations; run with --obs-mode pixels or state+pixels")
    policy = RemotePolicy(endpoints, spec, ctx, api_key=os.environ.get(API_KEY_ENV) or None,
                          replan_given="replan_steps" in given_options(rest))
    policy.probe(ctx)
    return policy
