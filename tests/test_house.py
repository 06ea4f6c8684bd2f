"""House rules read from the source under ``robogen/``: module sizes (STYLE.md section 1), a
docstring on every public definition (section 6), and a type-checker baseline that only shrinks
(section 9), with the mujoco stub it relies on matching the installed bindings.

Modules aim at <= 400 lines and are split before 600. ``TOO_LONG`` names the modules still over
the limit; the list may only shrink: a module on it that is split (or falls under the limit)
fails :func:`test_the_allow_list_only_names_modules_still_too_long` until its line is deleted,
and no module may join it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import robogen

PKG = Path(robogen.__file__).parent
MAX_LINES = 600

TOO_LONG: dict[str, int] = {
    # module (relative to robogen/): its length when listed; split them, never add one
}


def _lengths() -> dict[str, int]:
    return {path.relative_to(PKG).as_posix(): len(path.read_text().splitlines())
            for path in sorted(PKG.rglob("*.py"))}


def test_no_module_is_over_600_lines() -> None:
    """Every module under robogen/ has at most 600 lines, but the listed ones, which may not
    grow."""
    lengths = _lengths()
    over = {name: n for name, n in lengths.items() if n > MAX_LINES and name not in TOO_LONG}
    assert not over, (f"modules over {MAX_LINES} lines (split them along their seams, "
                      f"re-exporting public names from the original module): {over}")
    grown = {name: (lengths[name], n) for name, n in TOO_LONG.items()
             if name in lengths and lengths[name] > n}
    assert not grown, f"listed modules grew (now, when listed): {grown}; split them instead"


def test_the_allow_list_only_names_modules_still_too_long() -> None:
    """A listed module that was split or shrank below the limit leaves the list (it only
    shrinks)."""
    lengths = _lengths()
    stale = sorted(name for name in TOO_LONG if lengths.get(name, 0) <= MAX_LINES)
    assert not stale, f"delete these from TOO_LONG (no longer over {MAX_LINES} lines): {stale}"


def _is_setter(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``@prop.setter`` / ``@prop.deleter``: documented by the property's getter."""
    return any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")
               for d in node.decorator_list)


def _undocumented(body: list[ast.stmt], where: str) -> Iterator[str]:
    for node in body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if node.name.startswith("_"):
            continue  # private (and dunder) names, and everything inside a private class
        if isinstance(node, ast.ClassDef):
            if ast.get_docstring(node) is None:
                yield f"{where}:{node.lineno} class {node.name}"
            yield from _undocumented(node.body, f"{where}:{node.name}")
        elif ast.get_docstring(node) is None and not _is_setter(node):
            yield f"{where}:{node.lineno} def {node.name}"


def test_every_public_definition_has_a_docstring() -> None:
    """Module-level functions and classes and the public methods (properties included) of
    public classes, at any depth of public classes, carry a docstring; nested functions and
    private names need none."""
    missing = [m for path in sorted(PKG.rglob("*.py"))
               for m in _undocumented(ast.parse(path.read_text()).body,
                                      path.relative_to(PKG).as_posix())]
    assert not missing, ("public definitions without a docstring (Google style: shapes, "
                         "dtypes, units, errors raised):\n" + "\n".join(missing))


def test_the_docstring_check_finds_a_missing_docstring() -> None:
    """The walk above reports an undocumented public method and function, not a private one,
    a setter or a nested function."""
    code = (
        "class A:\n"
        "    'Doc.'\n"
        "    @property\n"
        "    def x(self):\n"
        "        'Doc.'\n"
        "    @x.setter\n"
        "    def x(self, v): ...\n"
        "    def m(self): ...\n"
        "    def _p(self): ...\n"
        "def f():\n"
        "    def inner(): ...\n"
        "class _B:\n"
        "    def m(self): ...\n"
        "class C: ...\n"
    )
    assert list(_undocumented(ast.parse(code).body, "t")) == [
        "t:A:8 def m", "t:10 def f", "t:14 class C"]


# ---- the type checker's baseline only shrinks -----------------------------------------------

ROOT = PKG.parent
BASELINE = ROOT / ".basedpyright" / "baseline.json"
BASELINE_ENTRIES = 21
"""Diagnostics in ``.basedpyright/baseline.json`` (errors present when they were baselined;
``make lint`` fails on any other). The number may only go down: fix one, regenerate the
baseline (``basedpyright --pythonpath .venv/bin/python robogen --writebaseline``, where the
Meta-World and Gymnasium-Robotics suites are installed as in CI; elsewhere drop the
``reportMissingImports`` entries of their imports that it adds) and lower it here."""
MUJOCO_STUB = ROOT / "typings" / "mujoco" / "__init__.pyi"


def test_the_type_checker_baseline_only_shrinks() -> None:
    """The baseline holds exactly :data:`BASELINE_ENTRIES` diagnostics: more is a new type
    error hidden in it, fewer is a fix whose number was not lowered here."""
    files = json.loads(BASELINE.read_text())["files"]
    n = sum(len(entries) for entries in files.values())
    assert n <= BASELINE_ENTRIES, (
        f"the basedpyright baseline grew to {n} entries (from {BASELINE_ENTRIES}): fix the new "
        "type errors instead of baselining them (for a mujoco name: declare it in "
        "typings/mujoco/__init__.pyi)")
    assert n == BASELINE_ENTRIES, (
        f"the baseline shrank to {n} entries: set BASELINE_ENTRIES = {n} in tests/test_house.py")


def _stub_names() -> tuple[set[str], dict[str, set[str]]]:
    """Top-level names the mujoco stub declares, and the members of each enum class."""
    tree = ast.parse(MUJOCO_STUB.read_text())
    names: set[str] = set()
    enums: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            names.add(node.name)
        if isinstance(node, ast.ClassDef) and node.name.startswith("mjt"):
            enums[node.name] = {s.target.id for s in node.body
                                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return names, enums


def test_the_mujoco_stub_declares_only_what_mujoco_has() -> None:
    """Every class and function of typings/mujoco/__init__.pyi exists in the installed
    bindings (a renamed or removed MuJoCo name fails here, not only at run time), and every
    ``mujoco.mjtX.Y`` robogen's code names is declared and exists."""
    import re

    import mujoco

    names, enums = _stub_names()
    assert {"MjModel", "MjData", "MjSpec", "mj_step", "mjtObj"} <= names
    assert not sorted(n for n in names if not hasattr(mujoco, n))
    used = {m for path in PKG.rglob("*.py")
            for m in re.findall(r"\bmujoco\.(mjt\w+)\.(mj\w+)", path.read_text())}
    assert used, "robogen names no mujoco enum member: the pattern above is stale"
    undeclared = sorted(f"{e}.{m}" for e, m in used if m not in enums.get(e, set()))
    assert not undeclared, f"declare these in typings/mujoco/__init__.pyi: {undeclared}"
    assert not sorted(f"{e}.{m}" for e, m in used if not hasattr(getattr(mujoco, e), m))
