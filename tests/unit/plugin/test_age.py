"""How old a recording may be: durations, ages from header times, and what records them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pytest_dsh_replay._plugin.age import Expiry, MaxAgeError, describe_age, expiry, parse_max_age
from pytest_dsh_replay._plugin.modes import RECORD_MODES

DAY_MS = 86_400_000
NOW = 1_800_000_000_000


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        (" 2W ", timedelta(weeks=2)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("90m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
    ],
)
def test_a_duration_is_count_unit_parts(text: str, age: timedelta) -> None:
    assert parse_max_age(text, "here") == age


def test_no_value_sets_no_limit_and_a_timedelta_is_taken_as_it_is() -> None:
    assert parse_max_age(None, "here") is None
    assert parse_max_age("  ", "here") is None
    assert parse_max_age(timedelta(hours=3), "here") == timedelta(hours=3)


@pytest.mark.parametrize("value", ["30 days", "d30", "30", "1.5d", "30d ago", "-3d", 30])
def test_anything_else_is_refused_with_the_value_and_the_form(value: object) -> None:
    with pytest.raises(MaxAgeError) as info:
        parse_max_age(value, "the dsh_max_age ini key")
    message = str(info.value)
    assert message.startswith("the dsh_max_age ini key: max age")
    assert repr(value) in message
    assert "30d, 12h" in message


@pytest.mark.parametrize("value", ["6M", "1M", "1d6M"])
def test_a_capital_m_is_refused_not_read_as_minutes(value: str) -> None:
    # "6M" read as six minutes: every recording expired, and --dsh-strict-age failed all.
    with pytest.raises(MaxAgeError) as info:
        parse_max_age(value, "here")
    assert str(info.value).startswith(f"here: max age {value!r} uses M, which is not a unit")
    assert "180d" in str(info.value)


@pytest.mark.parametrize("value", ["0d", "0h0m", timedelta(0), timedelta(seconds=-1)])
def test_a_zero_or_negative_duration_is_refused(value: object) -> None:
    with pytest.raises(MaxAgeError, match="must be longer than zero"):
        parse_max_age(value, "here")


@pytest.mark.parametrize("value", ["1000000000d", "99999999999999999w"])
def test_a_duration_too_long_to_hold_is_refused_not_an_overflow(value: str) -> None:
    with pytest.raises(MaxAgeError, match=r"^here: max age .* is longer than a duration can be"):
        parse_max_age(value, "here")


def test_the_age_is_the_header_time_s() -> None:
    month = timedelta(days=30)
    assert expiry(NOW - 41 * DAY_MS, month, NOW) == Expiry(timedelta(days=41), month)
    assert expiry(NOW - 30 * DAY_MS, month, NOW) is None  # exactly the limit: still young
    assert expiry(NOW - 30 * DAY_MS - 1, month, NOW) is not None
    assert expiry(NOW + DAY_MS, month, NOW) is None  # a clock ahead of this one
    assert expiry(NOW - 41 * DAY_MS, None, NOW) is None  # no limit


@pytest.mark.parametrize("created_at", [0, -5])
def test_a_recording_without_a_time_never_expires(created_at: int) -> None:
    assert expiry(created_at, timedelta(seconds=1), NOW) is None


def test_ages_are_told_in_their_largest_whole_unit() -> None:
    assert describe_age(timedelta(days=41, hours=5)) == "41 days"
    assert describe_age(timedelta(days=1)) == "1 day"
    assert describe_age(timedelta(hours=13, minutes=59)) == "13 hours"
    assert describe_age(timedelta(minutes=1, seconds=30)) == "1 minute"
    assert describe_age(timedelta(seconds=9)) == "9 seconds"
    assert (
        Expiry(timedelta(days=41), timedelta(days=30)).describe()
        == "recorded 41 days ago, older than the 30 days allowed"
    )
    # the limit as it was set: 36h is not "1 day", 90m not "1 hour", 1w3d is 10 days
    assert (
        Expiry(timedelta(hours=40), timedelta(hours=36)).describe()
        == "recorded 1 day ago, older than the 36 hours allowed"
    )
    assert describe_age(timedelta(minutes=90), exact=True) == "90 minutes"
    assert describe_age(timedelta(days=10), exact=True) == "10 days"


def test_missing_records_an_expired_recording_and_all_records_every_one() -> None:
    missing, everything = RECORD_MODES.parse("missing"), RECORD_MODES.parse("all")
    assert not missing.records(exists=True)
    assert missing.records(exists=True, expired=True)
    assert missing.records(exists=False)
    assert everything.records(exists=True)
    assert everything.records(exists=True, expired=True)
    assert "older than their max age" in RECORD_MODES.help
