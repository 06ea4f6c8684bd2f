"""Behaviour-cloning checkpoints: save and load :class:`~robogen.policies.bc_net.BCModel`.

A checkpoint is a directory:

``params.msgpack``
    The Flax parameter tree (``flax.serialization.msgpack_serialize``, float32 arrays).
``bc.json``
    Metadata: ``schema`` (``robogen.bc``), ``version``, ``obs_mode``, ``obs_shapes``,
    ``act_dim``, ``action_low`` / ``action_high`` (env units), the state normalization
    ``obs_mean`` / ``obs_std`` (None without state), the :class:`~robogen.policies.bc_net.BCConfig`
    and ``train_info`` (seed, steps, subset size, final loss, a short loss curve).

Each file is written to a temporary name and renamed, ``bc.json`` last, so a
directory without ``bc.json`` is an incomplete save and is refused on load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from robogen._atomic import write_atomic
from robogen.errors import CheckpointError
from robogen.policies.bc_net import BCConfig, BCModel, PolicyNet

BC_SCHEMA = "robogen.bc"
BC_SCHEMA_VERSION = 1
META_FILE = "bc.json"
PARAMS_FILE = "params.msgpack"
CKPT_MISSING = "BC checkpoint {path} does not exist; expected a directory written by save_bc()"
CKPT_INCOMPLETE = (
    "BC checkpoint {path} has no {meta} (an interrupted save?); re-save it with save_bc()"
)
CKPT_NOT_A_DIR = (
    "BC checkpoint {path} is a file, not a checkpoint; expected a directory written by "
    "save_bc() (with bc.json and params.msgpack)"
)
CKPT_NOT_BC = (
    "{path} is not a BC checkpoint: it has neither {meta} nor {params}; expected a directory "
    "written by save_bc()"
)
CKPT_CORRUPT = "BC checkpoint {path} cannot be read ({why}); re-save it with save_bc()"


def save_bc(model: BCModel, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` to the directory ``path`` (created; an existing save is replaced).

    Files: ``params.msgpack`` (Flax msgpack of the parameter tree) and ``bc.json``
    (metadata), each written to a temporary name and renamed; ``bc.json`` last.

    Args:
        model: The model to save.
        path: Checkpoint directory.

    Returns:
        The checkpoint directory.

    Raises:
        OSError: If the directory cannot be written.
    """
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "schema": BC_SCHEMA,
        "version": BC_SCHEMA_VERSION,
        "obs_mode": model.obs_mode,
        "obs_shapes": {k: list(v) for k, v in model.obs_shapes.items()},
        "act_dim": model.act_dim,
        "action_low": [float(v) for v in model.action_low],
        "action_high": [float(v) for v in model.action_high],
        "obs_mean": None if model.obs_mean is None else [float(v) for v in model.obs_mean],
        "obs_std": None if model.obs_std is None else [float(v) for v in model.obs_std],
        "config": model.config.to_dict(),
        "train_info": dict(model.train_info),
    }
    (out / META_FILE).unlink(missing_ok=True)
    write_atomic(out / PARAMS_FILE, serialization.msgpack_serialize(
        jax.tree_util.tree_map(np.asarray, model.params)))
    write_atomic(out / META_FILE, json.dumps(meta, indent=1).encode())
    return out


def load_bc(path: str | os.PathLike[str]) -> BCModel:
    """Load a checkpoint written by :func:`save_bc` (the directory or its ``bc.json``).

    Raises:
        CheckpointError: If it is missing, incomplete, corrupt, of another schema
            version, or its parameters do not fit its metadata.
    """
    p = Path(path)
    root = p.parent if p.name == META_FILE else p
    if not root.exists():
        raise CheckpointError(CKPT_MISSING.format(path=root))
    if not root.is_dir():
        raise CheckpointError(CKPT_NOT_A_DIR.format(path=root))
    if not (root / META_FILE).is_file():
        if not (root / PARAMS_FILE).is_file():
            raise CheckpointError(CKPT_NOT_BC.format(path=root, meta=META_FILE,
                                                     params=PARAMS_FILE))
        raise CheckpointError(CKPT_INCOMPLETE.format(path=root, meta=META_FILE))
    try:
        meta = json.loads((root / META_FILE).read_text())
        if meta.get("schema") != BC_SCHEMA:
            raise ValueError(f"schema {meta.get('schema')!r}, expected {BC_SCHEMA!r}")
        if meta.get("version") != BC_SCHEMA_VERSION:
            raise ValueError(f"schema version {meta.get('version')!r}; this robogen reads "
                             f"version {BC_SCHEMA_VERSION}")
        config = BCConfig.from_dict(meta["config"])
        params = serialization.msgpack_restore((root / PARAMS_FILE).read_bytes())
        model = BCModel(
            config=config,
            params=params,
            obs_mode=str(meta["obs_mode"]),
            obs_shapes={k: tuple(int(d) for d in v) for k, v in meta["obs_shapes"].items()},
            act_dim=int(meta["act_dim"]),
            action_low=np.asarray(meta["action_low"], np.float32),
            action_high=np.asarray(meta["action_high"], np.float32),
            obs_mean=None if meta["obs_mean"] is None else np.asarray(meta["obs_mean"], np.float32),
            obs_std=None if meta["obs_std"] is None else np.asarray(meta["obs_std"], np.float32),
            train_info=meta.get("train_info", {}),
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(CKPT_CORRUPT.format(path=root, why=f"{type(e).__name__}: {e}")
                              ) from e
    _check_params(model, root)
    return model


def _check_params(model: BCModel, root: Path) -> None:
    dummy = {k: jnp.zeros((1, *s), jnp.uint8 if k == "pixels" else jnp.float32)
             for k, s in model.obs_shapes.items()}
    net = PolicyNet(model.config, model.act_dim)
    want = jax.eval_shape(lambda: net.init(jax.random.PRNGKey(0), dummy.get("state"),
                                           dummy.get("pixels"))["params"])
    want_shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), want)
    try:
        got_shapes = jax.tree_util.tree_map(lambda a: tuple(np.shape(a)), model.params)
    except Exception as e:  # pragma: no cover - msgpack gives plain dicts
        raise CheckpointError(CKPT_CORRUPT.format(path=root, why=str(e))) from e
    if got_shapes != want_shapes:
        raise CheckpointError(CKPT_CORRUPT.format(
            path=root, why="parameter shapes do not match the network described in bc.json"))
