"""report.html and compare.html of a small real run fit a 1280 px wide window (headless Chromium).

Two policies on Reach (serial backend): the expert and a policy that misses every target once
the arm changes, so the pages have failure videos, safety tables and a ranking. Each page is
opened at 1280 px: its scroll width must equal the window's (no horizontal scroll bar) and no
element outside a scrolling box may pass the page's column. A screenshot of each page is kept
in the test's temporary directory for a person to look at.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robogen.configs import load_eval_config
from robogen.reports.compare import compare_dirs
from robogen.runs.evaluation import evaluate
from tests.reports.browser import chromium, layout, screenshot

FIXTURES = Path(__file__).resolve().parents[1] / "check" / "degraded_policies.py"
DEGRADED = f"python:{FIXTURES}:nominal_kinematics_reach"
WIDTH = 1280

pytestmark = pytest.mark.skipif(
    chromium() is None,
    reason="headless Chromium is not installed (apt-get install -y chromium; .ci/run does it)")


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layout")
    runs = []
    for name, policy in (("expert", "expert:reach"), ("degraded", DEGRADED)):
        cfg = load_eval_config(None, env="robogen/Reach-v0", policy=policy,
                               axes=["embodiment", "physics"], severities=[1.0],
                               combined=True, episodes=4, seed=0, backend="serial", videos=1,
                               safety=True, out=root / name)
        runs.append(evaluate(cfg).run_dir)
    files = compare_dirs(runs, root / "compare")
    return {"report": runs[1] / "report.html", "compare": Path(files["html"])}


@pytest.mark.parametrize("page", ["report", "compare"])
def test_page_fits_1280_px(pages, page: str) -> None:
    got = layout(pages[page], WIDTH)
    assert got["innerWidth"] == WIDTH
    assert got["scrollWidth"] == got["clientWidth"] == WIDTH, got
    assert got["overflowing"] == [], got
    png = screenshot(pages[page], pages[page].with_suffix(".png"), WIDTH, 2400)
    assert png.stat().st_size > 10_000  # a rendered page, not a blank one


def test_pages_carry_posters_folds_and_the_ranking_test(pages) -> None:
    report = pages["report"].read_text()
    videos = re.findall(r"<video [^>]*>", report)
    assert videos and all('poster="data:image/jpeg;base64,' in v for v in videos)
    assert "rows without a significant change from nominal</summary>" in report
    compare = pages["compare"].read_text()
    assert "Holm-adjusted over all" in compare and "(Holm p " in compare
    assert 'poster="data:image/jpeg;base64,' in compare
