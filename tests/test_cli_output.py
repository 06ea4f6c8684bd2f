"""What ``robogen eval`` prints, read as a person reads it: through a pipe at 80 columns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "robogen" / "assets" / "checkpoints"
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # CLI by fork+exec


@pytest.fixture(scope="module")
def piped_eval(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-output") / "run"
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "robogen.cli", "eval", "--env", "gymnasium/Reacher-v5",
         "--policy", f"sb3:{CKPT / 'ppo_reacher.zip'}",
         "--vecnormalize", str(CKPT / "ppo_reacher_vecnormalize.pkl"),
         "--axes", "lighting,object_pose,physics", "--severities", "1", "--episodes", "12",
         "--seed", "0", "--backend", "serial", "--videos", "1", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads((out / "report.json").read_text()), out


def test_progress_counts_and_eta_are_whole_in_a_pipe(piped_eval):
    stdout, _, _ = piped_eval
    progress = [ln for ln in stdout.splitlines() if re.search(r": \d+/\d+ episodes in ", ln)]
    assert progress, stdout
    assert re.search(r": 0/60 episodes in \d+:\d\d:\d\d, ETA (-:--:--|\d+:\d\d:\d\d)$",
                     progress[0]), progress[0]
    assert re.search(r": 60/60 episodes in \d+:\d\d:\d\d, done$", progress[-1]), progress[-1]
    for ln in progress:
        assert len(ln) <= 80 and "…" not in ln, ln
        assert ln.startswith("Reacher-v5 / sb3:ppo_reacher.zip: "), ln


def test_each_phase_is_announced_in_order(piped_eval):
    """A line before any import-heavy work, one as the episodes start, the progress lines,
    one when the report is being written, then the outcome."""
    stdout, _, _ = piped_eval
    lines = stdout.splitlines()
    assert lines[0] == "robogen eval: checking gymnasium/Reacher-v5 / sb3:ppo_reacher.zip ..."
    progress = [k for k, ln in enumerate(lines) if re.search(r": \d+/60 episodes in ", ln)]
    assert " ".join(ln.strip() for ln in lines[1:progress[0]]) == (  # prose, wrapped at 80
        "evaluating sb3:ppo_reacher.zip on gymnasium/Reacher-v5 (12 episodes per condition): "
        "loading the env and the policy in this process (serial backend) ...")
    writing = lines.index("writing the report (statistics, plots, up to 1 failure video per "
                          "axis) ...")
    done = next(k for k, ln in enumerate(lines) if ln.startswith("done: 60 episodes in "))
    assert 1 < progress[0] < progress[-1] < writing < done
    assert lines[writing - 1].endswith("60/60 episodes in " + lines[writing - 1][-13:])


def test_summary_table_hardest_axis_first_then_report_paths(piped_eval):
    stdout, report, out = piped_eval
    lines = stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines), [ln for ln in lines if len(ln) > 80]
    assert "### robogen report" not in stdout and "|---|" not in stdout  # no raw markdown
    head = next(i for i, ln in enumerate(lines)  # the table's header, not the start line's prose
                if ln.lstrip().startswith("condition") and "):" not in ln)
    assert "gap [95% CI]" in lines[head] and " n " in lines[head] and "status" in lines[head]
    rows = [ln.split() for ln in lines[head + 2:] if re.match(r"\S+@", ln)]
    hardest = report["difficulty_order"][0]
    assert hardest == "physics"  # the shipped PPO policy loses most to physics (pinned)
    assert rows[0][0] == f"{hardest}@1", rows
    g = next(x for x in report["gaps"] if x["axis"] == hardest)
    assert rows[0][1:4] == [f"{g['gap']:+.2f}", f"[{g['ci_low']:+.2f},", f"{g['ci_high']:+.2f}]"]
    assert rows[0][4] == str(g["n_pairs"])
    lighting = next(r for r in rows if r[0] == "lighting@1")
    assert lighting[-2:] == ["not", "observed"]
    assert [r[0] for r in rows][-1] == "combined@1"
    nominal = next(c for c in report["conditions"] if c["condition"] == "nominal")
    assert (f"nominal success {nominal['success_rate']:.2f} [{nominal['ci_low']:.2f}, "
            f"{nominal['ci_high']:.2f}] over 12 episodes") in stdout
    # the report paths come last, html first
    tail = [ln.strip() for ln in lines if ln.strip()][-3:]
    assert tail == [f"report.{k}: {out / f'report.{k}'}" for k in ("html", "md", "json")]


def test_run_records_actions_reward_policy_load_and_video_layout(piped_eval):
    import imageio.v2 as iio

    _, _, out = piped_eval
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["deterministic_actions"] is True
    assert manifest["reward_source"] == "raw env reward"
    assert manifest["policy_load"]["replaced"] == ["learning_rate", "lr_schedule", "clip_range"]
    assert manifest["policy_load"]["saved_versions"]["Stable-Baselines3"] == "2.9.2"
    md = (out / "report.md").read_text()
    assert "actions deterministic · return: raw env reward" in md
    assert ("loading the checkpoint replaced its training-only entries learning_rate, "
            "lr_schedule, clip_range") in md
    videos = sorted((out / "videos").glob("*.mp4"))
    assert videos
    for video in videos:
        info = json.loads(video.with_suffix(".json").read_text())
        reader = iio.get_reader(video)
        frame = reader.get_data(0)
        reader.close()
        assert list(frame.shape[:2]) == info["padded_size"]
        assert info["render_sizes"] == [[128, 128], [128, 128]] and info["scale"] == 2
        assert f"rendered 128x128 px, x2, {info['size'][0]}x{info['size'][1]} padded" in md


def test_a_checkpoint_saved_under_other_versions_gets_one_terminal_line(tmp_path):
    """The shipped PPO zip with its system_info.txt rewritten to another Python and torch:
    the run goes on, and the terminal says so once, in one ``warning:`` line."""
    import zipfile

    ckpt = tmp_path / "older.zip"
    with zipfile.ZipFile(CKPT / "ppo_reacher.zip") as src, \
            zipfile.ZipFile(ckpt, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "system_info.txt":
                data = (data.decode().replace("Python: 3.", "Python: 2.")
                        .replace("PyTorch: ", "PyTorch: 1.0.0-was-")).encode()
            dst.writestr(item, data)
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "robogen.cli", "eval", "--env", "gymnasium/Reacher-v5",
         "--policy", f"sb3:{ckpt}", "--vecnormalize", str(CKPT / "ppo_reacher_vecnormalize.pkl"),
         "--axes", "physics", "--severities", "1", "--episodes", "2", "--max-steps", "5",
         "--backend", "serial", "--videos", "0", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if "was saved with" in x]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: policy sb3:{ckpt} was saved with Python 2.")
    assert "PyTorch 1.0.0-was-" in lines[0] and "this run uses Python 3." in lines[0]
