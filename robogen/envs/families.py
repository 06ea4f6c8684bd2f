"""The env-family registry: env id prefix -> the module that lists and builds its envs.

An env id is ``<prefix>/<name>``; the prefix names a *family* (like dm_control's
``SUITE`` or a Gymnasium namespace). A family is one module that defines

* ``family_ids() -> tuple[str, ...]``: the names it offers (without the prefix);
* ``family_make(name, options: EnvOptions, **kwargs)``: a perturbable ``gymnasium.Env``
  (a :class:`~robogen.envs.base.MujocoScene` in its stack, ``info["success"]`` in every
  step) built as :class:`EnvOptions` says (observation mode, step limit, render settings,
  success threshold; checked when the record is made),

plus one :func:`register_env_family` call (below for robogen's own families).
:func:`robogen.envs.make`, :func:`robogen.envs.list_env_ids`, ``robogen list``,
config validation and the parametrized env tests all derive from this registry.
The module is imported only when its ids or envs are needed, so ``import
robogen.envs`` stays cheap; a family backed by an optional suite names the
import it needs (``requires``) and the command that installs it (``install``),
and :meth:`EnvFamily.make` raises :class:`SuiteMissingError` with that command
before any work when the suite is absent.

Families:

====================  =============================================  ==========================
prefix                envs                                           install
====================  =============================================  ==========================
robogen               built-in MjSpec tabletop tasks                 core
gymnasium             Gymnasium's MuJoCo v5 envs                     core
gymnasium-robotics    Fetch (gymnasium-robotics 1.4.2)               ``make setup-fetch``
metaworld             Meta-World v3 tasks (metaworld 3.1.1)          ``make setup-metaworld``
dm_control            DeepMind Control Suite (dm_control 1.0.50)     ``make setup-suites``
robosuite             robosuite 1.5.2 manipulation tasks (Panda)     ``make setup-suites``
====================  =============================================  ==========================
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from robogen.envs.observations import check_obs_mode
from robogen.errors import (
    DependencyMissingError,
    InvalidSpecError,
    RobogenError,
    UnknownNameError,
)
from robogen.registry import Registry, caller_module
from robogen.types import RenderSettings

SUITE_MISSING = (
    "{what} needs the optional suite {module!r}, which is not installed in this Python "
    "({python}); install it with: {install}"
)
"""Message of :class:`SuiteMissingError` (tests reuse it)."""
BAD_MAX_STEPS = "max_steps must be a positive integer, got {value!r}"
"""Message of :func:`check_max_steps`."""


class SuiteMissingError(DependencyMissingError):
    """An env family's optional suite (Meta-World, gymnasium-robotics) is not installed."""

    def __init__(self, what: str, module: str, install: str) -> None:
        import sys

        RobogenError.__init__(self, SUITE_MISSING.format(
            what=what, module=module, install=install, python=sys.executable))


@dataclass(frozen=True, slots=True)
class EnvOptions:
    """What every family's ``family_make`` is given besides the env name and its own kwargs.

    Attributes:
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        max_steps: Step limit; None: the env's registered default.
        render: Pixel observation settings (size, camera); None: the family's default.
        success_threshold: Return threshold that defines success, replacing the env's own
            rule (for envs without a success flag; families whose envs decide success
            themselves refuse it).

    Raises:
        InvalidSpecError: On a bad observation mode or step limit (:func:`check_max_steps`).
    """

    obs_mode: str = "state"
    max_steps: int | None = None
    render: RenderSettings | None = None
    success_threshold: float | None = None

    def __post_init__(self) -> None:
        check_obs_mode(self.obs_mode)
        check_max_steps(self.max_steps)


@dataclass(frozen=True, slots=True)
class EnvFamily:
    """One family of env ids ``<prefix>/<name>``.

    Attributes:
        prefix: The id prefix, without the slash (``metaworld``).
        description: One line for ``robogen list`` and the docs.
        module: Import path of the module that implements ``family_ids`` and
            ``family_make`` (imported on first use).
        requires: Top-level module of the optional suite it wraps (``""``: none).
        install: Command that installs that suite (named in errors).
        success: How the family decides success, one line (reports, docs).
        package: Distribution name of the optional suite (``gymnasium-robotics``), whose
            installed version every run's manifest records (``versions``); ``""``: none.
        expert: ``"module:function"`` of the family's scripted experts
            (``expert:<name>`` in one of its envs): ``function(name, ctx)`` returns the
            policy or raises :class:`~robogen.errors.UnknownNameError`; ``""``: none.
    """

    prefix: str
    description: str
    module: str
    requires: str = ""
    install: str = ""
    success: str = ""
    package: str = ""
    expert: str = ""

    def load(self) -> ModuleType:
        """The implementing module (imported now if needed)."""
        return importlib.import_module(self.module)

    def missing(self) -> str | None:
        """None if the family can build envs here, else why not (the install command)."""
        if self.requires and importlib.util.find_spec(self.requires) is None:
            return f"{self.requires!r} is not installed ({self.install})"
        return None

    def names(self) -> tuple[str, ...]:
        """The names the family offers (without the prefix)."""
        return tuple(self.load().family_ids())

    def ids(self) -> tuple[str, ...]:
        """The full env ids ``<prefix>/<name>`` (listed even when the suite is missing)."""
        return tuple(f"{self.prefix}/{n}" for n in self.names())

    def make(self, env_id: str, options: EnvOptions, **kwargs: Any) -> Any:
        """Create ``env_id`` (a full id of this family): ``family_make(name, options, **kwargs)``.

        Raises:
            UnknownNameError: If the name is not one of :meth:`names` (close matches).
            SuiteMissingError: If the family's suite is not installed.
        """
        name = env_id[len(self.prefix) + 1:]
        if name not in self.names():
            raise UnknownNameError(f"{self.prefix} env id", env_id, self.ids())
        if self.requires and importlib.util.find_spec(self.requires) is None:
            raise SuiteMissingError(f"env {env_id!r}", self.requires, self.install)
        return self.load().family_make(name, options, **kwargs)


