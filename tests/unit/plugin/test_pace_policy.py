"""The pace a test replays at: `--dsh-pace` and the marker's `pace=`, without pytester."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from support.collected import collected, suite_state

from pytest_dsh_replay._plugin.pace import PaceError, parse_pace_option, replay_pace

NODE = "tests/test_m.py::test_x"


@pytest.mark.parametrize(
    ("text", "factor"), [("0", 0.0), ("1", 1.0), (" 0.5 ", 0.5), ("2e-1", 0.2)]
)
def test_the_option_reads_a_decimal_factor(text: str, factor: float) -> None:
    assert parse_pace_option(text) == factor


@pytest.mark.parametrize("text", ["-1", "-0.1", "fast", "nan", "inf", "-inf", "", "1,5", "1_0"])
def test_the_option_refuses_what_is_not_a_factor_quoting_it(text: str) -> None:
    with pytest.raises(PaceError, match=f"^--dsh-pace={text}: the pace must be a finite number"):
        parse_pace_option(text)


def test_the_marker_wins_over_the_run(tmp_path: Path) -> None:
    state = dataclasses.replace(suite_state(), pace=2.0)
    assert replay_pace(collected(tmp_path, NODE, "s"), state) == 2.0
    assert replay_pace(collected(tmp_path, NODE, "s", pace=0.5), state) == 0.5
    assert replay_pace(collected(tmp_path, NODE, "s", pace=0), state) == 0.0
    assert replay_pace(collected(tmp_path, NODE), suite_state()) == 0.0


@pytest.mark.parametrize("value", ["1", -1, math.nan, math.inf, True, None, [1]])
def test_a_marker_pace_that_is_not_a_factor_is_refused_naming_the_test_and_value(
    tmp_path: Path, value: object
) -> None:
    test = collected(tmp_path, NODE, "s", pace=value)
    with pytest.raises(PaceError) as raised:
        replay_pace(test, suite_state())
    assert str(raised.value).startswith(
        f"{NODE}: @pytest.mark.dsh_scenario(pace={value!r}): the pace must be a finite number"
    )
