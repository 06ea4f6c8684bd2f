"""Names that moved from robogen.reports to robogen.stats still resolve there, with a warning."""

from __future__ import annotations

import pytest

import robogen.reports
import robogen.stats
from robogen.reports import MOVED, MOVED_MODULE, MOVED_MODULES, MOVED_NAME


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_resolves_with_a_deprecation_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning) as record:
        obj = getattr(robogen.reports, name)
    assert obj is getattr(robogen.stats, name)
    assert str(record[0].message) == MOVED_NAME.format(name=name, module="robogen.stats")
    assert name not in robogen.reports.__all__


@pytest.mark.parametrize("name", sorted(MOVED_MODULES))
def test_a_moved_module_resolves_with_a_deprecation_warning(name: str) -> None:
    import importlib

    with pytest.warns(DeprecationWarning) as record:
        module = getattr(robogen.reports, name)
    assert module is importlib.import_module(MOVED_MODULES[name])
    assert str(record[0].message) == MOVED_MODULE.format(name=name, module=module.__name__)


def test_from_import_of_a_moved_module_warns() -> None:
    with pytest.warns(DeprecationWarning, match="moved to robogen.runs.evaluation"):
        from robogen.reports import evaluation
    from robogen.runs import evaluate

    assert evaluation.evaluate is evaluate


def test_from_import_of_a_moved_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="robogen.stats.wilson_interval"):
        from robogen.reports import wilson_interval
    assert wilson_interval(5, 10) == robogen.stats.wilson_interval(5, 10)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        robogen.reports.not_a_name  # noqa: B018


def test_names_that_stayed_do_not_warn(recwarn: pytest.WarningsRecorder) -> None:
    for name in robogen.reports.__all__:
        getattr(robogen.reports, name)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
