"""Command-line options declared once, on the config fields they set.

A config's field carries an :class:`Opt` in its annotation; the command's typer options
(flag, help, type, default) are generated from the fields, so the config and the CLI cannot
disagree::

    @dataclass(frozen=True)
    class CheckConfig:
        margin: Annotated[float, Opt("Tolerated drop in success rate.")] = 0.05

    @app.command("check", cls=listing_command(CheckConfig))  # registry listings in --help
    @with_parameters(cli_parameters(CheckConfig, unset_is_none=False))
    def check_command(**given: Any) -> None:
        config = CheckConfig(**given)

The flag of field ``batch_size`` is ``--batch-size``. The CLI type is the field's own when
it is a scalar (``int``, ``float``, ``bool``, ``str``, ``Path``, each maybe ``| None``);
any other field (lists, literals, mappings, unions) takes text that the option's
:attr:`Opt.parse` turns into the field's value. Works on pydantic models
(:class:`~robogen.configs.EvalConfig`) and dataclasses
(:class:`~robogen.check.config.CheckConfig`); typer is imported only when a command is built.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

from robogen.errors import InvalidSpecError

Parser = Callable[[str, str], Any]
"""``parse(text, flag) -> value``: a flag's text to the field's value; raises
:class:`~robogen.errors.InvalidSpecError` naming the flag and the text."""

REQUIRED: Any = dataclasses.MISSING
"""The default of a field that has none (the option is then required)."""

NAMES = "{names}"
"""Placeholder in :attr:`Opt.help` for the registered names :attr:`Opt.names` lists."""

UNLISTED = "see robogen list"
"""What ``{names}`` reads until the help is shown (building a command imports no registry)."""

_SCALARS = (bool, int, float, str, Path)


@dataclass(frozen=True, slots=True)
class Opt:
    """How a config field is given on the command line (metadata in ``Annotated``).

    Attributes:
        help: The option's help (and the field's documentation). A ``{names}`` placeholder
            is filled by :attr:`names` when the help is shown.
        parse: Turns the flag's text into the field's value (non-scalar fields).
        decls: Flag declarations when not ``--field-name`` (``"--combined/--no-combined"``,
            or ``"--safety"`` for an on-only switch).
        repeat: The flag may be given several times (the CLI gets a list).
        names: Lists the registered names for ``{names}`` (env families, policy schemes,
            axes), so a plug-in's shows in ``--help`` with no edit here.
        resume: The option also applies to ``robogen eval --resume`` (how to run, not
            what to run).
        spec_only: Set only in a spec file: no command-line flag.
    """

    help: str
    parse: Parser | None = None
    decls: tuple[str, ...] = ()
    repeat: bool = False
    names: Callable[[], str] | None = None
    resume: bool = False
    spec_only: bool = False


@dataclass(frozen=True, slots=True)
class OptionField:
    """A config field with its :class:`Opt`.

    Attributes:
        name: The field name (``batch_size``).
        flag: Its long flag (``--batch-size``).
        opt: The declaration.
        cli_type: The type typer converts the flag's text to (before :attr:`Opt.parse`).
        default: The field's default, or :data:`REQUIRED`.
    """

    name: str
    flag: str
    opt: Opt
    cli_type: type
    default: Any

    def help_text(self) -> str:
        """The help, with a pointer to ``robogen list`` for the registered names."""
        return self.opt.help.replace(NAMES, UNLISTED)

    def listing(self) -> str:
        """The registered names for the ``{names}`` placeholder (:data:`UNLISTED` if the
        registry fails to import: ``--help`` must still work)."""
        if self.opt.names is None:
            return UNLISTED
        try:
            return str(self.opt.names())
        except Exception:  # noqa: BLE001 - a broken registry must not break --help
            return UNLISTED


OPTIONLESS = "field {config}.{name} declares no Opt(...) in its annotation: {fix}"


def option_fields(config: type) -> tuple[OptionField, ...]:
    """Every field of ``config`` (pydantic model or dataclass), in declaration order.

    Raises:
        TypeError: If a field's annotation has no :class:`Opt` (every field must say how
            it is given on the command line, or that it is ``spec_only``).
    """
    out = []
    for name, annotation, metadata, default in _fields(config):
        opt = next((m for m in metadata if isinstance(m, Opt)), None)
        if opt is None:
            raise TypeError(OPTIONLESS.format(
                config=config.__name__, name=name,
                fix="add Annotated[..., Opt(help)] (or Opt(help, spec_only=True))"))
        out.append(OptionField(name, "--" + name.replace("_", "-"), opt,
                               _cli_type(annotation), default))
    return tuple(out)


def _fields(config: type) -> list[tuple[str, Any, tuple[Any, ...], Any]]:
    """(name, annotation without metadata, metadata, default) per field."""
    model_fields = getattr(config, "model_fields", None)
    if model_fields is not None:  # pydantic keeps Annotated's unknown metadata
        return [(name, f.annotation, tuple(f.metadata),
                 REQUIRED if f.is_required() else f.default)
                for name, f in model_fields.items()]
    hints = typing.get_type_hints(config, include_extras=True)
    out = []
    for f in dataclasses.fields(config):
        hint = hints[f.name]
        args = typing.get_args(hint) if typing.get_origin(hint) is Annotated else (hint,)
        out.append((f.name, args[0], tuple(args[1:]), f.default))
    return out


def _cli_type(annotation: Any) -> type:
    """The field's scalar type, ``None`` dropped; ``str`` (text to parse) otherwise."""
    args = (typing.get_args(annotation)
            if typing.get_origin(annotation) in (Union, types.UnionType) else (annotation,))
    args = tuple(a for a in args if a is not type(None))
    return args[0] if len(args) == 1 and args[0] in _SCALARS else str


