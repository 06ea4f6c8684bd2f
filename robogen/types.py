"""Typed, frozen records passed between robogen's parts.

Every arrow in the data flow (DESIGN.md) is one of these records; each
serializes to JSON-compatible dicts with :func:`to_dict` and back with the
class's ``from_dict`` (:class:`~robogen.serialization.Record`), both driven by the field annotations
(:mod:`robogen.serialization`): a field added with a default needs no serializer edit,
and old files without it keep loading. Nothing crosses a module boundary as a loose dict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast, get_args

from robogen.errors import InvalidSpecError
from robogen.serialization import Record, encode, missing_as, omit_at_default

Split = Literal["all", "train", "test"]
"""Which value set of an axis a level draws from: every value, the Factor-World
``train`` set, or the disjoint held-out ``test`` set."""

SPLITS: tuple[str, ...] = get_args(Split)
"""The splits, in :data:`Split` order."""

SPLIT_UNKNOWN = "split must be one of {choices}, got {value!r}"


def split_of(value: str) -> Split:
    """``value`` as a :data:`Split` (for strings that come from configs and CLI flags).

    Raises:
        InvalidSpecError: If ``value`` is not one of :data:`SPLITS` (message
            :data:`SPLIT_UNKNOWN`).
    """
    if value not in SPLITS:
        raise InvalidSpecError(SPLIT_UNKNOWN.format(choices=", ".join(SPLITS), value=value))
    return cast(Split, value)


ConditionSplit = Literal["all", "train", "test", "mixed"]
"""Value set of a condition: its levels' common :data:`Split`, or ``mixed`` when they differ."""

ObsMode = Literal["state", "pixels", "state+pixels"]
"""What an env returns and a policy consumes: ``state`` (a ``(obs_dim,) float32`` vector),
``pixels`` (an ``(H, W, 3) uint8`` RGB image) or ``state+pixels`` (a dict with both)."""

OBS_MODES: tuple[str, ...] = get_args(ObsMode)
"""The observation modes, in :data:`ObsMode` order (the only place they are listed)."""

Cause = Literal["timeout", "terminated", "policy_error", "sim_unstable", "worker_died",
                "infra_timeout", "infra_error"]
"""Why an episode did not succeed. Policy outcomes: ``timeout``: the step limit
ran out; ``terminated``: the env ended the episode without success (e.g. the
robot fell); ``policy_error``: the policy raised or returned a non-finite action.
Invalid episodes (the machinery failed, not the policy; see
:data:`INVALID_CAUSES`): ``sim_unstable``: MuJoCo diverged at any step, the last included
(a non-finite state, a state entry beyond MuJoCo's 1e10 limit, or a bad-state warning);
``worker_died``: the rollout worker process died (OOM killer, segfault, lost node) and its
retries were used up;
``infra_timeout``: the unit ran past its wall-clock budget; ``infra_error``: an
infrastructure component failed (a policy server that timed out, dropped the
connection or answered an error)."""

CAUSES: tuple[str, ...] = get_args(Cause)
"""The failure causes, in :data:`Cause` order."""

POLICY_CAUSES: tuple[str, ...] = ("timeout", "terminated", "policy_error")
"""Failure causes that are outcomes of the policy (counted in success rates)."""

INVALID_CAUSES: tuple[str, ...] = ("sim_unstable", "worker_died", "infra_timeout", "infra_error")
"""Causes of invalid episodes: left out of success, return, length and paired gaps."""

NOMINAL = "nominal"
COMBINED = "combined"

R = TypeVar("R")


def to_dict(record: Any) -> dict[str, Any]:
    """JSON-compatible dict of a record (tuples become lists; non-finite floats are kept).

    The inverse is the record class's ``from_dict``; see :func:`robogen.serialization.encode`.

    Raises:
        TypeError: For a field value JSON cannot hold.
    """
    return encode(record)


