"""What a test may spend on model calls, and the usage table (pytest-free).

A test marked ``@pytest.mark.dsh_budget(max_calls=..., max_output_tokens=...,
max_cost_usd=...)`` fails when its run's model calls went over a limit;
``--dsh-usage`` prints every test's totals at the end of the run
([docs/checks.md#usage](../checks.md#usage)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from .._errors import DshReplayError

if TYPE_CHECKING:
    from .._fixture.usage import UsageTotals

__all__ = ["Budget", "BudgetMarkerError", "UsageRow", "budget", "over_budget", "usage_table"]

BUDGET_KEYWORDS: Final = ("max_calls", "max_output_tokens", "max_cost_usd")
"""The keyword arguments ``@pytest.mark.dsh_budget`` takes."""


class BudgetMarkerError(DshReplayError, ValueError):
    """A ``dsh_budget`` marker with an unknown keyword or a limit that is not a number.

    The message starts with the test's node id and says what the marker takes.
    """


@dataclass(frozen=True)
class Budget:
    """A test's limits; ``None`` sets none.

    Attributes:
        max_calls: The most model calls (failed attempts included).
        max_output_tokens: The most output tokens (reasoning included).
        max_cost_usd: The highest price in US dollars (needs ``genai-prices`` and a model
            it knows: an unknown price fails the test, saying so).
    """

    max_calls: int | None = None
    max_output_tokens: int | None = None
    max_cost_usd: float | None = None


def _limit(nodeid: str, key: str, value: object) -> float | int | None:
    if value is None:
        return None
    whole = key != "max_cost_usd"
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise BudgetMarkerError(
            f"{nodeid}: @pytest.mark.dsh_budget({key}=...) takes a number of "
            f"{'calls or tokens' if whole else 'US dollars'}, 0 or more, got {value!r}"
        )
    if whole and not isinstance(value, int):
        raise BudgetMarkerError(
            f"{nodeid}: @pytest.mark.dsh_budget({key}=...) takes a whole number, got {value!r}"
        )
    return value


def budget(nodeid: str, args: Sequence[object], kwargs: Mapping[str, object]) -> Budget:
    """The limits of a ``dsh_budget`` marker's arguments.

    Raises:
        BudgetMarkerError: A positional argument, an unknown keyword, or a limit that is
            not a non-negative number (a whole one for calls and tokens).
    """
    unknown = sorted(set(kwargs) - set(BUDGET_KEYWORDS))
    if args or unknown:
        raise BudgetMarkerError(
            f"{nodeid}: @pytest.mark.dsh_budget takes the keywords "
            f"{', '.join(BUDGET_KEYWORDS)}, got {', '.join(unknown) or repr(tuple(args))}"
        )
    calls, tokens, cost = (_limit(nodeid, key, kwargs.get(key)) for key in BUDGET_KEYWORDS)
    return Budget(
        None if calls is None else int(calls),
        None if tokens is None else int(tokens),
        None if cost is None else float(cost),
    )


def over_budget(nodeid: str, limits: Budget, used: UsageTotals) -> str | None:
    """Why the test's calls went over its budget, or ``None`` when they did not."""
    over: list[str] = []
    if limits.max_calls is not None and used.calls > limits.max_calls:
        over.append(f"{used.calls} model calls, over max_calls={limits.max_calls}")
    if limits.max_output_tokens is not None and used.output_tokens > limits.max_output_tokens:
        over.append(
            f"{used.output_tokens} output tokens, over max_output_tokens={limits.max_output_tokens}"
        )
    if limits.max_cost_usd is not None:
        if used.cost_usd is None:
            over.append(
                "a cost that is not known (install genai-prices, or a call's model is not "
                f"one it prices), so max_cost_usd={limits.max_cost_usd} cannot be checked"
            )
        elif used.cost_usd > limits.max_cost_usd:
            over.append(f"${used.cost_usd:.6f}, over max_cost_usd={limits.max_cost_usd}")
    if not over:
        return None
    return f"{nodeid}: over its dsh_budget: " + "; ".join(over)


class UsageRow(NamedTuple):
    """A test's row of the ``--dsh-usage`` table."""

    nodeid: str
    calls: int
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cached_tokens: int
    cost_usd: float | None  # None: unknown

    def counts(self) -> tuple[int, int, int, int, int]:
        """Calls, input, output, reasoning and cached tokens."""
        return (
            self.calls,
            self.input_tokens,
            self.output_tokens,
            self.reasoning_tokens,
            self.cached_tokens,
        )


def usage_table(rows: Sequence[UsageRow]) -> list[str]:
    """The ``--dsh-usage`` table: one line per test in node id order, then the totals."""
    if not rows:
        return []
    head = ("calls", "input", "output", "reasoning", "cached", "cost USD")
    ordered = sorted(rows, key=lambda r: r.nodeid)
    cells = [(*(str(n) for n in r.counts()), _cost(r.cost_usd)) for r in ordered]
    costs = [r.cost_usd for r in ordered]
    total_cost = None if None in costs else sum(c for c in costs if c is not None)
    sums = [sum(column) for column in zip(*(r.counts() for r in ordered), strict=True)]
    total = (*(str(n) for n in sums), _cost(total_cost))
    widths = [max(len(h), *(len(c[k]) for c in (*cells, total))) for k, h in enumerate(head)]
    name = max(len("test"), *(len(r.nodeid) for r in ordered))

    def line(label: str, values: Sequence[str]) -> str:
        numbers = "  ".join(v.rjust(w) for v, w in zip(values, widths, strict=True))
        return f"{label.ljust(name)}  {numbers}".rstrip()

    return [
        line("test", head),
        *(line(r.nodeid, c) for r, c in zip(ordered, cells, strict=True)),
        line("total", total),
    ]


def _cost(value: float | None) -> str:
    return "?" if value is None else f"{value:.6f}"