ENV_FAMILIES: Registry[EnvFamily] = Registry("env family")
"""Prefix -> :class:`EnvFamily`."""


def register_env_family(family: EnvFamily) -> EnvFamily:
    """Register ``family`` under its prefix; returns it.

    The module calling this is recorded as the family's registering module
    (``ENV_FAMILIES.module_of(prefix)``): a run on the family lists it, with
    ``family.module``, among its plug-ins, which every worker imports first.

    Raises:
        ValueError: If the prefix is taken or contains a slash.
    """
    if not family.prefix or "/" in family.prefix:
        raise ValueError(f"an env family prefix is a non-empty name without '/', "
                         f"got {family.prefix!r}")
    ENV_FAMILIES.register(family.prefix, module=caller_module())(family)
    return family


def family_of(env_id: str) -> EnvFamily:
    """The family of ``env_id`` (by the text before its first ``/``).

    Raises:
        UnknownNameError: If no family has that prefix (lists every known env id).
    """
    prefix = env_id.split("/", 1)[0] if "/" in env_id else ""
    if prefix not in ENV_FAMILIES:
        raise UnknownNameError("env id", env_id, all_env_ids())
    return ENV_FAMILIES.get(prefix)


def check_max_steps(max_steps: object) -> None:
    """Check the ``max_steps`` argument of a family's ``family_make``: None or an int >= 1.

    Raises:
        InvalidSpecError: Otherwise (message :data:`BAD_MAX_STEPS`).
    """
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise InvalidSpecError(BAD_MAX_STEPS.format(value=max_steps))


def suite_packages() -> tuple[str, ...]:
    """The distributions of the registered families' optional suites (:attr:`EnvFamily.package`),
    in registration order."""
    return tuple(f.package for _, f in ENV_FAMILIES.items() if f.package)


def expert_families() -> dict[str, EnvFamily]:
    """Prefix -> family, for every registered family with scripted experts
    (:attr:`EnvFamily.expert`), in registration order."""
    return {prefix: f for prefix, f in ENV_FAMILIES.items() if f.expert}


def all_env_ids() -> tuple[str, ...]:
    """Every env id of every registered family (families sorted by prefix)."""
    return tuple(i for prefix in ENV_FAMILIES.names() for i in ENV_FAMILIES.get(prefix).ids())


register_env_family(EnvFamily(
    prefix="robogen", description="built-in MjSpec tabletop tasks with scripted experts",
    module="robogen.envs.tabletop", success="the task's own predicate at the last step",
))
register_env_family(EnvFamily(
    prefix="gymnasium", description="Gymnasium's MuJoCo v5 envs, adapted",
    module="robogen.envs.gym_adapter", success="distance or return rule at the last step",
))
register_env_family(EnvFamily(
    prefix="dm_control",
    description="DeepMind Control Suite tasks, <domain>-<task> (dm_control 1.0.50, mujoco 3.17)",
    module="robogen.envs.dm_control_env", requires="dm_control",
    install="make setup-suites (the MuJoCo 3.x track, .venv-suites: dm_control 1.0.50 pins "
            "mujoco==3.17.0)",
    success="episode return >= 500 of the suite's 1000 at the last step (--success-threshold)",
    package="dm_control",
))
register_env_family(EnvFamily(
    prefix="robosuite",
    description="robosuite 1.5.2 manipulation tasks (Panda, OSC_POSE), mujoco 3.17",
    module="robogen.envs.robosuite_env", requires="robosuite",
    install="make setup-suites (the MuJoCo 3.x track, .venv-suites: robosuite 1.5.2 fails on "
            "mujoco 4.0)",
    success="robosuite's _check_success() at any step (the episode ends there), horizon 400",
    package="robosuite", expert="robogen.policies.suite_experts:robosuite_expert",
))
register_env_family(EnvFamily(
    prefix="metaworld", description="Meta-World v3 Sawyer tasks (metaworld 3.1.1)",
    module="robogen.envs.metaworld_env", requires="metaworld",
    install="make setup-metaworld (or: pip install --no-deps metaworld==3.1.1 packaging)",
    success='info["success"] at any step, horizon max_path_length (500)',
    package="metaworld", expert="robogen.policies.suite_experts:metaworld_expert",
))
register_env_family(EnvFamily(
    prefix="gymnasium-robotics",
    description="Fetch arm tasks of gymnasium-robotics 1.4.2 (Reach, Push, PickAndPlace, Slide)",
    module="robogen.envs.fetch_env", requires="gymnasium_robotics",
    install='make setup-fetch (or: pip install "robogen[fetch]")',
    success='info["is_success"] at the last step', package="gymnasium-robotics",
    expert="robogen.policies.suite_experts:fetch_expert",
))
