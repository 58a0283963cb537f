"""Calendar arithmetic past ``datetime``'s years: it agrees with ``datetime`` on 0001..9999
and carries on, year 0000 included, so event times of any RFC 3339 year order and print."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from ratatoskr.core.civil_time import (
    US_PER_DAY,
    civil_from_days,
    days_from_civil,
    format_utc,
    is_date,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAYS = date(1970, 1, 1).toordinal()


@given(st.dates())
def test_days_agree_with_datetime_where_it_reaches(day: date) -> None:
    days = day.toordinal() - _EPOCH_DAYS
    assert days_from_civil(day.year, day.month, day.day) == days
    assert civil_from_days(days) == (day.year, day.month, day.day)


@given(st.integers(min_value=-1_000_000, max_value=3_000_000))
def test_every_day_round_trips(days: int) -> None:
    year, month, day = civil_from_days(days)
    assert is_date(year, month, day)
    assert days_from_civil(year, month, day) == days


@given(st.datetimes(timezones=st.just(UTC)))
def test_format_utc_is_rfc_3339_with_four_digit_years(moment: datetime) -> None:
    micros = (moment - _EPOCH) // timedelta(microseconds=1)
    expected = moment.isoformat(timespec="microseconds").replace("+00:00", "Z")
    assert format_utc(micros) == expected


def test_year_0000_is_a_leap_year_and_the_years_either_side_are_signed() -> None:
    assert is_date(0, 2, 29) and not is_date(100, 2, 29) and is_date(400, 2, 29)
    assert days_from_civil(1, 1, 1) - days_from_civil(0, 1, 1) == 366
    start = days_from_civil(0, 1, 1) * US_PER_DAY
    assert format_utc(start) == "0000-01-01T00:00:00.000000Z"
    assert format_utc(start - 1) == "-0001-12-31T23:59:59.999999Z"
    assert format_utc(days_from_civil(10000, 1, 1) * US_PER_DAY) == "+10000-01-01T00:00:00.000000Z"
