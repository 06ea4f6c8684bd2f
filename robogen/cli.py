"""Command-line interface (typer): thin; parses, calls the library, prints.

Exit codes: 0 success; 1 a failed check (``robogen check``); 2 invalid input or a set-up error
(nothing written); 3 ``robogen eval`` finished but a condition has too many invalid episodes
(the simulator or the machinery failed, e.g. a policy server down: its numbers are not
measurements); 130 interrupted by Ctrl-C, 143 by SIGTERM (a batch scheduler, ``docker stop``):
the stored parts are kept, ``robogen eval --resume RUN_DIR`` finishes the run.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from robogen._console import exit_invalid as _fail
from robogen._console import guarded as _guard
from robogen._console import handle_sigterm, interrupt_code
from robogen.progress import ProgressBars

EXIT_CODES = (
    "Exit codes: 0 done; 1 robogen check found a regression; 2 invalid input or a set-up error "
    "(nothing written); 3 robogen eval finished, but a condition has too many invalid episodes "
    "(simulator or infrastructure failures, e.g. a policy server down: not a measurement); "
    "130 interrupted (Ctrl-C) and 143 terminated (SIGTERM): robogen eval --resume RUN_DIR "
    "finishes the run."
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="robogen: measure how well robot and RL policies generalize across factors of "
         f"variation.\n\n{EXIT_CODES}",
)

EXIT_INVALID = 2
EXIT_INVALID_EPISODES = 3
INVALID_RUN = (
    "{run}: {n} condition(s) have too many invalid episodes ({names}): the simulator or the "
    "machinery failed (see the causes in report.md), so their numbers are not measurements; "
    "once the cause is fixed, rerun those units with: robogen eval --resume {run}"
)


@app.callback()
def _load_plugins(
    plugin: Annotated[list[str] | None, typer.Option(
        "--plugin", envvar="ROBOGEN_PLUGINS", metavar="MODULE",
        help="Import MODULE first: a plug-in that registers an env family, axis or policy "
             "scheme (repeatable; ROBOGEN_PLUGINS takes a space-separated list). Installed "
             "'robogen.plugins' entry points load on their own. A run records its plug-ins; "
             "every worker, and --resume, imports them.")] = None,
) -> None:
    """robogen: measure how well robot and RL policies generalize across factors of
    variation."""
    from robogen.plugins import import_plugins, load_entry_point_plugins

    load_entry_point_plugins()
    _guard(import_plugins, plugin or ())


class _RegistryOption(typer.models.OptionInfo):
    """A ``typer.Option`` whose help is written from the registries when the command is
    built (each invocation), so an env family, axis or policy scheme registered by a plug-in
    module shows in ``--help`` with no edit here."""

    def __init__(self, help_fn: Any, fallback: str, **kwargs: Any) -> None:
        self._help_fn, self._fallback = help_fn, fallback
        super().__init__(**{"default": ..., "param_decls": (), **kwargs})

    @property  # type: ignore[override]
    def help(self) -> str:  # noqa: D102
        try:
            return str(self._help_fn())
        except Exception:  # noqa: BLE001 - a registry that fails to import must not break --help
            return self._fallback

    @help.setter
    def help(self, value: str | None) -> None:  # OptionInfo.__init__ assigns it
        pass


def _env_help() -> str:
    from robogen.envs import ENV_FAMILIES

    return ("Env id PREFIX/NAME; families: " + ", ".join(f"{p}/" for p in ENV_FAMILIES.names())
            + " (robogen list shows every id).")


def _policy_help() -> str:
    from robogen.policies import policy_uri_help

    return (f"Policy URI SCHEME:REST, one of: {policy_uri_help()}; repeat it to evaluate "
            "several policies under one manifest and compare them (one run dir each under "
            "--out, compare.* in --out)")


def _axes_help() -> str:
    from robogen.perturbations import AXES

    return f"Comma-separated axes: {','.join(AXES.names())} (default: all)."


def _auto_option(help: str) -> Any:
    """A ``typer.Option`` of sequential runs only: its help starts "With --episodes auto:"."""
    return typer.Option(help=f"With --episodes auto: {help}")


_ENV_OPTION = _RegistryOption(_env_help, "Env id PREFIX/NAME (robogen list shows every id).")
_POLICY_OPTION = _RegistryOption(_policy_help, "Policy URI SCHEME:REST (robogen list).")
_AXES_OPTION = _RegistryOption(_axes_help, "Comma-separated axes (default: all).")


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items


def _floats(value: str | None, name: str) -> list[float] | None:
    items = _csv(value)
    if items is None:
        return None
    out = []
    for v in items:
        try:
            out.append(float(v))
        except ValueError:
            _fail(f"{name} must be comma-separated numbers, got {v!r}")
    return out


def _json_object(value: str | None, name: str) -> dict[str, Any] | None:
    """A JSON object option (``--env-kwargs``); exit 2 naming the value otherwise."""
    if value is None:
        return None
    import json

    try:
        parsed = json.loads(value)
    except ValueError as e:
        _fail(f"{name} must be a JSON object, e.g. '{{\"task_index\": 3}}', got {value!r} ({e})")
    if not isinstance(parsed, dict):
        _fail(f"{name} must be a JSON object, e.g. '{{\"task_index\": 3}}', got {value!r}")
    return parsed


def _episodes(value: str | None) -> int | str | None:
    """``--episodes``: a positive integer or ``auto``."""
    if value is None:
        return None
    v = value.strip()
    if v == "auto":
        return v
    try:
        return int(v)
    except ValueError:
        _fail(f"--episodes must be a positive integer or 'auto', got {value!r}")


def _stopped(e: BaseException) -> str:
    """How a run was stopped, for its resume line."""
    from robogen._console import Terminated

    return "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"


def _exit_if_invalid(run_dirs: Sequence[Path]) -> None:
    """Exit :data:`EXIT_INVALID_EPISODES` if a run's report has a condition with too many
    invalid episodes (``Report.invalid_conditions``), naming them on stderr."""
    from robogen.reports.writers import load_report

    lines = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "report.json"
        if not path.is_file():
            continue
        bad = load_report(path).invalid_conditions()
        if bad:
            lines.append(INVALID_RUN.format(run=run_dir, n=len(bad), names=", ".join(bad)))
    if lines:
        from robogen._console import print_error

        for line in lines:
            print_error(line)
        raise typer.Exit(EXIT_INVALID_EPISODES)


def _print_outcome(outcome: Any) -> None:
    """The run's summary table (hardest axis first), warnings, then the report paths."""
    from rich.console import Console

    c = Console()
    c.print(f"[bold green]done:[/] {outcome.n_episodes} episodes in {outcome.run_dir}",
            highlight=False)
    rj = outcome.files.get("json")
    if rj and Path(rj).exists():
        from robogen.reports.terminal import print_summary
        from robogen.reports.writers import load_report

        report = _guard(load_report, Path(rj))
        c.print()
        print_summary(report, c)
        n_err = sum(k for _, _, k in report.errors)
        if n_err:
            c.print(
                f"[bold yellow]warning:[/] {n_err} of {outcome.n_episodes} episodes raised "
                f"(see report.md); most frequent: {report.errors[0][1]}",
                highlight=False,
            )
    c.print()
    for kind in ("html", "md", "json"):
        if kind in outcome.files:
            c.print(f"  report.{kind}: {outcome.files[kind]}", highlight=False, soft_wrap=True)


