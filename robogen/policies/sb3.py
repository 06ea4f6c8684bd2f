"""Stable-Baselines3 checkpoints as batched robogen policies (``sb3:PATH.zip``).

The algorithm (PPO, A2C, SAC, TD3, DQN) is read from the checkpoint's ``data``
entry (the policy class's module, and PPO's ``clip_range`` to tell PPO from
A2C); if that fails every algorithm's ``load`` is tried in turn.

Observation normalization:
    A checkpoint trained under ``VecNormalize`` acts on normalized observations,
    so its statistics must be given (``LoadContext.vecnormalize``, the CLI's
    ``--vecnormalize PATH``). They are applied as SB3 does at test time:
    ``clip((obs - mean) / sqrt(var + eps), -clip_obs, clip_obs)``, without
    updating them. Loading a checkpoint that has companion statistics
    (``<stem>_vecnormalize.pkl``, ``vecnormalize.pkl`` beside it, the RL Zoo's
    ``<stem>/vecnormalize.pkl``) or whose metadata ``<stem>.json`` says
    ``"vecnormalize": true`` without statistics is a :class:`CheckpointError`
    that names the file to pass.

Recorded:
    Loading replaces training-only entries (learning-rate and clip-range schedules,
    pickled closures that inference never uses); the policy's ``load_info`` names
    them with the Python/SB3/torch versions the zip was saved with (its
    ``system_info.txt``) and the current ones, and the run's manifest keeps it. A
    checkpoint that does not load raises a :class:`CheckpointError` naming both
    version sets, and, for weights that do not fit the network, the first
    mismatching parameter instead of torch's raw text.

Images:
    SB3 stores image policies channel-first (``VecTransposeImage``); channel-last
    env images ``(B, H, W, 3)`` are transposed to ``(B, 3, H, W)`` when the
    policy's space is channel-first.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robogen.errors import CheckpointError, SpaceMismatchError, UnknownNameError
from robogen.policies.base import (
    POLICY_SCHEMES,
    LoadContext,
    PolicyCapabilities,
    absolute_path,
    check_compatible,
    register_policy_scheme,
)
from robogen.policies.sb3_checkpoint import (
    ALGOS,
    CHECKPOINT_CORRUPT,
    CHECKPOINT_MISSING,
    LOAD_FAILED,
    MISSING_VECNORMALIZE,
    SYSTEM_INFO,
    UNUSED_VECNORMALIZE,
    VECNORMALIZE_BAD,
    VECNORMALIZE_SHAPE,
    VERSION_KEYS,
    VERSIONS,
    VERSIONS_DIFFER,
    WEIGHTS_MISMATCH,
    _short,
    _unreadable_entry,
    _weights_detail,
    current_versions,
    describe_versions,
    detect_algo,
    find_vecnormalize,
    load_vecnormalize,
    saved_versions,
    trained_with_vecnormalize,
)
from robogen.types import PolicyLoadInfo

__all__ = [
    "ALGOS",
    "CHECKPOINT_CORRUPT",
    "CHECKPOINT_MISSING",
    "LOAD_FAILED",
    "MISSING_VECNORMALIZE",
    "SYSTEM_INFO",
    "UNUSED_VECNORMALIZE",
    "VECNORMALIZE_BAD",
    "VECNORMALIZE_SHAPE",
    "VERSION_KEYS",
    "VERSIONS",
    "VERSIONS_DIFFER",
    "WEIGHTS_MISMATCH",
    "SB3Policy",
    "current_versions",
    "describe_versions",
    "detect_algo",
    "find_vecnormalize",
    "load_model",
    "load_sb3",
    "load_vecnormalize",
    "replaced_entries",
    "resolve_sb3",
    "saved_versions",
    "trained_with_vecnormalize",
]


class SB3Policy:
    """A loaded SB3 model acting on batches (a :class:`~robogen.policies.base.RecordsLoad`).

    Attributes:
        model: The SB3 algorithm instance (``PPO``, ``SAC``, ...).
        algo: Its lower-case name.
        path: Checkpoint path.
        observation_space: The policy's observation space (channel-first for images).
        action_space: Its action space.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``, inferred from the space.
        vecnormalize: The loaded ``VecNormalize`` statistics, or None.
        load_info: Training-only entries replaced at load and the saved vs current
            Python/SB3/torch versions (recorded in the run's manifest).
    """

    capabilities: ClassVar[PolicyCapabilities] = PolicyCapabilities(
        slots=True, seeds=False, transposes_images=True)
    """Acts on any rows; channel-last env images are transposed for a channel-first policy
    space."""

    def __init__(self, model: Any, algo: str, path: Path, vecnormalize: Any = None,
                 load_info: PolicyLoadInfo | None = None) -> None:
        self.model = model
        if hasattr(getattr(model, "policy", None), "set_training_mode"):
            _keep_eval_mode(model.policy)
        self.algo = algo
        self.path = path
        self.observation_space = model.observation_space
        self.action_space = model.action_space
        self.obs_mode = _infer_obs_mode(self.observation_space)
        self.vecnormalize = vecnormalize
        self.load_info = load_info if load_info is not None else PolicyLoadInfo()
        self._mean_action = _mean_action_fn(getattr(model, "policy", None))
        self._mean_tensor: Any = None  # built at the first act_tensor

    def act_tensor(self, obs: Any) -> Any:
        """Deterministic actions for a ``(B, obs_dim)`` float32 torch tensor, computed on its
        device (:class:`~robogen.policies.base.TensorActing`); None where the policy's
        prediction is not the plain mean action (PPO/A2C Gaussian) or observes images."""
        if self._mean_tensor is None:
            from robogen.policies.sb3_tensor import mean_action_tensor_fn

            fn = mean_action_tensor_fn(getattr(self.model, "policy", None), self.vecnormalize)
            self._mean_tensor = fn if fn is not None else False
        return self._mean_tensor(obs) if self._mean_tensor else None

    def reset(self, slots: Sequence[int]) -> None:
        """No per-episode state (feed-forward policies)."""

    def act(
        self, obs: Any, *, deterministic: bool = True, slots: Sequence[int] | None = None
    ) -> np.ndarray:
        """Actions for a batch.

        Args:
            obs: ``(B, obs_dim) float32``, ``(B, H, W, 3) uint8`` or a dict of such batches.
            deterministic: Use the distribution's mode instead of sampling.
            slots: Env slot of each row (ignored: the policy keeps no per-episode state).

        Returns:
            ``(B, act_dim) float32`` actions, clipped to the action space (SB3 ``predict``).
        """
        obs = self._prepare(obs)
        if deterministic and self._mean_action is not None and not isinstance(obs, dict):
            actions = self._mean_action(obs)
        else:
            actions, _ = self.model.predict(obs, deterministic=deterministic)
        actions = np.asarray(actions, dtype=np.float32)
        batch = _batch_size(obs)
        return actions.reshape(batch, -1)

    def _prepare(self, obs: Any) -> Any:
        if isinstance(obs, dict):
            spaces = getattr(self.observation_space, "spaces", {})
            obs = {k: _to_channel_first(np.asarray(v), spaces.get(k)) for k, v in obs.items()}
        else:
            obs = _to_channel_first(np.asarray(obs), self.observation_space)
        if self.vecnormalize is not None:
            obs = self.vecnormalize.normalize_obs(obs)
        return obs


def _mean_action_fn(policy: Any) -> Any:
    """A faster exact twin of ``policy.predict(obs, deterministic=True)`` for the common
    on-policy case, or None where it does not apply (SB3 ``predict`` is used then).

    It applies to an unmodified ``ActorCriticPolicy`` (PPO, A2C) with a diagonal Gaussian
    head over a ``Box`` observation and action space: the deterministic action is the
    Gaussian's mean, ``action_net(mlp_extractor.forward_actor(features))``, so building the
    ``torch.distributions.Normal`` (and validating its arguments) on every batch, as
    ``predict`` does, is skipped. Every other step is SB3's own, in its order (observation
    copy and reshape, ``obs_as_tensor``, ``extract_features`` with its preprocessing,
    ``unscale_action`` or clipping to the action space), so the actions are bitwise those of
    ``predict``; ``tests/policies/test_sb3_inference_load.py`` checks it. The policy's
    device is read once (the loader never moves the model). At batch 8 on the shipped
    Reacher PPO it takes about half of ``predict``'s time.

    Returns:
        ``fn(obs: (B, *obs_shape)) -> (B, *act_shape)`` actions as ``predict`` gives them.
    """
    if policy is None:
        return None
    import torch
    from stable_baselines3.common.preprocessing import is_image_space, maybe_transpose
    from stable_baselines3.common.utils import obs_as_tensor

    from robogen.policies.sb3_tensor import mean_action_applies

    if not mean_action_applies(policy):
        return None
    obs_shape = tuple(policy.observation_space.shape)
    act_shape = tuple(policy.action_space.shape)
    low, high = policy.action_space.low, policy.action_space.high
    image = is_image_space(policy.observation_space)
    device = policy.device  # SB3 finds it by walking the parameters on every call

    def mean_action(obs: Any) -> np.ndarray:
        policy.set_training_mode(False)  # a no-op once set (see _keep_eval_mode)
        obs = maybe_transpose(obs, policy.observation_space) if image else np.array(obs)
        x = obs_as_tensor(obs.reshape((-1, *obs_shape)), device)
        with torch.inference_mode():
            features = policy.extract_features(x, policy.pi_features_extractor)
            mean = policy.action_net(policy.mlp_extractor.forward_actor(
                features))  # pyright: ignore[reportArgumentType]  # shared extractor: a Tensor
        actions = mean.cpu().numpy().reshape((-1, *act_shape))
        if policy.squash_output:
            return policy.unscale_action(actions)
        return np.clip(actions, low, high)

    return mean_action


def _to_channel_first(x: np.ndarray, space: Any) -> np.ndarray:
    shape = getattr(space, "shape", None)
    if shape is not None and len(shape) == 3 and x.ndim == 4 and x.shape[1:] != tuple(shape):
        if x.shape[1:] == (shape[1], shape[2], shape[0]):
            return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    return x


def _batch_size(obs: Any) -> int:
    if isinstance(obs, dict):
        return int(len(next(iter(obs.values()))))
    return int(len(obs))


def _infer_obs_mode(space: Any) -> str:
    if getattr(space, "spaces", None) is not None:
        return "state+pixels"
    shape = getattr(space, "shape", ()) or ()
    return "pixels" if len(shape) == 3 else "state"


def _algo_classes() -> dict[str, Any]:
    import stable_baselines3 as sb3

    return {"ppo": sb3.PPO, "a2c": sb3.A2C, "sac": sb3.SAC, "td3": sb3.TD3, "dqn": sb3.DQN}


# objects that old checkpoints may fail to unpickle and that inference never uses
_CUSTOM_OBJECTS = {
    "learning_rate": 0.0,
    "lr_schedule": lambda _: 0.0,
    "clip_range": lambda _: 0.0,
    "exploration_schedule": lambda _: 0.0,
}


class _InferenceOptimizer:
    """Stands in for the optimizer SB3 builds with every policy (``optimizer_class``).

    Inference never steps it; its saved state is kept as loaded. Building a real
    torch optimizer imports ``torch._dynamo`` (about 2.5 s of CPU on the reference
    machine, the largest single import of an evaluation); this does not.
    """

    def __init__(self, params: Any, **kwargs: Any) -> None:
        self._state: Any = None

    def load_state_dict(self, state: Any, strict: bool = True) -> None:
        self._state = state

    def state_dict(self) -> Any:
        return self._state


def _inference_policy_kwargs(path: Path) -> dict[str, Any]:
    """``{"policy_kwargs": saved kwargs with optimizer_class=_InferenceOptimizer}`` for
    ``custom_objects``, or ``{}`` when the saved kwargs cannot be read (SB3 then loads the
    checkpoint as saved and reports its own errors)."""
    try:
        from stable_baselines3.common.save_util import json_to_data

        with zipfile.ZipFile(path) as zf:
            data = json_to_data(zf.read("data").decode(), custom_objects=_CUSTOM_OBJECTS)
        kwargs = dict(data.get("policy_kwargs") or {})
    except Exception:  # noqa: BLE001 - any unreadable checkpoint: load it the usual way
        return {}
    return {"policy_kwargs": {**kwargs, "optimizer_class": _InferenceOptimizer}}


def _keep_eval_mode(policy: Any) -> None:
    """Put ``policy`` (a torch module) in eval mode once and make SB3's per-call
    ``set_training_mode`` a no-op while the mode already matches.

    ``predict`` calls ``set_training_mode(False)`` on every batch, which walks every
    submodule (about a quarter of a PPO MLP's ``predict`` time at batch 8).
    """
    policy.set_training_mode(False)
    switch = policy.set_training_mode

    def set_training_mode(mode: bool) -> None:
        if policy.training != mode:
            switch(mode)

    policy.set_training_mode = set_training_mode


def replaced_entries(path: Path) -> tuple[str, ...]:
    """Entries of the zip's ``data`` that :func:`load_model` replaces (training-only schedules)."""
    try:
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("data"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError):
        return ()
    return tuple(k for k in _CUSTOM_OBJECTS if k in data)


def load_model(path: Path, device: str = "cpu") -> tuple[Any, str]:
    """Load an SB3 zip, detecting its algorithm.

    Training-only entries (learning-rate and clip-range schedules, saved as
    pickled closures that often fail to unpickle elsewhere) are replaced by
    placeholders; :func:`replaced_entries` names them.

    Returns:
        ``(model, algo)``.

    Raises:
        CheckpointError: If the file is missing, corrupt, or no algorithm loads it;
            the message names the saved and current Python/SB3/torch versions, and,
            when the weights do not fit the network, the first mismatching parameter.
    """
    import torch

    torch.set_num_threads(1)
    algo = detect_algo(path)
    classes = _algo_classes()
    order = [algo] if algo else list(ALGOS)
    errors: list[tuple[str, BaseException]] = []
    custom = {**_CUSTOM_OBJECTS, **_inference_policy_kwargs(path)}
    for name in order:
        try:
            model = classes[name].load(str(path), device=device, custom_objects=custom)
        except Exception as e:  # noqa: BLE001 - SB3/torch raise many types on bad input
            errors.append((name, e))
            continue
        return model, name
    versions = describe_versions(saved_versions(path), current_versions())
    for _, e in errors:
        detail = _weights_detail(str(e))
        if detail is not None:
            raise CheckpointError(WEIGHTS_MISMATCH.format(path=path, detail=detail,
                                                          versions=versions)) from e
    why = _unreadable_entry(path) or "; ".join(f"{name}: {_short(e)}" for name, e in errors)
    raise CheckpointError(LOAD_FAILED.format(path=path, why=why, versions=versions)) from (
        errors[-1][1] if errors else None)


def resolve_sb3(rest: str) -> str:
    """The checkpoint path absolute; ``ckpt`` for ``ckpt.zip`` stays without its ``.zip``."""
    p = Path(rest).expanduser()
    if rest.strip() and not p.exists() and p.with_name(p.name + ".zip").is_file():
        return str(p.resolve())
    return absolute_path(rest)


@register_policy_scheme("sb3", form="sb3:PATH.zip", resolve=resolve_sb3)
def load_sb3(rest: str, ctx: LoadContext) -> SB3Policy:
    """Load ``sb3:PATH.zip`` for the env of ``ctx``.

    Args:
        rest: Checkpoint path (``.zip`` may be omitted).
        ctx: Env spaces, ``vecnormalize`` statistics path and torch device.

    Returns:
        An :class:`SB3Policy`.

    Raises:
        CheckpointError: Missing/corrupt checkpoint or statistics, or statistics
            needed but not given.
        SpaceMismatchError: Policy or statistics do not fit the env's spaces.
    """
    path = Path(rest).expanduser()
    prefix = rest.split(":", 1)[0] if ":" in rest else ""
    if not path.exists() and len(prefix) > 1 and "/" not in prefix and "\\" not in prefix:
        # "sb4:model.zip" reaches here as a bare .zip path: report the unknown scheme
        raise UnknownNameError("policy scheme", prefix, POLICY_SCHEMES.names())
    with_zip = path.with_name(path.name + ".zip")
    if not path.is_file() and path.suffix != ".zip" and with_zip.is_file():
        path = with_zip
    model, algo = load_model(path, ctx.device)
    uri = f"sb3:{rest}"
    info = PolicyLoadInfo(replaced=replaced_entries(path), saved_versions=saved_versions(path),
                          current_versions=current_versions())
    policy = SB3Policy(model, algo, path, load_info=info)
    check_compatible(policy, ctx, uri)
    trained_vn = trained_with_vecnormalize(model, algo)
    if ctx.vecnormalize is None:
        found, evidence = find_vecnormalize(path)
        if evidence is None and trained_vn:
            evidence = (f"its saved rollout state holds raw observations "
                        f"(_last_original_obs), which {algo.upper()} keeps only under VecNormalize")
        if evidence is not None:
            raise CheckpointError(MISSING_VECNORMALIZE.format(
                path=path, evidence=evidence, suggest=found if found else "PATH"))
        return policy
    if trained_vn is False:
        raise CheckpointError(UNUSED_VECNORMALIZE.format(
            path=path, algo=algo.upper(), stats=ctx.vecnormalize))
    vn = load_vecnormalize(ctx.vecnormalize)
    stats_space = vn.observation_space
    if not _same_obs_shape(stats_space, policy.observation_space):
        raise SpaceMismatchError(VECNORMALIZE_SHAPE.format(
            path=ctx.vecnormalize, stats_shape=_shape_of(stats_space), uri=uri,
            policy_space=policy.observation_space, env_id=ctx.env_id,
            env_space=ctx.observation_space))
    policy.vecnormalize = vn
    return policy


def _shape_of(space: Any) -> Any:
    sub = getattr(space, "spaces", None)
    if sub is not None:
        return {k: _shape_of(v) for k, v in sub.items()}
    return getattr(space, "shape", None)


def _same_obs_shape(stats: Any, policy: Any) -> bool:
    a, b = _shape_of(stats), _shape_of(policy)
    if a == b:
        return True
    # statistics of channel-last images next to a channel-first policy
    return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == 3 and len(b) == 3
            and a == (b[1], b[2], b[0]))
