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
