"""The ``random`` policy and the ``python:module:factory`` entry-point loader.

``random`` / ``random:SEED``:
    Uniform actions in the env's (bounded) Box action space. Each env slot gets
    its own stream, seeded from SEED (default 0) and the episode's reset seed
    (``reset(slots, seeds=...)``, which robogen's workers pass), so episode i
    draws the same actions in every condition and on every backend: gaps of a
    random baseline are paired. Called without seeds, a slot's stream is
    seeded from a hash of its first observation instead. ``deterministic`` is
    ignored.

``python:pkg.module:factory`` or ``python:path/to/file.py:factory``:
    Imports the module (or executes the file) and calls ``factory(ctx)`` with
    the :class:`~robogen.policies.base.LoadContext`; it must return an object
    with ``observation_space``, ``action_space``, ``obs_mode``, ``reset(slots)``
    and ``act(obs, *, deterministic)`` (the :class:`Policy` protocol).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np

from robogen.errors import CheckpointError, InvalidSpecError, SpaceMismatchError
from robogen.policies.base import (
    LoadContext,
    Policy,
    PolicyCapabilities,
    absolute_path,
    register_policy_scheme,
)

PYTHON_URI = "python policy URI must be 'python:pkg.module:factory' or " \
    "'python:path/to/file.py:factory', got {uri!r}"
PYTHON_IMPORT = "python policy {uri!r}: cannot import {module!r} ({why}); {fix}"
PYTHON_ATTR = "python policy {uri!r}: module {module!r} has no attribute {attr!r}{hint}"
PYTHON_NOT_POLICY = (
    "python policy {uri!r}: {attr}(ctx) returned a {type}, which lacks {missing}; a policy needs "
    "observation_space, action_space, obs_mode, reset(slots) and act(obs, *, deterministic)"
)
_POLICY_ATTRS = ("observation_space", "action_space", "obs_mode", "reset", "act")


class RandomPolicy:
    """Uniform random actions in a bounded Box action space.

    Args:
        observation_space: The env's observation space (accepted as is).
        action_space: The env's Box action space with finite bounds.
        obs_mode: The env's observation mode.
        seed: Seed of the action stream.

    Raises:
        SpaceMismatchError: If the action space is not a Box with finite bounds.
    """

    capabilities: ClassVar[PolicyCapabilities] = PolicyCapabilities(slots=True, seeds=True)

    def __init__(self, observation_space: Any, action_space: Any, obs_mode: str, seed: int = 0
                 ) -> None:
        low, high = getattr(action_space, "low", None), getattr(action_space, "high", None)
        if low is None or high is None or not (np.all(np.isfinite(low))
                                               and np.all(np.isfinite(high))):
            raise SpaceMismatchError(
                f"the random policy needs a Box action space with finite bounds, got {action_space}"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_mode = obs_mode
        self.seed = seed
        self._low = np.asarray(low, dtype=np.float64)
        self._high = np.asarray(high, dtype=np.float64)
        # Generator.uniform(low, high) with array bounds costs ~20 us a call (its broadcasting
        # set-up); it computes low + (high - low) * next_double, the same values as this:
        self._range = self._high - self._low
        self._rngs: dict[int, np.random.Generator] = {}

    def reset(self, slots: Sequence[int], *, seeds: Sequence[int] | None = None) -> None:
        """Restart the streams of ``slots``: from ``seeds`` if given, else the next observation."""
        for i, k in enumerate(slots):
            if seeds is None:
                self._rngs.pop(int(k), None)
            else:
                self._rngs[int(k)] = np.random.default_rng([self.seed, int(seeds[i])])

    def _slot_rng(self, k: int, obs: Any, row: int) -> np.random.Generator:
        rng = self._rngs.get(k)
        if rng is None:
            parts = [obs[key][row] for key in sorted(obs)] if isinstance(obs, dict) else [obs[row]]
            h = hashlib.blake2b(digest_size=8)
            for p in parts:
                h.update(np.ascontiguousarray(p).tobytes())
            rng = np.random.default_rng([self.seed, int.from_bytes(h.digest(), "little")])
            self._rngs[k] = rng
        return rng

    def act(
        self, obs: Any, *, deterministic: bool = True, slots: Sequence[int] | None = None
    ) -> np.ndarray:
        """``(B, *action_shape) float32`` uniform actions; row i uses slot ``slots[i]``'s stream."""
        if slots is None:
            rows: Sequence[int] = range(len(next(iter(obs.values())))
                                        if isinstance(obs, dict) else len(obs))
        else:
            rows = slots
        low, span, shape = self._low, self._range, self._low.shape
        out = np.empty((len(rows), *shape), np.float32)
        for i, k in enumerate(rows):
            rng = self._rngs.get(k)
            if rng is None:
                rng = self._slot_rng(int(k), obs, i)
            out[i] = low + span * rng.random(shape)
        return out


