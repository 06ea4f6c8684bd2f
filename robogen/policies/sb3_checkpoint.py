"""Reading a Stable-Baselines3 checkpoint without loading it: its algorithm, its companion
``VecNormalize`` statistics, the versions it was saved with, and what a failed load means
(the mismatching parameter, the unreadable entry); the messages of the errors raised.

:mod:`robogen.policies.sb3` (the loader and the policy) re-exports every public name here.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

from robogen.errors import CheckpointError

ALGOS = ("ppo", "a2c", "sac", "td3", "dqn")
CHECKPOINT_MISSING = "SB3 checkpoint {path} {what}; expected a .zip written by model.save()"
CHECKPOINT_CORRUPT = (
    "SB3 checkpoint {path} cannot be read ({why}); expected a .zip written by model.save(). "
    "Re-download or re-save it"
)
MISSING_VECNORMALIZE = (
    "SB3 checkpoint {path} was trained with VecNormalize observation normalization ({evidence}) "
    "but no statistics were given; pass --vecnormalize {suggest}"
)
UNUSED_VECNORMALIZE = (
    "SB3 checkpoint {path} was trained without VecNormalize ({algo} saved no raw observations, "
    "_last_original_obs), so the statistics {stats} would feed it inputs it never saw; drop "
    "--vecnormalize"
)
VECNORMALIZE_BAD = "VecNormalize statistics {path} cannot be loaded ({why}); expected a pickle " \
    "written by VecNormalize.save()"
VECNORMALIZE_SHAPE = (
    "VecNormalize statistics {path} normalize observations of shape {stats_shape} but policy "
    "{uri!r} takes {policy_space} and env {env_id!r} gives {env_space}; pass the statistics saved "
    "with this checkpoint"
)
WEIGHTS_MISMATCH = (
    "SB3 checkpoint {path}: its network weights (policy.pth) do not fit the network its data "
    "entry describes ({detail}); {versions}. The zip was assembled from two different models "
    "or saved by an incompatible Stable-Baselines3; re-save it with model.save()"
)
LOAD_FAILED = (
    "SB3 checkpoint {path} cannot be loaded ({why}); {versions}. Load it where it was saved "
    "and re-save it with model.save() under the current versions"
)
VERSIONS = "saved with {saved}; running {current}"
VERSIONS_DIFFER = " (different: {names})"
SYSTEM_INFO = "system_info.txt"
"""Entry of an SB3 zip holding the versions it was saved with (``- Python: 3.11.7`` lines)."""
VERSION_KEYS = ("Python", "Stable-Baselines3", "PyTorch")
"""Packages whose saved and current versions are recorded and named in load errors."""
_SB3_POLICY_MODULES = {
    "stable_baselines3.sac.policies": "sac",
    "stable_baselines3.td3.policies": "td3",
    "stable_baselines3.dqn.policies": "dqn",
}


def detect_algo(path: Path) -> str | None:
    """Algorithm name of an SB3 zip from its ``data`` entry, or None if undecidable.

    Raises:
        CheckpointError: If ``path`` is missing or not a readable zip with a ``data`` entry.
    """
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise CheckpointError(CHECKPOINT_MISSING.format(path=path, what=what))
    try:
        with zipfile.ZipFile(path) as zf:
            data = json.loads(zf.read("data"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise CheckpointError(CHECKPOINT_CORRUPT.format(path=path, why=f"{type(e).__name__}: {e}")
                              ) from e
    module = str((data.get("policy_class") or {}).get("__module__", ""))
    if module in _SB3_POLICY_MODULES:
        return _SB3_POLICY_MODULES[module]
    if module == "stable_baselines3.common.policies":
        return "ppo" if "clip_range" in data else "a2c"
    return None


def find_vecnormalize(path: Path) -> tuple[Path | None, str | None]:
    """Companion VecNormalize statistics of checkpoint ``path``.

    Returns:
        ``(stats_file, evidence)``: the statistics file found (or None) and a
        description of why the checkpoint needs normalization (or None if
        nothing says it does).
    """
    stem, folder = path.stem, path.parent
    for cand in (folder / f"{stem}_vecnormalize.pkl", folder / "vecnormalize.pkl",
                 folder / stem / "vecnormalize.pkl"):
        if cand.is_file():
            return cand, f"found {cand}"
    meta = folder / f"{stem}.json"
    if meta.is_file():
        try:
            info = json.loads(meta.read_text())
        except ValueError:
            return None, None
        if isinstance(info, dict) and info.get("vecnormalize"):
            name = info.get("vecnormalize_file")
            cand = folder / name if name else None
            if cand is not None and cand.is_file():
                return cand, f'{meta} says "vecnormalize": true'
            if cand is not None:
                return None, (f'{meta} says "vecnormalize": true and names the statistics file '
                              f"{cand}, which does not exist: put it there or pass its path")
            return None, (f'{meta} says "vecnormalize": true and names no '
                          '"vecnormalize_file"; looked for '
                          f"{folder / f'{stem}_vecnormalize.pkl'}, {folder / 'vecnormalize.pkl'} "
                          f"and {folder / stem / 'vecnormalize.pkl'}")
    return None, None


def trained_with_vecnormalize(model: Any, algo: str) -> bool | None:
    """Whether the saved rollout state of ``model`` shows VecNormalize training.

    On-policy SB3 algorithms (PPO, A2C) set ``_last_original_obs`` (the raw
    observation) only when the training env is a ``VecNormalize`` and save it
    with the model; ``_last_obs`` is set by any training. Off-policy ones (SAC,
    TD3, DQN) set both in every case, so they tell nothing.

    Returns:
        True (trained under VecNormalize), False (trained without it), or None
        (unknown: off-policy, or never trained).
    """
    if algo not in ("ppo", "a2c") or getattr(model, "_last_obs", None) is None:
        return None
    return getattr(model, "_last_original_obs", None) is not None


def load_vecnormalize(path: str | Path) -> Any:
    """Unpickle ``VecNormalize`` statistics (no env needed; statistics are not updated).

    Raises:
        CheckpointError: If the file is missing or is not VecNormalize statistics.
    """
    from stable_baselines3.common.vec_env import VecNormalize

    p = Path(path).expanduser()
    if not p.is_file():
        why = "it is a directory" if p.is_dir() else "no such file"
        raise CheckpointError(VECNORMALIZE_BAD.format(path=p, why=why))
    try:
        with p.open("rb") as f:
            vn = pickle.load(f)
    except Exception as e:  # noqa: BLE001 - unpickling raises anything
        raise CheckpointError(VECNORMALIZE_BAD.format(path=p, why=f"{type(e).__name__}: {e}")
                              ) from e
    if not isinstance(vn, VecNormalize):
        why = f"it holds a {type(vn).__name__}"
        raise CheckpointError(VECNORMALIZE_BAD.format(path=p, why=why))
    vn.training = False
    return vn


def saved_versions(path: Path) -> dict[str, str]:
    """Versions of :data:`VERSION_KEYS` an SB3 zip was saved with (its ``system_info.txt``).

    Returns:
        ``{"Python": "3.11.7", "Stable-Baselines3": "2.9.2", "PyTorch": "2.13.0+cpu"}``
        (the keys found); empty if the zip has no readable ``system_info.txt``.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            text = zf.read(SYSTEM_INFO).decode("utf-8", "replace")
    except (zipfile.BadZipFile, KeyError, OSError):
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.lstrip("- ").partition(":")
        if sep and key.strip() in VERSION_KEYS:
            out[key.strip()] = value.strip().split(" ")[0]
    return out


