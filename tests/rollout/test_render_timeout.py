"""A frame the render thread does not deliver ends its episode as ``infra_timeout``; the
rollout never waits on it forever (issue 8 §2)."""

from __future__ import annotations

import json
import threading

import pytest

from robogen.configs import load_eval_config
from robogen.envs import render, render_frames
from robogen.envs.render import FRAME_TIMED_OUT, PendingFrame, RenderTimeoutError
from robogen.errors import InfrastructureError
from robogen.rollout.store import ResultStore
from robogen.runs.evaluation import evaluate


def test_a_pending_frame_that_never_comes_raises_after_its_timeout():
    frame = PendingFrame(render.RenderTask(lambda: None, ()))  # never queued: never drawn
    with pytest.raises(RenderTimeoutError) as e:
        frame.result(timeout=0.05)
    assert isinstance(e.value, InfrastructureError) and isinstance(e.value, TimeoutError)
    assert str(e.value).startswith(FRAME_TIMED_OUT.split("{")[0])
    assert "0.05 s" in str(e.value)


def test_a_stuck_frame_ends_its_episode_as_infra_timeout(tmp_path, monkeypatch):
    """The 5th frame drawn (a step of nominal episode 0) hangs until its wait timed out."""
    release = threading.Event()
    calls = []
    draw, timed_out = render._draw, render_frames._timed_out

    def slow_draw(*args):  # noqa: ANN002, ANN202
        calls.append(1)
        if len(calls) == 5:
            assert release.wait(60), "the rollout never gave up on the stuck frame"
        return draw(*args)

    def note_timeout(timeout):  # noqa: ANN001, ANN202
        release.set()  # the stuck frame ends only after its waiter gave up
        return timed_out(timeout)

    monkeypatch.setattr(render, "_draw", slow_draw)
    monkeypatch.setattr(render_frames, "_timed_out", note_timeout)
    monkeypatch.setattr(render, "FRAME_TIMEOUT_S", 1.0)
    monkeypatch.setattr(render_frames, "FRAME_TIMEOUT_S", 1.0)
    cfg = load_eval_config(None, env="robogen/Reach-v0", policy="random:0", obs_mode="pixels",
                           axes=["physics"], severities=[1.0], combined=False, episodes=2,
                           batch_size=1, seed=0, max_steps=10, videos=0, backend="serial",
                           out=tmp_path / "r")
    out = evaluate(cfg)
    results = ResultStore.open(out.run_dir).load_results()
    stuck = [r for r in results if r.cause == "infra_timeout"]
    assert [(r.condition, r.episode_index) for r in stuck] == [("nominal", 0)]
    assert "no frame from the render thread after 1 s" in stuck[0].error
    assert 0 < stuck[0].length_steps < 10 and not stuck[0].success  # ended at the frame
    assert all(r.length_steps == 10 for r in results if r.cause != "infra_timeout")
    report = json.loads((out.run_dir / "report.json").read_text())
    nominal = next(c for c in report["conditions"] if c["condition"] == "nominal")
    assert nominal["n"] == 1 and nominal["n_invalid"] == 1
