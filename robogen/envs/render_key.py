"""Which models may share one ``MjrContext``: :func:`context_key`, a digest of everything
MuJoCo's ``mjr_makeContext`` reads from a model (textures, meshes, height fields, skins,
materials' texture use, plane sizes, buffer sizes and quality settings).

Part of :mod:`robogen.envs.render` (which re-exports :func:`context_key`).
"""

from __future__ import annotations

import hashlib

import mujoco
import numpy as np

_KEY_ARRAYS = (
    "tex_type", "tex_colorspace", "tex_width", "tex_height", "tex_nchannel", "tex_adr", "tex_data",
    "mat_texid", "mat_texuniform", "mat_texrepeat", "geom_type", "geom_size", "geom_matid",
    "mesh_vertadr", "mesh_vertnum", "mesh_normaladr", "mesh_normalnum", "mesh_texcoordadr",
    "mesh_texcoordnum", "mesh_faceadr", "mesh_facenum", "mesh_graphadr", "mesh_vert",
    "mesh_normal", "mesh_texcoord", "mesh_face", "mesh_facenormal", "mesh_facetexcoord",
    "mesh_graph", "hfield_size", "hfield_nrow", "hfield_ncol", "hfield_adr", "hfield_data",
    "skin_vertnum", "skin_texcoordadr", "skin_texcoord", "skin_faceadr", "skin_facenum",
    "skin_face",
)
_KEY_VISUAL = (
    ("quality", ("shadowsize", "offsamples", "numslices", "numstacks", "numquads")),
    ("global_", ("offwidth", "offheight", "linewidth")),
    ("map", ("zfar", "shadowscale", "shadowclip", "haze", "fogstart", "fogend")),
    ("rgba", ("fog", "haze")),
)


def context_key(model: mujoco.MjModel) -> bytes:
    """Digest of everything ``mjr_makeContext`` reads from ``model`` (MuJoCo's
    ``render_context.c``): texture data and layout, materials' texture ids, repeat and
    uniform flags, geom types, sizes and materials (plane grids), meshes, height fields,
    skins, ``vis.quality`` / ``vis.global_`` / ``vis.map`` / ``vis.rgba`` fields it uses and
    ``stat.extent``. Two models with the same key get identical contexts, so their
    renderers may share one.

    Returns:
        A 32-byte BLAKE2b digest.
    """
    h = hashlib.blake2b(digest_size=32)
    for name in _KEY_ARRAYS:
        a = getattr(model, name, None)
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(f"{name}{a.shape}{a.dtype.str}".encode())
            h.update(a.data)
    for group, names in _KEY_VISUAL:
        part = getattr(model.vis, group)
        h.update(repr([(n, np.asarray(getattr(part, n)).tolist()) for n in names]).encode())
    h.update(repr(float(model.stat.extent)).encode())
    return h.digest()
