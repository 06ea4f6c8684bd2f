"""Run work units: a batch of envs stepped in lockstep so the policy acts on batches.

The same :class:`EpisodeWorker` runs inside the serial backend and inside each
Ray actor. A unit is always run as one batch of ``len(unit.episode_indices)``
env slots, whichever backend or worker runs it, so results do not depend on
the backend (the batch a policy sees is a function of the unit only).
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from typing import Any

import numpy as np

from robogen.envs.observations import pixels_digest
from robogen.envs.render import resolve_frames
from robogen.errors import InfrastructureError, RobogenError
from robogen.rollout.observers import (
    EpisodeObserver,
    EpisodeState,
    FrameHook,
    HookObserver,
    TransitionHook,
    build_observers,
    end_fields,
)
from robogen.rollout.plan import episode_seed, perturbation_seed
from robogen.rollout.units import (
    DEADLINE_MARGIN_S,
    DEADLINE_SHARE,
    NO_POLICY,
    UnitAborted,
    _error_cause,
    _infra_cause,
    _short_error,
    _stack,
    accepts_slots,
    make_env,
    policy_context,
    serial_render_lanes,
    unit_deadline,
    unit_result,
)
from robogen.types import EpisodeResult, EvalManifest, WorkUnit

__all__ = [
    "DEADLINE_MARGIN_S",
    "DEADLINE_SHARE",
    "NO_POLICY",
    "EpisodeWorker",
    "UnitAborted",
    "accepts_slots",
    "make_env",
    "policy_context",
    "serial_render_lanes",
    "unit_deadline",
    "unit_result",
]


class EpisodeWorker:
    """Loads the policy once and runs work units of a manifest.

    A policy whose loading fails in its infrastructure (an
    :class:`~robogen.errors.InfrastructureError`, e.g. a policy server that died after the
    driver probed it) does not fail the worker: each unit tries to load it again, and a
    unit that cannot has its episodes recorded as ``infra_error``.

    Args:
        manifest: The evaluation manifest.
        device: Device for the policy (``cpu`` or ``cuda``).
        worker_index: Index of this worker in its backend (``LoadContext.worker_index``).
        render_lanes: Render threads (a GL context each) drawing the envs' pixel frames at
            once (:func:`serial_render_lanes` for a worker that has the process to itself;
            1 in a Ray worker, which has one core).
        load_budget_s: Wall-clock budget [s] of loading the policy here (a replacement worker
            loads while its backend waits: :func:`~robogen.rollout.backend.load_budget_s`);
            the load stops waiting on the infrastructure as in a unit
            (:func:`unit_deadline`). None: no bound.

    Raises:
        PluginError: If a plug-in module the manifest lists cannot be imported here (before
            anything else: the env family, scheme and axes it registers are needed).
        RobogenError: If the envs cannot be created or the policy cannot be loaded for
            any reason other than its infrastructure (a set-up error).
    """

    def __init__(self, manifest: EvalManifest, device: str = "cpu",
                 worker_index: int = 0, render_lanes: int = 1,
                 load_budget_s: float | None = None) -> None:
        from robogen.perturbations import AXES
        from robogen.plugins import import_plugins

        import_plugins(manifest.plugins, why=" that the run uses")
        for axis in dict.fromkeys(a for c in manifest.conditions for a in c.axes):
            AXES.get(axis)  # an axis this process lacks is a set-up error, not a unit's
        self.manifest = manifest
        self.worker_index = worker_index
        self.render_lanes = max(1, int(render_lanes))
        """Render lanes (threads with a GL context each) the envs' pixel frames are drawn on:
        env ``k`` on lane ``k % render_lanes`` (see :mod:`robogen.envs.render`)."""
        self._device = device
        self._envs: list[Any] = [make_env(manifest)]
        self._scenes: list[Any] = []
        self.policy: Any = None
        self.load_error: str | None = None
        """Why the policy is not loaded (an infrastructure failure), else None."""
        self._load_cause = "infra_error"
        self._deadline = unit_deadline(load_budget_s)
        self._unit_aware: Any = None
        self._registered: list[tuple[str, EpisodeObserver]] = []
        self._hooks = HookObserver()
        self._observers: list[tuple[str, EpisodeObserver]] = []  # registered, then hooks
        self._action_shape: tuple[int, ...] = tuple(
            getattr(self._envs[0].action_space, "shape", ()) or ()
        )
        self.abort = threading.Event()
        """Set (from any thread) to stop the unit being run between two steps
        (:class:`UnitAborted`): a closing run does not wait for its last unit."""
        if not self._load_policy():
            self._attach()  # the envs still draw deferred frames

    def _load_policy(self) -> bool:
        """Load the policy if it is not loaded; False (and :attr:`load_error`) if its
        infrastructure failed."""
        if self.policy is not None:
            return True
        from robogen.policies import load_policy, policy_capabilities
        from robogen.policies.base import UnitAware

        m = self.manifest
        ctx = policy_context(m.env_id, m.obs_mode, m.vecnormalize, self._envs[0],
                             self._device, self.worker_index, deadline=self._deadline)
        try:
            self.policy = load_policy(m.policy, ctx)
        except InfrastructureError as e:
            self.load_error, self._load_cause = _short_error(e), _error_cause(e)
            return False
        self.load_error = None
        torch = sys.modules.get("torch")
        if torch is not None:  # a torch policy (SB3, a plug-in): one thread per worker, as
            torch.set_num_threads(1)  # its envs and the other workers use the other cores
        # (torch is not imported for the others: ~2-3 s of every worker's start for nothing)
        caps = policy_capabilities(self.policy)
        self._takes_slots, self._takes_seeds = caps.slots, caps.seeds
        self._unit_aware = self.policy if isinstance(self.policy, UnitAware) else None
        self._registered = build_observers(m, self.policy)
        self._update_observers()
        self._attach()
        return True

    @property
    def frame_hook(self) -> FrameHook | None:
        """Called as ``frame_hook(episode_index, env)`` after the reset and after every step
        (videos); None: not called (:class:`~robogen.rollout.observers.HookObserver`)."""
        return self._hooks.frame_hook

    @frame_hook.setter
    def frame_hook(self, hook: FrameHook | None) -> None:
        self._hooks.frame_hook = hook
        self._update_observers()

    @property
    def transition_hook(self) -> TransitionHook | None:
        """Called as ``transition_hook(episode_index, obs, action, reward)`` for every step
        taken (``obs``: the one the action was chosen from; demonstrations); None: not called."""
        return self._hooks.transition_hook

    @transition_hook.setter
    def transition_hook(self, hook: TransitionHook | None) -> None:
        self._hooks.transition_hook = hook
        self._update_observers()

    @property
    def observers(self) -> tuple[EpisodeObserver, ...]:
        """The observers this worker runs (:mod:`robogen.rollout.observers`), in order."""
        return tuple(o for _, o in self._observers)

    def _update_observers(self) -> None:
        self._observers = [*self._registered, *([("hooks", self._hooks)] if self._hooks.hooked
                                                 else [])]

    def _attach(self) -> None:
        from robogen.envs.base import find_scene
        from robogen.policies.base import PrivilegedPolicy, SceneViewing

        self._scenes = [find_scene(e) for e in self._envs]
        if self.manifest.obs_mode != "state":
            for k, scene in enumerate(self._scenes):
                scene.defer_frames = True  # draw env k's frame while env k+1 steps
                scene.render_lane = k % self.render_lanes  # and on lanes: two frames at once
        if isinstance(self.policy, PrivilegedPolicy):
            self.policy.attach(self._scenes)
        elif isinstance(self.policy, SceneViewing):
            self.policy.view_scenes(self._scenes)

    def _ensure_envs(self, n: int) -> None:
        if len(self._envs) < n:
            self._envs.extend(make_env(self.manifest) for _ in range(n - len(self._envs)))
            self._attach()

    def close(self) -> None:
        """Close every env slot's env (best effort: teardown errors are dropped)."""
        for e in self._envs:
            try:
                e.close()
            except Exception:  # noqa: BLE001 - closing is best effort (EGL teardown noise)
                pass

    @property
    def scenes(self) -> tuple[Any, ...]:
        """The :class:`~robogen.envs.base.MujocoScene` of each env slot (at least one)."""
        from robogen.envs.base import find_scene

        return tuple(find_scene(e) for e in self._envs)

    def can_run_alone(self) -> bool:
        """Whether :meth:`run_unit` may run one episode ``alone`` (see there): the policy is
        loaded and reads no simulator state (a policy with ``slots`` sees only the episode's
        row, at its own slot)."""
        from robogen.policies.base import PrivilegedPolicy

        return self._load_policy() and not isinstance(self.policy, PrivilegedPolicy)

    def run_unit(self, unit: WorkUnit, *, alone: int | None = None,
                 budget_s: float | None = None) -> list[EpisodeResult]:
        """Run every episode of ``unit`` as one lockstep batch; never raises for an episode.

        Args:
            unit: The unit.
            alone: Run only this episode of the unit (a replay for a video): its env is the
                only one stepped, but the policy still sees the unit's batch layout (without
                ``slots``: as many rows, this episode's at its own row, every other row a
                copy of it; with ``slots``: its row alone, at its own slot), so a policy
                whose rows do not depend on the other rows' contents acts exactly as in the
                whole unit. Needs :meth:`can_run_alone`.
            budget_s: The unit's wall-clock budget [s] (the backend's watchdog); the worker
                waits on the infrastructure until :func:`unit_deadline` (a policy that is
                :class:`~robogen.policies.base.UnitAware` is told the deadline, loading the
                policy is bounded by it). None: no bound.

        Returns:
            One result per episode of the unit (only ``alone``'s when given).

        Raises:
            ValueError: If ``alone`` is not an episode of ``unit`` or the policy cannot run
                an episode alone.
        """
        m = self.manifest
        self._deadline = unit_deadline(budget_s)
        if not self._load_policy():
            return self._unloaded(unit)
        if self._unit_aware is not None:
            self._unit_aware.begin_unit(self._deadline)
        rows = self._rows(unit, alone)
        self._ensure_envs(len(rows))
        envs: dict[int, Any] = dict(zip(rows, self._envs, strict=False))  # slot -> env
        start = time.perf_counter()
        slots = [EpisodeState(i, episode_seed(m.seed, i)) for i in unit.episode_indices]
        for k, slot in enumerate(slots):
            slot.done = k not in envs  # not run: its row repeats the episode run alone
        self._reset_envs(unit, envs, slots, start)
        self._reset_policy(slots, start)
        self._run_steps(unit, envs, slots, start)
        self._resolve_frames(slots, range(len(slots)), start)  # the last frames (and errors)
        return [self._result(unit, k, slots[k]) for k in rows]

    def _unloaded(self, unit: WorkUnit) -> list[EpisodeResult]:
        """The unit's results when the policy could not be loaded (its infrastructure)."""
        cause, error = self._load_cause, NO_POLICY.format(error=self.load_error,
                                                          cause=self._load_cause)
        return [unit_result(self.manifest, unit, i, episode_return=0.0, length_steps=0,
                            success=False, cause=cause, error=error, perturbations_json="[]",
                            changed_axes=(), wall_time_s=0.0)
                for i in unit.episode_indices]

    def _rows(self, unit: WorkUnit, alone: int | None) -> list[int]:
        """The unit's env slots to run: all, or ``alone``'s (see :meth:`run_unit`)."""
        episodes = unit.episode_indices
        if alone is None:
            return list(range(len(episodes)))
        if alone in episodes and self.can_run_alone():
            return [episodes.index(alone)]
        raise ValueError(f"cannot run episode {alone} of unit {unit.unit_id} (episodes "
                         f"{list(episodes)}) alone with policy {self.manifest.policy!r}")

    def _reset_envs(self, unit: WorkUnit, envs: dict[int, Any], slots: list[EpisodeState],
                    start: float) -> None:
        """Reset the unit's envs, wait for their first frames, tell the observers."""
        started = [k for k, env in envs.items() if self._reset_env(unit, env, slots[k], start)]
        self._resolve_frames(slots, range(len(slots)), start, setup=True)
        if self.manifest.policy_obs_mode != "state":  # the report checks a visual axis is in view
            for slot in slots:
                slot.first_frame = pixels_digest(slot.obs)
        for _, observer in self._observers:
            for k in started:
                observer.on_reset(k, slots[k], envs[k])

    def _reset_env(self, unit: WorkUnit, env: Any, slot: EpisodeState, start: float) -> bool:
        """Reset ``env`` for ``slot``'s episode; False (the episode recorded) if it failed.
        A bad condition (a :class:`RobogenError`) is a set-up error and propagates."""
        env.set_levels(unit.condition.levels)
        pseed = perturbation_seed(self.manifest.seed, slot.episode_index)
        try:
            slot.obs, info = env.reset(seed=slot.seed, options={"perturbation_seed": pseed})
        except InfrastructureError as e:  # e.g. no frame from the render thread
            self._finish(slot, start, cause=_error_cause(e), error=_short_error(e))
            return False
        except RobogenError:
            raise  # a bad condition is a setup error, not an episode outcome
        except Exception as e:  # noqa: BLE001 - recorded with its cause
            self._finish(slot, start, cause="sim_unstable", error=_short_error(e))
            return False
        rg = info.get("robogen", {})
        slot.perturbations = json.dumps(rg.get("perturbations", []))
        slot.changed = tuple(rg.get("changed_axes", ()))
        return True

    def _reset_policy(self, slots: list[EpisodeState], start: float) -> None:
        """The policy's ``reset`` of every slot; if it raises, the running episodes fail."""
        try:
            if self._takes_seeds:
                self.policy.reset(list(range(len(slots))), seeds=[s.seed for s in slots])
            else:
                self.policy.reset(list(range(len(slots))))
        except Exception as e:  # noqa: BLE001 - a raising reset fails the unit's episodes
            for slot in slots:
                if not slot.done:
                    self._finish(slot, start, cause=_error_cause(e), error=_short_error(e))

    def _run_steps(self, unit: WorkUnit, envs: dict[int, Any], slots: list[EpisodeState],
                   start: float) -> None:
        """Step the running episodes in lockstep until every one is done (raises
        :class:`UnitAborted` if :attr:`abort` is set between two steps)."""
        action_space = self._envs[0].action_space
        low, high = getattr(action_space, "low", None), getattr(action_space, "high", None)
        # With deferred frames and a policy that acts on any subset of slots, the batch
        # runs as two interleaved halves: one half's frames are drawn on the render thread
        # while the policy acts for, and the physics steps, the other half. The halves are
        # the first and second half of the running slots, split again at every step so
        # that they stay even as episodes end (the frames are drawn in slot order).
        # (per step: keep this loop lean, a dm_control state step is ~100 us of physics)
        n = len(slots)
        frames = self.manifest.obs_mode != "state"  # pixel observations come deferred
        halves = self._takes_slots and frames and n > 1
        everyone = list(range(n))
        step = self._step
        while True:
            running = [k for k in everyone if not slots[k].done]
            if not running:
                break
            if self.abort.is_set():
                raise UnitAborted(f"unit {unit.unit_id} stopped: its run is being closed")
            if halves:
                middle = (len(running) + 1) // 2
                groups: tuple[list[int], ...] = (running[:middle], running[middle:])
            else:
                groups = (everyone,)
            for group in groups:
                if frames:  # finished slots too: a policy without ``slots`` sees every
                    self._resolve_frames(slots, group, start)  # slot's last frame
                live = [k for k in group if not slots[k].done]
                if not live:
                    continue
                actions = self._act(slots, live, start)
                if low is not None and high is not None:  # one call for the batch: the
                    # same values as row by row; np.clip's, without its ~3 us of dispatch
                    actions = np.minimum(np.maximum(actions, low), high)
                else:  # a copy: the policy may reuse its output buffer
                    actions = actions.copy()
                for k in live:
                    if not slots[k].done:
                        step(k, envs[k], slots[k], actions[k], start)

    def _resolve_frames(
        self, slots: list[EpisodeState], rows: Any, start: float, setup: bool = False
    ) -> None:
        """Wait for the pixel observations drawn on the render thread (``defer_frames``).

        A frame that failed fails its episode like a failed step (``sim_unstable``), one
        not drawn within :data:`~robogen.envs.render.FRAME_TIMEOUT_S` as ``infra_timeout``;
        at reset a robogen error (e.g. a bad camera) is a setup error and propagates.
        """
        for k in rows:
            slot = slots[k]
            try:
                slot.obs = resolve_frames(slot.obs)
            except Exception as e:  # noqa: BLE001 - recorded with its cause
                infra = _infra_cause(e)
                if setup and isinstance(e, RobogenError) and infra is None:
                    raise
                slot.obs = None
                self._finish(slot, start, cause=infra or "sim_unstable", error=_short_error(e))

    def _call(self, obs: Any, rows: list[int]) -> np.ndarray:
        if self._takes_slots:
            out = self.policy.act(obs, deterministic=True, slots=rows)  # type: ignore[call-arg]
        else:
            out = self.policy.act(obs, deterministic=True)
        actions = np.asarray(out, dtype=np.float32)
        want = (len(rows), *self._action_shape)
        if actions.shape != want:
            raise ValueError(f"policy returned actions of shape {actions.shape}, expected {want}")
        return actions

    def _act(self, slots: list[EpisodeState], live: list[int], start: float) -> np.ndarray:
        """Actions indexed by slot; a raising or non-finite policy fails only the culprit episodes.

        A policy that accepts ``slots`` sees only the live rows; others see every
        slot (finished ones repeat their last observation).
        """
        rows = live if self._takes_slots else list(range(len(slots)))
        obs = _stack(
            [slots[k].obs if slots[k].obs is not None else slots[live[0]].obs for k in rows]
        )
        actions: np.ndarray | None
        try:
            batch = self._call(obs, rows)
            if len(rows) == len(slots):  # every slot's row, in slot order
                actions = batch
            else:
                actions = np.zeros((len(slots), *batch.shape[1:]), np.float32)
                actions[rows] = batch
        except Exception:  # noqa: BLE001 - find which episodes make the policy fail
            actions = None
        if actions is None:
            per: list[np.ndarray | None] = [None] * len(slots)
            for k in live:
                try:
                    per[k] = self._call(_stack([slots[k].obs]), [k])[0]
                except Exception as e:  # noqa: BLE001
                    self._finish(slots[k], start, cause=_error_cause(e), error=_short_error(e))
            shape = next((r.shape for r in per if r is not None), (1,))
            actions = np.stack([r if r is not None else np.zeros(shape, np.float32) for r in per])
        if np.isfinite(actions).all():  # the common case: one call per batch
            return actions
        finite: np.ndarray = np.asarray(
            np.isfinite(actions.reshape(len(actions), -1)).all(axis=1))
        for k in live:
            if not slots[k].done and not finite[k]:
                self._finish(
                    slots[k],
                    start,
                    cause="policy_error",
                    error=f"non-finite action {actions[k].tolist()!r}",
                )
        return actions

    def _step(self, k: int, env: Any, slot: EpisodeState, action: np.ndarray,
              start: float) -> None:
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except Exception as e:  # noqa: BLE001 - SimulationUnstableError and MuJoCo errors
            self._finish(slot, start, cause=_infra_cause(e) or "sim_unstable",
                         error=_short_error(e))
            return
        slot.steps += 1
        reward = float(reward)
        for _, observer in self._observers:
            observer.on_step(k, slot, env, slot.obs, action, reward)
        if not math.isfinite(reward):
            self._finish(slot, start, cause="sim_unstable", error=f"non-finite reward {reward!r}")
            return
        slot.ret += reward
        slot.obs = obs
        if slot.first_success is None and info.get("success"):
            slot.first_success = slot.steps
        if terminated or truncated:
            if bool(info.get("success", False)):
                self._finish(slot, start, success=True)
            else:
                self._finish(slot, start, cause="terminated" if terminated else "timeout")

    @staticmethod
    def _finish(slot: EpisodeState, start: float, *, success: bool = False,
                cause: str | None = None, error: str | None = None) -> None:
        slot.done = True
        slot.success = success
        slot.cause = None if success else cause
        slot.error = error
        slot.wall_time_s = time.perf_counter() - start

    def _result(self, unit: WorkUnit, k: int, s: EpisodeState) -> EpisodeResult:
        return unit_result(
            self.manifest, unit, s.episode_index, episode_return=s.ret, length_steps=s.steps,
            success=s.success, cause=s.cause, error=s.error, perturbations_json=s.perturbations,
            changed_axes=s.changed, wall_time_s=s.wall_time_s,
            first_success_step=s.first_success, first_frame_digest=s.first_frame,
            **end_fields(self._observers, k, s),
        )
