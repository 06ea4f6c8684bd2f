"""Whether a visual axis reached a pixel policy's eyes: its first frame against nominal's.

A visual perturbation can change the scene where the camera does not look (a distractor
placed outside the view, a texture on a hidden face): the scene changed, the policy saw
nothing. For a policy that observes pixels, every episode records a digest of its first
image (:attr:`~robogen.types.EpisodeResult.first_frame_digest`); an episode whose digest
equals the nominal episode's of the same index (same initial state, common random numbers)
did not show the policy its visual axes, so they count as not applied to it ("not observed
in view") unless the perturbation was also physical (a colliding distractor still acts).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence

from robogen.types import EpisodeResult

NOT_IN_VIEW = "not observed in view"
"""What the report says of a visual axis whose episode's first frame equals nominal's."""


def _physical(r: EpisodeResult, axis: str) -> bool:
    for rec in json.loads(r.perturbations_json or "[]"):
        if rec.get("axis") == axis and (rec.get("values") or {}).get("physical"):
            return True
    return False


def apply_in_view(
    by_cond: Mapping[str, Sequence[EpisodeResult]], nominal: str, kinds: Mapping[str, str],
) -> tuple[dict[str, list[EpisodeResult]], dict[str, Counter[str]]]:
    """The results with visual axes removed from ``changed_axes`` where not in view.

    Args:
        by_cond: Results by condition name.
        nominal: The nominal condition's name.
        kinds: Axis name -> kind (only ``visual`` axes are checked).

    Returns:
        ``(by_cond, out_of_view)``: the results (a record changed only where an axis left
        the view unchanged) and, per condition, how many episodes each visual axis did not
        reach (:data:`NOT_IN_VIEW`). Runs without digests (state policies, older runs) come
        back unchanged.
    """
    reference = {r.episode_index: r.first_frame_digest for r in by_cond.get(nominal, ())
                 if r.first_frame_digest is not None}
    out: dict[str, list[EpisodeResult]] = {}
    out_of_view: dict[str, Counter[str]] = {}
    for cond, rs in by_cond.items():
        kept = list(rs)
        if cond != nominal and reference:
            for k, r in enumerate(kept):
                d = r.first_frame_digest
                if d is None or reference.get(r.episode_index) != d:
                    continue
                unseen = [a for a in r.changed_axes
                          if kinds.get(a) == "visual" and not _physical(r, a)]
                if unseen:
                    kept[k] = dataclasses.replace(r, changed_axes=tuple(
                        a for a in r.changed_axes if a not in unseen))
                    out_of_view.setdefault(cond, Counter()).update(unseen)
        out[cond] = kept
    return out, out_of_view
