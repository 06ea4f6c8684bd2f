"""Behaviour-cloning checkpoints (re-exported from :mod:`robogen.policies.bc_io`).

Checkpoint I/O lives next to the ``flax:`` policy that loads it, below
``scaling/`` in the layer order; this module keeps ``robogen.scaling.bc_io``
imports working for the trainers and scripts.
"""

from __future__ import annotations

from robogen.policies.bc_io import (
    BC_SCHEMA,
    BC_SCHEMA_VERSION,
    CKPT_CORRUPT,
    CKPT_INCOMPLETE,
    CKPT_MISSING,
    META_FILE,
    PARAMS_FILE,
    load_bc,
    save_bc,
)

__all__ = [
    "BC_SCHEMA", "BC_SCHEMA_VERSION", "CKPT_CORRUPT", "CKPT_INCOMPLETE", "CKPT_MISSING",
    "META_FILE", "PARAMS_FILE", "load_bc", "save_bc",
]
