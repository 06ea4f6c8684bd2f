"""Side-by-side episode videos and preview image grids (imageio + matplotlib text).

This is the only module of robogen that imports imageio. Frames are composed
in NumPy; matplotlib (Agg) renders only the text of label strips, once per
file, so no font package is needed beyond matplotlib's bundled DejaVu Sans.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from robogen._atomic import atomic_path, write_atomic
from robogen.errors import InvalidSpecError
from robogen.serialization import Record, encode

VIDEO_MIN_HEIGHT = 256
"""Clips shorter than this [px] are upscaled by an integer factor (nearest neighbour)."""
GRID_MIN_CELL = 128
"""Grid cells smaller than this [px] on their longer side are upscaled by an integer factor."""
GRID_LABEL_WIDTH = 120
"""Width of the row-label column of a grid [px]."""
GRID_LABEL_HEIGHT = 28
"""Height of the column-label row (and of the title row, if any) of a grid [px]."""
GRID_PAD = 4
"""Gap after each grid cell [px]."""
_BAR_HEIGHT = 28
_SEPARATOR = 4
_LABEL_COLORS = ((40, 120, 60), (170, 50, 40))  # nominal green, perturbed red
_BG = (255, 255, 255)
_DPI = 100

BAD_FRAMES = (
    "{name} must be a (T, H, W, 3) uint8 array with T >= 1, got shape {shape} dtype {dtype}"
)


@dataclass(frozen=True, slots=True)
class VideoInfo(Record):
    """How a side-by-side video was composed; written next to it as ``<name>.json``.

    Attributes:
        render_sizes: ``(height, width)`` [px] of the nominal and the perturbed
            frames as rendered.
        scale: Integer upscale factor (nearest neighbour) applied to both.
        size: ``(height, width)`` [px] of the composed frame (label bar, both
            panels and the separator) before padding.
        padded_size: ``(height, width)`` [px] of the video's frames: ``size``
            padded with black to multiples of 16 (the H.264 macro block).
        fps: Frames per second [Hz].
        n_frames: Frames in the video (the longer episode's).
        camera: Camera the frames were rendered from; ``""`` when the caller did
            not say (the scene's default camera, its first camera role).
    """

    render_sizes: tuple[tuple[int, int], tuple[int, int]]
    scale: int
    size: tuple[int, int]
    padded_size: tuple[int, int]
    fps: float
    n_frames: int
    camera: str = ""

    def describe(self) -> str:
        """``rendered 128x128 px, x2, 288x516 padded to 288x528, 25 fps, camera top``."""
        (h1, w1), (h2, w2) = self.render_sizes
        rendered = f"{h1}x{w1}" if (h1, w1) == (h2, w2) else f"{h1}x{w1} | {h2}x{w2}"
        return (f"rendered {rendered} px, x{self.scale}, {self.size[0]}x{self.size[1]} padded "
                f"to {self.padded_size[0]}x{self.padded_size[1]}, {self.fps:g} fps, camera "
                f"{self.camera or 'default (first camera role)'}")


def video_info_path(path: Path) -> Path:
    """Where the :class:`VideoInfo` of the video at ``path`` is written (``<name>.json``)."""
    return Path(path).with_suffix(".json")


def read_video_info(path: Path) -> VideoInfo | None:
    """The :class:`VideoInfo` written next to the video at ``path``, or None if absent or bad."""
    try:
        return VideoInfo.from_dict(json.loads(video_info_path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def side_by_side_layout(
    nominal_shape: Sequence[int], perturbed_shape: Sequence[int], *, labels: bool = True,
    fps: float = 25, camera: str = "",
) -> VideoInfo:
    """The composition :func:`write_side_by_side` uses for frames of these shapes.

    Args:
        nominal_shape: ``(T1, H1, W1, 3)`` of the nominal frames.
        perturbed_shape: ``(T2, H2, W2, 3)`` of the perturbed frames.
        labels: Whether label bars are drawn above the panels.
        fps: Frames per second [Hz].
        camera: Camera name to record.
    """
    t1, h1, w1 = (int(x) for x in nominal_shape[:3])
    t2, h2, w2 = (int(x) for x in perturbed_shape[:3])
    scale = max(1, math.ceil(VIDEO_MIN_HEIGHT / max(h1, h2)))
    bar = _BAR_HEIGHT if labels else 0
    size = (bar + max(h1, h2) * scale, w1 * scale + _SEPARATOR + w2 * scale)
    return VideoInfo(render_sizes=((h1, w1), (h2, w2)), scale=scale, size=size,
                     padded_size=(_ceil16(size[0]), _ceil16(size[1])), fps=float(fps),
                     n_frames=max(t1, t2), camera=camera)


def write_side_by_side(
    path: Path,
    nominal_frames: NDArray[np.uint8],
    perturbed_frames: NDArray[np.uint8],
    fps: float = 25,
    labels: tuple[str, str] | None = ("nominal", "perturbed"),
    *,
    camera: str = "",
) -> Path:
    """Write an MP4 with the nominal episode on the left and the perturbed one on the right.

    The shorter clip is padded by repeating its last frame (a finished episode
    holds still). Clips shorter than :data:`VIDEO_MIN_HEIGHT` are upscaled by
    an integer factor; the frame is padded with black to a multiple of 16 px
    (the H.264 macro block) instead of being resampled. The composition
    (:class:`VideoInfo`: render sizes, scale, padded size, camera) is written
    next to the video as ``<name>.json`` (:func:`read_video_info`).

    Args:
        path: Output ``.mp4`` path; its directory must exist. Written atomically.
        nominal_frames: (T1, H1, W1, 3) uint8 frames of the nominal episode.
        perturbed_frames: (T2, H2, W2, 3) uint8 frames of the perturbed episode
            of the same episode index.
        fps: Frames per second [Hz], > 0.
        labels: Texts of the coloured bars above the clips; None draws no bars.
        camera: Camera the frames were rendered from (recorded; ``""``: the scene's default).

    Returns:
        ``path``; the video has ``max(T1, T2)`` frames.

    Raises:
        InvalidSpecError: On frames of the wrong shape or dtype, or ``fps <= 0``.
    """
    import imageio.v2 as iio

    a = _check_frames("nominal_frames", nominal_frames)
    b = _check_frames("perturbed_frames", perturbed_frames)
    if not fps > 0:
        raise InvalidSpecError(f"fps must be > 0, got {fps!r}")
    info = side_by_side_layout(a.shape, b.shape, labels=labels is not None, fps=fps,
                               camera=camera)
    scale = info.scale
    wa, wb = a.shape[2] * scale, b.shape[2] * scale
    bar = _BAR_HEIGHT if labels is not None else 0
    width = wa + _SEPARATOR + wb
    full_h, full_w = info.padded_size
    canvas = np.zeros((full_h, full_w, 3), dtype=np.uint8)
    if labels is not None:
        canvas[:bar, :wa] = text_image(labels[0], wa, bar, bg=_LABEL_COLORS[0])
        canvas[:bar, wa + _SEPARATOR : width] = text_image(labels[1], wb, bar, bg=_LABEL_COLORS[1])
    canvas[:, wa : wa + _SEPARATOR] = 64
    n_frames = max(a.shape[0], b.shape[0])
    path = Path(path)
    with atomic_path(path, suffix=path.suffix or ".mp4") as tmp:
        writer = iio.get_writer(
            tmp,
            format="FFMPEG",
            mode="I",
            fps=fps,
            codec="libx264",
            pixelformat="yuv420p",
            macro_block_size=16,
            ffmpeg_params=["-preset", "veryfast"],  # ~20% faster than x264's default, as small
        )
        try:
            for t in range(n_frames):
                frame = canvas.copy()
                fa = _upscale(a[min(t, a.shape[0] - 1)], scale)
                fb = _upscale(b[min(t, b.shape[0] - 1)], scale)
                frame[bar : bar + fa.shape[0], :wa] = fa
                frame[bar : bar + fb.shape[0], wa + _SEPARATOR : width] = fb
                writer.append_data(frame)
        finally:
            writer.close()
    write_atomic(video_info_path(path), json.dumps(encode(info), indent=2).encode())
    return path


def grid_size(
    rows: int, cols: int, height: int, width: int, *, title: bool = False
) -> tuple[int, int]:
    """Pixel size ``(height, width)`` of the PNG :func:`write_grid_png` writes.

    Args:
        rows: Grid rows.
        cols: Grid columns.
        height: Height H of one input image [px].
        width: Width W of one input image [px].
        title: Whether a title row is drawn.
    """
    s = max(1, math.ceil(GRID_MIN_CELL / max(height, width)))
    top = GRID_LABEL_HEIGHT * (2 if title else 1)
    return top + rows * (height * s + GRID_PAD), GRID_LABEL_WIDTH + cols * (width * s + GRID_PAD)


def write_grid_png(
    path: Path,
    images: NDArray[np.uint8],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str | None = None,
) -> Path:
    """Write a labelled image grid as PNG (``robogen preview``: rows = axes, columns = severities).

    Cells smaller than :data:`GRID_MIN_CELL` px are upscaled by an integer
    factor (nearest neighbour); the output size is :func:`grid_size`.

    Args:
        path: Output ``.png`` path; its directory must exist. Written atomically.
        images: (rows, cols, H, W, 3) uint8 images.
        row_labels: One label per row (e.g. axis names).
        col_labels: One label per column (e.g. ``severity 0.5``).
        title: Optional title line above the column labels.

    Returns:
        ``path``.

    Raises:
        InvalidSpecError: On a wrong image shape/dtype or label count.
    """
    import imageio.v3 as iio

    imgs = np.asarray(images)
    if imgs.ndim != 5 or imgs.shape[-1] != 3 or imgs.dtype != np.uint8 or 0 in imgs.shape:
        raise InvalidSpecError(
            f"images must be a (rows, cols, H, W, 3) uint8 array, got shape {imgs.shape} "
            f"dtype {imgs.dtype}"
        )
    rows, cols, h, w, _ = imgs.shape
    if len(row_labels) != rows or len(col_labels) != cols:
        raise InvalidSpecError(
            f"expected {rows} row labels and {cols} column labels for images of shape "
            f"{imgs.shape}, got {len(row_labels)} and {len(col_labels)}"
        )
    s = max(1, math.ceil(GRID_MIN_CELL / max(h, w)))
    ch, cw = h * s, w * s
    out_h, out_w = grid_size(rows, cols, h, w, title=title is not None)
    canvas = np.full((out_h, out_w, 3), 255, dtype=np.uint8)
    top = 0
    if title is not None:
        canvas[:GRID_LABEL_HEIGHT] = text_image(
            title, out_w, GRID_LABEL_HEIGHT, fg=(0, 0, 0), bg=_BG, align="left", fontsize=11
        )
        top = GRID_LABEL_HEIGHT
    for j, label in enumerate(col_labels):
        x = GRID_LABEL_WIDTH + j * (cw + GRID_PAD)
        canvas[top : top + GRID_LABEL_HEIGHT, x : x + cw] = text_image(
            str(label), cw, GRID_LABEL_HEIGHT, fg=(0, 0, 0), bg=_BG
        )
    top += GRID_LABEL_HEIGHT
    for i, label in enumerate(row_labels):
        y = top + i * (ch + GRID_PAD)
        canvas[y : y + ch, :GRID_LABEL_WIDTH] = text_image(
            str(label), GRID_LABEL_WIDTH, ch, fg=(0, 0, 0), bg=_BG, align="right"
        )
        for j in range(cols):
            x = GRID_LABEL_WIDTH + j * (cw + GRID_PAD)
            canvas[y : y + ch, x : x + cw] = _upscale(imgs[i, j], s)
    buf = io.BytesIO()
    iio.imwrite(buf, canvas, extension=".png")
    return write_atomic(Path(path), buf.getvalue())


def text_image(
    text: str,
    width: int,
    height: int,
    *,
    fg: tuple[int, int, int] = (255, 255, 255),
    bg: tuple[int, int, int] = (0, 0, 0),
    align: str = "center",
    fontsize: float = 10,
) -> NDArray[np.uint8]:
    """Render one line of text into an exact ``(height, width, 3)`` uint8 strip.

    Args:
        text: The text (clipped at the strip's edges).
        width: Strip width [px], > 0.
        height: Strip height [px], > 0.
        fg: Text colour (RGB 0-255).
        bg: Background colour (RGB 0-255).
        align: ``left``, ``center`` or ``right``.
        fontsize: Font size [pt] at 100 dpi.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
    fig.patch.set_facecolor(tuple(c / 255 for c in bg))
    x = {"left": 4 / width, "center": 0.5, "right": 1 - 6 / width}[align]
    fig.text(
        x, 0.5, text, ha=align, va="center", fontsize=fontsize, color=tuple(c / 255 for c in fg)
    )
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    img = np.asarray(canvas.buffer_rgba())[..., :3]
    out = np.empty((height, width, 3), dtype=np.uint8)
    out[:] = bg
    hh, ww = min(height, img.shape[0]), min(width, img.shape[1])
    out[:hh, :ww] = img[:hh, :ww]
    return out


def _check_frames(name: str, frames: NDArray[np.uint8]) -> NDArray[np.uint8]:
    f = np.asarray(frames)
    if f.ndim != 4 or f.shape[-1] != 3 or f.dtype != np.uint8 or 0 in f.shape:
        raise InvalidSpecError(BAD_FRAMES.format(name=name, shape=f.shape, dtype=f.dtype))
    return f


def _upscale(img: NDArray[np.uint8], s: int) -> NDArray[np.uint8]:
    return img if s == 1 else np.repeat(np.repeat(img, s, axis=0), s, axis=1)


def _ceil16(x: int) -> int:
    return -(-x // 16) * 16


def encode_png(image: NDArray[np.uint8]) -> bytes:
    """PNG bytes of an ``(H, W, 3) uint8`` image (lossless; demonstrations store images so)."""
    import imageio.v3 as iio

    return bytes(iio.imwrite("<bytes>", np.asarray(image, dtype=np.uint8), extension=".png"))


def decode_png(data: bytes) -> NDArray[np.uint8]:
    """Inverse of :func:`encode_png`: ``(H, W, 3) uint8``."""
    import imageio.v3 as iio

    return np.asarray(iio.imread(data, extension=".png"), dtype=np.uint8)[..., :3]


def poster_jpeg(path: Path, n_frames: int | None = None, *, quality: int = 85) -> bytes | None:
    """JPEG bytes of the last frame of the video at ``path`` (a ``<video poster>``).

    The last frame of a failure video shows where the failed episode ended next to the
    nominal one, so the page reads before anything is played.

    Args:
        path: An MP4 written by :func:`write_side_by_side`.
        n_frames: Its frame count (:attr:`VideoInfo.n_frames`); None reads it from the file.
        quality: JPEG quality, 1-95.

    Returns:
        ``(H, W, 3)`` frame as JPEG bytes, or None when the file cannot be decoded.
    """
    import imageio.v2 as iio2
    import imageio.v3 as iio

    try:
        reader = iio2.get_reader(str(path), format="FFMPEG")  # pyright: ignore[reportUnknownMemberType]
    except (OSError, ValueError, RuntimeError):
        return None
    try:
        if n_frames is None:
            meta = reader.get_meta_data()
            n_frames = int(float(meta.get("duration", 0)) * float(meta.get("fps", 0)))
        frame = None
        for k in (max(n_frames - 1, 0), 0):
            try:
                frame = reader.get_data(k)
                break
            except (IndexError, OSError, ValueError, RuntimeError):
                continue
    finally:
        reader.close()
    if frame is None:
        return None
    rgb = np.asarray(frame, dtype=np.uint8)[..., :3]
    return bytes(iio.imwrite("<bytes>", rgb, extension=".jpg", quality=quality))
