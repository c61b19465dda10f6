"""A scripted live model: rules that pick an answer for each request (no network, no key).

A [`ScriptedModel`][pytest_dsh_replay.ScriptedModel] holds [`Rule`][pytest_dsh_replay.Rule]
objects, tried in order; the first whose conditions all hold answers the call. An answer is
an [`Answer`][pytest_dsh_replay.Answer] (reasoning, text, tool calls),
[`Chunks`][pytest_dsh_replay.Chunks] (the stream chunks themselves, as given), a
[`ProviderFailure`][pytest_dsh_replay.ProviderFailure] (an HTTP status with its
``Retry-After``), a [`Hang`][pytest_dsh_replay.Hang] (nothing comes until the caller gives
up), or a callable that builds one from the
[`ScriptedRequest`][pytest_dsh_replay.ScriptedRequest]. The answer becomes the dsh stream
chunks a live model yields ([docs/format.md#stream-chunks](../format.md#stream-chunks)), so
the model is a live model for the ``pytest_dsh_replay_live_model`` hook as it is, and the
model endpoint renders the same chunks on every wire when the model is served over HTTP (`server`).

See [docs/recording.md#scripted-model](../recording.md#scripted-model).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias

import orjson

from .._format.events import JSONObject, StreamChunk
from .._format.json_values import holds_non_finite
from .._format.vocabulary import chunk_problem
from .._identity.options import (
    NO_REPLAY,
    CallOptions,
    OptionsModel,
    ReplayOptions,
    Request,
    Waitable,
)
from .._wire.base import CONTEXT_OVERFLOW
from .._wire.request import ASSISTANT, TOOL_RESULT, USER, RequestView
from .checks import Scripted
from .checks import fail as _fail
from .checks import seconds as _seconds

if TYPE_CHECKING:
    from .server import ScriptedServer

__all__ = [
    "Answer",
    "Chunks",
    "Hang",
    "ProviderFailure",
    "Reply",
    "Respond",
    "Rule",
    "ScriptedModel",
    "ScriptedRequest",
    "ToolCall",
    "answer_chunks",
]

_STEP_S: Final = 0.05  # how often a hang looks at its cancel event and the model's close

_MESSAGES: Final = {
    400: "This model's maximum context length is 8192 tokens; the request is too long.",
    401: "Authentication failed: the API key is invalid.",
    402: "Insufficient balance.",
    403: "The API key may not use this model.",
    404: "The model does not exist.",
    429: "Rate limit reached for requests.",
    500: "The server had an error while processing the request.",
    503: "The server is overloaded, please try again later.",
    529: "The server is overloaded, please try again later.",
}
_CODES: Final = {
    401: "AUTH",
    403: "AUTH",
    402: "QUOTA",
    429: "RATE_LIMIT",
    503: "OVERLOADED",
    529: "OVERLOADED",
}
_NO_STATUS: Final = frozenset({"NETWORK", "TRANSPORT", "TIMEOUT", "ABORTED"})


class _Flag(Protocol):
    """What an async call asks of its cancel: whether it is set."""

    def is_set(self) -> bool: ...


_ABSOLUTE_PATH: Final = re.compile(
    r"(?<![\w.~:/\\-])/(?=[^\s/])[^\s\"'`<>|()\[\]{}]*"  # /tmp/x, "/a b" up to the space
    r"|(?<![\w])[A-Za-z]:[\\/][^\s\"'`<>|()\[\]{}]*"  # C:\Users\x, D:/work
)
"""An absolute path in a text: what `ScriptedRequest.stable_id` does not count.

