"""Names that moved from robogen.reports to robogen.stats still resolve there, with a warning."""

from __future__ import annotations

import pytest

import robogen.reports
import robogen.stats
from robogen.reports import MOVED, MOVED_NAME


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_resolves_with_a_deprecation_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning) as record:
        obj = getattr(robogen.reports, name)
    assert obj is getattr(robogen.stats, name)
    assert str(record[0].message) == MOVED_NAME.format(name=name, module="robogen.stats")
    assert name not in robogen.reports.__all__


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
