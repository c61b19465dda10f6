"""Token usage and cost of a test's model calls, totalled from its session logs.

The logs a run writes hold every call it made (replayed or recorded), the ``usage``
chunk each call streamed, and the model the client asked for: format 0 logs (what the
recorder writes) in their ``request/header`` events, the dsh runtime's logs (formats 2
to 5) in each answer's ``source``. Costs come from the optional ``genai-prices``
package ([docs/checks.md#usage](../checks.md#usage)).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .._errors import UnknownSessionError
from .._format.events import Event, SessionLike

__all__ = ["CallUsage", "UsageTotals", "call_usages", "genai_price", "own_events", "totals"]

_STREAM_EVENTS = frozenset({"assistant/message", "assistant/attempt"})


@dataclass(frozen=True)
class CallUsage:
    """One model call's tokens, as its ``usage`` chunk counted them.

    Attributes:
        model: The model the client asked for (``None`` when the log does not say).
        input_tokens: Every input token the model read: the chunk's ``inputTokens`` plus
            ``cacheReadTokens`` and ``cacheWriteTokens`` (the log counts them apart).
        output_tokens: ``outputTokens`` (reasoning included, as providers bill it).
        reasoning_tokens: ``reasoningTokens``, the part of the output spent reasoning.
        cached_tokens: ``cacheReadTokens``, the part of the input read from the cache.
        cache_write_tokens: ``cacheWriteTokens``, the part of the input written to it.
        reported: The call streamed a ``usage`` chunk (else every count is 0).
        answered: The call finished with an answer (``stop``, ``tool-calls``,
            ``max-tokens``), not with an error or cancelled.
    """

    model: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reported: bool = False
    answered: bool = True


@dataclass(frozen=True)
class UsageTotals:
    """The totals of a test's model calls ([docs/checks.md#usage](../checks.md#usage)).

    Attributes:
        calls: How many model calls were made (failed attempts included).
        input_tokens: Input tokens, cached ones included (`CallUsage.input_tokens`).
        output_tokens: Output tokens, reasoning included.
        reasoning_tokens: The reasoning part of ``output_tokens``.
        cached_tokens: The part of ``input_tokens`` read from the provider's cache.
        cost_usd: The price in US dollars, from ``genai-prices``; ``None`` when that
            package is not installed, does not know a call's model, or an answered call
            streamed no ``usage`` (a failed attempt without one costs nothing here).
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = field(default=None)


Pricer = Callable[[CallUsage], Decimal | None]
"""The price of one call in US dollars, ``None`` when unknown."""


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _answered(reason: object) -> bool:
    """Whether a finish ``reason`` ends an answer (not ``error`` or ``aborted``)."""
    kind = reason.get("kind") if isinstance(reason, Mapping) else None
    return kind not in ("error", "aborted")


def _call(model: str | None, usage: object, *, answered: bool) -> CallUsage:
    if not isinstance(usage, Mapping):
        return CallUsage(model, answered=answered)
    read, written = _count(usage, "cacheReadTokens"), _count(usage, "cacheWriteTokens")
    return CallUsage(
        model,
        input_tokens=_count(usage, "inputTokens") + read + written,
        output_tokens=_count(usage, "outputTokens"),
        reasoning_tokens=_count(usage, "reasoningTokens"),
        cached_tokens=read,
        cache_write_tokens=written,
        reported=True,
        answered=answered,
    )


def _header_model(event: Event) -> str | None:
    """The model a ``request/header`` event names (``data.header.config.model``)."""
    config = (event.get("data") or {}).get("header", {}).get("config", {})
    model = config.get("model") if isinstance(config, Mapping) else None
    return model if isinstance(model, str) and model else None


def _stream_call(event: Event, model: str | None) -> CallUsage:
    """A format 2-5 call: its stream's ``usage`` chunk, its answer's ``source.model``."""
    data = event.get("data") or {}
    source = (data.get("message") or {}).get("source") or data.get("source") or {}
    named = source.get("model") if isinstance(source, Mapping) else None
    usage: object = None
    answered = event.get("type") == "assistant/message"
    for record in data.get("stream") or ():
        chunk = record.get("chunk") if isinstance(record, Mapping) else None
        if isinstance(chunk, Mapping) and chunk.get("type") == "usage":
            usage = chunk.get("usage")
        elif isinstance(chunk, Mapping) and chunk.get("type") == "finish":
            answered = answered and _answered(chunk.get("reason"))
    return _call(named if isinstance(named, str) and named else model, usage, answered=answered)


