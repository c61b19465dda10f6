"""dsh_budget limits and the --dsh-usage table, pytest-free."""

from __future__ import annotations

import pytest

from pytest_dsh_replay import UsageTotals
from pytest_dsh_replay._plugin.budget import (
    Budget,
    BudgetMarkerError,
    UsageRow,
    budget,
    over_budget,
    usage_table,
)

NODE = "tests/test_a.py::test_x"
USED = UsageTotals(calls=3, input_tokens=90, output_tokens=40, cost_usd=0.002)


def test_a_marker_s_limits() -> None:
    assert budget(NODE, (), {}) == Budget()
    assert budget(NODE, (), {"max_calls": 2, "max_cost_usd": 1}) == Budget(2, None, 1.0)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((5,), {}, "takes the keywords max_calls, max_output_tokens, max_cost_usd, got (5,)"),
        (
            (),
            {"max_tokens": 5},
            "takes the keywords max_calls, max_output_tokens, max_cost_usd, got max_tokens",
        ),
        ((), {"max_calls": -1}, "max_calls=...) takes a number of calls or tokens, 0 or more"),
        ((), {"max_calls": 2.5}, "max_calls=...) takes a whole number, got 2.5"),
        ((), {"max_cost_usd": "1"}, "max_cost_usd=...) takes a number of US dollars"),
        ((), {"max_output_tokens": True}, "max_output_tokens=...) takes a number"),
        # a NaN compares false with everything: it would never be exceeded
        ((), {"max_cost_usd": float("nan")}, "max_cost_usd=...) takes a number of US dollars"),
    ],
)
def test_a_broken_marker_says_what_it_takes(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(BudgetMarkerError) as info:
        budget(NODE, args, kwargs)
    assert str(info.value).startswith(f"{NODE}: @pytest.mark.dsh_budget")
    assert message in str(info.value)


def test_within_and_over_budget() -> None:
    assert over_budget(NODE, Budget(3, 40, 0.002), USED) is None
    assert over_budget(NODE, Budget(2, 39, 0.001), USED) == (
        f"{NODE}: over its dsh_budget: 3 model calls, over max_calls=2; 40 output tokens, "
        "over max_output_tokens=39; $0.002000, over max_cost_usd=0.001"
    )
    unknown = UsageTotals(calls=1, cost_usd=None)
    problem = over_budget(NODE, Budget(max_cost_usd=1.0), unknown)
    assert problem is not None
    assert "a cost that is not known (install genai-prices" in problem


def test_the_usage_table_has_a_row_per_test_and_the_totals() -> None:
    rows = [
        UsageRow("t.py::b", 2, 1000, 20, 5, 0, None),
        UsageRow("t.py::a", 1, 10, 2, 0, 4, 0.5),
    ]
    assert usage_table(rows) == [
        "test     calls  input  output  reasoning  cached  cost USD",
        "t.py::a      1     10       2          0       4  0.500000",
        "t.py::b      2   1000      20          5       0         ?",
        "total        3   1010      22          5       4         ?",
    ]
    assert usage_table([]) == []
