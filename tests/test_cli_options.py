"""The CLI's options are declared once, on the config fields (``robogen.options``): the
commands' options and the configs' fields agree, ``--resume`` refuses exactly the options
that are not how-to-run, and importing the CLI stays light."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from robogen.cli import EVAL_OWN_OPTIONS, app, eval_cmd, resume_flags
from robogen.configs import EvalConfig
from robogen.options import REQUIRED, UNLISTED, Opt, option_fields

runner = CliRunner()
GROUP = typer.main.get_command(app)


def _options(name: str) -> dict[str, Any]:
    """The command's options (typer's click ``Option`` objects) by parameter name."""
    with GROUP.make_context("robogen", [name]) as ctx:  # pyright: ignore[reportAttributeAccessIssue]
        command = GROUP.get_command(ctx, name)  # pyright: ignore[reportAttributeAccessIssue]
    return {p.name: p for p in command.params
            if p.param_type_name == "option" and p.name != "help"}


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_eval_option_is_a_config_field_and_every_field_an_option() -> None:
    fields = option_fields(EvalConfig)
    assert [f.name for f in fields] == list(EvalConfig.model_fields)  # each declares an Opt
    flagged = {f.name for f in fields if not f.opt.spec_only}
    assert set(_options("eval")) == flagged | set(EVAL_OWN_OPTIONS)
    for f in fields:
        if not f.opt.spec_only:
            assert f.flag in _options("eval")[f.name].opts, f.name
    # the fields without a flag are named where a spec file gets an unknown field wrong
    from robogen.configs import load_eval_config
    from robogen.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError) as e:
        load_eval_config(None, env="robogen/Reach-v0", policy="random", no_such_field=1)
    spec_only = [f.name for f in fields if f.opt.spec_only]
    assert spec_only and f"plus {' and '.join(spec_only)}" in str(e.value)


def _cli_type(command: Any, name: str) -> Any:
    """The type typer converts option ``name``'s text to (from the generated signature)."""
    return typing.get_args(inspect.signature(command).parameters[name].annotation)[0]


def test_option_types_and_defaults_come_from_the_fields() -> None:
    assert _cli_type(eval_cmd, "batch_size") == _cli_type(eval_cmd, "seed") == int | None
    assert _cli_type(eval_cmd, "breaking_level") == float | None
    assert _cli_type(eval_cmd, "out") == Path | None
    assert _cli_type(eval_cmd, "axes") == str | None  # a list field: text to parse
    assert _cli_type(eval_cmd, "policy") == list[str] | None  # repeatable
    res = runner.invoke(app, ["eval", "--batch-size", "eight"])
    assert res.exit_code == 2 and "--batch-size" in res.output  # typer converts to int
    opts = _options("eval")
    assert opts["policy"].multiple
    assert opts["combined"].secondary_opts == ["--no-combined"]
    assert opts["safety"].is_flag and opts["safety"].secondary_opts == []
    # every option defaults to "not given" (a spec file fills it); the help shows the field's
    assert all(o.default is None for o in opts.values())
    assert "(default: 50)" in (opts["episodes"].help or "")
    assert "(default: 0.5,1.0)" in (opts["severities"].help or "")


def test_eval_help_shows_every_option_with_its_help() -> None:
    res = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    text = _flat(res.output)
    for f in option_fields(EvalConfig):
        if f.opt.spec_only:
            assert f.flag not in text
            continue
        assert f.flag in text
        assert _flat(f.opt.help.split("{")[0])[:40] in text, f.name
    assert "per work unit [s]" in text  # help is verbatim, not rich markup
    assert "robogen/, " in text and "lighting" in text and "sb3:PATH.zip" in text  # registries
    assert UNLISTED not in text


def _typed_value(option: Any) -> list[str]:
    if option.is_flag:
        return []
    kind = _cli_type(eval_cmd, option.name)
    return ["1"] if kind == int | None else ["0.5"] if kind == float | None else ["x"]


def test_resume_refuses_exactly_the_options_that_are_not_how_to_run(tmp_path) -> None:
    run = tmp_path / "empty"
    run.mkdir()  # no manifest: an option that is let through fails on that
    applies = set(resume_flags())
    assert applies == {"--backend", "--worlds", "--sim-device", "--workers", "--address",
                       "--unit-timeout", "--videos"}
    for name, option in _options("eval").items():
        if name == "resume":
            continue
        flag = option.opts[0]
        res = runner.invoke(app, ["eval", "--resume", str(run), flag, *_typed_value(option)])
        assert res.exit_code == 2, (flag, res.output)
        if flag in applies:
            assert "no manifest.json" in res.output, (flag, res.output)
        else:
            assert f"drop {flag} (only --backend, --worlds, --sim-device, --workers, --address, " \
                   "--unit-timeout and --videos apply)" in _flat(res.output), (flag, res.output)


@dataclass(frozen=True)
class Half:
    a: Annotated[int, Opt("An option.")] = 1
    b: int = 2


def test_a_field_without_opt_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Half\.b declares no Opt"):
        option_fields(Half)


HEAVY = ("matplotlib", "mujoco", "gymnasium", "torch", "jax", "ray")
REGISTRIES = ("robogen.envs", "robogen.perturbations", "robogen.policies")


def _modules_after(code: str) -> set[str]:
    probe = (f"{code}\nimport json, sys\n"
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} "
             "| {m for m in sys.modules if m.startswith('robogen.')})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_importing_the_cli_imports_no_simulator_plotting_or_learning_library() -> None:
    loaded = _modules_after("import robogen.cli")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    assert not loaded & set(REGISTRIES)


def test_top_level_help_builds_every_command_without_the_registries() -> None:
    code = ("import sys, contextlib, io\nsys.argv = ['robogen', '--help']\n"
            "from robogen.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main()")
    loaded = _modules_after(code)
    assert not loaded & (set(HEAVY) | set(REGISTRIES)), loaded & (set(HEAVY) | set(REGISTRIES))


def test_every_check_option_is_a_check_config_field_and_vice_versa() -> None:
    from robogen.check import CheckConfig

    fields = option_fields(CheckConfig)
    assert [f.name for f in fields] == [f.name for f in dataclasses.fields(CheckConfig)]
    opts = _options("check")
    assert set(opts) == {f.name for f in fields}
    for f in fields:
        assert f.flag in opts[f.name].opts
        # check's options default to the field's own default; a field without one is required
        assert opts[f.name].required == (f.default is REQUIRED)
        assert f.default is REQUIRED or opts[f.name].default == f.default, f.name
    assert opts["sequential"].secondary_opts == ["--fixed"]
    assert opts["fail_on_inconclusive"].secondary_opts == ["--no-fail-on-inconclusive"]


def test_check_config_refuses_an_unknown_pairing() -> None:
    from robogen.check import CheckConfig
    from robogen.errors import InvalidSpecError

    assert CheckConfig("a", "b", pairing="paired").paired is True
    assert CheckConfig("a", "b").paired is None
    with pytest.raises(InvalidSpecError, match="--pairing must be one of auto, paired, "
                       "unpaired, got 'sometimes'"):
        CheckConfig("a", "b", pairing="sometimes")
    res = runner.invoke(app, ["check", "--baseline", "a", "--candidate", "b",
                              "--pairing", "sometimes"])
    assert res.exit_code == 2 and "--pairing must be one of" in res.output
