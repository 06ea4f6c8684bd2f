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
from robogen.runs.evaluation import evaluate

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


def test_a_rows_action_depends_on_its_observation_only() -> None:
    """Bit for bit, whatever the batch size, the row's place or the other rows (so episodes do
    not depend on the batch they run in, and a worker may act on part of its envs)."""
    import numpy as np

    from robogen.policies.bc_io import load_bc

    model = load_bc(ASSETS / "push_pixels_plain")
    rng = np.random.default_rng(0)
    obs = {"state": rng.normal(0.0, 0.3, (8, 30)).astype(np.float32),
           "pixels": rng.integers(0, 256, (8, 84, 84, 3), dtype=np.uint8)}
    full = model.predict(obs)
    assert full.shape == (8, 6) and full.dtype == np.float32
    assert len({tuple(a) for a in full}) == 8  # rows differ
    for rows in ([0], [3], [1, 2], [5, 6, 7], [0, 2, 4, 6], [7, 6, 5, 4, 3, 2, 1, 0]):
        part = model.predict({k: v[rows] for k, v in obs.items()})
        assert np.array_equal(part, full[rows]), rows
    other = {k: v.copy() for k, v in obs.items()}
    other["pixels"][1:] = 255 - other["pixels"][1:]
    assert np.array_equal(model.predict(other)[0], full[0])
