"""The built-in live model for ``--dsh-record``: an OpenAI-compatible chat-completions adapter.

:class:`OpenAICompatibleModel` streams chat completions through the official ``openai``
package (the ``record`` extra) and maps them to dsh stream chunks (SPEC 3), so a recording
made against any OpenAI-compatible endpoint (OpenAI, DeepSeek, a local server) looks like
one made by the dsh runtime:

- ``delta.reasoning_content`` (DeepSeek) becomes a ``reasoning`` block, ``delta.content``
  a ``text`` block, each ``delta.tool_calls[k]`` a ``tool-call`` block; block indexes
  count from 0 in order of first appearance. A block ends (``block-end`` with the
  assembled block) when the stream moves on to another block kind, or at the end of the
  stream, where every open block ends in index order.
- Then a ``usage`` chunk (when the provider reports usage) and exactly one ``finish``.
- A failed call never raises: like the dsh runtime (SPEC 2, "How a failed model attempt
  is logged") it ends in a ``finish`` with ``{"kind": "error", "failure": LlmFailure}``,
  after whatever chunks had already streamed.

Importing this module is cheap: ``openai`` is imported when a model is constructed.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Final

from ._errors import RecordingError
from ._events import StreamChunk

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionChunk

__all__ = ["RECORD_ENV_VARS", "OpenAICompatibleModel"]

RECORD_ENV_VARS: Final[tuple[str, str, str]] = (
    "DSH_RECORD_BASE_URL",
    "DSH_RECORD_API_KEY",
    "DSH_RECORD_MODEL",
)
"""The environment variables :meth:`OpenAICompatibleModel.from_env` reads, in order:
the endpoint's base URL (``https://api.deepseek.com/v1``), the API key, the model name."""

_INSTALL_HINT: Final = "pip install 'pytest-dsh-replay[record]'"

# A 400 (or 413) whose message says this is a context-window overflow, not a bad parameter
# such as an out-of-range max_tokens.
_CONTEXT_OVERFLOW: Final = re.compile(
    r"context[\s_-]*(length|window)|maximum context|maximum (allowed )?(number of )?tokens"
    r"|too many (input )?tokens|prompt is too long|input is too long",
    re.IGNORECASE,
)

_DSH_BLOCK_TYPES: Final = frozenset({"text", "reasoning", "tool-call", "tool-result", "image"})


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as error:
        raise RecordingError(
            "the built-in OpenAI-compatible live model needs the 'openai' package, which "
            f"is not installed; install the record extra: {_INSTALL_HINT}"
        ) from error
    return openai


