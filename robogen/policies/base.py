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

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from robogen.errors import InvalidSpecError, SpaceMismatchError
from robogen.registry import Registry
from robogen.types import OBS_MODES, PolicyLoadInfo  # noqa: F401  (OBS_MODES re-exported)

if TYPE_CHECKING:
    import gymnasium as gym

    from robogen.envs.base import MujocoScene

SPACE_MISMATCH = (
    "policy {policy!r} does not fit env {env_id!r}{made_with}: the policy's {which} space is "
    "{policy_space} but the env's is {env_space}. {hint}"
)
MADE_WITH = " (made with non-default env_kwargs {kwargs})"
"""Part of :data:`SPACE_MISMATCH` naming the env's non-default constructor arguments."""


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


@dataclass(frozen=True, slots=True)
class PolicyCapabilities:
    """Optional parts of the Policy protocol a policy implements.

    Attributes:
        slots: ``act`` takes ``slots: Sequence[int]`` (the env slot of each row); the
            worker then passes only the rows of running episodes.
        seeds: ``reset`` takes ``seeds: Sequence[int]`` (each new episode's reset seed);
            stochastic policies seed themselves from it (common random numbers).
        transposes_images: The policy transposes channel-last ``(B, H, W, 3)`` env images
            to its channel-first image space itself (SB3 CNN policies), so a channel-first
            space of the same size fits the env's (:func:`check_compatible`).
    """

    slots: bool = False
    seeds: bool = False
    transposes_images: bool = False


@runtime_checkable
class DeclaresCapabilities(Protocol):
    """A policy that declares its :class:`PolicyCapabilities` (every built-in policy does)."""

    capabilities: PolicyCapabilities


def policy_capabilities(policy: Any) -> PolicyCapabilities:
    """What ``policy`` implements of the optional protocol.

    A policy that declares ``capabilities`` (:class:`DeclaresCapabilities`) is taken at its
    word. For other policies (``python:`` factories written before declarations existed)
    the keywords of ``act`` and ``reset`` are read: ``slots`` / ``seeds`` or ``**kwargs``.
    """
    if isinstance(policy, DeclaresCapabilities):
        return policy.capabilities
    return PolicyCapabilities(slots=_accepts(policy.act, "slots"),
                              seeds=_accepts(policy.reset, "seeds"))


