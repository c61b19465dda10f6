"""One model call's options: who calls, and what only a replay reads, in one typed value.

A call goes from the model endpoint (or the code under test) through the recorder to the
model that answers it: the replay model, a live model, the scripted model. What travels
with the request is one `CallOptions` (immutable), whose `ReplayOptions` part
holds what only a replay reads. Record and replay carry the same value; a field that
does not apply is at its default.

The models of this package take it as it is (`OptionsModel`). A user's live model
(any object with ``stream(request, **kwargs)``,
[docs/recording.md#live-model](../recording.md#live-model)) is called by
`LiveModelAdapter` with the keyword arguments `live_keywords` derives, as the
live-model call contract states
([docs/recording.md#live-model-calls](../recording.md#live-model-calls)).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Final, Protocol

from .._format.events import StreamChunk

if TYPE_CHECKING:
    import asyncio

    from .._scripts.entries import ChunksEntry, ThrowEntry
    from .._wire.base import Wire

__all__ = [
    "NO_OPTIONS",
    "NO_REPLAY",
    "CallOptions",
    "LiveModelAdapter",
    "OptionsModel",
    "Relaying",
    "ReplayOptions",
    "Request",
    "Waitable",
    "live_keywords",
    "options_model",
]

Request = Mapping[str, object]
"""A model call's request as the models read it: the in-process shape or a wire's body
(a read-only mapping; the recorder's request view)."""


class Waitable(Protocol):
    """A cancel event a call waits on (``threading.Event`` is one)."""

    def is_set(self) -> bool:
        """Whether the call is cancelled."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the cancel; whether it came."""
        ...


class Relaying(Protocol):
    """The HTTP call a recording proxy forwards (the model endpoint's ``Relay``)."""

    wire: Wire
    path: str


class _Value:
    """A value of named fields, set once by ``__init__`` (see `CallOptions`).

    Equal when of one class with equal fields, hashable when they are, shown with them.
    """

    __slots__ = ()

    def _names(self) -> tuple[str, ...]:
        names: tuple[str, ...] = self.__slots__
        return names

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._names())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _Value)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._names())
        return f"{type(self).__name__}({shown})"


class ReplayOptions(_Value):
    """What only a replay reads of a call (the model endpoint sets it; defaults: none).

    Immutable by convention: fields are ``Final`` (mypy refuses an assignment outside
    ``__init__``) and ``__slots__`` admits no others; a slotted class with a plain
    ``__init__`` costs a fifth of a frozen dataclass's per-field ``object.__setattr__``
    (benchmarks/README.md, issue 42).

    Attributes:
        by_content: Bind a new session without a parent by its first user message once
            the primary is bound (the endpoint's content routing), not by call order.
        on_response_id: Given the recorded answer's provider id, before the call
            streams, when the recording holds one
            ([docs/wires.md#provider-ids](../wires.md#provider-ids)).
        on_entry: Given the recorded entry the call replays, before it streams, when
            its chunks are the entry's as recorded
            ([docs/wires.md#encoded-once](../wires.md#encoded-once)).
        cancel_waits_only: The call's ``cancel`` only ends waits (a ``hang``, a pacing
            pause) and is not checked before each chunk: the caller reads the whole
            stream at once.
    """

    __slots__ = ("by_content", "cancel_waits_only", "on_entry", "on_response_id")

    by_content: Final[bool]
    on_response_id: Final[Callable[[str], object] | None]
    on_entry: Final[Callable[[ChunksEntry | ThrowEntry], object] | None]
    cancel_waits_only: Final[bool]

    def __init__(
        self,
        by_content: bool = False,
        on_response_id: Callable[[str], object] | None = None,
        on_entry: Callable[[ChunksEntry | ThrowEntry], object] | None = None,
        cancel_waits_only: bool = False,
    ):
        self.by_content = by_content
        self.on_response_id = on_response_id
        self.on_entry = on_entry
        self.cancel_waits_only = cancel_waits_only


NO_REPLAY: Final = ReplayOptions()
"""The replay part of a call that asks nothing of a replay."""


