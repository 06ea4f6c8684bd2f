"""Work queued for a render thread and the frames it draws: :class:`RenderTask` (a lean future),
:class:`PendingFrame` (a frame being drawn), :func:`resolve_frames`, and the timeout that keeps
a GL driver stuck in a frame from hanging a rollout (:class:`RenderTimeoutError`).

Part of :mod:`robogen.envs.render` (which runs the render threads and re-exports these names).
"""

from __future__ import annotations

import _thread
import os
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from robogen.errors import InfrastructureTimeoutError

T = TypeVar("T")

FRAME_TIMEOUT_S = 60.0
"""Longest wait for one frame or one call on the render thread [s] (a frame takes
milliseconds; a render thread stuck in the GL driver must not hang a rollout)."""
FRAME_TIMED_OUT = (
    "no frame from the render thread after {timeout:g} s (MUJOCO_GL={backend!r}); the GL "
    "driver hangs or the machine is overloaded; the episode is recorded as 'infra_timeout'"
)


class RenderTimeoutError(InfrastructureTimeoutError):
    """The render thread did not deliver a frame within :data:`FRAME_TIMEOUT_S`.

    An infrastructure failure: the rollout worker records the episode as
    ``infra_timeout`` (an invalid episode), never as a policy or simulator outcome.
    """


def _timed_out(timeout: float) -> RenderTimeoutError:
    return RenderTimeoutError(FRAME_TIMED_OUT.format(
        timeout=timeout, backend=os.environ.get("MUJOCO_GL")))


class RenderTask(Generic[T]):
    """``fn(*args)`` queued for the render thread; its result or exception once run.

    A lean future (a frame costs ~0.5 ms of llvmpipe, and ``concurrent.futures``' own
    bookkeeping, Python-level conditions and an idle semaphore, added ~0.05 ms of the render
    thread's CPU to each): its completion is one lock, held from creation until the render
    thread has run it.
    """

    __slots__ = ("_args", "_done", "_error", "_fn", "_result")

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._fn, self._args = fn, args
        self._result: T | None = None
        self._error: BaseException | None = None
        self._done = _thread.allocate_lock()
        self._done.acquire()  # released by the render thread when the task has run

    def _run(self, run: Callable[..., Any]) -> None:
        """Run the task as ``run(fn, *args)`` (the render thread's runner: its GL context
        current) and release whoever waits for it."""
        try:
            self._result = run(self._fn, *self._args)
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits for the task
            self._error = e
        finally:
            self._done.release()

    def done(self) -> bool:
        """Whether the task has run (or failed)."""
        return not self._done.locked()

    def wait(self, timeout: float) -> bool:
        """Wait until the task has run, at most ``timeout`` [s]; whether it has."""
        if not self._done.locked():
            return True
        if self._done.acquire(timeout=max(timeout, 0.0)):
            self._done.release()
            return True
        return False

    def result(self, timeout: float | None = None) -> T:
        """``fn(*args)``'s result; waits at most ``timeout`` [s] (default
        :data:`FRAME_TIMEOUT_S`).

        Raises:
            RenderTimeoutError: If the task has not run in time.
            Exception: What ``fn`` raised.
        """
        timeout = FRAME_TIMEOUT_S if timeout is None else timeout
        if not self.wait(timeout):
            raise _timed_out(timeout)
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]



class PendingFrame:
    """A frame being drawn on the render thread.

    :meth:`result` returns the ``(height, width, 3) uint8`` RGB image (row 0 at
    the top), waiting if needed, and raises what rendering raised.
    """

    __slots__ = ("_task",)

    def __init__(self, task: RenderTask[np.ndarray]) -> None:
        self._task = task

    def result(self, timeout: float | None = None) -> np.ndarray:
        """The image; blocks until drawn, at most ``timeout`` [s] (default
        :data:`FRAME_TIMEOUT_S`).

        Raises:
            RenderTimeoutError: If the frame is not drawn in time.
        """
        return self._task.result(timeout)

    def done(self) -> bool:
        """Whether the frame is drawn (or failed)."""
        return self._task.done()


class MappedFrame(PendingFrame):
    """A :class:`PendingFrame` whose image goes through ``fn`` once drawn (an image
    corruption of the ``sensor`` axis), computed on the first :meth:`result` and kept."""

    __slots__ = ("_fn", "_image")

    def __init__(self, frame: PendingFrame, fn: Callable[[np.ndarray], np.ndarray]) -> None:
        super().__init__(frame._task)
        self._fn = fn
        self._image: np.ndarray | None = None

    def result(self, timeout: float | None = None) -> np.ndarray:
        """``fn(image)``; see :meth:`PendingFrame.result`."""
        if self._image is None:
            self._image = self._fn(super().result(timeout))
        return self._image


def map_frame(frame: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``fn(frame)`` for an image, a :class:`MappedFrame` for a :class:`PendingFrame`."""
    if isinstance(frame, PendingFrame):
        return MappedFrame(frame, fn)
    return fn(frame)


def resolve_frames(obs: Any) -> Any:
    """``obs`` with every :class:`PendingFrame` (alone or in a dict) replaced by its image.

    Raises:
        Exception: Whatever drawing a frame raised (e.g. :class:`RenderError`).
    """
    if isinstance(obs, PendingFrame):
        return obs.result()
    if isinstance(obs, dict) and any(isinstance(v, PendingFrame) for v in obs.values()):
        return {k: resolve_frames(v) for k, v in obs.items()}
    return obs
