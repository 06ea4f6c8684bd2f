"""The evaluation manifest: built, hashed, compared and turned back into a config, here only.

A run's ``manifest.json`` (:class:`robogen.types.EvalManifest`) says what its
episodes are. Every manifest robogen writes is built by a function of this module
(:func:`build_manifest` for ``robogen eval``/``check``, :func:`conditions_manifest`
for ``robogen scale``'s evaluations, :func:`demo_manifest` for ``robogen collect``,
:func:`outcomes_manifest` for outcome arrays given to ``check``), so they record the
same facts the same way.

Every field of the manifest belongs to one of these groups:

* :data:`PROTOCOL_FIELDS`: what episode ``i`` *is* (env, conditions, step limit,
  success rule, render settings). Two runs are comparable (``robogen check``,
  ``robogen compare``) only if they agree on these (:func:`differences`).
* :data:`PAIRING_FIELDS`: which episodes ran (run seed, episodes per condition);
  ``compare`` pairs episodes, so it needs them equal too; ``check`` does not.
* :data:`POLICY_FIELDS`: what acted.
* :data:`SCHEDULE_FIELDS`: how the episodes were cut into work units and chosen
  (batch size, sweep levels), and what the schema and env say about them.
* :data:`RECORD_ONLY_FIELDS`: facts recorded for readers that do not define the
  episodes (package versions, how a checkpoint was loaded).

:data:`HASHED_FIELDS` (the first four groups) is what :func:`spec_hash` hashes, so
a stored run's hash, the protocol compared and the config rebuilt all derive from
one list. A field added to the manifest after runs were stored goes into
:data:`HASH_OMITTED_AT_DEFAULT` too: at its default it is left out of the hash,
so those runs keep theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robogen.errors import RunDirError
from robogen.types import EvalManifest, RenderSettings, to_dict

if TYPE_CHECKING:
    from robogen.configs import EvalConfig
    from robogen.types import Condition

MANIFEST_SCHEMA_VERSION = 1
"""Schema version of the manifests this robogen writes and resumes."""

PROTOCOL_FIELDS: tuple[str, ...] = (
    "env_id", "obs_mode", "axes", "severities", "splits", "combined", "max_steps",
    "success_threshold", "env_kwargs", "conditions", "render",
)
"""Manifest fields that define what an episode is; baseline and candidate must agree on them."""

PAIRING_FIELDS: tuple[str, ...] = ("seed", "n_episodes")
"""Which episodes ran: episode ``i``'s seeds derive from ``seed``; ``compare`` pairs on them."""

POLICY_FIELDS: tuple[str, ...] = ("policy", "vecnormalize", "policy_obs_mode")
"""What acted: the policy URI, its VecNormalize statistics and what it observes."""

SCHEDULE_FIELDS: tuple[str, ...] = ("schema_version", "batch_size", "success_rule",
                                    "breaking_levels", "sequential")
"""How the episodes were cut into units and chosen (sweeps, ``--episodes auto``), under which
schema and rule."""

HASHED_FIELDS: tuple[str, ...] = (*PROTOCOL_FIELDS, *PAIRING_FIELDS, *POLICY_FIELDS,
                                  *SCHEDULE_FIELDS)
"""Fields :func:`spec_hash` hashes: everything that determines a run's episodes."""

HASH_OMITTED_AT_DEFAULT: tuple[str, ...] = ("breaking_levels", "sequential")
"""Hashed fields left out of the hash at their default value (empty): fields added after
runs were stored, so those runs (fixed grids before severity sweeps existed, fixed-n runs
before ``--episodes auto``) keep their hash."""

RECORD_ONLY_FIELDS: tuple[str, ...] = (
    "versions", "spec_hash", "deterministic_actions", "reward_source", "policy_load", "plugins",
    "policy_inputs", "safety", "safety_sampling", "backend",
)
"""Manifest fields recorded for readers but left out of :func:`spec_hash`: facts this version
of robogen fixes (or that describe the checkpoint, not the protocol), so a manifest
written before they existed keeps its hash."""

