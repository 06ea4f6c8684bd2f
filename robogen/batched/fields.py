# pyright: reportAttributeAccessIssue=false
# (mujoco's compiled bindings ship no stubs for these attributes)
"""Per-world model fields of the batchable axes, written exactly as the CPU axis writes them.

World ``i`` runs one episode of one condition. Its perturbations are drawn from the same
per-episode streams as on the serial backend (:func:`sample_perturbations`: the axis's
``sample`` on ``axis_rng(perturbation_seed, axis)``, as ``PerturbedEnv.reset`` does), and
its model fields are those of the CPU-perturbed ``MjModel`` (:func:`perturbed_model`:
``apply_model`` from the nominal model in ``MODEL_ORDER``, then ``mj_setConst`` when an
inertial edit needs it). :func:`world_fields` stacks the fields the perturbations declare
in ``MODEL_FIELDS`` into ``(worlds, ...)`` arrays; :func:`install_world_fields` gives the
MJWarp model one row per world for each field that differs from nominal.

Batchable today: ``physics`` (friction, object mass/inertia, gravity) and the model-field
part of ``embodiment`` (link mass/inertia, joint damping, actuator gain/bias). Any other
axis, and an embodiment draw that changes link lengths (a recompile), is refused with
:data:`UNBATCHABLE_AXIS` before anything runs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
from numpy.typing import NDArray

from robogen.errors import InvalidSpecError
from robogen.perturbations.base import Perturbation, check_level, make_axis
from robogen.perturbations.wrapper import axis_rng
from robogen.types import AxisLevel

if TYPE_CHECKING:
    from robogen.batched.worlds import BatchedWorlds
    from robogen.envs.base import MujocoScene

BATCHED_AXES: tuple[str, ...] = ("physics", "embodiment")
"""Axes whose per-episode edits are model fields MJWarp holds per world."""

UNBATCHABLE_AXIS = (
    "axis {axis!r} cannot run on the batched backend: {why}; batchable axes: {axes}; "
    "run this condition with --backend ray"
)


def sample_perturbations(scene: MujocoScene, levels: Sequence[AxisLevel], perturbation_seed: int
                         ) -> tuple[Perturbation, ...]:
    """Draw one episode's perturbations exactly as ``PerturbedEnv.reset`` draws them.

    Args:
        scene: The nominal scene (axes read its roles).
        levels: The condition's axis levels; severity 0 draws nothing.
        perturbation_seed: The episode's seed (``rollout.plan.perturbation_seed``).

    Returns:
        The concrete perturbations, in ``levels`` order.

    Raises:
        InvalidSpecError: On an axis outside :data:`BATCHED_AXES`, or a draw that edits
            the model structure (embodiment link lengths).
        InvalidPerturbationError: On a bad severity or split.
    """
    perts: list[Perturbation] = []
    for lv in levels:
        if lv.severity == 0:
            continue
        if lv.axis not in BATCHED_AXES:
            raise InvalidSpecError(UNBATCHABLE_AXIS.format(
                axis=lv.axis, why="its edits are not per-world model fields yet",
                axes=list(BATCHED_AXES)))
        check_level(lv.severity, lv.split)
        p = make_axis(lv.axis).sample(axis_rng(perturbation_seed, lv.axis), lv.severity,
                                      lv.split, scene)
        check_batchable(p)
        perts.append(p)
    return tuple(perts)


def check_batchable(p: Perturbation) -> None:
    """Raise :class:`InvalidSpecError` if ``p`` needs more than per-world model fields."""
    if p.axis not in BATCHED_AXES:
        raise InvalidSpecError(UNBATCHABLE_AXIS.format(
            axis=p.axis, why="its edits are not per-world model fields yet",
            axes=list(BATCHED_AXES)))
    if p.has_spec_edit:
        raise InvalidSpecError(UNBATCHABLE_AXIS.format(
            axis=p.axis, why=f"this draw edits the model structure ({p.to_record()}), which "
            "needs a recompile per world (grouping worlds by structure is not implemented)",
            axes=list(BATCHED_AXES)))


def perturbed_model(nominal: mujoco.MjModel, perts: Sequence[Perturbation], scene: MujocoScene
                    ) -> mujoco.MjModel:
    """A copy of ``nominal`` with ``perts`` applied as the CPU wrapper applies them.

    Args:
        nominal: The scene's nominal compiled model (not modified).
        perts: One episode's perturbations (each passes :func:`check_batchable`).
        scene: The scene whose roles the perturbations name.

    Returns:
        A new ``MjModel``: ``apply_model`` of each perturbation in ``MODEL_ORDER``, written
        from ``nominal``, then ``mj_setConst`` if one of them ``NEEDS_SET_CONST``.
    """
    model = copy.copy(nominal)
    for p in sorted(perts, key=lambda p: p.MODEL_ORDER):
        check_batchable(p)
        p.apply_model(model, nominal, scene)
    if any(p.NEEDS_SET_CONST for p in perts):
        mujoco.mj_setConst(model, mujoco.MjData(model))
    return model


def get_field(model: mujoco.MjModel, path: str) -> NDArray[Any]:
    """``MjModel`` field by dotted path (``body_mass``, ``opt.gravity``) as an array copy."""
    owner: Any = model
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    return np.array(getattr(owner, name))


def world_fields(nominal: mujoco.MjModel, scene: MujocoScene,
                 per_world: Sequence[Sequence[Perturbation]]) -> dict[str, NDArray[np.float64]]:
    """The fields the worlds' perturbations change, one row per world.

    Args:
        nominal: The scene's nominal compiled model.
        scene: The scene whose roles the perturbations name.
        per_world: Each world's perturbations (empty: a nominal world).

    Returns:
        ``MjModel`` path -> ``(worlds, *field_shape)`` float64, for every path in the
        perturbations' ``MODEL_FIELDS`` whose value differs from nominal in some world;
        a nominal world's row equals the nominal field exactly.
    """
    paths: list[str] = []
    for perts in per_world:
        for p in perts:
            paths.extend(f for f in type(p).MODEL_FIELDS if f not in paths)
    paths = [f for f in paths if _has_path(nominal, f)]
    nominal_rows = {f: get_field(nominal, f) for f in paths}
    rows = {f: np.empty((len(per_world), *v.shape)) for f, v in nominal_rows.items()}
    for i, perts in enumerate(per_world):
        model = perturbed_model(nominal, perts, scene) if perts else nominal
        for f in paths:
            rows[f][i] = get_field(model, f)
    return {f: v for f, v in rows.items() if not np.array_equal(v, np.broadcast_to(
        nominal_rows[f], v.shape))}


def install_world_fields(worlds: BatchedWorlds, fields: dict[str, NDArray[np.float64]]
                         ) -> tuple[str, ...]:
    """Give ``worlds``'s MJWarp model one row per world for each of ``fields``.

    Fields MJWarp does not store (e.g. ``stat.meaninertia``, ``dof_M0``) do not enter its
    physics and are skipped.

    Returns:
        The paths installed.

    Raises:
        InvalidSpecError: If MJWarp stores a changed field but shares it across worlds.
    """
    installed = {f: v for f, v in fields.items() if worlds.known_field(f)}
    worlds.set_fields(installed)
    return tuple(installed)


def _has_path(model: mujoco.MjModel, path: str) -> bool:
    try:
        get_field(model, path)
    except AttributeError:
        return False
    return True
