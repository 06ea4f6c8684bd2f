"""robogen's layering, read from the imports (AST) of every module under ``robogen/``.

Layer order (a module may import its own layer and the layers below it, never above):

====  =================  =====================================================================
tier  layer              modules
====  =================  =====================================================================
0     foundation         ``errors``, ``types``, ``registry``, ``_atomic``, ``_cores``, ``_gl``,
                         ``_console`` and ``progress`` (terminal output helpers that import
                         nothing above),
                         ``serialization`` (records <-> JSON data, Parquet schemas),
                         ``plugins`` (importing plug-in modules and entry points),
                         ``options`` (command-line options declared on config fields)
1     stats              ``stats/``: the estimators (intervals, paired tests, anytime-valid
                         sequences, stop rules, sequential planning, sweeps); pure functions
                         of outcome arrays, no run and no file I/O
2     envs               ``envs/``
3     perturbations      ``perturbations/``
4     policies           ``policies/``
5     configs            ``configs.py`` (validates env ids, axes and policy schemes against
                         the registries below it)
6     rollout            ``rollout/``: plans, runs and stores episodes (the stop rule of
                         ``--episodes auto`` comes from ``stats/``)
6b    batched            ``batched/`` (N worlds of one scene on MuJoCo Warp; may use rollout's
                         plan and store, never reports)
7     reports            ``reports/``: builds and writes reports from stored episodes
8     runs               ``runs/``: an evaluation end to end (``evaluate``, ``resume``,
                         ``rebuild_report``, several policies, failure videos) on top of
                         ``rollout/runner.py`` (runs and stores episodes) and ``reports/``
9     applications       ``check/``, ``scaling/``, ``serve.py`` (policy server; uses the
                         rollout worker's env factory) and ``preview.py`` (contact sheets);
                         peers: none imports another
10    testing            ``testing.py`` (helpers for users' tests; builds on ``check``)
11    cli                ``cli.py`` and the ``robogen`` package itself (lazy re-exports)
====  =================  =====================================================================

Imports under ``if TYPE_CHECKING:`` count for the layer order (an annotation that names
an upper layer is a dependency too) but not for cycles. Only the Ray backend's modules
(``rollout/ray_backend.py``, ``ray_cluster.py``, ``ray_actor.py``) import ``ray``; only
``batched/`` imports ``warp`` and ``mujoco_warp``. Cross-package imports of private
(``_name``) attributes are not allowed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import robogen

PKG = Path(robogen.__file__).parent

LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({"errors", "types", "registry", "_atomic", "_cores", "_gl", "_console",
                              "progress", "serialization", "plugins", "options"})),
    ("stats", frozenset({"stats"})),
    ("envs", frozenset({"envs"})),
    ("perturbations", frozenset({"perturbations"})),
    ("policies", frozenset({"policies"})),
    ("configs", frozenset({"configs"})),
    ("rollout", frozenset({"rollout"})),
    ("batched", frozenset({"batched"})),
    ("reports", frozenset({"reports"})),
    ("runs", frozenset({"runs"})),
    ("applications", frozenset({"check", "scaling", "serve", "preview"})),
    ("testing", frozenset({"testing"})),
    ("cli", frozenset({"cli", ""})),  # "" is the robogen package's own __init__
)
"""Layers, lowest first; each lists top-level units (subpackage or module under robogen/)."""

SHARED_TIERS = frozenset({"foundation"})
"""Layers whose units may import each other (the others' units are peers that may not)."""

ROOT_NAMES = frozenset({"__version__"})
"""Names any module may import from the ``robogen`` package itself."""

RAY_MODULES = frozenset({"robogen.rollout.ray_backend", "robogen.rollout.ray_cluster",
                         "robogen.rollout.ray_actor"})

KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()
"""(importer, imported) pairs tolerated while they exist; none is required to exist, so
removing one never fails this test (delete its line then)."""


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    names: tuple[str, ...]
    line: int
    type_only: bool


def _module_name(path: Path) -> str:
    parts = ("robogen", *path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PKG / rel).with_suffix(".py").is_file() or (PKG / rel / "__init__.py").is_file()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                ids.update(id(n) for n in ast.walk(child))
    return ids


def _imports() -> Iterator[Import]:
    for path in sorted(PKG.rglob("*.py")):
        mod = _module_name(path)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        type_only = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(mod, alias.name, (), node.lineno, id(node) in type_only)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                names = tuple(a.name for a in node.names)
                if target.startswith("robogen"):  # `from pkg import submodule` -> submodule
                    subs = [n for n in names if _is_module(f"{target}.{n}")]
                    for n in subs:
                        yield Import(mod, f"{target}.{n}", (), node.lineno, id(node) in type_only)
                    names = tuple(n for n in names if n not in subs)
                    if not names and subs:
                        continue
                yield Import(mod, target, names, node.lineno, id(node) in type_only)


IMPORTS = tuple(_imports())
INTERNAL = tuple(i for i in IMPORTS if i.target == "robogen" or i.target.startswith("robogen."))


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _tier(module: str) -> int:
    unit = _unit(module)
    for k, (_, units) in enumerate(LAYERS):
        if unit in units:
            return k
    raise AssertionError(f"{module} is in no layer; add {unit!r} to LAYERS in {__file__}")


def _where(i: Import) -> str:
    return f"{i.importer} (line {i.line}) imports {i.target}"


def test_every_module_has_a_layer() -> None:
    for path in PKG.rglob("*.py"):
        _tier(_module_name(path))


def test_layer_order() -> None:
    bad = []
    for i in INTERNAL:
        if i.target == "robogen":
            if i.importer != "robogen" and not set(i.names) <= ROOT_NAMES:
                bad.append(f"{_where(i)} {i.names}: only {sorted(ROOT_NAMES)} may come from "
                           "the package root")
            continue
        if (i.importer, i.target) in KNOWN_EXCEPTIONS:
            continue
        src, dst = _tier(i.importer), _tier(i.target)
        same_unit = _unit(i.importer) == _unit(i.target)
        if dst > src:
            bad.append(f"{_where(i)}: {LAYERS[src][0]} may not import {LAYERS[dst][0]}")
        elif dst == src and not same_unit and LAYERS[src][0] not in SHARED_TIERS:
            bad.append(f"{_where(i)}: peers in layer {LAYERS[src][0]} may not import each other")
    assert not bad, "layering violations:\n" + "\n".join(bad)


def test_only_the_ray_backend_imports_ray() -> None:
    bad = [_where(i) for i in IMPORTS
           if i.target.split(".")[0] == "ray" and i.importer not in RAY_MODULES
           and (i.importer, "ray") not in KNOWN_EXCEPTIONS]
    assert not bad, "ray outside the Ray backend (rollout/ray_*.py):\n" + "\n".join(bad)


def test_only_the_batched_package_imports_warp() -> None:
    bad = [_where(i) for i in IMPORTS
           if i.target.split(".")[0] in ("warp", "mujoco_warp")
           and not i.importer.startswith("robogen.batched")]
    assert not bad, "warp outside robogen/batched/:\n" + "\n".join(bad)


def test_no_private_names_across_packages() -> None:
    bad = []
    for i in INTERNAL:
        if (i.target == "robogen" or _unit(i.importer) == _unit(i.target)
                or (i.importer, i.target) in KNOWN_EXCEPTIONS):
            continue
        private = [n for n in i.names if n.startswith("_") and not n.startswith("__")]
        if private or any(p.startswith("_") for p in i.target.split(".")[2:]):
            bad.append(f"{_where(i)} private {private or i.target}")
    assert not bad, "private names imported across packages:\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {}
    for i in INTERNAL:
        if (not i.type_only and i.target not in (i.importer, "robogen")
                and (i.importer, i.target) not in KNOWN_EXCEPTIONS):
            # importing a package's own submodule from its __init__ is not a cycle
            if i.target.startswith(i.importer + "."):
                continue
            graph.setdefault(i.importer, set()).add(i.target)
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("bad_import, expected", [
    (Import("robogen.envs.x", "robogen.policies.base", ("OBS",), 1, False), "envs may not"),
    (Import("robogen.check.x", "robogen.scaling.bc", ("BCConfig",), 1, False), "peers"),
    # the pair issue 7 removed last: rollout runs and stores episodes, reports/ builds on it
    (Import("robogen.rollout.runner", "robogen.reports", ("build_report",), 1, True),
     "rollout may not import reports"),
    (Import("robogen.stats.sweep", "robogen.rollout.store", ("ResultStore",), 1, False),
     "stats may not import rollout"),
    (Import("robogen.reports.writers", "robogen.runs.evaluation", ("evaluate",), 1, True),
     "reports may not import runs"),
])
def test_checker_catches_violations(bad_import: Import, expected: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above can fail: a planted up-import and a peer import are reported."""
    monkeypatch.setattr(f"{__name__}.INTERNAL", (*INTERNAL, bad_import))
    with pytest.raises(AssertionError, match=expected):
        test_layer_order()


def test_cycle_check_catches_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted writers <-> plots cycle (the one issue 7 removed) is reported."""
    back = Import("robogen.reports.plots", "robogen.reports.writers", ("x",), 1, False)
    forth = Import("robogen.reports.writers", "robogen.reports.plots", ("y",), 1, False)
    monkeypatch.setattr(f"{__name__}.INTERNAL", (*INTERNAL, back, forth))
    with pytest.raises(AssertionError, match="reports.plots -> robogen.reports.writers"):
        test_no_import_cycles()
