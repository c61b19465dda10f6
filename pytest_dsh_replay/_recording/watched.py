"""The live model a recording calls, watched: what it raised is kept for the test's failure.

A live model from the ``pytest_dsh_replay_live_model`` hook may raise: its server is
down (a connection refused, a DNS failure, a timeout) or it fails otherwise. Such a call
cannot be recorded, and the test must say so first, in one typed line naming the live
model and its base URL (redacted), not after the code under test's traceback, and not
as a bug of the model endpoint
([docs/recording.md#live-model-failures](../recording.md#live-model-failures)).
`WatchedLive` passes every call through unchanged and keeps a line for each exception the
live model raises; the fixture turns the first into a ``RecordingError``.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from .._errors import DshReplayError, RecordingError
from .._format.events import StreamChunk
from .._format.redact import Redactor, shown_url
from .._identity.options import CallOptions, OptionsModel, Request, options_model
from .proxy import _is_network_error

__all__ = ["LiveFailure", "WatchedLive"]


@dataclass(frozen=True, slots=True)
class LiveFailure:
    """One exception a live model raised while recording, as the test reports it.

    Attributes:
        message: ``cannot reach the live model <name> at <url>: <error>`` for a network
            error (anywhere in the exception's causes), else ``the live model <name> (at
            <url>) failed: <error>``; redacted, the URL shown without credentials.
        network: Whether the live model could not be reached.
    """

    message: str
    network: bool


_T = TypeVar("_T")


class WatchedLive(OptionsModel):
    """A live model whose calls pass through unchanged and whose exceptions are kept.

    ``stream_call`` and ``astream_call`` call the live model as they are called (as
    [docs/recording.md#live-model-calls](../recording.md#live-model-calls) says) and hand
    out its chunks. An exception it raises, when calling or while its stream is read, is
    kept (`take_failures`) and reaches the caller as it is, so the code under test sees what
    the live model raised; an error of this package (a
    [`DshReplayError`][pytest_dsh_replay.DshReplayError]) is left alone, it reports itself.
    A call over HTTP (its options carry a ``relay``: the model endpoint's recording proxy)
    starts when its stream is first read and raises a ``RecordingError`` saying what
    happened, so the endpoint answers it as the live model's failure. Every other attribute
    is the live model's.

    Args:
        live: The live model (``stream``, maybe ``astream``).
        redactor: The secret rules of the recording (messages are redacted with them).
    """

    def __init__(self, live: object, redactor: Redactor):
        self.live = live
        self._calls = options_model(live)
        self._redactor = redactor
        self._lock = threading.Lock()
        self._failures: list[LiveFailure] = []

    def __repr__(self) -> str:
        return f"WatchedLive({self.live!r})"

    def __getattr__(self, name: str) -> object:
        if name in ("live", "_calls"):  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.live, name)

    def take_failures(self) -> list[LiveFailure]:
        """The failures kept since the last call, oldest first (each is taken once)."""
        with self._lock:
            taken, self._failures = self._failures, []
        return taken

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        """The live model's chunks for one call, watched (see the class)."""
        if options.relay is not None:
            return self._relayed(request, options)
        return self._watched(self._called(self._calls.stream_call, request, options))

    def _called(
        self,
        method: Callable[[Request, CallOptions], _T],
        request: Request,
        options: CallOptions,
    ) -> _T:
        """``method(request, options)``; what it raises is kept, then raised as it is."""
        try:
            return method(request, options)
        except Exception as error:
            self._failed(error)
            raise

    def _watched(self, upstream: Iterable[StreamChunk]) -> Iterator[StreamChunk]:
        try:
            yield from upstream
        except Exception as error:
            self._failed(error)
            raise

    def _relayed(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        try:
            yield from self._calls.stream_call(request, options)
        except Exception as error:
            failure = self._failed(error)
            if failure is None:
                raise
            raise RecordingError(failure.message) from error

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        """The async form of `stream_call`.

        The live model's ``astream``, else its ``stream`` read in the event loop's thread.
        """
        return self._awatched(self._called(self._calls.astream_call, request, options))

    async def _awatched(self, upstream: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in upstream:
                yield chunk
        except Exception as error:
            self._failed(error)
            raise
        finally:
            aclose = getattr(upstream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _failed(self, error: Exception) -> LiveFailure | None:
        """Keep ``error`` (``None``: it is this package's own, which reports itself)."""
        if isinstance(error, DshReplayError):
            return None
        failure = describe_failure(self.live, error, self._redactor)
        with self._lock:
            self._failures.append(failure)
        return failure


def describe_failure(live: object, error: BaseException, redactor: Redactor) -> LiveFailure:
    """What the test says about an exception a live model raised.

    Args:
        live: The live model; its ``base_url`` attribute, when it has one, else the URL
            of the request the error names (an ``httpx`` or SDK error's ``request``), is
            shown redacted (`shown_url`).
        error: The exception.
        redactor: The recording's secret rules.
    """
    causes = list(_chain(error))
    network = any(_is_network_error(cause) for cause in causes)
    url = _url_of(live, causes)
    name = type(live).__name__
    where = "" if url is None else f" at {shown_url(url, redactor)}"
    detail = f"{type(error).__name__}: {error}"
    cause = next((c for c in causes[1:] if str(c)), None)
    if cause is not None and str(cause) not in str(error):
        detail += f" ({type(cause).__name__}: {cause})"
    if network:
        message = f"cannot reach the live model {name}{where}: {detail}"
    else:
        message = f"the live model {name}{where} failed: {detail}"
    return LiveFailure(redactor.redact_text(message), network)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and its causes (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _url_of(live: object, causes: list[BaseException]) -> str | None:
    """The live model's ``base_url``, else the URL of the request an error names."""
    base = getattr(live, "base_url", None)
    if base is not None and str(base):
        return str(base)
    for cause in causes:
        try:
            request = getattr(cause, "request", None)  # httpx raises when it is not set
        except Exception:
            continue
        url = getattr(request, "url", None)
        if url is not None and str(url):
            return str(url)
    return None
