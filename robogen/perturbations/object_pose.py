"""The ``object_pose`` axis: initial object/target placement, widened after the env's reset.

After the env has reset (and placed objects from its own nominal range), each
degree of freedom in ``roles.pose_dofs`` is displaced by
``severity * max_offset * v`` with ``v`` drawn in [-1, 1], clipped to the
dof's ``[low, high]``, written into ``qpos`` (joints) or ``mocap_pos`` (mocap
bodies); the wrapper then runs ``mj_forward`` and recomputes the observation,
so the displacement survives the env's reset and shows in the first
observation.

Splits: the displacement directions form sign vectors of even (train) or odd
(test) parity: disjoint value sets.

Recorded: ``values`` holds the offsets as sampled; ``applied`` the offsets the
state got after clipping, a ``clipped`` flag per dof and the realized initial
coordinate (see :meth:`ObjectPosePerturbation.apply_state_and_record`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import numpy as np

from robogen.errors import SceneError
from robogen.perturbations import helpers as u
from robogen.perturbations.base import Axis, Perturbation, register_axis

if TYPE_CHECKING:
    from robogen.envs.base import MujocoScene


@dataclass(frozen=True, slots=True)
class PoseOffset:
    """Displacement of one pose degree of freedom.

    Attributes:
        target: Joint name (``qpos``) or mocap body name (``mocap``).
        index: Component inside the joint's qpos or the mocap position.
        kind: ``qpos`` or ``mocap``.
        offset: Displacement [m or rad].
        low: Lower clip bound, or None.
        high: Upper clip bound, or None.
    """

    target: str
    index: int
    kind: str
    offset: float
    low: float | None
    high: float | None


@dataclass(frozen=True, slots=True)
class ObjectPosePerturbation(Perturbation):
    """Concrete displacements of one episode.

    Attributes:
        offsets: One per pose degree of freedom of the scene.
    """

    axis: ClassVar[str] = "object_pose"

    offsets: tuple[PoseOffset, ...]

    def apply_state(self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene) -> bool:
        """Displace and clip each degree of freedom in ``data``."""
        return self.apply_state_and_record(model, data, scene)[0]

    def apply_state_and_record(
        self, model: mujoco.MjModel, data: mujoco.MjData, scene: MujocoScene
    ) -> tuple[bool, dict[str, Any]]:
        """Displace and clip each degree of freedom in ``data``; record what was applied.

        Returns:
            ``(changed, applied)`` with ``applied = {"offsets": [...], "n_clipped": k}``:
            per dof its ``target``, ``index``, ``kind``, the ``requested`` offset, the
            ``offset`` applied after clipping to ``[low, high]`` [m or rad], ``clipped``
            (True when a bound cut the requested offset) and ``initial``, the realized
            coordinate the episode starts from (``qpos`` or ``mocap_pos`` component).

        Raises:
            SceneError: On a pose dof that names no joint or mocap body of ``model``.
        """
        changed = False
        rows: list[dict[str, Any]] = []
        for p in self.offsets:
            if p.kind == "mocap":
                (body,) = u.ids_of(model, mujoco.mjtObj.mjOBJ_BODY, (p.target,), "pose body")
                mocap = int(model.body_mocapid[body])
                if mocap < 0:
                    raise SceneError(f"pose dof {p.target!r} has kind 'mocap' but is no mocap body")
                arr, idx = data.mocap_pos[mocap], p.index
            elif p.kind == "qpos":
                (joint,) = u.ids_of(model, mujoco.mjtObj.mjOBJ_JOINT, (p.target,), "pose joint")
                arr, idx = data.qpos, int(model.jnt_qposadr[joint]) + p.index
            else:
                raise SceneError(
                    f"pose dof {p.target!r} has kind {p.kind!r}; expected 'qpos' or 'mocap'")
            old = float(arr[idx])
            lo = -np.inf if p.low is None else p.low
            hi = np.inf if p.high is None else p.high
            wanted = old + p.offset
            new = float(np.clip(wanted, lo, hi))
            arr[idx] = new
            changed |= new != old
            rows.append({"target": p.target, "index": int(p.index), "kind": p.kind,
                         "requested": float(p.offset), "offset": new - old,
                         "clipped": bool(new != wanted), "initial": float(arr[idx])})
        return changed, {"offsets": rows, "n_clipped": sum(r["clipped"] for r in rows)}


@register_axis("object_pose")
class ObjectPoseAxis(Axis):
    """Initial object/target placement range (displacement after the env's reset)."""

    kind: ClassVar[str] = "physical"
    description: ClassVar[str] = "initial object/target placement: offsets after the env's reset"

    required_roles: ClassVar[Mapping[str, str]] = {"pose_dofs": "pose degrees of freedom"}

    def split_keys(self, values: Mapping[str, Any]) -> frozenset[Hashable]:
        """The parity of the negative offsets."""
        return frozenset({u.sign_parity(o["offset"] for o in values["offsets"])})

    def sample(self, rng: np.random.Generator, severity: float, split: str, scene: MujocoScene
               ) -> ObjectPosePerturbation:
        """Draw one displacement per pose dof."""
        u.check_level(severity, split)
        dofs = scene.roles.pose_dofs
        signs = u.split_signs(rng, len(dofs), split)
        return ObjectPosePerturbation(offsets=tuple(
            PoseOffset(
                target=d.target, index=int(d.index), kind=d.kind,
                offset=round(float(s) * float(severity) * d.max_offset * float(rng.uniform()), 6),
                low=d.low, high=d.high,
            )
            for d, s in zip(dofs, signs, strict=True)
        ))
