"""Exceptions raised by robogen.

Every error derives from :class:`RobogenError` and from the builtin that matches
its meaning, so ``except ValueError`` still works for callers who do not know
robogen. Messages say what was expected, what arrived, and how to fix it; the
templates are module constants so tests can reuse them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

UNKNOWN_NAME = "unknown {kind} {name!r}; expected one of: {choices}{hint}"
MUST_BE_IN_RANGE = "{field} must be in [{low}, {high}], got {value!r}"
MUST_BE_POSITIVE = "{field} must be > 0, got {value!r}"
MISSING_EXTRA = (
    "{what} needs the optional dependency {module!r}; "
    'install it with: pip install "robogen[{extra}]"'
)


class RobogenError(Exception):
    """Base class of every error robogen raises on purpose."""


class RobogenWarning(UserWarning):
    """A warning meant for the user (not a code location): the CLI prints it once per run as
    ``warning: <message>`` (:func:`robogen._console.route_robogen_warnings`), without the
    file and line Python's default warning display adds."""


class UnknownNameError(RobogenError, LookupError):
    """A registry key (env, axis, policy scheme, ...) that is not registered."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]) -> None:
        choices = sorted(choices)
        close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        super().__init__(
            UNKNOWN_NAME.format(kind=kind, name=name, choices=", ".join(choices), hint=hint)
        )
        self.kind = kind
        self.name = name
        self.close_matches = tuple(close)


class InvalidPerturbationError(RobogenError, ValueError):
    """A perturbation or axis argument outside its documented range."""


class InvalidSpecError(RobogenError, ValueError):
    """An evaluation / scaling / check specification that cannot run."""


class SpaceMismatchError(RobogenError, ValueError):
    """A policy's observation or action space does not match the env's."""


class CheckpointError(RobogenError, ValueError):
    """A policy checkpoint that cannot be loaded or is missing companion files."""


class RunDirError(RobogenError, ValueError):
    """A run directory that is missing, empty, corrupt or from another evaluation."""


class StoreWriteError(RobogenError, OSError):
    """The run directory could not be written (a full disk, a read-only or removed folder);
    the message names the path, the episodes already stored and the command that resumes."""


class SceneError(RobogenError, ValueError):
    """A scene lacks an element (role) an operation needs, or failed to compile."""


class RenderError(RobogenError, RuntimeError):
    """Offscreen rendering failed; the message names the MUJOCO_GL fix."""


class DependencyMissingError(RobogenError, ImportError):
    """An optional dependency (extra) is not installed."""

    def __init__(self, what: str, module: str, extra: str) -> None:
        super().__init__(MISSING_EXTRA.format(what=what, module=module, extra=extra))


class PluginError(RobogenError, ImportError):
    """A plug-in module (an env family, axis or policy scheme registered outside robogen)
    that cannot be imported here, or a run whose plug-ins a worker cannot import.

    Attributes:
        module: The plug-in module's import path.
    """

    def __init__(self, module: str, message: str) -> None:
        super().__init__(message)
        self.module = module


class InfrastructureError(RobogenError, RuntimeError):
    """A failure of the machinery around an episode, not of the policy.

    Raised by policies whose inference runs elsewhere (a policy server that
    timed out, dropped the connection or answered an error) and by backends.
    The rollout worker records the episodes it ends with cause ``infra_error``
    (an invalid episode, excluded from success rates), never ``policy_error``.
    """


class InfrastructureTimeoutError(InfrastructureError, TimeoutError):
    """The work unit's wall-clock budget ran out while waiting on the machinery around an
    episode (a policy server's reply, its retries and back-off).

    The rollout worker records the episodes it ends with cause ``infra_timeout``.
    """
