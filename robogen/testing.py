"""Helpers for users' own test suites.

::

    from robogen.testing import assert_no_regression

    def test_new_checkpoint_is_as_robust():
        assert_no_regression("tests/data/baseline_run", "sb3:checkpoints/new.zip",
                             margin=0.05, backend="serial")
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robogen.check.records import DEFAULT_ALPHA, DEFAULT_MARGIN, EXIT_OK, CheckResult

__all__ = ["assert_no_regression"]

Side = str | Path | Mapping[str, Any] | Any


def _as_run_data(side: Any, role: str) -> Any:
    from robogen.check.inputs import RunData, run_data_from_arrays

    if isinstance(side, RunData):
        return side
    if isinstance(side, Mapping):
        return run_data_from_arrays(side, source=f"{role} outcomes")
    return None


def _path_or_uri(side: Any, role: str) -> str | Path:
    if not isinstance(side, str | Path):
        raise TypeError(f"{role} must be a run directory, report.json or policy URI (str or "
                        f"Path), an outcome mapping or RunData, got {type(side).__name__}")
    return side


def assert_no_regression(
    baseline: Side,
    candidate: Side,
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = DEFAULT_ALPHA,
    fail_on_inconclusive: bool = False,
    paired: bool | None = None,
    **run_kwargs: Any,
) -> CheckResult:
    """Assert that ``candidate`` is not significantly less robust than ``baseline``.

    Runs the same check as ``robogen check`` (exact one-sided tests per
    condition with ``margin``, Holm over conditions) and raises when it finds a
    regression.

    Args:
        baseline: Run directory, report.json or policy URI (as ``robogen
            check --baseline``); or a :class:`~robogen.check.inputs.RunData`;
            or a mapping ``condition -> (n,) bool`` outcomes (episode i = entry
            i, paired with the candidate's entry i).
        candidate: Same forms; a policy URI is evaluated under the baseline's manifest.
        margin: Tolerated drop in success rate, in [0, 1).
        alpha: Family-wise error rate of a false regression, in (0, 0.5).
        fail_on_inconclusive: Also raise when non-inferiority is not shown.
        paired: Force/forbid pairing (None: pair when possible).
        **run_kwargs: For paths and URIs: :class:`~robogen.check.config.CheckConfig`
            fields (``spec``, ``backend``, ``out``, ``sequential``, ...) and the ``write`` and
            ``progress`` arguments of :func:`robogen.check.run.run_check`; no files are
            written unless ``out`` is given.

    Returns:
        The :class:`~robogen.check.records.CheckResult` when there is no regression.

    Raises:
        AssertionError: On a regression (or an inconclusive check with
            ``fail_on_inconclusive``); the message is the summary table.
        RobogenError: On invalid input (as exit code 2 of the CLI).
    """
    from robogen.check.gate import compare
    from robogen.check.outputs import headline, summary_table

    b, c = _as_run_data(baseline, "baseline"), _as_run_data(candidate, "candidate")
    if b is not None and c is not None:
        result = compare(b, c, margin=margin, alpha=alpha, paired=paired,
                         fail_on_inconclusive=fail_on_inconclusive)
    elif b is None and c is None:
        import tempfile

        from robogen.check.config import PAIRINGS, CheckConfig
        from robogen.check.run import run_check

        write = run_kwargs.pop("write", run_kwargs.get("out") is not None)
        progress = run_kwargs.pop("progress", None)
        pairing = next(k for k, v in PAIRINGS.items() if v is paired)
        with tempfile.TemporaryDirectory(prefix="robogen-check-") as scratch:
            if run_kwargs.get("out") is None:  # evaluated runs go to a scratch dir, then away
                run_kwargs["out"] = Path(scratch) / "check"
            config = CheckConfig(_path_or_uri(baseline, "baseline"),
                                 _path_or_uri(candidate, "candidate"), margin=margin, alpha=alpha,
                                 pairing=pairing, fail_on_inconclusive=fail_on_inconclusive,
                                 **run_kwargs)
            result = run_check(config, write=write, progress=progress).result
    else:
        raise TypeError(
            "give baseline and candidate both as outcome mappings/RunData or both as paths / "
            f"policy URIs, got {type(baseline).__name__} and {type(candidate).__name__}"
        )
    if result.exit_code != EXIT_OK:
        raise AssertionError(
            f"{headline(result, marks=False)} (margin {margin:g}, alpha {alpha:g})\n"
            + summary_table(result, marks=False)
        )
    return result
