"""robogen's tabletop tasks (Reach, Push, PickPlace) stepped on N worlds as torch operations.

The serial step (:meth:`robogen.envs.tabletop_scene.TabletopEnv.step` and each task's
``_evaluate``, :mod:`robogen.envs.tabletop`) once more over the worlds' device arrays:

* action: clipped to [-1, 1]; arm servo targets ``ctrl[arm] += ACTION_SCALE * a[:5]``,
  clipped to the actuators' ``ctrlrange`` (each world's own, if the field is per world);
  finger targets ``lo + (a[5] + 1) / 2 * (hi - lo)``;
* ``FRAME_SKIP`` physics steps;
* the 30-value state observation in :data:`~robogen.envs.tabletop_scene.STATE_LAYOUT`
  (end-effector and box positions as ``mj_step`` leaves them, like the serial env);
* reward, success and termination of the task: Reach ``-d``, success ``d < 0.03``; Push
  ``-d_obj - 0.5 d_ee``, success ``d_obj < 0.05`` (horizontal) with the box within 0.01 m
  of its resting height on the table top (each world's table, read from its model
  fields: the ``table`` body's height plus the table geom's offset and half height);
  PickPlace ``-d_obj - 0.5 d_ee``, success ``d_obj < 0.05`` (3-D). The serial env adds
  ``SUCCESS_BONUS`` on the first step where success holds and keeps a ``succeeded``
  latch; so does the task (one flag per world, cleared by :meth:`TabletopTask.on_reset`).
  The env terminates where success holds.

The target is a mocap body (``mocap_pos``), part of the MuJoCo state that
:meth:`~robogen.batched.worlds.BatchedWorlds.set_states_from` copies, so a reset copies
no Python-side state besides clearing the latch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from robogen.batched.tasks import TASK_FAMILIES, UNSUPPORTED_ENV, StepOutcome, register_task
from robogen.batched.tasks.views import WorldViews
from robogen.envs import scene as sc
from robogen.envs.base import find_scene
from robogen.envs.tabletop import TASK_IDS
from robogen.envs.tabletop_scene import ACTION_SCALE, STATE_DIM, SUCCESS_BONUS
from robogen.errors import InvalidSpecError

if TYPE_CHECKING:
    from robogen.batched.worlds import BatchedWorlds

FAMILY = "robogen"
ON_TABLE_TOL = 0.01
"""Push: largest distance of the box centre from its resting height [m] (``PushEnv``)."""
EE_WEIGHT = 0.5
"""Push, PickPlace: weight of the end-effector-to-box distance in the reward [-]."""


class TabletopTask:
    """One tabletop task's step on N worlds (a :class:`~robogen.batched.tasks.BatchedTask`).

    Args:
        env_id: ``robogen/Reach-v0``, ``robogen/Push-v0`` or ``robogen/PickPlace-v0``.
        scene: The task's :class:`~robogen.envs.tabletop_scene.TabletopEnv` (its ids and
            success threshold).
        worlds: The worlds this task steps.

    Attributes:
        threshold: The task's success distance [m].
        succeeded: ``(N,)`` bool on the worlds' device: success held at some step of the
            world's episode (the serial env's latch; the success bonus is paid once).
    """

    frame_skip = sc.FRAME_SKIP
    obs_dim = STATE_DIM
    act_dim = 6

    def __init__(self, env_id: str, scene: Any, worlds: BatchedWorlds) -> None:
        self.env_id = env_id
        self.kind = env_id.split("/", 1)[1].split("-v")[0]
        """``Reach``, ``Push`` or ``PickPlace``."""
        self.threshold = float(scene.threshold)
        model = scene.model
        ids = sc.SceneIds(model)
        self._arm_act = _index(ids.arm_act)
        self._finger_act = _index(ids.finger_act)
        self._arm_qadr = _index(ids.arm_qadr)
        self._arm_dadr = _index(ids.arm_dadr)
        self._finger_qadr = _index(ids.finger_qadr)
        self._quat = slice(ids.object_qadr + 3, ids.object_qadr + 7)
        self._grip, self._object, self._target = ids.grip_site, ids.object_body, ids.target_mocap
        self._table_body = int(model.body("table").id)
        self._table_geom = int(model.geom(sc.TABLE_GEOM).id)
        self._views = WorldViews()
        self.succeeded = torch.zeros(worlds.worlds, dtype=torch.bool,
                                     device=worlds.tensor("qpos").device)

    # ---------------------------------------------------------------- BatchedTask

    def on_reset(self, worlds: BatchedWorlds, rows: Sequence[int], envs: Sequence[Any]) -> None:
        """Clear the success latch of ``rows`` (target and box are MuJoCo state)."""
        self.succeeded[torch.as_tensor(list(rows), dtype=torch.long,
                                       device=self.succeeded.device)] = False

    def apply_action(self, worlds: BatchedWorlds, actions: torch.Tensor) -> None:
        """Move the arm's servo targets and set the fingers' (``TabletopEnv.step``)."""
        a = actions.clamp(-1.0, 1.0)
        ctrl = self._t(worlds, "ctrl")
        ctrl_range = self._t(worlds, "m.actuator_ctrlrange")  # (1 or N, nu, 2)
        lo, hi = ctrl_range[..., 0], ctrl_range[..., 1]
        arm, fingers = self._arm_act, self._finger_act
        target = ctrl[:, arm] + ACTION_SCALE * a[:, :5]
        ctrl[:, arm] = torch.minimum(torch.maximum(target, lo[:, arm]), hi[:, arm])
        flo, fhi = lo[:, fingers], hi[:, fingers]
        ctrl[:, fingers] = flo + (a[:, 5:6] + 1.0) / 2.0 * (fhi - flo)

    def observe(self, worlds: BatchedWorlds) -> torch.Tensor:
        """The state observation ``(N, 30)`` float32 (``STATE_LAYOUT``)."""
        qpos, qvel = self._t(worlds, "qpos"), self._t(worlds, "qvel")
        ee, obj, target = self._positions(worlds)
        return torch.cat((qpos[:, self._arm_qadr], qvel[:, self._arm_dadr],
                          qpos[:, self._finger_qadr].sum(dim=1, keepdim=True), ee, obj,
                          qpos[:, self._quat], target, obj - ee, target - obj), dim=1)

    def outcome(self, worlds: BatchedWorlds, actions: torch.Tensor, *, last: torch.Tensor,
                episode_return: torch.Tensor) -> StepOutcome:
        """Reward, termination (= success) and success of the step just taken; updates the
        :attr:`succeeded` latch (call once per step)."""
        ee, obj, target = self._positions(worlds)
        if self.kind == "Reach":
            d = torch.linalg.vector_norm(ee - target, dim=-1)
            reward, success = -d, d < self.threshold
        else:
            d_ee = torch.linalg.vector_norm(ee - obj, dim=-1)
            if self.kind == "Push":
                d_obj = torch.linalg.vector_norm(obj[:, :2] - target[:, :2], dim=-1)
                rest = self._table_top(worlds) + sc.OBJECT_HALF_SIZE
                success = (d_obj < self.threshold) & ((obj[:, 2] - rest).abs() < ON_TABLE_TOL)
            else:
                d_obj = torch.linalg.vector_norm(obj - target, dim=-1)
                success = d_obj < self.threshold
            reward = -d_obj - EE_WEIGHT * d_ee
        reward = reward + SUCCESS_BONUS * (success & ~self.succeeded)
        self.succeeded |= success
        return StepOutcome(reward=reward, terminated=success.clone(), success=success)

    # ---------------------------------------------------------------- helpers

    def _positions(self, worlds: BatchedWorlds
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """End-effector, box and target positions, each ``(N, 3)`` [m]."""
        return (self._t(worlds, "site_xpos")[:, self._grip],
                self._t(worlds, "xpos")[:, self._object],
                self._t(worlds, "mocap_pos")[:, self._target])

    def _table_top(self, worlds: BatchedWorlds) -> torch.Tensor:
        """Each world's table-top height ``(N,)`` or ``(1,)`` [m] (``scene.table_top_z``)."""
        body_z = self._t(worlds, "m.body_pos")[:, self._table_body, 2]
        geom_z = self._t(worlds, "m.geom_pos")[:, self._table_geom, 2]
        half = self._t(worlds, "m.geom_size")[:, self._table_geom, 2]
        return body_z + geom_z + half

    def _t(self, worlds: BatchedWorlds, name: str) -> torch.Tensor:
        """The torch view of ``worlds``' array ``name`` (cached)."""
        return self._views(worlds, name)


def _index(ids: Any) -> slice | list[int]:
    """Ids as a slice where they are consecutive (in-place writes through basic indexing)."""
    ids = [int(i) for i in ids]
    if ids == list(range(ids[0], ids[0] + len(ids))):
        return slice(ids[0], ids[0] + len(ids))
    return ids


@register_task(FAMILY)
def tabletop_task(env_id: str, env: Any, worlds: BatchedWorlds) -> TabletopTask:
    """The batched task of ``robogen/<Task>-v0`` (a :data:`~robogen.batched.tasks.TaskFactory`).

    Raises:
        InvalidSpecError: On an id that is not a built-in tabletop task; the message names
            ``--backend ray``.
    """
    if env_id not in TASK_IDS:
        raise InvalidSpecError(UNSUPPORTED_ENV.format(
            env_id=env_id, why=f"it is not a built-in tabletop task ({', '.join(TASK_IDS)})",
            families=", ".join(f"{f}/" for f in sorted(TASK_FAMILIES))))
    return TabletopTask(env_id, find_scene(env), worlds)
