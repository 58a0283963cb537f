"""Calendar arithmetic on the proleptic Gregorian calendar, over every year.

``datetime`` stops at years 1..9999, but an RFC 3339 timestamp may name year 0000 (a leap
year), and an offset can move a local time in year 0000 or 9999 into the year before or after
once in UTC. Event times are kept as UTC microseconds since the epoch, which hold all of
those; these functions turn dates into days since 1970-01-01 and back without that limit.
"""

from __future__ import annotations

US_PER_DAY = 86_400_000_000
_DAYS_PER_ERA = 146_097  # 400 Gregorian years
_SHIFT = 719_468  # days from 0000-03-01 to 1970-01-01


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    """Days in ``month`` (1..12) of ``year``."""
    if month == 2:
        return 29 if is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def is_date(year: int, month: int, day: int) -> bool:
    """Whether ``year-month-day`` names a day of the calendar."""
    return 1 <= month <= 12 and 1 <= day <= days_in_month(year, month)


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to ``year-month-day`` (a valid date; negative before 1970)."""
    y = year - (1 if month <= 2 else 0)  # years start in March: the leap day ends them
    era = y // 400
    year_of_era = y - era * 400
    day_of_year = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * _DAYS_PER_ERA + day_of_era - _SHIFT


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The ``(year, month, day)`` ``days`` after 1970-01-01 (the inverse of the above)."""
    shifted = days + _SHIFT
    era = shifted // _DAYS_PER_ERA
    day_of_era = shifted - era * _DAYS_PER_ERA
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    march_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * march_month + 2) // 5 + 1
    month = march_month + 3 if march_month < 10 else march_month - 9
    return year_of_era + era * 400 + (1 if month <= 2 else 0), month, day


def format_utc(micros: int) -> str:
    """UTC microseconds since the epoch as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.

    A year outside 0000..9999 (an offset can put a time there) is written as ISO 8601's
    expanded years do, with its sign (``-0001``, ``+10000``), since RFC 3339 has no spelling
    for it."""
    days, of_day = divmod(micros, US_PER_DAY)
    year, month, day = civil_from_days(days)
    seconds, fraction = divmod(of_day, 1_000_000)
    hour, rest = divmod(seconds, 3600)
    minute, second = divmod(rest, 60)
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    return f"{shown}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}Z"