@app.command("eval")
def eval_cmd(
    env: Annotated[str | None, _ENV_OPTION] = None,
    policy: Annotated[list[str] | None, _POLICY_OPTION] = None,
    spec: Annotated[
        Path | None, typer.Option(help="TOML evaluation spec (flags override it).")
    ] = None,
    vecnormalize: Annotated[
        str | None, typer.Option(help="SB3 VecNormalize statistics (.pkl).")
    ] = None,
    axes: Annotated[str | None, _AXES_OPTION] = None,
    severities: Annotated[
        str | None, typer.Option(help="Comma-separated severities in (0, 1], or 'sweep' "
                                 "(coarse grid, then bisection to each axis's breaking point).")
    ] = None,
    breaking_level: Annotated[float | None, typer.Option(
        help="With --severities sweep: also locate where success falls to this fraction of "
        "nominal (default 0.8; half of nominal is always reported).")] = None,
    splits: Annotated[str | None, typer.Option(
        help="Extra conditions per axis at severity 1 drawn from the axis's train or "
        "held-out test value set: train,test.")] = None,
    combined: Annotated[
        bool | None, typer.Option("--combined/--no-combined", help="All axes together.")
    ] = None,
    pairs: Annotated[str | None, typer.Option(
        help="Pairs of axes run together (gap and interaction): all | "
        "lighting+texture,camera+distractors,...")] = None,
    episodes: Annotated[str | None, typer.Option(
        help="Episodes per condition, or 'auto': run each condition in batches and stop it "
        "when its paired gap's anytime-valid interval (Waudby-Smith & Ramdas 2024 betting "
        "confidence sequence) is within --target-halfwidth, decided against --gap-threshold, "
        "or at --max-episodes.")] = None,
    target_halfwidth: Annotated[float | None, _auto_option(
        "stop a condition once its gap interval's half-width is at most this, in (0, 1) "
        "(default 0.05).")] = None,
    max_episodes: Annotated[int | None, _auto_option(
        "cap on episodes per condition, >= --batch-size (default 1000).")] = None,
    gap_threshold: Annotated[float | None, _auto_option(
        "also stop a condition as soon as its gap interval lies wholly above or below this "
        "gap, in (-1, 1) (e.g. 0.1: is this axis costing more than 10 points?).")] = None,
    seed: Annotated[int | None, typer.Option(help="Run seed.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Step limit per episode.")] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Envs per worker stepped together.")
    ] = None,
    obs_mode: Annotated[str | None, typer.Option(help="state | pixels | state+pixels")] = None,
    env_kwargs: Annotated[str | None, typer.Option(
        help="The env's constructor arguments as a JSON object, e.g. '{\"task_index\": 3}' "
             "(Meta-World's MT1 task) or '{\"action_repeat\": 2}' (dm_control); recorded "
             "in the manifest.")] = None,
    camera: Annotated[str | None, typer.Option(help="Observation camera.")] = None,
    backend: Annotated[str | None, typer.Option(help="ray | serial")] = None,
    workers: Annotated[int | None, typer.Option(help="Ray workers (default: CPUs).")] = None,
    address: Annotated[str | None, typer.Option(help="Existing Ray cluster address.")] = None,
    num_gpus_per_worker: Annotated[float | None, typer.Option(help="GPUs per Ray worker.")] = None,
    unit_timeout: Annotated[float | None, typer.Option(
        help="Wall-clock budget per work unit [s] (default: 60 s + 0.2 s per episode step); "
             "a unit past it is retried once, then recorded as infra_timeout.")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Run directory (new or empty; default ./runs/<env>-<policy>-<time>).")] = None,
    videos: Annotated[int | None, typer.Option(help="Failures filmed per axis.")] = None,
    success_threshold: Annotated[
        float | None, typer.Option(help="Return threshold for success.")
    ] = None,
    safety: Annotated[bool | None, typer.Option(
        "--safety", help="Record and report safety metrics per condition (peak contact force, "
        "joint limits, drops, distractor contacts, action magnitude and jerk).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Finish the killed run in RUN_DIR.")] = None,
) -> None:
    """Evaluate a policy across perturbation axes and write a report.

    Exit codes: 0 done; 2 invalid input or a set-up error (nothing written); 3 finished, but a
    condition has too many invalid episodes (the simulator or the machinery failed: not a
    measurement; --resume reruns them); 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).
    """
    from robogen.reports import evaluation

    if resume is not None:
        given = {
            "--env": env, "--policy": policy, "--spec": spec, "--vecnormalize": vecnormalize,
            "--axes": axes, "--severities": severities, "--splits": splits,
            "--breaking-level": breaking_level,
            "--combined": combined, "--pairs": pairs, "--episodes": episodes, "--seed": seed,
            "--target-halfwidth": target_halfwidth, "--max-episodes": max_episodes,
            "--gap-threshold": gap_threshold,
            "--max-steps": max_steps, "--batch-size": batch_size, "--obs-mode": obs_mode,
            "--camera": camera, "--out": out, "--success-threshold": success_threshold,
            "--env-kwargs": env_kwargs, "--safety": safety,
            "--num-gpus-per-worker": num_gpus_per_worker,
        }
        clash = [k for k, v in given.items() if v is not None]
        if clash:
            _fail(
                f"--resume finishes the run with the settings in its manifest; drop "
                f"{', '.join(clash)} (only --backend, --workers, --address, --unit-timeout and "
                "--videos apply)"
            )
        try:
            with ProgressBars() as bars:
                bar = bars.stage(f"resume {resume}")
                outcome = _guard(
                    evaluation.resume,
                    resume,
                    backend=backend or "ray",
                    workers=workers,
                    address=address,
                    progress=bar,
                    videos=videos,
                    unit_timeout=unit_timeout,
                )
        except KeyboardInterrupt as e:
            sys.stderr.write(f"\n{_stopped(e)}; finish it with: robogen eval --resume {resume}\n")
            raise typer.Exit(interrupt_code(e)) from None
        _print_outcome(outcome)
        _exit_if_invalid([outcome.run_dir])
        return
    from robogen.configs import load_eval_config

    policies = list(policy or [])
    if spec is None and (env is None or not policies):
        _fail(
            "give --env and --policy (or --spec FILE), e.g. "
            "robogen eval --env robogen/PickPlace-v0 --policy expert:pick_place"
        )
    cfg = _guard(
        load_eval_config,
        spec,
        env=env,
        policy=policies[0] if policies else None,
        vecnormalize=vecnormalize,
        axes=_csv(axes),
        severities="sweep" if severities and severities.strip() == "sweep"
        else _floats(severities, "--severities"),
        breaking_level=breaking_level,
        splits=_csv(splits),
        combined=combined,
        pairs=None if pairs is None else ("all" if pairs.strip() == "all" else _csv(pairs)),
        episodes=_episodes(episodes),
        target_halfwidth=target_halfwidth,
        max_episodes=max_episodes,
        gap_threshold=gap_threshold,
        seed=seed,
        max_steps=max_steps,
        batch_size=batch_size,
        obs_mode=obs_mode,
        env_kwargs=_json_object(env_kwargs, "--env-kwargs"),
        camera=camera,
        backend=backend,
        workers=workers,
        address=address,
        num_gpus_per_worker=num_gpus_per_worker,
        unit_timeout=unit_timeout,
        out=out,
        videos=videos,
        success_threshold=success_threshold,
        safety=safety,
    )
    if len(policies) > 1:
        if cfg.is_sequential:
            _fail("--episodes auto stops each policy's conditions at different episode counts, "
                  "so several --policy runs would not share one protocol; evaluate one policy "
                  "per run, or give --episodes N to compare policies")
        _eval_several(cfg, policies)
        return
    try:
        with ProgressBars() as bars:
            bar = bars.stage(f"{cfg.env} / {cfg.policy}")
            outcome = _guard(evaluation.evaluate, cfg, progress=bar)
    except KeyboardInterrupt as e:
        where = cfg.out or "RUN_DIR"
        sys.stderr.write(f"\n{_stopped(e)}; finish it with: robogen eval --resume {where}\n")
        raise typer.Exit(interrupt_code(e)) from None
    _print_outcome(outcome)
    _exit_if_invalid([outcome.run_dir])


