"""Write a :class:`Report` as ``report.json``, ``report.md`` and ``report.html``.

* ``report.json``: :meth:`Report.to_dict` as strict JSON (versioned schema).
* ``report.md``: compact enough for a pull-request comment.
* ``report.html``: one self-contained file (inline CSS, plots embedded as
  base64 PNG, no external assets) that opens offline; videos are linked by
  paths relative to the run dir.

Every file is written to a temporary name in the same directory and moved into
place with :func:`os.replace`, so a reader never sees a half-written report.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from robogen._atomic import write_atomic
from robogen.errors import InvalidSpecError, RunDirError, StoreWriteError
from robogen.reports.plot_worker import draw_in_process
from robogen.reports.provenance import video_infos, video_posters
from robogen.reports.records import PLOT_FILES, REPORT_SCHEMA_VERSION, Report
from robogen.reports.report_html import render_html
from robogen.reports.report_markdown import NO_ORDER, breaking_text, render_markdown

__all__ = [
    "CORRUPT_REPORT",
    "NO_ORDER",
    "NO_REPORT",
    "PLOTS_DIR",
    "REPORT_HTML",
    "REPORT_JSON",
    "REPORT_MD",
    "REPORT_WRITE_FAILED",
    "atomic_write_bytes",
    "breaking_text",
    "load_report",
    "render_html",
    "render_markdown",
    "report_write_error",
    "write_report",
]

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS_DIR = "plots"

NO_REPORT = "no {name} in {path}; build it with: robogen report {run_dir}"
REPORT_WRITE_FAILED = (
    "cannot write {path!r} ({why}); all {n} episodes of the run are stored in {run_dir!r}; "
    "make room (or make it writable) and rebuild the report with: robogen report {run_dir}"
)
"""Message of the :class:`~robogen.errors.StoreWriteError` of a report file that could not be
written (a full disk): the episodes are all stored, ``robogen report`` rebuilds it."""
CORRUPT_REPORT = (
    "{path} is not a valid robogen report ({why}); rebuild it with: robogen report {run_dir}"
)


def write_report(
    report: Report,
    run_dir: Path,
    *,
    plots: bool = True,
    videos: Mapping[str, str] | None = None,
    draw: Callable[[Report], dict[str, bytes]] | None = None,
) -> dict[str, Path]:
    """Write ``report.json``, ``report.md``, ``report.html`` (and plots) into ``run_dir``.

    Args:
        report: The report to write.
        run_dir: Existing run directory.
        plots: Also draw the figures: saved as ``plots/*.png`` and embedded in the HTML.
        videos: Label -> video path (relative to ``run_dir``, or absolute inside
            it), e.g. ``{"texture@1 ep 3": "videos/texture@1_ep3.mp4"}``;
            linked from the HTML and listed in the markdown.
        draw: Draws the figures (plot key -> PNG bytes), e.g. a started
            :class:`~robogen.reports.plot_worker.PlotWorker`'s ``draw``; default: in
            this process.

    Returns:
        Keys ``json``, ``md``, ``html`` (and ``plot_gaps``, ``plot_severity``,
        ``plot_conditions`` when ``plots``) -> written path.

    Raises:
        RunDirError: If ``run_dir`` is not a directory.
        InvalidSpecError: If a video path is a URL or lies outside ``run_dir``.
        StoreWriteError: If a file cannot be written (a full disk, a read-only folder):
            :data:`REPORT_WRITE_FAILED`, naming the file; no partial file is left (each is
            written to a temporary and moved into place).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run dir {str(run_dir)!r} does not exist or is not a directory")
    links = _video_links(run_dir, videos or {})
    written: dict[str, Path] = {}
    images: dict[str, bytes] = {}

    def put(path: Path, data: bytes) -> Path:
        try:
            return atomic_write_bytes(path, data)
        except OSError as e:
            raise report_write_error(report, run_dir, path, e) from e

    # the small files first: on a nearly full disk the numbers are kept
    text = json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n"
    written["json"] = put(run_dir / REPORT_JSON, text.encode())
    infos = video_infos(run_dir, links)
    written["md"] = put(
        run_dir / REPORT_MD, render_markdown(report, videos=links, video_info=infos).encode()
    )
    if plots:
        images = (draw or draw_in_process)(report)
        (run_dir / PLOTS_DIR).mkdir(exist_ok=True)
        for key, data in images.items():
            written[f"plot_{key}"] = put(run_dir / PLOTS_DIR / PLOT_FILES[key], data)
    page = render_html(report, images=images, videos=links, video_info=infos,
                       posters=video_posters(run_dir, links, infos))
    written["html"] = put(run_dir / REPORT_HTML, page.encode())
    return written


def report_write_error(report: Report, run_dir: Path, path: Path | str,
                       e: OSError) -> StoreWriteError:
    """The :data:`REPORT_WRITE_FAILED` error of ``path`` (a report file, plot or video of
    ``report``'s run in ``run_dir``) that failed with ``e``; the episode count is the
    report's (every recorded episode, valid or not)."""
    n = sum(c.n + c.n_invalid for c in report.conditions)
    why = e.strerror or (str(e).strip().splitlines() or [type(e).__name__])[0]
    return StoreWriteError(REPORT_WRITE_FAILED.format(
        path=str(path), why=why, n=n, run_dir=str(run_dir)))


def load_report(path: Path) -> Report:
    """Read a report from ``report.json`` (or a run dir holding one).

    Raises:
        RunDirError: If the file is missing, not JSON, from another schema
            version, or lacks fields.
    """
    path = Path(path)
    file = path / REPORT_JSON if path.is_dir() else path
    run_dir = file.parent
    if not file.is_file():
        raise RunDirError(NO_REPORT.format(name=file.name, path=str(run_dir), run_dir=run_dir))
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunDirError(
            CORRUPT_REPORT.format(path=file, why=f"not JSON: {e}", run_dir=run_dir)
        ) from e
    if not isinstance(data, dict):
        why = f"top level is {type(data).__name__}, expected an object"
        raise RunDirError(CORRUPT_REPORT.format(path=file, why=why, run_dir=run_dir))
    if data.get("schema_version") != REPORT_SCHEMA_VERSION:
        got = data.get("schema_version")
        why = f"schema_version {got!r}, this robogen reads {REPORT_SCHEMA_VERSION}"
        raise RunDirError(CORRUPT_REPORT.format(path=file, why=why, run_dir=run_dir))
    try:
        return Report.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        why = f"missing or malformed field: {type(e).__name__}: {e}"
        raise RunDirError(CORRUPT_REPORT.format(path=file, why=why, run_dir=run_dir)) from e


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`robogen._atomic.write_atomic`)."""
    return write_atomic(path, data)


def _video_links(run_dir: Path, videos: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for label, p in videos.items():
        s = str(p)
        if "://" in s or s.startswith("//"):
            raise InvalidSpecError(
                f"video {label!r} path {s!r} is a URL; expected a file path relative to the run dir"
            )
        path = Path(s)
        if path.is_absolute():
            try:
                path = path.resolve().relative_to(run_dir.resolve())
            except ValueError as exc:
                raise InvalidSpecError(
                    f"video {label!r} path {s!r} is outside the run dir {str(run_dir)!r}; "
                    "expected a file inside it so the report stays self-contained"
                ) from exc
        elif ".." in path.parts:
            raise InvalidSpecError(
                f"video {label!r} path {s!r} leaves the run dir; expected a path inside it"
            )
        out[str(label)] = path.as_posix()
    return out
