"""The built-in live model for ``--dsh-record``: an OpenAI-compatible chat-completions adapter.

`OpenAICompatibleModel` streams chat completions through the official ``openai``
package (the ``record`` extra) and maps them to dsh stream chunks
([docs/format.md#stream-chunks](../format.md#stream-chunks)), so a recording made against
any OpenAI-compatible endpoint (OpenAI, DeepSeek, a local server) looks like one made by the
dsh runtime:

- ``delta.reasoning_content`` (DeepSeek) becomes a ``reasoning`` block, ``delta.content``
  a ``text`` block, each ``delta.tool_calls[k]`` a ``tool-call`` block; block indexes
  count from 0 in order of first appearance. A block ends (``block-end`` with the
  assembled block) when the stream moves on to another block kind, or at the end of the
  stream, where every open block ends in index order.
- Then a ``usage`` chunk (when the provider reports usage) and exactly one ``finish``.
- A failed call never raises: like the dsh runtime
([docs/format.md#failed-calls](../format.md#failed-calls)) it
  ends in a ``finish`` with ``{"kind": "error", "failure": LlmFailure}``,
  after whatever chunks had already streamed.

Importing this module is cheap: ``openai`` is imported when a model is constructed.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._errors import RecordingError
from .._format.events import StreamChunk
from .._format.redact import shown_url
from .._identity.options import CallOptions, OptionsModel, Request
from .._wire.anthropic import WIRE as ANTHROPIC_WIRE
from .._wire.gemini import WIRE as GEMINI_WIRE
from .._wire.openai import WIRE as OPENAI_WIRE
from .._wire.openai import OpenAIDecoder, openai_failure
from .._wire.shapes import FailureRecord
from .._wire.table import WIRES
from .proxy import (
    UPSTREAM_IDLE_TIMEOUT_S,
    Relay,
    _is_read_timeout,
    decoded_whole,
    proxy_redactor,
    proxy_stream,
    stalled,
)
from .proxy import _is_network_error as _is_network_error

if TYPE_CHECKING:
    from openai import OpenAI

__all__ = ["RECORD_ENV_VARS", "TIMEOUT_VAR", "OpenAICompatibleModel"]

RECORD_ENV_VARS: Final[tuple[str, str, str]] = (
    "DSH_RECORD_BASE_URL",
    "DSH_RECORD_API_KEY",
    "DSH_RECORD_MODEL",
)
"""The environment variables `OpenAICompatibleModel.from_env` reads, in order:
the endpoint's base URL (``https://api.deepseek.com/v1``), the API key, and (optional)
a model name that replaces the one each request asks for."""

ANTHROPIC_BASE_URL_VAR: Final = ANTHROPIC_WIRE.record_base_url_variable
"""Where ``/v1/messages`` calls go while recording (default: ``DSH_RECORD_BASE_URL``)."""

GEMINI_BASE_URL_VAR: Final = GEMINI_WIRE.record_base_url_variable
"""Where Gemini calls go while recording (default: ``DSH_RECORD_BASE_URL``)."""

TIMEOUT_VAR: Final = "DSH_RECORD_TIMEOUT"
"""The variable that sets the built-in live model's ``timeout`` in seconds (default:
[`UPSTREAM_IDLE_TIMEOUT_S`][pytest_dsh_replay.UPSTREAM_IDLE_TIMEOUT_S];
[docs/limits.md#upstream-idle](../limits.md#upstream-idle))."""

# dsh request keys this adapter converts; every other key is sent as it is.
_CONVERTED: Final = frozenset({"messages", "system", "tools", "maxTokens", "model", "stream"})

_INSTALL_HINT: Final = "pip install openai (the plugin's record extra)"


def _timeout_from(raw: str) -> float:
    """`TIMEOUT_VAR`'s seconds (unset or empty: the default).

    Raises:
        RecordingError: The value is not a finite number > 0.
    """
    if not raw.strip():
        return UPSTREAM_IDLE_TIMEOUT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise RecordingError(
            f"{TIMEOUT_VAR}={raw!r} is not a number of seconds > 0: it sets how long the "
            "live model may send nothing (unset: "
            f"{UPSTREAM_IDLE_TIMEOUT_S:g}; docs/limits.md#upstream-idle)"
        )
    return seconds


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as error:
        raise RecordingError(
            "the built-in OpenAI-compatible live model needs the 'openai' package, which "
            f"is not installed: {_INSTALL_HINT}"
        ) from error
    return openai


class OpenAICompatibleModel(OptionsModel):
    """A live model that streams from an OpenAI-compatible chat-completions endpoint.

    It has the live-model interface the recorder uses (``stream`` and ``astream``). The
    client never retries (``max_retries=0``): whether a failed call is retried is the
    agent's decision, and the failure is part of the recording.

    Args:
        base_url: The API base URL, up to and including the version segment, e.g.
            ``"https://api.deepseek.com/v1"``; requests go to
            ``<base_url>/chat/completions``. A query string is kept on every request
            (``https://h/v1?api-version=1`` calls
            ``https://h/v1/chat/completions?api-version=1``); its secret-looking values
            never show in a message or ``repr``
            ([docs/checks.md#redaction](../checks.md#redaction)).
        api_key: The bearer token sent in the ``Authorization`` header. It is never
            part of ``repr()`` or of a failure message.
        model: When given, the model name sent as ``"model"`` instead of the one each
            request asks for (``"deepseek-chat"``); ``None`` sends the request's own.
        timeout: Seconds to connect, for an answer to start and between two reads of
            an answer (the idle timeout; default
            [`UPSTREAM_IDLE_TIMEOUT_S`][pytest_dsh_replay.UPSTREAM_IDLE_TIMEOUT_S], 120);
            must be > 0. A call that cannot connect or whose answer does not start in time ends in a
            ``NETWORK`` error finish; an answer that stalls longer once it started ends in
            a ``TIMEOUT`` error finish, and is recorded so
            ([docs/limits.md#upstream-idle](../limits.md#upstream-idle)).
        extra_body: Extra top-level JSON fields merged into every request body, for
            provider options the OpenAI API lacks (``{"thinking": {...}}``).
        anthropic_base_url: Where the recording proxy sends ``/v1/messages`` calls
            (default: ``base_url``, by the dsh runtime's rule: ``/v1/messages`` appended,
            ``/messages`` when it already ends in ``/v1``).
        gemini_base_url: Where the recording proxy sends Gemini calls (``/v1beta/models/
            ...:streamGenerateContent``), e.g. ``"https://generativelanguage.googleapis.com"``
            (default: ``base_url``); see
            [docs/wires.md#recording-proxy](../wires.md#recording-proxy).
        base_urls: Where the recording proxy sends each wire's calls, by wire name
            (``{"anthropic": ..., "gemini": ...}``; a wire not named: ``base_url``);
            ``anthropic_base_url`` and ``gemini_base_url`` are two of them.

    A call that cannot reach the endpoint (connection refused, DNS, timeout) ends in a
    ``NETWORK`` error finish and is also kept in `network_failures`, a message naming
    the base URL and the error, so a recording made while the server was down fails its
    test instead of being written.

    Raises:
        RecordingError: The ``openai`` package is not installed (the message names
            ``pip install openai``, the plugin's record extra).
        ValueError: ``base_url`` or ``api_key`` is empty, ``base_url``'s query string
            repeats a parameter, ``model`` is given but empty, or ``timeout`` is not a
            positive number of seconds.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str | None = None,
        timeout: float = UPSTREAM_IDLE_TIMEOUT_S,
        extra_body: Mapping[str, Any] | None = None,
        anthropic_base_url: str | None = None,
        gemini_base_url: str | None = None,
        base_urls: Mapping[str, str] | None = None,
    ):
        for name, value in (("base_url", base_url), ("api_key", api_key)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"OpenAICompatibleModel({name}=...) must be a non-empty string")
        if model is not None and (not isinstance(model, str) or not model):
            raise ValueError("OpenAICompatibleModel(model=...) must be a non-empty string or None")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(
                f"OpenAICompatibleModel(timeout=...) takes seconds > 0, got {timeout!r}"
            )
        split_query(base_url)  # a query the SDK cannot send is refused now
        self._openai = _import_openai()
        self.base_url = base_url
        self.model = model
        self.timeout = float(timeout)
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        # wire name -> where the recording proxy sends its calls (else base_url)
        named = {ANTHROPIC_WIRE.name: anthropic_base_url, GEMINI_WIRE.name: gemini_base_url}
        given = {**(base_urls or {}), **{name: url for name, url in named.items() if url}}
        self._upstream_bases = {name: url for name, url in given.items() if url}
        self.anthropic_base_url = self._upstream_bases.get(ANTHROPIC_WIRE.name, base_url)
        self.network_failures: list[str] = []
        self._api_key = api_key
        # What no message, relayed byte or header may show: the key, the URLs' credentials.
        self._redactor = proxy_redactor(api_key, base_url, *self._upstream_bases.values())
        self._client: OpenAI | None = None
        self._proxy_client: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> OpenAICompatibleModel | None:
        """Build the model from the ``DSH_RECORD_*`` variables of `RECORD_ENV_VARS`.

        Args:
            environ: Where to read the variables; the process environment by default.

        Returns:
            The model, or ``None`` when the base URL or the key is unset or empty (the
            caller reports that as a usage error naming `RECORD_ENV_VARS`).
            ``DSH_RECORD_MODEL``, when set, replaces the model every request asks for;
            each wire's ``record_base_url_variable`` (`ANTHROPIC_BASE_URL_VAR`,
            `GEMINI_BASE_URL_VAR`) sets where its calls go, `TIMEOUT_VAR` the
            ``timeout`` in seconds.

        Raises:
            RecordingError: The variables are set but ``openai`` is not installed, or
                `TIMEOUT_VAR` is not a number of seconds > 0 (the message names it
                and its value), or the base URL's query string repeats a parameter.
        """
        base_url, api_key, model = (environ.get(name, "") for name in RECORD_ENV_VARS)
        if not (base_url and api_key):
            return None
        timeout = _timeout_from(environ.get(TIMEOUT_VAR, ""))
        try:
            return cls(
                base_url=base_url,
                api_key=api_key,
                model=model or None,
                timeout=timeout,
                base_urls={
                    wire.name: environ.get(wire.record_base_url_variable, "")
                    for wire in WIRES
                    if wire.record_base_url_variable
                },
            )
        except ValueError as error:
            raise RecordingError(f"{RECORD_ENV_VARS[0]}: {error}") from None

    def __repr__(self) -> str:
        shown = shown_url(self.base_url, self._redactor)
        return f"OpenAICompatibleModel(base_url={shown!r}, model={self.model!r})"

    def close(self) -> None:
        """Close the HTTP connections of the sync clients (a later call opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
            proxy, self._proxy_client = self._proxy_client, None
        if client is not None:
            client.close()
        if proxy is not None:
            proxy.close()

    def _network_failure(self, message: str) -> None:
        with self._lock:
            self.network_failures.append(message)

    # --- calls -------------------------------------------------------------------------

    def stream(
        self, request: Mapping[str, object], *, relay: Relay | None = None, **ignored: object
    ) -> Iterator[StreamChunk]:
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
                - ``"maxTokens"`` (int): sent as ``max_tokens``.
                - ``"model"``: sent unless the model was given to the constructor.
                - every other key (``tool_choice``, ``response_format``, ``seed``,
                  ``stop``, ``top_p``, ``stream_options``, ...) is sent as it is;
                  ``stream_options`` defaults to ``{"include_usage": true}``.
            relay: Set by the model endpoint while recording: the HTTP call to forward
                to the provider as it is (the recording proxy); its answer goes back
                through ``relay`` byte for byte, and ``request`` is only read for logging.
            **ignored: Accepted and ignored (``session_id``, ``parent_session_id``,
                ``turn``, ``step``, ...;
                [docs/recording.md#live-model-calls](../recording.md#live-model-calls)).

        Returns:
            An iterator of new chunk dicts
            ([docs/format.md#stream-chunks](../format.md#stream-chunks)): blocks, then
            ``usage`` when the provider reports it (``inputTokens`` excludes cached input,
            which is ``cacheReadTokens``; ``reasoningTokens`` when reported), then one
            ``finish``: ``stop``; ``tool-calls`` (also for ``stop`` with tool calls);
            ``max-tokens`` for ``length``; otherwise ``error`` with an LlmFailure
            ``{"message", "code", "status"?, "providerRetryAfterMs"?, "requestId"?}``,
            ``code`` being ``AUTH`` (401/403), ``RATE_LIMIT`` (429),
            ``CONTEXT_WINDOW_EXCEEDED`` (400/413 about the context length), ``OVERLOADED``
            (503/529, DeepSeek's ``insufficient_system_resource``), ``NETWORK`` (connection
            failure or timeout; no ``status``), ``EMPTY_RESPONSE`` (no text, reasoning or
            tool call), ``CONTENT_FILTER`` (``content_filter``) or ``UNKNOWN``. Reading it
            never raises for a failed call: chunks already yielded stay, the error
            ``finish`` comes last, and blocks left open by a failure get no ``block-end``.

        Raises:
            TypeError: ``request`` is not a mapping.
            ValueError: ``request`` does not have the shape above (nothing is sent).
        """
        if relay is not None:
            return self._proxy(relay)
        return self._run(self._params(request))

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        """`stream` with the call's options as one value (the recorder's call).

        ``options.relay`` is the recording proxy's HTTP call; the rest is ignored.

        Raises:
            TypeError: As `stream`; also when ``options.relay`` is not the model
                endpoint's relay.
        """
        relay = options.relay
        if relay is None:
            return self._run(self._params(request))
        if not isinstance(relay, Relay):
            raise TypeError(f"options.relay must be a Relay, got {type(relay).__name__}")
        return self._proxy(relay)

    def _proxy(self, relay: Relay) -> Iterator[StreamChunk]:
        with self._lock:
            if self._proxy_client is None:
                from .._wire.base import httpx_module

                self._proxy_client = httpx_module().Client()
            client = self._proxy_client
        base_url = self._upstream_bases.get(relay.wire.name, self.base_url)
        return proxy_stream(
            relay,
            client=client,
            base_url=base_url,
            api_key=self._api_key,
            model=self.model,
            timeout=self.timeout,
            on_network_error=self._network_failure,
            redactor=self._redactor,
        )

    def astream(
        self, request: Mapping[str, object], **ignored: object
    ) -> AsyncIterator[StreamChunk]:
        """Make one streaming call with ``openai.AsyncOpenAI``; the async form of `stream`.

        Each call uses its own async client, closed when the iterator ends, so the model
        works across event loops (one ``asyncio.run`` per test).

        Args:
            request: As for `stream`.
            **ignored: Accepted and ignored.

        Returns:
            An async iterator of the same chunks `stream` yields.

        Raises:
            TypeError: ``request`` is not a mapping.
            ValueError: ``request`` is malformed (nothing is sent).
        """
        return self._arun(self._params(request))

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        """`astream` with the call's options as one value (they are ignored)."""
        return self._arun(self._params(request))

    # --- the HTTP side -----------------------------------------------------------------

    def _client_options(self) -> dict[str, Any]:
        base_url, query = split_query(self.base_url)
        options: dict[str, Any] = {
            "base_url": base_url,
            "api_key": self._api_key,
            "timeout": self.timeout,
            "max_retries": 0,
        }
        if query:
            options["default_query"] = query  # the SDK appends paths to the base URL's path
        return options

    def _sync_client(self) -> OpenAI:
        with self._lock:
            if self._client is None:
                self._client = self._openai.OpenAI(**self._client_options())
            return self._client

    def _run(self, params: dict[str, Any]) -> Iterator[StreamChunk]:
        mapper = _Mapper()
        try:
            stream = self._sync_client().chat.completions.create(**params)
        except Exception as error:
            yield mapper.failed(self._failure(error))
            return
        with stream:
            if _is_json(stream):  # one JSON object for a stream: an error body, say
                yield from self._whole(stream.response.read(), stream)
                return
            while True:
                try:
                    chunk = next(stream)
                except StopIteration:
                    break
                except Exception as error:
                    yield mapper.failed(self._failure(error, answering=True))
                    return
                yield from mapper.feed(chunk)
        yield from mapper.end()

    async def _arun(self, params: dict[str, Any]) -> AsyncIterator[StreamChunk]:
        mapper = _Mapper()
        async with self._openai.AsyncOpenAI(**self._client_options()) as client:
            try:
                stream = await client.chat.completions.create(**params)
            except Exception as error:
                yield mapper.failed(self._failure(error))
                return
            async with stream:
                if _is_json(stream):
                    for out in self._whole(await stream.response.aread(), stream):
                        yield out
                    return
                while True:
                    try:
                        chunk = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                    except Exception as error:
                        yield mapper.failed(self._failure(error, answering=True))
                        return
                    for out in mapper.feed(chunk):
                        yield out
        for out in mapper.end():
            yield out

    def _whole(self, raw: bytes, stream: Any) -> list[StreamChunk]:
        """The chunks of an answer that is one JSON object where a stream was asked for."""
        headers = {k.lower(): v for k, v in stream.response.headers.items()}
        return decoded_whole(OPENAI_WIRE, raw, headers, self._redactor)

    def _params(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(request, Mapping):
            raise TypeError(
                f"stream(request) takes a mapping with 'messages', got {type(request).__name__}"
            )
        model = self.model if self.model is not None else request.get("model")
        if not isinstance(model, str) or not model:
            raise ValueError(
                "the request names no model: put 'model' in the request, or set "
                "DSH_RECORD_MODEL (OpenAICompatibleModel(model=...)) to choose one"
            )
        params: dict[str, Any] = {"model": model, "messages": _messages(request), "stream": True}
        tools = request.get("tools")
        if tools:
            params["tools"] = _tools(tools)
        extra = {k: v for k, v in request.items() if k not in _CONVERTED}
        if "maxTokens" in request and "max_tokens" not in extra:
            extra["max_tokens"] = request["maxTokens"]
        extra.setdefault("stream_options", {"include_usage": True})
        extra.update(self.extra_body)
        params["extra_body"] = extra
        return params

    def _failure(self, error: Exception, *, answering: bool = False) -> FailureRecord:
        """The failure of a call that raised ``error`` (``answering``: once it streamed).

        A read that timed out once the answer started is the answer stalling
        (``TIMEOUT``), as in the recording proxy
        ([docs/limits.md#upstream-idle](../limits.md#upstream-idle)).
        """
        redactor = self._redactor
        if answering and (_is_read_timeout(error) or _is_read_timeout(error.__cause__)):
            return stalled(shown_url(self.base_url, redactor), self.timeout, redactor)
        failure = _failure_of(error, self._openai)
        failure["message"] = redactor.redact_text(str(failure["message"]))
        if failure["code"] == "NETWORK":
            where = shown_url(self.base_url, redactor)
            detail = failure["message"]
            if _is_read_timeout(error) or _is_read_timeout(error.__cause__):
                detail = (
                    f"it did not start its answer within {self.timeout:g} s (the idle "
                    "timeout, DSH_RECORD_TIMEOUT; docs/limits.md#upstream-idle)"
                )
            failure["message"] = f"cannot reach the live model at {where}: {detail}"
            self._network_failure(failure["message"])
        return failure


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """A base URL without its query string, and that query's parameters.

    The SDK joins request paths to the base URL as text, so a query in it would end up
    before the path (``/v1?api-version=1chat/completions``); given apart, the SDK sends
    it with every request (``/v1/chat/completions?api-version=1``), as the recording
    proxy does ([docs/recording.md#recording-secrets](../recording.md#recording-secrets)).

    Args:
        url: A base URL, with or without a query string (``https://h/v1?api-version=1``).

    Returns:
        The URL without its query and fragment, and the query's parameters in order
        (blank values kept).

    Raises:
        ValueError: The query repeats a parameter (the SDK would send it as ``name[]``);
            the message names it.
    """
    from urllib.parse import parse_qsl, urlsplit, urlunsplit

    parts = urlsplit(url)
    query: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in query:
            raise ValueError(
                f"the base URL's query string repeats the parameter {name!r}, which the "
                "openai SDK cannot send as it is; give it once"
            )
        query[name] = value
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), query


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


# --- failures --------------------------------------------------------------------------


def _is_json(stream: Any) -> bool:
    """Whether an SDK stream's answer is one JSON object (``application/json``), not events."""
    return "json" in stream.response.headers.get("content-type", "")


class _Mapper(OpenAIDecoder):
    """The decoder over the SDK's chunk objects."""

    def feed(self, chunk: Any) -> list[StreamChunk]:
        return super().feed(chunk if isinstance(chunk, Mapping) else chunk.to_dict())


def _failure_of(error: Exception, openai: Any) -> FailureRecord:
    """The LlmFailure for an exception raised by the client.

    See [docs/format.md#stream-chunks](../format.md#stream-chunks).
    """
    if isinstance(error, openai.APIStatusError):
        status = int(error.status_code)
        headers = {k.lower(): v for k, v in error.response.headers.items()}
        failure = openai_failure(status, error.body, headers, message=_status_message(error))
        request_id = getattr(error, "request_id", None)
        if isinstance(request_id, str) and request_id:
            failure["requestId"] = request_id
        return failure
    if isinstance(error, openai.APIConnectionError) or _is_network_error(error):
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
