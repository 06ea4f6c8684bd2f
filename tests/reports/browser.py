"""Headless Chromium for the layout tests: a page's widths at a window size, and a screenshot.

Uses Debian's ``chromium`` (``apt-get install -y chromium``); :func:`chromium` is None without it.
Pages are opened from ``file://`` URLs, nothing leaves the machine.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

PROBE = (
    "<script>window.addEventListener('load',()=>{{const d=document.documentElement,"
    "b=document.body,r=b.getBoundingClientRect(),s=getComputedStyle(b);"
    "const right=r.right-parseFloat(s.paddingRight);let over=[];"
    "for(const el of b.querySelectorAll('*')){{if(el.closest('.tbl,pre,details:not([open])'))"
    "{{if(!el.matches('.tbl,pre'))continue;}}const q=el.getBoundingClientRect();"
    "if(q.width>0&&q.right>right+1)over.push(el.tagName+'.'+el.className+':'+Math.round(q.right));}}"
    "const p=document.createElement('pre');p.id='{id}';p.textContent=JSON.stringify("
    "{{scrollWidth:d.scrollWidth,clientWidth:d.clientWidth,innerWidth:window.innerWidth,"
    "contentRight:Math.round(right),overflowing:over.slice(0,10)}});b.appendChild(p);}});</script>"
)
PROBE_ID = "robogen-layout-probe"
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
          "--mute-audio", "--no-first-run", "--disable-extensions")


def chromium() -> str | None:
    """Path of the Chromium executable, or None when it is not installed."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def layout(page: Path, width: int = 1280, height: int = 2000, *, timeout_s: float = 120
           ) -> dict:
    """Widths of ``page`` opened at ``width`` x ``height`` px (a probed copy next to it).

    Returns:
        ``scrollWidth``, ``clientWidth``, ``innerWidth``, ``contentRight`` (the body's
        content edge [px]) and ``overflowing`` (elements outside a scrolling box whose right
        edge passes that content edge, as ``TAG.class:right``).
    """
    exe = chromium()
    assert exe is not None
    text = page.read_text(encoding="utf-8")
    probe = PROBE.format(id=PROBE_ID)
    probed = page.with_name(f".probe-{page.name}")
    probed.write_text(text.replace("</body>", probe + "</body>", 1), encoding="utf-8")
    try:
        out = subprocess.run(
            [exe, *_FLAGS, f"--window-size={width},{height}", "--virtual-time-budget=10000",
             "--dump-dom", probed.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout_s, check=True).stdout
    finally:
        probed.unlink(missing_ok=True)
    m = re.search(rf'<pre id="{PROBE_ID}">(.*?)</pre>', out, re.S)
    assert m, f"the probe did not run in {page}: {out[-500:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2000, *,
               timeout_s: float = 120) -> Path:
    """A ``width`` x ``height`` px PNG screenshot of ``page`` (its top) at ``png``."""
    exe = chromium()
    assert exe is not None
    subprocess.run([exe, *_FLAGS, f"--window-size={width},{height}",
                    "--virtual-time-budget=10000", f"--screenshot={png.resolve()}",
                    page.resolve().as_uri()],
                   capture_output=True, timeout=timeout_s, check=True)
    return png
