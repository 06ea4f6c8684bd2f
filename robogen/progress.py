"""Progress bars for long commands (rich): one bar per stage, done / total, elapsed and ETA."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class ProgressBars:
    """A rich progress display with one bar per named stage, shown from its first update.

    Use as a context manager; pass :meth:`stage` (``(done, total)`` callback) or
    the object itself (``(stage, done, total)``) as the ``progress`` argument of
    robogen's long-running functions. Nothing is drawn if nothing reports.

    Args:
        units: Unit shown after each stage's name (``{"train": "steps"}``); default ``episodes``.
        console: A ``rich.console.Console`` to draw on (default: rich's own).
    """

    def __init__(self, units: Mapping[str, str] | None = None, console: Any = None) -> None:
        self._units = dict(units or {})
        self._console = console
        self._p: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.__exit__(*exc)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self._p is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            kw = {"console": self._console} if self._console is not None else {}
            self._p = Progress(TextColumn("{task.description}"), BarColumn(),
                               MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                               TimeRemainingColumn(), **kw)
            self._p.__enter__()
        if stage not in self._tasks:
            desc = f"{_shorten(stage)} ({self._units.get(stage, 'episodes')})"
            self._tasks[stage] = self._p.add_task(desc, total=total, completed=done)
        else:
            self._p.update(self._tasks[stage], completed=done, total=total)

    def stage(self, name: str) -> Callable[[int, int], None]:
        """The ``(done, total)`` callback of stage ``name``."""
        return lambda done, total: self(name, done, total)


def _shorten(text: str, width: int = 40) -> str:
    """``text`` cut in the middle to ``width`` characters (long paths keep both ends)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[-(width - 1 - head):]
