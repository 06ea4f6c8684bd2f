"""Scenes and tasks: built-in MjSpec tabletop tasks and adapters for third-party MuJoCo envs.

Env ids:
    ``robogen/<Task>-v<N>``: built-in tasks registered with Gymnasium
    (``gymnasium.make("robogen/PickPlace-v0")`` works after ``import robogen``).
    ``gymnasium/<Id>``: Gymnasium's own MuJoCo env ``<Id>`` (e.g. ``Hopper-v5``)
    wrapped by :mod:`robogen.envs.gym_adapter` so that the same axes act on it; the ids,
    success rules, cameras and scene roles are records of :mod:`robogen.envs.gym_catalog`.
    ``gymnasium-robotics/<Id>``: Fetch tasks (:mod:`robogen.envs.fetch_env`).
    ``metaworld/<task>-v3``: Meta-World tasks (:mod:`robogen.envs.metaworld_env`).

The prefix before the first ``/`` selects an *env family* in
:data:`~robogen.envs.families.ENV_FAMILIES`; a new family is one module and one
:func:`~robogen.envs.families.register_env_family` call.

Every env :func:`make` returns:
    * has a :class:`~robogen.envs.base.MujocoScene` in its wrapper stack;
    * puts ``info["success"]`` (bool) in every ``step`` info;
    * truncates at ``max_steps`` (a Gymnasium ``TimeLimit``, or the env itself:
      ``dm_control/``) and has ``spec.max_episode_steps``;
    * offers observation modes ``state`` (float32 vector), ``pixels``
      (``(H, W, 3) uint8``) and ``state+pixels`` (dict with both).
"""

from __future__ import annotations

from typing import Any

import robogen._gl  # noqa: F401  (choose MUJOCO_GL before mujoco is imported)
from robogen.envs.base import MujocoScene, PoseDof, SceneCapabilities, SceneRoles, find_scene
from robogen.envs.elements import descends_from, name_elements
from robogen.envs.families import (
    ENV_FAMILIES,
    EnvFamily,
    EnvOptions,
    SuiteMissingError,
    all_env_ids,
    family_of,
    register_env_family,
)
from robogen.errors import InvalidSpecError
from robogen.types import RenderSettings

GYMNASIUM_PREFIX = "gymnasium/"
ROBOGEN_PREFIX = "robogen/"

__all__ = [
    "ENV_FAMILIES", "EnvFamily", "EnvOptions", "MujocoScene", "PoseDof", "SceneRoles",
    "SceneCapabilities", "SuiteMissingError", "descends_from", "find_scene", "list_env_ids",
    "make", "name_elements", "register_env_family",
]


def list_env_ids() -> tuple[str, ...]:
    """All env ids robogen knows, from every registered family (suites not installed too)."""
    return all_env_ids()


def make(
    env_id: str,
    *,
    obs_mode: str = "state",
    max_steps: int | None = None,
    render: RenderSettings | None = None,
    success_threshold: float | None = None,
    **kwargs: Any,
) -> Any:
    """Create a perturbable env.

    Args:
        env_id: ``<family prefix>/<name>``: ``robogen/<Task>-v<N>``, ``gymnasium/<Id>``,
            ``gymnasium-robotics/<Id>``, ``metaworld/<task>-v3``.
        obs_mode: ``state``, ``pixels`` or ``state+pixels``.
        max_steps: Step limit (None: the env's registered default).
        render: Pixel observation settings (size, camera); None: the env's default.
        success_threshold: Return threshold that defines success, overriding the
            env's own rule (for envs without a success flag).
        **kwargs: Passed to the env constructor.

    Returns:
        A ``gymnasium.Env`` with a MujocoScene in its stack.

    Raises:
        UnknownNameError: On an unknown env id (lists close matches).
        InvalidSpecError: On a bad observation mode or step limit.
        SuiteMissingError: If the env's suite is not installed (names the command).
    """
    options = EnvOptions(obs_mode=obs_mode, max_steps=max_steps, render=render,
                         success_threshold=success_threshold)
    family = family_of(env_id)
    try:
        return family.make(env_id, options, **kwargs)
    except TypeError as e:
        if not kwargs or "argument" not in str(e):
            raise
        raise InvalidSpecError(
            f"env {env_id!r} does not accept env_kwargs {sorted(kwargs)}: {e}"
        ) from e
