"""The per-second timestamp caches agree with datetime for any time, zone and batch."""

from __future__ import annotations

import functools
import math
import random
import re
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from _examples import examples
from _helpers import local_zone, run_in_threads
from boundlog.formats._timestamps import ClfClock, Rfc3339Clock, _PerSecond

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(?:Z|[+-]\d{2}:\d{2})")
CLF = re.compile(rb"\[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\]")

# Zones with negative, half-hour, quarter-hour and 30-minute-DST offsets, and one
# (Monrovia until 1972) whose offset is not a whole number of minutes.
ZONES = [
    "UTC",
    "America/Los_Angeles",
    "Asia/Kolkata",
    "America/St_Johns",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Africa/Monrovia",
]
# 1901 to 2100: every offset rule tzdata has for these zones, inside datetime's range.
TIMES = st.floats(min_value=-(2**31), max_value=4102444800.0, allow_nan=False)
# Times a hair before a whole second, where rounding to the microsecond carries.
NEAR_SECOND = st.tuples(
    st.integers(min_value=0, max_value=4102444800), st.integers(min_value=1, max_value=40)
).map(lambda pair: pair[0] + 1 - pair[1] * 2.0**-22)
SETTINGS = settings(max_examples=examples(300), deadline=None)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def expected_moment(when: float, utc: bool) -> datetime:
    """``when`` as datetime sees it, with the offset truncated to whole minutes."""
    moment = datetime.fromtimestamp(when, UTC)
    if utc:
        return moment
    moment = moment.astimezone()
    offset = moment.utcoffset()
    assert offset is not None
    minutes = math.trunc(offset.total_seconds() / 60)
    return moment.astimezone(timezone(timedelta(minutes=minutes)))


def microseconds_since_epoch(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def expected_clf(when: float, utc: bool) -> bytes:
    moment = expected_moment(when, utc)
    offset = moment.strftime("%z")  # digits and sign only: independent of the locale
    return (
        f"[{moment.day:02d}/{MONTHS[moment.month - 1]}/{moment.year:04d}:"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} {offset}]"
    ).encode()


def expected_rfc3339(when: float, utc: bool) -> str:
    stamp = expected_moment(when, utc).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z") if utc else stamp


@pytest.mark.parametrize(
    ("zone", "utc"), [(zone, False) for zone in ZONES] + [("America/Los_Angeles", True)]
)
def test_clocks_agree_with_datetime(zone: str, utc: bool) -> None:
    """Both clocks match datetime, one time at a time and as a batch, in every zone."""

    @settings(max_examples=examples(200), deadline=None)
    @given(st.lists(st.one_of(TIMES, NEAR_SECOND), min_size=1, max_size=20))
    def check(times: list[float]) -> None:
        with local_zone(zone):
            clf, rfc = ClfClock(utc), Rfc3339Clock(utc)
            expected_clfs = [expected_clf(when, utc) for when in times]
            expected_rfcs = [expected_rfc3339(when, utc) for when in times]
            assert [clf(when) for when in times] == expected_clfs
            assert [rfc(when) for when in times] == expected_rfcs
            assert ClfClock(utc).stamps(times) == expected_clfs
            assert Rfc3339Clock(utc).stamps(times) == expected_rfcs

    check()


@SETTINGS
@given(st.one_of(TIMES, NEAR_SECOND))
@example(1700000000.9999999)
@example(math.nextafter(1700000001.0, 0.0))
@example(0.9999995)
@example(math.nextafter(0.9999995, 0.0))
@example(-0.0000001)
@example(-1.5)
def test_stamps_name_the_exact_instant(when: float) -> None:
    """Parsed back, a stamp gives the time rounded to the microsecond, truncated to its unit."""
    with local_zone("Africa/Monrovia"):
        micros = microseconds_since_epoch(datetime.fromtimestamp(when, UTC))
        rfc = Rfc3339Clock(False)(when)
        assert RFC3339.fullmatch(rfc)
        assert microseconds_since_epoch(datetime.fromisoformat(rfc)) == micros // 1000 * 1000
        clf = ClfClock(False)(when)
        assert CLF.fullmatch(clf)
        parsed = datetime.strptime(clf.decode(), "[%d/%b/%Y:%H:%M:%S %z]")
        assert microseconds_since_epoch(parsed) == micros // 1_000_000 * 1_000_000


@pytest.mark.parametrize(
    ("when", "clf", "rfc3339"),
    [
        (1700000000.9999999, b"[14/Nov/2023:22:13:21 +0000]", "2023-11-14T22:13:21.000Z"),
        (1700000000.9999995, b"[14/Nov/2023:22:13:21 +0000]", "2023-11-14T22:13:21.000Z"),
        (1700000000.999999, b"[14/Nov/2023:22:13:20 +0000]", "2023-11-14T22:13:20.999Z"),
        (1700000000.123, b"[14/Nov/2023:22:13:20 +0000]", "2023-11-14T22:13:20.123Z"),
        (0.9999996, b"[01/Jan/1970:00:00:01 +0000]", "1970-01-01T00:00:01.000Z"),
        (-0.25, b"[31/Dec/1969:23:59:59 +0000]", "1969-12-31T23:59:59.750Z"),
    ],
)
def test_fractions_round_like_datetime(when: float, clf: bytes, rfc3339: str) -> None:
    """A fraction rounds to the microsecond first: .9999996 is the next second, never .1000."""
    assert ClfClock(True)(when) == clf
    assert ClfClock(True).stamps([when]) == [clf]
    assert Rfc3339Clock(True)(when) == rfc3339
    assert Rfc3339Clock(True).stamps([when]) == [rfc3339]


