"""Offscreen rendering for robogen's envs: OpenGL on render threads, frames on demand.

Every OpenGL call of the process runs on a render thread, ``robogen-render`` (lane 0),
which owns an offscreen context (EGL, OSMesa or GLFW, as ``MUJOCO_GL`` says). A
renderer may be put on another lane (``lane=1``: thread ``robogen-render-1`` with
its own context), so that two frames are drawn at once: the serial backend draws
the frames of a batch of envs on two lanes when the process has two cores or
more (a Ray worker, one core each, keeps one lane). Under Mesa llvmpipe
(``MUJOCO_GL=egl`` on a CPU) a lane past 0 makes its context on an EGL display of
its own (:class:`_OwnDisplayContext`; lanes past 1 share that one): llvmpipe
rasterizes under a lock of the display's screen, so lanes on MuJoCo's one display
drew their frames' pixels in turn. Envs keep an
:class:`OffscreenRenderer` each; renderers of one lane whose models
upload the same assets (:func:`context_key`: textures, meshes, height fields,
skins, materials' texture use, plane sizes, buffer sizes and quality settings)
share one ``MjrContext`` (framebuffer and uploaded textures) inside that lane's context.
A batch of envs of one scene draws from one set of GL objects: 8 contexts cost
6-19% more render-thread CPU per 84x84 frame than one (Mesa llvmpipe, PickPlace,
Push; ``benchmarks/bench_rollout.py --only contexts``). A renderer whose textures
are edited in place leaves a shared context first (:meth:`OffscreenRenderer.upload_textures`),
so no edit shows in another env's frames.
Tasks and frames live in :mod:`~robogen.envs.render_frames`, lanes' own EGL displays in
:mod:`~robogen.envs.egl_display`, the context key in :mod:`~robogen.envs.render_key` (their
names are re-exported here).

Why a thread: a pixel observation costs ``mjv_updateScene`` (copying the
state into an ``MjvScene``, ~10 us, done on the caller's thread) plus
``mjr_render`` and ``mjr_readPixels`` (~1-2 ms of llvmpipe at 84x84, done on
the render thread; MuJoCo releases the GIL there). :meth:`OffscreenRenderer.render_async`
returns a :class:`PendingFrame` at once, so a rollout worker steps the
physics of env ``k + 1`` while env ``k``'s frame is drawn (``EpisodeWorker``
with ``defer_frames``), which hides physics and Python behind rendering.
:meth:`OffscreenRenderer.render` is the synchronous form used everywhere else.

One context instead of one per env also avoids a context switch and a
pipeline flush per frame (10-25% of an 84x84 frame with Mesa llvmpipe and a
batch of 8 envs).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import robogen._gl  # noqa: F401  (choose MUJOCO_GL before mujoco is imported)

# isort: split
import mujoco
import numpy as np

from robogen.envs.egl_display import (  # noqa: F401 - re-exported
    _gl_renderer,
    _own_display_context,
    _OwnDisplayContext,
)
from robogen.envs.render_frames import (
    FRAME_TIMED_OUT,
    FRAME_TIMEOUT_S,
    MappedFrame,
    PendingFrame,
    RenderTask,
    RenderTimeoutError,
    _timed_out,
    map_frame,
    resolve_frames,
)
from robogen.envs.render_key import context_key
from robogen.errors import RenderError

T = TypeVar("T")
_log = logging.getLogger(__name__)

RENDER_FAILED = (
    "offscreen rendering failed with MUJOCO_GL={backend!r}: {error}. Without a display set "
    "MUJOCO_GL=egl (GPU or Mesa llvmpipe), or MUJOCO_GL=osmesa where libOSMesa is installed, "
    "before mujoco is first imported (import robogen before mujoco, or export MUJOCO_GL=egl "
    "in the shell)"
)
FRAME_TOO_LARGE = (
    "frame {width}x{height} exceeds the offscreen buffer {max_width}x{max_height} of the model; "
    "render a smaller frame or raise spec.visual.global_.offwidth/offheight"
)

# reentrant: a renderer collected by the garbage collector while this thread holds the lock
# (any allocation under it may run a collection) takes it again in ``__del__``
_lock = threading.RLock()
_stopped = False  # set at exit: no render thread is started any more


class _Lane:
    """One render thread, its GL context and the ``MjrContext`` s shared on it."""

    __slots__ = ("gl", "ident", "index", "shared", "tasks")

    def __init__(self, index: int) -> None:
        self.index = index
        self.shared: dict[bytes, _Shared] = {}  # context_key -> context, guarded by _lock
        self.tasks: queue.SimpleQueue[RenderTask[Any] | None] | None = None  # the inbox
        self.gl: Any = None  # mujoco.GLContext, touched only on this lane's thread
        self.ident: int | None = None  # threading.get_ident() of this lane's thread


_lanes: list[_Lane] = [_Lane(0)]  # grown under _lock, never shrunk (but after a fork)


def _lane(index: int) -> _Lane:
    """Lane ``index`` (made on first use)."""
    lanes = _lanes
    if 0 <= index < len(lanes):
        return lanes[index]
    _check_lane(index)
    with _lock:
        while len(_lanes) <= index:
            _lanes.append(_Lane(len(_lanes)))
        return _lanes[index]


def _render_failed(e: BaseException) -> RenderError:
    return RenderError(RENDER_FAILED.format(backend=os.environ.get("MUJOCO_GL"), error=e))


def _with_context(lane: _Lane, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on ``lane``'s thread with its GL context current."""
    if lane.gl is None:
        lane.ident = threading.get_ident()
        try:
            gl = mujoco.GLContext(64, 64)
            gl.make_current()
        except Exception as e:  # noqa: BLE001 - any backend failure gets the same fix
            raise _render_failed(e) from e
        lane.gl = _own_display_context(gl) if lane.index else gl
        # MuJoCo 3.x's EGL backend registers ``eglTerminate`` at exit when it makes its first
        # context, after robogen's ``_shutdown``; exit handlers run last-registered first, so
        # the display would be gone before the lanes' contexts are freed (an EGLError printed
        # at every exit). Registered again, ``_shutdown`` runs first.
        atexit.unregister(_shutdown)
        atexit.register(_shutdown)
    return fn(*args)