@dataclass(frozen=True, slots=True)
class AxisLevel(Record):
    """One axis at one level inside a condition.

    Attributes:
        axis: Registered axis name (``lighting``, ``texture``, ...).
        severity: Shift size in [0, 1]; 0 is exactly the nominal scene.
        split: Value set drawn from: ``all``, ``train`` or held-out ``test``.
        value: None: every episode draws its own value from the split (the axis's stream
            of the episode). An index ``>= 0``: every episode gets distinct value ``value``
            of the split (:meth:`robogen.perturbations.base.Axis.sample_value`; the
            diversity curves of ``robogen scale --vary values``).
    """

    axis: str
    severity: float
    split: Split = "all"
    value: int | None = field(default=None, metadata=omit_at_default())

    @property
    def label(self) -> str:
        """``axis@severity`` or ``axis@split`` (``@split:severity`` if both differ from default),
        then ``#value`` for a pinned value."""
        pin = "" if self.value is None else f"#{self.value}"
        if self.split == "all":
            return f"{self.axis}@{self.severity:g}{pin}"
        if self.severity == 1.0:
            return f"{self.axis}@{self.split}{pin}"
        return f"{self.axis}@{self.split}:{self.severity:g}{pin}"


@dataclass(frozen=True, slots=True)
class Condition(Record):
    """A set of axes at given levels applied together; no levels is the nominal scene.

    Attributes:
        name: Unique label used in tables (``nominal``, ``lighting@1``, ``combined@1``).
        levels: The axis levels; empty for the nominal condition.
    """

    name: str
    levels: tuple[AxisLevel, ...] = ()

    @property
    def is_nominal(self) -> bool:
        """Whether every level is at severity 0 (also true of no levels): the nominal
        scene."""
        return all(lv.severity == 0.0 for lv in self.levels)

    @property
    def axes(self) -> tuple[str, ...]:
        """The axis names of the levels, in order (empty for the nominal condition)."""
        return tuple(lv.axis for lv in self.levels)

    @property
    def severity(self) -> float:
        """Largest severity among the levels (0 for nominal)."""
        return max((lv.severity for lv in self.levels), default=0.0)

    @property
    def split(self) -> ConditionSplit:
        """The levels' common split, ``all`` for nominal, ``mixed`` when they differ."""
        splits: set[Split] = {lv.split for lv in self.levels}
        return splits.pop() if len(splits) == 1 else ("all" if not splits else "mixed")


