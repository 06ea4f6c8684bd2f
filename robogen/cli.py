"""Command-line interface (typer): thin; parses, calls the library, prints.

Exit codes: 0 success; 1 a failed check (``robogen check``); 2 invalid input or a set-up error
(nothing written); 3 ``robogen eval`` finished but a condition has too many invalid episodes
(the simulator or the machinery failed, e.g. a policy server down: its numbers are not
measurements), or the policy raised in every nominal episode; 130 interrupted by Ctrl-C, 143
by SIGTERM (a batch scheduler, ``docker stop``): the stored parts are kept,
``robogen eval --resume RUN_DIR`` finishes the run.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from robogen._console import exit_invalid as _fail
from robogen._console import guarded as _guard
from robogen._console import handle_sigterm, interrupt_code
from robogen.configs import EvalConfig, load_eval_config
from robogen.options import (
    cli_parameters,
    comma_list,
    comma_numbers,
    listing_command,
    option_fields,
    parse_text,
    with_parameters,
)
from robogen.progress import ProgressBars, report_line, say_checking, start_line

EXIT_CODES = (
    "Exit codes: 0 done; 1 robogen check found a regression; 2 invalid input or a set-up error "
    "(nothing written); 3 robogen eval finished, but a condition has too many invalid episodes "
    "(simulator or infrastructure failures, e.g. a policy server down: not a measurement) "
    "or the policy raised in every nominal episode; "
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
POLICY_ALWAYS_RAISED = (
    "{run}: the policy raised in every episode of the nominal condition ({error}): the run "
    "measured its errors, not its behaviour; fix the policy and run the evaluation again"
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


_SPEC = inspect.Parameter("spec", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=(
    Annotated[Path | None, typer.Option(help="TOML evaluation spec (flags override it).")]))
_RESUME = inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=(
    Annotated[Path | None, typer.Option(help="Finish the killed run in RUN_DIR.")]))
EVAL_OWN_OPTIONS = (_SPEC.name, _RESUME.name)
"""``robogen eval`` options that are not :class:`~robogen.configs.EvalConfig` fields; every
other option is generated from a field (:mod:`robogen.options`)."""


def resume_flags() -> list[str]:
    """The eval flags that also apply with ``--resume`` (how to run, not what to run)."""
    return [f.flag for f in option_fields(EvalConfig) if f.opt.resume]


def resume_clashes(given: dict[str, Any]) -> list[str]:
    """The flags among ``given`` (``eval_cmd``'s keyword arguments) that ``--resume`` refuses:
    every given option but ``--resume`` and :func:`resume_flags` (the manifest fixes them)."""
    keep = {f.name for f in option_fields(EvalConfig) if f.opt.resume} | {_RESUME.name}
    return ["--" + k.replace("_", "-") for k, v in given.items()
            if v is not None and k not in keep]


def _and(items: Sequence[str]) -> str:
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else "".join(items)


def _stopped(e: BaseException) -> str:
    """How a run was stopped, for its resume line."""
    from robogen._console import Terminated

    return "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"


def _exit_if_invalid(run_dirs: Sequence[Path]) -> None:
    """Exit :data:`EXIT_INVALID_EPISODES` if a run's report has a condition with too many
    invalid episodes (``Report.invalid_conditions``), or a policy that raised in every
    nominal episode (``Report.policy_always_raised``), naming them on stderr."""
    from robogen.reports.writers import load_report

    lines = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "report.json"
        if not path.is_file():
            continue
        report = load_report(path)
        bad = report.invalid_conditions()
        if bad:
            lines.append(INVALID_RUN.format(run=run_dir, n=len(bad), names=", ".join(bad)))
        raised = report.policy_always_raised()
        if raised is not None:
            lines.append(POLICY_ALWAYS_RAISED.format(run=run_dir, error=raised or "policy_error"))
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


_EVAL_FIELDS = cli_parameters(EvalConfig, unset_is_none=True)


@app.command("eval", cls=listing_command(EvalConfig))
@with_parameters([*_EVAL_FIELDS[:2], _SPEC, *_EVAL_FIELDS[2:], _RESUME])  # --spec after --policy
def eval_cmd(**given: Any) -> None:
    """Evaluate a policy across perturbation axes and write a report.

    Exit codes: 0 done; 2 invalid input or a set-up error (nothing written); 3 finished, but a
    condition has too many invalid episodes (the simulator or the machinery failed: not a
    measurement; --resume reruns them) or the policy raised in every nominal episode; 130
    interrupted (Ctrl-C), 143 terminated (SIGTERM).
    """
    from robogen.runs import evaluation

    spec, resume = given.pop("spec"), given.pop("resume")
    if resume is not None:
        clash = resume_clashes({"spec": spec, **given})
        if clash:
            _fail(
                f"--resume finishes the run with the settings in its manifest; drop "
                f"{', '.join(clash)} (only {_and(resume_flags())} apply)"
            )
        backend, workers, address = given["backend"], given["workers"], given["address"]
        videos, unit_timeout = given["videos"], given["unit_timeout"]
        worlds, sim_device = given["worlds"], given["sim_device"]
        try:
            with ProgressBars() as bars:
                bars.phase(f"resuming {resume}: starting the {backend or 'ray'} backend "
                           "(its workers load the env and the policy) ...")
                bar = bars.stage(f"resume {resume}", then="writing the report ...")
                outcome = _guard(
                    evaluation.resume,
                    resume,
                    backend=backend or "ray",
                    workers=workers,
                    address=address,
                    progress=bar,
                    videos=videos,
                    unit_timeout=unit_timeout,
                    worlds=worlds,
                    sim_device=sim_device,
                )
        except KeyboardInterrupt as e:
            sys.stderr.write(f"\n{_stopped(e)}; finish it with: robogen eval --resume {resume}\n")
            raise typer.Exit(interrupt_code(e)) from None
        _print_outcome(outcome)
        _exit_if_invalid([outcome.run_dir])
        return
    policies = list(given.pop("policy") or [])
    say_checking("robogen eval", [str(x) for x in (spec, given["env"], *policies) if x])
    if spec is None and (given["env"] is None or not policies):
        _fail(
            "give --env and --policy (or --spec FILE), e.g. "
            "robogen eval --env robogen/PickPlace-v0 --policy expert:pick_place"
        )
    fields = _guard(parse_text, given, EvalConfig)
    cfg = _guard(load_eval_config, spec, policy=policies[0] if policies else None, **fields)
    if len(policies) > 1:
        if cfg.is_sequential:
            _fail("--episodes auto stops each policy's conditions at different episode counts, "
                  "so several --policy runs would not share one protocol; evaluate one policy "
                  "per run, or give --episodes N to compare policies")
        _eval_several(cfg, policies)
        return
    try:
        with ProgressBars() as bars:
            bars.phase(start_line(cfg.env, [cfg.policy], cfg.episodes, cfg.backend, cfg.workers))
            bar = bars.stage(f"{cfg.env} / {cfg.policy}", then=report_line(cfg.videos))
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
    from robogen.runs.multi import comparison_out, evaluate_policies, run_dir_names

    out = comparison_out(cfg)
    cfg = cfg.model_copy(update={"out": out})
    try:
        with ProgressBars() as bars:
            bars.phase(start_line(cfg.env, policies, cfg.episodes, cfg.backend, cfg.workers))
            outcome = _guard(evaluate_policies, cfg, policies,
                             progress_for=lambda uri: bars.stage(f"{cfg.env} / {uri}",
                                                                 then=report_line(cfg.videos)))
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
    from robogen.runs import evaluation

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

    names = (_guard(comma_list, axes, "--axes") if axes is not None else []) or list(AXES.names())
    sevs = _guard(comma_numbers, severities, "--severities") or [0.0, 0.5, 1.0]
    path = _guard(write_preview, out, env, names, sevs, seed=seed, size=size, camera=camera)
    typer.echo(f"wrote {path}")


@app.command("list")
def list_cmd() -> None:
    """List env families (installed here or the command that installs them), env ids,
    perturbation axes and policy schemes."""
    from importlib.metadata import version

    from rich.console import Console
    from rich.markup import escape
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
        here = "installed" if why is None else f"not installed: {fam.install}"
        # verbatim: rich markup would eat the extra of pip install "robogen[fetch]"
        t.add_row(*map(escape, (f"{prefix}/", str(len(fam.names())), fam.description, here,
                                fam.success)))
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
        t.add_row(*map(escape, (name, cls.kind, cls.description)))
    c.print(t)
    t = Table(title="policy schemes")
    t.add_column("scheme")
    t.add_column("URI form")
    for s, form in policy_uri_forms().items():
        t.add_row(escape(f"{s}:"), escape(form))
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