def _serve(lane: _Lane, tasks: queue.SimpleQueue[RenderTask[Any] | None]) -> None:
    """A render thread: run ``lane``'s queued tasks in order until a ``None``."""
    run = functools.partial(_with_context, lane)
    while (task := tasks.get()) is not None:
        task._run(run)  # noqa: SLF001 - the render thread is the task's runner


def submit(fn: Callable[..., T], *args: Any, lane: int = 0) -> RenderTask[T]:
    """Run ``fn(*args)`` on render lane ``lane``'s thread (its GL context current); returns
    its task."""
    task = RenderTask(fn, args)
    ln = _lane(lane)
    tasks = ln.tasks
    if tasks is None:
        with _lock:
            if _stopped:  # e.g. a renderer collected while the interpreter exits
                raise RuntimeError("the render thread has stopped (interpreter exit)")
            if ln.tasks is None:
                ln.tasks = queue.SimpleQueue()
                name = "robogen-render" if ln.index == 0 else f"robogen-render-{ln.index}"
                threading.Thread(target=_serve, args=(ln, ln.tasks), name=name,
                                 daemon=True).start()
            tasks = ln.tasks
    tasks.put(task)
    return task


def call(fn: Callable[..., T], *args: Any, lane: int = 0) -> T:
    """Run ``fn(*args)`` on render lane ``lane``'s thread and wait for its result (or its
    exception).

    Raises:
        RenderTimeoutError: If it does not end within :data:`FRAME_TIMEOUT_S`.
    """
    if threading.get_ident() == _lane(lane).ident:
        return fn(*args)  # already there (e.g. a finalizer run by the render thread)
    return submit(fn, *args, lane=lane).result(timeout=FRAME_TIMEOUT_S)


