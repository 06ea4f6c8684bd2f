"""robogen preview: the grid shows what each axis does, from the camera asked for."""

from __future__ import annotations

import numpy as np
import pytest

from robogen.errors import InvalidSpecError
from robogen.preview import preview_images, write_preview


@pytest.mark.parametrize("camera", [None, "top"])
def test_camera_axis_moves_the_camera_that_is_shown(camera):
    grid = preview_images("robogen/Reach-v0", ["camera", "lighting"], [0.0, 1.0], size=48,
                          camera=camera)
    assert grid.shape == (2, 2, 48, 48, 3) and grid.dtype == np.uint8
    assert np.array_equal(grid[0, 0], grid[1, 0])  # severity 0 is nominal on every row
    for row in range(2):  # severity 1 changes the image, also from a non-default camera
        assert np.abs(grid[row, 1].astype(int) - grid[row, 0]).mean() > 2.0


def test_views_differ_between_cameras():
    front = preview_images("robogen/Reach-v0", ["camera"], [0.0], size=32)
    top = preview_images("robogen/Reach-v0", ["camera"], [0.0], size=32, camera="top")
    assert not np.array_equal(front, top)


@pytest.mark.parametrize("name", ["grid.jpg", "grid", "a_dir"])
def test_out_must_be_a_png_file(tmp_path, name):
    (tmp_path / "a_dir").mkdir()
    with pytest.raises(InvalidSpecError, match="must be a .png file path"):
        write_preview(tmp_path / name, "robogen/Reach-v0", ["camera"], [0.0], size=16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_dir"]


def test_write_preview_writes_a_png(tmp_path):
    out = write_preview(tmp_path / "g.png", "robogen/Reach-v0", ["texture"], [0.0, 1.0], size=32)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_sensor_axis_shows_its_corruption_and_the_action_axis_nothing():
    grid = preview_images("robogen/Push-v0", ["sensor", "action"], [0.0, 1.0], size=48)
    assert np.abs(grid[0, 1].astype(float) - grid[0, 0]).mean() > 1.0  # a corrupted frame
    assert np.array_equal(grid[1, 1], grid[1, 0])  # the first frame: no action taken yet
