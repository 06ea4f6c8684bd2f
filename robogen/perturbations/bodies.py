"""Procedural bodies: many distinct embodiments of a robot, each with a stable id.

The distinct values of the ``embodiment`` axis (``robogen scale --vary values``; the
embodiment scaling of training on many procedurally generated bodies). Body ``i`` of a
split is drawn from its own stream ``SeedSequence([tag, split code, i])``: a function of
the index alone, the same body in every run and on every machine. Each body sets, as
multiplicative factors on the nominal robot (symmetric in log space, magnitude in
``[severity / 2, severity]`` of the maximum, like every axis):

=================  =========================================  ==========================
factor             acts on                                    at severity 1
=================  =========================================  ==========================
``length_scale``   every robot link's local offsets            x[1/1.15, 1.15]
``link_scales``    each robot body's offsets (one per body)    x[1/1.08, 1.08] each
``mass_scale``     link masses and inertias                    x[1/1.8, 1.8]
``damping_scale``  joint damping                               x[1/2.5, 2.5]
``armature_scale`` joint armature (rotor inertia)              x[1/3, 3]
``gear_scale``     actuator gear (servos keep joint targets)   x[1/1.2, 1.2]
``gain_scale``     actuator gains and bias terms               x[1/1.4, 1.4]
=================  =========================================  ==========================

Splits: the directions of the six robot-wide factors form sign vectors of even
(``train``) or odd (``test``) parity, as the axis's per-episode draws do, so no train
body has a test body's direction pattern and the two sets are disjoint;
:data:`BODY_COUNTS` bodies per split (``all``: the train bodies, then the test bodies).

The ranges keep the scripted experts of the built-in tasks succeeding on every body
checked (``tests/perturbations/test_bodies.py`` pins the Reach expert's success rate on a
sample of train and test bodies, and validates each body: it compiles, and the arm holds
its home pose under the nominal servo targets). Out of scope: topology (adding or removing
links or joints), which would change the action space.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from robogen.errors import InvalidPerturbationError
from robogen.perturbations import helpers as u

BODY_COUNTS = {"train": 4096, "test": 1024}
"""Procedural bodies per split (``all``: both, train first)."""
MAX_FACTORS = {"length_scale": 1.15, "mass_scale": 1.8, "damping_scale": 2.5,
               "armature_scale": 3.0, "gear_scale": 1.2, "gain_scale": 1.4}
"""Largest factor of each robot-wide quantity at severity 1 (the module docstring's table)."""
MAX_LINK_FACTOR = 1.08
"""Largest per-body length factor at severity 1, on top of ``length_scale``."""
_BODY_STREAM = zlib.crc32(b"robogen.bodies")
_SPLIT_CODES = {"train": 1, "test": 2}


def body_count(split: str) -> int:
    """Number of procedural bodies in ``split`` (``train``, ``test`` or ``all``)."""
    if split == "all":
        return sum(BODY_COUNTS.values())
    return BODY_COUNTS[split]


def _resolve(index: int, split: str) -> tuple[int, str]:
    """(index within its own split, that split) for an index of ``split``."""
    count = body_count(split)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not (
            0 <= index < count):
        raise InvalidPerturbationError(
            f"body index must be in [0, {count}) for split {split!r}, got {index!r}")
    if split == "all":
        n_train = BODY_COUNTS["train"]
        return (int(index), "train") if index < n_train else (int(index) - n_train, "test")
    return int(index), split


def body_id(index: int, split: str) -> str:
    """Stable id of body ``index`` of ``split``: ``body-train-000012`` (``all`` resolves to
    the train or test body it is)."""
    i, sp = _resolve(index, split)
    return f"body-{sp}-{i:06d}"


def body_values(index: int, split: str, severity: float = 1.0, n_links: int = 0
                ) -> dict[str, Any]:
    """The values of procedural body ``index`` of ``split`` at ``severity``.

    Args:
        index: Body index in ``[0, body_count(split))``.
        split: ``train``, ``test`` or ``all``.
        severity: Shift size in (0, 1] (0: the nominal body, still with its id).
        n_links: Number of robot bodies (``len(scene.roles.robot_bodies)``): one
            ``link_scales`` entry each.

    Returns:
        The keyword arguments of :class:`~robogen.perturbations.embodiment.
        EmbodimentPerturbation` (:func:`~robogen.perturbations.embodiment.procedural_body`
        builds it): the six factors, ``link_scales`` and ``body_id``.

    Raises:
        InvalidPerturbationError: On an index outside the split or a bad severity.
    """
    i, sp = _resolve(index, split)
    rng = np.random.default_rng(np.random.SeedSequence([_BODY_STREAM, _SPLIT_CODES[sp], i]))
    signs = u.split_signs(rng, len(MAX_FACTORS), sp)
    sizes = [u.check_and_magnitude(rng, severity, sp)] + [
        u.magnitude(rng, severity) for _ in range(len(MAX_FACTORS) - 1)]
    f = {name: round(u.log_factor(float(s), m, x), 6)
         for (name, x), s, m in zip(MAX_FACTORS.items(), signs, sizes, strict=True)}
    links = tuple(round(u.log_factor(1.0, float(rng.uniform(-1.0, 1.0)) * severity,
                                     MAX_LINK_FACTOR), 6) for _ in range(int(n_links)))
    return {**f, "link_scales": links, "body_id": body_id(i, sp)}


__all__ = ["BODY_COUNTS", "MAX_FACTORS", "MAX_LINK_FACTOR", "body_count", "body_id",
           "body_values"]