def _shutdown() -> None:
    """Free each lane's GL context on its thread and stop the threads (at exit)."""
    global _stopped
    with _lock:
        _stopped = True
        lanes = list(_lanes)
    for ln in lanes:
        if ln.tasks is None:
            continue

        def free(ln: _Lane = ln) -> None:
            if ln.gl is not None:
                ln.gl.free()
                ln.gl = None

        try:
            submit(free, lane=ln.index).result(timeout=10)
        except (Exception, KeyboardInterrupt):  # noqa: BLE001 - teardown at exit is best effort
            pass  # (a second Ctrl-C while the process exits ends the wait, without a traceback)
        with _lock:
            tasks, ln.tasks = ln.tasks, None
        if tasks is not None:
            tasks.put(None)


def _forget_after_fork() -> None:
    """A forked child has no render thread and must not use the parent's GL context.

    (With Mesa's EGL a child forked after the parent rendered still hangs in
    EGL itself, as with plain ``mujoco.Renderer``: start workers with ``spawn``,
    as Ray does.)
    """
    global _lanes, _lock, _stopped
    _lanes, _lock, _stopped = [_Lane(0)], threading.RLock(), False


atexit.register(_shutdown)
os.register_at_fork(after_in_child=_forget_after_fork)


class _Shared:
    """One ``MjrContext`` on render lane ``lane`` and the renderers drawing with it (``users``,
    under ``_lock``); ``key`` is its entry in the lane's ``shared`` (None: private, never
    joined)."""

    __slots__ = ("con", "key", "lane", "users")

    def __init__(self, con: Any, key: bytes | None, lane: int) -> None:
        self.con, self.key, self.lane, self.users = con, key, lane, 1


def _join(key: bytes, lane: int) -> _Shared | None:
    shared = _lane(lane).shared
    with _lock:
        ctx = shared.get(key)
        if ctx is not None:
            ctx.users += 1
        return ctx


def _register(con: Any, key: bytes, lane: int) -> _Shared:
    """A new context under ``key`` on ``lane`` (private if another was registered meanwhile)."""
    shared = _lane(lane).shared
    with _lock:
        ctx = _Shared(con, None if key in shared else key, lane)
        if ctx.key is not None:
            shared[key] = ctx
        return ctx


def _leave(ctx: _Shared) -> bool:
    """One renderer less on ``ctx``; True when it was the last (the caller frees the context)."""
    shared = _lane(ctx.lane).shared
    with _lock:
        ctx.users -= 1
        if ctx.users > 0:
            return False
        if ctx.key is not None and shared.get(ctx.key) is ctx:
            del shared[ctx.key]
        return True


def _check_lane(lane: Any) -> None:
    if isinstance(lane, bool) or not isinstance(lane, int) or lane < 0:
        raise ValueError(f"render lane must be an integer >= 0, got {lane!r}")