_VERSIONED_PACKAGES = ("robogen", "mujoco", "gymnasium", "stable-baselines3", "torch", "numpy",
                       "ray")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape an episode (``"not installed"`` if absent;
    the optional suites dm_control, robosuite, metaworld and gymnasium-robotics only where
    installed: the env families' :attr:`~robogen.envs.families.EnvFamily.package`, whose
    physics differ between mujoco lines)."""
    from importlib.metadata import PackageNotFoundError, version

    from robogen.envs.families import suite_packages

    out = {}
    for pkg in _VERSIONED_PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    for pkg in suite_packages():
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


# ---- hashed ----------------------------------------------------------------------------------


_MODEL_TESSELLATION = {"numslices": (0, 28), "numstacks": (0, 16)}
"""Tessellation values that mean the model's own (0, or MuJoCo's default, which every run
before the fields existed used): left out of the hash, so those runs keep theirs."""


def _render_view(m: EvalManifest) -> dict[str, Any]:
    """Render settings without ``mujoco_gl`` (the GL backend does not change an episode)
    and without a tessellation at the model's own (:data:`_MODEL_TESSELLATION`)."""
    return {k: v for k, v in to_dict(m.render).items()
            if k != "mujoco_gl" and v not in _MODEL_TESSELLATION.get(k, ())}


def spec_hash(manifest: EvalManifest) -> str:
    """SHA-256 of the canonical JSON of the manifest's :data:`HASHED_FIELDS`.

    Keys are sorted; ``render`` leaves out ``mujoco_gl``; a field of
    :data:`HASH_OMITTED_AT_DEFAULT` at its empty default is left out.

    Returns:
        64 lowercase hex digits.
    """
    d = to_dict(manifest)
    view = {name: d[name] for name in HASHED_FIELDS}
    view["render"] = _render_view(manifest)
    for name in HASH_OMITTED_AT_DEFAULT:
        if not view[name]:
            del view[name]
    return hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()


def with_hash(manifest: EvalManifest) -> EvalManifest:
    """``manifest`` with its ``spec_hash`` set."""
    return replace(manifest, spec_hash=spec_hash(manifest))


def same_episodes_but_policy(stored: EvalManifest, new: EvalManifest) -> bool:
    """Whether ``new`` runs the episodes of ``stored``, the policy URI aside.

    ``robogen scale`` resumes an evaluation whose model directory moved: the URI
    changed, the episodes did not.
    """
    return spec_hash(replace(stored, policy=new.policy)) == spec_hash(new)


def require_schema(manifest: EvalManifest, run_dir: str | Path) -> None:
    """Raise unless this robogen can resume a run written under ``manifest``'s schema.

    Raises:
        RunDirError: Naming both schema versions.
    """
    if manifest.schema_version != MANIFEST_SCHEMA_VERSION:
        raise RunDirError(
            f"{str(run_dir)!r} was written by manifest schema {manifest.schema_version}, "
            f"this robogen reads {MANIFEST_SCHEMA_VERSION}"
        )


# ---- compared --------------------------------------------------------------------------------


def _view(m: EvalManifest, name: str) -> Any:
    if name == "render":
        return _render_view(m)
    if name == "conditions":  # order-insensitive: the same set of conditions compares equal
        conds = [to_dict(c) for c in m.conditions]
        for c in conds:
            c["levels"] = sorted(c["levels"], key=lambda lv: (lv["axis"], lv["split"]))
        return sorted(conds, key=lambda c: c["name"])
    if name == "axes":
        return sorted(m.axes)
    v = getattr(m, name)
    return list(v) if isinstance(v, tuple) else v


def protocol(manifest: EvalManifest, fields: Sequence[str] = PROTOCOL_FIELDS) -> dict[str, Any]:
    """The comparable view of ``manifest``'s ``fields`` (JSON values).

    ``conditions`` are sorted by name (their levels by axis), ``axes`` sorted, and
    ``render`` leaves out ``mujoco_gl``: two manifests with equal views define the
    same episodes.
    """
    return {name: _view(manifest, name) for name in fields}


def _short(v: Any) -> str:
    if isinstance(v, list) and v and isinstance(v[0], dict) and "name" in v[0]:
        v = [c["name"] for c in v]
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 120 else s[:117] + "..."


def differences(
    baseline: EvalManifest,
    candidate: EvalManifest,
    *,
    fields: Sequence[str] = PROTOCOL_FIELDS,
    names: tuple[str, str] = ("baseline", "candidate"),
) -> list[str]:
    """``field: baseline X vs candidate Y`` for each field whose :func:`protocol` view differs.

    Args:
        baseline: The first manifest.
        candidate: The second manifest.
        fields: Manifest fields compared (default :data:`PROTOCOL_FIELDS`).
        names: How the two manifests are called in the messages.

    Returns:
        One line per differing field, in ``fields`` order; empty if they agree.
    """
    a, b = protocol(baseline, fields), protocol(candidate, fields)
    return [f"{name}: {names[0]} {_short(a[name])} vs {names[1]} {_short(b[name])}"
            for name in fields if a[name] != b[name]]


# ---- built -----------------------------------------------------------------------------------


