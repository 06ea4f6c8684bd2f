"""Batched simulation on MuJoCo Warp (MJWarp): N worlds of one scene on one warp device.

The first layer of the batched backend (``docs/dev/batched-plan.md``):

* :mod:`robogen.batched.worlds`: :class:`BatchedWorlds` loads a compiled ``MjModel`` into
  MJWarp with N worlds, sets per-world states, steps them with an action batch and reads
  ``qpos``/``qvel`` back; :func:`load_mjwarp` imports the extra or raises
  :class:`~robogen.errors.DependencyMissingError` naming its install command.
* :mod:`robogen.batched.fields`: the per-world model fields of the batchable axes
  (``physics``, ``embodiment`` when only its model fields change, and the visual axes
  ``lighting``, ``camera``, ``texture``, ``background``, visual-only ``distractors``),
  written exactly as the CPU axis writes them for that episode.
* :mod:`robogen.batched.render`: :class:`BatchRenderer` draws every world's pixel
  observation at once with MJWarp's batch ray tracer, as a ``(worlds, height, width, 3)
  uint8`` torch tensor on the worlds' device.

Only this package imports ``warp`` and ``mujoco_warp``, and only inside functions, so
``import robogen.batched`` works without the extra. Install it with
``pip install "robogen[batched]"`` (in a checkout: ``make setup-batched``).
"""

from __future__ import annotations

from robogen.batched.fields import (
    BATCHED_AXES,
    RENDER_FIELDS,
    UNBATCHABLE_AXIS,
    check_batchable,
    get_field,
    install_world_fields,
    perturbed_model,
    sample_perturbations,
    world_fields,
)
from robogen.batched.render import BatchRenderer
from robogen.batched.worlds import MJWARP_EXTRA, BatchedWorlds, load_mjwarp

__all__ = [
    "BATCHED_AXES", "MJWARP_EXTRA", "RENDER_FIELDS", "UNBATCHABLE_AXIS", "BatchRenderer",
    "BatchedWorlds", "check_batchable",
    "get_field", "install_world_fields", "load_mjwarp", "perturbed_model",
    "sample_perturbations", "world_fields",
]
