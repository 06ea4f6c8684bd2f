from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from robogen.progress import ProgressBars, fit_label

LONG = "gymnasium/Reacher-v5 / sb3:/home/someone/robogen/assets/checkpoints/ppo_reacher.zip"


def _terminal(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, force_terminal=True, color_system=None), out


def _lines(out: io.StringIO) -> list[str]:
    """Rendered lines with rich's cursor control codes removed."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    return [ln for ln in re.split(r"[\r\n]", text) if ln.strip()]


def test_bars_per_stage_show_done_of_total_and_unit():
    console, out = _terminal(120)
    with ProgressBars({"train": "steps"}, console=console) as bars:
        bars.stage("collect")(2, 4)
        bars("train", 30, 100)
        bars.stage("collect")(4, 4)
    text = "\n".join(_lines(out))
    assert "collect (episodes)" in text and "4/4" in text
    assert "train (steps)" in text and "30/100" in text


def test_nothing_is_drawn_without_updates():
    for console in (Console(file=io.StringIO()), _terminal(80)[0]):
        with ProgressBars(console=console):
            pass
        assert console.file.getvalue() == ""


@pytest.mark.parametrize("width", [80, 60, 120])
def test_terminal_bar_keeps_counts_and_eta_whole_at_any_width(width):
    console, out = _terminal(width)
    with ProgressBars(console=console) as bars:
        bars(LONG, 0, 3600)
        bars(LONG, 1360, 3600)
    last = _lines(out)[-1]
    assert len(last) <= width
    # counts and ETA columns are never cut; only the label may carry an ellipsis
    assert re.search(r" 1360/3600 (\d+:\d\d:\d\d )?ETA (-:--:--|\d+:\d\d:\d\d)$", last), last
    assert "…" not in last.split("━")[-1]
    if width >= 80:  # room enough for the readable short label, no ellipsis at all
        assert "Reacher-v5 / sb3:ppo_reacher.zip (episodes)" in last, last
        assert "…" not in last


def test_plain_lines_when_not_a_terminal_fit_80_columns():
    out = io.StringIO()
    console = Console(file=out, width=80)  # a StringIO is not a terminal: a pipe, a CI log
    with ProgressBars(console=console) as bars:
        for done in range(0, 3601, 90):
            bars(LONG, done, 3600)
    lines = out.getvalue().splitlines()
    # first update, every tenth, the end: 11 lines, not one per update (41)
    assert len(lines) == 11, lines
    assert lines[0].startswith("Reacher-v5 / sb3:ppo_reacher.zip: 0/3600 episodes in 0:00:0")
    assert re.search(r": 1440/3600 episodes in \d+:\d\d:\d\d, ETA (-:--:--|\d+:\d\d:\d\d)$",
                     lines[4]), lines[4]
    assert re.search(r": 3600/3600 episodes in \d+:\d\d:\d\d, done$", lines[-1]), lines[-1]
    assert all(len(ln) <= 80 and "…" not in ln for ln in lines)


def test_plain_lines_also_every_interval_and_the_last_state_of_an_unfinished_stage():
    out = io.StringIO()
    with ProgressBars(console=Console(file=out, width=80), log_interval_s=0.0) as bars:
        for done in (0, 1, 2, 3):
            bars("collect", done, 1000)
    assert [ln.split(": ")[1].split(" in ")[0] for ln in out.getvalue().splitlines()] == [
        "0/1000 episodes", "1/1000 episodes", "2/1000 episodes", "3/1000 episodes"]
    out = io.StringIO()
    with ProgressBars(console=Console(file=out, width=80)) as bars:
        bars("collect", 0, 1000)
        bars("collect", 7, 1000)  # not a tenth, not 30 s later: shown when the stage ends
    assert out.getvalue().splitlines()[-1].startswith("collect: 7/1000 episodes in ")


def test_a_label_with_markup_like_text_is_shown_as_is():
    console, out = _terminal(100)
    with ProgressBars(console=console) as bars:
        bars("python:pol[bold].py:make", 1, 2)
    assert "python:pol[bold].py:make (episodes)" in "\n".join(_lines(out))


def test_fit_label_shortens_in_readable_steps():
    assert fit_label(LONG, "episodes", 200) == LONG + " (episodes)"
    assert fit_label(LONG, "episodes", 55) == (
        "gymnasium/Reacher-v5 / sb3:ppo_reacher.zip (episodes)")
    assert fit_label(LONG, "episodes", 45) == "Reacher-v5 / sb3:ppo_reacher.zip (episodes)"
    short = fit_label(LONG, "episodes", 30)
    assert len(short) == 30 and short.endswith("… (episodes)") is False
    assert short.endswith(" (episodes)") and "…" in short
    name = "robogen/PickPlace-v0 / python:/home/someone/projects/very/long/path/policies.py:make"
    assert fit_label(name, "", 50) == "robogen/PickPlace-v0 / python:policies.py:make"
    assert fit_label("python:pkg.mod:factory", "", 40) == "python:pkg.mod:factory"
    assert len(fit_label(LONG, "episodes", 5)) <= 5


def test_eta_is_the_stages_average_rate_not_the_last_two_updates(monkeypatch):
    """Two workers' units often end together: 16 episodes reported 0.1 s apart after 4 s
    are 4 episodes per second, so 96 left take 24 s (rich's own estimate said ~1 s)."""
    import robogen.progress as progress

    now = [0.0]
    out = io.StringIO()
    bars = ProgressBars(console=Console(file=out, width=80), log_interval_s=0.0)
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    with bars:
        bars._start()
        bars._p.get_time = lambda: now[0]  # rich's clock
        bars("eval", 0, 112)
        now[0] = 3.9
        bars("eval", 8, 112)
        now[0] = 4.0
        bars("eval", 16, 112)
    task = bars._task(bars._tasks["eval"])
    assert progress.eta_s(task) == pytest.approx(4.0 * 96 / 16)
    assert out.getvalue().splitlines()[-1] == "eval: 16/112 episodes in 0:00:04, ETA 0:00:24"
    # a resumed stage counts only what it did itself
    task.fields["start_done"] = 8
    assert progress.eta_s(task) == pytest.approx(4.0 * 96 / 8)


def _wait_for(out: io.StringIO, text: str, guard_s: float = 30.0) -> str:
    """The output once it holds ``text`` (polls; the guard only keeps a broken heartbeat from
    hanging the suite)."""
    import time

    end = time.monotonic() + guard_s
    while text not in out.getvalue():
        assert time.monotonic() < end, out.getvalue()
        time.sleep(0.01)
    return out.getvalue()


def test_a_quiet_phase_gets_heartbeat_lines_then_stages_report_again():
    out = io.StringIO()
    console = Console(file=out, width=100)
    with ProgressBars({"fit": "curves"}, console=console, log_interval_s=0.05) as bars:
        bars.phase("fitting 2 scaling curves ...")
        _wait_for(out, "still working")
        bars.stage("fit", then="writing curves.json ...")(0, 2)
        _wait_for(out, "fit: 0/2 curves in 0:00:00, ETA -:--:--\nfit: 0/2")  # heartbeat repeats
        bars("fit", 2, 2)
    lines = out.getvalue().splitlines()
    assert lines[0] == "fitting 2 scaling curves ..."
    assert re.fullmatch(r"fitting 2 scaling curves: still working, 0:00:0\d elapsed", lines[1])
    k = lines.index("writing curves.json ...")
    assert lines[k - 1].startswith("fit: 2/2 curves in ") and lines[k - 1].endswith(", done")
    assert all(not ln.startswith("fit: 0/2") for ln in lines[k:])


def test_live_bars_print_phases_above_them():
    console, out = _terminal(120)
    with ProgressBars(console=console) as bars:
        bars.phase("starting 2 Ray workers ...")
        bars.stage("run")(1, 2)
    text = "\n".join(_lines(out))
    assert text.index("starting 2 Ray workers ...") < text.index("run (episodes)")


def test_start_and_report_lines_name_what_is_starting():
    from robogen.progress import report_line, start_line

    assert start_line("robogen/Reach-v0", ["expert:reach"], 8, "ray", 2) == (
        "evaluating expert:reach on robogen/Reach-v0 (8 episodes per condition): starting 2 Ray "
        "workers, each loading the env and the policy ...")
    assert start_line("robogen/Push-v0", ["sb3:/a/b/ppo.zip", "expert:push"], "auto", "ray",
                      None) == (
        "evaluating 2 policies on robogen/Push-v0 (auto episodes per condition): starting Ray "
        "workers (one per free CPU), each loading the env and the policy ...")
    assert report_line(0) == "writing the report (statistics, plots) ..."