@dataclass(frozen=True, slots=True)
class WorkUnit(Record):
    """A batch of episodes of one condition, run together by one worker.

    A unit is the scheduling and storage granularity: it is run as one lockstep
    batch (so results do not depend on which backend or worker ran it) and
    written as one Parquet part, so a resumed run skips finished units whole.

    Attributes:
        unit_id: Index of the unit in the plan (stable across resumes).
        condition: The condition every episode of the unit runs under.
        episode_indices: Episode indices i; episode i starts from the same
            initial state in every condition (common random numbers).
    """

    unit_id: int
    condition: Condition
    episode_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EpisodeResult(Record):
    """Outcome of one episode.

    Attributes:
        env_id: Env id (``robogen/PickPlace-v0``, ``gymnasium/Hopper-v5``).
        policy_id: Policy URI as given by the user.
        condition: Condition name.
        axes: Axes perturbed in this condition (empty for nominal).
        severity: Largest severity of the condition, in [0, 1].
        split: Value set of the condition (``all``, ``train``, ``test``).
        episode_index: Episode index i (pairs episodes across conditions).
        seed: Seed passed to ``env.reset`` (a function of run seed and i only).
        episode_return: Sum of rewards [-].
        length_steps: Number of env steps taken.
        success: True only if the task's success predicate held; never True
            for an episode that raised.
        cause: Why it failed (one of :data:`CAUSES`), None on success.
        error: Exception type and message when ``cause`` is ``policy_error``
            or ``sim_unstable``, else None.
        perturbations_json: JSON list of the applied perturbations
            (``[{"axis", "type", "values", "changed"}]``).
        changed_axes: Axes whose perturbation changed the scene or state in
            this episode (an axis with nothing to act on is absent).
        wall_time_s: Wall-clock time of the episode [s].
        unit_id: Work unit that ran it.
        video_path: Path of a recorded video relative to the run dir, if any.
        policy_latency_ms: Mean round-trip time of the episode's requests to a policy
            server [ms] (``remote:`` policies); None for in-process policies or an
            episode that made no request (None, not NaN: records stay comparable
            with ``==``).
        peak_contact_force_n: Largest total normal contact force of the robot on the scene
            (the manipulated objects excluded) at one env step [N]. This and the next five
            are the safety metrics of :mod:`robogen.rollout.safety`, recorded with
            ``--safety``; None when not recorded or not measurable in the scene.
        joint_limit_steps: Env steps with a robot joint at a limit [steps].
        object_dropped: Whether a manipulated object fell below the supporting surface.
        distractor_contact_steps: Env steps with a distractor touching the robot or an
            object [steps].
        action_magnitude: Mean Euclidean norm of the policy's actions [action units].
        action_jerk: Mean norm of the actions' second difference [action units / step^2].
        first_success_step: The first env step (1-based) at which the env reported success
            (``info["success"]``), whether or not success held to the end; None if it never
            did, and in runs stored before the column existed.
        first_frame_digest: BLAKE2b digest (16 hex digits) of the policy's first image (the
            reset's, as delivered) when the policy observes pixels; the report counts a
            visual axis as applied to such an episode only if it differs from the nominal
            episode's (otherwise "not observed in view"). None for state policies and old
            runs.
    """

    env_id: str
    policy_id: str
    condition: str
    axes: tuple[str, ...]
    severity: float
    split: ConditionSplit
    episode_index: int
    seed: int
    episode_return: float
    length_steps: int
    success: bool
    cause: Cause | None
    error: str | None
    perturbations_json: str
    changed_axes: tuple[str, ...]
    wall_time_s: float
    unit_id: int
    video_path: str | None = None
    policy_latency_ms: float | None = None
    peak_contact_force_n: float | None = None
    joint_limit_steps: int | None = None
    object_dropped: bool | None = None
    distractor_contact_steps: int | None = None
    action_magnitude: float | None = None
    action_jerk: float | None = None
    first_success_step: int | None = None
    first_frame_digest: str | None = None

    def __post_init__(self) -> None:
        if self.success and self.cause is not None:
            raise ValueError(f"a successful episode has no failure cause, got {self.cause!r}")
        if not self.success and self.cause not in CAUSES:
            raise ValueError(f"a failed episode needs a cause in {CAUSES}, got {self.cause!r}")
        if not math.isfinite(self.episode_return) and self.cause != "sim_unstable":
            # keep the table numeric; a non-finite return is itself an instability
            raise ValueError(f"episode_return must be finite, got {self.episode_return!r}")


@dataclass(frozen=True, slots=True)
class RenderSettings(Record):
    """Offscreen render settings of pixel observations, recorded in the manifest.

    Rendering is the throughput ceiling on CPU machines and these settings
    swing its cost 40-60x (a 4096^2 shadow map costs 20-35 ms per 84x84 frame;
    shadows and MSAA off about 1 ms), so they are chosen deliberately.

    Attributes:
        width: Image width [px].
        height: Image height [px].
        camera: Camera name used for observations.
        shadowsize: Shadow map size [px] (0 disables shadows).
        offsamples: Multisample anti-aliasing samples (0 disables MSAA).
        mujoco_gl: The ``MUJOCO_GL`` backend in use.
        numslices: Tessellation of capsules, cylinders and spheres around their axis
            (``vis.quality.numslices``) [-]; 0 asks for the scene's own (tabletop tasks: 12;
            others: the model's, MuJoCo's default 28). A manifest written before the field
            existed rendered with MuJoCo's 28 and reads as 28.
        numstacks: Tessellation along their axis (``vis.quality.numstacks``) [-]; 0: the
            scene's own (tabletop 8, MuJoCo's default 16); a missing key reads as 16.
    """

    width: int = 84
    height: int = 84
    camera: str = ""
    shadowsize: int = 0
    offsamples: int = 0
    mujoco_gl: str = ""
    numslices: int = field(default=0, metadata=missing_as(28))
    numstacks: int = field(default=0, metadata=missing_as(16))


REWARD_SOURCE_ENV = "raw env reward"
"""``EvalManifest.reward_source`` of every robogen run: an episode's return is the sum of
the env's own ``step`` rewards, unscaled (SB3 ``VecNormalize`` statistics normalize the
policy's observations only, never the recorded reward)."""