A POSIX path starts with ``/`` where no word, ``.``, ``~``, ``:``, ``/``, ``\\`` or
``-`` comes before it (``https://host/a``, ``a/b`` and ``and/or`` are no paths), a
Windows path with a drive letter; both run to the next white space, quote or bracket.
"""


# --- answers ---------------------------------------------------------------------------------


_CHUNKS_PAGE: Final = "(docs/format.md#stream-chunks)"


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an [`Answer`][pytest_dsh_replay.Answer].

    Attributes:
        name: The tool's name (non-empty).
        arguments: The arguments: a JSON text, or a mapping serialized as JSON.
        id: The call's id; ``None`` derives a stable one from the request's conversation
            and the call's position (``call_<16 hex digits>_<k>``), so concurrent callers
            get the same ids on every run.

    Raises:
        ScriptedModelError: ``name`` is empty, or ``arguments`` is neither a JSON text of
            an object nor a mapping of JSON values.
    """

    name: str
    arguments: str | Mapping[str, object] = "{}"
    id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise _fail(f"ToolCall(name=...) must be a non-empty string, got {self.name!r}")
        if self.id is not None and (not isinstance(self.id, str) or not self.id):
            raise _fail(f"ToolCall(id=...) must be a non-empty string or None, got {self.id!r}")
        try:
            parsed = (
                orjson.loads(self.arguments)
                if isinstance(self.arguments, str)
                else orjson.loads(orjson.dumps(dict(self.arguments)))
            )
        except (orjson.JSONDecodeError, TypeError, ValueError) as error:
            raise _fail(
                f"ToolCall({self.name!r}) arguments must be a JSON object text or a mapping "
                f"of JSON values: {error}"
            ) from None
        if not isinstance(parsed, dict):
            raise _fail(f"ToolCall({self.name!r}) arguments must be a JSON object, got {parsed!r}")
        if not isinstance(self.arguments, str) and holds_non_finite(self.arguments):
            raise _fail(
                f"ToolCall({self.name!r}) arguments must be a mapping of JSON values: a float "
                "is NaN or infinite, which JSON cannot hold"
            )

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON text the model streams."""
        if isinstance(self.arguments, str):
            return self.arguments
        return orjson.dumps(dict(self.arguments)).decode()


@dataclass(frozen=True)
class ProviderFailure:
    """A provider failure: the call fails the way a provider's HTTP error does.

    As the whole answer, the call fails before any content: over HTTP it is answered
    with ``status``, the wire's error body and ``Retry-After``
    ([docs/wires.md#http-errors](../wires.md#http-errors)); in process it is the error
    ``finish`` the dsh runtime logs for such a failure. As an
    [`Answer`][pytest_dsh_replay.Answer]'s ``failure``, the answer's content streams first
    and the stream then ends with the wire's error event (a ``NETWORK`` code cuts the
    connection instead).

    Attributes:
        status: The HTTP status, 400-599; ``None`` only with a ``code`` that has none
            (``NETWORK``, ``TRANSPORT``, ``TIMEOUT``, ``ABORTED``: a dropped connection).
        message: The error message; ``""`` takes a provider-like one for the status.
        retry_after: Seconds the provider asks the client to wait before a retry (sent as
            ``Retry-After`` and ``retry-after-ms``; > 0), or ``None``.
        request_id: The provider's request id (the failure's ``requestId``; over HTTP the
            ``x-request-id`` and ``request-id`` headers, which SDKs show on their errors),
            or ``None`` for none.
        code: The dsh failure code ([docs/format.md#failures](../format.md#failures));
            ``None`` derives it from the status: ``AUTH`` 401/403, ``QUOTA`` 402,
            ``RATE_LIMIT`` 429, ``OVERLOADED`` 503/529, ``CONTEXT_WINDOW_EXCEEDED`` for a
            400/413 whose message speaks of the context length, ``INVALID_REQUEST`` for
            another 400/413, ``SERVER`` for another 5xx, ``HTTP_<status>`` otherwise.

    Raises:
        ScriptedModelError: The status is outside 400-599 (or ``None`` without such a
            code), ``retry_after`` is not a positive number, or ``code`` or
            ``request_id`` is empty.
    """

    status: int | None = 500
    message: str = ""
    retry_after: float | None = None
    code: str | None = None
    request_id: str | None = None

    def __post_init__(self) -> None:
        status = self.status
        if status is None:
            if self.code not in _NO_STATUS:
                raise _fail(
                    "ProviderFailure(status=None) needs code= one of "
                    f"{sorted(_NO_STATUS)} (a dropped connection), got {self.code!r}"
                )
        elif isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise _fail(
                f"ProviderFailure(status=...) must be an HTTP error 400-599, got {status!r}"
            )
        if self.retry_after is not None:
            _seconds(self.retry_after, "ProviderFailure(retry_after=...)", zero=False)
        if self.code is not None and (not isinstance(self.code, str) or not self.code):
            raise _fail(f"ProviderFailure(code=...) must be a non-empty string, got {self.code!r}")
        if not isinstance(self.message, str):
            raise _fail(f"ProviderFailure(message=...) must be a string, got {self.message!r}")
        if self.request_id is not None and (
            not isinstance(self.request_id, str) or not self.request_id
        ):
            raise _fail(
                "ProviderFailure(request_id=...) must be a non-empty string or None, "
                f"got {self.request_id!r}"
            )

    def failure(self) -> JSONObject:
        """The dsh failure object this stands for.

        See [docs/format.md#failures](../format.md#failures).
        """
        status = self.status
        message = self.message or (
            _MESSAGES.get(status, f"Scripted failure (HTTP {status}).")
            if status is not None
            else f"Scripted {self.code} failure."
        )
        failure: JSONObject = {"message": message, "code": self.code or _code(status, message)}
        if status is not None:
            failure["status"] = status
        if self.retry_after is not None:
            failure["providerRetryAfterMs"] = max(1, round(self.retry_after * 1000))
        if self.request_id is not None:
            failure["requestId"] = self.request_id
        return failure


def _code(status: int | None, message: str) -> str:
    if status is None:
        return "NETWORK"
    if status in _CODES:
        return _CODES[status]
    if status in (400, 413):
        return "CONTEXT_WINDOW_EXCEEDED" if CONTEXT_OVERFLOW.search(message) else "INVALID_REQUEST"
    return "SERVER" if status >= 500 else f"HTTP_{status}"


@dataclass(frozen=True)
class Hang:
    """A call that hangs: nothing streams until the caller gives up.

    Over HTTP the response never starts until the client closes the connection (its
    read timeout), the server stops, or ``seconds`` pass; then the connection is
    dropped. In process the call waits until the caller's ``cancel`` event (a keyword
    argument of ``stream``, when it passes one) is set, the model is closed, or
    ``seconds`` pass, and ends with an error ``finish`` (``ABORTED`` when cancelled or
    closed, ``TIMEOUT`` after ``seconds``).

    Attributes:
        seconds: The longest the call hangs (> 0), so a forgotten hang ends by itself.

    Raises:
        ScriptedModelError: ``seconds`` is not a positive number.
    """

    seconds: float = 30.0

    def __post_init__(self) -> None:
        _seconds(self.seconds, "Hang(seconds=...)", zero=False)


@dataclass(frozen=True)
class Answer:
    """A model's answer: reasoning, text and tool calls, in that order.

    Attributes:
        text: The answer's text.
        reasoning: Reasoning (thinking) text, streamed before the text.
        tool_calls: Tool calls, streamed after the text.
        finish: The finish reason's kind: ``"stop"``, ``"tool-calls"`` or
            ``"max-tokens"``; ``None`` gives ``"tool-calls"`` when there are tool calls,
            else ``"stop"``.
        usage: The token usage ([docs/format.md#usage](../format.md#usage): ``inputTokens``,
            ``outputTokens``, ...); ``None`` counts words: the request's texts as input, the
            answer's as output (reasoning also as ``reasoningTokens``).
        pieces: How many deltas each string (reasoning, text, each call's arguments) is
            split into, >= 1; a shorter string goes one character a delta.
        delay: Seconds to wait before the first chunk (>= 0).
        failure: After the content, end the stream with this provider failure instead of
            the finish (an in-stream error event over HTTP).

    Raises:
        ScriptedModelError: A field has a value outside what is said above.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ToolCall] = ()
    finish: Literal["stop", "tool-calls", "max-tokens"] | None = None
    usage: Mapping[str, int] | None = None
    pieces: int = 3
    delay: float = 0.0
    failure: ProviderFailure | None = None

    def __post_init__(self) -> None:
        for name in ("text", "reasoning"):
            if not isinstance(getattr(self, name), str):
                raise _fail(f"Answer({name}=...) must be a string, got {getattr(self, name)!r}")
        if isinstance(self.tool_calls, str) or not all(
            isinstance(call, ToolCall) for call in self.tool_calls
        ):
            raise _fail(f"Answer(tool_calls=...) must be ToolCall objects, got {self.tool_calls!r}")
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.finish not in (None, "stop", "tool-calls", "max-tokens"):
            raise _fail(
                "Answer(finish=...) must be 'stop', 'tool-calls', 'max-tokens' or None, "
                f"got {self.finish!r}"
            )
        pieces = self.pieces
        if isinstance(pieces, bool) or not isinstance(pieces, int) or pieces < 1:
            raise _fail(f"Answer(pieces=...) must be an integer >= 1, got {pieces!r}")
        _seconds(self.delay, "Answer(delay=...)")
        if self.failure is not None and not isinstance(self.failure, ProviderFailure):
            raise _fail(f"Answer(failure=...) must be a ProviderFailure, got {self.failure!r}")
        if self.usage is not None and (
            not isinstance(self.usage, Mapping)
            or chunk_problem({"type": "usage", "usage": dict(self.usage)}) is not None
        ):
            raise _fail(
                "Answer(usage=...) must be a token usage the format allows: inputTokens and "
                "outputTokens (and optionally cacheReadTokens, cacheWriteTokens, "
                f"reasoningTokens, totalTokens), each a count >= 0 (docs/format.md#usage); "
                f"got {self.usage!r}"
            )


@dataclass(frozen=True)
class Chunks:
    """An answer given as its dsh stream chunks, streamed as they are.

    For a stream an [`Answer`][pytest_dsh_replay.Answer] does not build: parallel tool calls
    whose argument deltas interleave, a call that reports no usage, a usage chunk before an error
    ``finish`` (a content filter after some text), a ``finish`` with ``replayState``. In
    process the call yields these chunks; over HTTP the model endpoint renders them like
    a recorded call's ([docs/wires.md](../wires.md)), in the same order.

    Attributes:
        chunks: The chunks in order
            ([docs/format.md#stream-chunks](../format.md#stream-chunks)): each a JSON object
            the format allows (a ``type`` and exactly that type's fields); the last, and
            only the last, is the ``finish``. They are copied: changing the given objects
            later does not change the answer, and each call gets chunks of its own. Their
            order is not checked beyond the ``finish`` (a ``block-start`` may be left out,
            as a recording may leave it out).

    Raises:
        ScriptedModelError: ``chunks`` is not a list of chunks the format allows (the
            message names the position and what was expected), or does not end in its
            one ``finish``.
    """

    chunks: Sequence[Mapping[str, object]]

    def __post_init__(self) -> None:
        given = self.chunks
        if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
            raise _fail(f"Chunks(chunks) takes a list of stream chunks, got {given!r}")
        copied: list[StreamChunk] = []
        for position, chunk in enumerate(given):
            if not isinstance(chunk, Mapping):
                raise _fail(
                    f"Chunks(chunks[{position}]) must be a stream chunk object, got {chunk!r}"
                )
            try:
                copied.append(orjson.loads(orjson.dumps(dict(chunk))))
            except (TypeError, orjson.JSONEncodeError) as error:
                raise _fail(f"Chunks(chunks[{position}]) is not a JSON object: {error}") from None
            if holds_non_finite(chunk):
                raise _fail(
                    f"Chunks(chunks[{position}]) is not a JSON object: a float is NaN or "
                    "infinite, which JSON cannot hold"
                )
            problem = chunk_problem(copied[-1])
            if problem is not None:
                raise _fail(
                    f"Chunks(chunks[{position}]) is not a stream chunk the format allows: "
                    f"{problem}" + ("" if problem.endswith(_CHUNKS_PAGE) else f" {_CHUNKS_PAGE}")
                )
        finishes = [n for n, chunk in enumerate(copied) if chunk["type"] == "finish"]
        if finishes != [len(copied) - 1]:
            raise _fail(
                "Chunks(chunks) must end in one finish chunk and have no other, got "
                f"finish chunks at positions {finishes} of {len(copied)}"
            )
        object.__setattr__(self, "chunks", tuple(copied))

    def _copies(self) -> list[StreamChunk]:
        """A fresh copy of `chunks`, for one call."""
        copies: list[StreamChunk] = orjson.loads(orjson.dumps(self.chunks))
        return copies


Reply: TypeAlias = Answer | Chunks | ProviderFailure | Hang
"""What a rule answers with: an `Answer`, `Chunks`, a
[`ProviderFailure`][pytest_dsh_replay.ProviderFailure] or a [`Hang`][pytest_dsh_replay.Hang]."""

_REPLIES: Final = (Answer, Chunks, ProviderFailure, Hang)


# --- the request as rules see it --------------------------------------------------------------


def _text(blocks: object) -> str:
    if not isinstance(blocks, list):
        return ""
    return "\n".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )


def _result_text(blocks: object) -> str:
    results = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
    return "\n".join(_text(b.get("content")) for b in results)


@dataclass(frozen=True)
class ScriptedRequest:
    """One call as the rules see it, whatever wire or shape it came in.

    Attributes:
        call: The call's number among the model's calls, from 1, in arrival order.
        prompt: The text of the request's last message when it is a user message (its
            text blocks joined by newlines); ``""`` when the request ends otherwise (in
            tool results, say).
        tool_results: The texts of the tool results after the last assistant message
            (what the request answers the model's last tool calls with), in order; empty
            when there are none.
        messages: The conversation as ``(role, text)`` pairs in order, ``role`` being
            ``"user"``, ``"assistant"`` or ``"tool"`` (tool results); the system prompt is
            `system`.
        system: The system prompt (``""`` when there is none).
        tools: The names of the tools the request offers.
        model: The model the request names, or ``None``.
        session_id: The ``session_id`` the caller passed (over HTTP: the calling session
            the endpoint found,
            [docs/wires.md#calling-session](../wires.md#calling-session)), or ``None``.
        body: The request as the model got it (in process: what the caller passed; over
            HTTP: the wire's body in the in-process shape,
            [docs/wires.md#routes](../wires.md#routes)).
    """

    call: int
    prompt: str
    tool_results: tuple[str, ...]
    messages: tuple[tuple[str, str], ...]
    system: str
    tools: tuple[str, ...]
    model: str | None
    session_id: str | None
    body: Mapping[str, Any] = field(repr=False)

    @classmethod
    def read(
        cls, request: Mapping[str, object], *, call: int, session_id: str | None = None
    ) -> ScriptedRequest:
        """Read a request of any shape the model endpoint passes on.

        See [docs/wires.md#routes](../wires.md#routes).

        Args:
            request: The request: the in-process shape, a chat-completions body or an
                Anthropic Messages body (or a request view of one).
            call: The call's number (from 1).
            session_id: The calling session, when known.
        """
        view = RequestView.of(request)
        conversation = view.conversation
        roles = {USER: "user", ASSISTANT: "assistant", TOOL_RESULT: "tool"}
        messages: list[tuple[str, str]] = []
        for item in conversation.items:
            content = item.message.get("content")
            text = _result_text(content) if item.kind == TOOL_RESULT else _text(content)
            messages.append((roles[item.kind], text))
        trailing: list[str] = []
        for role, text in reversed(messages):
            if role == "assistant":
                break
            if role == "tool":
                trailing.insert(0, text)
        header = conversation.header or {}
        tools = header.get("tools") if isinstance(header.get("tools"), list) else []
        model = view.get("model")
        return cls(
            call=call,
            prompt=messages[-1][1] if messages and messages[-1][0] == "user" else "",
            tool_results=tuple(trailing),
            messages=tuple(messages),
            system=str(header.get("system", "")),
            tools=tuple(str(t.get("name", "")) for t in tools or () if isinstance(t, dict)),
            model=model if isinstance(model, str) and model else None,
            session_id=session_id,
            body=view.body,
        )

    def stable_id(self) -> str:
        """16 hex digits that depend only on the conversation (tool call ids use them).

        The system prompt and the messages' texts, with every absolute path in them
        counted as the same ``{{path}}``
        ([docs/recording.md#scripted-model](../recording.md#scripted-model)): an agent that
        names its working directory (the dsh runtime does, in every request) gets the same
        ids whichever temporary directory, checkout or machine it runs in. A conversation
        without such a path hashes as it always did.
        """
        paths = _ABSOLUTE_PATH.sub
        messages = [(role, paths("{{path}}", text)) for role, text in self.messages]
        data = orjson.dumps([paths("{{path}}", self.system), messages])
        return hashlib.sha256(data).hexdigest()[:16]


# --- rules -------------------------------------------------------------------------------------


Respond: TypeAlias = Callable[[ScriptedRequest], Reply]
"""A rule's answer made from the request: called with the
[`ScriptedRequest`][pytest_dsh_replay.ScriptedRequest], returns a [`Reply`][pytest_dsh_replay.Reply]
(``lambda request: Answer(text=request.prompt.upper())``)."""


class Rule:
    """When a request gets an answer: every condition given must hold.

    Args:
        answer: The [`Answer`][pytest_dsh_replay.Answer],
            [`Chunks`][pytest_dsh_replay.Chunks],
            [`ProviderFailure`][pytest_dsh_replay.ProviderFailure] or
            [`Hang`][pytest_dsh_replay.Hang], or a callable that builds one from the
            [`ScriptedRequest`][pytest_dsh_replay.ScriptedRequest] (for an answer that
            quotes the request).
        prompt: The request's `prompt` contains this text, or, a
            compiled pattern, the pattern is found in it (``re.search``).
        when: A predicate over the [`ScriptedRequest`][pytest_dsh_replay.ScriptedRequest].
        call: The call's number among the model's calls (from 1; in arrival order, so
            meant for callers that make one call at a time).
        times: How many calls the rule answers at most (>= 1; ``None``: any number).
            With ``times=1`` before a rule that answers the same requests, a failure
            comes once and the retry gets the next rule's answer.

    A rule with no condition answers every request (a catch-all, last).

    Raises:
        ScriptedModelError: ``answer`` is none of the above, ``prompt`` is neither a
            string nor a compiled pattern, ``when`` is not callable, or ``call`` or
            ``times`` is not an integer >= 1.
    """

    __slots__ = ("_used", "answer", "call", "prompt", "times", "when")

    def __init__(
        self,
        answer: Answer | Chunks | ProviderFailure | Hang | Respond,
        *,
        prompt: str | re.Pattern[str] | None = None,
        when: Callable[[ScriptedRequest], bool] | None = None,
        call: int | None = None,
        times: int | None = None,
    ):
        if not (isinstance(answer, _REPLIES) or callable(answer)):
            raise _fail(
                "Rule(answer) takes an Answer, Chunks, a ProviderFailure, a Hang or a "
                f"callable returning one, got {answer!r}"
            )
        if prompt is not None and not isinstance(prompt, str | re.Pattern):
            raise _fail(f"Rule(prompt=...) takes a string or a compiled pattern, got {prompt!r}")
        if when is not None and not callable(when):
            raise _fail(f"Rule(when=...) takes a predicate, got {when!r}")
        for name, value in (("call", call), ("times", times)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise _fail(f"Rule({name}=...) takes an integer >= 1 or None, got {value!r}")
        self.answer = answer
        self.prompt = prompt
        self.when = when
        self.call = call
        self.times = times
        self._used = 0

    def __repr__(self) -> str:
        shown = [repr(self.answer)]
        for name in ("prompt", "when", "call", "times"):
            value = getattr(self, name)
            if value is not None:
                shown.append(f"{name}={value!r}")
        return f"Rule({', '.join(shown)})"

    def matches(self, request: ScriptedRequest) -> bool:
        """Whether every condition holds for ``request`` (``times`` aside)."""
        if self.call is not None and request.call != self.call:
            return False
        prompt = self.prompt
        if isinstance(prompt, str) and prompt not in request.prompt:
            return False
        if isinstance(prompt, re.Pattern) and prompt.search(request.prompt) is None:
            return False
        return self.when is None or bool(self.when(request))


# --- chunks --------------------------------------------------------------------------------------


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _words(text: str) -> int:
    return len(text.split())


def _usage(answer: Answer, request: ScriptedRequest) -> JSONObject:
    if answer.usage is not None:
        return dict(answer.usage)
    prompt = _words(request.system) + sum(_words(text) for _, text in request.messages)
    reasoning = _words(answer.reasoning)
    output = reasoning + _words(answer.text)
    output += sum(_words(call.arguments_json) + 1 for call in answer.tool_calls)
    usage: JSONObject = {"inputTokens": prompt, "outputTokens": output}
    if reasoning:
        usage["reasoningTokens"] = reasoning
    return usage


def answer_chunks(answer: Answer, request: ScriptedRequest) -> list[StreamChunk]:
    """The stream chunks of ``answer`` to ``request``.

    See [docs/format.md#stream-chunks](../format.md#stream-chunks).

    Blocks in order (reasoning, text, each tool call), each opened, streamed in
    ``answer.pieces`` deltas and ended with its assembled block; then the usage and the
    finish, or, with ``answer.failure``, the error ``finish`` after the blocks.
    """
    chunks: list[StreamChunk] = []
    index = 0
    for kind, text in (("reasoning", answer.reasoning), ("text", answer.text)):
        if not text:
            continue
        chunks.append({"type": "block-start", "index": index, "blockType": kind})
        for piece in _split(text, answer.pieces):
            chunks.append({"type": f"{kind}-delta", "index": index, "text": piece})
        chunks.append({"type": "block-end", "index": index, "block": {"type": kind, "text": text}})
        index += 1
    stable = request.stable_id()
    for k, call in enumerate(answer.tool_calls):
        call_id = call.id or f"call_{stable}_{k}"
        arguments = call.arguments_json
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        parts = _split(arguments, answer.pieces) or [""]
        for n, piece in enumerate(parts):
            delta: StreamChunk = {"type": "tool-call-delta", "index": index, "id": call_id}
            if n == 0:
                delta["name"] = call.name
            delta["argumentsDelta"] = piece
            chunks.append(delta)
        block = {"type": "tool-call", "id": call_id, "name": call.name, "arguments": arguments}
        chunks.append({"type": "block-end", "index": index, "block": block})
        index += 1
    if answer.failure is not None:
        chunks.append(_error_finish(answer.failure.failure()))
        return chunks
    chunks.append({"type": "usage", "usage": _usage(answer, request)})
    kind = answer.finish or ("tool-calls" if answer.tool_calls else "stop")
    chunks.append({"type": "finish", "reason": {"kind": kind}})
    return chunks


def _error_finish(failure: JSONObject, kind: str = "error") -> StreamChunk:
    return {"type": "finish", "reason": {"kind": kind, "failure": failure}}


def _hang_end(reply: Reply, cancelled: bool) -> StreamChunk:
    """The finish of a call whose wait ended: cancelled (or closed), or a hang's time up."""
    if cancelled or not isinstance(reply, Hang):
        failure = {"message": "the scripted call was cancelled while it waited", "code": "ABORTED"}
        return _error_finish(failure, "aborted")
    message = f"the scripted model hung for {reply.seconds:g} s"
    return _error_finish({"message": message, "code": "TIMEOUT"})


def _wait_of(reply: Reply) -> float:
    """How long a call waits before its chunks (a hang: its whole time)."""
    if isinstance(reply, Hang):
        return reply.seconds
    return reply.delay if isinstance(reply, Answer) else 0.0


def _chunks(reply: Reply, seen: ScriptedRequest) -> list[StreamChunk]:
    if isinstance(reply, ProviderFailure):
        return [_error_finish(reply.failure())]
    if isinstance(reply, Chunks):
        return reply._copies()
    assert isinstance(reply, Answer)
    return answer_chunks(reply, seen)


# --- the model ---------------------------------------------------------------------------------


class ScriptedModel(Scripted, OptionsModel):
    """A live model that answers each call by its rules: no network, no API key.

    It has the live-model interface (``stream`` and ``astream``,
    [docs/recording.md#live-model](../recording.md#live-model)), so the
    ``pytest_dsh_replay_live_model`` hook can return it as it is;
    [`serve`][pytest_dsh_replay.ScriptedModel.serve] serves it over loopback HTTP on every
    wire of the model endpoint, for agent processes and the dsh runtime. Thread-safe: calls
    may come from many threads.

    Args:
        rules: The rules, tried in order for each call; the first that matches (and is
            not used up) answers.
        default: The answer when no rule matches; ``None``: such a call raises
            [`ScriptedModelError`][pytest_dsh_replay.ScriptedModelError] (over HTTP: answered 400,
            which no client retries, and the server raises the error when its ``with``
            block ends).

    Attributes:
        calls: Every call made so far (one that no rule answered included), as
            [`ScriptedRequest`][pytest_dsh_replay.ScriptedRequest] objects, in arrival order.

    Raises:
        ScriptedModelError: ``rules`` is not a list (an iterable) of rules, a rule is not a
            [`Rule`][pytest_dsh_replay.Rule], or ``default`` is not an answer.
    """

    def __init__(
        self,
        rules: Iterable[Rule] = (),
        *,
        default: Answer | Chunks | ProviderFailure | Hang | Respond | None = None,
    ):
        if isinstance(rules, Rule | str | bytes | Mapping) or not isinstance(rules, Iterable):
            hint = " (wrap a single rule in a list)" if isinstance(rules, Rule) else ""
            raise _fail(f"ScriptedModel(rules) takes a list of Rule objects{hint}, got {rules!r}")
        self.rules: list[Rule] = list(rules)
        for position, rule in enumerate(self.rules):
            if not isinstance(rule, Rule):
                raise _fail(f"ScriptedModel(rules[{position}]) must be a Rule, got {rule!r}")
        self.default: Rule | None = None if default is None else Rule(default)
        self.calls: list[ScriptedRequest] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._answered: dict[str, int] = {}  # stable id -> calls answered with it

    def response_id(self, request: ScriptedRequest) -> str:
        """The provider's id of the answer to ``request``, as a live provider gives one.

        ``scripted-<16 hex digits of the conversation>``, with ``-<n>`` from the second
        answer to the same conversation on: the same on every run, and never the
        replay endpoint's own numbering, so a recording made against the scripted
        server holds ids a replay must serve back
        ([docs/wires.md#provider-ids](../wires.md#provider-ids)).
        """
        base = f"scripted-{request.stable_id()}"
        with self._lock:
            n = self._answered[base] = self._answered.get(base, 0) + 1
        return base if n == 1 else f"{base}-{n}"

    def _tell_response_id(self, seen: ScriptedRequest, options: CallOptions) -> None:
        tell = options.replay.on_response_id
        if callable(tell):
            tell(self.response_id(seen))

    def __repr__(self) -> str:
        return f"ScriptedModel(<{len(self.rules)} rules>, calls={len(self.calls)})"

    def close(self) -> None:
        """End every hanging call now (and those that start later, at once)."""
        self._closed.set()

    def serve(
        self,
        *,
        api_key: str | None = None,
        idle_timeout: float = 60.0,
        max_body_bytes: int | None = None,
    ) -> ScriptedServer:
        """Serve this model on ``http://127.0.0.1:<free port>``: a ``ScriptedServer``.

        Args:
            api_key: The key clients must send (``None``: any key).
            idle_timeout: Seconds without a request after which the server stops.
            max_body_bytes: The largest request body it accepts (``None``:
                [`MAX_BODY_BYTES`][pytest_dsh_replay.MAX_BODY_BYTES]).

        Returns:
            The running [`ScriptedServer`][pytest_dsh_replay.ScriptedServer]; use it as a context
            manager.
        """
        from .server import ScriptedServer

        if max_body_bytes is None:
            return ScriptedServer(self, api_key=api_key, idle_timeout=idle_timeout)
        return ScriptedServer(
            self, api_key=api_key, idle_timeout=idle_timeout, max_body_bytes=max_body_bytes
        )

    # --- answering ------------------------------------------------------------------------

    def answer(self, request: Mapping[str, object], *, session_id: str | None = None) -> Reply:
        """Pick the answer to one call (it counts as a call; `stream` calls this).

        Args:
            request: The request, of any shape
                [`ScriptedRequest.read`][pytest_dsh_replay.ScriptedRequest.read] reads.
            session_id: The calling session, when known.

        Returns:
            The answer of the first matching rule (a callable's result).

        Raises:
            ScriptedModelError: ``request`` is not a mapping, no rule matches and there
                is no default, or a callable answer returned something that is not an
                answer.
        """
        return self._answer(request, session_id)[0]

    def _answer(
        self, request: Mapping[str, object], session_id: object
    ) -> tuple[Reply, ScriptedRequest]:
        if not isinstance(request, Mapping):
            raise _fail(
                f"ScriptedModel.stream(request) takes a mapping, got {type(request).__name__}"
            )
        sid = session_id if isinstance(session_id, str) else None
        with self._lock:
            number = len(self.calls) + 1
            seen = ScriptedRequest.read(request, call=number, session_id=sid)
            self.calls.append(seen)
        rule = self._pick(seen)
        reply = rule.answer(seen) if callable(rule.answer) else rule.answer
        if not isinstance(reply, _REPLIES):
            raise _fail(f"call #{number}: the answer of {rule!r} returned {reply!r}, not an answer")
        return reply, seen

    def _pick(self, seen: ScriptedRequest) -> Rule:
        for rule in self.rules:
            if not rule.matches(seen):
                continue
            with self._lock:
                if rule.times is not None and rule._used >= rule.times:
                    continue
                rule._used += 1
            return rule
        if self.default is not None:
            return self.default
        raise _fail(
            f"call #{seen.call}: no rule of the scripted model matches the request "
            f"(prompt {seen.prompt[:200]!r}, tool results {list(seen.tool_results)[:3]!r}); "
            f"rules: {self.rules!r}; add a rule or a default answer"
        )

    def stream(
        self,
        request: Request,
        *,
        session_id: str | None = None,
        cancel: Waitable | None = None,
        on_response_id: Callable[[str], object] | None = None,
        **ignored: object,
    ) -> Iterator[StreamChunk]:
        """Answer one call with dsh stream chunks.

        See [docs/format.md#stream-chunks](../format.md#stream-chunks).

        Args:
            request: The request (the in-process shape, or a wire's body).
            session_id: Names the calling session for the rules.
            cancel: An event that ends a [`Hang`][pytest_dsh_replay.Hang] when set.
            on_response_id: Given
                [`response_id`][pytest_dsh_replay.ScriptedModel.response_id] (the model
                endpoint's callable).
            **ignored: Every other keyword
                ([docs/recording.md#live-model-calls](../recording.md#live-model-calls)) is
                accepted and ignored.

        Returns:
            An iterator of chunks: an [`Answer`][pytest_dsh_replay.Answer]'s blocks, usage
            and finish; [`Chunks`][pytest_dsh_replay.Chunks] as given; a
            [`ProviderFailure`][pytest_dsh_replay.ProviderFailure]'s error ``finish``; a
            [`Hang`][pytest_dsh_replay.Hang]'s wait, then its error ``finish``. The answer
            is picked when the iterator is first read.

        Raises:
            ScriptedModelError: When read: no rule answers the call.
        """
        return self._stream(request, _options(session_id, cancel, on_response_id))

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        """[`stream`][pytest_dsh_replay.ScriptedModel.stream] with the call's options as one value.

        How the recorder and the scripted server call it.
        """
        return self._stream(request, options)

    def _stream(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        reply, seen = self._answer(request, options.session_id)
        self._tell_response_id(seen, options)
        cancel = options.cancel
        wait = _wait_of(reply)
        if (wait and self._wait(cancel, wait)) or isinstance(reply, Hang):
            yield _hang_end(reply, cancelled=not isinstance(reply, Hang) or self._cut(cancel))
            return
        yield from _chunks(reply, seen)

    def _cut(self, cancel: _Flag | None) -> bool:
        return self._closed.is_set() or (cancel is not None and cancel.is_set())

    def _wait(self, cancel: Waitable | asyncio.Event | None, seconds: float) -> bool:
        """Wait ``seconds``; ``True`` when cancelled or closed first."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self._closed.is_set():
                return True
            step = min(left, _STEP_S)
            if isinstance(cancel, asyncio.Event):  # an async call's event, read synchronously
                if cancel.is_set():
                    return True
                self._closed.wait(step)
            elif cancel is not None:
                if cancel.wait(step):
                    return True
            else:
                self._closed.wait(step)
        return self._closed.is_set()

    def astream(
        self,
        request: Request,
        *,
        session_id: str | None = None,
        cancel: Waitable | asyncio.Event | None = None,
        on_response_id: Callable[[str], object] | None = None,
        **ignored: object,
    ) -> AsyncIterator[StreamChunk]:
        """The async form of `stream`: the same chunks; waits do not block the loop.

        Args:
            request: As for [`stream`][pytest_dsh_replay.ScriptedModel.stream].
            session_id: As for [`stream`][pytest_dsh_replay.ScriptedModel.stream].
            cancel: An event (``asyncio.Event`` or ``threading.Event``) that ends a
                [`Hang`][pytest_dsh_replay.Hang] when set.
            on_response_id: As for [`stream`][pytest_dsh_replay.ScriptedModel.stream].
            **ignored: As for [`stream`][pytest_dsh_replay.ScriptedModel.stream].

        Returns:
            An async iterator of the chunks
            [`stream`][pytest_dsh_replay.ScriptedModel.stream] yields.
        """
        return self._astream(request, _options(session_id, cancel, on_response_id))

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        """`astream` with the call's options as one value."""
        return self._astream(request, options)

    async def _astream(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        reply, seen = self._answer(request, options.session_id)
        self._tell_response_id(seen, options)
        cancel = options.cancel
        wait = _wait_of(reply)
        if (wait and await self._await(cancel, wait)) or isinstance(reply, Hang):
            yield _hang_end(reply, cancelled=not isinstance(reply, Hang) or self._cut(cancel))
            return
        for chunk in _chunks(reply, seen):
            yield chunk

    async def _await(self, cancel: _Flag | None, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self._closed.is_set() or (cancel is not None and cancel.is_set()):
                return True
            await asyncio.sleep(min(left, _STEP_S))
        return self._closed.is_set()


def _options(
    session_id: str | None,
    cancel: Waitable | asyncio.Event | None,
    on_response_id: Callable[[str], object] | None,
) -> CallOptions:
    """The options of a call made through `ScriptedModel.stream` or ``astream``."""
    replay = NO_REPLAY if on_response_id is None else ReplayOptions(on_response_id=on_response_id)
    return CallOptions(session_id, cancel=cancel, replay=replay)
