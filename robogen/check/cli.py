"""``robogen check``: the CI regression gate (registered in :mod:`robogen.cli`).

Exit codes: 0 no regression, 1 regression (or inconclusive with
``--fail-on-inconclusive``), 2 invalid input or setup error.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import typer

from robogen._console import exit_invalid
from robogen.check.config import CheckConfig
from robogen.options import cli_parameters, with_parameters
from robogen.progress import ProgressBars

_error = exit_invalid


@with_parameters(cli_parameters(CheckConfig, unset_is_none=False))
def check_command(**given: Any) -> None:
    """Fail (exit 1) when the candidate is significantly less robust than the baseline.

    Per condition and axis: exact one-sided tests of the success difference with
    --margin, Holm-corrected over conditions; writes check.md (PR comment),
    check.xml (JUnit, one test case per axis) and check.json.
    """
    from rich.console import Console

    from robogen.errors import RobogenError

    console = Console()
    try:
        from robogen.check.run import run_check

        config = CheckConfig(**given)
        with ProgressBars(console=console) as bars:
            bars.phase(f"robogen check: {config.candidate} against {config.baseline}: loading "
                       "both sides (stored runs are read; a policy is evaluated) ...")
            outcome = run_check(config, progress=bars.stage("check"))
    except typer.Exit:
        raise
    except (RobogenError, FileNotFoundError) as e:
        _error(str(e))
        return
    except Exception as e:  # noqa: BLE001 - a crash must not read as a regression (exit 1)
        traceback.print_exc(file=sys.stderr)
        _error(f"the check failed to run: {type(e).__name__}: {e}")
        return
    from robogen.check.outputs import render_markdown

    typer.echo(render_markdown(outcome.result))  # plain: CI logs must not wrap the table
    for kind in ("md", "junit", "json"):
        typer.echo(f"{kind}: {outcome.files[kind]}")
    raise typer.Exit(outcome.result.exit_code)
