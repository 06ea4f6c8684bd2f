"""Demonstrations: scripted-expert episodes recorded across factor values.

Storage (a directory, appended to in place)::

    DEMOS/
      collection.json                 what was collected (env, seed, image size, ...)
      chunk-<factor>-<start>.arrow    one Arrow IPC file per batch of episodes

Each chunk is an Arrow IPC (Feather v2) table with one row per env step:

=====================  ==========================  =========================================
column                 type                        meaning
=====================  ==========================  =========================================
``episode``            int64                       episode index (>= 10^6, per factor)
``factor``             string                      ``none``, an axis, or ``axis+axis``
``step``               int32                       step within the episode
``state``              fixed_size_list<float32>    state observation ``(obs_dim,)``
``pixels_png``         binary                      PNG of the ``(H, W, 3) uint8`` observation
``action``             fixed_size_list<float32>    expert action ``(act_dim,)`` in [-1, 1]
``reward``             float32                     reward of the step
``episode_success``    bool                        the episode ended in success
``seed``               int64                       ``env.reset`` seed of the episode
``perturbations_json`` string                      applied perturbations (JSON list)
=====================  ==========================  =========================================

Chunks are written to a temporary name and renamed, so appending (or a killed
collection) never corrupts what is there; re-running the same command skips
the chunks that exist. Read them with ``pyarrow.ipc.open_file(pyarrow.memory_map(p))``
(memory-mapped) or ``pandas.read_feather(p)``.

Demonstration episode ``j`` of factor ``f`` uses episode index
``10^6 + (crc32(f) mod 10^4) * 10^5 + j`` of the run seed (:func:`demo_episode_index`),
so its initial state differs from every evaluation episode (indices below
10^6) of the same seed and from the other factors' demonstrations: policies
are tested on unseen states, and each factor adds new initial states.
Factor values are drawn from each axis's ``train`` split; evaluation uses ``test``.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from robogen._atomic import atomic_path, write_atomic
from robogen.errors import InvalidSpecError, RunDirError, UnknownNameError
from robogen.rollout.manifest import demo_manifest
from robogen.types import NOMINAL, AxisLevel, Condition, WorkUnit, split_of

DEMO_SCHEMA_VERSION = 1
DEMO_EPISODE_OFFSET = 1_000_000
BASE_FACTOR = "none"
COLLECTION = "collection.json"
_CHUNK = re.compile(r"^chunk-(?P<factor>[a-z_+]+(?:\.v\d+)?)-(?P<start>\d{7})\.arrow$")
_VALUE_FACTOR = re.compile(r"^(?P<axis>[a-z_]+)\.v(?P<index>\d+)$")


def _expert_tasks() -> dict[str, str]:
    """Every env id with a scripted expert -> the expert's name (``expert:<name>``).

    The built-in tasks, then the suites' experts (:mod:`robogen.policies.suite_experts`):
    robosuite Lift/Stack/PickPlaceCan, Fetch, Meta-World. A suite's id is listed whether or
    not the suite is installed here; making its env names the install command.
    """
    from robogen.envs.metaworld_env import TASKS as METAWORLD_TASKS
    from robogen.policies.suite_experts import FETCH_EXPERTS, ROBOSUITE_EXPERTS

    tasks = {"robogen/Reach-v0": "reach", "robogen/Push-v0": "push",
             "robogen/PickPlace-v0": "pick_place"}
    suites = ([f"robosuite/{t}" for t in ROBOSUITE_EXPERTS]
              + [f"gymnasium-robotics/{t}" for t in FETCH_EXPERTS]
              + [f"metaworld/{t}" for t in METAWORLD_TASKS])
    return tasks | {env_id: env_id for env_id in suites}


EXPERT_TASKS = _expert_tasks()
"""Env id -> scripted expert name: the tasks ``robogen collect`` / ``scale`` / ``plan`` take."""


@dataclass(frozen=True, slots=True)
class Collection:
    """What a demonstrations directory holds (``collection.json``).

    Attributes:
        schema_version: Demo schema version.
        env_id: Built-in task id.
        policy: Demonstrator policy URI (the task's scripted expert).
        seed: Run seed of the episodes.
        severity: Severity of the varied factors, in (0, 1].
        split: Value set the factors draw from (``train``).
        image_size: Side of the stored pixel observations [px].
        batch_size: Episodes per chunk.
        max_steps: Step limit per episode.
        camera: Camera of the stored pixel observations: the env's default observation
            camera (tabletop ``front``, robosuite ``agentview``, ...); collections written
            before the field existed were all tabletop and read as ``front``.
    """

    schema_version: int
    env_id: str
    policy: str
    seed: int
    severity: float
    split: str
    image_size: int
    batch_size: int
    max_steps: int
    versions: dict[str, str] = field(default_factory=dict)
    camera: str = "front"


def demo_episode_index(factor: str, j: int) -> int:
    """Episode index of demonstration ``j`` of ``factor`` (see the module docstring)."""
    return DEMO_EPISODE_OFFSET + (zlib.crc32(factor.encode()) % 10_000) * 100_000 + j


def value_factor(axis: str, index: int) -> str:
    """The factor name of distinct value ``index`` of ``axis``: ``texture.v3``.

    Its demonstrations all show that one value (:meth:`~robogen.perturbations.base.Axis.
    sample_value`), the diversity curves' unit (:mod:`robogen.scaling.diversity`).
    """
    return f"{axis}.v{int(index)}"


def factor_condition(factor: str, severity: float = 1.0, split: str = "train") -> Condition:
    """The condition of a factor name: ``none`` (nominal), ``axis``, ``axis+axis`` or
    ``axis.v<i>`` (distinct value ``i`` of the split, :func:`value_factor`).

    Raises:
        UnknownNameError: On an unknown axis.
        InvalidPerturbationError: On a value the axis's split does not have.
    """
    from robogen.perturbations import AXES

    if factor == BASE_FACTOR:
        return Condition(NOMINAL, ())
    pinned = _VALUE_FACTOR.match(factor)
    if pinned:
        axis, index = pinned["axis"], int(pinned["index"])
        AXES.get(axis)().check_value(index, split)
        return Condition(factor, (AxisLevel(axis, severity, split_of(split), index),))
    axes = factor.split("+")
    for a in axes:
        AXES.get(a)
        if axes.count(a) > 1:
            raise InvalidSpecError(f"factor {factor!r} names {a!r} twice; a pair joins two "
                                   "different axes, e.g. lighting+texture")
    levels = tuple(AxisLevel(a, severity, split_of(split)) for a in axes)
    return Condition(factor, levels)


def _write_arrow_atomic(path: Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp, pa.OSFile(str(tmp), "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)


class DemoStore:
    """A demonstrations directory (see the module docstring for the format)."""

    def __init__(self, path: Path, collection: Collection) -> None:
        self.path = Path(path)
        self.collection = collection

    @classmethod
    def open(cls, path: Path) -> DemoStore:
        """Open an existing directory.

        Raises:
            RunDirError: If it is missing, has no collection.json, or it is corrupt.
        """
        path = Path(path)
        meta = path / COLLECTION
        if not meta.is_file():
            raise RunDirError(
                f"{str(path)!r} is not a demonstrations directory (no {COLLECTION}); "
                "create one with robogen collect"
            )
        try:
            d = json.loads(meta.read_text())
            if d.get("schema_version") != DEMO_SCHEMA_VERSION:
                raise ValueError(f"schema_version {d.get('schema_version')!r}")
            col = Collection(**d)
        except (ValueError, TypeError) as e:
            raise RunDirError(f"{str(meta)!r} is corrupt: {e}") from e
        return cls(path, col)

    def chunks(self) -> dict[tuple[str, int], Path]:
        """Existing chunk files keyed by (factor, first episode index)."""
        out = {}
        for p in sorted(self.path.glob("chunk-*.arrow")):
            m = _CHUNK.match(p.name)
            if m:
                out[(m["factor"], int(m["start"]))] = p
        return out

    def chunk_path(self, factor: str, start: int) -> Path:
        """The Arrow file of ``factor``'s demonstrations from episode index ``start`` on
        (``chunk-FACTOR-NNNNNNN.arrow`` in the store; it may not exist yet)."""
        return self.path / f"chunk-{factor}-{start:07d}.arrow"

    def episodes(self) -> Any:
        """One row per stored episode: ``factor, episode, seed, length, success`` (DataFrame)."""
        import pandas as pd

        frames = []
        for p in self.chunks().values():
            t = pa.ipc.open_file(pa.memory_map(str(p))).read_all()
            frames.append(t.select(["factor", "episode", "seed", "episode_success"]).to_pandas())
        if not frames:
            return pd.DataFrame(columns=["factor", "episode", "seed", "length", "success"])
        df = pd.concat(frames, ignore_index=True)
        g = df.groupby(["factor", "episode"], sort=True)
        return g.agg(
            seed=("seed", "first"), length=("seed", "size"), success=("episode_success", "first")
        ).reset_index()

    def load(
        self, counts: Mapping[str, int], *, pixels: bool = False, successful_only: bool = True
    ) -> dict[str, np.ndarray]:
        """Step arrays of the first ``counts[factor]`` episodes of each factor.

        Args:
            counts: Factor -> number of episodes (in episode order) to take.
            pixels: Also decode the images.
            successful_only: Skip episodes that did not succeed (before counting).

        Returns:
            ``{"state": (N, obs_dim) float32, "action": (N, act_dim) float32,
            "episode": (N,) int64}`` plus ``"pixels": (N, H, W, 3) uint8`` if asked.

        Raises:
            InvalidSpecError: If a factor has fewer stored episodes than asked.
        """
        from robogen.reports.video import decode_png

        by_factor: dict[str, list[pa.Table]] = {}
        for (factor, _), p in self.chunks().items():
            if factor in counts:
                t = pa.ipc.open_file(pa.memory_map(str(p))).read_all()
                by_factor.setdefault(factor, []).append(t)
        parts = []
        for factor, k in counts.items():
            if k <= 0:
                continue
            tables = by_factor.get(factor, [])
            if not tables:
                raise InvalidSpecError(
                    f"no demonstrations of factor {factor!r} in {str(self.path)!r}; "
                    f"collect them with robogen collect --vary {factor}"
                )
            t = pa.concat_tables(tables)
            ep = t.column("episode").to_numpy()
            ok = t.column("episode_success").to_numpy()
            eps = np.unique(ep[ok] if successful_only else ep)
            if len(eps) < k:
                raise InvalidSpecError(
                    f"factor {factor!r} has {len(eps)} usable demonstrations in "
                    f"{str(self.path)!r}, {k} asked; collect more with --n"
                )
            parts.append(t.filter(pa.array(np.isin(ep, eps[:k]))))
        if not parts:
            raise InvalidSpecError("no demonstrations selected (all counts are 0)")
        t = pa.concat_tables(parts)
        out = {
            "state": np.stack(t.column("state").to_numpy(zero_copy_only=False)).astype(np.float32),
            "action": np.stack(t.column("action").to_numpy(zero_copy_only=False)).astype(
                np.float32
            ),
            "episode": t.column("episode").to_numpy().astype(np.int64),
        }
        if pixels:
            out["pixels"] = np.stack([decode_png(b) for b in t.column("pixels_png").to_pylist()])
        return out


def collect(
    env_id: str,
    factors: Sequence[str],
    n: int,
    out: Path,
    *,
    seed: int = 0,
    severity: float = 1.0,
    split: str = "train",
    image_size: int = 84,
    batch_size: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> DemoStore:
    """Record ``n`` scripted-expert episodes per factor into ``out`` (appending, resumable).

    Args:
        env_id: A built-in task id (it has a scripted expert).
        factors: Factor names: ``none`` (nominal base data), an axis, or ``axis+axis``.
        n: Episodes per factor (the first ``n``; existing ones are kept, not redone).
        out: Demonstrations directory (created if missing).
        seed: Run seed.
        severity: Severity of the varied factors, in (0, 1].
        split: Value set the factors draw from (``train`` for scaling curves).
        image_size: Side of the stored pixel observations [px].
        batch_size: Episodes per chunk (envs stepped together).
        progress: ``progress(done, total)`` callback (episodes).

    Returns:
        The store.

    Raises:
        UnknownNameError: On an env without an expert or an unknown axis.
        InvalidSpecError: On ``n < 1``, a bad severity/split, or a directory
            collected with other settings.
    """
    from robogen import __version__

    if env_id not in EXPERT_TASKS:
        raise UnknownNameError("task with a scripted expert", env_id, EXPERT_TASKS)
    if not isinstance(n, int) or n < 1:
        raise InvalidSpecError(f"--n must be a positive number of episodes, got {n!r}")
    if not 0.0 < severity <= 1.0:
        raise InvalidSpecError(f"severity must be in (0, 1], got {severity!r}")
    if split not in ("train", "test", "all"):
        raise InvalidSpecError(f"split must be 'train', 'test' or 'all', got {split!r}")
    if not factors:
        raise InvalidSpecError("give at least one factor to vary (or 'none' for base data)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidSpecError(f"--batch-size must be a positive integer, got {batch_size!r}")
    if not isinstance(image_size, int) or not 8 <= image_size <= 640:
        raise InvalidSpecError(f"--image-size must be in [8, 640] px, got {image_size!r}")
    factors = list(dict.fromkeys(factors))
    for f in factors:
        factor_condition(f, severity, split)
    from robogen.envs import find_scene, make
    from robogen.types import RenderSettings

    probe = make(env_id, obs_mode="state+pixels",
                 render=RenderSettings(width=image_size, height=image_size))
    try:
        max_steps = int(probe.spec.max_episode_steps)
        camera = find_scene(probe).render_settings.camera
    finally:
        probe.close()
    col = Collection(
        schema_version=DEMO_SCHEMA_VERSION,
        env_id=env_id,
        policy=f"expert:{EXPERT_TASKS[env_id]}",
        seed=seed,
        severity=float(severity),
        split=split,
        image_size=int(image_size),
        batch_size=int(batch_size),
        max_steps=max_steps,
        versions={"robogen": __version__},
        camera=camera,
    )
    out = Path(out)
    if out.is_file():
        raise InvalidSpecError(f"--out {str(out)!r} is a file; give a new or empty directory, "
                               "or one that robogen collect wrote")
    if out.is_dir() and not (out / COLLECTION).exists() and any(out.iterdir()):
        raise InvalidSpecError(
            f"--out {str(out)!r} is not empty and holds no {COLLECTION}: it is not a "
            "demonstration directory; give a new or empty directory")
    if (out / COLLECTION).exists():
        store = DemoStore.open(out)
        old = store.collection
        diff = [
            k
            for k in ("env_id", "seed", "severity", "split", "image_size", "batch_size",
                      "camera")
            if getattr(old, k) != getattr(col, k)
        ]
        if diff:
            raise InvalidSpecError(
                f"{str(out)!r} holds demonstrations collected with other settings "
                f"({', '.join(f'{k}: {getattr(old, k)!r} != {getattr(col, k)!r}' for k in diff)}); "
                "use another --out directory"
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        store = DemoStore(out, col)
        write_atomic(out / COLLECTION, json.dumps(_asdict(col), indent=2))
    _run_collection(store, factors, n, progress)
    return store


def _chunk_episodes(path: Path) -> int:
    """Number of episodes stored in a chunk file."""
    t = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    return len(np.unique(t.column("episode").to_numpy()))


def _asdict(col: Collection) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(col)


def _run_collection(
    store: DemoStore,
    factors: Sequence[str],
    n: int,
    progress: Callable[[int, int], None] | None,
) -> None:
    from robogen.rollout.worker import EpisodeWorker, serial_render_lanes

    col = store.collection
    for stale in store.path.glob(".chunk-*.tmp"):  # left by a killed collection
        stale.unlink(missing_ok=True)
    manifest = demo_manifest(
        col.env_id, col.policy, [factor_condition(f, col.severity, col.split) for f in factors],
        severity=col.severity, split=col.split, seed=col.seed, max_steps=col.max_steps,
        batch_size=col.batch_size, image_size=col.image_size, camera=col.camera)
    have = store.chunks()
    todo: list[tuple[str, WorkUnit]] = []
    uid = 0
    for f, cond in zip(factors, manifest.conditions, strict=True):
        for start in range(0, n, col.batch_size):
            idx = tuple(
                demo_episode_index(f, j) for j in range(start, min(start + col.batch_size, n))
            )
            if (f, start) not in have or _chunk_episodes(have[(f, start)]) < len(idx):
                # missing, or collected with a smaller --n: (re)record it; episodes are
                # deterministic, so the ones it held come out identical
                todo.append((f, WorkUnit(uid, cond, idx)))
            uid += 1
    total = n * len(factors)
    done = total - sum(len(u.episode_indices) for _, u in todo)
    if progress:
        progress(done, total)
    if not todo:
        return
    worker = EpisodeWorker(manifest, render_lanes=serial_render_lanes())
    steps: dict[int, list[tuple[Any, np.ndarray, float]]] = {}
    worker.transition_hook = lambda i, obs, a, r: steps.setdefault(i, []).append((obs, a, r))
    try:
        for f, unit in todo:
            steps.clear()
            results = worker.run_unit(unit)
            table = _chunk_table(f, results, steps)
            start = unit.episode_indices[0] - demo_episode_index(f, 0)
            _write_arrow_atomic(store.chunk_path(f, start), table)
            done += len(results)
            if progress:
                progress(done, total)
    finally:
        worker.close()


def _chunk_table(factor: str, results: Sequence[Any], steps: Mapping[int, list[Any]]) -> pa.Table:
    from robogen.reports.video import encode_png

    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "episode",
            "factor",
            "step",
            "state",
            "pixels_png",
            "action",
            "reward",
            "episode_success",
            "seed",
            "perturbations_json",
        )
    }
    for r in results:
        for t, (obs, action, reward) in enumerate(steps.get(r.episode_index, [])):
            cols["episode"].append(r.episode_index)
            cols["factor"].append(factor)
            cols["step"].append(t)
            cols["state"].append(np.asarray(obs["state"], np.float32))
            cols["pixels_png"].append(encode_png(obs["pixels"]))
            cols["action"].append(np.asarray(action, np.float32))
            cols["reward"].append(reward)
            cols["episode_success"].append(r.success)
            cols["seed"].append(r.seed)
            cols["perturbations_json"].append(r.perturbations_json)
    d = len(cols["state"][0]) if cols["state"] else 0
    a = len(cols["action"][0]) if cols["action"] else 0
    return pa.table(
        {
            "episode": pa.array(cols["episode"], pa.int64()),
            "factor": pa.array(cols["factor"], pa.string()),
            "step": pa.array(cols["step"], pa.int32()),
            "state": pa.FixedSizeListArray.from_arrays(
                pa.array(np.concatenate(cols["state"]) if d else [], pa.float32()), d
            ),
            "pixels_png": pa.array(cols["pixels_png"], pa.binary()),
            "action": pa.FixedSizeListArray.from_arrays(
                pa.array(np.concatenate(cols["action"]) if a else [], pa.float32()), a
            ),
            "reward": pa.array(cols["reward"], pa.float32()),
            "episode_success": pa.array(cols["episode_success"], pa.bool_()),
            "seed": pa.array(cols["seed"], pa.int64()),
            "perturbations_json": pa.array(cols["perturbations_json"], pa.string()),
        }
    )