class OpenAICompatibleModel:
    """A live model that streams from an OpenAI-compatible chat-completions endpoint.

    It has the live-model interface the recorder uses (``stream`` and ``astream``). The
    client never retries (``max_retries=0``): whether a failed call is retried is the
    agent's decision, and the failure is part of the recording.

    Args:
        base_url: The API base URL, up to and including the version segment, e.g.
            ``"https://api.deepseek.com/v1"``; requests go to
            ``<base_url>/chat/completions``.
        api_key: The bearer token sent in the ``Authorization`` header. It is never
            part of ``repr()`` or of a failure message.
        model: The model name sent as ``"model"`` (``"deepseek-chat"``).
        timeout: The client timeout in seconds, for connecting and for each read; must
            be > 0. A call that times out ends in a ``NETWORK`` error finish.
        extra_body: Extra top-level JSON fields merged into every request body, for
            provider options the OpenAI API lacks (``{"thinking": {...}}``).

    Raises:
        RecordingError: The ``openai`` package is not installed (the message names
            ``pip install 'pytest-dsh-replay[record]'``).
        ValueError: ``base_url``, ``api_key`` or ``model`` is empty, or ``timeout`` is
            not a positive number of seconds.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float = 120.0,
        extra_body: Mapping[str, Any] | None = None,
    ):
        for name, value in (("base_url", base_url), ("api_key", api_key), ("model", model)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"OpenAICompatibleModel({name}=...) must be a non-empty string")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(
                f"OpenAICompatibleModel(timeout=...) takes seconds > 0, got {timeout!r}"
            )
        self._openai = _import_openai()
        self.base_url = base_url
        self.model = model
        self.timeout = float(timeout)
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        self._api_key = api_key
        self._client: OpenAI | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> OpenAICompatibleModel | None:
        """Build the model from the ``DSH_RECORD_*`` variables of :data:`RECORD_ENV_VARS`.

        Args:
            environ: Where to read the variables; the process environment by default.

        Returns:
            The model, or ``None`` when any of the three variables is unset or empty
            (the caller reports that as a usage error naming :data:`RECORD_ENV_VARS`).

        Raises:
            RecordingError: All three are set but ``openai`` is not installed.
        """
        base_url, api_key, model = (environ.get(name, "") for name in RECORD_ENV_VARS)
        if not (base_url and api_key and model):
            return None
        return cls(base_url=base_url, api_key=api_key, model=model)

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel(base_url={self.base_url!r}, model={self.model!r})"

    def close(self) -> None:
        """Close the HTTP connections of the sync client (a later call opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # --- calls -------------------------------------------------------------------------

    def stream(self, request: Mapping[str, Any], **kwargs: Any) -> Iterator[StreamChunk]:
        """Make one streaming chat-completions call and yield it as dsh chunks.

        The request is converted now; the HTTP call starts when the iterator is first
        read. Closing the iterator early closes the HTTP response.

        Args:
            request: A dsh model request:

                - ``"messages"`` (required): a list of messages, each either
                  OpenAI-style (passed through) or dsh-style
                  ``{"role": "user" | "assistant", "content": str | [ContentBlock]}``.
                  In a list content, ``text`` blocks become text, ``reasoning`` blocks
                  are dropped, ``tool-call`` blocks become the assistant's
                  ``tool_calls``, each ``tool-result`` block becomes a
                  ``{"role": "tool", "tool_call_id", "content": text}`` message, and
                  other OpenAI content parts (``image_url``, ...) are kept.
                  A message rebuilt from a list content keeps only ``role``,
                  ``content``, ``name``, ``tool_call_id`` and ``tool_calls``.
                - ``"system"`` (optional str): sent as a leading system message.
                - ``"tools"`` (optional): dsh tool schemas
                  ``{"name", "description"?, "inputSchema" | "parameters"}`` or OpenAI
                  ``{"type": "function", "function": {...}}`` entries.
                - ``"max_tokens"`` / ``"maxTokens"`` (int) and ``"temperature"``
                  (float), passed on when present. Other keys are ignored.
            **kwargs: Accepted and ignored (``session_id``, ``parent_session_id``,
                ``turn``, ``step``, ...).

        Returns:
            An iterator of new chunk dicts (SPEC 3): blocks, then ``usage`` when the
            provider reports it (``inputTokens`` excludes cached input, which is
            ``cacheReadTokens``; ``reasoningTokens`` when reported), then one
            ``finish``: ``stop``; ``tool-calls`` (also for ``stop`` with tool calls);
            ``max-tokens`` for ``length``; otherwise ``error`` with an LlmFailure
            ``{"message", "code", "status"?, "providerRetryAfterMs"?, "requestId"?}``,
            ``code`` being ``AUTH`` (401/403), ``RATE_LIMIT`` (429),
            ``CONTEXT_WINDOW_EXCEEDED`` (400/413 about the context length),
            ``OVERLOADED`` (503/529, DeepSeek's ``insufficient_system_resource``),
            ``NETWORK`` (connection failure or timeout; no ``status``),
            ``EMPTY_RESPONSE`` (no text, reasoning or tool call), ``CONTENT_FILTER``
            (``content_filter``) or ``UNKNOWN``. Reading it never raises for a failed
            call: chunks already yielded stay, the error ``finish`` comes last, and
            blocks left open by a failure get no ``block-end``.

        Raises:
            TypeError: ``request`` is not a mapping.
            ValueError: ``request`` does not have the shape above (nothing is sent).
        """
        return self._run(self._params(request))

    def astream(self, request: Mapping[str, Any], **kwargs: Any) -> AsyncIterator[StreamChunk]:
        """Make one streaming call with ``openai.AsyncOpenAI``; the async form of :meth:`stream`.

        Each call uses its own async client, closed when the iterator ends, so the model
        works across event loops (one ``asyncio.run`` per test).

        Args:
            request: As for :meth:`stream`.
            **kwargs: Accepted and ignored.

        Returns:
            An async iterator of the same chunks :meth:`stream` yields.

        Raises:
            TypeError: ``request`` is not a mapping.
            ValueError: ``request`` is malformed (nothing is sent).
        """
        return self._arun(self._params(request))

    # --- the HTTP side -----------------------------------------------------------------

    def _client_options(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "api_key": self._api_key,
            "timeout": self.timeout,
            "max_retries": 0,
        }

    def _sync_client(self) -> OpenAI:
        with self._lock:
            if self._client is None:
                self._client = self._openai.OpenAI(**self._client_options())
            return self._client

    def _run(self, params: dict[str, Any]) -> Iterator[StreamChunk]:
        mapper = _ChunkMapper()
        try:
            stream = self._sync_client().chat.completions.create(**params)
        except Exception as error:
            yield mapper.failed(self._failure(error))
            return
        with stream:
            while True:
                try:
                    chunk = next(stream)
                except StopIteration:
                    break
                except Exception as error:
                    yield mapper.failed(self._failure(error))
                    return
                yield from mapper.feed(chunk)
        yield from mapper.end()

    async def _arun(self, params: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        mapper = _ChunkMapper()
        async with self._openai.AsyncOpenAI(**self._client_options()) as client:
            try:
                stream = await client.chat.completions.create(**params)
            except Exception as error:
                yield mapper.failed(self._failure(error))
                return
            async with stream:
                while True:
                    try:
                        chunk = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                    except Exception as error:
                        yield mapper.failed(self._failure(error))
                        return
                    for out in mapper.feed(chunk):
                        yield out
        for out in mapper.end():
            yield out

    def _params(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(request, Mapping):
            raise TypeError(
                f"stream(request) takes a mapping with 'messages', got {type(request).__name__}"
            )
        params: dict[str, Any] = {
            "model": self.model,
            "messages": _messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = request.get("tools")
        if tools:
            params["tools"] = _tools(tools)
        max_tokens = request.get("max_tokens", request.get("maxTokens"))
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if request.get("temperature") is not None:
            params["temperature"] = request["temperature"]
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    def _failure(self, error: Exception) -> dict[str, Any]:
        failure = _failure_of(error, self._openai)
        if len(self._api_key) >= 8:  # a shorter "key" would garble ordinary words
            failure["message"] = failure["message"].replace(self._api_key, "[redacted]")
        return failure


# --- request conversion ----------------------------------------------------------------


def _messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages = request.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise ValueError(
            f"request['messages'] must be a list of message objects, got {type(messages).__name__}"
        )
    out: list[dict[str, Any]] = []
    system = request.get("system")
    if system is not None:
        if not isinstance(system, str):
            raise ValueError(f"request['system'] must be a string, got {type(system).__name__}")
        out.append({"role": "system", "content": system})
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(
                f"request['messages'][{position}] must be an object, got {type(message).__name__}"
            )
        content = message.get("content")
        if isinstance(content, Sequence) and not isinstance(content, (str, bytes)):
            out.extend(_convert_message(message, content, position))
        else:
            out.append(dict(message))
    return out


def _convert_message(
    message: Mapping[str, Any], content: Sequence[Any], position: int
) -> list[dict[str, Any]]:
    """Rebuild one message whose content is a list of dsh blocks / OpenAI parts."""
    role = message.get("role") or "user"
    parts: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = list(message.get("tool_calls") or ())
    results: list[dict[str, Any]] = []
    for block_no, block in enumerate(content):
        where = f"request['messages'][{position}]['content'][{block_no}]"
        if not isinstance(block, Mapping):
            raise ValueError(f"{where} must be an object, got {type(block).__name__}")
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": _str_field(block, "text", where)})
        elif kind == "reasoning":
            continue
        elif kind == "tool-call":
            tool_calls.append(
                {
                    "id": _str_field(block, "id", where),
                    "type": "function",
                    "function": {
                        "name": _str_field(block, "name", where),
                        "arguments": _str_field(block, "arguments", where),
                    },
                }
            )
        elif kind == "tool-result":
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": _str_field(block, "toolCallId", where),
                    "content": _result_text(block.get("content"), where),
                }
            )
        elif kind == "image":
            raise ValueError(
                f"{where}: dsh image blocks are not supported by the OpenAI-compatible "
                "adapter; send an OpenAI 'image_url' content part instead"
            )
        else:
            parts.append(dict(block))  # an OpenAI content part (image_url, input_audio, ...)
    if results and not parts and not tool_calls:
        return results  # a message that only carried tool results
    rebuilt: dict[str, Any] = {"role": role}
    if all(part.get("type") == "text" for part in parts):
        text = "\n".join(part["text"] for part in parts)
        rebuilt["content"] = text if (text or not tool_calls) else None
    else:
        rebuilt["content"] = parts
    for key in ("name", "tool_call_id"):
        if key in message:
            rebuilt[key] = message[key]
    if tool_calls:
        rebuilt["tool_calls"] = tool_calls
    return [*results, rebuilt]


def _str_field(block: Mapping[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise ValueError(
            f"{where}: a {block.get('type')!r} block needs a string {key!r}, "
            f"got {type(value).__name__}"
        )
    return value


def _result_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        raise ValueError(f"{where}: a tool-result block needs a 'content' list of blocks")
    return "\n".join(
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        raise ValueError(f"request['tools'] must be a list, got {type(tools).__name__}")
    out: list[dict[str, Any]] = []
    for position, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise ValueError(f"request['tools'][{position}] must be an object")
        if tool.get("type") == "function" and isinstance(tool.get("function"), Mapping):
            out.append(dict(tool))
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"request['tools'][{position}] needs a non-empty 'name' "
                "(dsh schema) or 'type': 'function' with 'function' (OpenAI schema)"
            )
        function: dict[str, Any] = {"name": name}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        schema = tool.get("inputSchema", tool.get("parameters"))
        function["parameters"] = (
            dict(schema) if isinstance(schema, Mapping) else {"type": "object", "properties": {}}
        )
        out.append({"type": "function", "function": function})
    return out


# --- response mapping ------------------------------------------------------------------


class _Block:
    __slots__ = ("id", "index", "kind", "name", "named", "parts")

    def __init__(self, index: int, kind: str, call_id: str = "", name: str = ""):
        self.index = index
        self.kind = kind
        self.id = call_id
        self.name = name
        self.named = False  # the name went out on a tool-call-delta
        self.parts: list[str] = []

    def assembled(self) -> dict[str, Any]:
        text = "".join(self.parts)
        if self.kind == "tool-call":
            return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": text}
        return {"type": self.kind, "text": text}


class _ChunkMapper:
    """Turns ``ChatCompletionChunk`` objects into dsh chunks; one per call."""

    def __init__(self) -> None:
        self._next_index = 0
        self._open: dict[int, _Block] = {}  # dsh index -> open block
        self._tools: dict[int, _Block] = {}  # OpenAI tool index -> its open block
        self._tool_ids: dict[int, str] = {}  # OpenAI tool index -> id, once seen
        self._produced = False
        self._tool_calls = 0
        self._finish_reason: str | None = None
        self._usage: dict[str, int] | None = None

    def feed(self, chunk: ChatCompletionChunk) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        if chunk.usage is not None:
            self._usage = _usage(chunk.usage)
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            reasoning = getattr(delta, "reasoning_content", None)
            if not isinstance(reasoning, str):
                reasoning = getattr(delta, "reasoning", None)  # some compatible servers
            if isinstance(reasoning, str) and reasoning:
                self._text(out, "reasoning", reasoning)
            if delta.content:
                self._text(out, "text", delta.content)
            for call in delta.tool_calls or ():
                self._tool_delta(out, call)
            if choice.finish_reason:
                self._finish_reason = choice.finish_reason
        return out

    def end(self) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        self._close(out, lambda block: True)
        if self._usage is not None:
            out.append({"type": "usage", "usage": self._usage})
        out.append({"type": "finish", "reason": self._reason()})
        return out

    @staticmethod
    def failed(failure: dict[str, Any]) -> StreamChunk:
        return {"type": "finish", "reason": {"kind": "error", "failure": failure}}

    def _start(self, out: list[StreamChunk], kind: str) -> _Block:
        block = _Block(self._next_index, kind)
        self._next_index += 1
        self._open[block.index] = block
        out.append({"type": "block-start", "index": block.index, "blockType": kind})
        return block

    def _close(self, out: list[StreamChunk], which: Callable[[_Block], bool]) -> None:
        for index in sorted(self._open):
            block = self._open[index]
            if which(block):
                del self._open[index]
                out.append({"type": "block-end", "index": index, "block": block.assembled()})
        self._tools = {k: b for k, b in self._tools.items() if b.index in self._open}

    def _text(self, out: list[StreamChunk], kind: str, text: str) -> None:
        self._close(out, lambda block: block.kind != kind)
        block = next(iter(self._open.values()), None) or self._start(out, kind)
        block.parts.append(text)
        self._produced = True
        out.append({"type": f"{kind}-delta", "index": block.index, "text": text})

    def _tool_delta(self, out: list[StreamChunk], call: Any) -> None:
        self._close(out, lambda block: block.kind != "tool-call")
        key = call.index if isinstance(call.index, int) else len(self._tool_ids)
        function = call.function
        name = function.name if function is not None and function.name else ""
        arguments = function.arguments if function is not None and function.arguments else ""
        block = self._tools.get(key)
        first = block is None
        if block is None:
            block = self._start(out, "tool-call")
            self._tools[key] = block
            self._tool_calls += 1
            block.id = call.id or self._tool_ids.get(key) or f"call_{key}"
            self._tool_ids[key] = block.id
        if name and not block.name:
            block.name = name
        if not (first or arguments or (block.name and not block.named)):
            return
        block.parts.append(arguments)
        self._produced = True
        chunk: StreamChunk = {"type": "tool-call-delta", "index": block.index, "id": block.id}
        if block.name and not block.named:
            chunk["name"] = block.name
            block.named = True
        chunk["argumentsDelta"] = arguments
        out.append(chunk)

    def _reason(self) -> dict[str, Any]:
        reason = self._finish_reason
        if reason == "length":
            return {"kind": "max-tokens"}
        if reason == "content_filter":
            return _error(
                "the provider's content filter stopped the completion (finish_reason "
                "'content_filter')",
                "CONTENT_FILTER",
            )
        if reason == "insufficient_system_resource":
            return _error(
                "the provider ran out of resources mid-completion (finish_reason "
                "'insufficient_system_resource')",
                "OVERLOADED",
            )
        if reason in (None, "stop", "tool_calls") and not self._produced:
            return _error(
                "the model returned a completed response with no text, reasoning or tool "
                f"call (finish_reason {reason!r})",
                "EMPTY_RESPONSE",
            )
        if reason == "tool_calls" or (reason == "stop" and self._tool_calls):
            return {"kind": "tool-calls"}
        if reason == "stop":
            return {"kind": "stop"}
        if reason is None:
            return _error(
                "the stream ended without a finish_reason (the response was cut short)",
                "UNKNOWN",
            )
        return _error(f"the model stopped with an unknown finish_reason {reason!r}", "UNKNOWN")


def _error(message: str, code: str) -> dict[str, Any]:
    return {"kind": "error", "failure": {"message": message, "code": code}}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(usage: Any) -> dict[str, int]:
    prompt = _int(usage.prompt_tokens) or 0
    completion = _int(usage.completion_tokens) or 0
    cached = _int(getattr(usage, "prompt_cache_hit_tokens", None))  # DeepSeek
    if cached is None and usage.prompt_tokens_details is not None:
        cached = _int(usage.prompt_tokens_details.cached_tokens)
    reasoning = None
    if usage.completion_tokens_details is not None:
        reasoning = _int(usage.completion_tokens_details.reasoning_tokens)
    out = {"inputTokens": max(prompt - (cached or 0), 0), "outputTokens": completion}
    if cached is not None:
        out["cacheReadTokens"] = cached
    if reasoning is not None:
        out["reasoningTokens"] = reasoning
    return out


# --- failures --------------------------------------------------------------------------


def _failure_of(error: Exception, openai: Any) -> dict[str, Any]:
    """The LlmFailure (SPEC 3) for an exception raised by the client."""
    if isinstance(error, openai.APIStatusError):
        status = int(error.status_code)
        message = _status_message(error)
        failure: dict[str, Any] = {"message": message, "code": _status_code(status, error)}
        if 100 <= status <= 599:
            failure["status"] = status
        retry_after = _retry_after_ms(error.response.headers)
        if retry_after is not None:
            failure["providerRetryAfterMs"] = retry_after
        request_id = getattr(error, "request_id", None)
        if isinstance(request_id, str) and request_id:
            failure["requestId"] = request_id
        return failure
    if isinstance(error, openai.APIConnectionError) or _is_transport_error(error):
        cause = error.__cause__ or error.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        message = str(error) or type(error).__name__
        return {"message": f"{message}{detail}", "code": "NETWORK"}
    if isinstance(error, openai.APIError):  # an error event inside the stream
        return {"message": str(error.message or error) or "stream error", "code": "UNKNOWN"}
    return {"message": f"{type(error).__name__}: {error}", "code": "UNKNOWN"}


def _status_message(error: Any) -> str:
    body = error.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    text = str(error.message or "") or f"HTTP {error.status_code}"
    return text


def _status_code(status: int, error: Any) -> str:
    if status in (401, 403):
        return "AUTH"
    if status == 429:
        return "RATE_LIMIT"
    if status in (503, 529):
        return "OVERLOADED"
    if status in (400, 413):
        body = error.body
        code = body.get("code") if isinstance(body, Mapping) else None
        if code == "context_length_exceeded" or _CONTEXT_OVERFLOW.search(_status_message(error)):
            return "CONTEXT_WINDOW_EXCEEDED"
    return "UNKNOWN"


def _retry_after_ms(headers: Any) -> int | None:
    """``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), as whole ms > 0."""
    raw_ms = headers.get("retry-after-ms")
    seconds: float | None = None
    if raw_ms is not None:
        try:
            seconds = float(raw_ms) / 1000
        except ValueError:
            seconds = None
    raw = headers.get("retry-after")
    if seconds is None and raw is not None:
        try:
            seconds = float(raw)
        except ValueError:
            try:
                seconds = parsedate_to_datetime(raw).timestamp() - time.time()
            except (TypeError, ValueError):
                seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return math.ceil(seconds * 1000)


def _is_transport_error(error: BaseException) -> bool:
    """An httpx transport error (connect, read, timeout, protocol) or an ``OSError``.

    ``openai`` wraps these while sending; some versions let them through while a
    response streams. Matched by class name because the HTTP library differs between
    ``openai`` releases (``httpx`` / ``httpx2``).
    """
    if isinstance(error, OSError):
        return True
    return any(
        cls.__name__ == "TransportError" and cls.__module__.split(".")[0].startswith("httpx")
        for cls in type(error).__mro__
    )