@pytest.mark.parametrize(
    ("zone", "when", "clf", "rfc3339"),
    [
        # 2023-11-14T22:13:20Z, and 2023-07-14T22:13:20Z for the summer offsets.
        ("America/Los_Angeles", 1700000000.5, b"[14/Nov/2023:14:13:20 -0800]", "2023-11-14T14:13:20.500-08:00"),
        ("America/Los_Angeles", 1689372800.5, b"[14/Jul/2023:15:13:20 -0700]", "2023-07-14T15:13:20.500-07:00"),
        ("Asia/Kolkata", 1700000000.5, b"[15/Nov/2023:03:43:20 +0530]", "2023-11-15T03:43:20.500+05:30"),
        ("America/St_Johns", 1700000000.5, b"[14/Nov/2023:18:43:20 -0330]", "2023-11-14T18:43:20.500-03:30"),
        ("America/St_Johns", 1689372800.5, b"[14/Jul/2023:19:43:20 -0230]", "2023-07-14T19:43:20.500-02:30"),
        ("Asia/Kathmandu", 1700000000.5, b"[15/Nov/2023:03:58:20 +0545]", "2023-11-15T03:58:20.500+05:45"),
        # -00:44:30 until 1972: written -0044, clock time shifted 30 s to keep the instant.
        ("Africa/Monrovia", 0.5, b"[31/Dec/1969:23:16:00 -0044]", "1969-12-31T23:16:00.500-00:44"),
    ],
)  # fmt: skip
def test_offset_examples(zone: str, when: float, clf: bytes, rfc3339: str) -> None:
    """Negative, half-hour and quarter-hour offsets are written with sign, hours and minutes."""
    with local_zone(zone):
        assert ClfClock(False)(when) == clf
        assert Rfc3339Clock(False)(when) == rfc3339


@pytest.mark.parametrize("zone", ["UTC", "America/St_Johns"])
def test_cache_stays_right_across_many_seconds(zone: str) -> None:
    """Walking 200 seconds one call or one batch at a time, past the cache size, stays exact."""
    start = 1700000000.0
    times = [start + step / 4 for step in range(800)]
    with local_zone(zone):
        clf, rfc = ClfClock(False), Rfc3339Clock(False)
        for when in times + times[::-1]:
            assert clf(when) == expected_clf(when, False)
            assert rfc(when) == expected_rfc3339(when, False)
        expected_clfs = [expected_clf(when, False) for when in times]
        expected_rfcs = [expected_rfc3339(when, False) for when in times]
        for size in (1, 7, 64, 800):
            batches = [times[i : i + size] for i in range(0, len(times), size)]
            assert [stamp for batch in batches for stamp in clf.stamps(batch)] == expected_clfs
            assert [stamp for batch in batches for stamp in rfc.stamps(batch)] == expected_rfcs


def test_utc_clocks_ignore_the_local_zone() -> None:
    """With utc=True the stamps are the same whatever TZ says, and RFC 3339 ends in Z."""
    with local_zone("Asia/Kolkata"):
        assert ClfClock(True)(1700000000.25) == b"[14/Nov/2023:22:13:20 +0000]"
        assert Rfc3339Clock(True)(1700000000.25) == "2023-11-14T22:13:20.250Z"


def test_empty_batch_has_no_stamps() -> None:
    """A batch of no times gives no stamps."""
    assert ClfClock(True).stamps([]) == []
    assert Rfc3339Clock(True).stamps([]) == []


@pytest.mark.parametrize(
    "times",
    [
        [1700000000.25, 1700000000.5, 1700000000.75],
        [1700000000.25, 1700000000.9999996],
        [1700000000.9999996, 1700000000.25],
        [1700000000.5, 1700000001.5, 1700000000.75],
        [-0.5, 0.25],
        [0.0, 0.9999994],
    ],
)
def test_a_batch_gets_each_time_its_own_second(times: list[float]) -> None:
    """A batch whose times share one second gets one stamp; a time that rounds into the
    next second, or lies in another, gets its own."""
    assert ClfClock(True).stamps(times) == [ClfClock(True)(when) for when in times]


def test_a_cache_shared_by_writer_threads_gives_every_second_its_own_text() -> None:
    """A format object given to several logs is used by as many writer threads: one
    cleared the per-second cache while another gathered a batch's texts from it
    (KeyError, or "dictionary changed size during iteration" without the GIL), and
    the batch failed."""
    cache = _PerSecond(str)
    threads, rounds = 4, 2000
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def format_batches(seed: int) -> None:
        chosen = random.Random(seed)
        start.wait()
        try:
            for _ in range(rounds):
                seconds = [chosen.randrange(1000) for _ in range(8)]
                assert cache.all(seconds) == list(map(str, seconds))
        except BaseException as error:
            errors.append(error)

    run_in_threads(*[functools.partial(format_batches, seed) for seed in range(threads)])
    assert errors == []
