"""``robogen eval --backend batched --safety`` end to end vs the serial backend, CPU device.

The same episodes (``physics@1`` and nominal, 2 each on 3 worlds: a refill) run on both
backends with policies whose actions are the same per-episode streams on both
(``random``; ``pressing`` = random with the arm driven into the table, so Push's peak force is
a hard contact, not 0): the safety columns agree, the manifest records the serial force
sampling, and the report builds with its safety section.

Tolerances. Counts (joint-limit and distractor-contact steps), drops and outcomes are compared
exactly; the action statistics to 1e-9 (the same float32 actions, float64 sums on both). The
peak force is a float32 (MJWarp) trajectory's solver output against a float64 one's: on
Hopper (read once per env step) it agrees to 5e-6 relative over 30 steps; on Push (read after
every substep) the arm's impact on the table is a stiff contact whose force magnifies the
trajectories' float32 drift (the object starts on the table, in contact on MJWarp only: see
docs/dev/batched-plan.md, Pitfall), measured up to 1.2% relative over 25-30 steps, so
:data:`PEAK_RTOL` is 3%. Parity of the reads on the *same* states (1e-9) is pinned by
``test_batched_safety.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from robogen.rollout.safety import FORCE_PER_STEP, FORCE_SUBSTEPS, SAFETY_NAMES
from tests.batched.runs import episodes_table as _table
from tests.batched.runs import eval_ok
from tests.batched.runs import run_eval as _eval
from tests.batched.states import HAVE_MJWARP, NO_MJWARP

pytestmark = [pytest.mark.skipif(not HAVE_MJWARP, reason=NO_MJWARP), pytest.mark.timeout(600)]

PRESSING = "python:tests/fixtures/safety_policies.py:pressing"
SMALL = ["--axes", "physics", "--severities", "1", "--episodes", "2", "--batch-size", "1",
         "--safety"]
CASES = {
    "push": (["--env", "robogen/Push-v0", "--policy", PRESSING, "--max-steps", "25"],
             FORCE_SUBSTEPS),
    "hopper": (["--env", "gymnasium/Hopper-v5", "--policy", "random", "--max-steps", "30"],
               FORCE_PER_STEP),
}
PEAK_RTOL = {"push": 0.03, "hopper": 1e-4}
"""Relative tolerance of ``peak_contact_force_n`` batched vs serial (see the module)."""
EXACT = ["condition", "episode_index", "seed", "success", "cause", "length_steps",
         "joint_limit_steps", "object_dropped", "distractor_contact_steps"]




@pytest.fixture(scope="module", params=sorted(CASES))
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[str, Path, Path]:
    name = request.param
    args, _ = CASES[name]
    root = tmp_path_factory.mktemp(name)
    eval_ok(*args, *SMALL, "--backend", "batched", "--worlds", "3",
            "--out", str(root / "batched"))
    eval_ok(*args, *SMALL, "--backend", "serial", "--videos", "0",
            "--out", str(root / "serial"))
    return name, root / "batched", root / "serial"


def test_safety_columns_agree_with_the_serial_backend(runs: tuple[str, Path, Path]) -> None:
    name, batched_dir, serial_dir = runs
    batched, serial = _table(batched_dir), _table(serial_dir)
    assert len(batched) == 4
    assert list(batched.columns) == list(serial.columns)
    pd.testing.assert_frame_equal(batched[EXACT], serial[EXACT])
    for col in ("action_magnitude", "action_jerk"):
        np.testing.assert_allclose(batched[col], serial[col], rtol=1e-9)
    peak_b = batched.peak_contact_force_n.to_numpy(float)
    peak_s = serial.peak_contact_force_n.to_numpy(float)
    assert (peak_s > 100.0).all()  # a real contact in every episode, not 0 against 0
    np.testing.assert_allclose(peak_b, peak_s, rtol=PEAK_RTOL[name])
    if name == "push":
        assert (batched.object_dropped.notna()).all()
    else:
        assert batched.object_dropped.isna().all()  # no manipulated object: not measured
        assert (batched.joint_limit_steps > 0).all()


def test_manifest_records_the_serial_force_sampling_and_the_report_its_safety(
        runs: tuple[str, Path, Path]) -> None:
    name, batched_dir, serial_dir = runs
    mb = json.loads((batched_dir / "manifest.json").read_text())
    ms = json.loads((serial_dir / "manifest.json").read_text())
    assert mb["safety"] is True
    assert mb["safety_sampling"] == ms["safety_sampling"] == CASES[name][1]
    assert mb["spec_hash"] == ms["spec_hash"]
    report = json.loads((batched_dir / "report.json").read_text())
    rows = report["safety"]
    assert {r["condition"] for r in rows} == {"nominal", "physics@1"}
    peaks = [r for r in rows if r["metric"] == "peak_contact_force_n"]
    assert len(peaks) == 2 and all(r["n"] == 2 and r["mean"] > 100.0 for r in peaks)
    text = (batched_dir / "report.md").read_text()
    assert "**Safety**" in text
    assert CASES[name][1] in text


def test_bad_input_with_safety_still_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code, text = _eval(*CASES["hopper"][0], *SMALL, "--backend", "batched", "--worlds", "0",
                       "--out", str(out))
    assert code == 2, text
    assert "--worlds must be an integer >= 1" in text
    assert not out.exists()


def test_torch_runs_on_one_thread_on_the_cpu_device_only() -> None:
    import torch

    from robogen.batched.observed import one_torch_thread, safety_columns

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        one_torch_thread("cuda:0")
        assert torch.get_num_threads() == 2
        one_torch_thread("cpu")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert safety_columns(None, []) == []
    assert SAFETY_NAMES[0] == "peak_contact_force_n"
