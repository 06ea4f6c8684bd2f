"""Console output shared by the CLIs: errors and warnings printed unwrapped.

Error messages name values (paths, spaces, ids) that users copy and tests grep, so they
are printed with ``soft_wrap=True``: rich never breaks a line inside them, whatever the
terminal width (CI runners often report 80 columns). Markup in the message is escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")


def print_message(label: str, message: str, *, style: str = "bold red") -> None:
    """Print ``label: message`` on stderr, unwrapped, with only the label styled."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[{style}]{label}:[/] {escape(message)}",
                                               highlight=False)


def print_error(message: str) -> None:
    """Print ``error: message`` on stderr (see :func:`print_message`)."""
    print_message("error", message)


KNOWN_MUJOCO_NOISE = ("compiler attribute 'settotalmass' is deprecated",)
"""MuJoCo warnings robogen drops: Gymnasium's own half_cheetah.xml raises this one on every
compile (~10 times per run); it is harmless and not the user's to fix."""


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to the ``robogen.mujoco`` logger instead of stdout and
    ``./MUJOCO_LOG.TXT``, dropping :data:`KNOWN_MUJOCO_NOISE`.

    Installed by the command-line entry point and Ray workers only: MuJoCo's handler is
    process-wide, so the library leaves it alone for programs that import robogen.
    """
    import logging

    import mujoco

    log = logging.getLogger("robogen.mujoco")

    def handler(message: str) -> None:
        if not any(noise in message for noise in KNOWN_MUJOCO_NOISE):
            log.warning("MuJoCo: %s", message)

    mujoco.set_mju_user_warning(handler)


def route_robogen_warnings() -> None:
    """Print each :class:`~robogen.errors.RobogenWarning` as one ``warning: message`` line on
    stderr, once per distinct message (an env made again by a worker or a resume repeats
    it), instead of Python's ``file:line: UserWarning: ...`` display; other warnings keep
    it. Installed by the command-line entry point only."""
    import warnings

    from robogen.errors import RobogenWarning

    shown: set[str] = set()
    previous = warnings.showwarning

    def show(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if not issubclass(category, RobogenWarning):
            previous(message, category, filename, lineno, file, line)
            return
        text = str(message)
        if text not in shown:
            shown.add(text)
            print_message("warning", text, style="bold yellow")

    warnings.showwarning = show


def exit_invalid(message: str) -> NoReturn:
    """Print ``error: message`` and leave the command with exit code 2 (invalid input)."""
    import typer

    print_error(message)
    raise typer.Exit(2)


def guarded(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn``; robogen's input errors and unwritable paths become exit code 2."""
    from robogen.errors import RobogenError

    try:
        return fn(*args, **kwargs)
    except RobogenError as e:
        exit_invalid(str(e))
    except OSError as e:  # unwritable or blocked output paths: the user's input, not a bug
        exit_invalid(f"{e.strerror or e}: {e.filename!r}" if e.filename else str(e))


EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (SIGINT): 128 + 2."""
EXIT_TERMINATED = 143
"""Exit code after SIGTERM (batch schedulers, ``docker stop``, ``kill``): 128 + 15."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled exactly like Ctrl-C (stored parts kept, the unit being run
    dropped, the resume command printed), then exit :data:`EXIT_TERMINATED`."""


def _on_sigterm(signum: int, frame: Any) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup
    raise Terminated()


def handle_sigterm() -> None:
    """Turn SIGTERM into :class:`Terminated` in this (main) thread. The CLI calls it at start,
    and again after anything that installs its own handler (Ray's driver dumps its stack and
    aborts on SIGTERM: :func:`reclaim_sigterm`)."""
    import signal
    import threading

    global _handling_sigterm
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
        _handling_sigterm = True


_handling_sigterm = False


def reclaim_sigterm() -> None:
    """Install :func:`handle_sigterm`'s handler again if it was installed: ``ray.init``
    replaces it (a Python handler that exits 15, behind a C++ one that dumps the stack)."""
    if _handling_sigterm:
        handle_sigterm()


def interrupt_code(e: BaseException) -> int:
    """The exit code of an interrupted command: :data:`EXIT_TERMINATED` after SIGTERM, else
    :data:`EXIT_INTERRUPTED`."""
    return EXIT_TERMINATED if isinstance(e, Terminated) else EXIT_INTERRUPTED
