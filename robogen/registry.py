"""A small decorator registry keyed by snake_case names.

Perturbation axes, policy schemes and env families each get one :class:`Registry`.
Every entry records the module that registered it (:meth:`Registry.module_of`), so a run
can list the plug-in modules it uses and have its workers import them
(:mod:`robogen.plugins`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from robogen.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object mapping filled by a decorator.

    Args:
        kind: What the entries are, used in error messages ("perturbation axis").
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._modules: dict[str, str] = {}

    def register(self, name: str, *, module: str | None = None) -> Callable[[T], T]:
        """Decorator that registers its target under ``name``.

        Args:
            name: The key.
            module: Import path of the module whose import makes this registration;
                default: the target's own ``__module__`` (a class or function defined
                where it is registered). Pass it for targets that are instances
                (:func:`caller_module`).

        Raises:
            ValueError: If ``name`` is already registered.
        """

        def decorate(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = obj
            self._modules[name] = module or str(getattr(obj, "__module__", "") or "")
            return obj

        return decorate

    def module_of(self, name: str) -> str:
        """The module that registered ``name`` (``""`` if unknown).

        Raises:
            UnknownNameError: If ``name`` is not registered; lists close matches.
        """
        self.get(name)
        return self._modules.get(name, "")

    def get(self, name: str) -> T:
        """Return the entry for ``name``.

        Raises:
            UnknownNameError: If ``name`` is not registered; lists close matches.
        """
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def names(self) -> tuple[str, ...]:
        """Registered names, sorted."""
        return tuple(sorted(self._entries))

    def items(self) -> tuple[tuple[str, T], ...]:
        """``(name, entry)`` pairs in registration order."""
        return tuple(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)


def caller_module(depth: int = 1) -> str:
    """``__name__`` of the module ``depth`` frames above the caller (``""`` if unknown).

    A registration function called from a plug-in's module body
    (``register_env_family(...)``) records that module with ``caller_module()``.
    """
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return ""
    return str(frame.f_globals.get("__name__", ""))