@app.command("compare")
def compare_cmd(
    runs: Annotated[list[Path], typer.Argument(
        help="Two or more run directories made under one protocol (same env, axes, "
        "severities, seed, episodes, ...).")],
    out: Annotated[Path, typer.Option(help="Output directory (new or empty).")],
) -> None:
    """Compare policies side by side: gaps, paired differences with Holm p-values, rankings."""
    from robogen.reports.compare import compare_dirs

    files = _guard(compare_dirs, runs, out)
    _print_comparison(files)


def _print_comparison(files: dict[str, Path], runs: Sequence[Any] = ()) -> None:
    """Gaps side by side, the ranking per axis, then the comparison's (and ``runs``') paths."""
    import json

    from rich.console import Console

    from robogen.reports.terminal import print_comparison

    c = Console()
    c.print()
    print_comparison(json.loads(Path(files["json"]).read_text()), c)
    c.print()
    for kind in ("html", "md", "json"):
        c.print(f"  compare.{kind}: {files[kind]}", highlight=False, soft_wrap=True)
    for o in runs:
        if "html" in o.files:
            c.print(f"  report.html: {o.files['html']}", highlight=False, soft_wrap=True)


def _eval_several(cfg: Any, policies: list[str]) -> None:
    from robogen.reports.multi import comparison_out, evaluate_policies, run_dir_names

    out = comparison_out(cfg)
    cfg = cfg.model_copy(update={"out": out})
    try:
        with ProgressBars() as bars:
            outcome = _guard(evaluate_policies, cfg, policies,
                             progress_for=lambda uri: bars.stage(f"{cfg.env} / {uri}"))
    except KeyboardInterrupt as e:
        runs = [out / name for name in run_dir_names(policies)]
        steps = [f"robogen eval --resume {run}" if (run / "manifest.json").is_file()
                 else f"the same robogen eval with only --policy {uri} and --out {run}"
                 for uri, run in zip(policies, runs, strict=True)]
        sys.stderr.write(
            f"\n{_stopped(e)}; finish the runs, then compare them:\n"
            + "".join(f"  {s}\n" for s in steps)
            + f"  robogen compare {' '.join(map(str, runs))} --out {out / 'compare'}\n")
        raise typer.Exit(interrupt_code(e)) from None
    from rich.console import Console

    for o in outcome.runs:
        Console().print(f"[bold green]done:[/] {o.n_episodes} episodes in {o.run_dir}",
                        highlight=False)
    _print_comparison(outcome.files, outcome.runs)
    _exit_if_invalid([o.run_dir for o in outcome.runs])


