"""Which manifest fields define an evaluation protocol, and how two manifests differ.

Two runs are comparable (``robogen check``, ``robogen compare``) only if they
agree on every field of :data:`PROTOCOL_FIELDS`: the same env, axes, levels,
conditions, step limit, success rule and render settings make episode ``i`` the
same episode in both. The record this compares is
:class:`robogen.types.EvalManifest`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from robogen.types import EvalManifest, to_dict

PROTOCOL_FIELDS = (
    "env_id", "obs_mode", "axes", "severities", "splits", "combined", "max_steps",
    "success_threshold", "env_kwargs", "conditions", "render",
)
"""Manifest fields that define what an episode is; baseline and candidate must agree on them."""


def _protocol_view(m: EvalManifest, name: str) -> Any:
    if name == "render":
        return {k: v for k, v in to_dict(m.render).items() if k != "mujoco_gl"}
    if name == "conditions":  # order-insensitive: the same set of conditions compares equal
        conds = [to_dict(c) for c in m.conditions]
        for c in conds:
            c["levels"] = sorted(c["levels"], key=lambda lv: (lv["axis"], lv["split"]))
        return sorted(conds, key=lambda c: c["name"])
    if name == "axes":
        return sorted(m.axes)
    v = getattr(m, name)
    return list(v) if isinstance(v, tuple) else v


def _short(v: Any) -> str:
    if isinstance(v, list) and v and isinstance(v[0], dict) and "name" in v[0]:
        v = [c["name"] for c in v]
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 120 else s[:117] + "..."


def protocol_differences(
    baseline: EvalManifest,
    candidate: EvalManifest,
    *,
    fields: Sequence[str] = PROTOCOL_FIELDS,
    names: tuple[str, str] = ("baseline", "candidate"),
) -> list[str]:
    """``field: baseline X vs candidate Y`` for each differing protocol field.

    ``conditions`` compare as a set (order-insensitive), ``axes`` as a sorted
    list, and ``render`` without ``mujoco_gl`` (the GL backend does not change
    what an episode is).

    Args:
        baseline: The first manifest.
        candidate: The second manifest.
        fields: Manifest fields compared (default :data:`PROTOCOL_FIELDS`).
        names: How the two manifests are called in the messages.

    Returns:
        One line per differing field, in ``fields`` order; empty if they agree.
    """
    out = []
    for name in fields:
        a, b = _protocol_view(baseline, name), _protocol_view(candidate, name)
        if a != b:
            out.append(f"{name}: {names[0]} {_short(a)} vs {names[1]} {_short(b)}")
    return out
