"""The ``--safety`` metrics of N batched worlds, read on the device.

:class:`BatchedSafety` accumulates, per world, what :class:`robogen.rollout.safety.SafetyMonitor`
accumulates for one serial episode (:data:`~robogen.rollout.safety.SAFETY_METRICS`), as
torch operations on zero-copy views of MJWarp's arrays; only :meth:`BatchedSafety.summary`
crosses to the host, once per finished episode.

The scene's parts are the serial monitor's (:class:`~robogen.rollout.safety.SceneParts`:
robot, objects, distractors and the rest of the scene from the env's roles, on the worlds'
model), and so are the points where each metric is read:

* ``peak_contact_force_n``: the summed normal force of the robot's contacts with the scene,
  maximised. On a :class:`~robogen.envs.base.SubstepScene` (the built-in tabletop tasks)
  after every physics substep (:meth:`BatchedSafety.advance` steps the worlds one substep
  at a time and reads each); elsewhere (Gymnasium) once per env step, after its last
  substep. After an MJWarp step, as after ``mj_step``, the contacts and constraint forces
  belong to the step's last solve (one substep before the integrated ``qpos``; with RK4,
  Hopper's integrator, its last stage, in both). A contact's
  normal force is ``mj_contactForce``'s ``force[0]`` (MJWarp's
  ``support.contact_force``): the first of its ``efc.force`` rows for elliptic and
  frictionless contacts, the sum of its ``2 (dim - 1)`` pyramid rows for pyramidal cones,
  minus its adhesion.
* ``joint_limit_steps``, ``distractor_contact_steps``, ``object_dropped``: once per env step
  from the state the step leaves, and once at the reset (:meth:`BatchedSafety.reset_rows`,
  as :meth:`SafetyMonitor.start` reads the reset state).
* ``action_magnitude``, ``action_jerk``: from the actions sent (float64 sums).

MJWarp keeps the contacts of all worlds in one pool (``d.contact``, ``d.nacon`` entries
used, each with its ``worldid``); the contacts C MuJoCo would list in ``d.contact`` are those
of type ``CONSTRAINT`` or ``PASSIVE`` (as ``mujoco_warp.get_data_into`` exports them).
Constraint rows are per world (``d.efc``, ``d.nefc`` rows used). A world whose contact or
constraint buffers overflowed (:meth:`~robogen.batched.worlds.BatchedWorlds.overflows`) has
dropped contacts: its metrics, like its trajectory, are not a result.

Precision: on the same state (an MJWarp world copied into an ``MjData``) the metrics equal
the serial monitor's (``tests/batched/test_batched_safety.py``); MJWarp solves in float32,
so along a trajectory they drift from C MuJoCo's as the states do. Every metric the serial
monitor measures is measured here; a metric whose parts the scene does not name is None, as
serially.

Streams and threads: the reads are torch operations on the worlds' device; on CUDA the caller
orders them after MJWarp's step (the same stream, or a synchronisation), as for the tasks'
reads. On warp's CPU device run torch on one thread (``torch.set_num_threads(1)``): its
intra-op threads on a busy machine make each read ~50x slower
(``benchmarks/bench_batched_safety.py``: with one thread the reads cost 2-9% of the steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mujoco
import torch

from robogen.batched.worlds import load_mjwarp
from robogen.envs.base import SubstepScene, find_scene
from robogen.errors import RobogenError
from robogen.rollout.safety import (
    DROP_MARGIN_M,
    FORCE_PER_STEP,
    FORCE_SUBSTEPS,
    SAFETY_NAMES,
    SceneParts,
)

if TYPE_CHECKING:
    from robogen.batched.worlds import BatchedWorlds

NO_SUBSTEP_READ = (
    "BatchedSafety.after_step: {env} reads the contact force after every physics substep, but no "
    "substep was read since the last env step; step the worlds with "
    "BatchedSafety.advance(worlds, frame_skip) instead of worlds.advance"
)

_CONTACT_EXPORTED = 1 | 4
"""``mujoco_warp.ContactType.CONSTRAINT | PASSIVE``: the pool entries C MuJoCo lists."""
_LIMIT_JOINT = int(mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT)


class _Views:
    """Torch views of the MJWarp arrays the reads use (made once per worlds object)."""

    def __init__(self, worlds: BatchedWorlds) -> None:
        wp, _ = load_mjwarp()
        d = worlds.d
        self.worlds = worlds
        self.nacon = wp.to_torch(d.nacon)                      # (1,) int32
        self.geom = wp.to_torch(d.contact.geom)                # (P, 2) int32
        self.worldid = wp.to_torch(d.contact.worldid)          # (P,) int32
        self.ctype = wp.to_torch(d.contact.type)               # (P,) int32
        self.dim = wp.to_torch(d.contact.dim)                  # (P,) int32
        self.efc_address = wp.to_torch(d.contact.efc_address)  # (P, nmaxpyramid) int32
        self.adhesion = wp.to_torch(d.contact.adhesion)        # (P,) float32
        self.nefc = wp.to_torch(d.nefc)                        # (N,) int32
        self.efc_type = wp.to_torch(d.efc.type)                # (N, njmax) int32
        self.efc_id = wp.to_torch(d.efc.id)                    # (N, njmax) int32
        self.efc_force = wp.to_torch(d.efc.force)              # (N, njmax) float32
        self.xpos = wp.to_torch(d.xpos)                        # (N, nbody, 3) float32
        self.pool = torch.arange(self.geom.shape[0], device=self.geom.device)
        self.rows = torch.arange(self.efc_type.shape[1], device=self.geom.device)


class BatchedSafety:
    """Per-world running :data:`~robogen.rollout.safety.SAFETY_METRICS` of N batched worlds.

    One env step of every world (with the step sequence of :mod:`robogen.batched.tasks`)::

        task.apply_action(worlds, actions)
        safety.advance(worlds, task.frame_skip)   # instead of worlds.advance(...)
        safety.after_step(worlds, actions)

    and for worlds (re)filled with a new episode, after their state rows are written,
    ``safety.reset_rows(worlds, rows, envs)``; ``safety.summary(rows)`` gives a finished
    episode's metrics (call it before the row's next reset).

    Args:
        worlds: The worlds (their model gives the parts' masks).
        scene: The serial env of the worlds' scene, or its
            :class:`~robogen.envs.base.MujocoScene` (``find_scene(env)``): its roles name the
            parts, and its class says where the force is read.

    Attributes:
        sampling: Where ``peak_contact_force_n`` is read
            (:func:`robogen.rollout.safety.force_sampling` of the scene: :data:`FORCE_SUBSTEPS`
            or :data:`FORCE_PER_STEP`), for the manifest's ``safety_sampling``.
        peak_force: ``(N,)`` float64 running peak force [N].
        limit_steps, distractor_steps, steps: ``(N,)`` int64 running counts [steps].
        dropped: ``(N,)`` bool.
        norm_sum, jerk_sum: ``(N,)`` float64 sums of the action norms and jerk norms.
    """

    def __init__(self, worlds: BatchedWorlds, scene: Any) -> None:
        scene = find_scene(scene)
        self._scene_name = type(scene).__name__
        self.substeps = isinstance(scene, SubstepScene)
        self.sampling = FORCE_SUBSTEPS if self.substeps else FORCE_PER_STEP
        self._views = _Views(worlds)
        device = self._views.nacon.device
        model = worlds.model
        parts = SceneParts(model, scene.roles)
        self.parts = parts
        self.pyramidal = int(model.opt.cone) == int(mujoco.mjtCone.mjCONE_PYRAMIDAL)

        def mask(values: Any) -> torch.Tensor:
            return torch.as_tensor(values, dtype=torch.bool, device=device)

        self._robot, self._scene = mask(parts.robot), mask(parts.scene)
        self._object, self._distractor = mask(parts.object), mask(parts.distractor)
        self._limited = mask(parts.limited)
        self._object_bodies = torch.as_tensor(parts.object_bodies, dtype=torch.long,
                                              device=device)
        n = worlds.worlds
        self.n = n
        self.surface_z = torch.full((n,), float("nan") if parts.surface_z is None
                                    else parts.surface_z, dtype=torch.float64, device=device)
        """``(N,)`` float64: each world's supporting surface height [m] (its env's roles)."""
        self.peak_force = torch.zeros(n, dtype=torch.float64, device=device)
        self.limit_steps = torch.zeros(n, dtype=torch.int64, device=device)
        self.distractor_steps = torch.zeros(n, dtype=torch.int64, device=device)
        self.dropped = torch.zeros(n, dtype=torch.bool, device=device)
        self.steps = torch.zeros(n, dtype=torch.int64, device=device)
        self.norm_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self.jerk_sum = torch.zeros(n, dtype=torch.float64, device=device)
        self._prev: torch.Tensor | None = None   # (N, act_dim) float64: a_{t-1}
        self._prev2: torch.Tensor | None = None  # a_{t-2}
        self._substep_reads = 0

    # ---------------------------------------------------------------- per episode

    def reset_rows(self, worlds: BatchedWorlds, rows: Sequence[int],
                   envs: Sequence[Any] = ()) -> None:
        """Start new episodes in ``rows`` and read their reset state (as
        :meth:`SafetyMonitor.start`); call after the rows' states are written.

        Args:
            worlds: The worlds.
            rows: The world rows whose episodes start.
            envs: Optionally the host envs just reset for them (``envs[j]`` -> ``rows[j]``):
                each row's supporting surface is read from its env's roles (an edited
                table); empty: the scene's given at construction.
        """
        idx = torch.as_tensor(list(rows), dtype=torch.long, device=self.steps.device)
        if idx.numel() == 0:
            return
        for t in (self.peak_force, self.norm_sum, self.jerk_sum):
            t[idx] = 0.0
        for t in (self.limit_steps, self.distractor_steps, self.steps):
            t[idx] = 0
        self.dropped[idx] = False
        if envs and self.parts.surface_z is not None:
            regions = [find_scene(e).roles.distractor_region for e in envs]
            z = [float("nan") if r is None else r[4] for r in regions]
            self.surface_z[idx] = torch.as_tensor(z, dtype=torch.float64,
                                                  device=self.steps.device)
        if self._prev is not None and self._prev2 is not None:
            self._prev[idx] = 0.0
            self._prev2[idx] = 0.0
        active = torch.zeros(self.n, dtype=torch.bool, device=self.steps.device)
        active[idx] = True
        self._read(worlds, active, force=True)

    def summary(self, rows: Sequence[int]) -> list[dict[str, float | int | bool | None]]:
        """The metrics of the episodes in ``rows``, keyed by
        :data:`~robogen.rollout.safety.SAFETY_NAMES` (None: not measured in this scene), as
        :meth:`SafetyMonitor.metrics` gives them; one device-to-host copy."""
        idx = torch.as_tensor(list(rows), dtype=torch.long, device=self.steps.device)
        table = torch.stack([self.peak_force, self.limit_steps.double(),
                             self.dropped.double(), self.distractor_steps.double(),
                             self.steps.double(), self.norm_sum, self.jerk_sum])[:, idx]
        parts = self.parts
        out = []
        for peak, limits, dropped, dis, n, norm, jerk in table.cpu().T.tolist():
            steps = int(n)
            values = (
                peak if parts.has_robot else None,
                int(limits) if parts.has_joints else None,
                bool(dropped) if parts.surface_z is not None else None,
                int(dis) if parts.has_distractors else None,
                norm / steps if steps else None,
                jerk / (steps - 2) if steps > 2 else None,
            )
            out.append(dict(zip(SAFETY_NAMES, values, strict=True)))
        return out

    # ---------------------------------------------------------------- per step

    def advance(self, worlds: BatchedWorlds, nstep: int,
                active: torch.Tensor | None = None) -> None:
        """Advance every world by ``nstep`` physics steps (``worlds.advance``), reading the
        contact force after each on a substep scene (bit for bit the same steps).

        Args:
            worlds: The worlds, ``ctrl`` already written.
            nstep: Physics steps (the task's ``frame_skip``).
            active: ``(N,)`` bool: the worlds in an episode (None: all); the others are
                stepped but not read.
        """
        if not self.substeps:
            worlds.advance(nstep)
            return
        for _ in range(nstep):
            worlds.advance(1)
            self.substep(worlds, active)

    def substep(self, worlds: BatchedWorlds, active: torch.Tensor | None = None) -> None:
        """Read the contact force of one physics substep just taken (substep scenes)."""
        self._read_force(worlds, self._active(active))
        self._substep_reads += 1

    def after_step(self, worlds: BatchedWorlds, actions: torch.Tensor,
                   active: torch.Tensor | None = None) -> None:
        """Record one env step that executed ``actions`` (as :meth:`SafetyMonitor.step`).

        Args:
            worlds: The worlds after the step's physics.
            actions: ``(N, act_dim)`` the actions sent (clipped to the action space).
            active: ``(N,)`` bool: the worlds in an episode (None: all).

        Raises:
            RobogenError: On a substep scene stepped without :meth:`advance` (its force
                would be missed).
        """
        mask = self._active(active)
        if self.substeps and self._substep_reads == 0:
            raise RobogenError(NO_SUBSTEP_READ.format(env=self._scene_name))
        self._substep_reads = 0
        a = actions.to(device=mask.device, dtype=torch.float64).reshape(self.n, -1)
        if self._prev is None or self._prev2 is None:
            self._prev, self._prev2 = torch.zeros_like(a), torch.zeros_like(a)
        norm = torch.linalg.vector_norm(a, dim=1)
        jerk = torch.linalg.vector_norm(a - 2.0 * self._prev + self._prev2, dim=1)
        self.norm_sum += torch.where(mask, norm, 0.0)
        self.jerk_sum += torch.where(mask & (self.steps >= 2), jerk, 0.0)
        self.steps += mask.long()
        keep = mask[:, None]
        self._prev2 = torch.where(keep, self._prev, self._prev2)
        self._prev = torch.where(keep, a, self._prev)
        self._read(worlds, mask, force=not self.substeps)

    # ---------------------------------------------------------------- reads

    def _active(self, active: torch.Tensor | None) -> torch.Tensor:
        if active is None:
            return torch.ones(self.n, dtype=torch.bool, device=self.steps.device)
        return active.to(device=self.steps.device, dtype=torch.bool)

    def _v(self, worlds: BatchedWorlds) -> _Views:
        if self._views.worlds is not worlds:
            self._views = _Views(worlds)
        return self._views

    def _contacts(self, v: _Views) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The pool's ``(valid (P,) bool, world (P,) long, geom (P, 2) long)``: entries that
        are contacts of ``d.contact`` in C MuJoCo (used, of an exported type)."""
        valid = (v.pool < v.nacon[0]) & ((v.ctype & _CONTACT_EXPORTED) != 0)
        world = v.worldid.long().clamp(0, self.n - 1)
        geom = v.geom.long().clamp(0, self._robot.shape[0] - 1)
        return valid, world, geom

    def robot_scene_force(self, worlds: BatchedWorlds) -> torch.Tensor:
        """Each world's summed normal force of the robot's contacts with the scene ``(N,)``
        float64 [N] (:meth:`SafetyMonitor.robot_scene_force` per world)."""
        v = self._v(worlds)
        valid, world, geom = self._contacts(v)
        robot, scene = self._robot[geom], self._scene[geom]
        touching = valid & ((robot[:, 0] & scene[:, 1]) | (robot[:, 1] & scene[:, 0]))
        addr = v.efc_address.long()
        force = v.efc_force[world[:, None], addr.clamp(min=0)].double()  # (P, nmaxpyramid)
        if self.pyramidal:
            ndim = torch.where(v.dim == 1, 1, 2 * (v.dim - 1))
            use = (torch.arange(addr.shape[1], device=addr.device) < ndim[:, None]) & (addr >= 0)
            normal = (force * use).sum(dim=1)
        else:
            normal = torch.where(addr[:, 0] >= 0, force[:, 0], 0.0)
        normal = torch.where(addr[:, 0] >= 0, normal - v.adhesion.double(), 0.0)
        total = torch.zeros(self.n, dtype=torch.float64, device=normal.device)
        return total.index_add_(0, world, torch.where(touching, normal, 0.0))

    def _read_force(self, worlds: BatchedWorlds, mask: torch.Tensor) -> None:
        if self.parts.has_robot:
            total = self.robot_scene_force(worlds)
            # ``>``, not ``maximum``: a NaN force (a diverged world) is skipped, as serially
            self.peak_force = torch.where(mask & (total > self.peak_force), total,
                                          self.peak_force)

    def _read(self, worlds: BatchedWorlds, mask: torch.Tensor, *, force: bool) -> None:
        """``SafetyMonitor._read`` for the worlds in ``mask``."""
        parts, v = self.parts, self._v(worlds)
        if force:
            self._read_force(worlds, mask)
        if parts.has_distractors:
            valid, world, geom = self._contacts(v)
            dis = self._distractor[geom]
            other = self._robot[geom] | self._object[geom]
            hit = valid & ((dis[:, 0] & other[:, 1]) | (dis[:, 1] & other[:, 0]))
            count = torch.zeros(self.n, dtype=torch.int64, device=mask.device)
            count.index_add_(0, world, hit.long())
            self.distractor_steps += (mask & (count > 0)).long()
        if parts.has_joints:
            rows = v.rows[None, :] < v.nefc[:, None]
            ids = v.efc_id.long().clamp(0, self._limited.shape[0] - 1)
            limit = rows & (v.efc_type == _LIMIT_JOINT) & self._limited[ids]
            self.limit_steps += (mask & limit.any(dim=1)).long()
        if parts.surface_z is not None:
            z = v.xpos[:, self._object_bodies, 2].double().amin(dim=1)
            self.dropped |= mask & (z < self.surface_z - DROP_MARGIN_M)
