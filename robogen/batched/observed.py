"""What the batched backend records besides outcomes: ``--safety`` on the device, torch threads.

The serial worker's :class:`~robogen.rollout.observers.SafetyObserver` follows each episode
with a :class:`~robogen.rollout.safety.SafetyMonitor`; the batched backend follows all worlds
with one :class:`~robogen.batched.safety.BatchedSafety` (:func:`start_safety`), which the
:class:`~robogen.batched.lockstep.Lockstep` drives: ``reset_rows`` after a refill's state rows
are written and forwarded, ``advance`` instead of ``worlds.advance`` (the contact force after
every physics substep on the tabletop tasks), ``after_step`` once per env step of the running
worlds. :func:`safety_columns` gives the episodes that ended at a step their
:class:`~robogen.types.EpisodeResult` safety columns (one device-to-host copy per step with
ended episodes). The manifest's ``safety_sampling`` is written before any backend starts
(:func:`robogen.rollout.safety.force_sampling` of the same scene), and equals
:attr:`BatchedSafety.sampling <robogen.batched.safety.BatchedSafety.sampling>`.

Episodes whose reset raised have no safety columns (None), as serially. A world whose
MJWarp buffers overflowed ends as ``sim_unstable``; its metrics are recorded as read (like
its trajectory, they are not a result).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from robogen.errors import RobogenError

if TYPE_CHECKING:
    from robogen.batched.lockstep import Ended
    from robogen.batched.safety import BatchedSafety
    from robogen.batched.worlds import BatchedWorlds
    from robogen.types import EvalManifest

SAMPLING_MISMATCH = (
    "the manifest records the contact force {recorded!r} but the batched worlds of {env_id!r} "
    "read it {read!r}; start a new run (--out) instead of resuming this one"
)


def one_torch_thread(device: str) -> None:
    """Run torch on one intra-op thread when the worlds live on warp's CPU device.

    The lock-step's and the safety reads' torch operations are small (one row per world):
    on a machine whose cores are busy (the physics, other processes) torch's intra-op
    threads spin against them and make each read ~50x slower
    (``benchmarks/bench_batched_safety.py``, ``benchmarks/bench_batched_eval.py``). The
    serial and Ray workers do the same for their policies. On a CUDA device torch's CPU
    threads do not run the reads and are left alone.

    Args:
        device: The worlds' warp device (``cpu``, ``cuda:0``).
    """
    if device == "cpu":
        import torch

        torch.set_num_threads(1)


def start_safety(manifest: EvalManifest, worlds: BatchedWorlds, env: Any
                 ) -> BatchedSafety | None:
    """The :class:`~robogen.batched.safety.BatchedSafety` of ``worlds`` when the manifest
    records safety (``robogen eval --safety``), else None.

    Args:
        manifest: The run's manifest.
        worlds: The worlds the lock-step steps.
        env: The host env of the worlds' scene (its roles name the parts).

    Raises:
        RobogenError: If the manifest recorded another force sampling than these worlds
            read (a run resumed across a change of the scene's class).
    """
    if not manifest.safety:
        return None
    from robogen.batched.safety import BatchedSafety

    safety = BatchedSafety(worlds, env)
    if manifest.safety_sampling and manifest.safety_sampling != safety.sampling:
        raise RobogenError(SAMPLING_MISMATCH.format(
            recorded=manifest.safety_sampling, env_id=manifest.env_id, read=safety.sampling))
    return safety


def safety_columns(safety: BatchedSafety | None, ended: Sequence[Ended]
                   ) -> list[dict[str, Any] | None]:
    """The safety columns of each episode in ``ended`` (None each without ``--safety``).

    Call before the ended worlds are refilled (their running metrics are reset then).

    Returns:
        One mapping per ended episode, keyed by
        :data:`~robogen.rollout.safety.SAFETY_NAMES` (the ``EpisodeResult`` fields), in
        ``ended``'s order.
    """
    if safety is None or not ended:
        return [None] * len(ended)
    return list(safety.summary([e.row for e in ended]))


__all__ = ["SAMPLING_MISMATCH", "one_torch_thread", "safety_columns", "start_safety"]
