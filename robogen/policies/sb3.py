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

Images:
    SB3 stores image policies channel-first (``VecTransposeImage``); channel-last
    env images ``(B, H, W, 3)`` are transposed to ``(B, 3, H, W)`` when the
    policy's space is channel-first.
"""

from __future__ import annotations

import json
import pickle
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
    check_compatible,
    register_policy_scheme,
)

ALGOS = ("ppo", "a2c", "sac", "td3", "dqn")
CHECKPOINT_MISSING = "SB3 checkpoint {path} {what}; expected a .zip written by model.save()"
CHECKPOINT_CORRUPT = (
    "SB3 checkpoint {path} cannot be read ({why}); expected a .zip written by model.save(). "
    "Re-download or re-save it"
)
MISSING_VECNORMALIZE = (
    "SB3 checkpoint {path} was trained with VecNormalize observation normalization ({evidence}) "
    "but no statistics were given; pass --vecnormalize {suggest}"
)
UNUSED_VECNORMALIZE = (
    "SB3 checkpoint {path} was trained without VecNormalize ({algo} saved no raw observations, "
    "_last_original_obs), so the statistics {stats} would feed it inputs it never saw; drop "
    "--vecnormalize"
)
VECNORMALIZE_BAD = "VecNormalize statistics {path} cannot be loaded ({why}); expected a pickle " \
    "written by VecNormalize.save()"
VECNORMALIZE_SHAPE = (
    "VecNormalize statistics {path} normalize observations of shape {stats_shape} but policy "
    "{uri!r} takes {policy_space} and env {env_id!r} gives {env_space}; pass the statistics saved "
    "with this checkpoint"
)
_SB3_POLICY_MODULES = {
    "stable_baselines3.sac.policies": "sac",
    "stable_baselines3.td3.policies": "td3",
    "stable_baselines3.dqn.policies": "dqn",
}


class SB3Policy:
    """A loaded SB3 model acting on batches.

    Attributes:
        model: The SB3 algorithm instance (``PPO``, ``SAC``, ...).
        algo: Its lower-case name.
        path: Checkpoint path.
        observation_space: The policy's observation space (channel-first for images).
        action_space: Its action space.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``, inferred from the space.
        vecnormalize: The loaded ``VecNormalize`` statistics, or None.
        transposes_images: True: channel-last env images are transposed for a
            channel-first policy space.
    """

    transposes_images = True

    capabilities: ClassVar[PolicyCapabilities] = PolicyCapabilities(slots=True, seeds=False)

    def __init__(self, model: Any, algo: str, path: Path, vecnormalize: Any = None) -> None:
        self.model = model
        self.algo = algo
        self.path = path
        self.observation_space = model.observation_space
        self.action_space = model.action_space
        self.obs_mode = _infer_obs_mode(self.observation_space)
        self.vecnormalize = vecnormalize

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


def detect_algo(path: Path) -> str | None:
    """Algorithm name of an SB3 zip from its ``data`` entry, or None if undecidable.

    Raises:
        CheckpointError: If ``path`` is missing or not a readable zip with a ``data`` entry.
    """
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise CheckpointError(CHECKPOINT_MISSING.format(path=path, what=what))
    try:
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("data"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise CheckpointError(CHECKPOINT_CORRUPT.format(path=path, why=f"{type(e).__name__}: {e}")
                              ) from e
    module = str((data.get("policy_class") or {}).get("__module__", ""))
    if module in _SB3_POLICY_MODULES:
        return _SB3_POLICY_MODULES[module]
    if module == "stable_baselines3.common.policies":
        return "ppo" if "clip_range" in data else "a2c"
    return None


def find_vecnormalize(path: Path) -> tuple[Path | None, str | None]:
    """Companion VecNormalize statistics of checkpoint ``path``.

    Returns:
        ``(stats_file, evidence)``: the statistics file found (or None) and a
        description of why the checkpoint needs normalization (or None if
        nothing says it does).
    """
    stem, folder = path.stem, path.parent
    for cand in (folder / f"{stem}_vecnormalize.pkl", folder / "vecnormalize.pkl",
                 folder / stem / "vecnormalize.pkl"):
        if cand.is_file():
            return cand, f"found {cand}"
    meta = folder / f"{stem}.json"
    if meta.is_file():
        try:
            info = json.loads(meta.read_text())
        except ValueError:
            return None, None
        if isinstance(info, dict) and info.get("vecnormalize"):
            name = info.get("vecnormalize_file")
            cand = folder / name if name else None
            return (cand if cand is not None and cand.is_file() else None,
                    f'{meta} says "vecnormalize": true')
    return None, None


def trained_with_vecnormalize(model: Any, algo: str) -> bool | None:
    """Whether the saved rollout state of ``model`` shows VecNormalize training.

    On-policy SB3 algorithms (PPO, A2C) set ``_last_original_obs`` (the raw
    observation) only when the training env is a ``VecNormalize`` and save it
    with the model; ``_last_obs`` is set by any training. Off-policy ones (SAC,
    TD3, DQN) set both in every case, so they tell nothing.

    Returns:
        True (trained under VecNormalize), False (trained without it), or None
        (unknown: off-policy, or never trained).
    """
    if algo not in ("ppo", "a2c") or getattr(model, "_last_obs", None) is None:
        return None
    return getattr(model, "_last_original_obs", None) is not None


def load_vecnormalize(path: str | Path) -> Any:
    """Unpickle ``VecNormalize`` statistics (no env needed; statistics are not updated).

    Raises:
        CheckpointError: If the file is missing or is not VecNormalize statistics.
    """
    from stable_baselines3.common.vec_env import VecNormalize

    p = Path(path).expanduser()
    if not p.is_file():
        why = "it is a directory" if p.is_dir() else "no such file"
        raise CheckpointError(VECNORMALIZE_BAD.format(path=p, why=why))
    try:
        with p.open("rb") as f:
            vn = pickle.load(f)
    except Exception as e:  # noqa: BLE001 - unpickling raises anything
        raise CheckpointError(VECNORMALIZE_BAD.format(path=p, why=f"{type(e).__name__}: {e}")
                              ) from e
    if not isinstance(vn, VecNormalize):
        why = f"it holds a {type(vn).__name__}"
        raise CheckpointError(VECNORMALIZE_BAD.format(path=p, why=why))
    vn.training = False
    return vn


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


def load_model(path: Path, device: str = "cpu") -> tuple[Any, str]:
    """Load an SB3 zip, detecting its algorithm.

    Returns:
        ``(model, algo)``.

    Raises:
        CheckpointError: If the file is missing, corrupt, or no algorithm loads it.
    """
    import torch

    torch.set_num_threads(1)
    algo = detect_algo(path)
    classes = _algo_classes()
    order = [algo] if algo else list(ALGOS)
    errors = []
    for name in order:
        try:
            model = classes[name].load(str(path), device=device, custom_objects=_CUSTOM_OBJECTS)
        except Exception as e:  # noqa: BLE001 - SB3/torch raise many types on bad input
            errors.append(f"{name}: {type(e).__name__}: {e}")
            continue
        return model, name
    raise CheckpointError(CHECKPOINT_CORRUPT.format(path=path, why="; ".join(errors)))


@register_policy_scheme("sb3", form="sb3:PATH.zip")
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
    policy = SB3Policy(model, algo, path)
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
