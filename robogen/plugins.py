"""Plug-ins: modules outside robogen that register an env family, an axis, a policy scheme
or an episode observer.

A plug-in is an importable module whose import registers something
(``register_env_family``, ``@register_axis``, ``@register_policy_scheme``,
``register_gym_env``, ``@register_observer``). Each registry records the module of every entry
(:meth:`robogen.registry.Registry.module_of`); a run's manifest lists the plug-in modules
its env, policy, axes and observers came from (``EvalManifest.plugins``, not hashed), and every
worker imports them before it builds an env, on the serial backend and on every Ray
node, so a plug-in that works serially works on a cluster too.

Ways to load plug-ins:

* ``robogen --plugin MODULE ...`` (repeatable; or ``ROBOGEN_PLUGINS="MOD1 MOD2"``);
* an installed distribution's entry point in the group :data:`PLUGIN_GROUP`::

      [project.entry-points."robogen.plugins"]
      my_suite = "my_pkg.robogen_plugin"

  which the ``robogen`` executable imports at start (:func:`load_entry_point_plugins`);
* from Python: import the module before calling robogen (or :func:`import_plugins`).

A run resumed from its directory imports the plug-ins its manifest lists.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable

from robogen.errors import PluginError

PLUGIN_GROUP = "robogen.plugins"
"""Entry-point group of installed plug-ins (each entry names a module)."""

PLUGIN_IMPORT_FAILED = (
    "cannot import the plug-in module {module!r}{why} ({error}); install it or put its "
    "directory on PYTHONPATH"
)
"""Message of :class:`~robogen.errors.PluginError` when a plug-in module is not found."""
PLUGIN_RAISED = (
    "the plug-in module {module!r}{why} raised while importing ({error}); fix the plug-in "
    "(a name registered twice: another plug-in or robogen itself has it)"
)
"""Message of :class:`~robogen.errors.PluginError` when a plug-in module raises on import."""
SCRIPT_RESUME = (
    "{error}: the run's manifest says the script that made it (__main__) registered it, "
    "which this process has not done: resume it from a script that registers it first "
    "(robogen.runs.evaluation.resume), or move the registration into a module and load it "
    "with --plugin MODULE"
)
"""Message when a run made by a script with its own registrations is resumed elsewhere."""
SCRIPT_PLUGIN = (
    "an env family, policy scheme, axis or episode observer this run uses is registered by "
    "the script being run (__main__), which a Ray worker cannot import: move the "
    "registration into a module and load it with --plugin MODULE (from Python: import that "
    "module), or run with --backend serial"
)
"""Message when a Ray run uses an entry registered in ``__main__``."""
ENTRY_POINT_FAILED = (
    "robogen: the plug-in entry point {name!r} ({value}) of {dist} failed to load, skipped: "
    "{error}"
)
"""Warning for an installed entry point that raised on import."""

SCRIPT = "__main__"


def is_plugin_module(module: str) -> bool:
    """Whether ``module`` is outside robogen (``""``, ``robogen`` and ``robogen.*`` are not)."""
    return bool(module) and module != "robogen" and not module.startswith("robogen.")


def import_plugins(modules: Iterable[str], *, why: str = "") -> tuple[str, ...]:
    """Import each plug-in module (already imported ones are left as they are).

    ``__main__`` is skipped: the script that registered something is this process itself
    (a Ray backend refuses such a run first, :data:`SCRIPT_PLUGIN`).

    Args:
        modules: Import paths (``pkg.module``), in the order to import them.
        why: Words after the module name in the error (``" that the run uses"``).

    Returns:
        The modules imported or found imported, in order.

    Raises:
        PluginError: If one cannot be imported or raises while importing (its error named;
            an ``ImportError`` subclass).
    """
    done: list[str] = []
    for module in dict.fromkeys(m.strip() for m in modules):
        if not module or module == SCRIPT:
            continue
        if module not in sys.modules:
            try:
                importlib.import_module(module)
            except Exception as e:  # noqa: BLE001 - any import-time error names the module
                missing = isinstance(e, ModuleNotFoundError) and e.name is not None and (
                    module == e.name or module.startswith(e.name + "."))
                text = PLUGIN_IMPORT_FAILED if missing else PLUGIN_RAISED
                raise PluginError(module, text.format(
                    module=module, why=why, error=f"{type(e).__name__}: {e}")) from e
        done.append(module)
    return tuple(done)


def load_entry_point_plugins() -> tuple[str, ...]:
    """Import the modules of every installed :data:`PLUGIN_GROUP` entry point.

    An entry point that fails to import is skipped with a warning on stderr naming it and its
    distribution (an unrelated broken plug-in does not stop robogen).

    Returns:
        The modules loaded.
    """
    from importlib.metadata import entry_points

    loaded: list[str] = []
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - reported, then skipped
            dist = getattr(ep.dist, "name", None) or "an unknown distribution"
            sys.stderr.write(ENTRY_POINT_FAILED.format(
                name=ep.name, value=ep.value, dist=dist,
                error=f"{type(e).__name__}: {e}") + "\n")
            continue
        loaded.append(ep.module)
    return tuple(loaded)

