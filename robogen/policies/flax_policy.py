"""Behaviour-cloning checkpoints as batched robogen policies (``flax:PATH``).

``PATH`` is a checkpoint directory written by
:func:`robogen.policies.bc_io.save_bc` (or its ``bc.json``). The policy
declares the observation and action spaces the model was trained on, so that
:func:`robogen.policies.base.check_compatible` reports a mismatch before any
rollout:

* ``state``: ``Box(-inf, inf, (D,), float32)``;
* ``pixels``: ``Box(0, 255, (H, W, 3), uint8)``;
* ``state+pixels``: ``Dict(state=..., pixels=...)``;
* actions: ``Box(action_low, action_high, (A,), float32)`` from the checkpoint.

Acting is deterministic (the network's output; ``deterministic=False`` gives
the same actions) and runs a jitted apply, row by row, so that a row's action
depends on its observation only (:meth:`~robogen.policies.bc_net.BCModel.predict`).
The policy therefore takes ``slots`` (any subset of the envs at a time): a pixel
evaluation runs its inference for half of a worker's envs while the other half's
frames are drawn, with the same actions as over the whole batch. JAX is imported
only when a ``flax:`` policy is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from robogen.errors import InvalidSpecError, SpaceMismatchError
from robogen.policies.base import (
    LoadContext,
    PolicyCapabilities,
    absolute_path,
    register_policy_scheme,
)

if TYPE_CHECKING:
    from robogen.policies.bc_net import BCModel

FLAX_URI = "flax policy URI must be 'flax:PATH' with PATH a checkpoint directory, got {uri!r}"
OBS_MODE_MISMATCH = (
    "policy 'flax:{path}' was trained on {policy_mode!r} observations but env {env_id!r} gives "
    "{env_mode!r}; evaluate it with --obs-mode {policy_mode}"
)


TASK_MISMATCH = (
    "policy 'flax:{path}' was trained on demonstrations of {trained!r}, not env {env_id!r}; "
    "evaluate it with --env {trained}"
)


class FlaxBCPolicy:
    """A loaded :class:`~robogen.policies.bc_net.BCModel` acting on batches.

    Attributes:
        model: The behaviour-cloning model.
        path: Checkpoint directory (None for an in-memory model).
        observation_space: Space of one observation the model was trained on.
        action_space: ``Box(action_low, action_high, (A,), float32)``.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
    """

    capabilities: ClassVar[PolicyCapabilities] = PolicyCapabilities(slots=True, seeds=False)
    """``slots``: any subset of the envs may be passed (a row's action depends on its row only);
    no ``seeds`` (deterministic)."""

    def __init__(self, model: BCModel, path: Path | None = None) -> None:
        from gymnasium import spaces

        self.model = model
        self.path = path
        self.obs_mode = model.obs_mode
        parts = {}
        if "state" in model.obs_shapes:
            parts["state"] = spaces.Box(-np.inf, np.inf, model.obs_shapes["state"], np.float32)
        if "pixels" in model.obs_shapes:
            parts["pixels"] = spaces.Box(0, 255, model.obs_shapes["pixels"], np.uint8)
        self.observation_space: spaces.Space[Any] = spaces.Dict(parts) if len(parts) > 1 \
            else next(iter(parts.values()))
        self.action_space: spaces.Space[Any] = spaces.Box(
            model.action_low, model.action_high, (model.act_dim,), np.float32)

    def reset(self, slots: Sequence[int]) -> None:
        """No per-episode state (feed-forward policy)."""

    def act(self, obs: Any, *, deterministic: bool = True,
            slots: Sequence[int] | None = None) -> np.ndarray:
        """Actions for a batch; row ``i``'s action depends on ``obs[i]`` only.

        Args:
            obs: ``(B, D) float32``, ``(B, H, W, 3) uint8`` or a dict with both.
            deterministic: Ignored; the policy is deterministic.
            slots: The env slot of each row; ignored (no per-episode state, and a row's action
                does not depend on the other rows).

        Returns:
            ``(B, A) float32`` actions within the action space.
        """
        return self.model.predict(obs)

    def act_tensor(self, obs: Any) -> Any:
        """:meth:`act` on a batch of torch tensors, without a host copy
        (:class:`~robogen.policies.base.TensorActing`): each tensor enters JAX through DLPack
        (zero-copy on the same device), the jitted row-by-row network runs there and the
        actions come back to torch the same way.

        Args:
            obs: ``(B, D) float32`` state, ``(B, H, W, 3) uint8`` pixels or a dict of both
                (torch tensors), as :attr:`obs_mode` asks.

        Returns:
            ``(B, A) float32`` torch tensor of actions within the action space, or None if
            ``obs`` is not what the model reads.
        """
        import jax
        import jax.numpy as jnp
        import torch

        from robogen.policies.bc_net import predict_fn

        m = self.model
        parts = obs if isinstance(obs, dict) else {
            "state" if self.obs_mode == "state" else "pixels": obs}
        if set(parts) != set(m.obs_shapes):
            return None
        x = {k: jax.dlpack.from_dlpack(v.detach().contiguous()) for k, v in parts.items()}
        if "state" in x:
            x["state"] = x["state"].astype(jnp.float32)
        if "pixels" in x and x["pixels"].dtype != jnp.uint8:
            return None
        b = int(next(iter(x.values())).shape[0])
        padded = 1 << max(0, (b - 1).bit_length())  # the buckets of BCModel.predict
        if padded != b:
            x = {k: jnp.concatenate([v, jnp.zeros((padded - b, *v.shape[1:]), v.dtype)])
                 for k, v in x.items()}
        params, stats = m.device_arrays
        out = predict_fn(m.config, m.act_dim)(params, stats, x, b)[:b]
        low, high = jnp.asarray(m.action_low), jnp.asarray(m.action_high)
        return torch.from_dlpack((low + (out + 1.0) * 0.5 * (high - low)).astype(jnp.float32))


@register_policy_scheme("flax", form="flax:DIR", resolve=absolute_path)
def load_flax(rest: str, ctx: LoadContext) -> FlaxBCPolicy:
    """Load ``flax:PATH``.

    Raises:
        InvalidSpecError: If PATH is empty.
        CheckpointError: If the checkpoint is missing, incomplete or corrupt.
        SpaceMismatchError: If it was trained on another task or observation mode than the env's.
    """
    if not rest.strip():
        raise InvalidSpecError(FLAX_URI.format(uri=f"flax:{rest}"))
    from robogen.policies.bc_io import load_bc

    path = Path(rest).expanduser()
    model = load_bc(path)
    trained_on = model.train_info.get("env_id")
    if trained_on and trained_on != ctx.env_id:
        raise SpaceMismatchError(TASK_MISMATCH.format(path=rest, trained=trained_on,
                                                      env_id=ctx.env_id))
    if ctx.obs_mode != model.obs_mode:
        raise SpaceMismatchError(OBS_MODE_MISMATCH.format(
            path=rest, policy_mode=model.obs_mode, env_id=ctx.env_id, env_mode=ctx.obs_mode))
    return FlaxBCPolicy(model, path)
