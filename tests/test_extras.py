"""A record's extras (``boundlog.Extras``): what an integration learns of an exchange
only for a log whose format reads it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import boundlog
from boundlog import AccessLog, ConfigurationError, Extras, Record


class ReadsRoute:
    reads_extras = frozenset({"route"})

    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"".join(b"%r\n" % (record.extras,) for record in records)


class SaysNothing:
    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"\n" * len(records)


def test_extras_are_none_until_an_integration_learns_something() -> None:
    assert Extras() == (None,) * len(Extras._fields)
    assert boundlog.Record(0.0, 0.0, None, "GET", b"/", b"", "HTTP/1.1", 200, 0).extras is None


@pytest.mark.parametrize(
    ("fmt", "reads"),
    [
        ("combined", frozenset()),
        ("common", frozenset()),
        ("dev", frozenset()),
        (ReadsRoute(), frozenset({"route"})),
        (SaysNothing(), frozenset(Extras._fields)),
    ],
)
def test_a_log_reads_the_extras_its_format_says(fmt: object, reads: frozenset[str]) -> None:
    with AccessLog(sink="/dev/null", format=fmt, report_loss=False) as log:  # type: ignore[arg-type]
        assert log.reads_extras == reads


def test_a_keep_predicate_may_read_every_extra() -> None:
    with AccessLog(
        sink="/dev/null", format=ReadsRoute(), keep=lambda record: True, report_loss=False
    ) as log:
        assert log.reads_extras == frozenset(Extras._fields)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("route", "must be a set of field names"),
        (frozenset({"route", "color"}), "names 'color', which records do not have"),
        ({1}, "must be a set of field names"),
    ],
)
def test_a_format_naming_unknown_extras_is_refused(names: object, message: str) -> None:
    class Odd(SaysNothing):
        reads_extras = names

    with pytest.raises(ConfigurationError, match=message):
        AccessLog(sink="/dev/null", format=Odd(), report_loss=False)