class CallOptions(_Value):
    """One model call's options, passed as one value from the caller to the model.

    Immutable by convention, as `ReplayOptions`: a changed option is a new value
    (`with_lineage`).

    Attributes:
        session_id: The live session making the call (``None``: the anonymous one).
        parent_session_id: The live session that started it, for a child's calls.
        seed_length: How many events a fork child inherited (``0``: a spawn; ``None``:
            not declared).
        session_cwd: The calling session's working directory, when its request says
            (a new session's header holds it).
        turn: The turn the caller logs the call in (``None``: the recorder decides).
        step: The step the caller logs the call in (``None``: the recorder decides).
        cancel: An event that cancels the call when set (``threading.Event`` for
            ``stream``, ``asyncio.Event`` for ``astream``).
        read_only_chunks: The caller never changes the chunks it reads (the recorder
            may log them as they are).
        relay: The HTTP call the recording proxy forwards (the model endpoint sets it
            while recording; a live model that can proxy answers through it).
        replay: What only a replay reads.
        extra: The caller's other keyword arguments (model options), in order: a
            replay ignores them, a live model gets them.
    """

    __slots__ = (
        "cancel",
        "extra",
        "parent_session_id",
        "read_only_chunks",
        "relay",
        "replay",
        "seed_length",
        "session_cwd",
        "session_id",
        "step",
        "turn",
    )

    session_id: Final[str | None]
    parent_session_id: Final[str | None]
    seed_length: Final[int | None]
    session_cwd: Final[str | None]
    turn: Final[int | None]
    step: Final[int | None]
    cancel: Final[Waitable | asyncio.Event | None]
    read_only_chunks: Final[bool]
    relay: Final[Relaying | None]
    replay: Final[ReplayOptions]
    extra: Final[tuple[tuple[str, object], ...]]

    def __init__(
        self,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        seed_length: int | None = None,
        session_cwd: str | None = None,
        turn: int | None = None,
        step: int | None = None,
        cancel: Waitable | asyncio.Event | None = None,
        read_only_chunks: bool = False,
        relay: Relaying | None = None,
        replay: ReplayOptions = NO_REPLAY,
        extra: tuple[tuple[str, object], ...] = (),
    ):
        self.session_id = session_id
        self.parent_session_id = parent_session_id
        self.seed_length = seed_length
        self.session_cwd = session_cwd
        self.turn = turn
        self.step = step
        self.cancel = cancel
        self.read_only_chunks = read_only_chunks
        self.relay = relay
        self.replay = replay
        self.extra = extra

    def with_lineage(self, parent_session_id: str | None, seed_length: int | None) -> CallOptions:
        """These options for a child whose lineage is ``parent_session_id`` and ``seed_length``.

        Returns:
            ``self`` when they are its own already, else a copy with them.
        """
        if parent_session_id == self.parent_session_id and seed_length == self.seed_length:
            return self
        return self._copy(parent_session_id, seed_length, self.cancel)

    def with_cancel(self, cancel: Waitable | asyncio.Event | None) -> CallOptions:
        """These options with ``cancel`` as the call's cancel event (a copy)."""
        return self._copy(self.parent_session_id, self.seed_length, cancel)

    def _copy(
        self,
        parent_session_id: str | None,
        seed_length: int | None,
        cancel: Waitable | asyncio.Event | None,
    ) -> CallOptions:
        return CallOptions(
            self.session_id,
            parent_session_id,
            seed_length,
            self.session_cwd,
            self.turn,
            self.step,
            cancel,
            self.read_only_chunks,
            self.relay,
            self.replay,
            self.extra,
        )


NO_OPTIONS: Final = CallOptions()
"""The options of a call that says nothing (the anonymous session, no parent)."""


_LIVE_KEYWORDS: Final = (
    "session_id",
    "parent_session_id",
    "seed_length",
    "session_cwd",
    "turn",
    "step",
    "cancel",
    "relay",
)
"""The options a user's live model gets as keyword arguments, in this order."""


def live_keywords(options: CallOptions) -> dict[str, object]:
    """The keyword arguments a user's live model's ``stream``/``astream`` is called with.

    The contract of
    [docs/recording.md#live-model-calls](../recording.md#live-model-calls):
    ``session_id``, ``parent_session_id``, ``seed_length``, ``session_cwd``, ``turn``, ``step``,
    ``cancel`` and ``relay``, each only when it is set (not ``None``); then the caller's
    own keyword arguments (`CallOptions.extra`). What only a replay reads
    (`ReplayOptions`) and ``read_only_chunks`` are never passed.
    """
    keywords: dict[str, object] = {}
    for name in _LIVE_KEYWORDS:
        value = getattr(options, name)
        if value is not None:
            keywords[name] = value
    keywords.update(options.extra)
    return keywords


class OptionsModel:
    """A model of this package: it takes a call's `CallOptions` as one value.

    Subclasses implement `stream_call`; `astream_call` defaults to reading
    `stream_call` in the event loop's thread (the model is called now, its chunks
    come as the async iterator is read).
    """

    __slots__ = ()

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        """Stream the chunks of one call."""
        raise NotImplementedError

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        """The async form of `stream_call`."""
        return _in_loop(iter(self.stream_call(request, options)))


async def _in_loop(upstream: Iterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
    try:
        for chunk in upstream:
            yield chunk
    finally:
        close = getattr(upstream, "close", None)
        if close is not None:
            close()


class LiveModelAdapter(OptionsModel):
    """A user's live model called as the live-model contract says (`live_keywords`).

    Args:
        model: Any object with ``stream(request, **kwargs)`` returning an iterable of
            stream chunks, and optionally ``astream`` (an async iterable); without it,
            `astream_call` reads ``stream`` in the event loop's thread.
    """

    __slots__ = ("model",)

    def __init__(self, model: object):
        self.model = model

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        stream: Callable[..., Iterable[StreamChunk]] = self.model.stream  # type: ignore[attr-defined]
        return iter(stream(request, **live_keywords(options)))

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        astream: Callable[..., AsyncIterator[StreamChunk]] | None = getattr(
            self.model, "astream", None
        )
        if astream is None:
            return super().astream_call(request, options)
        return astream(request, **live_keywords(options))

    def __repr__(self) -> str:
        return repr(self.model)


def options_model(model: object) -> OptionsModel:
    """``model`` as a model that takes `CallOptions` as one value.

    Itself when it is one of ours, else a `LiveModelAdapter` (a user's live model).
    """
    return model if isinstance(model, OptionsModel) else LiveModelAdapter(model)
