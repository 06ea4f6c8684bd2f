"""Factored scaling curves: recovery of known parameters, bootstrap bands, curves.json, plot."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from robogen.errors import InvalidSpecError
from robogen.scaling.curve_fit import TOO_FEW_X
from robogen.scaling.curves import (
    CURVES_WRONG_TASK,
    CurveFit,
    build_curve,
    fit_curve,
    fit_curve_bootstrap,
    load_curves,
    predict,
    write_curves,
)
from robogen.scaling.curves_plot import curves_plot_png
from robogen.stats.intervals import wilson_interval

X_DENSE = np.array([0, 5, 10, 20, 40, 80, 160], float)
X_SCALE = np.array([0, 10, 20, 40], float)


def _true(x, a, b, n0):
    return 1.0 - a * (np.asarray(x, float) + n0) ** b


@pytest.mark.parametrize("a,b,n0", [(0.9, -0.6, 5.0), (2.0, -0.9, 20.0), (0.5, -0.25, 1.0)])
def test_noise_free_binomial_fit_recovers_parameters(a, b, n0):
    n = np.full(len(X_DENSE), 1e5)
    fit = fit_curve(X_DENSE, n * _true(X_DENSE, a, b, n0), n)
    assert fit.a == pytest.approx(a, rel=1e-3)
    assert fit.b == pytest.approx(b, rel=1e-3)
    assert fit.n0 == pytest.approx(n0, rel=1e-3)
    assert fit.deviance < 1e-4


def test_noise_free_log_ls_fit_recovers_parameters():
    n = np.full(len(X_DENSE), 1e5)
    fit = fit_curve(X_DENSE, n * _true(X_DENSE, 0.9, -0.6, 5.0), n, method="log_ls")
    assert (fit.a, fit.b, fit.n0) == pytest.approx((0.9, -0.6, 5.0), rel=1e-2)


def test_binomial_noise_true_curve_inside_bootstrap_band():
    a, b, n0 = 0.9, -0.6, 5.0
    n = np.full(len(X_SCALE), 200)
    k = np.random.default_rng(3).binomial(n, _true(X_SCALE, a, b, n0))
    fit = fit_curve_bootstrap(X_SCALE, successes=k, n=n, n_boot=200, seed=0)
    assert fit.samples.shape == (200, 3)
    xs = np.array([0, 10, 20, 40, 80])
    mean, low, high = predict(fit, xs)
    truth = _true(xs, a, b, n0)
    assert np.all(low <= truth) and np.all(truth <= high), (low, truth, high)
    assert np.all(high[:4] - low[:4] < 0.15)  # informative at the measured points
    assert np.all(np.abs(mean[:4] - k / n) < 0.05)


def test_paired_outcomes_and_seed_resampling():
    rng = np.random.default_rng(0)
    x = np.array([0, 0, 10, 10, 20, 20, 40, 40], float)  # two training seeds per point
    u = rng.random(100)  # common random numbers: episode i is equally hard at every point
    outcomes = [u < s for s in _true(x, 0.9, -0.6, 5.0)]
    fit = fit_curve_bootstrap(x, outcomes, n_boot=50, seed=1)
    assert fit.samples.shape == (50, 3)
    assert np.all(fit.samples[:, 1] < 0) and np.all(fit.samples[:, 0] > 0)
    again = fit_curve_bootstrap(x, outcomes, n_boot=50, seed=1)
    np.testing.assert_array_equal(fit.samples, again.samples)


def test_predict_without_samples_has_no_band():
    fit = CurveFit(0.9, -0.6, 5.0)
    mean, low, high = predict(fit, [0.0, 10.0])
    np.testing.assert_allclose(mean, _true([0.0, 10.0], 0.9, -0.6, 5.0))
    np.testing.assert_array_equal(low, mean)
    np.testing.assert_array_equal(high, mean)


def test_success_is_clipped_to_unit_interval():
    fit = CurveFit(50.0, -0.5, 1.0)
    assert fit.success(0.0) == 0.0
    assert 0.0 <= float(fit.success(1e9)) <= 1.0


@pytest.mark.parametrize("x,k,n,match", [
    ([0, 10, 10], [1, 2, 3], [10, 10, 10], "3 distinct"),
    ([0, 10, 20], [1, 20, 3], [10, 10, 10], "successes must be in"),
    ([-1, 10, 20], [1, 2, 3], [10, 10, 10], "x must be finite"),
    ([0, 10, 20], [1, 2, 3], [10, 0, 10], "n must be > 0"),
    ([0, 10, 20], [1, 2], [10, 10, 10], "shapes"),
])
def test_bad_points_raise(x, k, n, match):
    with pytest.raises(InvalidSpecError, match=match):
        fit_curve(x, k, n)


def test_too_few_x_message_names_the_points():
    with pytest.raises(InvalidSpecError) as e:
        fit_curve([0, 0, 10], [1, 2, 3], [10, 10, 10])
    assert str(e.value) == TOO_FEW_X.format(x=[0.0, 0.0, 10.0])


def test_bad_fit_arguments_raise():
    with pytest.raises(InvalidSpecError, match="fit method"):
        fit_curve(X_SCALE, [5, 6, 7, 8], [10] * 4, method="ols")
    with pytest.raises(InvalidSpecError, match="either outcomes"):
        fit_curve_bootstrap(X_SCALE, [[True]] * 4, successes=[1] * 4, n=[1] * 4)
    with pytest.raises(InvalidSpecError, match="n_boot"):
        fit_curve_bootstrap(X_SCALE, successes=[5, 6, 7, 8], n=[10] * 4, n_boot=0)


@pytest.fixture(scope="module")
def two_curves():
    n = np.full(4, 100)
    k1 = np.round(n * _true(X_SCALE, 0.9, -0.6, 5.0)).astype(int)
    k2 = np.round(n * _true(X_SCALE, 0.7, -0.3, 2.0)).astype(int)
    return [build_curve("lighting", X_SCALE, successes=k1, n=n, n_boot=40, seed=0),
            build_curve("lighting+texture", X_SCALE, successes=k2, n=n, n_boot=40, seed=1)]


def test_curves_json_round_trip(tmp_path, two_curves):
    path = write_curves(tmp_path / "sub" / "curves.json", "robogen/Reach-v0", two_curves,
                        meta={"base_demos": 20})
    cf = load_curves(path, task="robogen/Reach-v0")
    assert cf.names == ("lighting", "lighting+texture")
    assert cf.meta == {"base_demos": 20}
    assert cf.get("lighting+texture").factors == ("lighting", "texture")
    for orig in two_curves:
        got = cf.get(orig.name)
        assert got.points == orig.points
        assert (got.fit.a, got.fit.b, got.fit.n0) == (orig.fit.a, orig.fit.b, orig.fit.n0)
        np.testing.assert_array_equal(got.fit.samples, orig.fit.samples)
    p = cf.get("lighting").points[0]
    assert (p.ci_low, p.ci_high) == wilson_interval(p.successes, p.n)
    doc = json.loads(path.read_text())
    assert doc["schema"] == "robogen.curves" and doc["version"] == 1
    assert doc["factors"] == ["lighting", "lighting+texture"]
    assert not list(tmp_path.glob("sub/*.tmp"))


def test_load_curves_errors(tmp_path, two_curves):
    path = write_curves(tmp_path / "curves.json", "robogen/Reach-v0", two_curves)
    with pytest.raises(InvalidSpecError) as e:
        load_curves(path, task="robogen/PickPlace-v0")
    assert str(e.value) == CURVES_WRONG_TASK.format(path=path, got="robogen/Reach-v0",
                                                    want="robogen/PickPlace-v0")
    with pytest.raises(InvalidSpecError, match="does not exist"):
        load_curves(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidSpecError, match="cannot be read"):
        load_curves(bad)
    doc = json.loads(path.read_text())
    for change, match in [({"schema": "robogen.report"}, "not a robogen curves file"),
                          ({"version": 99}, "schema version 99"),
                          ({"curves": {"lighting": {"points": []}}}, "KeyError")]:
        bad.write_text(json.dumps({**doc, **change}))
        with pytest.raises(InvalidSpecError, match=match):
            load_curves(bad)
    with pytest.raises(InvalidSpecError, match="did you mean 'lighting'"):
        load_curves(path).get("lightning")


def test_write_curves_rejects_duplicates(tmp_path, two_curves):
    with pytest.raises(InvalidSpecError, match="unique"):
        write_curves(tmp_path / "c.json", "robogen/Reach-v0", [two_curves[0], two_curves[0]])
    assert not (tmp_path / "c.json").exists()


def test_plot_is_a_png_with_one_panel_per_curve(two_curves):
    import matplotlib.image as mpimg

    png = curves_plot_png(two_curves, x_max=200)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(io.BytesIO(png), format="png")
    assert img.shape[:2] == (270, 640)  # two panels of 3.2 x 2.7 in at 100 dpi
    single = mpimg.imread(io.BytesIO(curves_plot_png(two_curves[:1])), format="png")
    assert single.shape[:2] == (270, 320)


def test_fixed_n0_is_the_base_dataset_size() -> None:
    from robogen.scaling.curves import build_curve

    a, b, n0 = 2.0, -0.6, 20.0
    x = np.array([0, 10, 20, 40, 80])
    n = np.full(5, 4000)
    k = np.round(n * (1 - a * (x + n0) ** b)).astype(int)
    curve = build_curve("object_pose", x, successes=k, n=n, n_boot=0, n0=20)
    assert curve.fit.n0 == pytest.approx(20.0, rel=1e-6)
    assert curve.fit.a == pytest.approx(a, rel=0.05) and curve.fit.b == pytest.approx(b, abs=0.03)


def test_fit_leaves_the_flat_clipped_region_of_a_steep_start() -> None:
    """Seen in a real `robogen scale` run: the log-space start predicts failure > 1 at small x,
    where the clipped likelihood is flat, and the search used to stop there (deviance 96.7)."""
    from robogen.scaling.curve_fit import _nll, fit_curve, fixed_n0_bounds

    x = np.array([0, 0, 4, 4, 8, 8, 16, 16, 32, 32], float)
    k = np.array([1, 1, 0, 0, 3, 2, 5, 4, 9, 9], float)
    n = np.full(10, 16.0)
    fit = fit_curve(x, k, n, n0_bounds=fixed_n0_bounds(8.0))
    assert fit.deviance == pytest.approx(15.08, abs=0.01)
    assert (fit.a, fit.b) == pytest.approx((1.789, -0.2958), abs=2e-3)
    # the maximum: no point of a fine (a, b) grid scores better
    la, bb = np.meshgrid(np.linspace(-1, 3, 201), np.linspace(-2, -0.01, 200))
    grid = [_nll(np.array([u, v, np.log(8.0)]), x, k, n)[0]
            for u, v in zip(la.ravel(), bb.ravel(), strict=True)]
    best = _nll(np.array([np.log(fit.a), fit.b, np.log(fit.n0)]), x, k, n)[0]
    assert best <= min(grid) + 1e-9
    assert np.all(fit.success(np.array([0.0, 4.0])) > 0)  # no longer clipped to 0 at the start
