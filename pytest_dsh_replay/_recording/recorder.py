"""Recording: a model wrapper that logs each call's conversation into the calling session.

[`RecordingModel`][pytest_dsh_replay.RecordingModel] has the interface of
[`ReplayModel`][pytest_dsh_replay.ReplayModel] (``stream`` / ``astream``). It passes each
call to another model (the live model in record mode, a replay model in replay mode) and
logs, in the calling session of a session store, what the harness logs for a model call, so
a recording is a faithful dsh session and a replay that asks something else shows as a
different log:

- the request's system prompt, tools and model settings as a ``request/header``
  (``reason: "initial"``, then ``"change"`` whenever they change);
- each message of the request the session's log does not hold yet (``user/message``,
  ``tool/result``, ``assistant/message``), in order; what the code under test logged
  itself is not repeated;
- every chunk the caller receives as an ``assistant/chunk`` event, before it is
  yielded, so the log derives back into exactly those chunks;
- in a turn the recorder runs (the code under test opened none): ``turn/start``,
  ``step/start``, the assembled ``assistant/message``, a ``tool/call`` per requested
  tool call, ``step/end`` and ``turn/end`` as the harness brackets them. A call whose
  new messages are only tool results continues the turn in its next step; a call that
  repeats the request after a failed one retries in the same step.

A stream that raises is logged as a call ending in an error ``finish`` and the error is
re-raised. A stream the caller stops reading (closing it, breaking out of ``async for``
without ``aclose()``, or keeping a generator open while the session makes its next
call) ends with what the caller received and an ``aborted`` finish, as the harness logs
a cancelled stream, so the recording replays.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson

from .._errors import RecordingError
from .._format.events import Event, JSONObject, SessionHeader, StreamChunk
from .._format.json_values import describe_json, plain_json
from .._format.reply import Reply, assemble_reply
from .._format.text import TextSafeModel
from .._format.vocabulary import chunk_problem
from .._identity.faults import FaultQueue, afault_stream, fault_stream
from .._identity.lineage import Lineage, completed_turns_end, fork_seed_length
from .._identity.options import CallOptions, OptionsModel, Request, Waitable, options_model
from .._identity.surface import apply_surface, surface_item
from .._scripts.entries import MAX_CHUNK_NESTING, ChunksEntry, EntryRun
from .._store.log_rules import completed_turn_prefix
from .._wire.request import ASSISTANT, TOOL_RESULT, USER, Conversation, Item, RequestView

if TYPE_CHECKING:
    import asyncio

    from .._store.session import ChunkRun, Session
    from .._store.store import SessionStore

__all__ = [
    "RECORDED_CHUNK_NESTING",
    "LiveModel",
    "RecordingModel",
    "child_meta",
    "failure_finish",
    "live_chunk_problem",
]


class LiveModel(Protocol):
    """What the recorder needs of a model: ``stream`` (and ``astream`` for async callers).

    The keyword arguments ``stream`` gets are
    [docs/recording.md#live-model-calls](../recording.md#live-model-calls)'s; a model of
    this package (`OptionsModel`) gets the call's `CallOptions` instead.
    """

    def stream(self, request: Request, /, **kwargs: object) -> Iterable[StreamChunk]:
        """Stream the chunks of one call."""


def failure_finish(error: BaseException, *, kind: str = "error") -> StreamChunk:
    """The terminal ``finish`` chunk that stands for a failed stream.

    Args:
        error: The exception the stream raised. Its ``code`` attribute (a string) is
            used when present, else ``UNKNOWN``; an integer ``status`` or
            ``status_code`` in 100..599 is kept as ``status``.
        kind: ``"error"`` or ``"aborted"``.

    Returns:
        ``{"type": "finish", "reason": {"kind", "failure": {"message", "code", "status"?}}}``.
    """
    code = getattr(error, "code", None)
    message = str(error) or type(error).__name__
    failure: dict[str, object] = {
        "message": message,
        "code": code if isinstance(code, str) and code else "UNKNOWN",
    }
    status = getattr(error, "status", getattr(error, "status_code", None))
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        failure["status"] = status
    return {"type": "finish", "reason": {"kind": kind, "failure": failure}}


_ABANDONED: Final[StreamChunk] = {
    "type": "finish",
    "reason": {
        "kind": "aborted",
        "failure": {"message": "the caller stopped reading the stream", "code": "ABORTED"},
    },
}


def _stop_chunk(error: BaseException | None) -> StreamChunk:
    """The finish logged for a stream that stopped early: an error, or the caller left."""
    return failure_finish(error) if isinstance(error, Exception) else dict(_ABANDONED)


RECORDED_CHUNK_NESTING: Final = MAX_CHUNK_NESTING - 2
"""The deepest nesting of arrays and objects a live model's chunk may have to be recorded.

Two levels below [`MAX_CHUNK_NESTING`][pytest_dsh_replay.MAX_CHUNK_NESTING]: a log keeps a
``finish``'s ``replayState`` and a ``block-end``'s block once more, inside the ``assistant/message``
event, deeper than in the chunk's own event, and the serializer stops at 255 levels
([docs/limits.md#recorded-chunks](../limits.md#recorded-chunks))."""


def live_chunk_problem(chunk: object) -> str | None:
    """What a recording's loader would refuse in a live model's chunk, if anything.

    The loader's rules for a stream chunk (`chunk_problem`:
    a known type with exactly its fields, each of its kind) and its nesting (at most
    [`RECORDED_CHUNK_NESTING`][pytest_dsh_replay.RECORDED_CHUNK_NESTING] levels).

    Returns:
        ``None`` when the chunk can be recorded and replayed; else the loader's sentence
        (naming the chunk type, the field and what was expected).
    """
    if chunk.__class__ is not dict or not isinstance(chunk, dict):
        return f"a stream chunk must be an object, got {describe_json(chunk)}"
    problem = chunk_problem(chunk)
    if problem is not None or chunk["type"] not in _NESTING:
        return problem
    try:
        orjson.dumps([[[chunk]]])  # as deep as the log's events hold it
    except TypeError as err:
        if "ecursion" in str(err):
            return (
                f"{_named(chunk)} nests too deep to be stored ({err}): a recorded chunk may "
                f"nest at most {RECORDED_CHUNK_NESTING} levels of arrays and objects"
            )
    return None


_NESTING: Final = frozenset({"block-end", "finish"})  # the chunks whose fields may nest


def _named(chunk: Mapping[str, object]) -> str:
    """``a text-delta chunk`` (``a stream chunk`` when its type is no string)."""
    kind = chunk.get("type")
    return f"a {kind} chunk" if kind.__class__ is str else "a stream chunk"


_OPEN: Final = "open"
_FINISHED: Final = "finished"
_CLOSED: Final = "closed"


class _SessionLog:
    """What the recorder knows of one session's log (kept current by `scan`)."""

    __slots__ = (
        "calls",
        "failure",
        "followed",
        "header",
        "last",
        "open_turn",
        "own_starts",
        "own_turn",
        "pending",
        "scanned",
        "session",
        "step",
        "step_open",
        "surface",
        "turn",
    )

    def __init__(self, session: Session):
        self.session = session
        self.scanned = 0
        self.surface: list[tuple[int, Item]] = []  # the model-visible conversation
        self.header: object = None  # the last request/header's header
        self.turn = 0  # the highest turn number seen
        self.open_turn = False
        self.own_turn = False  # the open turn is the recorder's
        self.own_starts: set[int] = set()  # seqs of the recorder's turn/start events
        self.step = 0
        self.step_open = False
        self.calls: dict[str, int] = {}  # tool call id -> its tool/call seq
        self.pending: _Call | None = None  # the last call
        self.last: str | None = None  # the finish kind of the last call of the open turn
        self.failure: object = None  # the last error finish's failure
        self.followed: FollowedRead | None = None  # the read of the last followed call

    def scan(self) -> None:
        events = self.session.events
        len(events)  # settles first: a followed call's end may log and scan (see _Follower)
        new = events[self.scanned :]
        for event in new:
            kind = event["type"]
            if kind == "assistant/chunk":
                continue  # the bulk of a log, and never a conversation item: asked first
            data = event.get("data")
            data = data if isinstance(data, dict) else {}
            if kind == "turn/start":
                turn = data.get("turn")
                self.turn = max(self.turn, turn) if isinstance(turn, int) else self.turn
                self.open_turn = True
                self.own_turn = event["seq"] in self.own_starts
                self.step = 0
                self.step_open = False
                self.last = None
            elif kind == "turn/end":
                turn = data.get("turn")
                self.turn = max(self.turn, turn) if isinstance(turn, int) else self.turn
                self.open_turn = self.own_turn = self.step_open = False
            elif kind == "step/start":
                step = data.get("step")
                self.step = step if isinstance(step, int) else self.step + 1
                self.step_open = True
            elif kind == "step/end":
                self.step_open = False
            elif kind == "request/header":
                self.header = data.get("header")
            elif kind == "tool/call" and isinstance(data.get("callId"), str):
                self.calls[data["callId"]] = event["seq"]
            else:
                item = surface_item(event)
                if item is not None:
                    apply_surface(self.surface, event, item)
        self.scanned += len(new)


_ADOPTED: Final = (
    "calls",
    "failure",
    "header",
    "last",
    "open_turn",
    "own_starts",
    "own_turn",
    "step",
    "step_open",
    "surface",
    "turn",
)
"""What the recorder knows of a session's log, taken from its mirror by `RecordingModel._adopt`."""


def _fresh(log: _SessionLog) -> bool:
    """Whether the recorder has logged nothing into the session yet (its calls deferred)."""
    return log.scanned == 0 and log.pending is None and not log.own_starts and log.turn == 0


class _Call:
    """One call's logging: where it goes, its chunks so far, and whether it is over."""

    __slots__ = (
        "follower",
        "handed",
        "log",
        "model",
        "own",
        "provider",
        "run",
        "seqs",
        "state",
        "step",
        "turn",
    )

    def __init__(
        self,
        log: _SessionLog | None,
        turn: int | None,
        step: int | None,
        own: bool,
        view: Conversation,
    ):
        self.handed = False  # the caller never changes the chunks: a ChunkRun keeps them
        self.run: ChunkRun | None = None  # a handed call's, from its first chunk
        self.follower: _Follower | None = None  # a followed call's (docs/recording.md#lazy)
        self.log = log
        self.turn = turn
        self.step = step
        self.own = own
        self.provider = view.provider
        self.model = view.model
        self.seqs: list[int] = []  # its assistant/chunk events
        self.state = _OPEN


class _Follower:
    """A replayed call logged lazily: its run follows the stream.

    See [docs/recording.md#lazy](../recording.md#lazy).

    The caller reads the replay model's stream itself (no frame of the recorder per
    chunk); the call's ``assistant/chunk`` events are built from what the stream handed
    out when the session is next read or written, and what follows the chunks (the
    assembled message, the turn's end) once the stream is done: the same events, in
    the same order, as logging each chunk when it passes.
    """

    __slots__ = ("call", "copies", "read", "recorder")

    def __init__(self, recorder: RecordingModel, call: _Call, read: FollowedRead, copies: bool):
        self.recorder = recorder
        self.call = call
        self.read = read  # the stream's FollowedRead: the caller may drop the stream
        self.copies = copies  # log the recorded values: the caller may change its chunks

    def handed_out(self) -> list[StreamChunk]:
        return self.read.handed_out(copies=self.copies)

    def done(self) -> bool:
        return self.read.done()

    def ended(self, run: ChunkRun) -> None:
        """Log what follows the chunks: the call's finish, or how the read stopped."""
        call = self.call
        call.follower = None
        if call.state != _OPEN:
            return
        chunks = run.chunks
        if chunks and chunks[-1].get("type") == "finish":
            call.state = _FINISHED
            self.recorder._finish(call)
            return
        run.add(_stop_chunk(self.read.error()))
        call.state = _FINISHED
        self.recorder._finish(call)
        call.state = _CLOSED

    def diverted(self, run: ChunkRun) -> None:
        """Log each further chunk as it passes (another write ended the run)."""
        call = self.call
        call.follower = None
        recorder = self.recorder

        def log(chunk: StreamChunk) -> StreamChunk:
            recorder._log_chunk(call, chunk)
            return chunk

        self.read.divert(log)


class _DeferredCall:
    """A followed call's deferred write: `RecordingModel._log_followed` with its arguments.

    What the log check by reference reads
    ([docs/checks.md#by-reference](../checks.md#by-reference)): the call's request view,
    turn and step, and its read.
    """

    __slots__ = ("conversation", "copies", "log", "read", "recorder", "step", "turn")

    def __init__(
        self,
        recorder: RecordingModel,
        log: _SessionLog,
        conversation: Conversation,
        turn: int | None,
        step: int | None,
        read: FollowedRead,
        copies: bool,
    ):
        self.recorder = recorder
        self.log = log
        self.conversation = conversation
        self.turn = turn
        self.step = step
        self.read = read
        self.copies = copies

    def __call__(self) -> None:
        self.recorder._log_followed(
            self.log, self.conversation, self.turn, self.step, self.read, self.copies
        )


class _ShadowRun:
    """A call's chunks in a `_ShadowSession`: the events ``{"turn", "step", "chunk"}``.

    The chunks given, or (``chunks`` ``None``) the whole of ``entry``'s, by reference.
    """

    __slots__ = ("chunks", "entry", "step", "turn")

    def __init__(
        self,
        turn: object,
        step: object,
        chunks: list[StreamChunk] | None,
        entry: ChunksEntry | None = None,
    ):
        self.turn = turn
        self.step = step
        self.chunks = chunks
        self.entry = entry

    def built(self) -> list[StreamChunk]:
        """The run's chunks (an entry's built now)."""
        chunks = self.chunks
        if chunks is None:
            assert self.entry is not None
            chunks = self.entry.chunks
        return chunks

    def datas(self) -> list[JSONObject]:
        """The run's events' ``data`` values."""
        turn, step = self.turn, self.step
        return [{"turn": turn, "step": step, "chunk": chunk} for chunk in self.built()]


_ShadowOp = tuple[Event, dict[str, object]] | _ShadowRun
"""An event as appended (and its envelope arguments), or a call's chunks."""


class _ShadowSession:
    """What the recorder logs into when it works out a session's log without building it.

    The log check by reference ([docs/checks.md#by-reference](../checks.md#by-reference)):
    the recorder's own code logs the session's deferred calls here, as it would into the
    session; each event is kept as appended (no copy, no check), a call's chunks as one
    `_ShadowRun`, which `events` (what ``scan`` reads) shows as one ``assistant/chunk``
    marker that counts for as many ``seq`` as it has chunks.
    """

    __slots__ = ("events", "id", "ops", "seq")

    def __init__(self, session_id: str):
        self.id = session_id
        self.events: list[JSONObject] = []
        self.ops: list[_ShadowOp] = []
        self.seq = 0  # the next event's seq in the session

    def append(self, type: str, data: JSONObject, **envelope: object) -> Event:
        """`Session.append`'s event, as it is given (the recorder's own envelopes only)."""
        fields = {k: v for k, v in envelope.items() if v is not None}
        event: Event = {"type": type, "seq": self.seq, "time": 0, "data": data}
        seqs = fields.get("sourceEventSeqs")
        if isinstance(seqs, list | tuple):
            event["sourceEventSeqs"] = list(seqs)
        if "surfaceOp" in fields:
            event["surfaceOp"] = fields["surfaceOp"]
        self.events.append(event)
        self.ops.append((event, fields))
        self.seq += 1
        return event

    def add_run(self, run: _ShadowRun, count: int) -> list[int]:
        """Log a call's chunks (``count`` of them); their seqs."""
        first = self.seq
        self.events.append({"type": "assistant/chunk", "seq": first, "data": None})
        self.ops.append(run)
        self.seq += count
        return list(range(first, self.seq))

    def batch(self) -> contextlib.nullcontext[_ShadowSession]:
        return contextlib.nullcontext(self)

    def held(self) -> contextlib.nullcontext[_ShadowSession]:
        return contextlib.nullcontext(self)

    def segments(self) -> list[Event | list[JSONObject] | EntryRun] | None:
        """The events the session would hold, as the log check segments a log.

        Each run of chunks as the list of its events' ``data``, adjacent runs as one, or,
        for a run that is a whole entry's with no run beside it, an `EntryRun` (its
        events not built); each other event as appended (see `segments_form` in the
        check). ``None`` when an appended event is itself an ``assistant/chunk`` (it
        might join a run).
        """
        out: list[Event | list[JSONObject] | EntryRun] = []
        ops = self.ops
        last = len(ops) - 1
        for n, op in enumerate(ops):
            if isinstance(op, _ShadowRun):
                before = out[-1] if out else None  # never an EntryRun: none is beside a run
                if isinstance(before, list):
                    before.extend(op.datas())
                elif op.entry is not None and (n == last or not isinstance(ops[n + 1], _ShadowRun)):
                    out.append(EntryRun(op.entry, op.turn, op.step))
                else:
                    out.append(op.datas())
            elif op[0]["type"] == "assistant/chunk":
                return None
            else:
                out.append(op[0])
        return out


def _write_ops(target: weakref.ref[Session], ops: list[_ShadowOp]) -> None:
    """Write ``ops`` (a `_ShadowSession`'s) into the session, as the recorder would have.

    The deferred write that stands for a session's calls once the check by reference
    passed: it holds the session weakly and nothing of the recorder's, so the session,
    its store and the recorder form no reference cycle
    ([docs/api/store.md#api-stores](store.md#api-stores)).
    """
    session = target()
    if session is None:
        return
    for op in ops:
        if isinstance(op, _ShadowRun):
            run = session.chunk_run(op.turn, op.step)
            for chunk in op.built():
                run.add(chunk)
        else:
            event, envelope = op
            session.append(event["type"], event["data"], **envelope)


def child_meta(parent: str, parent_header: SessionHeader | None) -> dict[str, object]:
    """The header fields a child session takes from its parent.

    ``parentSession``, ``origin: "subagent"`` and the parent's ``delegationDepth`` + 1
    (0 + 1 when the parent is not known): what a recording writes for every child it
    creates ([docs/scenarios.md#fork-or-spawn](../scenarios.md#fork-or-spawn)).
    """
    depth = 0 if parent_header is None else parent_header.delegation_depth or 0
    return {"parentSession": parent, "origin": "subagent", "delegationDepth": depth + 1}


class ByReference:
    """A session's log as the check by reference works it out, not built.

    See [docs/checks.md#by-reference](../checks.md#by-reference). From
    `RecordingModel._by_reference`.

    Attributes:
        session: The session.
        header: Its header.
        segments: The events its deferred calls (and `close_open_calls`) would leave it
            holding, as the check segments a log: each run of chunk events as the list of
            their ``data`` (or a whole entry's run as an `EntryRun`), each other event as
            it is (``seq`` and ``time`` aside).
    """

    __slots__ = ("_log", "_shadow", "_writes", "header", "segments", "session")

    def __init__(
        self,
        session: Session,
        writes: tuple[Callable[[], None], ...],
        log: _SessionLog | None,
        shadow: _ShadowSession,
        segments: list[Event | list[JSONObject] | EntryRun],
    ):
        self.session = session
        self.header = session.header
        self._writes = writes
        self._log = log
        self._shadow = shadow
        self.segments = segments

    @property
    def events(self) -> list[Event]:
        """`segments` as events (``seq`` and ``time`` 0): what the session would hold."""
        out: list[Event] = []
        for segment in self.segments:
            if isinstance(segment, EntryRun):
                segment = segment.datas()
            if isinstance(segment, list):
                out.extend(
                    {"type": "assistant/chunk", "seq": 0, "time": 0, "data": data}
                    for data in segment
                )
            else:
                out.append(segment)
        return out


class FollowedRead(Protocol):
    """A replay model's read that the recorder follows instead of relaying each chunk.

    What a followable stream's ``followed()`` returns (the replay model's, see
    [docs/recording.md#lazy](../recording.md#lazy)): the recorder logs the call from it when
    the session is next read or written.
    """

    def handed_out(self, *, copies: bool = False) -> list[StreamChunk]:
        """The chunks handed out so far (``copies``: with their recorded values)."""
        ...

    def done(self) -> bool:
        """Whether nothing more will be handed out."""
        ...

    def whole_entry(self, copies: bool) -> ChunksEntry | None:
        """The entry the read handed out whole and unchanged (what is logged), else ``None``."""
        ...

    def error(self) -> BaseException | None:
        """What the read raised, if it raised."""
        ...

    def divert(self, log: Callable[[StreamChunk], StreamChunk]) -> None:
        """From now on hand every chunk through ``log`` first."""
        ...


def _followed(upstream: Iterator[StreamChunk]) -> FollowedRead | None:
    """The read a recorder may follow, when ``upstream`` is a followable stream."""
    followable: Callable[[], bool] | None = getattr(upstream, "followable", None)
    if followable is None or not followable():
        return None
    followed: Callable[[], FollowedRead] = getattr(upstream, "followed")  # noqa: B009
    return followed()


def _guesses(model: object) -> bool:
    """Whether ``model``'s ``bind_session`` takes ``parent_guess`` (it may find a session new)."""
    return getattr(model, "guesses_parents", False) is True


_TOP_LEVEL: Final = Lineage()
"""A top-level session's lineage (one value: a ``Lineage`` is frozen)."""


def _header_lineage(session: Session) -> Lineage:
    """A session's lineage as its header says it."""
    header = session.header
    return Lineage(header.parent_session, header.seed_length or 0)


def _conversation(request: object) -> Conversation:
    """The conversation a request view holds (none for a request that is not a view)."""
    return request.conversation if isinstance(request, RequestView) else Conversation(None, [])


def _still_reading(log: _SessionLog) -> bool:
    """Whether the session's last call may still hand out chunks (read or relayed)."""
    read = log.followed
    if read is not None and not read.done():
        return True
    pending = log.pending
    return pending is not None and pending.state == _OPEN and pending.follower is None


def _loggable(conversation: Conversation, turn: int | None, step: int | None) -> bool:
    """Whether what a call logs (its request, the caller's turn and step) is lossless JSON.

    A conversation holds plain JSON already (``plain_json``: no NaN, no unsafe
    integers), but for ``-0.0`` and lone surrogates; the caller's values are as given.
    """
    caller = [turn, step]
    if plain_json(caller) != caller:
        return False
    value = [conversation.header, [item.message for item in conversation.items], caller]
    try:
        blob = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate
        return False
    return b"-0.0" not in blob


def _common_prefix(surface: list[tuple[int, Item]], items: list[Item]) -> int:
    n = 0
    for (_, known), item in zip(surface, items, strict=False):
        if known.key != item.key:
            break
        n += 1
    return n


class RecordingModel(OptionsModel):
    """Wraps a model and logs each call's conversation into the calling session.

    Args:
        model: The model that answers: anything with ``stream(request, **kwargs)``
            returning dsh stream chunks, and ``astream`` for async callers (without it,
            ``astream`` iterates ``stream`` in the event loop's thread); it is called
            with the keyword arguments
            [docs/recording.md#live-model-calls](../recording.md#live-model-calls) lists. A
            model of this package (the replay model, the scripted model, the built-in live
            model) gets the call's options as one value instead.
        store: The [`SessionStore`][pytest_dsh_replay.SessionStore] holding the callers'
            sessions.
        create_sessions: Whether a call from a session the store does not have creates
            it (a child when ``parent_session_id`` is given: ``parentSession``,
            ``origin: "subagent"``, the parent's ``delegationDepth`` + 1). So code that
            never touches the store still leaves a replayable recording whose children
            bind by their task. The ids of such sessions are kept in `created`.
            Without it, calls from unknown sessions are not logged.
        parsed_chunks: ``model``'s chunks hold only what a JSON parser makes, as a
            [`ReplayModel`][pytest_dsh_replay.ReplayModel]'s do: each is logged with the
            store's cheap check ([`append_chunk`][pytest_dsh_replay.Session.append_chunk]).
        text_safe: Requests hold only valid Unicode before they are logged or passed on
            (lone surrogates become U+FFFD), and so do the chunks of a model whose chunks
            are not ``parsed_chunks``: a surrogate pair split across two deltas reaches
            the caller and the log joined (a replayed model serves recorded text, which
            is valid already).
        request_views: ``model`` takes the request as the recorder's
            `RequestView` of it (a
            [`ReplayModel`][pytest_dsh_replay.ReplayModel] does, and reads what it needs of the
            request from the view the recorder already read); otherwise ``model`` gets the
            request mapping itself.

    Requests may be the in-process shape (``{"messages": [...]}``), an OpenAI
    chat-completions body or an Anthropic Messages body; the module docstring lists
    what is logged. In a turn the code under test opened (its own ``turn/start``), the
    recorder adds only the header, the new messages and the chunks, logged with the
    caller's ``turn`` and ``step`` keyword arguments (default: the open turn and step).
    The call's options ([`stream`][pytest_dsh_replay.RecordingModel.stream]'s keyword
    arguments) are passed on to ``model``
    ([docs/recording.md#live-model-calls](../recording.md#live-model-calls));
    ``read_only_chunks=True`` says the caller never changes the chunks it reads (the
    endpoint's calls), so with ``parsed_chunks`` the log keeps them as they are, built into
    events when the session is read ([`chunk_run`][pytest_dsh_replay.Session.chunk_run]).
    Attributes it does not have (``bindings``, ``assert_consumed``, ``cancel``, ...) are the
    wrapped model's.
    """

    def __init__(
        self,
        model: object,
        store: SessionStore,
        *,
        create_sessions: bool = True,
        parsed_chunks: bool = False,
        text_safe: bool = False,
        request_views: bool = False,
    ):
        answering = options_model(model)
        self._answering: OptionsModel | TextSafeModel[CallOptions] = (
            TextSafeModel(answering) if text_safe and not parsed_chunks else answering
        )
        self.model = model
        self.store = store
        self.create_sessions = create_sessions
        self.parsed_chunks = parsed_chunks
        self.text_safe = text_safe
        self.request_views = request_views
        # Reentrant: a generator finalized by the garbage collector may close its call
        # while this thread holds the lock. Lock order: this lock, then a session's
        # (``Session.held``). A session's deferred writes and its followers' ends run
        # with only the session's lock and touch only that session's log
        # (docs/recording.md#lazy), so the eager paths hold the session while they log.
        self._lock = threading.RLock()
        #: The model calls this recorder opened so far (each attempt of a retry counts).
        self.calls_opened = 0
        self._logs: dict[str, _SessionLog] = {}
        self._anonymous: str | None = None
        self.created: set[str] = set()
        #: What this recorder refused of a live model (a chunk the loader would refuse,
        #: a stream without its finish), not handed out yet (`take_refused`).
        self.refused: list[RecordingError] = []
        #: The test's injected faults, asked before each call (``None``: none);
        #: docs/recording.md#faults. A faulted attempt is neither logged nor passed on.
        self.faults: FaultQueue | None = None

    # --- sessions ------------------------------------------------------------------------

    def _session(self, session_id: str | None) -> Session | None:  # the lock is held
        """The session ``session_id`` names (``None``: the anonymous one), if it exists."""
        if session_id is None:
            return None if self._anonymous is None else self.store.get(self._anonymous)
        return self.store.get(session_id)

    def _lineage(self, parent: str | None, view: object, declared: int | None) -> Lineage:
        """A new child's lineage, decided as replay decides it.

        See [docs/scenarios.md#fork-or-spawn](../scenarios.md#fork-or-spawn).

        Args:
            parent: The live parent's id, if known.
            view: The child's first request (its view).
            declared: The ``seedLength`` its creator sent (the dsh runtime's), if any:
                then it is a fork exactly when that is positive.
        """
        if parent is None:
            return _TOP_LEVEL
        parent_session = self.store.get(parent)
        if parent_session is None:
            return Lineage(parent)
        events = parent_session.events
        if declared is not None:
            return Lineage(parent, completed_turns_end(events) if declared > 0 else 0)
        return Lineage(parent, fork_seed_length(events, _conversation(view).items))

    def _create(self, session_id: str | None, lineage: Lineage, cwd: str | None = None) -> Session:
        """Create a session the caller never created, with its lineage (the lock is held).

        A child gets ``parentSession``, ``origin: "subagent"`` and its parent's
        ``delegationDepth`` + 1; a fork child also its seed, the parent's completed
        turns, and ``seedLength``. ``cwd`` (the caller's working directory, when its
        request says) goes into the header, so recordings write it as ``{{cwd}}``.
        """
        meta: dict[str, object] | None = {"cwd": cwd} if cwd is not None else None
        seed = None
        parent = lineage.parent
        if parent is not None:
            parent_session = self.store.get(parent)
            parent_header = None if parent_session is None else parent_session.header
            meta = {**(meta or {}), **child_meta(parent, parent_header)}
            if lineage.fork and parent_session is not None:
                seed = completed_turn_prefix(parent_session)
                if seed is not None:
                    meta["seedLength"] = len(seed)
        session = self.store.create(session_id, seed=seed, meta=meta)
        self.created.add(session.id)
        if session_id is None:
            self._anonymous = session.id
        return session

    def open_session(
        self,
        request: Request,
        *,
        session_id: str | None,
        parent_session_id: str | None = None,
        parent_guess: str | None = None,
        seed_length: int | None = None,
        cwd: str | None = None,
    ) -> Lineage:
        """Create the calling session before its first call, deciding its lineage.

        The model endpoint calls this for a session it has not seen. Replaying (the
        wrapped model can bind, [`bind_session`][pytest_dsh_replay.ReplayModel.bind_session]),
        the session binds to its recording now; when content named no parent, the
        recording it binds to names it (the live session replaying the recorded
        parent), else the recording's ``parent_guess`` is the parent. An existing
        session is left as it is.

        Args:
            request: The session's first request.
            session_id: The live session (``None``: the anonymous one).
            parent_session_id: Its parent, when the caller or content proves it.
            parent_guess: Its likely parent when nothing proves one (recording only).
            seed_length: The ``seedLength`` its creator declared, if any.
            cwd: Its working directory, when the request says.

        Returns:
            Its lineage (an existing session's, read from its header).

        Raises:
            ReplayBindingError: Replaying, no recorded session is left for it.
        """
        view = self._view(request)
        bind = getattr(self.model, "bind_session", None)
        with self._lock:
            found = self._session(session_id)
            if found is not None:
                return _header_lineage(found)
            parent = parent_session_id
            if parent is None and bind is not None:
                # a model that may take the session as new (--dsh-record=new) takes the guess
                guess = {"parent_guess": parent_guess} if _guesses(self.model) else {}
                parent = bind(
                    self._passed(view), session_id=session_id, seed_length=seed_length, **guess
                )
            elif parent is None:
                parent = parent_guess
            lineage = self._lineage(parent, view, seed_length)
            if bind is not None and parent_session_id is not None:
                bind(
                    self._passed(view),
                    session_id=session_id,
                    parent_session_id=parent,
                    seed_length=lineage.seed_length,
                )
            if self.create_sessions:
                self._create(session_id, lineage, cwd)
            return lineage

    def _log_of(self, session: Session) -> _SessionLog:  # the lock is held
        log = self._logs.get(session.id)
        if log is None or log.session is not session:
            log = self._logs[session.id] = _SessionLog(session)
        return log

    def _calling(
        self, view: Request, options: CallOptions
    ) -> tuple[_SessionLog | None, CallOptions]:
        """The calling session's log, and the options the wrapped model gets.

        The session is created if need be; a log ``None``: the call is not logged.

        A session created here gets its lineage as
        [`open_session`][pytest_dsh_replay.RecordingModel.open_session] decides it, and the
        options passed on to the wrapped model say it: its parent and ``seed_length``, so
        replay binds by what the recording writes.
        """
        session_id = options.session_id
        with self._lock:
            self.calls_opened += 1
            session = self._session(session_id)
            if session is None and self.create_sessions:
                lineage = self._lineage(options.parent_session_id, view, options.seed_length)
                session = self._create(session_id, lineage, options.session_cwd)
            if session is None:
                return None, options
            header = session.header  # its lineage (`_header_lineage`), without a Lineage
            if header.parent_session is not None:  # a child: what binds it is what was logged
                options = options.with_lineage(header.parent_session, header.seed_length or 0)
            return self._log_of(session), options

    # --- opening a call ------------------------------------------------------------------

    def _view(self, request: Request) -> Request:
        """The request's view (text-safe when asked for); a non-mapping stays as it is."""
        if not isinstance(request, Mapping):
            return request
        return RequestView.safe(request) if self.text_safe else RequestView.of(request)

    def _passed(self, view: Request) -> Request:
        """What the wrapped model gets as the request: the view, or the request mapping."""
        if self.request_views or not isinstance(view, RequestView):
            return view
        return view.body

    def _begin_in(self, log: _SessionLog | None, request: Request, options: CallOptions) -> _Call:
        """Log a call's opening now (``log`` ``None``: a call that is not logged)."""
        if log is None:
            view = _conversation(request)
            return _Call(None, options.turn, options.step, False, view)
        with self._lock, log.session.held():
            return self._open_call(log, _conversation(request), options.turn, options.step)

    def _open_call(
        self, log: _SessionLog, view: Conversation, turn: int | None, step: int | None
    ) -> _Call:
        """Log a call's opening (the session is held; the recorder's lock need not be)."""
        log.scan()
        if log.pending is not None and log.pending.state == _OPEN:
            self._abandon_held(log.pending, None)  # left open across this call
            log.scan()
        with log.session.batch():
            call = self._open(log, view, turn, step)
        log.pending = call
        return call

    def _open(
        self, log: _SessionLog, view: Conversation, turn_kw: int | None, step_kw: int | None
    ) -> _Call:
        session = log.session
        known = _common_prefix(log.surface, view.items)
        new = view.items[known:]
        if log.open_turn and not log.own_turn:  # the code under test runs this turn
            turn = log.turn if turn_kw is None else turn_kw
            step = (log.step or 1) if step_kw is None else step_kw
            self._log_items(log, new, known, turn, step, view)
            self._log_header(log, view)
            return _Call(log, turn, step, False, view)
        if log.open_turn and (turn_kw is None or turn_kw == log.turn):
            tools = 0
            while tools < len(new) and new[tools].kind == TOOL_RESULT:
                tools += 1
            if not new and log.last == "error":  # a retry: same turn, same step
                step = log.step if step_kw is None else step_kw
                self._log_header(log, view)
                return _Call(log, log.turn, step, True, view)
            if log.last == "tool-calls" and (tools or not new):  # the turn's next step
                turn, step = log.turn, log.step
                self._log_items(log, new[:tools], known, turn, step, view)
                session.append("step/end", {"turn": turn, "step": step})
                step = step + 1 if step_kw is None else step_kw
                session.append("step/start", {"turn": turn, "step": step})
                self._log_items(log, new[tools:], known + tools, turn, step, view)
                self._log_header(log, view)
                return _Call(log, turn, step, True, view)
            self._close_turn(log)
        turn = log.turn + 1 if turn_kw is None else turn_kw
        step = 1 if step_kw is None else step_kw
        start = session.append("turn/start", {"turn": turn})
        log.own_starts.add(start["seq"])
        session.append("step/start", {"turn": turn, "step": step})
        self._log_items(log, new, known, turn, step, view)
        self._log_header(log, view)
        log.scan()
        return _Call(log, turn, step, True, view)

    def _log_items(
        self,
        log: _SessionLog,
        items: list[Item],
        known: int,
        turn: int,
        step: int,
        view: Conversation,
    ) -> None:
        """Append ``items``; the first replaces the surface after ``known`` if it diverged."""
        log.scan()
        for i, item in enumerate(items):
            envelope: dict[str, object] = {"surfaceOp": "append"}
            shadowed = [seq for seq, _ in log.surface[known:]] if i == 0 else []
            if shadowed and item.kind != TOOL_RESULT:
                # The request dropped or rewrote messages the log holds: this message
                # replaces them on the model-visible surface.
                envelope = {
                    "surfaceOp": {"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
                    "sourceEventSeqs": shadowed,
                }
            message = dict(item.message)
            if item.kind == USER:
                log.session.append(USER, {**message, "id": str(uuid.uuid4())}, **envelope)
            elif item.kind == TOOL_RESULT:
                call_seq = log.calls.get(item.call_id or "")
                if call_seq is not None and "sourceEventSeqs" not in envelope:
                    envelope["sourceEventSeqs"] = [call_seq]
                data = {"turn": turn, "step": step, "message": {**message, "id": str(uuid.uuid4())}}
                log.session.append(TOOL_RESULT, data, **envelope)
            else:
                source = {"kind": "model", "provider": view.provider, "model": view.model}
                assistant = {
                    "role": "assistant",
                    "content": message["content"],
                    "source": source,
                    "id": str(uuid.uuid4()),
                }
                log.session.append(
                    ASSISTANT, {"turn": turn, "step": step, "message": assistant}, **envelope
                )
            log.scan()

    @staticmethod
    def _log_header(log: _SessionLog, view: Conversation) -> None:
        if view.header is None or view.header == log.header:
            return
        reason = "initial" if log.header is None else "change"
        log.session.append("request/header", {"header": view.header, "reason": reason})
        log.scan()

    # --- closing a call and its turn -----------------------------------------------------

    def _log_chunk(self, call: _Call, chunk: StreamChunk) -> None:
        log = call.log
        if log is not None and not self.parsed_chunks:
            self._check_live_chunk(log, call, chunk)
        if log is None:  # a call that is not logged
            if chunk.get("type") == "finish":
                call.state = _FINISHED
            return
        with self._lock, log.session.held():
            self._log_chunk_held(call, chunk)

    def _check_live_chunk(self, log: _SessionLog, call: _Call, chunk: StreamChunk) -> None:
        """Refuse a live model's chunk that the recording's loader would refuse.

        Raises:
            RecordingError: The chunk breaks a rule of the format (the loader's message),
                or follows the call's ``finish``; it is kept in `refused` too, so
                the recording fails even when the caller swallows the error.
        """
        problem = live_chunk_problem(chunk)
        if problem is None and call.state == _FINISHED:
            problem = f"{_named(chunk)} came after the call's finish chunk: a stream ends there"
        if problem is None:
            return
        self._refuse(
            RecordingError(
                f"the live model streamed a chunk that the recording cannot hold (session "
                f"{log.session.id!r}): {problem}; a replay of it would not load, so the "
                "recording fails and nothing is written"
            )
        )

    def _refuse(self, error: RecordingError) -> None:
        """Keep ``error`` for the recording's end (`take_refused`), and raise it."""
        with self._lock:
            self.refused.append(error)
        raise error

    def take_refused(self) -> list[RecordingError]:
        """The calls refused so far (`refused`), each handed out once."""
        with self._lock:
            refused, self.refused = self.refused, []
        return refused

    def _log_chunk_held(self, call: _Call, chunk: StreamChunk) -> None:
        """Log one chunk of a logged call (its session is held)."""
        log = call.log
        assert log is not None
        if call.state != _OPEN:
            return  # closed while the caller kept reading: the log has moved on
        if call.handed:
            if call.run is None:
                call.run = log.session.chunk_run(call.turn, call.step)
            call.run.add(chunk)
        else:
            call.seqs.append(
                log.session.append_chunk(call.turn, call.step, chunk, parsed=self.parsed_chunks)
            )
        if chunk.get("type") == "finish":
            call.state = _FINISHED
            self._finish(call)

    def _finish(self, call: _Call) -> None:
        """Log what follows a finished call's chunks in the recorder's own turn."""
        log = call.log
        assert log is not None
        if call.run is not None:  # a handed call: its chunks are the logged ones
            call.seqs = call.run.seqs
            reply = assemble_reply(call.run.chunks)
        else:
            first = call.seqs[0] if call.seqs else 0
            span = log.session.events[first : call.seqs[-1] + 1] if call.seqs else []
            reply = assemble_reply([span[seq - first]["data"]["chunk"] for seq in call.seqs])
        self._log_reply(call, reply)

    def _log_reply(self, call: _Call, reply: Reply) -> None:
        """`_finish` once the call's chunk seqs and reply are known."""
        log = call.log
        assert log is not None
        kind = reply.finish_kind
        if log.pending is call:
            log.last = kind
        if kind == "error":
            failure = reply.finish.get("failure") if reply.finish else None
            log.failure = failure
        if not call.own:
            return
        session = log.session
        with session.batch():
            if kind in ("stop", "tool-calls", "max-tokens", "aborted"):
                source: JSONObject = {
                    "kind": "model",
                    "provider": call.provider,
                    "model": call.model,
                }
                if reply.replay_state is not None:
                    source["replayState"] = reply.replay_state
                message = {
                    "role": "assistant",
                    "content": reply.content,
                    "source": source,
                    "id": str(uuid.uuid4()),
                }
                data: JSONObject = {"turn": call.turn, "step": call.step, "message": message}
                if reply.usage is not None:
                    data["usage"] = reply.usage
                if kind == "aborted":
                    data["interrupted"] = True
                session.append(ASSISTANT, data, sourceEventSeqs=call.seqs, surfaceOp="append")
            if kind == "tool-calls":
                for block in reply.tool_calls:
                    session.append(
                        "tool/call",
                        {
                            "turn": call.turn,
                            "step": call.step,
                            "callId": block.get("id"),
                            "name": block.get("name"),
                            "arguments": block.get("arguments", ""),
                        },
                    )
            log.scan()
            if kind in ("stop", "max-tokens", "aborted") and log.open_turn and log.own_turn:
                self._close_turn(log)

    def _close_turn(self, log: _SessionLog) -> None:
        """End the recorder's open turn: ``step/end`` and ``turn/end`` by its last call."""
        session = log.session
        if log.step_open:
            session.append("step/end", {"turn": log.turn, "step": log.step})
        reason: JSONObject = {"kind": "completed"}
        if log.last == "error" and isinstance(log.failure, dict):
            reason = {"kind": "error", "error": log.failure}
        elif log.last == "max-tokens":
            reason = {"kind": "max-tokens"}
        elif log.last == "aborted":
            reason = {"kind": "aborted", "reason": {"kind": "user"}}
        session.append("turn/end", {"turn": log.turn, "reason": reason})
        log.scan()

    def _abandon(self, call: _Call, error: BaseException | None) -> None:
        """Close a call that stopped before its ``finish`` (the lock may be held)."""
        log = call.log
        if log is None:
            if call.state == _OPEN:
                self._log_chunk(call, _stop_chunk(error))
                call.state = _CLOSED
            return
        with self._lock, log.session.held():
            self._abandon_held(call, error)

    def _abandon_held(self, call: _Call, error: BaseException | None) -> None:
        """`_abandon` for a logged call whose session is held."""
        log = call.log
        assert log is not None
        if call.follower is not None and call.run is not None:  # what it read, then stop
            log.session.stop_following(call.run)
            call.follower = None
        if call.state != _OPEN:
            return
        self._log_chunk_held(call, _stop_chunk(error))
        call.state = _CLOSED

    def close_open_calls(self) -> None:
        """Close every call and turn the recorder still has open, as the harness would.

        A stream nobody finished reading ends with an ``aborted`` finish; a turn the
        recorder runs that is still open (its last call asked for tools, or failed)
        gets its ``step/end`` and ``turn/end`` (``completed``, or ``error`` with the
        failure). Called before a recording is written and before a replayed run's logs
        are compared; calls made afterwards start new turns.
        """
        with self._lock:
            for log in list(self._logs.values()):
                if self.store.get(log.session.id) is not log.session:
                    continue
                with log.session.held():
                    log.scan()  # deferred calls are logged first
                    if log.pending is not None and log.pending.state == _OPEN:
                        self._abandon_held(log.pending, None)
                    log.scan()
                    if log.open_turn and log.own_turn:
                        self._close_turn(log)
            self.forget_finished_calls()

    def forget_finished_calls(self) -> None:
        """Let go of each session's last call once it is over; the logs do not change.

        A finished call is nobody's to wait for; holding it, the recorder's view of a
        session and the call would form a reference cycle that only the garbage
        collector frees ([docs/api/store.md#api-stores](store.md#api-stores)).
        [`close_open_calls`][pytest_dsh_replay.RecordingModel.close_open_calls] ends with
        this; a call still open (being read, or logged when its session is next read) is kept.
        """
        with self._lock:
            for log in list(self._logs.values()):
                # Held: a deferred write or a follower's end (the session's lock only)
                # may be opening or finishing this very call.
                with log.session.held():
                    pending = log.pending
                    if pending is not None and pending.state != _OPEN and pending.follower is None:
                        log.pending = None

    # --- the log check by reference (docs/checks.md#by-reference) ------------------------

    def _by_reference(self, session: Session) -> ByReference | None:
        """The session's log worked out from its deferred calls, without building it.

        See [docs/checks.md#by-reference](../checks.md#by-reference). A session that holds
        nothing but deferred calls of this recorder, each replayed to the end of its
        entry (read without an error, its last chunk the entry's ``finish``), is logged by
        the recorder's own code into a `_ShadowSession` (its opening, its chunks, what
        follows them, then what
        [`close_open_calls`][pytest_dsh_replay.RecordingModel.close_open_calls] would
        add), leaving the session and this recorder as they are.

        Returns:
            The worked-out log, or ``None`` when the session does not qualify (build it).
        """
        with self._lock, session.held():
            writes = session.only_deferred()
            if writes is None:
                return None
            log = self._logs.get(session.id)
            if not writes:
                return ByReference(session, writes, None, _ShadowSession(session.id), [])
            if log is None or log.session is not session or not _fresh(log):
                return None
            calls: list[tuple[_DeferredCall, list[StreamChunk] | ChunksEntry]] = []
            for write in writes:
                if write.__class__ is not _DeferredCall:
                    return None
                assert isinstance(write, _DeferredCall)
                read = write.read
                if write.recorder is not self or write.log is not log:
                    return None
                if not read.done() or read.error() is not None:
                    return None
                # The whole entry replayed (its last chunk its one finish): by reference.
                entry = read.whole_entry(write.copies)
                if entry is not None and entry.ends_with_finish:
                    calls.append((write, entry))
                    continue
                chunks = read.handed_out(copies=write.copies)
                if not chunks or chunks[-1].get("type") != "finish":
                    return None  # a partial read: its end is logged otherwise
                calls.append((write, chunks))
            shadow = _ShadowSession(session.id)
            mirror = _SessionLog(shadow)  # type: ignore[arg-type]
            for write, replayed in calls:
                call = self._open_call(mirror, write.conversation, write.turn, write.step)
                call.handed = True
                call.state = _FINISHED
                if isinstance(replayed, ChunksEntry):  # its reply made once, kept with it
                    run = _ShadowRun(call.turn, call.step, None, replayed)
                    call.seqs = shadow.add_run(run, replayed.chunk_count)
                    self._log_reply(call, replayed.reply())
                else:
                    run = _ShadowRun(call.turn, call.step, replayed)
                    call.seqs = shadow.add_run(run, len(replayed))
                    self._log_reply(call, assemble_reply(replayed))
            mirror.scan()
            if mirror.open_turn and mirror.own_turn:
                self._close_turn(mirror)
            mirror.pending = None  # finished (forget_finished_calls): no cycle with it
            segments = shadow.segments()
            if segments is None:
                return None
            return ByReference(session, writes, mirror, shadow, segments)

    def _adopt(self, reference: ByReference) -> bool:
        """Make the session hold what ``reference`` worked out, when it is next read.

        After the check by reference passed: the session's deferred calls are replaced
        by one deferred write of the worked-out events
        ([docs/checks.md#by-reference](../checks.md#by-reference)), and this recorder's
        view of the session is the one it would have after
        [`close_open_calls`][pytest_dsh_replay.RecordingModel.close_open_calls].

        Returns:
            Whether the session was still as ``reference`` found it (else nothing changed).
        """
        session = reference.session
        mirror = reference._log
        with self._lock, session.held():
            if mirror is None:
                return session.only_deferred() == ()
            log = self._logs.get(session.id)
            if log is None or log.session is not session or not _fresh(log):
                return False
            shadow = reference._shadow
            if not session.replace_deferred(
                reference._writes, functools.partial(_write_ops, weakref.ref(session), shadow.ops)
            ):
                return False
            for name in _ADOPTED:
                setattr(log, name, getattr(mirror, name))
            log.scanned = shadow.seq
            return True

    # --- streaming ---------------------------------------------------------------------

    def stream(
        self,
        request: Request,
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        turn: int | None = None,
        step: int | None = None,
        cancel: Waitable | None = None,
        seed_length: int | None = None,
        session_cwd: str | None = None,
        read_only_chunks: bool = False,
        **model_options: object,
    ) -> Iterator[StreamChunk]:
        """Stream one call from the wrapped model, logging it (see the class docstring).

        Args:
            request: The request mapping, passed through.
            session_id: The calling session (``None``: the anonymous one); the call is
                logged in it.
            parent_session_id: The session that started it (a child's first call
                creates it as that session's child).
            turn: The turn to log the call in (default: the open turn, or a new one).
            step: The step to log the call in (default: as the turn goes on).
            cancel: An event that cancels the call, passed on.
            seed_length: Events a fork child inherited, when its creator declares them.
            session_cwd: The session's working directory, for a new session's header.
            read_only_chunks: The caller never changes the chunks it reads.
            **model_options: Passed on to the wrapped model as they are (a replay
                model ignores them;
                [docs/recording.md#live-model-calls](../recording.md#live-model-calls)).

        Raises:
            RecordingError: The wrapped stream ended without a ``finish`` chunk, or (a
                live model's, not ``parsed_chunks``) streamed a chunk the loader would
                refuse ([docs/limits.md#recorded-chunks](../limits.md#recorded-chunks)); a
                live model's is also kept in `refused`.
            Exception: Whatever the wrapped model raises, after the call was logged
                with an error ``finish``.
        """
        options = CallOptions(
            session_id,
            parent_session_id,
            seed_length,
            session_cwd,
            turn,
            step,
            cancel,
            read_only_chunks,
            extra=tuple(model_options.items()),
        )
        return self.stream_call(request, options)

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        """`stream` with the call's options as one value (the model endpoint's)."""
        faults = self.faults
        fault = None if faults is None else faults.take(options.session_id)
        if fault is not None:  # docs/recording.md#faults: the attempt is not a call
            assert faults is not None
            peek = self._peek(request, options)
            call = lambda: self._stream_call(request, options)  # noqa: E731
            return fault_stream(faults, fault, options, call, peek)
        return self._stream_call(request, options)

    def _peek(self, request: Request, options: CallOptions) -> Callable[[], list[StreamChunk]]:
        """What the wrapped model would answer the call, without making it (``[]``: unknown)."""
        upcoming = getattr(self.model, "upcoming", None)
        if upcoming is None:
            return list
        return lambda: upcoming(self._passed(self._view(request)), options)

    def _stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        view = self._view(request)
        log, options = self._calling(view, options)
        if log is not None and self.parsed_chunks:
            return self._replayed(log, view, options)
        return self._logged_now(log, view, options)

    def _replayed(
        self, log: _SessionLog, view: Request, options: CallOptions
    ) -> Iterator[StreamChunk]:
        """Stream a call of a model whose chunks are parsed JSON (a replay model).

        A followable stream is handed to the caller as it is, and the whole call is
        logged when its session is next read or written
        ([docs/recording.md#lazy](../recording.md#lazy)): what the request shows the model
        is read now. A call is logged now instead while the session's previous call may
        still hand out chunks (it ends where it is, as eager logging ends it), and when the
        request holds what the log refuses (the error is raised now).
        """
        conversation = _conversation(view)
        turn, step = options.turn, options.step
        if _still_reading(log) or not _loggable(conversation, turn, step):
            return self._logged_now(log, view, options)
        try:
            upstream = iter(self._answering.stream_call(self._passed(view), options))
        except BaseException as err:
            call = self._begin_in(log, view, options)
            self._abandon(call, err)
            raise
        read = _followed(upstream)  # not the stream: the caller may drop it
        if read is not None:
            copies = not options.read_only_chunks
            log.followed = read
            log.session.defer(_DeferredCall(self, log, conversation, turn, step, read, copies))
            return upstream
        call = self._begin_in(log, view, options)
        call.handed = options.read_only_chunks
        return self._relay(call, upstream)

    def _logged_now(
        self, log: _SessionLog | None, view: Request, options: CallOptions
    ) -> Iterator[StreamChunk]:
        """Stream a call whose opening is logged before the model is called.

        Its chunks are logged as they pass, or, for a replay model's followable stream,
        by a run that follows it (``log`` ``None``: a call that is not logged).
        """
        call = self._begin_in(log, view, options)
        read_only = options.read_only_chunks
        call.handed = read_only and self.parsed_chunks
        try:
            upstream = iter(self._answering.stream_call(self._passed(view), options))
        except BaseException as err:
            self._abandon(call, err)
            raise
        read = _followed(upstream) if self.parsed_chunks and log is not None else None
        if log is None or read is None:
            return self._relay(call, upstream)
        log.followed = read
        with self._lock, log.session.held():
            self._follow_held(call, read, not read_only)
        return upstream

    def _log_followed(
        self,
        log: _SessionLog,
        conversation: Conversation,
        turn: int | None,
        step: int | None,
        read: FollowedRead,
        copies: bool,
    ) -> None:
        """Log a followed call: its opening, then a run that follows the ``read``.

        A deferred write of the session
        ([`Session.defer`][pytest_dsh_replay.Session.defer]): it runs with the session held
        and takes no lock of the recorder's.
        """
        call = self._open_call(log, conversation, turn, step)
        self._follow_held(call, read, copies)

    def _follow_held(self, call: _Call, read: FollowedRead, copies: bool) -> None:
        """Log ``call`` by following its ``read`` (its session is held)."""
        log = call.log
        assert log is not None
        call.handed = True  # the run keeps the chunks
        follower = _Follower(self, call, read, copies)
        call.follower = follower
        call.run = log.session.follow(call.turn, call.step, follower)

    def _relay(self, call: _Call, upstream: Iterator[StreamChunk]) -> Iterator[StreamChunk]:
        error: BaseException | None = None
        completed = False
        try:
            for chunk in upstream:
                self._log_chunk(call, chunk)
                yield chunk
            completed = True
        except GeneratorExit:
            close = getattr(upstream, "close", None)
            if close is not None:
                close()
            raise
        except BaseException as err:
            error = self._live_error(call, err)
            if error is not err:
                raise error from err
            raise
        finally:
            if not completed:
                self._abandon(call, error)
        self._check_complete(call)

    def _live_error(self, call: _Call, error: BaseException) -> BaseException:
        """The error a failed stream is logged and raised with.

        A live model's chunk nested too deep for Python to walk (its text-safety pass
        meets the recursion limit) is a chunk the recording cannot hold: a
        [`RecordingError`][pytest_dsh_replay.RecordingError], kept in `refused`; anything
        else as it is.
        """
        if not isinstance(error, RecursionError) or self.parsed_chunks or call.log is None:
            return error
        refused = RecordingError(
            f"the live model streamed a chunk that the recording cannot hold (session "
            f"{call.log.session.id!r}): reading it met Python's recursion limit ({error}); "
            f"a recorded chunk may nest at most {RECORDED_CHUNK_NESTING} levels of arrays "
            "and objects, so the recording fails and nothing is written"
        )
        with self._lock:
            self.refused.append(refused)
        return refused

    def _check_complete(self, call: _Call) -> None:
        if call.state == _OPEN:
            problem = RecordingError(
                "the model's stream ended without a finish chunk; such a call cannot be "
                "replayed from the log (every stream must end with a finish chunk)"
            )
            self._abandon(call, problem)
            if call.log is not None and not self.parsed_chunks:
                self._refuse(problem)
            raise problem

    def astream(
        self,
        request: Request,
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        turn: int | None = None,
        step: int | None = None,
        cancel: Waitable | asyncio.Event | None = None,
        seed_length: int | None = None,
        session_cwd: str | None = None,
        read_only_chunks: bool = False,
        **model_options: object,
    ) -> AsyncIterator[StreamChunk]:
        """The async form of `stream`: the same arguments, logging and errors."""
        options = CallOptions(
            session_id,
            parent_session_id,
            seed_length,
            session_cwd,
            turn,
            step,
            cancel,
            read_only_chunks,
            extra=tuple(model_options.items()),
        )
        return self.astream_call(request, options)

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        """`astream` with the call's options as one value."""
        faults = self.faults
        fault = None if faults is None else faults.take(options.session_id)
        if fault is not None:  # docs/recording.md#faults: the attempt is not a call
            assert faults is not None
            peek = self._peek(request, options)
            return afault_stream(
                faults, fault, options, lambda: self._astream_call(request, options), peek
            )
        return self._astream_call(request, options)

    def _astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        handed = options.read_only_chunks and self.parsed_chunks
        view = self._view(request)
        log, options = self._calling(view, options)
        call = self._begin_in(log, view, options)
        call.handed = handed
        try:
            upstream = self._answering.astream_call(self._passed(view), options)
        except BaseException as err:
            self._abandon(call, err)
            raise
        return self._arelay(call, upstream)

    async def _arelay(
        self, call: _Call, upstream: AsyncIterator[StreamChunk]
    ) -> AsyncIterator[StreamChunk]:
        error: BaseException | None = None
        completed = False
        try:
            async for chunk in upstream:
                self._log_chunk(call, chunk)
                yield chunk
            completed = True
        except GeneratorExit:
            aclose = getattr(upstream, "aclose", None)
            if aclose is not None:
                await aclose()
            raise
        except BaseException as err:
            error = self._live_error(call, err)
            if error is not err:
                raise error from err
            raise
        finally:
            if not completed:
                self._abandon(call, error)
        self._check_complete(call)

    def __getattr__(self, name: str) -> Any:
        # Anything else (assert_consumed, bindings, cancel, ...) is the wrapped model's.
        return getattr(self.model, name)
