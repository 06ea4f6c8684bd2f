"""A small decorator registry keyed by snake_case names.

Perturbation axes and policy schemes each get one :class:`Registry`. Envs use
Gymnasium's own registry instead (see :mod:`robogen.envs`).
"""

from __future__ import annotations

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

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that registers its target under ``name``.

        Raises:
            ValueError: If ``name`` is already registered.
        """

        def decorate(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = obj
            return obj

        return decorate

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

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