@dataclass(frozen=True, slots=True)
class ServerInfo(Record):
    """What a policy server (``remote:``) said of itself when it was probed.

    Attributes:
        endpoint: ``ws://HOST:PORT``.
        action_horizon: Actions per reply (the chunk's first dimension) [steps].
        action_dim: Action components per step the server sends (before ``action_slice``).
        reply_keys: Keys of the server's reply to an observation (``actions``, timings).
        metadata: The metadata frame it sent on connect (openpi: the policy's metadata;
            ``robogen serve``: ``{"robogen": {...}}``), made JSON-safe (bytes as text,
            arrays as their shape and dtype).
    """

    endpoint: str
    action_horizon: int
    action_dim: int
    reply_keys: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PolicyLoadInfo(Record):
    """How a policy checkpoint was loaded; recorded in the manifest (not hashed).

    Attributes:
        replaced: Entries of the checkpoint replaced by placeholders at load because
            inference never uses them (SB3: ``lr_schedule``, ``clip_range``, ...: training
            schedules saved as pickled closures, which often fail to unpickle under
            other Python versions).
        saved_versions: Package versions the checkpoint was saved with (SB3: its
            ``system_info.txt``), e.g. ``{"Python": "3.10.12", "Stable-Baselines3": "2.3.2",
            "PyTorch": "2.3.1"}``; empty when the checkpoint does not say.
        current_versions: The same packages in this process.
        servers: For a ``remote:`` policy, what each endpoint said when probed (action
            horizon, reply keys, its metadata frame).
    """

    replaced: tuple[str, ...] = ()
    saved_versions: dict[str, str] = field(default_factory=dict)
    current_versions: dict[str, str] = field(default_factory=dict)
    servers: tuple[ServerInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class BackendInfo(Record):
    """Where a run's episodes were stepped; recorded in the manifest (not hashed).

    Attributes:
        kind: The backend (``ray``, ``serial``, ``batched``); empty in a manifest from
            before the field.
        device: The simulator's device (``cpu``; the batched backend's warp device, e.g.
            ``cuda:0``).
        worlds: Worlds stepped together (batched backend), None otherwise.
        float_precision: The simulator's floating-point precision (``float64`` for C MuJoCo,
            ``float32`` for MuJoCo Warp).
        versions: Versions of the simulator packages beyond :attr:`EvalManifest.versions`
            (``mujoco-warp``, ``warp-lang``).
    """

    kind: str = ""
    device: str = ""
    worlds: int | None = None
    float_precision: str = ""
    versions: dict[str, str] = field(default_factory=dict)


POLICY_INPUTS = ("observation", "simulator", "prompt")
"""What a policy may read (:attr:`EvalManifest.policy_inputs`)."""


SEQUENTIAL_METHOD = "betting-hedged-capital"
"""Interval method of a sequential (``--episodes auto``) run's gaps (the confidence sequence
of :mod:`robogen.stats.anytime`)."""


@dataclass(frozen=True, slots=True)
class SequentialRule(Record):
    """The stop rule of a sequential run (``robogen eval --episodes auto``), in its manifest.

    Every perturbed condition runs in batches of ``batch_size`` episode indices and stops
    when the anytime-valid interval of its paired gap (:data:`SEQUENTIAL_METHOD`) is narrow
    enough, decided against ``gap_threshold``, or at ``max_episodes``; nominal runs as many
    indices as the perturbed conditions need (see :mod:`robogen.rollout.sequential`).

    Attributes:
        target_halfwidth: Stop once the gap interval's half-width is at most this, in
            (0, 1) [success-rate fraction].
        max_episodes: Cap on episode indices per condition (also ``n_episodes`` of the
            manifest, which fixes the work units).
        batch_size: Episodes per batch; the manifest's ``batch_size``.
        gap_threshold: Stop as soon as the interval lies wholly above or below this gap,
            in (-1, 1); None: never.
        confidence: Level of the confidence sequence.
        method: :data:`SEQUENTIAL_METHOD`.
    """

    target_halfwidth: float
    max_episodes: int
    batch_size: int
    gap_threshold: float | None = None
    confidence: float = 0.95
    method: str = SEQUENTIAL_METHOD


@dataclass(frozen=True, slots=True)
class EvalManifest(Record):
    """Everything that determines an evaluation's episodes; stored as manifest.json.

    Built, hashed, compared and turned back into a config by :mod:`robogen.rollout.manifest`
    (which also says which fields define the protocol).

    Attributes:
        schema_version: Manifest schema version.
        env_id: Env id.
        policy: Policy URI.
        vecnormalize: Path of VecNormalize statistics, if any.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        axes: Axis names evaluated.
        severities: Severities evaluated, each in [0, 1].
        splits: Split levels evaluated (``train``/``test``) in addition to severities.
        combined: Whether the all-axes-combined condition ran.
        n_episodes: Episodes per condition.
        seed: Run seed; every episode seed derives from it.
        max_steps: Step limit per episode.
        batch_size: Episodes per work unit (envs stepped in lockstep).
        success_threshold: Return threshold overriding the env's success rule, if any.
        conditions: All conditions, nominal first.
        render: Render settings of pixel observations.
        versions: Package versions (robogen, mujoco, gymnasium, ...).
        spec_hash: SHA-256 of the canonical JSON of the hashed fields
            (:func:`robogen.rollout.manifest.spec_hash`).
        env_kwargs: Extra keyword arguments passed to the env constructor.
        policy_obs_mode: What the policy observes (``state`` for privileged
            experts even in a pixel env); visual axes are flagged "not observed"
            for state policies.
        success_rule: The env's success predicate in words (shown in reports).
        breaking_levels: Fractions of nominal success whose breaking points a
            severity sweep locates; empty for a fixed grid of severities.
        deterministic_actions: Whether the policy was asked for deterministic
            actions (``act(obs, deterministic=True)``: a stochastic policy's mode).
            Not hashed (``RECORD_ONLY_FIELDS`` of :mod:`robogen.rollout.manifest`).
        reward_source: What an episode's return sums (:data:`REWARD_SOURCE_ENV`).
            Not hashed.
        policy_load: How the checkpoint was loaded (:class:`PolicyLoadInfo`). Not hashed.
        sequential: The stop rule of an ``--episodes auto`` run (:class:`SequentialRule`;
            ``n_episodes`` is then its cap); None for a fixed number of episodes.
        plugins: Modules outside robogen that registered the env family, policy scheme or
            axes this run uses (:mod:`robogen.plugins`); every worker imports them before
            it builds an env, and a resume imports them. Not hashed.
        policy_inputs: What the policy reads (:data:`POLICY_INPUTS`): ``observation`` (the
            env's observation), ``simulator`` (a privileged expert's simulator state),
            ``prompt``; per-step corruptions of what it does not read are flagged "not
            observed". Empty: unknown (a manifest from before the field). Not hashed.
        safety: Whether every episode records the safety metrics of
            :mod:`robogen.rollout.safety` (``robogen eval --safety``). Not hashed: the
            episodes are the same either way.
        safety_sampling: Where ``peak_contact_force_n`` was read
            (:func:`robogen.rollout.safety.force_sampling`: ``peak over physics substeps`` or
            ``sampled per env step``); empty without safety or in a manifest from before the
            field. Not hashed.
        backend: Where the episodes were stepped (:class:`BackendInfo`: backend, device,
            worlds, float precision, simulator versions) when the run was created (a
            ``--resume`` may use another backend). Not hashed.
    """

    schema_version: int
    env_id: str
    policy: str
    vecnormalize: str | None
    obs_mode: str
    axes: tuple[str, ...]
    severities: tuple[float, ...]
    splits: tuple[str, ...]
    combined: bool
    n_episodes: int
    seed: int
    max_steps: int
    batch_size: int
    success_threshold: float | None
    conditions: tuple[Condition, ...]
    render: RenderSettings
    versions: dict[str, str] = field(default_factory=dict)
    spec_hash: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    policy_obs_mode: str = "state"
    success_rule: str = ""
    breaking_levels: tuple[float, ...] = ()
    deterministic_actions: bool = True
    reward_source: str = REWARD_SOURCE_ENV
    policy_load: PolicyLoadInfo = field(default_factory=PolicyLoadInfo)
    sequential: SequentialRule | None = None
    plugins: tuple[str, ...] = ()
    policy_inputs: tuple[str, ...] = ()
    safety: bool = False
    safety_sampling: str = ""
    backend: BackendInfo = field(default_factory=BackendInfo)
