"""House rules read from the source under ``robogen/``: module sizes (STYLE.md section 1).

Modules aim at <= 400 lines and are split before 600. ``TOO_LONG`` names the modules still over
the limit; the list may only shrink: a module on it that is split (or falls under the limit)
fails :func:`test_the_allow_list_only_names_modules_still_too_long` until its line is deleted,
and no module may join it.
"""

from __future__ import annotations

from pathlib import Path

import robogen

PKG = Path(robogen.__file__).parent
MAX_LINES = 600

TOO_LONG: dict[str, int] = {
    # module (relative to robogen/): its length when listed; split them, never add one
    "envs/tabletop.py": 668,
    "policies/sb3.py": 622,
    "reports/writers.py": 602,
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

