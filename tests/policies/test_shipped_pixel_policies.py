"""The shipped pixel policies: nominal success pinned, and a visual gap that excludes 0.

The numbers come from ``robogen/assets/policies/README.md`` (measured there over
more episodes); these runs use fewer episodes of the same seed, so each is
checked against the README's interval rather than an exact count.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robogen.configs import load_eval_config
from robogen.reports import load_report
from robogen.reports.evaluation import evaluate

ASSETS = Path(__file__).resolve().parents[2] / "robogen" / "assets" / "policies"
ENV = "robogen/Push-v0"
NOMINAL_INTERVAL = json.loads((ASSETS / "measured.json").read_text())
"""``{variant: [low, high]}``: the Wilson interval of the README's nominal success."""


def _eval(tmp_path: Path, variant: str, axes: list[str], episodes: int):
    cfg = load_eval_config(
        None, env=ENV, policy=f"flax:{ASSETS / f'push_pixels_{variant}'}",
        obs_mode="state+pixels", axes=axes, severities=[1.0], combined=False,
        episodes=episodes, seed=0, backend="serial", videos=0, out=tmp_path / variant,
    )
    evaluate(cfg)
    return load_report(tmp_path / variant)


@pytest.mark.parametrize("variant", ["plain", "augmented"])
def test_nominal_success_is_the_measured_one(tmp_path: Path, variant: str) -> None:
    report = _eval(tmp_path, variant, ["texture"], 40)
    low, high = NOMINAL_INTERVAL[variant]
    nominal = report.condition("nominal")
    assert nominal.n == 40 and nominal.n_invalid == 0
    assert low <= nominal.success_rate <= high, (variant, nominal.success_rate, (low, high))
    if variant == "plain":
        # the plain policy never saw another texture: its gap is a measured, pinned fact
        gap = report.gap("texture@1")
        assert gap.status == "ok" and gap.ci_low > 0, gap
