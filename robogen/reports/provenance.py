"""What a report says about how its numbers were made: actions, reward, policy load, videos.

These facts are recorded in the manifest (``deterministic_actions``,
``reward_source``, ``policy_load``) and next to each video (its
:class:`~robogen.reports.video.VideoInfo`); the writers show them so that a
reader need not open manifest.json to know them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path

from robogen.reports.video import VideoInfo, poster_jpeg, read_video_info
from robogen.types import EvalManifest

REMOTE_PAIRING = (
    "policy server: pairing across conditions is by initial state and perturbation values "
    "only; a server that samples actions advances its own random stream, which robogen does "
    "not control"
)


def run_facts(manifest: EvalManifest) -> list[str]:
    """``actions deterministic``, ``return: raw env reward`` (for the report's header line)."""
    actions = "deterministic" if manifest.deterministic_actions else "sampled"
    return [f"actions {actions}", f"return: {manifest.reward_source}"]


def policy_load_lines(manifest: EvalManifest) -> list[str]:
    """What loading the checkpoint replaced and which versions saved it; empty if nothing."""
    info = manifest.policy_load
    out = []
    if manifest.policy.startswith("remote:"):
        out.append(REMOTE_PAIRING)
    if info.replaced:
        out.append("loading the checkpoint replaced its training-only entries "
                   f"{', '.join(info.replaced)} (schedules inference never uses)")
    if info.saved_versions or info.current_versions:
        def text(d: Mapping[str, str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in d.items()) or "unknown versions"

        differ = [k for k, v in info.saved_versions.items()
                  if k in info.current_versions and info.current_versions[k] != v]
        line = (f"checkpoint saved with {text(info.saved_versions)}; evaluated with "
                f"{text(info.current_versions)}")
        out.append(line + (f" (different: {', '.join(differ)})" if differ else ""))
    return out


def video_infos(run_dir: Path, videos: Mapping[str, str]) -> dict[str, VideoInfo]:
    """Label -> :class:`VideoInfo` of each video (path relative to ``run_dir``) that has one."""
    out = {}
    for label, rel in videos.items():
        info = read_video_info(Path(run_dir) / rel)
        if info is not None:
            out[label] = info
    return out


def video_posters(run_dir: Path, videos: Mapping[str, str],
                  infos: Mapping[str, VideoInfo] | None = None) -> dict[str, str]:
    """Label -> ``data:`` URI of each video's poster frame (:func:`poster_jpeg`), for the
    ``poster`` attribute of its ``<video>``; videos that cannot be decoded get none."""
    out = {}
    for label, rel in videos.items():
        info = (infos or {}).get(label)
        jpeg = poster_jpeg(Path(run_dir) / rel, info.n_frames if info is not None else None)
        if jpeg is not None:
            out[label] = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
    return out
