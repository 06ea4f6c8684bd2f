"""``robogen eval`` in-process for the batched tests, and a run's episodes as one table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from robogen.cli import app
from robogen.rollout.store import EPISODES_DIR

runner = CliRunner()


def run_eval(*args: str) -> tuple[int, str]:
    """``robogen eval ARGS`` in this process: (exit code, output on one line)."""
    res = runner.invoke(app, ["eval", *args])
    return res.exit_code, " ".join(res.output.split())


def episodes_table(run: Path) -> pd.DataFrame:
    """Every stored episode of ``run``, sorted by (condition, episode_index)."""
    df = pd.concat([pd.read_parquet(p) for p in sorted((run / EPISODES_DIR).glob("*.parquet"))])
    return df.sort_values(["condition", "episode_index"]).reset_index(drop=True)


def eval_ok(*args: str) -> str:
    """``robogen eval ARGS`` that must succeed (exit 0); its output on one line."""
    code, text = run_eval(*args)
    assert code == 0, text
    return text
