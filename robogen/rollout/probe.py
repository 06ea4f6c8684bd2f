"""Ask a policy for actions once before a run starts, so that a broken policy is a set-up error.

:func:`probe_policy` runs on the driver, after the policy is loaded and before the run
directory exists: it resets one env at the run's first episode (nominal scene), then calls
the policy the way a worker does, on that first observation alone (a batch of one) and on a
batch of two. A policy whose ``reset`` or ``act`` raises there, or whose actions have the
wrong shape, would fail every episode the same way: ``robogen eval`` exits 2 naming the
exception, and nothing is written. A policy that raises only on some observations still
runs; those episodes are recorded as ``policy_error``.
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from robogen.errors import InvalidSpecError, RobogenError, SpaceMismatchError

POLICY_CONTRACT = (
    "policy {uri!r} {what}; a policy's act(obs_batch, *, deterministic) must return a "
    "(batch, {act_shape}) array for the env's action space {space}"
)
"""A probe failure: ``what`` says what the policy did (raised, returned the wrong shape)."""

RAISED_IN = "raised in {call} at the run's first episode (nominal scene): {error}"
"""``what`` of :data:`POLICY_CONTRACT` when the policy raised (``call``: ``act`` with the
batch size, or ``reset``; ``error``: the exception's type, message and innermost frame)."""

PROBE_BATCHES = (1, 2)
"""Batch sizes the probe asks for: the first observation alone, then twice in one batch (a
policy that ignores the batch size is caught by the second)."""


def _named(e: BaseException) -> str:
    """``Type: message (at file:line)``, the innermost frame of the traceback outside this
    module (none when the call itself failed, e.g. a keyword ``act`` does not take)."""
    msg = f"{type(e).__name__}: {e}"
    msg = msg if len(msg) <= 500 else msg[:497] + "..."
    tb = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != __file__]
    return msg + (f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else "")


def probe_policy(uri: str, policy: Any, env: Any, seed: int = 0) -> None:
    """Reset ``env`` at the run's first episode and ask ``policy`` for actions as a worker does.

    For each batch size ``B`` in :data:`PROBE_BATCHES`: ``policy.reset(slots 0..B-1)`` (with
    the episode seeds if it takes them), then ``policy.act`` on the first observation
    repeated ``B`` times (with ``slots`` if it takes them); every slot is attached to the one
    env's scene (a :class:`~robogen.policies.base.PrivilegedPolicy` or
    :class:`~robogen.policies.base.SceneViewing` policy).

    Args:
        uri: The policy's URI (named in the errors).
        policy: The loaded policy.
        env: One env of the run (nominal: no perturbation applied).
        seed: The run seed; the env is reset with episode 0's seed.

    Raises:
        InvalidSpecError: If ``policy.reset`` or ``policy.act`` raises (the exception's type,
            message and innermost frame named; its own error if it is a robogen error).
        SpaceMismatchError: If the action batch has the wrong shape.
    """
    from robogen.envs.base import find_scene
    from robogen.policies.base import PrivilegedPolicy, SceneViewing, policy_capabilities
    from robogen.rollout.plan import episode_seed

    shape = tuple(getattr(env.action_space, "shape", ()) or ())
    fmt = {"uri": uri, "act_shape": ", ".join(map(str, shape)), "space": env.action_space}
    first_seed = episode_seed(seed, 0)
    obs, _ = env.reset(seed=first_seed)
    n = max(PROBE_BATCHES)
    if isinstance(policy, PrivilegedPolicy):
        policy.attach([find_scene(env)] * n)
    elif isinstance(policy, SceneViewing):
        policy.view_scenes([find_scene(env)] * n)  # its cameras checked before any work
    caps = policy_capabilities(policy)
    for b in PROBE_BATCHES:
        slots = list(range(b))
        call = f"reset({slots})"
        try:
            if caps.seeds:
                policy.reset(slots, seeds=[first_seed] * b)  # type: ignore[call-arg]
            else:
                policy.reset(slots)
            call = f"act() on a batch of {b}"
            batch = ({k: np.stack([v] * b) for k, v in obs.items()} if isinstance(obs, dict)
                     else np.stack([obs] * b))
            if caps.slots:
                out = policy.act(batch, deterministic=True, slots=slots)  # type: ignore[call-arg]
            else:
                out = policy.act(batch, deterministic=True)
        except RobogenError:
            raise  # already says what failed and how to fix it (e.g. a policy server)
        except Exception as e:  # noqa: BLE001 - any failure of user code is reported the same way
            raise InvalidSpecError(POLICY_CONTRACT.format(
                what=RAISED_IN.format(call=call, error=_named(e)), **fmt)) from e
        got = getattr(out, "shape", None)
        if got is None or tuple(got) != (b, *shape):
            raise SpaceMismatchError(POLICY_CONTRACT.format(
                what=f"returned {got if got is not None else type(out).__name__} "
                     f"for a batch of {b}", **fmt))