def plugin_modules(env_id: str, policy: str, axes: Sequence[str]) -> tuple[str, ...]:
    """The plug-in modules a run of ``policy`` on ``env_id`` with ``axes`` needs.

    For the env family (the module that registered it and the one implementing it; for a
    ``gymnasium/`` id, the module that registered its catalog record), the policy's scheme,
    each axis and every episode observer (:mod:`robogen.rollout.observers`; a registered
    observer's factory decides in each worker whether the run needs it): the registering
    module when it is outside robogen (:func:`robogen.plugins.is_plugin_module`), in that
    order, each once. ``__main__`` (a script) is listed too, so that a Ray backend can refuse
    it with a clear message.

    Raises:
        UnknownNameError: If the env family, a scheme or an axis is not registered.
    """
    from robogen.envs import ENV_FAMILIES, family_of
    from robogen.envs.gym_catalog import gym_env_module
    from robogen.perturbations import AXES
    from robogen.plugins import is_plugin_module
    from robogen.policies import POLICY_SCHEMES
    from robogen.policies.base import split_uri
    from robogen.rollout.observers import OBSERVERS

    family = family_of(env_id)
    found = [ENV_FAMILIES.module_of(family.prefix), family.module]
    if family.prefix == "gymnasium":
        found.append(gym_env_module(env_id.split("/", 1)[1]))
    scheme, _ = split_uri(policy)
    if scheme in POLICY_SCHEMES:
        found.append(POLICY_SCHEMES.module_of(scheme))
    found.extend(AXES.module_of(a) for a in axes)
    found.extend(OBSERVERS.module_of(name) for name in OBSERVERS.names())
    return tuple(m for m in dict.fromkeys(found) if is_plugin_module(m))


def build_manifest(cfg: EvalConfig, env: Any, policy: Any) -> EvalManifest:
    """The manifest of ``cfg`` given the env and policy it will use (for spaces and render).

    Args:
        cfg: The evaluation config.
        env: The (perturbed) env made from ``cfg``; its scene gives the render settings,
            default camera and success rule, its spec the default step limit.
        policy: The loaded policy (privileged experts observe ``state``; how it was
            loaded is recorded).

    Returns:
        The manifest with its ``spec_hash``; checkpoint paths in the policy URI and
        ``vecnormalize`` are absolute (:func:`robogen.policies.resolve_policy_uri`), so the
        run resumes from any directory.
    """
    from robogen.envs.base import find_scene
    from robogen.policies import resolve_policy_uri
    from robogen.policies.base import PrivilegedPolicy, policy_inputs, policy_load_info
    from robogen.rollout.plan import build_conditions
    from robogen.rollout.safety import force_sampling
    from robogen.stats.sweep import HALF, SWEEP_GRID

    scene = find_scene(env)
    axes = cfg.resolved_axes()
    render = replace(
        scene.render_settings,
        width=cfg.width,
        height=cfg.height,
        camera=cfg.camera
        or scene.render_settings.camera
        or (scene.roles.cameras[0] if scene.roles.cameras else ""),
        mujoco_gl=os.environ.get("MUJOCO_GL", ""),
    )
    limit = getattr(env.spec, "max_episode_steps", None)
    load = policy_load_info(policy)
    _warn_versions(cfg.policy, load)
    max_steps = cfg.max_steps or int(limit or 1000)
    if limit and max_steps > int(limit):  # the env caps it (Meta-World's max_path_length)
        max_steps = int(limit)
    sevs = list(SWEEP_GRID) if isinstance(cfg.severities, str) else list(cfg.severities)
    return with_hash(EvalManifest(
        schema_version=MANIFEST_SCHEMA_VERSION,
        env_id=cfg.env,
        policy=resolve_policy_uri(cfg.policy),
        vecnormalize=str(Path(cfg.vecnormalize).resolve()) if cfg.vecnormalize else None,
        obs_mode=cfg.obs_mode,
        axes=tuple(axes),
        severities=tuple(sevs),
        splits=tuple(cfg.splits),
        combined=cfg.combined and len(axes) >= 2,
        n_episodes=cfg.planned_episodes,
        seed=cfg.seed,
        max_steps=max_steps,
        batch_size=min(cfg.batch_size, cfg.planned_episodes),
        success_threshold=cfg.success_threshold,
        conditions=build_conditions(axes, sevs, cfg.splits, cfg.combined, cfg.resolved_pairs()),
        render=render,
        versions=package_versions(),
        env_kwargs=dict(cfg.env_kwargs),
        policy_obs_mode="state" if isinstance(policy, PrivilegedPolicy) else cfg.obs_mode,
        success_rule=scene.success_rule,
        breaking_levels=tuple(sorted({HALF, cfg.breaking_level})) if cfg.is_sweep else (),
        policy_load=load,
        sequential=cfg.sequential_rule(),
        plugins=plugin_modules(cfg.env, cfg.policy, axes),
        policy_inputs=policy_inputs(policy),
        safety=cfg.safety,
        safety_sampling=force_sampling(scene) if cfg.safety else "",
    ))


