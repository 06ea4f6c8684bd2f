"""The batched-backend tests use a private warp kernel cache.

warp compiles MJWarp's kernels at their first use and caches them. The tests use their own
cache directory (``$WARP_CACHE_PATH`` if set, else ``~/.cache/robogen/warp-tests``), so a
run does not depend on what other programs left in ``~/.cache/warp``; the first run compiles
(about a minute per new scene on two CPU cores), later runs load the cache.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("WARP_CACHE_PATH", str(Path.home() / ".cache" / "robogen" / "warp-tests"))