@app.command("report")
def report_cmd(run_dir: Annotated[Path, typer.Argument(help="A run directory.")]) -> None:
    """Rebuild report.{json,md,html} and plots from a run directory's stored episodes."""
    from robogen.reports import evaluation

    _print_outcome(_guard(evaluation.rebuild_report, run_dir))


@app.command("preview")
def preview_cmd(
    env: Annotated[str, typer.Option(help="Env id.")] = "robogen/PickPlace-v0",
    axes: Annotated[str | None, typer.Option(help="Comma-separated axes (default: all).")] = None,
    severities: Annotated[str, typer.Option(help="Columns: severities in [0, 1].")] = "0,0.5,1",
    seed: Annotated[int, typer.Option(help="Run seed.")] = 0,
    size: Annotated[int, typer.Option(help="Image side in pixels.")] = 128,
    camera: Annotated[str | None, typer.Option(help="Camera name.")] = None,
    out: Annotated[Path, typer.Option(help="PNG path.")] = Path("preview.png"),
) -> None:
    """Render one PNG grid: rows = axes, columns = severities."""
    from robogen.perturbations import AXES
    from robogen.preview import write_preview

    names = _csv(axes) or list(AXES.names())
    sevs = _floats(severities, "--severities") or [0.0, 0.5, 1.0]
    path = _guard(write_preview, out, env, names, sevs, seed=seed, size=size, camera=camera)
    typer.echo(f"wrote {path}")


