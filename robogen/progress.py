"""Progress of long commands (rich): one line per stage with done / total and an ETA.

On a terminal each stage is a live rich bar whose label is shortened to fit the
console width, so the counts and the ETA are never cut (CI runners and ``make``
often report 80 columns). When the output is not a terminal (a pipe, a CI log,
``make demo | cat``) rich cannot redraw a bar, so each stage prints plain lines
instead: at its first update, at every tenth of the total, at least every
:data:`LOG_INTERVAL_S` seconds while it advances, and when it ends. Either way
the elapsed time and the ETA come from rich's own estimate.

Phases without counts (starting workers, loading a policy, fitting curves, writing a report)
are announced with :meth:`ProgressBars.phase`, one line when each starts; while nothing else is
printed, a heartbeat line follows at least every :data:`LOG_INTERVAL_S` seconds (the current
phase and its elapsed time, or the unfinished stages' counts), so a log never goes quiet for
longer whatever the phase.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

LOG_INTERVAL_S = 30.0
"""Longest gap between two plain progress lines of an advancing stage [s]."""
BAR_WIDTH = 10
"""Width of the bar on terminals narrower than 100 columns [characters]."""
WIDE_BAR_WIDTH = 30
"""Width of the bar on terminals of 100 columns or more [characters]."""
MIN_LOG_LABEL = 24
"""Fewest characters a plain progress line gives its stage label."""
ELLIPSIS = "…"
_ENV_ID = re.compile(r"[\w.-]+/[\w.:-]+-v\d+")


class ProgressBars:
    """Progress of named stages, each shown from its first update.

    Use as a context manager; pass :meth:`stage` (``(done, total)`` callback) or
    the object itself (``(stage, done, total)``) as the ``progress`` argument of
    robogen's long-running functions. Nothing is drawn if nothing reports.

    Args:
        units: Unit shown after each stage's name (``{"train": "steps"}``); default ``episodes``.
        console: A ``rich.console.Console`` to draw on (default: rich's own, on stdout).
            A terminal console gets live bars; any other gets plain lines.
        log_interval_s: Longest gap between plain lines of an advancing stage, and between
            heartbeat lines of a quiet phase [s]; 0 prints a line at every update and no
            heartbeat.
    """

    def __init__(self, units: Mapping[str, str] | None = None, console: Any = None,
                 *, log_interval_s: float = LOG_INTERVAL_S) -> None:
        self._units = dict(units or {})
        self._console = console
        self._interval = float(log_interval_s)
        self._p: Any = None
        self._live = False
        self._tasks: dict[str, Any] = {}
        self._logged: dict[str, tuple[int, int, float]] = {}  # stage -> (done, tenth, time)
        self._phase: tuple[str, float] | None = None  # (text, start time)
        self._last_line = time.monotonic()
        self._then: dict[str, str | None] = {}
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._lock = threading.RLock()

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self._p is None:
            return
        if self._live:
            self._p.__exit__(*exc)
            return
        for stage, task in self._tasks.items():  # the last state of an unfinished stage
            if self._logged.get(stage, (-1,))[0] != int(self._task(task).completed):
                self._log(stage)

    def phase(self, text: str) -> None:
        """Print ``text`` now, as the phase under way (``starting 2 Ray workers ...``).

        Until the next phase or stage update, a heartbeat repeats it with its elapsed time at
        least every ``log_interval_s`` seconds.
        """
        with self._lock:
            if self._p is None:
                self._start()
            self._phase = (text, time.monotonic())
            self._print(text, wrap=True)
        self._start_heartbeat()

    def __call__(self, stage: str, done: int, total: int) -> None:
        with self._lock:
            self._update(stage, done, total)
        then = self._then.get(stage)
        if then and total and done >= total:
            self._then[stage] = None
            self.phase(then)

    def _update(self, stage: str, done: int, total: int) -> None:
        self._phase = None
        if self._p is None:
            self._start()
        p = self._p
        assert p is not None  # _start made it
        self._start_heartbeat()
        if stage not in self._tasks:
            desc = self._label(stage, total) if self._live else stage
            self._tasks[stage] = p.add_task(desc, total=total, completed=done, start_done=done)
        else:
            p.update(self._tasks[stage], completed=done, total=total)
        if not self._live:
            self._maybe_log(stage, done, total)

    def stage(self, name: str, *, then: str | None = None) -> Callable[[int, int], None]:
        """The ``(done, total)`` callback of stage ``name``.

        Args:
            name: Stage name shown on its bar or lines.
            then: Phase announced (:meth:`phase`) once the stage completes, e.g.
                ``"writing the report ..."``.
        """
        if then:
            self._then[name] = then
        return lambda done, total: self(name, done, total)

    # -- heartbeat ---------------------------------------------------------------------------

    def _print(self, text: str, *, wrap: bool = False) -> None:
        """Print a line (``wrap``: prose, wrapped at the console's width at spaces)."""
        self._console.print(text, markup=False, highlight=False, soft_wrap=not wrap)
        self._last_line = time.monotonic()

    def _start_heartbeat(self) -> None:
        if self._beat is None and not self._stop.is_set() and self._interval > 0:
            self._beat = threading.Thread(target=self._heartbeat, name="robogen-progress",
                                          daemon=True)
            self._beat.start()

    def _heartbeat(self) -> None:
        tick = min(1.0, self._interval / 4)
        while not self._stop.wait(tick):
            with self._lock:
                if time.monotonic() - self._last_line >= self._interval:
                    self._beat_line()

    def _beat_line(self) -> None:
        """The line of a quiet interval: the phase under way, else the unfinished stages."""
        if self._phase is not None:
            text, start = self._phase
            self._print(f"{text.rstrip(' .…')}: still working, {_clock(time.monotonic() - start)}"
                        " elapsed")
            return
        open_ = [s for s, t in self._tasks.items() if not self._task(t).finished]
        if self._live and open_:  # rich redraws live bars (elapsed, ETA) by itself
            self._last_line = time.monotonic()
            return
        for stage in open_:
            self._log(stage)
        self._last_line = time.monotonic()

    # -- internals ---------------------------------------------------------------------------

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.table import Column
        from rich.text import Text

        class Remaining(ProgressColumn):
            """The stage's ETA at its average rate (:func:`eta_s`)."""

            def render(self, task: Any) -> Text:
                return Text("0:00:00" if task.finished else _clock(eta_s(task)))

        if self._console is None:
            self._console = Console()
        c = self._console
        self._live = bool(c.is_terminal and not c.is_dumb_terminal)
        if not self._live:  # rich keeps the counts and the speed estimate; lines are ours
            self._p = Progress(console=c, disable=True)
            return
        fixed = {"no_wrap": True, "overflow": "ignore"}
        columns: list[Any] = [
            TextColumn("{task.description}", markup=False,
                       table_column=Column(no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=self._bar_width()),
            MofNCompleteColumn(table_column=Column(**fixed)),
        ]
        if self._show_elapsed():
            columns.append(TimeElapsedColumn(table_column=Column(**fixed)))
        columns += [TextColumn("ETA", table_column=Column(**fixed)),
                    Remaining(table_column=Column(**fixed))]
        self._p = Progress(*columns, console=c)
        self._p.__enter__()

    def _bar_width(self) -> int:
        return WIDE_BAR_WIDTH if self._console.width >= 100 else BAR_WIDTH

    def _show_elapsed(self) -> bool:
        return bool(self._console.width >= 100)

    def _label(self, stage: str, total: int) -> str:
        """``stage (unit)`` shortened to the width the bar, counts and times leave."""
        counts = 2 * len(str(total)) + 1
        times = (3 + 1) + 7 + (7 + 1 if self._show_elapsed() else 0)  # "ETA", H:MM:SS
        room = self._console.width - 2 - (self._bar_width() + 1) - (counts + 1) - times
        return fit_label(stage, self._units.get(stage, "episodes"), room)

    def _task(self, task_id: Any) -> Any:
        return self._p.tasks[[t.id for t in self._p.tasks].index(task_id)]

    def _maybe_log(self, stage: str, done: int, total: int) -> None:
        last = self._logged.get(stage)
        tenth = 10 * done // total if total > 0 else 0
        now = time.monotonic()
        if (last is None or (done == total and last[0] != done) or tenth > last[1]
                or (done != last[0] and now - last[2] >= self._interval)):
            self._log(stage)

    def _log(self, stage: str) -> None:
        t = self._task(self._tasks[stage])
        done, total = int(t.completed), int(t.total or 0)
        unit = self._units.get(stage, "episodes")
        end = "done" if total and done >= total else f"ETA {_clock(eta_s(t))}"
        tail = f": {done}/{total} {unit} in {_clock(t.elapsed)}, {end}"
        longest = len(f": {total}/{total} {unit} in 0:00:00, ETA 0:00:00")
        label = fit_label(stage, "", max(MIN_LOG_LABEL, self._console.width - 1 - longest))
        self._print(label + tail)
        self._logged[stage] = (done, 10 * done // total if total > 0 else 0, time.monotonic())


def say_checking(command: str, names: Sequence[str]) -> None:
    """Print ``<command>: checking <names> ...`` on stdout at once, shortened to the terminal's
    width (:func:`fit_label`): a command's first line, before its slow imports and checks."""
    import shutil
    import sys

    if not names:
        return
    room = shutil.get_terminal_size().columns - len(f"{command}: checking  ...") - 1
    sys.stdout.write(f"{command}: checking {fit_label(' / '.join(names), '', room)} ...\n")
    sys.stdout.flush()


def start_line(env: str, policies: Sequence[str], episodes: int | str, backend: str,
               workers: int | None) -> str:
    """The line an evaluation prints as it starts, before any episode ends.

    ``evaluating expert:reach on robogen/Reach-v0 (8 episodes per condition): starting 2 Ray
    workers, each loading the env and the policy ...`` (a policy path shows its file name).
    """
    who = _basename(policies[0]) if len(policies) == 1 else f"{len(policies)} policies"
    if backend == "ray":
        n = f"{workers} Ray worker{'s' if workers != 1 else ''}" if workers else \
            "Ray workers (one per free CPU)"
        how = f"starting {n}, each loading the env and the policy"
    elif backend == "batched":
        how = ("loading the env and the policy in this process and putting the scene's worlds "
               "on the device (batched backend; a scene's first run compiles its kernels)")
    else:
        how = "loading the env and the policy in this process (serial backend)"
    return f"evaluating {who} on {env} ({episodes} episodes per condition): {how} ..."


def report_line(videos: int) -> str:
    """The line printed when the episodes are done and the report is being written."""
    films = f", up to {videos} failure video{'s' if videos != 1 else ''} per axis" \
        if videos else ""
    return f"writing the report (statistics, plots{films}) ..."


def eta_s(task: Any) -> float | None:
    """Seconds left for a rich progress ``task`` at its average rate since the stage began
    (the items done since its first report over the time since), None before the first
    item. Not rich's own estimate: that one divides by the time between recent updates,
    and units of several workers often end together (16 episodes 0.1 s apart read as 160
    per second: "ETA 0:00:01" four seconds into a 16-second stage)."""
    did = task.completed - task.fields.get("start_done", 0)
    if did <= 0 or not task.elapsed or task.total is None:
        return None
    return task.elapsed * max(task.total - task.completed, 0) / did


def _clock(seconds: float | None) -> str:
    """``H:MM:SS`` as rich's time columns show it; ``-:--:--`` when unknown."""
    if seconds is None:
        return "-:--:--"
    return str(timedelta(seconds=max(0, int(seconds))))


def fit_label(name: str, unit: str, width: int) -> str:
    """``name (unit)`` in at most ``width`` characters, shortened in readable steps.

    Each `` / ``-separated part of ``name`` that is a path (``sb3:/a/b/ppo.zip``) is
    first cut to its file name (``sb3:ppo.zip``), then env namespaces are dropped
    (``gymnasium/Reacher-v5`` -> ``Reacher-v5``), then the name is cut in the middle
    with an ellipsis; the unit goes last.

    Args:
        name: Stage name, e.g. ``"gymnasium/Reacher-v5 / sb3:/x/ppo_reacher.zip"``.
        unit: Unit shown in parentheses (``episodes``).
        width: Most characters the label may take (at least 1 is used).

    Returns:
        The label, ``len(label) <= max(width, 1)``.
    """
    width = max(1, width)
    suffix = f" ({unit})" if unit else ""
    parts = name.split(" / ")
    candidates = [parts, [_basename(p) for p in parts],
                  [_drop_namespace(_basename(p)) for p in parts]]
    for c in candidates:
        text = " / ".join(c)
        if len(text) + len(suffix) <= width:
            return text + suffix
    text = " / ".join(candidates[-1])
    if len(suffix) * 2 <= width:
        return _shorten(text, width - len(suffix)) + suffix
    return _shorten(text + suffix, width)


def _basename(part: str) -> str:
    """``scheme:/a/b/file`` -> ``scheme:file``; anything else unchanged."""
    scheme, sep, rest = part.partition(":")
    if not sep or "/" not in rest:
        return part
    return f"{scheme}:{rest.rstrip('/').rsplit('/', 1)[-1]}"


def _drop_namespace(part: str) -> str:
    """``gymnasium/Reacher-v5`` -> ``Reacher-v5``; anything but an env id unchanged."""
    return part.split("/", 1)[1] if _ENV_ID.fullmatch(part) else part


def _shorten(text: str, width: int = 40) -> str:
    """``text`` cut in the middle to ``width`` characters (long paths keep both ends)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 2
    return text[:head] + ELLIPSIS + text[-(width - 1 - head):]
