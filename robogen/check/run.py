"""``robogen check`` end to end: resolve both sides, evaluate policies, decide, write outputs.

Each side is a saved run (run directory or report.json) or a policy URI. The
evaluation protocol comes from a saved side's manifest when there is one
(the baseline's first); a policy is then evaluated under exactly that
manifest (same env, axes, severities, splits, seed, episodes, step limit), so
its episodes pair with the saved ones. When both sides are policies, the
baseline is evaluated from ``--spec``/``--env`` first and the candidate under
the baseline's manifest.

Run directories of evaluated sides go to ``OUT/baseline`` and
``OUT/candidate``; the check writes ``OUT/check.{json,md,xml}``.
"""

from __future__ import annotations

import contextlib
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robogen.check.config import CheckConfig
from robogen.check.gate import (
    _check_args,
    compare,
    sequential_check,
)
from robogen.check.inputs import (
    RunData,
    check_protocols,
    is_saved,
    load_saved,
    require_policy_uri,
)
from robogen.check.records import CheckResult, RunInfo
from robogen.check.safety_gate import check_safety_margin, require_safety, with_safety
from robogen.configs import EvalConfig, load_eval_config
from robogen.errors import InvalidSpecError
from robogen.rollout.manifest import config_fields, differences, to_config
from robogen.types import EvalManifest, WorkUnit

if TYPE_CHECKING:
    from robogen.rollout.session import EvalSession

ProgressFn = Callable[[int, int], None]

EXECUTION_FIELDS = ("backend", "workers", "address", "num_gpus_per_worker", "render_device",
                    "unit_timeout")
"""Spec fields that say how to run, not what to run; always taken from ``--spec``."""
_IGNORED_SPEC_FIELDS = ("policy", "vecnormalize", "out", "videos", "batch_size")

SPEC_CONFLICT = (
    "{what} disagree(s) with the manifest of the {side} {source!r} on {fields}; the saved "
    "run defines the protocol: drop these fields/flags or re-evaluate the baseline"
)
NEEDS_ENV = (
    "the baseline {baseline!r} is a policy, so the check must evaluate it: give --spec "
    "eval.toml or --env ENV_ID (or pass a saved run directory / report.json as --baseline)"
)


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """What :func:`run_check` produced.

    Attributes:
        result: The decisions.
        out_dir: Folder of the outputs.
        files: ``json``/``md``/``junit`` output paths, plus ``baseline_run`` and
            ``candidate_run`` for evaluated sides.
    """

    result: CheckResult
    out_dir: Path
    files: dict[str, Path]


def _check_output_paths(out_dir: Path, junit: str | Path | None) -> None:
    """Refuse output paths that cannot be written, before anything is evaluated.

    Raises:
        InvalidSpecError: If ``out_dir`` is a file, ``junit`` is a directory, or a
            folder either needs is an existing file.
    """
    if out_dir.is_file():
        raise InvalidSpecError(f"--out {str(out_dir)!r} is a file; give a new or empty directory")
    paths = [("--out", out_dir, out_dir)]
    if junit is not None:
        junit = Path(junit)
        if junit.is_dir():
            raise InvalidSpecError(f"--junit {str(junit)!r} is a directory; give a file path")
        paths.append(("--junit", junit, junit.parent))
    for flag, shown, folder in paths:
        blocked = next((p for p in (folder, *folder.parents) if p.is_file()), None)
        if blocked is not None:
            raise InvalidSpecError(
                f"{flag} {str(shown)!r} cannot be created: {str(blocked)!r} is a file")


def _default_out() -> Path:
    return Path("runs") / f"check-{time.strftime('%Y%m%d-%H%M%S')}"