def call_usages(events: Iterable[Event]) -> list[CallUsage]:
    """Every model call of one session's log, in order, with its tokens.

    A format 0 call is its ``assistant/chunk`` events up to its ``finish`` (its
    ``assistant/message`` only repeats the answer); a format 2-5 call is one
    ``assistant/message`` or ``assistant/attempt`` event, whose ``data.stream`` holds it.
    """
    calls: list[CallUsage] = []
    model: str | None = None
    usage: object = None
    for event in events:
        kind = event.get("type")
        if kind == "request/header":
            model = _header_model(event) or model
        elif kind in _STREAM_EVENTS and "stream" in (event.get("data") or {}):
            calls.append(_stream_call(event, model))  # format 0's messages hold no stream
        elif kind == "assistant/chunk":
            chunk = (event.get("data") or {}).get("chunk") or {}
            if chunk.get("type") == "usage":
                usage = chunk.get("usage")
            elif chunk.get("type") == "finish":
                calls.append(_call(model, usage, answered=_answered(chunk.get("reason"))))
                usage = None
    return calls


def own_events(log: SessionLike) -> Sequence[Event]:
    """A session's events without what a fork child inherited: the calls it made.

    A format 0 child's first ``seedLength`` events are its parent's; a format 2-5 child's
    inherited part ends at its last ``session/end-seed`` with ``inherited: true``
    ([docs/checks.md#usage](../checks.md#usage)).
    """
    header, events = log.header, log.events
    if header.seed_length > 0:
        return events[header.seed_length :]
    if header.seeded:
        for index in range(len(events) - 1, -1, -1):
            event = events[index]
            data = event.get("data")
            inherited = isinstance(data, dict) and data.get("inherited") is True
            if event.get("type") == "session/end-seed" and inherited:
                return events[index + 1 :]
    return events


def genai_price(call: CallUsage) -> Decimal | None:
    """The price of ``call`` from ``genai-prices``; ``None`` when not installed or unknown."""
    if call.model is None:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    usage = Usage(
        input_tokens=call.input_tokens,
        output_tokens=call.output_tokens,
        cache_read_tokens=call.cached_tokens,
        cache_write_tokens=call.cache_write_tokens,
    )
    try:
        return Decimal(calc_price(usage, model_ref=call.model).total_price)
    except LookupError:
        return None


def totals(
    sessions: Iterable[SessionLike], session: str | None = None, *, pricer: Pricer = genai_price
) -> UsageTotals:
    """The totals of the calls in ``sessions`` (one session's when ``session`` is given).

    Args:
        sessions: The run's session logs.
        session: A session id (its header's ``id``); ``None`` totals every session.
        pricer: The price of one call (default: ``genai-prices``).

    Raises:
        UnknownSessionError: No log has the id ``session``.
    """
    logs = list(sessions)
    if session is not None:
        chosen = [log for log in logs if log.header.id == session]
        if not chosen:
            ids = ", ".join(repr(log.header.id) for log in logs) or "none"
            raise UnknownSessionError(f"no session {session!r} in this run (its sessions: {ids})")
        logs = chosen
    calls = [call for log in logs for call in call_usages(own_events(log))]
    cost: Decimal | None = Decimal(0)
    for call in calls:
        if not (call.reported or call.answered):
            continue  # an attempt that failed before its usage: nothing known to bill
        price = pricer(call) if call.reported else None  # an answer of unknown tokens
        cost = None if price is None or cost is None else cost + price
    return UsageTotals(
        calls=len(calls),
        input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        reasoning_tokens=sum(c.reasoning_tokens for c in calls),
        cached_tokens=sum(c.cached_tokens for c in calls),
        cost_usd=None if cost is None else float(cost),
    )