class OffscreenRenderer:
    """Offscreen RGB renderer of one env; its GPU resources follow model swaps.

    Unlike :class:`mujoco.Renderer` it needs no GL context of its own (a new
    one costs 0.1-0.3 s): :meth:`set_model` rebuilds only the ``MjrContext``
    and ``MjvScene`` (a few ms) after a structural perturbation recompiles the
    model. Renderers of models with the same :func:`context_key` share one
    ``MjrContext`` (frames are drawn one at a time on the render thread, so a
    shared framebuffer is safe); the images are the same bit for bit. The
    model's ``vis.quality`` (shadow map size, multisampling) and
    ``vis.global_.offwidth/offheight`` apply; shadows are drawn only when the
    shadow map is non-empty.

    Args:
        model: Model to render.
        grow: Enlarge the offscreen buffer when asked for a larger frame
            (False: raise :class:`RenderError`).
        lane: Render lane (thread and GL context) that draws its frames (see :meth:`set_lane`).
        hidden_groups: Geom groups not drawn (``MjvOption.geomgroup``; default: MuJoCo's,
            groups 0-2 drawn).

    Raises:
        RenderError: If no OpenGL context can be created (names the MUJOCO_GL fix).
    """

    def __init__(self, model: mujoco.MjModel, *, grow: bool = False, lane: int = 0,
                 hidden_groups: tuple[int, ...] = ()) -> None:
        self._ctx: _Shared | None = None
        _check_lane(lane)
        self._lane = lane
        self._grow = grow
        self._option = mujoco.MjvOption()
        for g in hidden_groups:  # e.g. robosuite's collision meshes (group 0)
            self._option.geomgroup[g] = 0
        self._camera = mujoco.MjvCamera()
        self._fixed = -1  # the fixed camera ``_camera`` is set to (-1: none yet, or free)
        self._con: Any = None
        self._scene: Any = None
        self._pending: RenderTask[np.ndarray] | None = None
        self.set_model(model)

    @property
    def model(self) -> mujoco.MjModel:
        """The model whose assets are uploaded."""
        return self._model

    @property
    def lane(self) -> int:
        """The render lane drawing this renderer's frames."""
        return self._lane

    def set_lane(self, lane: int) -> None:
        """Draw on render lane ``lane`` from now on (its own thread and GL context; lanes
        draw at the same time). Joins a context with this model's assets there or uploads
        them anew (~5 ms); the images are the same bit for bit on every lane."""
        _check_lane(lane)
        if lane == self._lane:
            return
        self._wait()
        self._use(None)
        self._lane = lane
        self.set_model(self._model)

    def set_model(self, model: mujoco.MjModel) -> None:
        """Render ``model`` from now on (joins a context with its assets, or uploads its
        textures and meshes into a new one; ~5 ms)."""
        self._wait()
        self._model = model
        self._scene = mujoco.MjvScene(model, maxgeom=max(1000, 4 * model.ngeom))
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = model.vis.quality.shadowsize > 0
        key = context_key(model)
        if self._ctx is not None and self._ctx.key == key:
            return  # already drawing with these assets
        ctx = _join(key, self._lane)
        if ctx is None:
            try:
                con = call(self._new_context, model, lane=self._lane)
            except RenderError as e:
                if self._lane == 0:
                    raise
                # a driver that gives one offscreen context but not a second: draw on lane 0
                _log.warning("render lane %d unavailable (%s); drawing on lane 0", self._lane, e)
                self._lane = 0
                self.set_model(model)
                return
            ctx = _register(con, key, self._lane)
        self._use(ctx)

    def _use(self, ctx: _Shared | None) -> None:
        """Draw with ``ctx`` (None: none until the next :meth:`set_model`); leave the old
        context, freeing it on its lane if this was its last renderer."""
        old, self._ctx, self._con = self._ctx, ctx, None if ctx is None else ctx.con
        if old is not None and _leave(old):
            call(old.con.free, lane=old.lane)

    @staticmethod
    def _new_context(model: mujoco.MjModel) -> Any:
        try:
            con = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100.value)
        except Exception as e:  # noqa: BLE001 - e.g. mujoco.FatalError: no OpenGL platform
            raise _render_failed(e) from e
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, con)
        return con

    def upload_textures(self, texture_ids: tuple[int, ...]) -> None:
        """Re-upload ``model.tex_data`` of ``texture_ids`` after an in-place edit.

        The edit must not reach the frames of renderers sharing this one's context: a
        context with the edited assets is joined if one exists; a context this renderer
        alone uses is updated in place; else a new one is made from the edited model.
        """
        self._wait()
        model, ctx = self._model, self._ctx
        assert ctx is not None
        key = context_key(model)
        if key == ctx.key:
            return  # the context holds these textures already
        shared = _lane(ctx.lane).shared
        with _lock:
            other = shared.get(key)
            if other is not None:
                other.users += 1
            sole = other is None and ctx.users == 1
            if sole:  # re-key it: it now holds the edited textures
                if ctx.key is not None and shared.get(ctx.key) is ctx:
                    del shared[ctx.key]
                ctx.key = key
                shared[key] = ctx
        if other is not None:
            self._use(other)
        elif sole:
            con = ctx.con
            call(lambda: [mujoco.mjr_uploadTexture(model, con, int(t)) for t in texture_ids],
                 lane=ctx.lane)
        else:
            self._use(_register(call(self._new_context, model, lane=ctx.lane), key, ctx.lane))

    def render(self, data: mujoco.MjData, camera_id: int, width: int, height: int) -> np.ndarray:
        """Render ``(height, width, 3) uint8`` from fixed camera ``camera_id`` (-1: free camera).

        Raises:
            RenderError: If the frame exceeds the offscreen buffer (and ``grow`` is off).
        """
        return self.render_async(data, camera_id, width, height).result()

    def render_async(
        self, data: mujoco.MjData, camera_id: int, width: int, height: int
    ) -> PendingFrame:
        """Start drawing the current state of ``data``; ``data`` may change right after.

        The state is copied into the scene on the caller's thread before this
        returns; drawing and reading the pixels happen on the render thread.

        Raises:
            RenderError: If the frame exceeds the offscreen buffer (and ``grow`` is off).
        """
        width, height = int(width), int(height)
        self._wait()
        if width > self._con.offWidth or height > self._con.offHeight:
            if not self._grow:
                raise RenderError(FRAME_TOO_LARGE.format(
                    width=width, height=height, max_width=self._con.offWidth,
                    max_height=self._con.offHeight,
                ))
            vis = self._model.vis.global_
            vis.offwidth, vis.offheight = max(vis.offwidth, width), max(vis.offheight, height)
            self.set_model(self._model)
        cam = self._camera
        if camera_id < 0:
            cam.type = mujoco.mjtCamera.mjCAMERA_FREE
            mujoco.mjv_defaultFreeCamera(self._model, cam)
            self._fixed = -1
        elif camera_id != self._fixed:  # set once per camera, not at every frame
            cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
            cam.fixedcamid = self._fixed = int(camera_id)
        mujoco.mjv_updateScene(self._model, data, self._option, None, cam, _CAT_ALL, self._scene)
        self._pending = submit(_draw, self._scene, self._con, width, height, lane=self._lane)
        return PendingFrame(self._pending)

    def close(self) -> None:
        """Free the OpenGL resources (idempotent; the process's context stays, and a
        shared ``MjrContext`` stays for its other renderers)."""
        ctx, self._ctx, self._con = self._ctx, None, None
        if ctx is None:
            return
        try:
            self._wait()
        except RenderTimeoutError:
            if _leave(ctx):
                submit(ctx.con.free, lane=ctx.lane)  # freed behind the stuck frame, if it ends
            return
        if _leave(ctx):
            call(ctx.con.free, lane=ctx.lane)

    def __del__(self) -> None:
        ctx, self._ctx, self._con = self._ctx, None, None
        if ctx is None:
            return
        try:  # never block in a finalizer: queue the free behind any frame in flight
            if not _leave(ctx):
                return
            if threading.get_ident() == _lane(ctx.lane).ident:
                ctx.con.free()
            else:
                submit(ctx.con.free, lane=ctx.lane)
        except Exception:  # noqa: BLE001 - interpreter shutdown may have stopped the thread
            pass

    def _wait(self) -> None:
        """Let the frame in flight finish (it still reads this renderer's scene).

        Its outcome, image or error, is for whoever holds its :class:`PendingFrame`.

        Raises:
            RenderTimeoutError: If it is not drawn within :data:`FRAME_TIMEOUT_S` (it is
                still waited for next time: the scene must not change under it).
        """
        pending = self._pending
        if pending is not None:
            if not pending.wait(FRAME_TIMEOUT_S):
                raise _timed_out(FRAME_TIMEOUT_S)
            self._pending = None


_CAT_ALL = mujoco.mjtCatBit.mjCAT_ALL.value
_OFFSCREEN = mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value


def _draw(scene: Any, con: Any, width: int, height: int) -> np.ndarray:
    rect = mujoco.MjrRect(0, 0, width, height)
    mujoco.mjr_setBuffer(_OFFSCREEN, con)  # the envs' contexts take turns on a lane's context
    mujoco.mjr_render(rect, scene, con)
    out = np.empty((height, width, 3), dtype=np.uint8)
    mujoco.mjr_readPixels(out, None, rect, con)
    return out[::-1].copy()  # row 0 at the top; a C-contiguous copy


__all__ = [
    "FRAME_TIMED_OUT", "FRAME_TIMEOUT_S", "FRAME_TOO_LARGE", "MappedFrame", "OffscreenRenderer",
    "PendingFrame", "RENDER_FAILED", "RenderTask", "RenderTimeoutError", "call", "context_key",
    "map_frame", "resolve_frames", "submit",
]
