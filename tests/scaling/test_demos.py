"""Demonstration collection: readable with pandas/pyarrow, resumable, append-safe."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from robogen.errors import InvalidSpecError, RunDirError, UnknownNameError
from robogen.scaling.demos import DemoStore, collect, demo_episode_index


def test_collect_reach_and_read_back(tmp_path):
    store = collect("robogen/Reach-v0", ["none", "texture"], 6, tmp_path / "d", batch_size=4)
    eps = store.episodes()
    assert list(eps.groupby("factor").size()) == [6, 6]
    assert eps["success"].all()  # the Reach expert succeeds in every demonstration
    # factors start from different initial states
    assert set(eps[eps.factor == "none"].seed).isdisjoint(eps[eps.factor == "texture"].seed)
    chunk = next(iter(store.chunks().values()))
    df = pd.read_feather(chunk)
    assert {"state", "pixels_png", "action", "reward", "episode_success"} <= set(df.columns)
    mm = pa.ipc.open_file(pa.memory_map(str(chunk))).read_all()  # memory-mappable
    assert mm.num_rows == len(df)
    arrays = store.load({"none": 2, "texture": 3}, pixels=True)
    n = int(
        eps[eps.factor == "none"].length.iloc[:2].sum()
        + eps[eps.factor == "texture"].length.iloc[:3].sum()
    )
    assert arrays["state"].shape == (n, 30) and arrays["action"].shape == (n, 6)
    assert arrays["pixels"].shape == (n, 84, 84, 3) and arrays["pixels"].dtype.name == "uint8"
    assert arrays["pixels"].std() > 5  # real images, not blank
    # textures on the varied factor change the images of the same step index
    assert demo_episode_index("texture", 0) != demo_episode_index("none", 0)


def test_appending_keeps_existing_chunks_and_resumes(tmp_path):
    out = tmp_path / "d"
    store = collect("robogen/Reach-v0", ["lighting"], 4, out, batch_size=2)
    before = {k: p.read_bytes() for k, p in store.chunks().items()}
    store.chunks()[("lighting", 2)].unlink()  # as if killed before the second chunk landed
    store = collect("robogen/Reach-v0", ["lighting"], 6, out, batch_size=2)
    after = store.chunks()
    assert sorted(after) == [("lighting", 0), ("lighting", 2), ("lighting", 4)]
    assert after[("lighting", 0)].read_bytes() == before[("lighting", 0)]
    assert after[("lighting", 2)].read_bytes() == before[("lighting", 2)]  # redone identically
    assert len(store.episodes()) == 6
    assert not list(out.glob(".*tmp"))


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"factors": ["lightning"]}, UnknownNameError, "lightning"),
        ({"n": 0}, InvalidSpecError, "--n must be a positive"),
        ({"env_id": "gymnasium/Hopper-v5"}, UnknownNameError, "scripted expert"),
        ({"severity": 1.5}, InvalidSpecError, "severity"),
    ],
    ids=["unknown-factor", "n-0", "no-expert", "severity"],
)
def test_collect_bad_input(tmp_path, kwargs, error, needle):
    args = {"env_id": "robogen/Reach-v0", "factors": ["none"], "n": 2, "out": tmp_path / "d"}
    args.update(kwargs)
    with pytest.raises(error, match=needle):
        collect(**args)
    assert not (tmp_path / "d").exists()


def test_other_settings_in_same_dir_is_an_error(tmp_path):
    collect("robogen/Reach-v0", ["none"], 2, tmp_path / "d", batch_size=2)
    with pytest.raises(InvalidSpecError, match="seed: 0 != 1"):
        collect("robogen/Reach-v0", ["none"], 2, tmp_path / "d", batch_size=2, seed=1)
    with pytest.raises(RunDirError, match="not a demonstrations directory"):
        DemoStore.open(tmp_path)


def test_collect_killed_mid_way_resumes_without_lost_or_repeated_episodes(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "d"
    cmd = [sys.executable, "-m", "robogen.cli", "collect", "--task", "robogen/Reach-v0",
           "--vary", "none,physics", "--n", "12", "--batch-size", "2", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "MUJOCO_GL": "egl"})
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list(out.glob("chunk-*.arrow"))) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = {p.name: p.stat().st_mtime_ns for p in out.glob("chunk-*.arrow")}
    assert 0 < len(first) < 12, "the kill should land mid-collection"
    store = collect("robogen/Reach-v0", ["none", "physics"], 12, out, batch_size=2)
    eps = store.episodes()
    assert len(eps) == 24 and not eps.duplicated(["factor", "episode"]).any()
    assert all(store.path.joinpath(n).stat().st_mtime_ns == t for n, t in first.items())
    assert not list(out.glob(".*tmp"))


def test_a_larger_n_tops_up_a_partial_chunk(tmp_path):
    small = collect("robogen/Reach-v0", ["none"], 3, tmp_path / "d", batch_size=4)
    before = small.load({"none": 3})
    store = collect("robogen/Reach-v0", ["none"], 6, tmp_path / "d", batch_size=4)
    assert len(store.episodes()) == 6
    after = store.load({"none": 3})
    np.testing.assert_array_equal(before["action"], after["action"])  # the first 3 unchanged


@pytest.mark.parametrize("kw", [{"batch_size": 0}, {"image_size": 0}])
def test_bad_sizes_write_nothing(tmp_path, kw):
    with pytest.raises(InvalidSpecError):
        collect("robogen/Reach-v0", ["none"], 2, tmp_path / "d", **kw)
    assert not (tmp_path / "d").exists()


def test_a_collection_written_before_the_camera_field_reads_as_front(tmp_path):
    """Collections of earlier versions (all tabletop) have no ``camera`` key: they read as the
    ``front`` camera they were recorded from, and appending to them keeps working."""
    import json

    out = tmp_path / "d"
    store = collect("robogen/Reach-v0", ["none"], 2, out, batch_size=2)
    assert store.collection.camera == "front"
    meta = json.loads((out / "collection.json").read_text())
    del meta["camera"]
    (out / "collection.json").write_text(json.dumps(meta))
    assert DemoStore.open(out).collection.camera == "front"
    assert len(collect("robogen/Reach-v0", ["none"], 4, out, batch_size=2).episodes()) == 4
