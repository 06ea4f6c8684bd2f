# pyright: reportAttributeAccessIssue=false
# (mujoco's compiled bindings ship no stubs for these attributes)
"""``robogen eval --backend batched``: a run's episodes on N MuJoCo Warp worlds of one scene.

:class:`BatchedBackend` implements the rollout :class:`~robogen.rollout.backend.Backend`
protocol, so the session, store, resume, report, compare and check do not know which backend
ran. :meth:`~BatchedBackend.start` loads the policy in this process, builds one host env
(``PerturbedEnv``) and the :class:`~robogen.batched.worlds.BatchedWorlds` on the device, and
refuses (``InvalidSpecError``, exit 2, before anything is written) what it cannot run: an
axis outside :data:`~robogen.batched.fields.BATCHED_AXES` or a draw that edits the model's
structure in any condition's episodes, an env family without a batched task, a policy that
reads the simulator (scripted experts). :meth:`~BatchedBackend.run` packs the units'
episodes into world slots (:class:`~robogen.batched.slots.SlotBook`), resets each on the host
exactly as the serial backend does and copies it in, steps every world in lock-step
(:class:`~robogen.batched.lockstep.Lockstep`), refills a finished world with the next
pending episode, and hands each unit to ``on_unit`` once all of its episodes are done, with
:class:`~robogen.types.EpisodeResult` s built as the serial worker builds them.

Importing this module registers the backend as ``batched`` in
:data:`robogen.rollout.backends.BACKENDS` (``robogen.runs`` imports it for such a run).

Not done here: per-unit wall-clock budgets and watchdog retries (one process steps every
world; Ctrl-C or a kill stops the run and ``--resume`` reruns the unfinished units) and
policy-server latency (``remote:`` policies are refused by the config). ``--safety`` is read
on the device (:mod:`robogen.batched.observed`).
Pixel policies (``pixels``, ``state+pixels``) see frames of MuJoCo Warp's batch renderer
(:class:`~robogen.batched.render.BatchRenderer`) at the camera and size the serial env
renders for them; those frames differ from OpenGL's by about one level in 255, which moves
the shipped pixel policies' success (``docs/benchmarks.md``): compare pixel results across
backends with care. Failure videos replay the chosen episodes on the serial path after the
run (:mod:`robogen.runs.failure_videos`), as for every backend.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robogen.batched.fields import BATCHED_AXES, get_field, sample_perturbations
from robogen.batched.lockstep import Ended, Lockstep
from robogen.batched.observed import one_torch_thread, safety_columns, start_safety
from robogen.batched.slots import SlotBook
from robogen.batched.worlds import NOT_BATCHABLE_FIELD, BatchedWorlds, load_mjwarp
from robogen.configs import DEFAULT_CPU_WORLDS, DEFAULT_GPU_WORLDS
from robogen.errors import InvalidSpecError
from robogen.rollout.backend import BackendOptions, OnUnit
from robogen.rollout.backends import BACKENDS
from robogen.rollout.faults import FaultSink, UnitPlacement
from robogen.rollout.gpu import PlacementSink, WorkerPlacement
from robogen.rollout.plan import perturbation_seed
from robogen.rollout.worker import make_env, policy_context, unit_result
from robogen.types import BackendInfo, EpisodeResult, EvalManifest, WorkUnit

PRIVILEGED = (
    "policy {policy!r} reads the simulator of each env (a scripted expert); the batched "
    "backend has no per-episode host simulator to show it: run it with --backend ray"
)
HOST_VIEWS = (
    "policy {policy!r} renders cameras of each env or takes a per-episode instruction; the "
    "batched backend gives a policy its observation only: run it with --backend ray"
)
NO_CAMERA = (
    "env {env_id!r} names no observation camera the batch renderer can draw (render "
    "settings camera {camera!r}, scene cameras {cameras}); run pixel policies on it with "
    "--backend ray"
)
MJWARP_REFUSED = (
    "MuJoCo Warp cannot load {env_id!r}: {error}; run this env with --backend ray"
)
FLOAT_PRECISION = "float32"
"""MuJoCo Warp computes in float32 (C MuJoCo: float64)."""


NO_CUDA_DEVICE = (
    "--sim-device {device}: warp sees {count} CUDA device(s); give --sim-device cpu (or a "
    "device warp lists), or run with --backend ray"
)


def resolve_device(sim_device: str | None) -> str:
    """``sim_device``, else ``cuda:0`` when warp sees a GPU, else ``cpu``.

    Raises:
        InvalidSpecError: If ``sim_device`` names a CUDA device warp does not see.
    """
    if sim_device == "cpu":
        return sim_device
    wp, _ = load_mjwarp()
    count = int(wp.get_cuda_device_count())
    if not sim_device:
        return "cuda:0" if count > 0 else "cpu"
    index = int(sim_device.partition(":")[2] or 0)
    if index >= count:
        raise InvalidSpecError(NO_CUDA_DEVICE.format(device=sim_device, count=count))
    return sim_device


def default_worlds(device: str, episodes: int) -> int:
    """Worlds when ``--worlds`` is not given: the run's episodes, at most
    :data:`DEFAULT_CPU_WORLDS` on the CPU and :data:`DEFAULT_GPU_WORLDS` on a GPU."""
    cap = DEFAULT_CPU_WORLDS if device == "cpu" else DEFAULT_GPU_WORLDS
    return max(1, min(int(episodes), cap))


def batched_versions() -> dict[str, str]:
    """Installed versions of ``mujoco-warp`` and ``warp-lang``."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("mujoco-warp", "warp-lang"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def per_world_fields(manifest: EvalManifest, scene: Any) -> list[str]:
    """The model fields the run's episodes may change, checked batchable.

    Draws every (condition, episode) pair's perturbations as ``PerturbedEnv`` would
    (:func:`~robogen.batched.fields.sample_perturbations`), so an unbatchable axis or draw
    is refused before anything runs.

    Returns:
        ``MjModel`` paths (``body_mass``, ``opt.gravity``) of the drawn perturbations'
        ``MODEL_FIELDS`` that exist in the scene's model, in first-seen order.

    Raises:
        InvalidSpecError: Naming the axis (or draw) and ``--backend ray``.
    """
    drawn = {lv.axis for cond in manifest.conditions for lv in cond.levels if lv.severity > 0}
    refused = sorted(drawn - set(BATCHED_AXES))
    if refused:  # all of them at once, with the --axes that would run
        ok = [a for a in manifest.axes if a in BATCHED_AXES]
        hint = f"give --axes {','.join(ok)} (this run's batchable axes) or " if ok else ""
        names = ", ".join(map(repr, refused))
        raise InvalidSpecError(
            f"ax{'es' if len(refused) > 1 else 'is'} {names} cannot run on the "
            "batched backend (their edits are not per-world model fields yet; batchable axes: "
            f"{', '.join(BATCHED_AXES)}); {hint}run with --backend ray")
    kinds: dict[type, None] = {}
    for cond in manifest.conditions:
        if not any(lv.severity > 0 for lv in cond.levels):
            continue
        for i in range(manifest.n_episodes):
            for p in sample_perturbations(scene, cond.levels,
                                          perturbation_seed(manifest.seed, i)):
                kinds.setdefault(type(p))
    paths: list[str] = []
    for cls in kinds:
        for path in cls.MODEL_FIELDS:  # type: ignore[attr-defined]
            if path in paths:
                continue
            try:
                get_field(scene.model, path)
            except AttributeError:
                continue
            paths.append(path)
    return paths


