"""The HTTP face of the ``dsh_replay`` fixture: its model endpoint and ready SDK clients.

`EndpointClients` is the part of [`DshReplay`][pytest_dsh_replay.DshReplay] that serves
the run's model over HTTP: the endpoint (created on first use), the loopback server and
its URL, the environment that points an agent process at it, and each wire's SDK
clients that reach it in process. Everything it imports is imported on
first use, so a test that never asks for the endpoint pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._errors import DshReplayError
    from .._replay.model import ReplayModel
    from .endpoint import Endpoint, LiveCalls, StreamingModel
    from .server import EndpointServer
    from .transport import EndpointLink, _Pool

__all__ = ["EndpointClients"]


class EndpointClients:
    """The model endpoint of one run, and clients on it.

    Args:
        model: What the endpoint's calls stream from (the run's recorder).
        replay: The replay model the recorder wraps (replay mode): new sessions bind
            through it before their call; ``None`` in record mode, where calls go
            through the recording proxy.
        redact: What live texts quoted in the endpoint's messages go through (the run's
            redaction); ``None``: the replay model's, or none when recording.
        live_calls: With ``replay``, what says which calls go to the live model
            (``--dsh-record=new``): those go through the recording proxy.

    Attributes:
        max_body_bytes: The server's body cap in bytes, read when it starts (``None``:
            the server's default, ``MAX_BODY_BYTES``).
    """

    def __init__(
        self,
        model: StreamingModel,
        *,
        replay: ReplayModel | None,
        redact: Callable[[str], str] | None = None,
        live_calls: LiveCalls | None = None,
    ):
        self._model = model
        self._redact = redact
        self._replay = replay
        self._live_calls = live_calls
        self._endpoint: Endpoint | None = None
        self._server: EndpointServer | None = None
        self._pool: _Pool | None = None
        self._links: list[EndpointLink] = []  # the in-process clients' (cut at close)
        self._closed = False
        self.max_body_bytes: int | None = None

    def guessed_parents(self) -> int:
        """How many new sessions had a parent that content could not decide (0 unused)."""
        return 0 if self._endpoint is None else len(self._endpoint.router.guessed)

    @property
    def endpoint(self) -> Endpoint:
        """The HTTP model endpoint of this run (created on first use)."""
        if self._endpoint is None:
            from .endpoint import Endpoint

            if self._replay is None:
                self._endpoint = Endpoint(self._model, record=True, redact=self._redact)
            else:
                self._endpoint = Endpoint.replaying(
                    self._replay, model=self._model, redact=self._redact, live=self._live_calls
                )
        return self._endpoint

    @property
    def base_url(self) -> str:
        """The endpoint's root URL, ``http://127.0.0.1:<port>`` (the server starts now)."""
        if self._server is None:
            from .server import EndpointServer

            if self.max_body_bytes is None:
                self._server = EndpointServer(self.endpoint)
            else:
                self._server = EndpointServer(self.endpoint, max_body_bytes=self.max_body_bytes)
        return self._server.base_url

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point an agent process at `base_url`."""
        from .transport import endpoint_env

        return endpoint_env(self.base_url)

    def sdk_client(self, wire: str, options: dict[str, object], *, asynchronous: bool) -> object:
        """The SDK client of the wire called ``wire`` on `endpoint` (in process).

        Async clients share the run's worker pool.

        Raises:
            UnknownWireError: No wire is called ``wire``.
            DshReplayError: The SDK package is not installed.
        """
        from .transport import EndpointLink, sdk_client, worker_pool

        pool = None
        if asynchronous:
            if self._pool is None:
                self._pool = worker_pool()
            pool = self._pool
        link = EndpointLink(self.endpoint)
        if self._closed:
            link.cut()  # made after the test ended: answered as the others are
        else:
            self._links.append(link)
        return sdk_client(wire, link, pool, options)

    def take_errors(self) -> list[DshReplayError]:
        """The replay errors HTTP calls met so far (the endpoint forgets them)."""
        endpoint = self._endpoint
        if endpoint is None or not endpoint.errors:
            return []
        errors, endpoint.errors = endpoint.errors, []
        return errors

    def close(self) -> None:
        """Stop the server and the endpoint (hanging calls end); safe to call twice."""
        if self._server is not None:
            self._server.stop()
        if self._endpoint is not None:
            self._endpoint.close()
        self._closed = True
        for link in self._links:  # a client kept past the test keeps nothing of it
            link.cut()
        self._links.clear()
        if self._pool is not None:
            self._pool.shutdown()