def current_versions() -> dict[str, str]:
    """Versions of :data:`VERSION_KEYS` in this process."""
    import platform

    import stable_baselines3
    import torch

    return {"Python": platform.python_version(), "Stable-Baselines3": stable_baselines3.__version__,
            "PyTorch": str(torch.__version__)}


def describe_versions(saved: dict[str, str], current: dict[str, str]) -> str:
    """``saved with Python 3.10.12, ...; running Python 3.11.7, ... (different: Python)``."""
    def text(d: dict[str, str]) -> str:
        return ", ".join(f"{k} {d[k]}" for k in VERSION_KEYS if k in d) or "unknown versions"

    out = VERSIONS.format(saved=text(saved) if saved else f"unknown versions (no {SYSTEM_INFO})",
                          current=text(current))
    differ = [k for k in VERSION_KEYS if k in saved and k in current and saved[k] != current[k]]
    return out + (VERSIONS_DIFFER.format(names=", ".join(differ)) if differ else "")


_SIZE_MISMATCH = re.compile(
    r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([^\]]*)\]\) "
    r"from checkpoint, the shape in current model is torch\.Size\(\[([^\]]*)\]\)")
_KEYS = re.compile(r'(Missing|Unexpected) key\(s\) in state_dict: ((?:"[^"]*"(?:, )?)+)')


def _weights_detail(message: str) -> str | None:
    """A short account of torch's ``load_state_dict`` error, or None if it is not one."""
    if "state_dict" not in message:
        return None
    parts = []
    sizes = _SIZE_MISMATCH.findall(message)
    if sizes:
        name, saved, current = sizes[0]
        more = f" (and {len(sizes) - 1} more)" if len(sizes) > 1 else ""
        parts.append(f"size mismatch: {name} is ({saved}) in the weights but ({current}) in "
                     f"the network{more}")
    for kind, keys in _KEYS.findall(message):
        names = re.findall(r'"([^"]*)"', keys)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{kind.lower()} parameters: {shown}")
    return "; ".join(parts) or message.splitlines()[0][:300]


def _short(e: BaseException) -> str:
    """``Type: first sentence`` of an exception (torch's texts run to paragraphs)."""
    first = (str(e).strip().splitlines() or [""])[0].split(". ")[0]
    return f"{type(e).__name__}: {first[:200]}"


def _unreadable_entry(path: Path) -> str | None:
    """``policy.pth is not a readable torch file (...)`` for the first such entry, or None."""
    import torch

    try:
        with zipfile.ZipFile(path) as zf:
            entries = [(n, zf.read(n)) for n in zf.namelist() if n.endswith(".pth")]
    except (zipfile.BadZipFile, OSError):
        return None
    for name, raw in entries:
        try:
            torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - torch raises many types on bad bytes
            return f"{name} is not a readable torch file ({_short(e)})"
    return None
