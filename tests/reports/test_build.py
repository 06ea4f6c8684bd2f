"""Tests of robogen.reports.build on synthetic EpisodeResult lists."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence

import pytest

from robogen.errors import RunDirError
from robogen.reports import (
    REPORT_SCHEMA_VERSION,
    STATUS_INVALID,
    STATUS_NO_DATA,
    STATUS_NOT_APPLIED,
    STATUS_NOT_OBSERVED,
    STATUS_OK,
    Report,
    build_report,
    failure_pairs,
    render_markdown,
)
from robogen.stats import wilson_interval
from robogen.types import AxisLevel, Condition, EpisodeResult, EvalManifest, RenderSettings

ENV = "robogen/PickPlace-v0"
KINDS = {"lighting": "visual", "texture": "visual", "physics": "physical"}
N = 20


def make_manifest(conditions: Sequence[Condition], *, obs_mode: str = "pixels") -> EvalManifest:
    return EvalManifest(
        schema_version=1,
        env_id=ENV,
        policy="expert:pick_place",
        vecnormalize=None,
        obs_mode=obs_mode,
        axes=("lighting", "physics", "texture"),
        severities=(0.5, 1.0),
        splits=(),
        combined=True,
        n_episodes=N,
        seed=123,
        max_steps=200,
        batch_size=4,
        success_threshold=None,
        conditions=tuple(conditions),
        render=RenderSettings(),
        versions={"robogen": "0.1.0", "mujoco": "4.0.0"},
        spec_hash="ab" * 32,
    )


def cond(name: str, *levels: tuple[str, float]) -> Condition:
    return Condition(name, tuple(AxisLevel(a, s) for a, s in levels))


CONDITIONS = [
    cond("nominal"),
    cond("lighting@0.5", ("lighting", 0.5)),
    cond("lighting@1", ("lighting", 1.0)),
    cond("physics@1", ("physics", 1.0)),
    cond("texture@1", ("texture", 1.0)),
    cond("combined@1", ("lighting", 1.0), ("physics", 1.0), ("texture", 1.0)),
]


def episodes(
    c: Condition,
    success: Callable[[int], bool],
    *,
    indices: Sequence[int] = range(N),
    changed: tuple[str, ...] | None = None,
    causes: dict[int, str] | None = None,
) -> list[EpisodeResult]:
    out = []
    for i in indices:
        ok = success(i)
        cause = None if ok else (causes or {}).get(i, "timeout")
        out.append(
            EpisodeResult(
                env_id=ENV,
                policy_id="expert:pick_place",
                condition=c.name,
                axes=c.axes,
                severity=c.severity,
                split=c.split,
                episode_index=i,
                seed=1000 + i,
                episode_return=float("nan")
                if cause == "sim_unstable"
                else (10.0 if ok else float(i)),
                length_steps=50 if ok else 200,
                success=ok,
                cause=cause,
                error="RuntimeError: boom" if cause in ("policy_error", "sim_unstable") else None,
                perturbations_json="[]",
                changed_axes=c.axes if changed is None else changed,
                wall_time_s=0.1,
                unit_id=0,
            )
        )
    return out


def synthetic_results() -> list[EpisodeResult]:
    nom, l05, l1, phys, tex, comb = CONDITIONS
    return [
        # 16/20 nominal successes; 19 raised in the policy, 18 ended without success
        *episodes(nom, lambda i: i < 16, causes={18: "terminated", 19: "policy_error"}),
        # 25 episodes, but only 0..19 have a nominal twin
        *episodes(l05, lambda i: i < 14, indices=range(25)),
        *episodes(l1, lambda i: i < 10),
        *episodes(phys, lambda i: i < 16, changed=()),  # changed nothing
        *episodes(tex, lambda i: i < 4),
        *episodes(comb, lambda i: i < 2, changed=("lighting", "texture")),
    ]


@pytest.fixture(scope="module")
def report() -> Report:
    return build_report(
        synthetic_results(),
        make_manifest(CONDITIONS),
        axis_kinds=KINDS,
        n_boot=2000,
        created="2026-01-01T00:00:00+00:00",
    )


def test_condition_stats(report: Report) -> None:
    nom = report.condition("nominal")
    assert (nom.n, nom.successes, nom.success_rate) == (20, 16, 0.8)
    assert (nom.ci_low, nom.ci_high) == wilson_interval(16, 20)
    assert nom.causes == {"timeout": 2, "terminated": 1, "policy_error": 1}
    assert nom.mean_return == pytest.approx((16 * 10.0 + 16 + 17 + 18 + 19) / 20)
    assert nom.n_invalid == 0
    assert nom.mean_length == pytest.approx((16 * 50 + 4 * 200) / 20)
    tex = report.condition("texture@1")
    assert (tex.success_rate, tex.n_applied, tex.causes) == (0.2, 20, {"timeout": 16})
    assert report.condition("lighting@0.5").n == 25


def test_gaps_pairing_and_status(report: Report) -> None:
    tex, light, light05 = (
        report.gap("texture@1"),
        report.gap("lighting@1"),
        report.gap("lighting@0.5"),
    )
    assert tex.gap == pytest.approx(0.6) and (tex.n10, tex.n01, tex.n_pairs) == (12, 0, 20)
    assert tex.relative_drop == pytest.approx(0.75)
    assert tex.ci_low <= tex.gap <= tex.ci_high and tex.status == STATUS_OK
    assert light.gap == pytest.approx(0.3) and light.status == STATUS_OK
    # episodes 20..24 have no nominal twin and do not count
    assert light05.n_pairs == 20 and light05.gap == pytest.approx(0.1)
    phys = report.gap("physics@1")
    assert phys.status == STATUS_NOT_APPLIED and "physics" in phys.note
    assert math.isnan(phys.gap) and math.isnan(phys.ci_low) and math.isnan(phys.relative_drop)
    assert report.difficulty_order == ("texture", "lighting")
    assert [g.axis for g in report.gaps] == ["texture", "lighting", "lighting", "physics"]


def test_combined_interaction_and_curves(report: Report) -> None:
    (comb,) = report.combined_gaps
    assert comb.axis == "combined" and comb.gap == pytest.approx(0.7)
    assert comb.status == STATUS_OK and "physics" in comb.note
    (it,) = report.interactions
    assert it.single_gaps == pytest.approx((0.3, 0.0, 0.6))
    assert it.interaction == pytest.approx(0.7 - 0.9)
    assert it.ci_low <= it.interaction <= it.ci_high and it.n == 20
    curve = {c.axis: c for c in report.severity_curves}["lighting"]
    assert curve.severities == (0.0, 0.5, 1.0)
    assert curve.success_rates == pytest.approx((0.8, 14 / 25, 0.5))


def test_visual_axis_on_state_policy_is_flagged() -> None:
    r = build_report(
        synthetic_results(),
        make_manifest(CONDITIONS),
        policy_obs_mode="state",
        axis_kinds=KINDS,
        n_boot=500,
    )
    light = r.gap("lighting@1")
    assert light.status == STATUS_NOT_OBSERVED and light.gap == pytest.approx(0.3)
    assert r.gap("physics@1").status == STATUS_NOT_APPLIED  # not applied wins
    assert r.gap("combined@1").status == STATUS_NOT_OBSERVED  # its applied axes are all visual
    # an axis the policy cannot see has no place in the difficulty order
    assert r.difficulty_order == ()
    assert "Difficulty" not in render_markdown(r)
    # manifest obs_mode is the default
    r2 = build_report(
        synthetic_results(),
        make_manifest(CONDITIONS, obs_mode="state"),
        axis_kinds=KINDS,
        n_boot=500,
    )
    assert r2.policy_obs_mode == "state" and r2.gap("texture@1").status == STATUS_NOT_OBSERVED


def test_missing_condition_results_are_no_data() -> None:
    results = [r for r in synthetic_results() if r.condition != "texture@1"]
    r = build_report(results, make_manifest(CONDITIONS), axis_kinds=KINDS, n_boot=200)
    tex = r.gap("texture@1")
    assert tex.status == STATUS_NO_DATA and math.isnan(tex.gap) and tex.n_pairs == 0
    assert "texture" not in r.difficulty_order
    assert math.isnan(r.condition("texture@1").success_rate)


def test_bad_results_raise() -> None:
    results = synthetic_results()
    with pytest.raises(RunDirError, match="not list"):
        build_report(results, make_manifest(CONDITIONS[:-1]), n_boot=100)
    with pytest.raises(RunDirError, match="twice"):
        build_report([*results, results[0]], make_manifest(CONDITIONS), n_boot=100)
    with pytest.raises(RunDirError, match="no nominal"):
        build_report([], make_manifest(CONDITIONS[1:]), n_boot=100)


def test_report_json_round_trip(report: Report) -> None:
    d = report.to_dict()
    text = json.dumps(d, allow_nan=False)  # strict JSON: NaN became null
    back = Report.from_dict(json.loads(text))
    assert back.to_dict() == d
    assert back.manifest == report.manifest and back.schema_version == REPORT_SCHEMA_VERSION
    assert math.isnan(back.gap("physics@1").gap)
    assert back.condition("nominal") == report.condition("nominal")
    with pytest.raises(RunDirError, match="schema version"):
        Report.from_dict({**d, "schema_version": 999})


def test_report_is_deterministic() -> None:
    kw = dict(axis_kinds=KINDS, n_boot=500, created="x")
    a = build_report(synthetic_results(), make_manifest(CONDITIONS), **kw)
    b = build_report(list(reversed(synthetic_results())), make_manifest(CONDITIONS), **kw)
    assert a.to_dict() == b.to_dict()


def test_failure_pairs_prefer_discordant() -> None:
    pairs = {p.condition: p for p in failure_pairs(synthetic_results())}
    assert pairs["texture@1"].episode_index == 4 and pairs["texture@1"].nominal_success
    assert "physics@1" in pairs and pairs["physics@1"].episode_index == 16
    assert not pairs["physics@1"].nominal_success


def test_no_difficulty_order_when_every_gap_is_zero() -> None:
    """A policy that ignores every axis: no order is made up from ties at 0."""
    same = [dataclasses.replace(r, success=ok, cause=None if ok else "timeout", error=None,
                                episode_return=1.0)
            for r in synthetic_results() for ok in [r.episode_index % 2 == 0]]
    r = build_report(same, make_manifest(CONDITIONS), axis_kinds=KINDS, n_boot=200)
    assert all(g.gap == 0 for g in r.gaps if g.status == STATUS_OK)
    assert r.difficulty_order == ()
    md = render_markdown(r)
    assert "all gaps 0" in md and "hardest first" not in md


def test_invalid_episodes_are_left_out_and_a_mostly_invalid_level_has_no_gap() -> None:
    """Issue 8 §4: sim_unstable/worker_died/infra_* say nothing about the policy."""
    nom, l05, l1, phys, tex, comb = CONDITIONS
    results = [
        # nominal: 16/20 successes, but 18 diverged and 19's worker died: 16/18 valid
        *episodes(nom, lambda i: i < 16, causes={18: "sim_unstable", 19: "worker_died"}),
        # lighting@1: 10/20, episode 0 timed out (infra): 19 valid, 17 pairs
        *episodes(l1, lambda i: 1 <= i < 11, causes={0: "infra_timeout"}),
        # texture@1: 6 of 20 invalid here, plus 2 nominal twins: 8 lost > 20%
        *episodes(tex, lambda i: i < 4,
                  causes={i: "sim_unstable" for i in range(10, 16)}),
    ]
    report = build_report(results, make_manifest(CONDITIONS), axis_kinds=KINDS, n_boot=500,
                          created="2026-01-01T00:00:00+00:00")
    n = report.condition("nominal")
    assert (n.n, n.n_invalid, n.successes, n.n_applied) == (18, 2, 16, 18)
    assert n.success_rate == pytest.approx(16 / 18)
    # the invalid episodes (length 200 here) are left out of the mean length
    assert n.mean_length == pytest.approx((16 * 50 + 2 * 200) / 18)
    assert n.causes == {"timeout": 2, "sim_unstable": 1, "worker_died": 1}
    light = report.gap("lighting@1")
    # pairs: episodes 1..17 (0 invalid here, 18 and 19 invalid in nominal); 1..10 succeed
    # in both, 11..15 only in nominal
    assert light.n_pairs == 17 and (light.n10, light.n01) == (5, 0)
    assert light.gap == pytest.approx(5 / 17) and light.status == STATUS_OK
    tex_gap = report.gap("texture@1")
    assert tex_gap.status == STATUS_INVALID and math.isnan(tex_gap.gap)
    assert "8 of 20" in tex_gap.note
    assert report.condition("texture@1").n_invalid == 6
    assert "texture" not in report.difficulty_order
    assert all(p.cause not in ("sim_unstable", "worker_died", "infra_timeout")
               for p in failure_pairs(results, per_condition=20))


def test_a_visual_axis_a_pixel_policy_did_not_see_in_its_first_frame_is_not_applied() -> None:
    """Texture changed the scene in every episode, but in episodes 0-2 the policy's first
    frame equals nominal's (the change was out of view): not applied there, and said so;
    physics (not visual) and runs without digests are untouched."""
    def digests(rs, same: range):
        return [dataclasses.replace(r, first_frame_digest=(
            f"{r.episode_index:016x}" if r.episode_index in same or r.condition == "nominal"
            else f"{r.episode_index + 100:016x}")) for r in rs]

    nom, _, _, phys, tex, _ = CONDITIONS
    results = [*digests(episodes(nom, lambda i: i < 16), range(0)),
               *digests(episodes(tex, lambda i: i < 4), range(3)),
               *digests(episodes(phys, lambda i: i < 16), range(N))]
    report = build_report(results, make_manifest([nom, phys, tex]), axis_kinds=KINDS,
                          n_boot=200, created="2026-01-01T00:00:00+00:00")
    assert report.condition("texture@1").n_applied == N - 3
    gap = next(g for g in report.gaps if g.axis == "texture")
    assert "texture 17/20" in gap.note
    assert "not observed in view (first frame identical to nominal): texture in 3 of 20" in gap.note
    assert report.condition("physics@1").n_applied == N  # a physical axis is never in view
    plain = build_report([dataclasses.replace(r, first_frame_digest=None) for r in results],
                         make_manifest([nom, phys, tex]), axis_kinds=KINDS, n_boot=200,
                         created="2026-01-01T00:00:00+00:00")
    assert plain.condition("texture@1").n_applied == N
