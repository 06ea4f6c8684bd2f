"""Console output shared by the CLIs: errors and warnings printed unwrapped.

Error messages name values (paths, spaces, ids) that users copy and tests grep, so they
are printed with ``soft_wrap=True``: rich never breaks a line inside them, whatever the
terminal width (CI runners often report 80 columns). Markup in the message is escaped.
"""

from __future__ import annotations


def print_message(label: str, message: str, *, style: str = "bold red") -> None:
    """Print ``label: message`` on stderr, unwrapped, with only the label styled."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[{style}]{label}:[/] {escape(message)}",
                                               highlight=False)


def print_error(message: str) -> None:
    """Print ``error: message`` on stderr (see :func:`print_message`)."""
    print_message("error", message)