@app.command("list")
def list_cmd() -> None:
    """List env families (installed here or the command that installs them), env ids,
    perturbation axes and policy schemes."""
    from importlib.metadata import version

    from rich.console import Console
    from rich.table import Table

    from robogen.envs import ENV_FAMILIES, list_env_ids
    from robogen.perturbations import AXES
    from robogen.policies import policy_uri_forms

    c = Console()
    t = Table(title=f"env families (this Python: mujoco {version('mujoco')})")
    for col in ("prefix", "envs", "suite", "here", "success"):
        t.add_column(col)
    for prefix in ENV_FAMILIES.names():
        fam = ENV_FAMILIES.get(prefix)
        why = fam.missing()
        t.add_row(f"{prefix}/", str(len(fam.names())), fam.description,
                  "installed" if why is None else f"not installed: {fam.install}", fam.success)
    c.print(t)
    t = Table(title="envs")
    t.add_column("env id")
    for e in list_env_ids():
        t.add_row(e)
    c.print(t)
    t = Table(title="axes")
    for col in ("axis", "kind", "description"):
        t.add_column(col)
    for name in AXES.names():
        cls = AXES.get(name)
        t.add_row(name, cls.kind, cls.description)
    c.print(t)
    t = Table(title="policy schemes")
    t.add_column("scheme")
    t.add_column("URI form")
    for s, form in policy_uri_forms().items():
        t.add_row(f"{s}:", form)
    c.print(t)


