from __future__ import annotations

import io

from rich.console import Console

from robogen.progress import ProgressBars


def test_bars_per_stage_show_done_of_total_and_unit():
    out = io.StringIO()
    with ProgressBars({"train": "steps"}, console=Console(file=out, width=120)) as bars:
        bars.stage("collect")(2, 4)
        bars("train", 30, 100)
        bars.stage("collect")(4, 4)
    text = out.getvalue()
    assert "collect (episodes)" in text and "4/4" in text
    assert "train (steps)" in text and "30/100" in text


def test_nothing_is_drawn_without_updates():
    out = io.StringIO()
    with ProgressBars(console=Console(file=out)):
        pass
    assert out.getvalue() == ""


def test_long_stage_names_keep_both_ends_and_the_counts_fit():
    out = io.StringIO()
    name = "robogen/PickPlace-v0 / python:/home/someone/projects/very/long/path/policies.py:make"
    with ProgressBars(console=Console(file=out, width=100)) as bars:
        bars(name, 3, 8)
    text = out.getvalue()
    assert "robogen/PickPlace" in text and "policies.py:make" in text and "…" in text
    assert "3/8" in text and "ETA" in text