def _read_spec(spec: Path | None) -> dict[str, Any]:
    if spec is None:
        return {}
    try:
        return tomllib.loads(Path(spec).read_text())
    except FileNotFoundError:
        raise InvalidSpecError(f"spec file {str(spec)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise InvalidSpecError(f"spec file {str(spec)!r} is not valid TOML: {e}") from e


def _spec_conflicts(spec_data: dict[str, Any], manifest: EvalManifest) -> list[str]:
    want = config_fields(manifest)
    out = []
    for key, value in spec_data.items():
        if key in EXECUTION_FIELDS or key in _IGNORED_SPEC_FIELDS:
            continue
        if key not in want:
            out.append(f"{key} (not a field of an evaluation)")
            continue
        have = want[key]
        if key == "severities":
            value = sorted({float(v) for v in value})
            have = sorted(have)
        if key == "combined" and not value and len(manifest.axes) < 2:
            continue
        if value != have:
            out.append(f"{key} (spec {value!r}, manifest {have!r})")
    return out


def _execution(spec_data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    ex = {k: spec_data[k] for k in EXECUTION_FIELDS if k in spec_data}
    ex.update({k: v for k, v in overrides.items() if v is not None})
    return ex


def _evaluated_info(uri: str, data: RunData) -> RunData:
    m = data.manifest
    n = sum(n for _, n in data.counts.values())
    info = RunInfo(uri, "evaluated", m.policy, data.info.run_dir, m.seed, m.n_episodes, n)
    return replace(data, info=info)


@contextlib.contextmanager
def _check_flags(cfg: EvalConfig) -> Iterator[None]:
    """Errors of evaluating one side name ``check``'s flag for it, not ``eval``'s."""
    from robogen.errors import CheckpointError

    role = Path(cfg.out).name if cfg.out is not None else ""
    try:
        yield
    except CheckpointError as e:
        if role not in ("baseline", "candidate") or "--vecnormalize" not in str(e):
            raise
        raise CheckpointError(str(e).replace("--vecnormalize", f"--{role}-vecnormalize")) from e


NOT_REPRODUCIBLE = (
    "{source!r} cannot be re-run for the {role}: `robogen eval` settings do not reproduce its "
    "protocol ({fields}); it was probably written by `robogen scale`. Nothing was evaluated. "
    "Compare two saved runs instead, or give two policies and --spec"
)


def _same_protocol(
    protocol: EvalManifest | None, source: str | Path, role: str
) -> Callable[[EvalManifest], None] | None:
    """A check, before anything runs, that an evaluation reproduces ``protocol``."""
    if protocol is None:
        return None

    def check(manifest: EvalManifest) -> None:
        diffs = differences(protocol, manifest)
        if diffs:
            raise InvalidSpecError(NOT_REPRODUCIBLE.format(
                source=str(source), role=role, fields="; ".join(diffs)))

    return check


def _evaluate(cfg: EvalConfig, uri: str, progress: ProgressFn | None,
              check: Callable[[EvalManifest], None] | None = None) -> RunData:
    from robogen.runs.evaluation import evaluate

    with _check_flags(cfg):
        outcome = evaluate(cfg, progress=progress, check_manifest=check)
    return _evaluated_info(uri, load_saved(outcome.run_dir, require_complete=False))


class _EvalSide:
    """One evaluated side of a sequential check: its store and its session (workers stay
    loaded between looks)."""

    def __init__(self, cfg: EvalConfig, uri: str,
                 check: Callable[[EvalManifest], None] | None = None) -> None:
        from robogen.rollout.runner import prepare
        from robogen.rollout.store import ResultStore

        self.cfg = cfg
        self.uri = uri
        self.session: EvalSession | None = None
        assert cfg.out is not None
        ResultStore.require_new(Path(cfg.out))
        with _check_flags(cfg):
            manifest = prepare(cfg)  # every setup error surfaces here, before any episode
        if check is not None:
            check(manifest)
        self.store = ResultStore.create(Path(cfg.out), manifest)
        (self.store.run_dir / "eval_config.json").write_text(cfg.model_dump_json(indent=2))

    @property
    def manifest(self) -> EvalManifest:
        return self.store.manifest

    @property
    def num_workers(self) -> int:
        import os

        return self.cfg.workers or (os.cpu_count() or 1)

    def run(self, units: Sequence[WorkUnit]) -> None:
        """Run the units not stored yet (the policy stays loaded between looks)."""
        from robogen.rollout.backends import make_backend
        from robogen.rollout.runner import backend_options
        from robogen.rollout.session import EvalSession

        if self.session is None:
            from robogen.runs.evaluation import load_backend

            load_backend(self.cfg.backend)  # a backend above rollout registers on import
            backend = make_backend(self.manifest, backend_options(self.cfg),
                                   max_workers=self.num_workers, keep_cluster=True)
            self.session = EvalSession(self.store, backend)
        self.session.run(units)

    def data(self) -> RunData:
        info = RunInfo(self.uri, "evaluated", self.manifest.policy, str(self.store.run_dir),
                       self.manifest.seed, self.manifest.n_episodes)
        d = RunData.from_results(self.manifest, self.store.load_results(), info)
        return _evaluated_info(self.uri, d)

    def finish(self) -> Path:
        from robogen.runs.evaluation import finish_report

        if self.session is not None:
            self.session.close()
            self.session = None
        if self.store.done_units():
            finish_report(self.store, videos=0)
        return self.store.run_dir


class _EvalSource:
    """:class:`~robogen.check.gate.OutcomeSource` that evaluates policies look by look."""

    def __init__(self, baseline: RunData | _EvalSide, candidate: _EvalSide,
                 progress: ProgressFn | None) -> None:
        self.baseline = baseline
        self.candidate = candidate
        self.manifest = candidate.manifest
        self.sides_evaluated = 2 if isinstance(baseline, _EvalSide) else 1
        self._progress = progress
        self._budget = self.manifest.n_episodes * len(self.manifest.conditions)
        self._budget *= self.sides_evaluated
        ray_sides = [s for s in (baseline, candidate)
                     if isinstance(s, _EvalSide) and s.cfg.backend == "ray"]
        if ray_sides and not candidate.cfg.address:
            from robogen.rollout.backends import start_ray_cluster

            # one local cluster with room for every side's long-lived actors
            start_ray_cluster(None, num_cpus=sum(s.num_workers for s in ray_sides))

    def advance(self, n: int, conditions: Sequence[str]) -> tuple[RunData, RunData]:
        from robogen.rollout.runner import plan_units

        names = set(conditions)
        units = [u for u in plan_units(self.manifest)
                 if u.condition.name in names and u.episode_indices[-1] < n]
        sides = [s for s in (self.baseline, self.candidate) if isinstance(s, _EvalSide)]
        for side in sides:
            side.run(units)
        base = self.baseline.data() if isinstance(self.baseline, _EvalSide) else self.baseline
        cand = self.candidate.data()
        if self._progress:
            done = cand.info.episodes_run + (base.info.episodes_run if len(sides) == 2 else 0)
            self._progress(done, self._budget)
        return base, cand


def run_check(
    config: CheckConfig,
    *,
    write: bool = True,
    progress: ProgressFn | None = None,
) -> CheckOutcome:
    """Compare a candidate with a baseline and write check.{json,md,xml}.

    ``config.spec`` is the protocol when both sides are policies; otherwise only its
    execution fields (backend, workers, address, num_gpus_per_worker) are used, and its
    protocol fields must agree with the saved run's manifest. With ``config.safety_margin``
    the safety metrics are gated too (:mod:`robogen.check.safety_gate`), and evaluated sides
    record them.

    Args:
        config: What to check (:class:`~robogen.check.config.CheckConfig`, the options of
            ``robogen check``).
        write: Write the output files (False: only return the result).
        progress: Called with (episodes done, total) while evaluating.

    Returns:
        The :class:`CheckOutcome`.

    Raises:
        InvalidSpecError, RunDirError, SpaceMismatchError, CheckpointError,
        UnknownNameError: On invalid input, before the check decides anything.
    """
    _validate(config)
    out_dir = Path(config.out) if config.out is not None else _default_out()
    _check_output_paths(out_dir, config.junit)
    spec_data = _read_spec(config.spec)
    execution = _execution(spec_data, {"backend": config.backend, "workers": config.workers,
                                       "address": config.address})
    base_data, cand_data = _saved_sides(config, out_dir, write=write)
    protocol = _saved_protocol(config, spec_data, base_data, cand_data)
    if config.safety_margin is not None:
        for data, role in ((base_data, "baseline"), (cand_data, "candidate")):
            if data is not None:
                require_safety(data, role)
        execution = {**execution, "safety": True}
    base_cfg = base_check = None
    if base_data is None:
        base_cfg, base_check = _baseline_config(config, protocol, spec_data, out_dir, execution)
    if config.sequential:
        result, files = _sequential(base_data, cand_data, base_cfg, config, out_dir, execution,
                                    progress=progress)
    else:
        if base_data is None:
            assert base_cfg is not None
            base_data = _evaluate(base_cfg, str(config.baseline), progress, base_check)
        result, files = _fixed(base_data, cand_data, config, out_dir, execution, progress)
    if write:
        from robogen.check.outputs import write_outputs

        files.update(write_outputs(result, out_dir, junit=config.junit))
    return CheckOutcome(result, out_dir, files)


def _validate(config: CheckConfig) -> None:
    """The check's own numbers, before anything is read or evaluated."""
    _check_args(config.margin, config.alpha)
    check_safety_margin(config.safety_margin)
    if config.safety_margin is not None and config.sequential:
        raise InvalidSpecError("--safety-margin needs a fixed-size check: drop --sequential "
                               "(or --safety-margin)")
    if config.sequential:
        from robogen.check.sequential import look_schedule, spent_alpha

        look_schedule(1, config.looks)
        spent_alpha(config.spending, 1.0, config.alpha)


def _saved_sides(config: CheckConfig, out_dir: Path,
                 *, write: bool) -> tuple[RunData | None, RunData | None]:
    """The saved sides, loaded (None: a policy URI, to evaluate).

    Raises:
        InvalidSpecError: If ``out_dir`` already holds a check that would be overwritten,
            or ``--sequential`` is given two saved runs.
    """
    base_saved, cand_saved = is_saved(config.baseline), is_saved(config.candidate)
    if write and (not base_saved or not cand_saved):
        busy = [out_dir / n for n in ("check.json", "baseline", "candidate")
                if (out_dir / n).exists()]
        if busy:
            raise InvalidSpecError(
                f"--out {str(out_dir)!r} already holds a check ({busy[0].name} exists); "
                "give a new --out, or compare the saved runs in it: robogen check --baseline "
                f"{out_dir / 'baseline'} --candidate {out_dir / 'candidate'}"
            )
    if config.sequential and base_saved and cand_saved:
        raise InvalidSpecError(
            "--sequential evaluates in batches, so the candidate (or baseline) must be a policy "
            "URI, not a saved run; drop --sequential to compare two saved runs"
        )
    if not base_saved:
        require_policy_uri(config.baseline, "baseline")
    if not cand_saved:
        require_policy_uri(config.candidate, "candidate")
    return (load_saved(config.baseline, "baseline") if base_saved else None,
            load_saved(config.candidate, "candidate") if cand_saved else None)


def _saved_protocol(config: CheckConfig, spec_data: dict[str, Any], base_data: RunData | None,
                    cand_data: RunData | None) -> EvalManifest | None:
    """The manifest of the first saved side (None: both are policies), after checking that
    the spec and the flags agree with it, and two saved sides with each other."""
    saved = base_data or cand_data
    if saved is None:
        return None
    flags = {k: v for k, v in (("env", config.env), ("episodes", config.episodes),
                               ("seed", config.seed)) if v is not None}
    if spec_data or flags:
        side, src = (("baseline", config.baseline) if base_data
                     else ("candidate", config.candidate))
        conflicts = _spec_conflicts({**spec_data, **flags}, saved.manifest)
        if conflicts:
            what = f"--spec {str(config.spec)!r}" if config.spec is not None else "the flags"
            raise InvalidSpecError(SPEC_CONFLICT.format(what=what, side=side, source=str(src),
                                                        fields="; ".join(conflicts)))
    if base_data is not None and cand_data is not None:
        check_protocols(base_data, cand_data)
    return saved.manifest


def _baseline_config(
    config: CheckConfig, protocol: EvalManifest | None, spec_data: dict[str, Any],
    out_dir: Path, execution: dict[str, Any],
) -> tuple[EvalConfig, Callable[[EvalManifest], None] | None]:
    """How to evaluate a policy baseline: under the saved candidate's manifest (checked to
    reproduce it), else from the spec and the flags."""
    common = {"policy": str(config.baseline), "vecnormalize": config.baseline_vecnormalize,
              "out": out_dir / "baseline", "videos": 0, **execution}
    if protocol is not None:
        return (to_config(protocol, **common),
                _same_protocol(protocol, config.candidate, "baseline"))
    if not spec_data and config.env is None:
        raise InvalidSpecError(NEEDS_ENV.format(baseline=str(config.baseline)))
    return load_eval_config(config.spec, env=config.env, episodes=config.episodes,
                            seed=config.seed, **common), None


def _fixed(
    base_data: RunData, cand_data: RunData | None, config: CheckConfig, out_dir: Path,
    execution: dict[str, Any], progress: ProgressFn | None,
) -> tuple[CheckResult, dict[str, Path]]:
    """A fixed-size check: evaluate a policy candidate under the baseline's manifest, then
    decide."""
    files: dict[str, Path] = {}
    if base_data.info.kind == "evaluated":
        files["baseline_run"] = out_dir / "baseline"
    if cand_data is None:
        cand_cfg = to_config(base_data.manifest, policy=str(config.candidate),
                             vecnormalize=config.candidate_vecnormalize,
                             out=out_dir / "candidate", videos=0, **execution)
        cand_data = _evaluate(
            cand_cfg, str(config.candidate), progress,
            _same_protocol(base_data.manifest, config.baseline, "candidate"))
        files["candidate_run"] = out_dir / "candidate"
    result = compare(base_data, cand_data, margin=config.margin, alpha=config.alpha,
                     paired=config.paired, fail_on_inconclusive=config.fail_on_inconclusive)
    if config.safety_margin is not None:
        result = with_safety(result, base_data, cand_data, config.safety_margin)
    return result, files


def _sequential(
    base_data: RunData | None, cand_data: RunData | None, base_cfg: EvalConfig | None,
    config: CheckConfig, out_dir: Path, execution: dict[str, Any], *,
    progress: ProgressFn | None,
) -> tuple[CheckResult, dict[str, Path]]:
    baseline, candidate = config.baseline, config.candidate
    if cand_data is not None:
        raise InvalidSpecError(
            "--sequential evaluates the candidate in batches, so --candidate must be a policy "
            f"URI, got the saved run {str(candidate)!r}; drop --sequential to compare saved runs"
        )
    sides: dict[str, _EvalSide] = {}
    files: dict[str, Path] = {}
    ray_was_up = _ray_is_up()
    try:
        if base_data is None:
            assert base_cfg is not None
            sides["baseline_run"] = _EvalSide(base_cfg, str(baseline))
            protocol = sides["baseline_run"].manifest
        else:
            protocol = base_data.manifest
        cand_cfg = to_config(protocol, policy=str(candidate),
                             vecnormalize=config.candidate_vecnormalize,
                             out=out_dir / "candidate", videos=0, **execution)
        sides["candidate_run"] = _EvalSide(cand_cfg, str(candidate),
                                           _same_protocol(protocol, baseline, "candidate"))
        base_src: RunData | _EvalSide = (
            base_data if base_data is not None else sides["baseline_run"]
        )
        source = _EvalSource(base_src, sides["candidate_run"], progress)
        result = sequential_check(
            source, margin=config.margin, alpha=config.alpha, looks=config.looks,
            spending=config.spending, paired=config.paired,
            fail_on_inconclusive=config.fail_on_inconclusive)
    except BaseException:
        for side in sides.values():  # keep what ran; never mask the original error
            with contextlib.suppress(Exception):
                side.finish()
        _shutdown_ray_if_started(ray_was_up)
        raise
    try:
        for name, side in sides.items():
            files[name] = side.finish()
    finally:
        _shutdown_ray_if_started(ray_was_up)
    return result, files


def _ray_is_up() -> bool:
    from robogen.rollout.backends import ray_cluster_is_up

    return ray_cluster_is_up()


def _shutdown_ray_if_started(was_up: bool) -> None:
    """Shut down the local Ray cluster if this check started it."""
    if not was_up and _ray_is_up():
        from robogen.rollout.backends import stop_ray_cluster

        stop_ray_cluster()
