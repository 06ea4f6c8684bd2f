"""What ``robogen check`` is asked to do: one frozen record, read by the CLI and the library.

Each field's :class:`~robogen.options.Opt` documents it and declares its ``robogen check``
option (``fail_on_inconclusive``: ``--fail-on-inconclusive``)::

    from robogen.check import CheckConfig, run_check

    outcome = run_check(CheckConfig("runs/baseline", "sb3:new.zip", margin=0.05))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from robogen.check.records import DEFAULT_ALPHA, DEFAULT_LOOKS, DEFAULT_MARGIN, DEFAULT_SPENDING
from robogen.errors import InvalidSpecError
from robogen.options import Opt

PAIRINGS: dict[str, bool | None] = {"auto": None, "paired": True, "unpaired": False}
"""``--pairing`` values: pair episodes when the seeds match (auto), always, or never."""


@dataclass(frozen=True, slots=True)
class CheckConfig:
    """A check of a candidate against a baseline (see :func:`~robogen.check.run.run_check`).

    Raises:
        InvalidSpecError: On a ``pairing`` that is not one of :data:`PAIRINGS` (the other
            values are checked by ``run_check``, before anything is evaluated).
    """

    baseline: Annotated[str | Path, Opt(
        "Baseline: run directory, report.json, or policy URI to evaluate.")]
    candidate: Annotated[str | Path, Opt(
        "Candidate: policy URI (evaluated under the baseline's manifest) or run directory.")]
    spec: Annotated[Path | None, Opt(
        "TOML eval spec: the protocol when the baseline is a policy; else only backend, "
        "workers, address are used.")] = None
    margin: Annotated[float, Opt(
        "Non-inferiority margin: tolerated drop in success rate, in [0, 1).")] = DEFAULT_MARGIN
    alpha: Annotated[float, Opt(
        "Family-wise error rate of a false regression (and of a false pass), in (0, 0.5)."
    )] = DEFAULT_ALPHA
    sequential: Annotated[bool, Opt(
        "Evaluate in looks; stop each axis once decided.",
        decls=("--sequential/--fixed",))] = False
    looks: Annotated[int, Opt("Sequential mode: planned looks.")] = DEFAULT_LOOKS
    spending: Annotated[str, Opt(
        "Sequential mode: alpha spending, obrien-fleming or pocock.")] = DEFAULT_SPENDING
    pairing: Annotated[str, Opt(
        "auto (pair episodes when both runs share the seed) | paired | unpaired.")] = "auto"
    out: Annotated[Path | None, Opt(
        "Output folder for check.{md,json,xml} and evaluated runs (default "
        "runs/check-<time>).")] = None
    junit: Annotated[Path | None, Opt("JUnit XML path (default OUT/check.xml).")] = None
    env: Annotated[str | None, Opt(
        "Env id when the baseline is a policy and there is no --spec.")] = None
    episodes: Annotated[int | None, Opt(
        "Episodes per condition when the baseline is a policy.")] = None
    seed: Annotated[int | None, Opt("Run seed when the baseline is a policy.")] = None
    backend: Annotated[str | None, Opt(
        "ray | serial (evaluated sides; default: the spec's, else ray).")] = None
    workers: Annotated[int | None, Opt("Ray workers (default: CPUs).")] = None
    address: Annotated[str | None, Opt("Existing Ray cluster address.")] = None
    baseline_vecnormalize: Annotated[str | None, Opt(
        "VecNormalize statistics (.pkl) of an SB3 baseline.")] = None
    candidate_vecnormalize: Annotated[str | None, Opt(
        "VecNormalize statistics (.pkl) of an SB3 candidate.")] = None
    fail_on_inconclusive: Annotated[bool, Opt(
        "Exit 1 also when non-inferiority is not shown.")] = False
    safety_margin: Annotated[float | None, Opt(
        "Also fail when a safety metric (robogen eval --safety) rises significantly by more "
        "than this fraction of the baseline's (0.2: 20 %).")] = None

    def __post_init__(self) -> None:
        if self.pairing not in PAIRINGS:
            raise InvalidSpecError(
                f"--pairing must be one of {', '.join(PAIRINGS)}, got {self.pairing!r}")

    @property
    def paired(self) -> bool | None:
        """Force (True) or forbid (False) pairing; None: pair when the seeds match."""
        return PAIRINGS[self.pairing]
