"""``robogen check``: the CI regression gate (registered in :mod:`robogen.cli`).

Exit codes: 0 no regression, 1 regression (or inconclusive with
``--fail-on-inconclusive``), 2 invalid input or setup error.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer

from robogen._console import exit_invalid
from robogen.check.records import (
    DEFAULT_ALPHA,
    DEFAULT_LOOKS,
    DEFAULT_MARGIN,
    DEFAULT_SPENDING,
)
from robogen.progress import ProgressBars

_PAIRING = {"auto": None, "paired": True, "unpaired": False}


_error = exit_invalid


def check_command(
    baseline: Annotated[str, typer.Option(
        help="Baseline: run directory, report.json, or policy URI to evaluate.")],
    candidate: Annotated[str, typer.Option(
        help="Candidate: policy URI (evaluated under the baseline's manifest) or run directory.")],
    spec: Annotated[Path | None, typer.Option(
        help="TOML eval spec: the protocol when the baseline is a policy; else only backend, "
             "workers, address are used.")] = None,
    margin: Annotated[float, typer.Option(
        help="Non-inferiority margin: tolerated drop in success rate.")] = DEFAULT_MARGIN,
    alpha: Annotated[float, typer.Option(
        help="Family-wise error rate of a false regression (and of a false pass).")
    ] = DEFAULT_ALPHA,
    sequential: Annotated[bool, typer.Option(
        "--sequential/--fixed", help="Evaluate in looks; stop each axis once decided.")] = False,
    looks: Annotated[int, typer.Option(help="Sequential mode: planned looks.")] = DEFAULT_LOOKS,
    spending: Annotated[str, typer.Option(
        help="Sequential mode: alpha spending, obrien-fleming or pocock.")] = DEFAULT_SPENDING,
    pairing: Annotated[str, typer.Option(
        help="auto (pair episodes when both runs share the seed) | paired | unpaired.")
    ] = "auto",
    out: Annotated[Path | None, typer.Option(
        help="Output folder for check.{md,json,xml} and evaluated runs.")] = None,
    junit: Annotated[Path | None, typer.Option(
        help="JUnit XML path (default OUT/check.xml).")] = None,
    env: Annotated[str | None, typer.Option(
        help="Env id when the baseline is a policy and there is no --spec.")] = None,
    episodes: Annotated[int | None, typer.Option(
        help="Episodes per condition when the baseline is a policy.")] = None,
    seed: Annotated[int | None, typer.Option(help="Run seed when the baseline is a policy.")
    ] = None,
    backend: Annotated[str | None, typer.Option(help="ray | serial (evaluated sides).")] = None,
    workers: Annotated[int | None, typer.Option(help="Ray workers (default: CPUs).")] = None,
    address: Annotated[str | None, typer.Option(help="Existing Ray cluster address.")] = None,
    baseline_vecnormalize: Annotated[str | None, typer.Option(
        help="VecNormalize statistics (.pkl) of an SB3 baseline.")] = None,
    candidate_vecnormalize: Annotated[str | None, typer.Option(
        help="VecNormalize statistics (.pkl) of an SB3 candidate.")] = None,
    fail_on_inconclusive: Annotated[bool, typer.Option(
        help="Exit 1 also when non-inferiority is not shown.")] = False,
    safety_margin: Annotated[float | None, typer.Option(
        help="Also fail when a safety metric (robogen eval --safety) rises significantly by "
             "more than this fraction of the baseline's (0.2: 20 %).")] = None,
) -> None:
    """Fail (exit 1) when the candidate is significantly less robust than the baseline.

    Per condition and axis: exact one-sided tests of the success difference with
    --margin, Holm-corrected over conditions; writes check.md (PR comment),
    check.xml (JUnit, one test case per axis) and check.json.
    """
    from rich.console import Console

    from robogen.errors import RobogenError

    if pairing not in _PAIRING:
        _error(f"--pairing must be one of {', '.join(_PAIRING)}, got {pairing!r}")
    console = Console()
    try:
        from robogen.check.run import run_check

        with ProgressBars(console=console) as bars:
            bars.phase(f"robogen check: {candidate} against {baseline}: loading both sides "
                       "(stored runs are read; a policy is evaluated) ...")
            outcome = run_check(
                baseline, candidate, spec=spec, env=env, episodes=episodes, seed=seed,
                margin=margin, alpha=alpha, sequential=sequential, looks=looks,
                spending=spending, paired=_PAIRING[pairing], out=out, junit=junit,
                backend=backend, workers=workers, address=address,
                baseline_vecnormalize=baseline_vecnormalize,
                candidate_vecnormalize=candidate_vecnormalize,
                fail_on_inconclusive=fail_on_inconclusive, progress=bars.stage("check"),
                safety_margin=safety_margin,
            )
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
