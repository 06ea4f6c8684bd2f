"""Element helpers for env families that adapt third-party MuJoCo models.

:func:`name_elements` names every unnamed element of a spec, so that scene roles
(:class:`~robogen.envs.base.SceneRoles`) and the axes find each element by name;
:func:`descends_from` tells whether a body hangs below another. Both are exported from
:mod:`robogen.envs`.
"""

from __future__ import annotations

from typing import Any


def name_elements(spec: Any) -> None:
    """Give every unnamed body, geom, light, camera and actuator of ``spec`` (a
    ``mujoco.MjSpec``) a stable name
    (in place), so that scene roles and axes find every element by name.

    An unnamed body is named ``<parent>_child``, a body's unnamed geoms ``<body>_geom`` (or
    ``<body>_geom<k>`` when it has several), lights ``light<k>``, cameras ``camera<k>``,
    actuators after their target (else ``actuator<k>``); a taken name gets a number
    appended. The same XML always gives the same names. An env family that adapts
    third-party XML calls it on the nominal spec before compiling.
    """

    def unique(base: str, taken: set[str]) -> str:
        name, k = base, 1
        while name in taken:
            name, k = f"{base}{k}", k + 1
        taken.add(name)
        return name

    bodies = {b.name for b in spec.bodies if b.name}
    for b in spec.bodies:
        if not b.name and b.parent is not None:
            b.name = unique(f"{b.parent.name}_child", bodies)
    geoms = {g.name for g in spec.geoms if g.name}
    for b in spec.bodies:
        unnamed = [g for g in b.geoms if not g.name]
        for k, g in enumerate(unnamed):
            base = f"{b.name}_geom" if len(unnamed) == 1 else f"{b.name}_geom{k}"
            g.name = unique(base, geoms)
    lights = {x.name for x in spec.lights if x.name}
    for k, x in enumerate(spec.lights):
        if not x.name:
            x.name = unique(f"light{k}", lights)
    cams = {x.name for x in spec.cameras if x.name}
    for k, x in enumerate(spec.cameras):
        if not x.name:
            x.name = unique(f"camera{k}", cams)
    acts = {a.name for a in spec.actuators if a.name}
    for k, a in enumerate(spec.actuators):
        if not a.name:
            a.name = unique(a.target or f"actuator{k}", acts)


def descends_from(model: Any, body: int, root: int) -> bool:
    """True if body id ``body`` of ``model`` (a ``mujoco.MjModel``) is ``root`` or hangs
    below it in the kinematic tree."""
    while body > 0:
        if body == root:
            return True
        body = int(model.body_parentid[body])
    return False


__all__ = ["descends_from", "name_elements"]