class BatchedBackend:
    """Runs a manifest's units on N MuJoCo Warp worlds in this process (see the module).

    Args:
        manifest: The evaluation manifest (state observations).
        options: ``worlds`` (None: :func:`default_worlds` of the episodes to run) and
            ``sim_device`` (None: :func:`resolve_device`); the Ray and timeout options are
            not used.
        max_units: At most this many units will run (a resume: the missing ones), None:
            every unit of the manifest.

    Raises:
        DependencyMissingError: Without the ``batched`` extra (names its install command).
    """

    def __init__(self, manifest: EvalManifest, options: BackendOptions,
                 max_units: int | None = None) -> None:
        self.manifest = manifest
        self.options = options
        self.fault_sink: FaultSink | None = None
        self.ran_on: dict[int, UnitPlacement] = {}
        self._placement_sink: PlacementSink | None = None
        self._placement: WorkerPlacement | None = None
        self.device = resolve_device(options.sim_device)
        episodes = len(manifest.conditions) * manifest.n_episodes
        if max_units is not None:
            episodes = min(episodes, max_units * manifest.batch_size)
        self.n_worlds = options.worlds or default_worlds(self.device, episodes)
        self.name = f"batched:{self.device}:{os.getpid()}"
        self._lock: Lockstep | None = None
        self._env: Any = None

    @property
    def placement_sink(self) -> PlacementSink | None:
        """Receives this process's placement (one worker) once the backend started."""
        return self._placement_sink

    @placement_sink.setter
    def placement_sink(self, sink: PlacementSink | None) -> None:
        self._placement_sink = sink
        if sink is not None and self._placement is not None:
            sink(self._placement)

    @property
    def lockstep(self) -> Lockstep | None:
        """The worlds, task, policy and host env once :meth:`start` ran (None before)."""
        return self._lock

    def describe(self) -> BackendInfo:
        """The manifest's record: backend, device, worlds, float32, MJWarp/warp versions."""
        return BackendInfo(kind="batched", device=self.device, worlds=self.n_worlds,
                           float_precision=FLOAT_PRECISION, versions=batched_versions())

    def start(self) -> None:
        """Load the policy, the host env, the worlds and the env's batched task.

        Raises:
            InvalidSpecError: On what this backend cannot run (see the module).
            DependencyMissingError: Without the ``batched`` extra.
            RobogenError: If the policy or env cannot be loaded (as on every backend).
        """
        if self._lock is not None:
            return
        from robogen.batched.tasks import batched_task
        from robogen.envs.base import find_scene
        from robogen.plugins import import_plugins
        from robogen.policies import load_policy, policy_capabilities
        from robogen.policies.base import PrivilegedPolicy, Prompted, SceneViewing

        m = self.manifest
        load_mjwarp()
        one_torch_thread(self.device)
        import_plugins(m.plugins, why=" that the run uses")
        env = make_env(m)
        self._env = env
        try:
            scene = find_scene(env)
            paths = per_world_fields(m, scene)
            torch_device = "cuda" if self.device.startswith("cuda") else "cpu"
            policy = load_policy(m.policy, policy_context(m.env_id, m.obs_mode, m.vecnormalize,
                                                          env, torch_device))
            if isinstance(policy, PrivilegedPolicy):
                raise InvalidSpecError(PRIVILEGED.format(policy=m.policy))
            if isinstance(policy, SceneViewing | Prompted):
                raise InvalidSpecError(HOST_VIEWS.format(policy=m.policy))
            try:
                worlds = BatchedWorlds(scene.model, self.n_worlds, device=self.device)
            except NotImplementedError as e:
                raise InvalidSpecError(MJWARP_REFUSED.format(env_id=m.env_id, error=e)) from e
            textures = "tex_data" in paths
            paths = self._install_fields(worlds, scene.model, paths)
            task = batched_task(m.env_id, env, worlds)
            renderer = None if m.obs_mode == "state" else self._renderer(worlds, scene)
            space = env.action_space
            safety = start_safety(m, worlds, env)
            self._lock = Lockstep(
                worlds, task, env, policy, run_seed=m.seed, max_steps=m.max_steps,
                field_paths=paths, action_low=getattr(space, "low", None),
                action_high=getattr(space, "high", None),
                takes_seeds=policy_capabilities(policy).seeds, safety=safety,
                obs_mode=m.obs_mode, renderer=renderer, textures=textures)
        except BaseException:
            self.close()
            raise
        host = socket.gethostname()
        self._placement = WorkerPlacement(worker=self.name, node=host, host=host,
                                          pid=os.getpid())
        if self._placement_sink is not None:
            self._placement_sink(self._placement)

    def _renderer(self, worlds: BatchedWorlds, scene: Any) -> Any:
        """The batch renderer at the camera and size the serial env renders the policy's
        frames with (``scene.render_settings``; camera ``""``: the scene's first camera).

        Raises:
            InvalidSpecError: If the scene names no camera the model has.
        """
        from robogen.batched.render import BatchRenderer

        rs = scene.render_settings
        cameras = tuple(scene.roles.cameras)
        camera = rs.camera or (cameras[0] if cameras else "")
        if not camera:
            raise InvalidSpecError(NO_CAMERA.format(env_id=self.manifest.env_id,
                                                    camera=rs.camera, cameras=list(cameras)))
        return BatchRenderer(worlds, camera, int(rs.width), int(rs.height))

    @staticmethod
    def _install_fields(worlds: BatchedWorlds, model: Any, paths: Sequence[str]) -> list[str]:
        """Give every field of ``paths`` MJWarp stores one row per world (nominal for now);
        the fields it does not store do not enter its physics and are skipped.

        Raises:
            InvalidSpecError: For a field MJWarp stores but shares across worlds.
        """
        rows: dict[str, Any] = {}
        for path in paths:
            value = get_field(model, path)
            if not worlds.known_field(path) or value.size == 0:
                continue
            if not worlds.has_field(path):
                raise InvalidSpecError(NOT_BATCHABLE_FIELD.format(name=path))
            rows[path] = np.broadcast_to(value, (worlds.worlds, *value.shape)).copy()
        if rows:
            worlds.set_fields(rows)
        return list(rows)

    def run(self, units: Sequence[WorkUnit], on_unit: OnUnit) -> None:
        """Run ``units``' episodes on the worlds, calling ``on_unit`` as each unit completes."""
        self.start()
        lock = self._lock
        assert lock is not None
        book = SlotBook(units, lock.worlds.worlds)

        def report(done: tuple[WorkUnit, list[EpisodeResult]] | None) -> None:
            if done is not None:
                unit, results = done
                self.ran_on[unit.unit_id] = UnitPlacement(self.name)
                on_unit(unit, results)

        def fill() -> None:
            while book.pending and any(s is None for s in book.slots):
                placed = book.fill()
                failed = lock.load([(row, ep.unit, ep.episode_index) for row, ep in placed])
                for row, error in failed:
                    episode = book.slots[row]
                    assert episode is not None
                    report(book.finish(row, self._result(episode.unit, episode.episode_index,
                                                         None, error)))

        fill()
        while not book.done():
            ended_now = lock.step()
            for ended, columns in zip(ended_now, safety_columns(lock.safety, ended_now),
                                      strict=True):
                episode = book.slots[ended.row]
                assert episode is not None
                report(book.finish(ended.row, self._result(
                    episode.unit, episode.episode_index, ended, None, columns)))
            fill()

    def _result(self, unit: WorkUnit, episode_index: int, e: Ended | None,
                reset_error: str | None, columns: Mapping[str, Any] | None = None
                ) -> EpisodeResult:
        """The :class:`EpisodeResult` of an ended episode (or of one whose reset raised);
        ``columns``: its safety metrics (``--safety``)."""
        lock = self._lock
        assert lock is not None
        if e is None:
            return unit_result(self.manifest, unit, episode_index, episode_return=0.0,
                               length_steps=0, success=False, cause="sim_unstable",
                               error=reset_error, perturbations_json="[]", changed_axes=(),
                               wall_time_s=0.0)
        run = lock.episodes[e.row]
        assert run is not None and run.episode_index == episode_index
        return unit_result(
            self.manifest, unit, episode_index, episode_return=e.episode_return,
            length_steps=e.length_steps, success=e.success, cause=e.cause, error=e.error,
            perturbations_json=run.perturbations_json, changed_axes=run.changed_axes,
            wall_time_s=e.wall_time_s, first_success_step=e.first_success_step,
            first_frame_digest=run.first_frame, **(columns or {}))

    def close(self) -> None:
        """Drop the worlds and close the host env."""
        self._lock = None
        if self._env is not None:
            try:
                self._env.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
            self._env = None


@BACKENDS.register("batched")
def make_batched_backend(manifest: EvalManifest, options: BackendOptions,
                         max_units: int | None = None) -> BatchedBackend:
    """The ``batched`` entry of :data:`robogen.rollout.backends.BACKENDS` (``max_units``: at
    most this many units will run; bounds the default number of worlds)."""
    return BatchedBackend(manifest, options, max_units=max_units)


__all__ = ["BATCHED_AXES", "BatchedBackend", "default_worlds", "make_batched_backend",
           "per_world_fields", "resolve_device"]
