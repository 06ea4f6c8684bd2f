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

Batchable (:data:`BATCHED_AXES`):

* ``physics`` (friction, object mass/inertia, gravity) and the model-field part of
  ``embodiment`` (link mass/inertia, joint damping, actuator gain/bias);
* the visual axes, for pixel observations drawn by
  :class:`~robogen.batched.render.BatchRenderer`: ``lighting`` (``light_pos``/``dir``/
  ``diffuse``/``ambient``/``specular``/``castshadow`` of the scene's named lights, and
  ``light_*0`` for tracking lights), ``camera`` (``cam_pos``/``quat``/``fovy``, and the
  derived ``cam_pos0``/``poscom0``/``mat0`` MJWarp needs for tracking cameras),
  ``texture`` and ``background`` (``geom_rgba``/``mat_rgba``; texture pixels are no MJWarp
  model field: the ``tex_data`` rows go to the renderer, :data:`RENDER_FIELDS`), and
  visual-only slot ``distractors`` (``geom_rgba``/``geom_size`` of the slot geoms with
  their broadphase bounds ``geom_rbound``/``geom_aabb``; the slots' placement is state,
  ``mocap_pos``/``mocap_quat``, written by the axis's ``apply_state`` at the host reset and
  copied in with the rest of the state).

Refused with :data:`UNBATCHABLE_AXIS` before anything runs: every other axis, an
embodiment draw that changes link lengths (a recompile), a lighting draw on the headlight
(a constant of MJWarp's render kernel, not a per-world field), physical distractors
(MJWarp fixes the collision pairs when it loads the model: ``geom_contype``/
``conaffinity`` are shared by all worlds) and spec-mode distractors (new geoms: a
recompile).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
from numpy.typing import NDArray

from robogen.errors import InvalidSpecError
from robogen.perturbations.base import Perturbation, check_level, make_axis
from robogen.perturbations.distractors import PHYSICAL_ABOVE, DistractorsPerturbation
from robogen.perturbations.lighting import LightingPerturbation
from robogen.perturbations.wrapper import axis_rng
from robogen.types import AxisLevel

if TYPE_CHECKING:
    from robogen.batched.worlds import BatchedWorlds
    from robogen.envs.base import MujocoScene

BATCHED_AXES: tuple[str, ...] = (
    "physics", "embodiment", "lighting", "camera", "texture", "background", "distractors")
"""Axes whose per-episode edits are model fields MJWarp holds per world (the visual ones
with :class:`~robogen.batched.render.BatchRenderer` for pixels)."""

RENDER_FIELDS: tuple[str, ...] = ("tex_data",)
"""Per-world fields that are not MJWarp model fields but the renderer's (texture pixels:
:meth:`~robogen.batched.render.BatchRenderer.set_textures`); :func:`install_world_fields`
leaves them out (they change no physics and no state observation)."""

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
            the model structure (embodiment link lengths, spec-mode distractors), the
            headlight (a scene without named lights) or collides (physical distractors).
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
    why = _unbatchable_draw(p)
    if why:
        raise InvalidSpecError(UNBATCHABLE_AXIS.format(axis=p.axis, why=why,
                                                       axes=list(BATCHED_AXES)))


def _unbatchable_draw(p: Perturbation) -> str:
    """Why a draw of a batchable axis still cannot vary per world ("" if it can)."""
    if isinstance(p, LightingPerturbation) and p.headlight:
        return ("the scene has no named lights, so this draw edits the headlight, which "
                "MJWarp's renderer holds as one constant for all worlds")
    if isinstance(p, DistractorsPerturbation) and p.items and p.physical:
        return (f"physical distractors (severity > {PHYSICAL_ABOVE:g}) collide, and MJWarp "
                "fixes the collision pairs (geom_contype/conaffinity) for all worlds when it "
                f"loads the model; visual-only distractors (severity <= {PHYSICAL_ABOVE:g}) "
                "are batchable")
    return ""


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
                 per_world: Sequence[Sequence[Perturbation]]) -> dict[str, NDArray[Any]]:
    """The fields the worlds' perturbations change, one row per world.

    Args:
        nominal: The scene's nominal compiled model.
        scene: The scene whose roles the perturbations name.
        per_world: Each world's perturbations (empty: a nominal world).

    Returns:
        ``MjModel`` path -> ``(worlds, *field_shape)`` rows, for every path in the
        perturbations' ``MODEL_FIELDS`` whose value differs from nominal in some world;
        a nominal world's row equals the nominal field exactly. Real-valued fields are
        float64; integer and byte fields keep the model's dtype (``tex_data``: uint8).
    """
    paths: list[str] = []
    for perts in per_world:
        for p in perts:
            paths.extend(f for f in type(p).MODEL_FIELDS if f not in paths)
    paths = [f for f in paths if _has_path(nominal, f)]
    nominal_rows = {f: get_field(nominal, f) for f in paths}
    rows = {f: np.empty((len(per_world), *v.shape),
                        dtype=np.float64 if v.dtype.kind == "f" else v.dtype)
            for f, v in nominal_rows.items()}
    for i, perts in enumerate(per_world):
        model = perturbed_model(nominal, perts, scene) if perts else nominal
        for f in paths:
            rows[f][i] = get_field(model, f)
    return {f: v for f, v in rows.items() if not np.array_equal(v, np.broadcast_to(
        nominal_rows[f], v.shape))}


def install_world_fields(worlds: BatchedWorlds, fields: Mapping[str, NDArray[Any]]
                         ) -> tuple[str, ...]:
    """Give ``worlds``'s MJWarp model one row per world for each of ``fields``.

    Fields MJWarp does not store (e.g. ``stat.meaninertia``, ``dof_M0``) do not enter its
    physics and are skipped, as are :data:`RENDER_FIELDS` (``tex_data``: texture pixels,
    installed by :meth:`~robogen.batched.render.BatchRenderer.install` for pixel
    observations).

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
