"""``robogen preview``: one PNG grid of what each axis does (rows = axes, columns = severities)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict, Unpack

import numpy as np

from robogen.perturbations.base import check_level
from robogen.rollout.plan import episode_seed, perturbation_seed
from robogen.types import AxisLevel, RenderSettings


class PreviewOptions(TypedDict, total=False):
    """Keyword options of :func:`preview_images` (and :func:`write_preview`)."""

    seed: int
    size: int
    camera: str | None


def preview_images(
    env_id: str,
    axes: Sequence[str],
    severities: Sequence[float],
    *,
    seed: int = 0,
    size: int = 128,
    camera: str | None = None,
) -> np.ndarray:
    """Render episode 0 of ``seed`` under each axis at each severity (the frame as the
    policy would get it: a ``sensor`` corruption applied; ``action`` and ``language`` change
    nothing in the first frame).

    Returns:
        ``(len(axes), len(severities), size, size, 3) uint8`` images.

    Raises:
        UnknownNameError: On an unknown env id or axis.
        InvalidPerturbationError: On a severity outside [0, 1].
        InvalidSpecError: On a size outside [8, 640].
    """
    from robogen.envs import find_scene, make
    from robogen.errors import InvalidSpecError
    from robogen.perturbations import make_axis
    from robogen.perturbations.wrapper import PerturbedEnv

    if not isinstance(size, int) or not 8 <= size <= 640:
        raise InvalidSpecError(f"--size must be an image side in [8, 640] px, got {size!r}")
    for a in axes:
        make_axis(a)
    for s in severities:
        check_level(s, "all")
    # the camera axis moves the observation camera, so the chosen camera must be that one
    render = None if camera is None else RenderSettings(camera=camera)
    env = PerturbedEnv(make(env_id, render=render))
    scene = find_scene(env)
    grid = np.zeros((len(axes), len(severities), size, size, 3), np.uint8)
    try:
        for r, axis in enumerate(axes):
            for c, sev in enumerate(severities):
                env.set_levels((AxisLevel(axis, float(sev)),))
                env.reset(
                    seed=episode_seed(seed, 0),
                    options={"perturbation_seed": perturbation_seed(seed, 0)},
                )
                # per-step corruptions of what the policy sees (the sensor axis) included
                grid[r, c] = env.filter_observation(scene.render_frame(camera, size, size))
    finally:
        env.close()
    return grid


def write_preview(path: Path, env_id: str, axes: Sequence[str], severities: Sequence[float],
                  **options: Unpack[PreviewOptions]) -> Path:
    """Render the grid of :func:`preview_images` (same arguments after ``path``) and save it
    as a labelled PNG at ``path``.

    Raises:
        InvalidSpecError: If ``path`` is a directory or does not end in ``.png``
            (checked before anything is rendered), or as :func:`preview_images`.
    """
    from robogen.errors import InvalidSpecError
    from robogen.reports.video import write_grid_png

    path = Path(path)
    if path.is_dir() or path.suffix.lower() != ".png":
        raise InvalidSpecError(
            f"--out must be a .png file path, got {str(path)!r}"
            + (" (a directory)" if path.is_dir() else ""))

    images = preview_images(env_id, axes, severities, **options)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_grid_png(
        Path(path),
        images,
        row_labels=list(axes),
        col_labels=[f"severity {s:g}" for s in severities],
    )