CHECKPOINT_VERSIONS = (
    "policy {uri} was saved with {saved}; this run uses {current}: its outputs may differ "
    "from training (report.md lists the versions)"
)
"""The one terminal line of a checkpoint saved under other package versions."""


def _warn_versions(uri: str, load: Any) -> None:
    """Warn once (:class:`~robogen.errors.RobogenWarning`) if the checkpoint was saved under
    other versions of Python, SB3 or torch than this process runs."""
    import warnings

    from robogen.errors import RobogenWarning

    saved, current = load.saved_versions, load.current_versions
    differ = [k for k, v in saved.items() if k in current and current[k] != v]
    if differ:
        warnings.warn(CHECKPOINT_VERSIONS.format(
            uri=uri, saved=", ".join(f"{k} {saved[k]}" for k in differ),
            current=", ".join(f"{k} {current[k]}" for k in differ)), RobogenWarning, stacklevel=2)


def _axes_and_severities(
    conditions: Sequence[Condition],
) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The axes of ``conditions`` (first-seen order) and their severities (sorted)."""
    return (tuple(dict.fromkeys(a for c in conditions for a in c.axes)),
            tuple(sorted({lv.severity for c in conditions for lv in c.levels})))


def conditions_manifest(
    env_id: str,
    policy: str,
    conditions: Sequence[Condition],
    *,
    n_episodes: int,
    seed: int,
    obs_mode: str = "state",
    image_size: int = 84,
    batch_size: int = 10,
) -> EvalManifest:
    """The manifest of one policy on given ``conditions`` (``robogen scale``'s evaluations).

    Same seed, same episodes: every model evaluated with one seed is paired. Pixel
    observations use the render settings of the demonstrations (the env's default
    observation camera, as :func:`robogen.scaling.demos.collect_demos` records it;
    ``image_size`` square [px], the task's shadow map and MSAA), recorded as the env
    applies them; the step limit is the env's.

    Args:
        env_id: Env id.
        policy: Policy URI (a path in it is made absolute).
        conditions: Conditions, nominal first if it runs.
        n_episodes: Episodes per condition.
        seed: Run seed.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        image_size: Side of pixel observations [px].
        batch_size: Episodes per work unit (at most ``n_episodes``).

    Returns:
        The manifest with its ``spec_hash``.
    """
    from robogen.envs import find_scene, make
    from robogen.policies import resolve_policy_uri

    render = RenderSettings(width=image_size, height=image_size) \
        if obs_mode != "state" else RenderSettings()
    probe = make(env_id, obs_mode=obs_mode, render=render if obs_mode != "state" else None)
    try:
        max_steps = int(probe.spec.max_episode_steps)
        if obs_mode != "state":
            render = find_scene(probe).render_settings
    finally:
        probe.close()
    axes, severities = _axes_and_severities(conditions)
    return with_hash(EvalManifest(
        schema_version=MANIFEST_SCHEMA_VERSION, env_id=env_id,
        policy=resolve_policy_uri(policy), vecnormalize=None, obs_mode=obs_mode,
        axes=axes, severities=severities,
        splits=tuple(sorted({lv.split for c in conditions for lv in c.levels})),
        combined=False, n_episodes=n_episodes, seed=seed, max_steps=max_steps,
        batch_size=min(batch_size, n_episodes), success_threshold=None,
        conditions=tuple(conditions), render=render, versions=package_versions(),
        policy_obs_mode=obs_mode, plugins=plugin_modules(env_id, policy, axes),
    ))


def demo_manifest(
    env_id: str,
    policy: str,
    conditions: Sequence[Condition],
    *,
    severity: float,
    split: str,
    seed: int,
    max_steps: int,
    batch_size: int,
    image_size: int,
    camera: str = "front",
) -> EvalManifest:
    """The manifest of a demonstration collection (``robogen collect``; stored, not hashed).

    Demonstrations record ``state+pixels`` from ``camera`` (the env's default observation
    camera, :class:`~robogen.scaling.demos.Collection`); ``n_episodes`` is 0 (the count per
    factor is the collection's own).

    Args:
        env_id: Env id.
        policy: The expert's URI (``expert:TASK``).
        conditions: One condition per factor collected.
        severity: Severity of the factor values.
        split: ``train``, ``test`` or ``all``.
        seed: Collection seed.
        max_steps: Step limit per demonstration.
        batch_size: Demonstrations per work unit.
        image_size: Side of the recorded frames [px].
        camera: Camera of the recorded frames.
    """
    return EvalManifest(
        schema_version=MANIFEST_SCHEMA_VERSION, env_id=env_id, policy=policy,
        vecnormalize=None, obs_mode="state+pixels", axes=(), severities=(severity,),
        splits=(split,), combined=False, n_episodes=0, seed=seed, max_steps=max_steps,
        batch_size=batch_size, success_threshold=None, conditions=tuple(conditions),
        render=RenderSettings(width=image_size, height=image_size, camera=camera),
        plugins=plugin_modules(env_id, policy, _axes_and_severities(conditions)[0]),
    )


def outcomes_manifest(
    conditions: Sequence[Condition], *, env_id: str, policy: str, n_episodes: int, seed: int,
) -> EvalManifest:
    """The manifest of success outcomes that no run produced (arrays; not stored, not hashed).

    Two such manifests with equal conditions and env compare as one protocol; equal seeds
    pair their episodes by index.

    Args:
        conditions: The conditions outcomes were given for.
        env_id: Env id to record (``synthetic`` for plain arrays).
        policy: Policy id to record.
        n_episodes: Episodes of the longest condition.
        seed: Run seed.
    """
    axes, severities = _axes_and_severities(conditions)
    return EvalManifest(
        schema_version=MANIFEST_SCHEMA_VERSION, env_id=env_id, policy=policy,
        vecnormalize=None, obs_mode="state", axes=axes, severities=severities, splits=(),
        combined=False, n_episodes=n_episodes, seed=seed, max_steps=1, batch_size=1,
        success_threshold=None, conditions=tuple(conditions), render=RenderSettings(),
    )


# ---- turned back into a config ---------------------------------------------------------------


def config_fields(manifest: EvalManifest) -> dict[str, Any]:
    """:class:`~robogen.configs.EvalConfig` fields that reproduce ``manifest``'s episodes.

    The protocol and pairing fields and the batch size; not the policy, nor how to run
    (backend, workers, output).
    """
    from robogen.rollout.plan import pairs_of

    seq = manifest.sequential
    sequential: dict[str, Any] = {} if seq is None else {
        "episodes": "auto", "target_halfwidth": seq.target_halfwidth,
        "max_episodes": seq.max_episodes, "gap_threshold": seq.gap_threshold,
    }
    return {
        "env": manifest.env_id,
        "axes": list(manifest.axes),
        "severities": list(manifest.severities),
        "splits": list(manifest.splits),
        "combined": manifest.combined,
        "episodes": manifest.n_episodes,
        "seed": manifest.seed,
        "max_steps": manifest.max_steps,
        "batch_size": manifest.batch_size,
        "obs_mode": manifest.obs_mode,
        "width": manifest.render.width,
        "height": manifest.render.height,
        "camera": manifest.render.camera or None,
        "success_threshold": manifest.success_threshold,
        "env_kwargs": dict(manifest.env_kwargs),
        "pairs": pairs_of(manifest.conditions),
        "safety": manifest.safety,
        **sequential,
    }


def to_config(
    manifest: EvalManifest,
    *,
    policy: str | None = None,
    vecnormalize: str | None = None,
    **overrides: Any,
) -> EvalConfig:
    """An evaluation config that reruns ``manifest``'s episodes, with ``policy`` acting.

    :func:`build_manifest` of the result has the same :func:`protocol` and pairing fields
    as ``manifest`` (and the same ``spec_hash`` when the policy is the manifest's own).

    Args:
        manifest: The manifest to reproduce.
        policy: Policy URI to evaluate; default the manifest's own policy with its
            ``vecnormalize`` (then ``vecnormalize`` is ignored).
        vecnormalize: VecNormalize statistics of ``policy``.
        **overrides: Further config fields: how to run (``backend``, ``workers``,
            ``address``, ``num_gpus_per_worker``, ``render_device``, ``unit_timeout``), ``out``,
            ``videos``.

    Raises:
        InvalidSpecError: If an override is not a valid config value.
    """
    from robogen.configs import load_eval_config

    if policy is None:
        policy, vecnormalize = manifest.policy, manifest.vecnormalize
    fields: Mapping[str, Any] = {**config_fields(manifest), **overrides}
    return load_eval_config(None, **fields, policy=policy, vecnormalize=vecnormalize)

