"""Tests of robogen.reports writers, plots and videos."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import imageio.v2 as iio2
import imageio.v3 as iio3
import numpy as np
import pytest

from robogen.errors import InvalidSpecError, RunDirError
from robogen.perturbations.base import AXES
from robogen.reports import Report, build_report, load_report, write_report
from robogen.reports.colors import AXIS_COLORS, COMBINED_COLOR, PALETTE, axis_color
from robogen.reports.plot_worker import PlotWorker, draw_in_process
from robogen.reports.plots import condition_chart_png, gap_chart_png
from robogen.reports.video import (
    VideoInfo,
    grid_size,
    poster_jpeg,
    read_video_info,
    write_grid_png,
    write_side_by_side,
)
from robogen.types import AxisLevel, Condition, EpisodeResult, EvalManifest, RenderSettings

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ENV = "gymnasium/Hopper-v5"
N = 16


def _result(c: Condition, i: int, ok: bool, changed: tuple[str, ...]) -> EpisodeResult:
    return EpisodeResult(
        env_id=ENV,
        policy_id="sb3:hopper.zip",
        condition=c.name,
        axes=c.axes,
        severity=c.severity,
        split=c.split,
        episode_index=i,
        seed=i,
        episode_return=100.0 * ok,
        length_steps=1000 if ok else 300,
        success=ok,
        cause=None if ok else "terminated",
        error=None,
        perturbations_json="[]",
        changed_axes=changed,
        wall_time_s=0.5,
        unit_id=0,
    )


@pytest.fixture(scope="module")
def report() -> Report:
    conds = [
        Condition("nominal"),
        Condition("physics@1", (AxisLevel("physics", 1.0),)),
        Condition("texture@1", (AxisLevel("texture", 1.0),)),
        Condition("distractors@1", (AxisLevel("distractors", 1.0),)),
        Condition(
            "combined@1", tuple(AxisLevel(a, 1.0) for a in ("physics", "texture", "distractors"))
        ),
    ]
    manifest = EvalManifest(
        schema_version=1,
        env_id=ENV,
        policy="sb3:hopper.zip",
        vecnormalize=None,
        obs_mode="state",
        axes=("physics", "texture", "distractors"),
        severities=(1.0,),
        splits=(),
        combined=True,
        n_episodes=N,
        seed=0,
        max_steps=1000,
        batch_size=8,
        success_threshold=900.0,
        conditions=tuple(conds),
        render=RenderSettings(),
        versions={"robogen": "0.1.0"},
        spec_hash="cd" * 32,
    )
    rate = {"nominal": 14, "physics@1": 6, "texture@1": 13, "distractors@1": 14, "combined@1": 5}
    changed = {
        "nominal": (),
        "physics@1": ("physics",),
        "texture@1": ("texture",),
        "distractors@1": (),
        "combined@1": ("physics", "texture"),
    }
    results = [_result(c, i, i < rate[c.name], changed[c.name]) for c in conds for i in range(N)]
    kinds = {"physics": "physical", "texture": "visual", "distractors": "visual"}
    return build_report(results, manifest, axis_kinds=kinds, n_boot=1000, created="2026-01-01")


def test_write_report_files_and_round_trip(report: Report, tmp_path: Path) -> None:
    paths = write_report(report, tmp_path)
    assert {"json", "md", "html", "plot_gaps", "plot_severity", "plot_conditions"} <= set(paths)
    for p in paths.values():
        assert p.is_file() and p.stat().st_size > 0
    assert sorted(q.name for q in tmp_path.iterdir()) == [
        "plots",
        "report.html",
        "report.json",
        "report.md",
    ]  # no temp files left
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["schema_version"] == 1 and data["manifest"]["env_id"] == ENV
    back = load_report(tmp_path)
    assert back.to_dict() == report.to_dict()
    assert load_report(tmp_path / "report.json").to_dict() == report.to_dict()
    assert (tmp_path / "plots" / "gaps.png").read_bytes().startswith(PNG_MAGIC)


def test_markdown_has_gap_table(report: Report, tmp_path: Path) -> None:
    md = write_report(report, tmp_path, plots=False)["md"].read_text()
    # 8 discordant pairs: the Agresti-Min interval, named in the header
    assert ("| axis | level | gap [95% CI, Agresti-Min] | rel. drop | n10 / n01 | pairs "
            "| status |") in md
    lines = md.splitlines()
    physics = next(x for x in lines if x.startswith("| physics |"))
    assert "+0.50 [" in physics and "| 8 / 0 | 16 |" in physics
    distractors = next(x for x in lines if x.startswith("| distractors |"))
    assert "n/a" in distractors and "not applied" in distractors and "0.00" not in distractors
    texture = next(x for x in lines if x.startswith("| texture |"))
    assert "not observed by this policy" in texture
    assert "**Difficulty (hardest first):** physics\n" in md  # texture: not observed
    assert "terminated 2" in md  # failure causes of the nominal condition
    assert len(md) < 65536  # GitHub's comment size limit
    assert not (tmp_path / "plots").exists()


def test_every_interval_names_its_method(report: Report, tmp_path: Path) -> None:
    """Success rates: Wilson; gaps: the paired bootstrap in the header, and a row whose
    interval came from another method (Agresti-Min, few discordant pairs) names it."""
    import dataclasses

    gaps = [dataclasses.replace(g, ci_method="bootstrap") for g in report.gaps]
    gaps[0] = dataclasses.replace(gaps[0], ci_method="agresti-min")
    combined = tuple(dataclasses.replace(g, ci_method="bootstrap") for g in report.combined_gaps)
    other = dataclasses.replace(report, gaps=tuple(gaps), combined_gaps=combined)
    paths = write_report(other, tmp_path, plots=False)
    md, page = paths["md"].read_text(), paths["html"].read_text()
    for text in (md, page):
        assert "success [95% CI, Wilson]" in text
        assert "gap [95% CI, paired bootstrap]" in text
        assert "(Agresti-Min)" in text
    row = next(x for x in md.splitlines() if x.startswith(f"| {gaps[0].axis} |"))
    assert "(Agresti-Min)" in row
    assert "Wilson score interval" in md


def test_html_is_self_contained(report: Report, tmp_path: Path) -> None:
    (tmp_path / "videos").mkdir()
    videos = {
        "physics@1 episode 6": "videos/physics@1_ep6.mp4",
        "texture": str(tmp_path / "videos" / "texture ep 13.mp4"),
    }
    page = write_report(report, tmp_path, videos=videos)["html"].read_text()
    assert page.startswith("<!DOCTYPE html>")
    refs = re.findall(r"""(?:src|href)\s*=\s*["']?([^"' >]+)""", page, flags=re.I)
    assert refs and not [r for r in refs if re.match(r"(https?:)?//", r, flags=re.I)]
    assert "<link" not in page and "<script" not in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 3 and all(base64.b64decode(b).startswith(PNG_MAGIC) for b in images)
    assert 'href="videos/physics%401_ep6.mp4"' in page
    assert 'href="videos/texture%20ep%2013.mp4"' in page
    assert "cd" * 32 in page  # manifest embedded
    with pytest.raises(InvalidSpecError, match="URL"):
        write_report(report, tmp_path, plots=False, videos={"x": "https://example.com/a.mp4"})
    with pytest.raises(InvalidSpecError, match="outside the run dir"):
        write_report(report, tmp_path, plots=False, videos={"x": "/elsewhere/a.mp4"})


def test_load_report_errors(report: Report, tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no report.json"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text("{not json")
    with pytest.raises(RunDirError, match="not JSON"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps({**report.to_dict(), "schema_version": 0}))
    with pytest.raises(RunDirError, match="schema_version"):
        load_report(tmp_path)
    d = report.to_dict()
    del d["gaps"]
    (tmp_path / "report.json").write_text(json.dumps(d))
    with pytest.raises(RunDirError, match="gaps"):
        load_report(tmp_path)
    with pytest.raises(RunDirError, match="does not exist"):
        write_report(report, tmp_path / "missing")


def test_gap_chart_png(report: Report) -> None:
    png = gap_chart_png(report)
    img = iio3.imread(png)
    assert png.startswith(PNG_MAGIC) and img.shape[0] > 100 and img.shape[1] == 700


def _solid(t: int, color: tuple[int, int, int]) -> np.ndarray:
    frames = np.zeros((t, 84, 84, 3), dtype=np.uint8)
    frames[:] = color
    return frames


def test_side_by_side_video(tmp_path: Path) -> None:
    nominal = _solid(5, (0, 0, 255))
    nominal[-1] = (255, 255, 0)  # the last nominal frame is held while the perturbed clip runs on
    perturbed = _solid(9, (0, 255, 0))
    out = write_side_by_side(tmp_path / "pair.mp4", nominal, perturbed, fps=10, camera="top")
    assert out == tmp_path / "pair.mp4"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pair.json", "pair.mp4"]
    reader = iio2.get_reader(out)
    frames = [f for f in reader]
    reader.close()
    assert len(frames) == 9
    h, w, _ = frames[0].shape
    assert h % 16 == 0 and w % 16 == 0 and h >= 256
    # what the video records about itself is what the file holds
    info = read_video_info(out)
    assert info == VideoInfo(render_sizes=((84, 84), (84, 84)), scale=4, size=(28 + 336, 676),
                             padded_size=(h, w), fps=10.0, n_frames=9, camera="top")
    assert (h, w) == (368, 688)
    assert info.describe() == ("rendered 84x84 px, x4, 364x676 padded to 368x688, 10 fps, "
                               "camera top")
    last = frames[-1].astype(int)
    left = last[h // 2, w // 8]  # inside the nominal clip
    right = last[h // 2, w // 2 + w // 8 + 10]  # inside the perturbed clip
    assert np.abs(left - (255, 255, 0)).max() < 40 and np.abs(right - (0, 255, 0)).max() < 40
    with pytest.raises(InvalidSpecError, match="uint8"):
        write_side_by_side(tmp_path / "bad.mp4", nominal.astype(np.float32), perturbed)
    # the poster is the last frame (where the failed episode ended), as JPEG
    poster = iio3.imread(poster_jpeg(out, info.n_frames), extension=".jpg").astype(int)
    assert poster.shape == (h, w, 3)
    assert np.abs(poster[h // 2, w // 8] - (255, 255, 0)).max() < 40
    assert np.abs(poster[h // 2, w // 2 + w // 8 + 10] - (0, 255, 0)).max() < 40
    assert poster_jpeg(out) is not None and poster_jpeg(tmp_path / "missing.mp4") is None


def _has_color(png: bytes, color: str) -> bool:
    img = iio3.imread(png)[..., :3].reshape(-1, 3)
    rgb = tuple(int(color[k:k + 2], 16) for k in (1, 3, 5))
    return bool((np.abs(img.astype(int) - rgb).max(axis=1) <= 2).sum() > 50)


def test_every_figure_draws_an_axis_in_its_own_colour(report: Report) -> None:
    """physics is the same brown in every chart of every report, whatever its other axes."""
    assert len(set(AXIS_COLORS.values())) == len(AXIS_COLORS)
    assert axis_color("physics") == AXIS_COLORS["physics"] == "#8c564b"
    assert axis_color("my_plugin_axis") == axis_color("my_plugin_axis") in PALETTE
    assert axis_color("lighting+texture") == axis_color("combined") == COMBINED_COLOR
    for png in (gap_chart_png(report), condition_chart_png(report)):
        assert _has_color(png, AXIS_COLORS["physics"])
        assert not _has_color(png, AXIS_COLORS["lighting"])  # not in this report


def test_every_built_in_axis_has_a_colour_of_its_own() -> None:
    built_in = {a for a in AXES.names() if AXES.module_of(a).startswith("robogen.perturbations")}
    assert built_in <= set(AXIS_COLORS), built_in - set(AXIS_COLORS)
    assert COMBINED_COLOR not in AXIS_COLORS.values()


def test_grid_png(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(2, 3, 84, 84, 3), dtype=np.uint8)
    out = write_grid_png(
        tmp_path / "grid.png",
        images,
        ["lighting", "texture"],
        ["0", "0.5", "1"],
        title="robogen/PickPlace-v0",
    )
    img = iio3.imread(out)
    assert img.shape[:2] == grid_size(2, 3, 84, 84, title=True) == (28 * 2 + 2 * 172, 120 + 3 * 172)
    # cell (row 1, col 2) holds image [1, 2], upscaled 2x (PNG is lossless)
    y, x = 56 + 172, 120 + 2 * 172
    np.testing.assert_array_equal(img[y : y + 168 : 2, x : x + 168 : 2, :3], images[1, 2])
    with pytest.raises(InvalidSpecError, match="row labels"):
        write_grid_png(tmp_path / "g2.png", images, ["a"], ["0", "0.5", "1"])


def test_plot_worker_draws_the_in_process_bytes(report: Report) -> None:
    worker = PlotWorker(skip_if_loaded=False)
    with worker:
        assert worker.running
        images = worker.draw(report)
        assert not worker.running  # one report per helper
    assert list(images) == ["gaps", "severity", "conditions"]
    assert images == draw_in_process(report)
    assert all(v.startswith(PNG_MAGIC) for v in images.values())


def test_plot_worker_failure_falls_back_to_the_same_bytes(report: Report) -> None:
    worker = PlotWorker(skip_if_loaded=False)
    worker.start()
    proc = worker._proc  # noqa: SLF001 - kill the helper as a crash would
    assert proc is not None
    proc.kill()
    proc.wait(timeout=10)
    assert worker.draw(report) == draw_in_process(report)
    assert proc.poll() is not None


def test_plot_worker_off_switch_and_loaded_matplotlib(
    report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    draw_in_process(report)  # matplotlib is loaded in this process now
    with PlotWorker() as worker:
        assert not worker.running  # nothing to gain
    monkeypatch.setenv("ROBOGEN_PLOT_WORKER", "0")
    with PlotWorker(skip_if_loaded=False) as worker:
        assert not worker.running
        assert worker.draw(report) == draw_in_process(report)


def test_closed_plot_worker_process_ends(report: Report) -> None:
    worker = PlotWorker(skip_if_loaded=False)
    worker.start()
    proc = worker._proc  # noqa: SLF001
    assert proc is not None
    worker.close()
    assert proc.wait(timeout=10) is not None
    assert not worker.running


EVAL_WITHOUT_MATPLOTLIB = """
import sys
from robogen.configs import EvalConfig
from robogen.runs.evaluation import evaluate

cfg = EvalConfig(env="robogen/Reach-v0", policy="expert", axes=["physics"], severities=[1.0],
                 episodes=4, batch_size=4, backend="serial", videos=0, out=sys.argv[1])
outcome = evaluate(cfg)
assert "matplotlib.figure" not in sys.modules, "the evaluating process imported matplotlib"
print(" ".join(sorted(k for k in outcome.files if k.startswith("plot_"))))
"""


def test_evaluate_draws_its_figures_in_the_helper_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", EVAL_WITHOUT_MATPLOTLIB, str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["plot_conditions", "plot_gaps", "plot_severity"]
    report = load_report(out / "report.json")
    for key, name in (("gaps", "gaps.png"), ("severity", "severity.png")):
        assert (out / "plots" / name).read_bytes() == draw_in_process(report)[key]