def shown_default(value: Any) -> str | None:
    """A field default as a user types it (``[0.5, 1.0]`` -> ``0.5,1.0``, True -> ``on``);
    None: nothing worth showing (no default, None, off, empty)."""
    if value is REQUIRED or value is None or value is False or value in ([], {}, ()):
        return None
    if value is True:
        return "on"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def cli_parameters(config: type, *, unset_is_none: bool) -> list[inspect.Parameter]:
    """typer parameters (keyword-only, ``Annotated[type, typer.Option]``) of ``config``'s
    fields that have a flag, in field order.

    Args:
        config: A pydantic model or dataclass whose fields carry :class:`Opt`.
        unset_is_none: Every option defaults to None (not given), so that a spec file or
            the config's default fills it; the help ends with the config's default. Else an
            option defaults to its field's default, and a field without one is required.
    """
    import typer
    from rich.markup import escape

    params = []
    for f in option_fields(config):
        if f.opt.spec_only:
            continue
        kind: Any = list[f.cli_type] if f.opt.repeat else f.cli_type
        help = f.help_text()
        if unset_is_none:
            kind, default = kind | None, None
            shown = shown_default(f.default)
            help += f" (default: {shown})" if shown is not None else ""
        else:
            default = inspect.Parameter.empty if f.default is REQUIRED else f.default
        info = typer.Option(*f.opt.decls, help=escape(help))  # verbatim: "[s]" is no markup
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                        annotation=Annotated[kind, info], default=default))
    return params


def with_parameters(params: Sequence[inspect.Parameter]) -> Callable[[Callable[..., Any]],
                                                                     Callable[..., Any]]:
    """Give a ``def command(**given)`` the signature typer reads its options from."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__signature__ = inspect.Signature(list(params))  # pyright: ignore[reportFunctionMemberAccess]
        return fn

    return decorate


def listing_command(*configs: type) -> type:
    """A typer command class whose ``--help`` fills each :attr:`Opt.names` listing when the
    help is shown: building the command (every invocation, ``robogen --help`` included)
    imports no registry."""
    from rich.markup import escape
    from typer.core import TyperCommand

    listed = {f.name: f for c in configs for f in option_fields(c)
              if f.opt.names is not None and not f.opt.spec_only}

    class ListingCommand(TyperCommand):
        def format_help(self, ctx: Any, formatter: Any) -> None:
            for param in self.params:
                text = getattr(param, "help", None)
                if param.name in listed and text:
                    names = escape(listed[param.name].listing())
                    param.help = text.replace(UNLISTED, names)  # pyright: ignore[reportAttributeAccessIssue]
            return super().format_help(ctx, formatter)

    return ListingCommand


def parse_text(given: dict[str, Any], config: type) -> dict[str, Any]:
    """The flags' values as the config's fields: :attr:`Opt.parse` applied to the given
    (not None) values of ``config``'s fields; other keys pass through.

    Raises:
        InvalidSpecError: From a parser, naming the flag and its text.
    """
    parsers = {f.name: (f.opt.parse, f.flag) for f in option_fields(config) if f.opt.parse}
    out = dict(given)
    for name, (parse, flag) in parsers.items():
        if out.get(name) is not None:
            out[name] = parse(out[name], flag)
    return out


# -- parsers of flag text -----------------------------------------------------------------


def comma_list(text: str, flag: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (``""`` -> ``[]``)."""
    return [v.strip() for v in text.split(",") if v.strip()]


def comma_numbers(text: str, flag: str) -> list[float]:
    """``"0.5,1"`` -> ``[0.5, 1.0]``.

    Raises:
        InvalidSpecError: On an item that is not a number.
    """
    out = []
    for v in comma_list(text, flag):
        try:
            out.append(float(v))
        except ValueError:
            raise InvalidSpecError(
                f"{flag} must be comma-separated numbers, got {v!r}") from None
    return out


def json_object(text: str, flag: str) -> dict[str, Any]:
    """A JSON object (``--env-kwargs '{"task_index": 3}'``).

    Raises:
        InvalidSpecError: On text that is not JSON or not an object.
    """
    example = "e.g. '{\"task_index\": 3}'"
    try:
        parsed = json.loads(text)
    except ValueError as e:
        raise InvalidSpecError(
            f"{flag} must be a JSON object, {example}, got {text!r} ({e})") from None
    if not isinstance(parsed, dict):
        raise InvalidSpecError(f"{flag} must be a JSON object, {example}, got {text!r}")
    return parsed