def _accepts(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


@runtime_checkable
class TensorActing(Protocol):
    """A policy that also acts on a batch that is already a torch tensor on a device (the
    batched backend's observations), without a copy to the host and back.

    ``act_tensor`` gives the same actions as ``act(obs.cpu().numpy(), deterministic=True)``
    (within float32) or None where this policy cannot act on tensors (e.g. an SB3 model
    whose prediction is not the plain mean action); the caller then uses ``act``.
    """

    def act_tensor(self, obs: Any) -> Any:
        """Deterministic actions ``(B, act_dim) float32`` (a ``torch.Tensor`` on ``obs``'s
        device) for ``obs`` in the observation mode's layout batched, as torch tensors:
        ``(B, obs_dim) float32``, ``(B, H, W, 3) uint8`` or ``{"state": ..., "pixels":
        ...}``; or None."""
        ...


@runtime_checkable
class PrivilegedPolicy(Policy, Protocol):
    """A policy that reads the simulator (scripted experts use the model's own kinematics)."""

    def attach(self, scenes: Sequence[MujocoScene]) -> None:
        """Bind env slot k to ``scenes[k]``; read ``scene.model``/``scene.data`` at each act."""
        ...


@runtime_checkable
class SceneViewing(Policy, Protocol):
    """A policy that also renders cameras of each env slot's scene besides the observation
    (a ``remote:`` server that takes a wrist view). Unlike a :class:`PrivilegedPolicy` it
    reads no simulator state: it observes what the run's observation mode gives, so visual
    axes count as observed."""

    def view_scenes(self, scenes: Sequence[MujocoScene]) -> None:
        """Bind env slot k to ``scenes[k]`` (its extra cameras are rendered from there).

        Raises:
            SceneError: If a scene lacks a camera the policy renders.
        """
        ...


@runtime_checkable
class Prompted(Policy, Protocol):
    """A policy that takes a language instruction (a ``remote:`` policy with ``prompt``).

    The rollout worker gives each env slot its episode's instruction (the ``language`` axis
    rewrites :attr:`prompt` per episode) before the policy's ``reset`` of those slots.
    """

    @property
    def prompt(self) -> str:
        """The nominal instruction (``""``: the policy is given none)."""
        ...

    def set_prompts(self, prompts: Mapping[int, str]) -> None:
        """Use ``prompts[k]`` for env slot ``k`` from its next request on (slots not named
        keep theirs; a slot never named uses :attr:`prompt`)."""
        ...


NOT_ATTACHED = (
    "expert {name!r} got a batch of {batch} observations but is attached to {n} scenes; "
    "call policy.attach(scenes) with one MujocoScene per env slot before act()"
)
"""Message when a :class:`PrivilegedPolicy` acts on slots it has no scene for (tests reuse it)."""


def attached_rows(name: str, slots: Sequence[int] | None, batch: int, n_scenes: int
                  ) -> list[int]:
    """The attached scene of each of ``batch`` rows of a :class:`PrivilegedPolicy`'s ``act``.

    Args:
        name: The policy's name (in the error).
        slots: Env slot of each row; None means rows ``0..batch-1``.
        batch: Number of observations ``B`` in the batch.
        n_scenes: Number of scenes attached.

    Returns:
        ``B`` scene indices, one per row.

    Raises:
        InvalidSpecError: :data:`NOT_ATTACHED`, if a slot has no attached scene or
            ``len(slots) != batch``.
    """
    rows = list(range(batch)) if slots is None else [int(k) for k in slots]
    if len(rows) != batch or (rows and max(rows) >= n_scenes):
        raise InvalidSpecError(NOT_ATTACHED.format(name=name, batch=batch, n=n_scenes))
    return rows


@runtime_checkable
class RecordsLoad(Policy, Protocol):
    """A policy that says how its checkpoint was loaded (recorded in the run's manifest).

    Attributes:
        load_info: Entries replaced at load and the saved vs current package versions.
    """

    load_info: PolicyLoadInfo


def policy_inputs(policy: Any) -> tuple[str, ...]:
    """What ``policy`` reads (:data:`~robogen.types.POLICY_INPUTS`): ``("simulator",)`` for a
    :class:`PrivilegedPolicy` (it reads the simulator, not the observation), else
    ``("observation",)``, plus ``"prompt"`` for a :class:`Prompted` policy with a non-empty
    prompt."""
    if isinstance(policy, PrivilegedPolicy):
        return ("simulator",)
    prompted = isinstance(policy, Prompted) and bool(policy.prompt)
    return ("observation", "prompt") if prompted else ("observation",)


def policy_load_info(policy: Any) -> PolicyLoadInfo:
    """``policy.load_info`` of a :class:`RecordsLoad` policy, else an empty record."""
    if isinstance(policy, RecordsLoad) and isinstance(policy.load_info, PolicyLoadInfo):
        return policy.load_info
    return PolicyLoadInfo()


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
        env_kwargs: The env's constructor arguments that differ from their defaults
            (:func:`non_default_env_kwargs`); named in space-mismatch errors, since
            they may change the spaces (``exclude_current_positions_from_observation``).
        worker_index: Index of the rollout worker loading the policy (0, 1, ... in the
            order the backend started its workers; a replacement takes the index of the
            worker it replaces); ``remote:`` policies spread workers over endpoints by it.
        deadline: ``time.monotonic()`` value by which loading must be over (a worker that
            loads the policy inside a work unit passes the unit's deadline; ``remote:``
            bounds its probe's connects, retries and back-off by it); None: no bound.
    """

    env_id: str
    observation_space: Any
    action_space: Any
    obs_mode: str = "state"
    vecnormalize: str | None = None
    device: str = "cpu"
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    worker_index: int = 0
    deadline: float | None = None


@runtime_checkable
class UnitAware(Protocol):
    """A policy told when each work unit starts and by when it must end (``remote:``)."""

    def begin_unit(self, deadline: float | None) -> None:
        """A work unit starts now; it must be over by ``deadline`` (a ``time.monotonic()``
        value; None: no bound). Called by the rollout worker before the unit's resets."""
        ...


@runtime_checkable
class LatencyReporting(Protocol):
    """A policy whose inference runs elsewhere and that times it (``remote:`` policies)."""

    def episode_latency_ms(self, slot: int) -> float:
        """Mean round-trip time [ms] of the requests made for the episode in ``slot`` since
        its ``reset``; NaN if it made none."""
        ...


def non_default_env_kwargs(env: Any) -> dict[str, Any]:
    """Constructor arguments of ``env``'s base env that differ from the constructor's defaults.

    Read from ``env.unwrapped.spec.kwargs`` (what ``gymnasium.make`` passed) and
    compared with the defaults in the entry point's signature; an argument without
    a default, or whose entry point cannot be inspected, counts as non-default.

    Returns:
        ``{name: value}`` in the order gymnasium recorded them; empty without a spec.
    """
    import inspect

    spec = getattr(getattr(env, "unwrapped", env), "spec", None)
    kwargs = dict(getattr(spec, "kwargs", None) or {})
    if not kwargs:
        return {}
    try:
        from gymnasium.envs.registration import load_env_creator

        assert spec is not None  # the kwargs came from it
        entry = spec.entry_point
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        params = inspect.signature(creator).parameters
    except Exception:  # noqa: BLE001 - any entry point we cannot inspect: report every kwarg
        params = {}
    out = {}
    for k, v in kwargs.items():
        p = params.get(k)
        if p is not None and p.default is not inspect.Parameter.empty and _same(p.default, v):
            continue
        out[k] = v
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):  # JSON turns tuples to lists
        a, b = list(a), list(b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and odd objects compare ambiguously
        return False


def _made_with(ctx: LoadContext) -> str:
    if not ctx.env_kwargs:
        return ""
    return MADE_WITH.format(kwargs=", ".join(f"{k}={v!r}" for k, v in ctx.env_kwargs.items()))


PolicyLoader = Callable[[str, LoadContext], Policy]
RestResolver = Callable[[str], str]
"""Maps the ``<rest>`` of a URI to one that means the same from any working directory."""
POLICY_SCHEMES: Registry[PolicyLoader] = Registry("policy scheme")
_URI_FORMS: dict[str, str] = {}
_RESOLVERS: dict[str, RestResolver] = {}


def register_policy_scheme(name: str, *, form: str | None = None,
                           resolve: RestResolver | None = None,
                           ) -> Callable[[PolicyLoader], PolicyLoader]:
    """Register a loader for URIs ``name:<rest>`` (the loader gets ``<rest>``).

    Args:
        name: The scheme (snake_case).
        form: How a URI of this scheme is written, for help and error messages
            (``sb3:PATH.zip``); default ``name:...``.
        resolve: For schemes whose ``<rest>`` names a file or directory: returns the
            ``<rest>`` with that path absolute (:func:`absolute_path`), so a run's manifest
            loads the policy from any directory (:func:`resolve_policy_uri`). ``None``
            (names, URLs) leaves URIs as written.

    Raises:
        ValueError: If ``name`` is already registered.
    """
    decorate = POLICY_SCHEMES.register(name)

    def register(loader: PolicyLoader) -> PolicyLoader:
        decorate(loader)
        _URI_FORMS[name] = form or f"{name}:..."
        if resolve is not None:
            _RESOLVERS[name] = resolve
        return loader

    return register


def absolute_path(path: str) -> str:
    """``path`` (``~`` expanded) made absolute if it exists, else ``path`` unchanged.

    A path that does not exist is left as written so the loader's error names it as the
    user typed it.
    """
    if not path.strip():
        return path
    p = Path(path).expanduser()
    return str(p.resolve()) if p.exists() else path


def resolve_policy_uri(uri: str) -> str:
    """``uri`` with the checkpoint path its scheme names made absolute.

    Each scheme declares how (``register_policy_scheme(resolve=...)``): ``sb3:``,
    ``flax:`` and ``python:FILE.py:factory`` make their path absolute; ``remote:`` URLs,
    ``expert:`` and ``random`` names and ``python:pkg.module:factory`` stay as written.
    A bare ``PATH.zip`` becomes ``sb3:/abs/PATH.zip``.

    Raises:
        InvalidSpecError: On an empty URI.
    """
    scheme, rest = split_uri(uri)
    resolver = _RESOLVERS.get(scheme)
    resolved = rest if resolver is None else resolver(rest)
    return uri if resolved == rest else f"{scheme}:{resolved}"


def policy_uri_forms() -> dict[str, str]:
    """Scheme -> how its URIs are written, for every registered scheme (sorted by scheme)."""
    return {name: _URI_FORMS.get(name, f"{name}:...") for name in POLICY_SCHEMES.names()}


def policy_uri_help() -> str:
    """``sb3:PATH.zip | expert:TASK | ...``: the forms of every registered scheme."""
    return " | ".join(policy_uri_forms().values())


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
    that transposes images itself (``PolicyCapabilities.transposes_images``, as
    SB3 CNN policies declare); any other policy is given ``(B, H, W, 3)`` frames.

    Raises:
        SpaceMismatchError: Naming both spaces and the fix.
    """
    p_obs, e_obs = policy.observation_space, ctx.observation_space
    transposes = policy_capabilities(policy).transposes_images
    if not _obs_fits(p_obs, e_obs, transposes):
        raise _mismatch(uri, ctx, "observation", p_obs, e_obs,
                        "Was the checkpoint trained on another env or observation mode "
                        "(--obs-mode)?")
    p_act, e_act = policy.action_space, ctx.action_space
    p_shape, e_shape = getattr(p_act, "shape", None), getattr(e_act, "shape", None)
    same = p_shape == e_shape
    if same and hasattr(p_act, "low") and hasattr(e_act, "low"):
        same = bool(np.allclose(p_act.low, e_act.low) and np.allclose(p_act.high, e_act.high))
    if not same:
        raise _mismatch(uri, ctx, "action", p_act, e_act,
                        "Was the checkpoint trained on another env?")


def _mismatch(uri: str, ctx: LoadContext, which: str, policy_space: Any, env_space: Any,
              hint: str) -> SpaceMismatchError:
    """The :data:`SPACE_MISMATCH` error for the ``which`` ("observation"/"action") spaces."""
    return SpaceMismatchError(SPACE_MISMATCH.format(
        policy=uri, env_id=ctx.env_id, made_with=_made_with(ctx), which=which,
        policy_space=_describe(policy_space), env_space=_describe(env_space), hint=hint))


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