@app.command("serve")
def serve_cmd(
    policy: Annotated[str, typer.Option(
        help="Policy URI to serve, SCHEME:REST (robogen list shows the schemes).")],
    env: Annotated[str, typer.Option(
        help="Env id whose observation and action spaces the policy is loaded for.")],
    port: Annotated[int, typer.Option(help="TCP port (0: any free port, printed).")] = 8000,
    host: Annotated[str, typer.Option(help="Bind address (0.0.0.0 exposes it).")] = "127.0.0.1",
    api_key: Annotated[str | None, typer.Option(
        envvar="ROBOGEN_API_KEY",
        help="Require 'Authorization: Api-Key KEY' (or set ROBOGEN_API_KEY).")] = None,
    obs_mode: Annotated[str, typer.Option(help="state | pixels | state+pixels")] = "state",
    vecnormalize: Annotated[
        str | None, typer.Option(help="SB3 VecNormalize statistics (.pkl).")
    ] = None,
    device: Annotated[str, typer.Option(help="Policy device: cpu | cuda.")] = "cpu",
    request_timeout: Annotated[float, typer.Option(
        help="Longest wait for one request's inference [s], queueing included; then the "
             "client gets an error frame, and /healthz answers 503 while that act() hangs."
    )] = 60.0,
) -> None:
    """Serve a policy over openpi's WebSocket protocol (for remote: policies)."""
    from robogen.serve import load_server, serve_forever

    if not 0 <= port <= 65535:
        _fail(f"--port must be in [0, 65535], got {port}")
    if not request_timeout > 0:
        _fail(f"--request-timeout must be > 0 seconds, got {request_timeout!r}")
    server = _guard(load_server, policy, env, obs_mode=obs_mode, vecnormalize=vecnormalize,
                    api_key=api_key, device=device, request_timeout_s=request_timeout)
    try:
        serve_forever(server, host, port)
    except OSError as e:
        _fail(f"cannot listen on {host}:{port} ({e.strerror or e}); pick another --port/--host")


from robogen.check.cli import check_command  # noqa: E402

app.command("check")(check_command)

from robogen.scaling.cli import collect_command, plan_command, scale_command  # noqa: E402

app.command("collect")(collect_command)
app.command("scale")(scale_command)
app.command("plan")(plan_command)


def _import_mujoco() -> None:
    """Import MuJoCo now, so that an unusable ``MUJOCO_GL`` is an input error (exit 2)."""
    import os

    try:
        import mujoco  # noqa: F401
    except Exception as e:  # noqa: BLE001 - MuJoCo raises RuntimeError, PyOpenGL AttributeError
        from robogen._console import print_error

        print_error(
            f"cannot load MuJoCo with MUJOCO_GL={os.environ.get('MUJOCO_GL')!r} "
            f"({type(e).__name__}: {e}). Use MUJOCO_GL=egl (a GPU or Mesa llvmpipe), or "
            "MUJOCO_GL=osmesa where libOSMesa is installed, or unset it on a machine with a "
            "display"
        )
        sys.exit(EXIT_INVALID)


def main() -> None:
    """Console-script entry point."""
    if len(sys.argv) > 1 and sys.argv[1] not in ("--help", "-h"):
        _import_mujoco()
        from robogen._console import route_mujoco_warnings, route_robogen_warnings

        route_mujoco_warnings()
        route_robogen_warnings()
        # Ray and policy servers start processes with fork+exec after JAX is imported (a
        # flax: policy's probe); the child runs no Python of this process, so JAX's warning
        # about forking a multithreaded process does not apply there.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called",
                                category=RuntimeWarning)
    handle_sigterm()  # SIGTERM (schedulers, docker stop) ends a run like Ctrl-C
    try:
        app()
    except KeyboardInterrupt as e:
        sys.stderr.write(f"{_stopped(e)}; resume with: robogen eval --resume RUN_DIR\n")
        sys.exit(interrupt_code(e))


if __name__ == "__main__":
    main()
