"""Cached torch views of one :class:`~robogen.batched.worlds.BatchedWorlds`' device arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from robogen.batched.worlds import BatchedWorlds


class WorldViews:
    """``views(worlds, "qpos")``: :meth:`BatchedWorlds.tensor` of ``name``, made once per array.

    The views share memory with MJWarp's arrays, which the steps and state writes update in
    place, so a view stays valid; a different ``worlds`` object (or a model field replaced
    by ``set_fields``) starts a new cache.
    """

    def __init__(self) -> None:
        self._worlds: BatchedWorlds | None = None
        self._arrays: dict[str, object] = {}
        self._views: dict[str, torch.Tensor] = {}

    def __call__(self, worlds: BatchedWorlds, name: str) -> torch.Tensor:
        """The torch view of ``worlds``' array ``name`` (a ``Data`` field or ``m.<field>``)."""
        if worlds is not self._worlds:
            self._worlds, self._arrays, self._views = worlds, {}, {}
        owner, field = (worlds.m, name[2:]) if name.startswith("m.") else (worlds.d, name)
        array = getattr(owner, field, None)
        view = self._views.get(name)
        if view is None or self._arrays.get(name) is not array:
            view = self._views[name] = worlds.tensor(name)
            self._arrays[name] = array
        return view
