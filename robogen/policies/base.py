"""The Policy protocol, the policy-scheme registry and the space check.

A policy acts on a *batch* of observations (one row per env slot of a worker)
and keeps per-slot state if it needs any. Policies are loaded from a URI
(``sb3:ckpt.zip``, ``expert:pick_place``, ``python:pkg.mod:factory``,
``random``) once per worker and are never pickled across processes.

Observation batches:
    ``state``: ``(B, obs_dim) float32``;
    ``pixels``: ``(B, H, W, 3) uint8``;
    ``state+pixels``: ``{"state": (B, obs_dim) float32, "pixels": (B, H, W, 3) uint8}``.
Action batches: ``(B, act_dim) float32`` in the env's action space.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from robogen.errors import InvalidSpecError, SpaceMismatchError
from robogen.registry import Registry

if TYPE_CHECKING:
    import gymnasium as gym

    from robogen.envs.base import MujocoScene

OBS_MODES = ("state", "pixels", "state+pixels")
SPACE_MISMATCH = (
    "policy {policy!r} does not fit env {env_id!r}: the policy's {which} space is {policy_space} "
    "but the env's is {env_space}. {hint}"
)


@runtime_checkable
class Policy(Protocol):
    """A batched policy.

    Attributes:
        observation_space: Space of one observation the policy consumes.
        action_space: Space of one action it returns.
        obs_mode: Which observation it consumes: ``state``, ``pixels`` or ``state+pixels``.
    """

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    obs_mode: str

    def reset(self, slots: Sequence[int]) -> None:
        """Clear per-episode state of the env slots ``slots`` (new episodes start there).

        A policy may also accept a keyword ``seeds: Sequence[int]`` (the
        ``env.reset`` seed of each new episode, a function of the run seed and
        episode index only); stochastic policies can seed themselves from it so
        that episode i draws the same randomness in every condition.
        """
        ...

    def act(self, obs: Any, *, deterministic: bool = True) -> np.ndarray:
        """Return ``(B, act_dim) float32`` actions for a batch of ``B`` observations.

        A policy may also accept a keyword ``slots: Sequence[int]`` (the env
        slot of each row). The worker then passes only the rows of episodes
        still running, saving the work of finished ones; without it the worker
        passes every slot, finished ones included, in slot order.
        """
        ...


@runtime_checkable
class PrivilegedPolicy(Policy, Protocol):
    """A policy that reads the simulator (scripted experts use the model's own kinematics)."""

    def attach(self, scenes: Sequence[MujocoScene]) -> None:
        """Bind env slot k to ``scenes[k]``; read ``scene.model``/``scene.data`` at each act."""
        ...


@dataclass(frozen=True, slots=True)
class LoadContext:
    """What a policy loader may know about the env it will act in.

    Attributes:
        env_id: Env id (``robogen/PickPlace-v0``, ``gymnasium/Hopper-v5``).
        observation_space: The env's observation space (for the chosen obs mode).
        action_space: The env's action space.
        obs_mode: The env's observation mode.
        vecnormalize: Path of SB3 VecNormalize statistics, if given.
        device: Torch/JAX device for the policy (``cpu``, ``cuda``).
        worker_index: Index of the rollout worker loading the policy (0, 1, ... in the
            order the backend started its workers; a replacement takes the index of the
            worker it replaces); ``remote:`` policies spread workers over endpoints by it.
    """

    env_id: str
    observation_space: Any
    action_space: Any
    obs_mode: str = "state"
    vecnormalize: str | None = None
    device: str = "cpu"
    worker_index: int = 0


@runtime_checkable
class LatencyReporting(Protocol):
    """A policy whose inference runs elsewhere and that times it (``remote:`` policies)."""

    def episode_latency_ms(self, slot: int) -> float:
        """Mean round-trip time [ms] of the requests made for the episode in ``slot`` since
        its ``reset``; NaN if it made none."""
        ...


PolicyLoader = Callable[[str, LoadContext], Policy]
POLICY_SCHEMES: Registry[PolicyLoader] = Registry("policy scheme")


def register_policy_scheme(name: str) -> Callable[[PolicyLoader], PolicyLoader]:
    """Register a loader for URIs ``name:<rest>`` (the loader gets ``<rest>``)."""
    return POLICY_SCHEMES.register(name)


def split_uri(uri: str) -> tuple[str, str]:
    """Split ``scheme:rest``; a bare path ending in ``.zip`` means ``sb3``.

    Raises:
        InvalidSpecError: On an empty URI.
    """
    if not uri or not uri.strip():
        raise InvalidSpecError(
            "policy URI is empty; expected e.g. 'sb3:ckpt.zip' or 'expert:pick_place'"
        )
    if ":" in uri:
        scheme, rest = uri.split(":", 1)
        if scheme in POLICY_SCHEMES or not uri.endswith(".zip"):
            return scheme, rest
    if uri.endswith(".zip"):
        return "sb3", uri
    return uri, ""


def _describe(space: Any) -> str:
    return repr(space)


def check_compatible(policy: Policy, ctx: LoadContext, uri: str) -> None:
    """Raise before any rollout if ``policy`` cannot act in the env of ``ctx``.

    Compares observation shape and action shape and bounds. A channel-first
    image space fits a channel-last env image of the same size only for a policy
    that transposes images itself (``policy.transposes_images`` is True, as
    SB3 CNN policies do); any other policy is given ``(B, H, W, 3)`` frames.

    Raises:
        SpaceMismatchError: Naming both spaces and the fix.
    """
    p_obs, e_obs = policy.observation_space, ctx.observation_space
    transposes = bool(getattr(policy, "transposes_images", False))
    if not _obs_fits(p_obs, e_obs, transposes):
        raise SpaceMismatchError(
            SPACE_MISMATCH.format(
                policy=uri,
                env_id=ctx.env_id,
                which="observation",
                policy_space=_describe(p_obs),
                env_space=_describe(e_obs),
                hint="Was the checkpoint trained on another env or observation mode (--obs-mode)?",
            )
        )
    p_act, e_act = policy.action_space, ctx.action_space
    p_shape, e_shape = getattr(p_act, "shape", None), getattr(e_act, "shape", None)
    same = p_shape == e_shape
    if same and hasattr(p_act, "low") and hasattr(e_act, "low"):
        same = bool(np.allclose(p_act.low, e_act.low) and np.allclose(p_act.high, e_act.high))
    if not same:
        raise SpaceMismatchError(
            SPACE_MISMATCH.format(
                policy=uri,
                env_id=ctx.env_id,
                which="action",
                policy_space=_describe(p_act),
                env_space=_describe(e_act),
                hint="Was the checkpoint trained on another env?",
            )
        )


def _obs_fits(p: Any, e: Any, transposes: bool) -> bool:
    p_spaces = getattr(p, "spaces", None)
    e_spaces = getattr(e, "spaces", None)
    if p_spaces is not None or e_spaces is not None:
        if p_spaces is None or e_spaces is None or set(p_spaces) != set(e_spaces):
            return False
        return all(_obs_fits(p_spaces[k], e_spaces[k], transposes) for k in p_spaces)
    ps, es = getattr(p, "shape", None), getattr(e, "shape", None)
    if ps == es:
        return True
    # channel-first image policy (SB3 CNN) against a channel-last env image
    return (
        transposes
        and ps is not None
        and es is not None
        and len(ps) == 3
        and len(es) == 3
        and (ps == (es[2], es[0], es[1]))
    )
