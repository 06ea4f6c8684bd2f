"""Ray backend: long-lived actors, one per core, each running whole work units.

``ray.init()`` starts an embedded local cluster unless ``address`` names an
existing one. Each actor creates its envs and loads the policy once, then
runs units handed to it one at a time (never per-step calls: inter-process
cost per step would dominate). Results stream back as units finish. An actor
that dies (segfault, OOM) is replaced and its unit retried once; a unit that
kills two actors is recorded as failed episodes with cause ``sim_unstable``
and the error, never dropped.

Ray is imported only in this module (an optional edge of the package).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from robogen.errors import DependencyMissingError
from robogen.types import EpisodeResult, EvalManifest, WorkUnit, to_dict

_WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "LP_NUM_THREADS": "0",
    "PYTHONWARNINGS": "ignore",
}


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is a core dependency
        raise DependencyMissingError("the ray backend", "ray", "ray") from e
    return ray


class _WorkerActor:
    """Ray actor body wrapping :class:`~robogen.rollout.worker.EpisodeWorker`."""

    def __init__(self, manifest: dict[str, Any], device: str) -> None:
        import robogen._gl  # noqa: F401
        from robogen._console import route_mujoco_warnings
        from robogen.rollout.worker import EpisodeWorker

        route_mujoco_warnings()
        self._worker = EpisodeWorker(EvalManifest.from_dict(manifest), device=device)

    def run_unit(self, unit: dict[str, Any]) -> list[dict[str, Any]]:
        results = self._worker.run_unit(WorkUnit.from_dict(unit))
        return [to_dict(r) for r in results]

    def ping(self) -> bool:
        return True


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Connect to ``address`` or start an embedded local cluster (idempotent)."""
    ray = _ray()
    if ray.is_initialized():
        return
    env_vars = dict(_WORKER_ENV)
    env_vars["MUJOCO_GL"] = os.environ.get("MUJOCO_GL", "egl")
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": True,
        "runtime_env": {"env_vars": env_vars},
        "logging_level": "ERROR",
    }
    if address:
        kwargs["address"] = address
    elif num_cpus is not None:
        kwargs["num_cpus"] = num_cpus
    ray.init(**kwargs)


class RayPool:
    """Long-lived Ray actors for one manifest; run batches of units on them.

    Args:
        manifest: The evaluation manifest (sent to each actor once).
        num_workers: Number of actors (each requests one CPU).
        address: Address of an existing cluster; None starts a local one.
        num_gpus_per_worker: GPUs each actor requests (policies then run on ``cuda``).
    """

    def __init__(
        self,
        manifest: EvalManifest,
        num_workers: int,
        *,
        address: str | None = None,
        num_gpus_per_worker: float = 0.0,
    ) -> None:
        ray = _ray()
        self._started_here = not ray.is_initialized()
        init_ray(address, num_cpus=None if address else max(num_workers, os.cpu_count() or 1))
        self._device = "cuda" if num_gpus_per_worker > 0 else "cpu"
        self._actor_cls = ray.remote(num_cpus=1, num_gpus=num_gpus_per_worker)(_WorkerActor)
        self.manifest = manifest
        self._mdict = to_dict(manifest)
        self.actors = [self._new_actor() for _ in range(max(1, num_workers))]

    def _new_actor(self) -> Any:
        return self._actor_cls.remote(self._mdict, self._device)

    def wait_ready(self) -> None:
        """Block until every actor has loaded its policy and envs."""
        _ray().get([a.ping.remote() for a in self.actors])

    def run(
        self, units: Sequence[WorkUnit], on_unit: Callable[[WorkUnit, list[EpisodeResult]], None]
    ) -> None:
        """Run ``units``, one at a time per actor, calling ``on_unit`` in the driver as each ends.

        An actor that dies is replaced and its unit retried once; a unit that
        kills two actors is recorded as ``sim_unstable`` failures.
        """
        ray = _ray()
        pending = list(units)[::-1]
        attempts: dict[int, int] = {}
        running: dict[Any, tuple[int, WorkUnit]] = {}

        def submit(slot: int) -> None:
            if pending:
                unit = pending.pop()
                running[self.actors[slot].run_unit.remote(to_dict(unit))] = (slot, unit)

        for slot in range(len(self.actors)):
            submit(slot)
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            slot, unit = running.pop(done[0])
            try:
                rows = ray.get(done[0])
            except ray.exceptions.RayActorError as e:
                attempts[unit.unit_id] = attempts.get(unit.unit_id, 0) + 1
                self.actors[slot] = self._new_actor()
                if attempts[unit.unit_id] < 2:
                    pending.append(unit)
                else:
                    on_unit(unit, _crashed(self.manifest, unit, e))
                submit(slot)
                continue
            on_unit(unit, [EpisodeResult.from_dict(r) for r in rows])
            submit(slot)

    def close(self, shutdown: bool = True) -> None:
        """Kill the actors; shut Ray down if this pool started it and ``shutdown``."""
        ray = _ray()
        for a in self.actors:
            try:
                ray.kill(a)
            except Exception:  # noqa: BLE001 - best effort
                pass
        self.actors = []
        if shutdown and self._started_here:
            ray.shutdown()


def run_units_ray(
    manifest: EvalManifest,
    units: Sequence[WorkUnit],
    on_unit: Callable[[WorkUnit, list[EpisodeResult]], None],
    *,
    num_workers: int,
    address: str | None = None,
    num_gpus_per_worker: float = 0.0,
    shutdown: bool = True,
) -> None:
    """Run ``units`` on ``num_workers`` Ray actors, calling ``on_unit`` as each finishes.

    Args:
        manifest: The evaluation manifest (sent to each actor once).
        units: Units still to run.
        on_unit: Called in the driver with each finished unit and its results.
        num_workers: Number of actors (each requests one CPU); capped at ``len(units)``.
        address: Address of an existing cluster; None starts a local one.
        num_gpus_per_worker: GPUs each actor requests (policies then run on ``cuda``).
        shutdown: Shut Ray down at the end if this call started it.
    """
    if not units:
        return
    pool = RayPool(
        manifest,
        max(1, min(num_workers, len(units))),
        address=address,
        num_gpus_per_worker=num_gpus_per_worker,
    )
    try:
        pool.run(units, on_unit)
    finally:
        pool.close(shutdown=shutdown)


def _crashed(manifest: EvalManifest, unit: WorkUnit, e: BaseException) -> list[EpisodeResult]:
    from robogen.rollout.worker import unit_result

    msg = f"worker process died twice running this unit: {type(e).__name__}"
    return [
        unit_result(manifest, unit, i, episode_return=0.0, length_steps=0, success=False,
                    cause="sim_unstable", error=msg, perturbations_json="[]", changed_axes=(),
                    wall_time_s=0.0)
        for i in unit.episode_indices
    ]