@register_policy_scheme("random", form="random[:SEED]")
def load_random(rest: str, ctx: LoadContext) -> RandomPolicy:
    """Load ``random`` or ``random:SEED``.

    Raises:
        InvalidSpecError: If SEED is not a non-negative integer.
        SpaceMismatchError: If the env's action space is not a bounded Box.
    """
    seed = 0
    if rest:
        try:
            seed = int(rest)
        except ValueError:
            seed = -1
        if seed < 0:
            raise InvalidSpecError(
                f"random policy seed must be a non-negative integer ('random:7'), got {rest!r}"
            )
    return RandomPolicy(ctx.observation_space, ctx.action_space, ctx.obs_mode, seed)


def _import(module: str, uri: str) -> Any:
    if module.endswith(".py"):
        path = Path(module).expanduser().resolve()
        if not path.is_file():
            raise CheckpointError(PYTHON_IMPORT.format(
                uri=uri, module=module, why="no such file", fix="check the path"))
        name = f"robogen_user_policy_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as e:
            del sys.modules[name]
            raise CheckpointError(PYTHON_IMPORT.format(
                uri=uri, module=module, why=f"{type(e).__name__}: {e}",
                fix="fix the error in that file")) from e
        return mod
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing_self = e.name is not None and (module == e.name or module.startswith(e.name + "."))
        fix = ("check the module name and that its directory is on PYTHONPATH (or give a .py path)"
               if missing_self else f"install the package {e.name!r} it imports")
        raise CheckpointError(PYTHON_IMPORT.format(
            uri=uri, module=module, why=f"ModuleNotFoundError: {e}", fix=fix)) from e
    except Exception as e:
        raise CheckpointError(PYTHON_IMPORT.format(
            uri=uri, module=module, why=f"{type(e).__name__}: {e}",
            fix="fix the error raised while importing it")) from e


def resolve_python(rest: str) -> str:
    """``FILE.py:factory`` with the file's path absolute; ``pkg.module:factory`` unchanged."""
    module, sep, attr = rest.rpartition(":")
    if sep and module.endswith(".py"):
        return f"{absolute_path(module)}:{attr}"
    return rest


@register_policy_scheme("python", form="python:MODULE:FACTORY", resolve=resolve_python)
def load_python(rest: str, ctx: LoadContext) -> Policy:
    """Load ``python:pkg.module:factory`` (or ``python:file.py:factory``) via ``factory(ctx)``.

    Raises:
        InvalidSpecError: If the URI has no ``module:factory`` form.
        CheckpointError: If the module cannot be imported, lacks the factory,
            the factory is not callable, raises, or returns no Policy.
    """
    uri = f"python:{rest}"
    if ":" not in rest:
        raise InvalidSpecError(PYTHON_URI.format(uri=uri))
    module, attr = rest.rsplit(":", 1)
    if not module or not attr:
        raise InvalidSpecError(PYTHON_URI.format(uri=uri))
    mod = _import(module, uri)
    if not hasattr(mod, attr):
        names = [n for n in dir(mod) if not n.startswith("_")]
        close = difflib.get_close_matches(attr, names, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise CheckpointError(PYTHON_ATTR.format(uri=uri, module=module, attr=attr, hint=hint))
    factory = getattr(mod, attr)
    if not callable(factory):
        raise CheckpointError(
            f"python policy {uri!r}: {attr} is a {type(factory).__name__}, not a callable factory"
        )
    try:
        policy = factory(ctx)
    except Exception as e:
        raise CheckpointError(
            f"python policy {uri!r}: {attr}(ctx) raised {type(e).__name__}: {e}"
        ) from e
    missing = [a for a in _POLICY_ATTRS if not hasattr(policy, a)]
    if missing:
        raise CheckpointError(PYTHON_NOT_POLICY.format(
            uri=uri, attr=attr, type=type(policy).__name__, missing=", ".join(missing)))
    return cast(Policy, policy)  # it has every attribute of the protocol (checked above)
