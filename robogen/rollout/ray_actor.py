"""The body of a Ray backend's actor: an :class:`~robogen.rollout.worker.EpisodeWorker` (envs
and policy made once) serving whole units, set-up errors kept for the driver.

Part of the Ray backend (:mod:`robogen.rollout.ray_backend`): Ray is imported only in the
``rollout/ray_*.py`` modules, and here only inside the actor's process.
"""

from __future__ import annotations

import json
import os
import traceback
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from robogen.types import EvalManifest, WorkUnit, to_dict


def _describe(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    msg = f"{type(e).__name__}: {e}"
    msg = msg if len(msg) <= 800 else msg[:797] + "..."
    return msg + where


KEEP_WORKERS = 2
"""Episode workers (envs and policy) a Ray actor keeps for the manifests it ran last."""


class _WorkerActor:
    """Ray actor body wrapping :class:`~robogen.rollout.worker.EpisodeWorker`.

    A set-up exception is kept and returned by :meth:`ping` (the driver raises it as a
    :class:`WorkerSetupError`), instead of killing the actor with Ray's own wrapper.
    A later backend of the same process can adopt the actor (:func:`reuse_workers`): it then
    loads that backend's manifest (:meth:`load`). The actor keeps the workers of the last
    :data:`KEEP_WORKERS` manifests it used, so that a run's videos are filmed with the policy
    and envs its episodes ran on (:meth:`call`); older ones are closed (memory).
    """

    def __init__(self, manifest: dict[str, Any], device: str, worker_index: int = 0,
                 load_budget_s: float | None = None, gpu_share: float = 0.0,
                 render_device: str = "auto") -> None:
        self._device = device
        self._load_budget_s = load_budget_s
        self._workers: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._worker: Any = None
        self._error: str | None = None
        self._plugin: str | None = None
        self._placement: dict[str, Any] | None = None
        try:
            import ray

            from robogen.rollout.gpu import prepare_worker

            # before any framework or MuJoCo context exists in this process
            placement = prepare_worker(gpu_share, render_device,  # type: ignore[arg-type]
                                       worker=f"pid:{os.getpid()}",
                                       node=ray.get_runtime_context().get_node_id())
            import robogen._gl  # noqa: F401
            from robogen._console import route_mujoco_warnings

            route_mujoco_warnings()
        except Exception as e:  # noqa: BLE001 - reported to the driver as a set-up error
            self._error = _describe(e)
            return
        self.load(manifest, worker_index)
        if self._error is None:
            self._finish_placement(placement, manifest)

    def _finish_placement(self, placement: Any, manifest: dict[str, Any]) -> None:
        """Record the OpenGL renderer of a worker that renders (pixels, or a GPU share) and
        refuse a GPU worker that renders on the CPU."""
        from robogen.rollout.gpu import finish_placement

        try:
            if placement.gpu_share > 0 or "pixels" in str(manifest.get("obs_mode", "")):
                placement = finish_placement(placement)
        except Exception as e:  # noqa: BLE001 - reported to the driver as a set-up error
            self._error = _describe(e)
        self._placement = placement.to_dict()

    def _worker_of(self, manifest: dict[str, Any], worker_index: int) -> Any:
        from robogen.rollout.worker import EpisodeWorker

        key = (_manifest_key(manifest), worker_index)
        if key in self._workers:
            self._workers.move_to_end(key)
            return self._workers[key]
        worker = EpisodeWorker(EvalManifest.from_dict(manifest), device=self._device,
                               worker_index=worker_index, load_budget_s=self._load_budget_s)
        self._workers[key] = worker
        while len(self._workers) > KEEP_WORKERS:  # the least recently used, never the current
            old_key = next(k for k in self._workers if self._workers[k] is not self._worker)
            self._workers.pop(old_key).close()
        return worker

    def load(self, manifest: dict[str, Any], worker_index: int,
             load_budget_s: float | None = None) -> dict[str, Any]:
        """Run ``manifest``'s units from now on (its worker made unless this process has it);
        answers like :meth:`ping`."""
        from robogen.errors import PluginError

        self._plugin = None
        if load_budget_s is not None:
            self._load_budget_s = load_budget_s
        try:
            self._worker, self._error = self._worker_of(manifest, worker_index), None
        except PluginError as e:  # the plug-in's own error, named as such by the driver
            self._error, self._plugin = str(e.__cause__ or e), e.module
        except Exception as e:  # noqa: BLE001 - reported to the driver as a set-up error
            self._error = _describe(e)
        return self.ping()

    def ping(self) -> dict[str, Any]:
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "error": self._error, "plugin": self._plugin, "placement": self._placement}

    def run_unit(self, unit: dict[str, Any], budget_s: float | None = None
                 ) -> list[dict[str, Any]]:
        results = self._worker.run_unit(WorkUnit.from_dict(unit), budget_s=budget_s)
        return [to_dict(r) for r in results]

    def call(self, fn: Callable[..., Any], manifest: dict[str, Any], *args: Any) -> Any:
        """``fn(*args, worker=W)``, W this process's worker of ``manifest`` (made if needed)."""
        text = _manifest_key(manifest)
        index = next((i for t, i in self._workers if t == text), 0)
        return fn(*args, worker=self._worker_of(manifest, index))


def _manifest_key(manifest: dict[str, Any]) -> str:
    """The key of a manifest's worker: the manifest without its ``backend`` record (where
    the episodes ran, filled in after the actors loaded it), so that a call made with the
    stored manifest (filming a failure video) finds the worker the units ran on."""
    return json.dumps({k: v for k, v in manifest.items() if k != "backend"}, sort_keys=True)
