"""Policies: the batched Policy protocol, URI loaders and scripted experts.

URIs (``robogen list`` shows the registered schemes):

* ``sb3:PATH.zip`` (or a bare ``PATH.zip``): Stable-Baselines3 PPO/A2C/SAC/TD3/DQN
  checkpoint; VecNormalize statistics via ``LoadContext.vecnormalize``.
* ``expert:<task>``: the scripted expert of a built-in task.
* ``python:pkg.module:factory``: ``factory(ctx)`` returns a Policy.
* ``random`` / ``random:SEED``: uniform random actions.
* ``remote:ws://HOST:PORT[,ws://...][?options]``: a policy server speaking openpi's
  WebSocket protocol (``robogen serve`` or an openpi server); options are the adapter spec
  (:mod:`robogen.policies.adapter`).
"""

from __future__ import annotations

from robogen.policies import flax_policy as _flax  # noqa: F401  (registers "flax"; JAX loads lazily)
from robogen.policies import remote as _remote  # noqa: F401  (registers "remote")
from robogen.policies import sb3 as _sb3  # noqa: F401  (registers "sb3")
from robogen.policies import simple as _simple  # noqa: F401  (registers "random", "python")
from robogen.policies.base import (
    POLICY_SCHEMES,
    DeclaresCapabilities,
    LoadContext,
    Policy,
    PolicyCapabilities,
    PrivilegedPolicy,
    SceneViewing,
    UnitAware,
    check_compatible,
    policy_capabilities,
    policy_uri_forms,
    policy_uri_help,
    register_policy_scheme,
    resolve_policy_uri,
    split_uri,
)

try:  # registers "expert"; written separately, tolerate its absence
    from robogen.policies import experts as _experts  # noqa: F401
except ModuleNotFoundError as _e:  # pragma: no cover - depends on the checkout
    if _e.name != "robogen.policies.experts":
        raise

__all__ = [
    "POLICY_SCHEMES",
    "DeclaresCapabilities",
    "LoadContext",
    "Policy",
    "PolicyCapabilities",
    "PrivilegedPolicy",
    "SceneViewing",
    "UnitAware",
    "check_compatible",
    "load_policy",
    "policy_capabilities",
    "policy_uri_forms",
    "policy_uri_help",
    "register_policy_scheme",
    "resolve_policy_uri",
    "split_uri",
]


def load_policy(uri: str, ctx: LoadContext) -> Policy:
    """Load the policy named by ``uri`` for the env described by ``ctx``.

    Args:
        uri: ``scheme:rest`` (``sb3:ckpt.zip``, ``expert:pick_place``,
            ``python:pkg.mod:factory``, ``random``) or a bare ``.zip`` path.
        ctx: The env's spaces, observation mode, VecNormalize path and device.

    Returns:
        A :class:`Policy` whose spaces fit the env's.

    Raises:
        InvalidSpecError: On an empty or malformed URI.
        UnknownNameError: On an unknown scheme (lists close matches).
        CheckpointError: If the checkpoint or its companion files cannot be loaded.
        SpaceMismatchError: If the policy's observation or action space does not
            fit the env's (names both spaces).
    """
    scheme, rest = split_uri(uri)
    loader = POLICY_SCHEMES.get(scheme)
    policy = loader(rest, ctx)
    check_compatible(policy, ctx, uri)
    return policy
