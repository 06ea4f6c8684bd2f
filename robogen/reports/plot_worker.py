"""Draw a report's figures in a helper process started before the episodes run.

Importing matplotlib and drawing the report figures is most of the time a report
takes to write (about 1 s of a ~10 s ``robogen eval`` of 400 Reacher episodes on
a 2-core machine; see ``benchmarks/bench_eval_vs_sb3.py``). A :class:`PlotWorker`
started when an evaluation starts imports matplotlib in its own process, on
another core, while the episodes run, and then draws the figures of the finished
report. The images are the same bytes :func:`robogen.reports.plots.all_plots_png`
gives in-process (tested), and on any failure of the helper (it died, timed out,
answered garbage) the figures are drawn in-process instead, so the report never
depends on it.

The helper is a plain ``python -m robogen.reports.plot_worker`` child (not
``multiprocessing``: that would re-import the caller's ``__main__``, which a user
script calling :func:`robogen.evaluate` without a ``__name__`` guard cannot take).
It reads one pickled :class:`~robogen.reports.records.Report` on stdin and writes
the pickled ``{plot key: PNG bytes}`` on stdout. It exits when its stdin closes,
so it never outlives the process that started it.

Set ``ROBOGEN_PLOT_WORKER=0`` to draw in-process always (the test suite does: its
process has matplotlib imported already).
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from robogen.reports.records import PLOT_FILES

if TYPE_CHECKING:
    from robogen.reports.records import Report

__all__ = ["DRAW_TIMEOUT_S", "ENV_SWITCH", "PLOT_FILES", "PlotWorker", "draw_in_process"]

DRAW_TIMEOUT_S = 120.0
"""How long the helper may take to draw one report's figures [s] before they are drawn
in-process instead."""

ENV_SWITCH = "ROBOGEN_PLOT_WORKER"
"""Environment variable: ``0`` turns the helper process off (figures drawn in-process)."""

_log = logging.getLogger(__name__)


def draw_in_process(report: Report) -> dict[str, bytes]:
    """Every figure of ``report`` drawn in this process: plot key -> PNG bytes."""
    from robogen.reports.plots import all_plots_png

    return all_plots_png(report)


class PlotWorker:
    """A helper process that pre-imports matplotlib and draws one report's figures.

    Use as a context manager around the episodes and the report::

        with PlotWorker() as plotter:
            ...  # run the episodes
            images = plotter.draw(report)

    It is not started (figures drawn in-process) when ``ROBOGEN_PLOT_WORKER=0`` or,
    with ``skip_if_loaded``, when matplotlib is imported in this process already
    (nothing to gain).

    Args:
        skip_if_loaded: Do not start a helper if matplotlib is loaded here.
    """

    def __init__(self, *, skip_if_loaded: bool = True) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._skip_if_loaded = skip_if_loaded

    @property
    def running(self) -> bool:
        """Whether a helper process was started and has not been used or closed yet."""
        return self._proc is not None

    def start(self) -> None:
        """Start the helper (no-op if started, if matplotlib is loaded here, or if off)."""
        if self._proc is not None or os.environ.get(ENV_SWITCH) == "0" or not sys.executable:
            return
        if self._skip_if_loaded and "matplotlib.figure" in sys.modules:
            return
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the directory holding robogen/
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "robogen.reports.plot_worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        except OSError as e:  # no fork/exec allowed: draw in-process
            _log.debug("plot worker not started: %s", e)
            self._proc = None

    def draw(self, report: Report) -> dict[str, bytes]:
        """Every figure of ``report``: plot key (:data:`PLOT_FILES`) -> PNG bytes.

        Drawn by the helper if it runs (it is used up: one report per helper), else, or
        if the helper fails in any way, in this process; the bytes are the same.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return draw_in_process(report)
        try:
            out, err = proc.communicate(pickle.dumps(report), timeout=DRAW_TIMEOUT_S)
            if proc.returncode == 0:
                images = pickle.loads(out)
                if isinstance(images, dict):
                    return images
            _log.debug("plot worker failed (exit %s): %s", proc.returncode,
                       err.decode(errors="replace")[-2000:])
        except Exception as e:  # noqa: BLE001 - any helper failure: draw here instead
            _log.debug("plot worker failed: %r", e)
        finally:
            _stop(proc)
        return draw_in_process(report)

    def close(self) -> None:
        """Stop the helper if it still runs (it exits on its own when stdin closes)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc)

    def __enter__(self) -> PlotWorker:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


def main() -> int:
    """The helper process: import the plotting code, draw the report read from stdin."""
    from robogen.reports.plots import all_plots_png  # the import this process exists for

    try:
        data = sys.stdin.buffer.read()
    except KeyboardInterrupt:
        return 130
    if not data:  # the parent closed without a report
        return 0
    report = pickle.loads(data)
    sys.stdout.buffer.write(pickle.dumps(all_plots_png(report), protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
