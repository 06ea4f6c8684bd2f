"""SB3 policies acting on torch tensors already on a device (the batched backend's path).

:func:`mean_action_tensor_fn` is the tensor twin of ``sb3._mean_action_fn``: the same
network calls in the same order (VecNormalize, ``extract_features``, ``mlp_extractor``,
``action_net``, unscaling or clipping), on a ``torch.Tensor`` batch on the policy's device,
so observations never go to the host and back. It applies where the numpy fast path does
(an unmodified ``ActorCriticPolicy`` with a diagonal Gaussian head over ``Box`` spaces: PPO,
A2C) and to state observations only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def mean_action_applies(policy: Any) -> bool:
    """Whether ``policy``'s deterministic action is the plain Gaussian mean that
    ``robogen.policies.sb3``'s numpy fast path and :func:`mean_action_tensor_fn` compute:
    an unmodified ``ActorCriticPolicy`` with a diagonal Gaussian head over ``Box`` spaces."""
    from gymnasium import spaces
    from stable_baselines3.common.distributions import DiagGaussianDistribution
    from stable_baselines3.common.policies import ActorCriticPolicy

    cls = type(policy)
    return (isinstance(policy, ActorCriticPolicy)
            and type(getattr(policy, "action_dist", None)) is DiagGaussianDistribution
            and isinstance(policy.action_space, spaces.Box)
            and isinstance(policy.observation_space, spaces.Box)
            and all(getattr(cls, name) is getattr(ActorCriticPolicy, name)
                    for name in ("predict", "_predict", "get_distribution", "obs_to_tensor",
                                 "_get_action_dist_from_latent", "extract_features")))


def mean_action_tensor_fn(policy: Any, vecnormalize: Any = None
                          ) -> Callable[[Any], Any] | None:
    """``fn(obs) -> actions`` on torch tensors, or None where it does not apply.

    Args:
        policy: The SB3 policy (``model.policy``).
        vecnormalize: SB3 ``VecNormalize`` statistics applied to observations, or None.

    Returns:
        ``fn(obs: (B, obs_dim) float32 Tensor) -> (B, act_dim) float32 Tensor`` on ``obs``'s
        device (the policy's parameters are moved there once), the deterministic action of
        ``predict``; None for image observations or policies the numpy fast path skips.
    """
    if policy is None or not mean_action_applies(policy):
        return None
    shape = policy.observation_space.shape  # None for a Dict space (state+pixels)
    if shape is None or len(shape) != 1:
        return None
    import torch

    act_shape = tuple(policy.action_space.shape)
    low = torch.as_tensor(policy.action_space.low, dtype=torch.float32)
    high = torch.as_tensor(policy.action_space.high, dtype=torch.float32)
    norm = None
    if vecnormalize is not None and getattr(vecnormalize, "norm_obs", False):
        rms = vecnormalize.obs_rms
        norm = (torch.as_tensor(rms.mean, dtype=torch.float64),
                torch.sqrt(torch.as_tensor(rms.var, dtype=torch.float64) + vecnormalize.epsilon),
                float(vecnormalize.clip_obs))

    def mean_action(obs: Any) -> Any:
        device = obs.device
        if policy.device != device:
            policy.to(device)
        x = obs
        if norm is not None:
            mean, std, clip = norm
            x = torch.clamp((x.double() - mean.to(device)) / std.to(device), -clip, clip)
        x = x.float()
        with torch.inference_mode():
            features = policy.extract_features(x, policy.pi_features_extractor)
            out = policy.action_net(policy.mlp_extractor.forward_actor(features))
        out = out.reshape((-1, *act_shape))
        lo, hi = low.to(device), high.to(device)
        if policy.squash_output:
            return lo + 0.5 * (out + 1.0) * (hi - lo)
        return torch.minimum(torch.maximum(out, lo), hi)

    return mean_action
