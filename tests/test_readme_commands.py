"""Every ``robogen`` command line the README and the documentation pages show parses (issue
27): each option it names exists on that command and its value has the option's type. The
README had documented ``robogen eval --env-kwargs ...`` before the option existed ("No such
option"). The pages are README.md and docs/**/*.md, the site's sources (not docs/dev/, which
holds no user documentation, nor the generated docs/reference/, whose usage lines are
synopses written from the CLI itself)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.exceptions import TyperException

from robogen.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted(p for p in (ROOT / "docs").rglob("*.md")
                         if p.relative_to(ROOT / "docs").parts[0] not in ("dev", "reference"))]
_PREFIX = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:\S*/)?robogen\s")


def _command_lines(text: str) -> list[str]:
    """``robogen ...`` lines of a page's code blocks (continuations joined) and its inline
    code spans that run something (name an env, policy, run, ...); mentions of one option
    (``robogen scale --n-boot``) and synopses with ``...`` or ``[--opt]`` are left out."""
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.strip()
            if not line.startswith("#") and _PREFIX.search(line):
                lines.append(line)
    for span in re.findall(r"`((?:\S*/)?robogen [^`]+)`", text):
        span = " ".join(span.split())
        runs = re.search(r"--(env|policy|resume|baseline|curves|task|runs)[ =]\S", span)
        if runs and "..." not in span and "[" not in span:  # a command, not an option's name
            lines.append(span)
    return list(dict.fromkeys(lines))


README_COMMANDS = _command_lines(README.read_text())
COMMANDS = list(dict.fromkeys(c for page in PAGES for c in _command_lines(page.read_text())))


def test_the_pages_show_command_lines() -> None:
    assert len(README_COMMANDS) >= 8  # the README's eval, serve, scale, plan, check examples
    assert len(COMMANDS) >= 30
    assert any("--env-kwargs" in c for c in COMMANDS)  # the Meta-World task option


@pytest.mark.parametrize("line", COMMANDS, ids=[c[:60] for c in COMMANDS])
def test_a_readme_command_line_parses(line: str) -> None:
    args = shlex.split(_PREFIX.sub("", line, count=1), comments=True)
    group = typer.main.get_command(app)  # typer's click: a group of the subcommands
    at = next(i for i, a in enumerate(args) if not a.startswith("-")
              and (i == 0 or args[i - 1] != "--plugin"))
    name, sub_args = args[at], args[at + 1:]
    with group.make_context("robogen", args[:at + 1]) as ctx:  # global options, command name
        command = group.get_command(ctx, name)
        assert command is not None, f"{line!r}: no command {name!r}"
        if "--help" in sub_args:
            return
        try:
            command.make_context(name, sub_args, parent=ctx)
        except TyperException as e:  # click's UsageError: no such option, a bad value
            pytest.fail(f"documented command line {line!r} does not parse: {e}")
