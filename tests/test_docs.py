"""The README and the documentation site (issue 38).

README.md stays a five-minute read (at most 250 lines); neither it nor the site's pages
(docs/**/*.md; docs/dev/ holds no user documentation and is left out of the site) speak of
dates, of how robogen was built (sessions, numbered stages, commit hashes) or of the machines
it was measured on (CPU and GPU models). The reference pages under docs/reference/ are what
scripts/gen_docs.py writes from the code now, so they cannot drift from the CLI and the
registries; and the site builds with ``mkdocs build --strict`` (no warning: no broken link or
anchor, no page left out of the navigation).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from robogen.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md")
                         if p.relative_to(DOCS).parts[0] != "dev")]
MAX_README_LINES = 250

DATE = re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")
HISTORY = re.compile(r"\bsessions?\b|\bstages? \d|\bcommit [0-9a-f]{7,40}\b", re.I)
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")  # a commit hash: hex digits with digits and letters
MACHINE = re.compile(r"\b(?:EPYC|AVX\w*|Xeon|Ryzen|Threadripper|Core i[3579]|Apple M[1-4]|"
                     r"[AHV]100|H200|B200|RTX ?\d{4}|GeForce|Graviton)\b", re.I)


def _findings(text: str) -> list[str]:
    """What a page must not say: dates, development history, machine models."""
    found = [m.group() for p in (DATE, HISTORY, MACHINE) for m in p.finditer(text)]
    found += [h for h in HEX.findall(text) if re.search(r"\d", h) and re.search(r"[a-f]", h)]
    return found


def test_the_readme_is_at_most_250_lines() -> None:
    n = len(README.read_text().splitlines())
    assert n <= MAX_README_LINES, (
        f"README.md has {n} lines, more than {MAX_README_LINES}: move the detail to a guide "
        "under docs/ and link it")


def test_the_checks_catch_what_they_are_for() -> None:
    said = ("measured 2026-12-04 on an AVX-512 EPYC; the eleventh session; stage 3; "
            "before 826099e; an H200; a Xeon")
    assert _findings(said) == ["2026-12-04", "session", "stage 3", "AVX", "EPYC", "H200",
                               "Xeon", "826099e"]
    assert _findings("Waudby-Smith & Ramdas (2024), 5 sessions' worth") == ["sessions"]
    assert _findings("robogen/PickPlace-v0, seed 0, 1000 episodes, abcdefab, 1234567") == []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_a_page_names_no_date_history_or_machine(page: Path) -> None:
    assert _findings(page.read_text()) == [], (
        f"{page.relative_to(ROOT)} speaks of dates, how robogen was built or the machines it "
        "ran on; the docs describe the product as it is (measured numbers go to "
        "docs/benchmarks.md with the command that measured them)")


def test_the_readme_links_resolve() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/index.md" in local and "docs/preview.png" in local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


def test_the_reference_pages_equal_what_the_generator_writes_now() -> None:
    # in a fresh process: plug-ins other tests register must not enter the pages
    r = subprocess.run([sys.executable, "scripts/gen_docs.py", "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_the_cli_reference_documents_every_command_and_option() -> None:
    group = typer.main.get_command(app)
    ctx = group.make_context("robogen", [], resilient_parsing=True)
    text = (DOCS / "reference" / "cli.md").read_text()
    headings = re.findall(r"^## `robogen (\S+)`$", text, re.M)
    names = [n for n in group.list_commands(ctx) if not group.get_command(ctx, n).hidden]
    assert headings == names and {"eval", "check", "scale", "plan", "serve"} <= set(names)
    sections = dict(zip(headings, re.split(r"^## `robogen \S+`$", text, flags=re.M)[1:],
                        strict=True))
    for name in names:
        for param in group.get_command(ctx, name).params:
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in sections[name], (name, param.opts[0])


def test_the_site_builds_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                        "--site-dir", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    built = tmp_path / "site"
    for page in ("index.html", "reference/cli/index.html", "benchmarks/index.html",
                 "evaluate/index.html"):
        assert (built / page).is_file(), page
    api = (built / "reference" / "api" / "index.html").read_text()
    assert 'id="robogen.types.EpisodeResult"' in api  # the docstrings were rendered
    assert not (built / "dev").exists()  # docs/dev/ is not part of the site
