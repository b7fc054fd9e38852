from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from assistant.egolifeqa import parse_times
from memory.clock import HouseClock
from memory.errors import TimeFormatError


def ms(y, mo, d, h, mi, s=0, tz="Asia/Shanghai", us=0):
    return round(datetime(y, mo, d, h, mi, s, us, ZoneInfo(tz)).timestamp() * 1000)


def test_day_maps_to_date_and_back(clock):
    t = clock.at(3, 11 * 3600 + 21 * 60 + 2)
    assert t == ms(2025, 1, 3, 11, 21, 2)
    assert clock.label(t) == "DAY3 11:21:02"
    assert clock.day_of(t) == (3, 11 * 3600 + 21 * 60 + 2)
    assert clock.iso(t) == "2025-01-03T11:21:02+08:00"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("DAY3 11:21:02", ms(2025, 1, 3, 11, 21, 2)),
        ("day3 11:21", ms(2025, 1, 3, 11, 21)),
        ("Day1_11210217", ms(2025, 1, 1, 11, 21, 2, us=170_000)),
        ("DAY2", ms(2025, 1, 2, 0, 0)),
        ("2025-01-02T08:00:00", ms(2025, 1, 2, 8, 0)),
        ("2025-01-02T08:00:00+00:00", ms(2025, 1, 2, 8, 0, tz="UTC")),
        ("1735700000000", 1735700000000),
    ],
)
def test_parse_accepts_house_iso_and_epoch(clock, text, expected):
    assert clock.parse(text) == expected


@pytest.mark.parametrize("bad", ["yesterday-ish", "DAY", "25:99", "2025-13-01"])
def test_parse_rejects_garbage(clock, bad):
    with pytest.raises(TimeFormatError):
        clock.parse(bad)


def test_egolife_hundredths_and_day_spelling(clock):
    assert clock.egolife("Day1", "11210217") == clock.egolife("DAY1", "11210217")
    assert clock.egolife("DAY1", "11210217") - clock.egolife("DAY1", "11210200") == 170


def test_egolife_quirks_time_list_and_packed(clock):
    base = clock.egolife("DAY1", "11153417")
    assert parse_times("DAY1", "11153417", clock) == [base]
    assert parse_times("DAY1", ["13394908", "13512718"], clock) == [
        clock.egolife("DAY1", "13394908"), clock.egolife("DAY1", "13512718"),
    ]
    assert parse_times("DAY1", "11153417DAY1_11181201", clock) == [base, clock.egolife("DAY1", "11181201")]
    packed = parse_times("Day1", "13444813DAY3_20222516", clock)
    assert packed == [clock.egolife("DAY1", "13444813"), clock.egolife("DAY3", "20222516")]
    assert clock.label(packed[1]) == "DAY3 20:22:25"
    with pytest.raises(TimeFormatError):
        parse_times("DAY1", "noon", clock)


def test_other_time_zone_moves_absolute_time():
    utc = HouseClock.of("2025-01-01", "UTC")
    sh = HouseClock.of("2025-01-01", "Asia/Shanghai")
    assert utc.at(1, 3600) - sh.at(1, 3600) == 8 * 3600 * 1000
