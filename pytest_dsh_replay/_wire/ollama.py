"""dsh stream chunks <-> the Ollama chat wire (``POST /api/chat``, the ``ollama`` client).

The native API of a local Ollama server (``http://127.0.0.1:11434``), which the
``ollama`` Python client speaks. See [docs/wires.md#ollama](../wires.md#ollama).

- `ollama_request` reads an ``/api/chat`` body (``model``, ``messages`` with
  ``tool_calls``, ``thinking``, ``images`` and ``tool_name``, ``tools``, ``stream``,
  ``options``) into the in-process shape (chat-completions messages). ``stream`` is
  ``true`` unless the body says ``false``, as Ollama's default is.
- `OllamaEncoder` turns the chunks of one replayed call into newline-delimited JSON
  (`NDJSON`, ``application/x-ndjson``): one ``{"model", "created_at", "message":
  {"role": "assistant", "content", "thinking"?, "tool_calls"?}, "done": false}`` line per
  delta, then ``{"done": true, "done_reason", ...counts}``. `ollama_response` is the
  whole (``"stream": false``) object.
- `OllamaDecoder` maps a live server's lines back to dsh chunks, for recording;
  `ollama_failure` classifies an HTTP error (``{"error": "<message>"}``) or an error
  line in the stream.

Tool calls are whole objects: ``{"function": {"name", "arguments": {...}}}``, the
arguments a JSON object (not text), one line when the call's block ends. The ``ollama``
client (0.6) keeps no id on a tool call and sends none back, and a tool result names
only its tool (``{"role": "tool", "tool_name", "content"}``); newer servers add an
``id`` that newer clients may keep. So on this wire a call is always named by its
content, as a Gemini call without an id is (`call_id_for`: ``call_<name>_<8 hex of
the sorted-keys arguments>``, ``_2``... for a repeat in one answer), whatever id a
server or a client gives it: the encoder sends that ``id``, the decoder records it, and
a request reads it back. A tool message answers the call its ``tool_call_id`` names (an
id the client kept, read as the content id of that call), else the first call of its
``tool_name`` not answered yet, else the first call not answered yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Final

import orjson

from .._format.events import JSONObject, StreamChunk
from .._format.reply import assemble_reply
from .base import (
    BaseWire,
    Failure,
    History,
    InProcess,
    WireError,
    copy_settings,
    delta_run,
    failure_message,
    failure_record,
    failure_status,
    import_sdk,
    int_field,
    status_code,
    wire_error,
)
from .framing import NDJSON, Frame
from .gemini import call_id_for
from .held_calls import HeldCall, HeldCallsEncoder, WholeCallsDecoder
from .shapes import FailureRecord, Usage

__all__ = [
    "CREATED_AT",
    "WIRE",
    "OllamaDecoder",
    "OllamaEncoder",
    "OllamaWire",
    "ollama_error",
    "ollama_failure",
    "ollama_refusal",
    "ollama_request",
    "ollama_response",
]

CREATED_AT: Final = "1970-01-01T00:00:00Z"
"""The ``created_at`` (and a listed model's ``modified_at``) of every replayed answer."""

_OPTIONS: Final = (
    ("num_predict", "max_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("seed", "seed"),
    ("stop", "stop"),
)
"""Ollama ``options`` read into the in-process request: (Ollama's name, its name there)."""


_CONTENT_END: Final = b'},"done":false}\n'
"""What follows a text delta's ``content`` on its line."""


def _sorted_json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _args_object(arguments: object) -> JSONObject:
    """A tool call's arguments as a JSON object: parsed from text (``{}`` when not one)."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        parsed = orjson.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except orjson.JSONDecodeError:
        parsed = {}
    return parsed if isinstance(parsed, dict) else {}


def _usage_counts(usage: Usage | None) -> JSONObject:
    """A dsh usage as Ollama's counts (durations 0: a replay takes no time)."""
    prompt = output = 0
    if usage is not None:
        prompt = (int_field(usage.get("inputTokens")) or 0) + (
            int_field(usage.get("cacheWriteTokens")) or 0
        )
        output = int_field(usage.get("outputTokens")) or 0
    return {
        "total_duration": 0,
        "load_duration": 0,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": 0,
        "eval_count": output,
        "eval_duration": 0,
    }


def _done_reason(reason: Mapping[str, object]) -> str:
    """``length`` for ``max-tokens``, else ``stop`` (tool calls too, as Ollama says)."""
    return "length" if reason.get("kind") == "max-tokens" else "stop"


class OllamaEncoder(HeldCallsEncoder):
    """Encodes the chunks of one call as Ollama's NDJSON lines.

    ``text-delta`` is a line whose ``message.content`` is the text, ``reasoning-delta``
    one whose ``message.thinking`` is (``content`` empty), a tool call one line with a
    ``message.tool_calls`` entry when its block ends (or at the finish, when it never
    ended). ``usage`` is held for the last line (``done: true``), which carries
    ``done_reason`` (``stop``; ``length`` for ``max-tokens``), ``prompt_eval_count``
    (input plus cache-write tokens), ``eval_count`` (output tokens) and durations of 0.

    Args:
        model: Every line's ``model`` (the request's).
    """

    def __init__(self, *, model: str):
        super().__init__()
        head = b'{"model":' + orjson.dumps(model) + b',"created_at":"' + CREATED_AT.encode()
        self._head = head + b'","message":{"role":"assistant","content":'
        self._model = model
        self._seen: dict[str, int] = {}

    def marks(self) -> list[str]:
        """The answer's text and sorted tool call ids so far (the ids the client saw)."""
        return ["".join(self._text), *sorted(t.id for t in self._tools.values() if t.sent)]

    def start(self) -> bytes:
        """Nothing: an Ollama stream has no opening line."""
        return b""

    def _content(self, text: str) -> bytes:
        return self._head + orjson.dumps(text) + _CONTENT_END

    def _line(self, message: JSONObject) -> bytes:
        body = {"role": "assistant", "content": "", **message}
        line = {"model": self._model, "created_at": CREATED_AT, "message": body, "done": False}
        return orjson.dumps(line) + b"\n"

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        """The lines of ``chunks`` in order (`feed` of each; a run of text deltas at once)."""
        out: list[bytes] = []
        head = self._head
        dumps = orjson.dumps
        i, count = 0, len(chunks)
        while i < count:
            chunk = chunks[i]
            if chunk.get("type") == "text-delta":
                index = chunk.get("index", 0)
                run = delta_run(chunks, i, "text-delta", index)
                if run:
                    self._texts.setdefault(index, []).extend(run)
                    self._text.extend(run)
                    for text in run:
                        out += (head, dumps(text), _CONTENT_END)
                    i += len(run)
                    continue
            out.append(self.feed(chunk))
            i += 1
        return b"".join(out)

    def _text_event(self, text: str, reasoning: bool) -> bytes:
        """A line whose ``message.content`` (``message.thinking`` for reasoning) is ``text``."""
        return self._line({"thinking": text}) if reasoning else self._content(text)

    def _call_event(self, call: HeldCall) -> bytes:
        """A line whose ``message.tool_calls`` is the call."""
        return self._line({"tool_calls": [self._tool_call(call, 0)]})

    def _tool_call(self, tool: HeldCall, position: int) -> JSONObject:
        tool.sent = True
        args = _args_object("".join(tool.args))
        tool.id = call_id_for(tool.name, args, self._seen)
        function = {"index": position, "name": tool.name, "arguments": args}
        return {"id": tool.id, "function": function}

    def finish(self, reason: Mapping[str, object]) -> bytes:
        """The last line (after a line of the tool calls not sent yet): ``done: true``."""
        unsent = self.unsent()
        out = b""
        if unsent:
            calls = [self._tool_call(tool, n) for n, tool in enumerate(unsent)]
            out = self._line({"tool_calls": calls})
        last: JSONObject = {
            "model": self._model,
            "created_at": CREATED_AT,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": _done_reason(reason),
            **_usage_counts(self._usage),
        }
        return out + orjson.dumps(last) + b"\n"

    def failure_event(self, failure: Failure) -> bytes:
        """A recorded failure after content: an ``{"error": "<message>"}`` line."""
        return orjson.dumps({"error": failure_message(failure)}) + b"\n"

    def replay_error_event(self, message: str) -> bytes:
        """A replay error mid-stream: an ``{"error": "<message>"}`` line."""
        return orjson.dumps({"error": message}) + b"\n"


def ollama_response(chunks: list[StreamChunk], *, model: str) -> JSONObject:
    """The whole (``"stream": false``) ``/api/chat`` answer of a call's chunks.

    ``message.content`` is the text joined, ``message.thinking`` the reasoning joined
    (when there is any), ``message.tool_calls`` each call (ids as the stream gives them);
    ``done: true`` with ``done_reason`` and the counts of the stream's last line.
    """
    reply = assemble_reply(chunks)
    texts = [str(b.get("text", "")) for b in reply.content if b.get("type") == "text"]
    thoughts = [str(b.get("text", "")) for b in reply.content if b.get("type") == "reasoning"]
    message: JSONObject = {"role": "assistant", "content": "".join(texts)}
    if any(thoughts):
        message["thinking"] = "".join(thoughts)
    seen: dict[str, int] = {}
    calls: list[JSONObject] = []
    for position, block in enumerate(reply.tool_calls):
        name = str(block.get("name") or "")
        args = _args_object(block.get("arguments"))
        function = {"index": position, "name": name, "arguments": args}
        calls.append({"id": call_id_for(name, args, seen), "function": function})
    if calls:
        message["tool_calls"] = calls
    return {
        "model": model,
        "created_at": CREATED_AT,
        "message": message,
        "done": True,
        "done_reason": _done_reason(reply.finish or {"kind": "stop"}),
        **_usage_counts(reply.usage),
    }


def ollama_error(failure: Failure) -> WireError:
    """The HTTP error Ollama answers for a recorded failure: ``{"error": "<message>"}``.

    The status comes from `failure_status` (503 for ``OVERLOADED``), with the
    failure's ``retry-after`` and request id headers.
    """
    status = failure_status(failure, overloaded=503)
    return wire_error(failure, status, {"error": failure_message(failure)})


def ollama_refusal(status: int, message: str, *, param: str | None = None) -> WireError:
    """Ollama's error for a refused request: ``{"error": "<message>"}`` (no ``param``)."""
    return wire_error({}, status, {"error": message})


# --- reading a request: an /api/chat body -> the in-process shape ----------------------------


class _Calls:
    """The tool calls of a request's assistant messages not answered yet, and their ids."""

    def __init__(self) -> None:
        self.open: list[tuple[str, str]] = []  # (name, content id), in order
        self.aliases: dict[str, str] = {}  # an id the client kept -> the content id

    def answered(self, message: Mapping[str, object]) -> str:
        """The call a tool message answers (see the module docstring); no longer open."""
        given = message.get("tool_call_id")
        if isinstance(given, str) and given:
            call_id = self.aliases.get(given, given)
            for position, (_, open_id) in enumerate(self.open):
                if open_id == call_id:
                    del self.open[position]
                    break
            return call_id
        name = message.get("tool_name")
        for position, (call_name, call_id) in enumerate(self.open):
            if call_name == name:
                del self.open[position]
                return call_id
        if self.open:
            return self.open.pop(0)[1]
        return f"call_{name or 'tool'}"


def _assistant(message: Mapping[str, object], open_calls: _Calls) -> JSONObject:
    """An assistant message; its tool calls are added to ``open_calls``."""
    content = message.get("content")
    out: JSONObject = {"role": "assistant", "content": content if content else None}
    thinking = message.get("thinking")
    if isinstance(thinking, str) and thinking:
        out["reasoning_content"] = thinking
    calls: list[JSONObject] = []
    seen: dict[str, int] = {}
    tool_calls = message.get("tool_calls")
    for call in tool_calls if isinstance(tool_calls, list) else []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        name = str(function.get("name") or "")
        args = _args_object(function.get("arguments"))
        call_id = call_id_for(name, args, seen)
        given = call.get("id") if isinstance(call, Mapping) else None
        if isinstance(given, str) and given:
            open_calls.aliases[given] = call_id
        open_calls.open.append((name, call_id))
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": _sorted_json(args)},
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def _user(message: Mapping[str, object]) -> JSONObject:
    """A user (or system) message; ``images`` become ``image`` blocks after the text."""
    role = str(message.get("role"))
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    images = message.get("images")
    if not isinstance(images, list) or not images:
        return {"role": role, "content": text}
    blocks: list[JSONObject] = [{"type": "text", "text": text}] if text else []
    blocks.extend({"type": "image", "image": image} for image in images)
    return {"role": role, "content": blocks}


def ollama_request(body: Mapping[str, object]) -> JSONObject:
    """An ``/api/chat`` body read into the in-process shape.

    Args:
        body: The parsed body (never changed).

    Returns:
        ``{"messages", "model"?, "stream", "tools"?, "max_tokens"?, "temperature"?,
        "top_p"?, "seed"?, "stop"?}``: ``system`` and ``user`` messages as they are
        (``images`` as ``image`` blocks after the text); an ``assistant`` message's
        ``thinking`` as ``reasoning_content`` and its ``tool_calls`` as chat-completions
        calls with sorted-keys ``arguments`` text and the ids of the module docstring;
        a ``tool`` message with the ``tool_call_id`` it answers; ``stream`` ``false``
        only when the body says so; ``tools`` as they are (OpenAI's shape);
        ``options.num_predict`` as ``max_tokens`` and ``temperature``, ``top_p``,
        ``seed``, ``stop`` from ``options``. ``think``, ``format`` and ``keep_alive``
        are not read.
    """
    messages: list[JSONObject] = []
    open_calls = _Calls()
    found = body.get("messages")
    for message in found if isinstance(found, list) else []:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "assistant":
            messages.append(_assistant(message, open_calls))
        elif role == "tool":
            content = message.get("content")
            call_id = open_calls.answered(message)
            text = content if isinstance(content, str) else ""
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            messages.append(_user(message))
    out: JSONObject = {"messages": messages}
    if isinstance(body.get("model"), str):
        out["model"] = body["model"]
    out["stream"] = body.get("stream") is not False
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        out["tools"] = tools
    copy_settings(body.get("options"), _OPTIONS, out)
    return out


# --- decoding: a live server's lines -> dsh chunks -----------------------------------------


def _error(message: str, code: str) -> JSONObject:
    return {"kind": "error", "failure": {"message": message, "code": code}}


def dsh_usage(line: Mapping[str, object]) -> Usage | None:
    """The counts of a ``done`` line as a dsh ``usage`` (``None`` when it has none).

    ``inputTokens`` is ``prompt_eval_count``, ``outputTokens`` ``eval_count``.
    """
    prompt = int_field(line.get("prompt_eval_count"))
    output = int_field(line.get("eval_count"))
    if prompt is None and output is None:
        return None
    return {"inputTokens": prompt or 0, "outputTokens": output or 0}


class OllamaDecoder(WholeCallsDecoder):
    """Turns ``/api/chat`` lines (parsed JSON) into dsh chunks; one per call.

    Block indexes count from 0 in order of appearance. Consecutive ``content`` (or
    ``thinking``) text continues one ``text`` (or ``reasoning``) block; each
    ``tool_calls`` entry is a whole ``tool-call`` block: ``block-start``, one
    ``tool-call-delta`` with the content id (`call_id_for`; an ``id`` the server gave
    is not kept, see the module docstring), the name and
    the sorted-keys arguments, ``block-end``. The ``done: true`` line closes the open
    block and gives ``usage`` (`dsh_usage`) and the ``finish``: ``done_reason``
    ``stop`` is ``stop``, or ``tool-calls`` after tool calls; ``length`` is
    ``max-tokens``; no content at all fails with ``EMPTY_RESPONSE``, any other reason
    with ``UNKNOWN``, and so does a stream that ends without ``done``.
    """

    response_id: str | None = None
    """Always ``None``: Ollama's answers have no id."""

    def feed(self, event: Mapping[str, object]) -> list[StreamChunk]:
        """The dsh chunks for one line."""
        out: list[StreamChunk] = []
        if self._done:
            return out
        message = event.get("message")
        if isinstance(message, Mapping):
            self._message(message, out)
        if event.get("done") is True:
            out.extend(self._finish(event))
        return out

    def _message(self, message: Mapping[str, object], out: list[StreamChunk]) -> None:
        for kind, key in (("reasoning", "thinking"), ("text", "content")):
            text = message.get(key)
            if isinstance(text, str) and text:
                self._delta(kind, text, out)
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                self._tool_call(function, out)

    def _tool_call(self, function: Mapping[str, object], out: list[StreamChunk]) -> None:
        name = str(function.get("name") or "")
        args = _args_object(function.get("arguments"))
        call_id = call_id_for(name, args, self._seen)  # a given id is not kept
        self._whole_call(call_id, name, _sorted_json(args), out)

    def end(self) -> list[StreamChunk]:
        """The closing chunks when the stream ended without a ``done`` line."""
        if self._done:
            return []
        out: list[StreamChunk] = []
        self._close(out)
        out.append({"type": "finish", "reason": _error("the stream ended before done", "UNKNOWN")})
        self._done = True
        return out

    def _finish(self, line: Mapping[str, object]) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        self._close(out)
        usage = dsh_usage(line)
        if usage is not None:
            out.append({"type": "usage", "usage": usage})
        out.append({"type": "finish", "reason": self._reason(line.get("done_reason"))})
        self._done = True
        return out

    def _reason(self, done_reason: object) -> JSONObject:
        if not self._produced:
            return _error(
                f"the model returned no text, thinking or tool call (done_reason {done_reason})",
                "EMPTY_RESPONSE",
            )
        if done_reason in ("stop", None, ""):
            return {"kind": "tool-calls"} if self._calls else {"kind": "stop"}
        if done_reason == "length":
            return {"kind": "max-tokens"}
        return _error(f"the model stopped with done_reason {done_reason}", "UNKNOWN")


def decode_response(answer: Mapping[str, object]) -> list[StreamChunk]:
    """The chunks of a whole ``/api/chat`` answer (an ``{"error"}`` body: its failure)."""
    decoder = OllamaDecoder()
    if "error" in answer and "message" not in answer:
        return [decoder.failed(ollama_failure(None, answer, {}))]
    return decoder.feed(answer) + decoder.end()


def ollama_failure(status: int | None, body: object, headers: Mapping[str, str]) -> FailureRecord:
    """The dsh failure for an Ollama error (an HTTP error, or an error line in the stream).

    Args:
        status: The HTTP status; ``None`` for an error line in the stream.
        body: The parsed body (``{"error": "<message>"}``), or anything else when it was
            not JSON.
        headers: The response headers (lower-case names): ``retry-after(-ms)`` becomes
            ``providerRetryAfterMs``, ``x-request-id`` becomes ``requestId``.

    Returns:
        ``{"message", "code", "status"?, ...}``; ``code`` is ``AUTH`` (401, 403),
        ``RATE_LIMIT`` (429), ``OVERLOADED`` (503), ``CONTEXT_WINDOW_EXCEEDED`` (400 or
        413 about the context length), else ``UNKNOWN``.
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):  # an OpenAI-style body from a proxy in front
        error = error.get("message")
    text = error if isinstance(error, str) and error else f"Ollama request failed ({status})"
    return failure_record(text, status_code(status, text), status, headers)


def _httpx() -> ModuleType:
    """Plain ``httpx``, which the ``ollama`` client is built on."""
    return import_sdk("httpx")


class OllamaWire(BaseWire):
    """The Ollama chat wire (``POST /api/chat``, ``GET /api/tags``)."""

    name = "ollama"
    routes = ("/api/chat",)
    list_routes = ("/api/tags",)
    framing = NDJSON
    call_id_prefix = "dsh-replay-ollama-"
    record_base_url_variable = "DSH_RECORD_OLLAMA_BASE_URL"

    refusal = staticmethod(ollama_refusal)
    error = staticmethod(ollama_error)
    decoder = OllamaDecoder
    decode_whole = staticmethod(decode_response)
    failure = staticmethod(ollama_failure)

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """See `ollama_request`.

        Raises:
            BadRequest: ``messages`` or ``tools`` is not an array of objects (400).
        """
        super().canonical(body, path=path, history=history)
        return ollama_request(body)

    def model_list(self, names: list[str]) -> JSONObject:
        """``{"models": [{"name", "model", "modified_at", "size", "digest", "details"}]}``."""
        details = {
            "parent_model": "",
            "format": "gguf",
            "family": "",
            "families": None,
            "parameter_size": "",
            "quantization_level": "",
        }
        return {
            "models": [
                {
                    "name": name,
                    "model": name,
                    "modified_at": CREATED_AT,
                    "size": 0,
                    "digest": "",
                    "details": details,
                }
                for name in names
            ]
        }

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> OllamaEncoder:
        """An encoder (the call id and ``replay_state`` are not on this wire)."""
        return OllamaEncoder(model=model)

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """See `ollama_response`."""
        return ollama_response(chunks, model=model)

    def stream_failure(self, event: Mapping[str, object]) -> FailureRecord | None:
        """An ``{"error": ...}`` line in the stream: `ollama_failure` of it."""
        if "error" not in event:
            return None
        return ollama_failure(None, event, {})

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        """The ``"done": true`` line ends the answer."""
        return event is not None and event.get("done") is True

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``OLLAMA_HOST`` (the root), which the ``ollama`` client reads."""
        return {"OLLAMA_HOST": root}

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """An ``ollama.Client`` (``ollama.AsyncClient``) on the endpoint in process.

        The client's ``httpx`` client gets the endpoint's transport (nothing goes to the
        network); the ``ollama`` client never retries.

        Args:
            http: The endpoint's in-process transports.
            options: Passed to the client's constructor (``headers``, ``timeout``, ...;
                ``host`` and ``transport`` are the endpoint's).
            asynchronous: The async client.

        Raises:
            DshReplayError: ``ollama`` is not installed.
        """
        ollama = import_sdk("ollama")
        cls = ollama.AsyncClient if asynchronous else ollama.Client
        options["host"] = http.url
        options["transport"] = http.transport(asynchronous, _httpx())
        return cls(**options)


WIRE: Final = OllamaWire()
"""The Ollama chat wire."""
