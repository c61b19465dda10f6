"""The HTTP face of the ``dsh_replay`` fixture: its model endpoint and ready SDK clients.

:class:`EndpointClients` is the part of :class:`~pytest_dsh_replay.DshReplay` that serves
the run's model over HTTP: the endpoint (created on first use), the loopback server and
its URL, the environment that points an agent process at it, and ``openai`` /
``anthropic`` clients that reach it in process. Everything it imports is imported on
first use, so a test that never asks for the endpoint pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .endpoint import Endpoint
    from .server import EndpointServer
    from .transport import _Pool

__all__ = ["EndpointClients"]


class EndpointClients:
    """The model endpoint of one run, and clients on it (a base of ``DshReplay``).

    The class using it provides the attributes annotated here: the model the endpoint
    serves, the mode, and the slots for the endpoint, the server and the worker pool
    (``None`` until first use; ``DshReplay.close`` stops them).
    """

    model: Any
    mode: str
    _endpoint: Endpoint | None
    _server: EndpointServer | None
    _pool: _Pool | None

    @property
    def endpoint(self) -> Endpoint:
        """The HTTP model endpoint of this run (created on first use).

        It serves :attr:`model` over the OpenAI and Anthropic wires; replay errors it met
        are in ``endpoint.errors`` (:meth:`close` raises the first).
        """
        if self._endpoint is None:
            from .endpoint import Endpoint

            self._endpoint = Endpoint(self.model, replay=self.mode == "replay")
        return self._endpoint

    @property
    def base_url(self) -> str:
        """The endpoint's root URL, ``http://127.0.0.1:<port>`` (clients add ``/v1``).

        The server starts on first use, listens on 127.0.0.1 only, and stops at
        :meth:`close` (the fixture's teardown).
        """
        if self._server is None:
            from .server import EndpointServer

            self._server = EndpointServer(self.endpoint)
        return self._server.base_url

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point an agent process at :attr:`base_url`.

        ``OPENAI_BASE_URL`` (with ``/v1``), ``ANTHROPIC_BASE_URL`` and
        ``DEEPSEEK_BASE_URL`` (the root), their ``*_API_KEY`` with a dummy key, and
        ``NO_PROXY`` for the loopback address. Merge them into the process's
        environment: ``subprocess.run(cmd, env={**os.environ, **dsh_replay.env})``.
        """
        from .transport import endpoint_env

        return endpoint_env(self.base_url)

    def _pool_for_async(self) -> _Pool:
        from .transport import worker_pool

        if self._pool is None:
            self._pool = worker_pool()
        return self._pool

    def _sdk_client(self, sdk: str, options: dict[str, Any], *, asynchronous: bool) -> Any:
        """An ``sdk`` client on :attr:`endpoint`; async ones share the run's worker pool."""
        from .transport import sdk_client

        pool = self._pool_for_async() if asynchronous else None
        return sdk_client(sdk, self.endpoint, pool, options)

    def openai_client(self, **options: Any) -> Any:
        """An ``openai.OpenAI`` client that talks to the endpoint in process (no socket).

        Args:
            **options: Passed to ``openai.OpenAI`` (``max_retries``, ``timeout``, ...).

        Raises:
            DshReplayError: The ``openai`` package is not installed.
        """
        return self._sdk_client("openai", options, asynchronous=False)

    def async_openai_client(self, **options: Any) -> Any:
        """An ``openai.AsyncOpenAI`` client on the endpoint, like :meth:`openai_client`."""
        return self._sdk_client("openai", options, asynchronous=True)

    def anthropic_client(self, **options: Any) -> Any:
        """An ``anthropic.Anthropic`` client on the endpoint, like :meth:`openai_client`.

        ``options`` go to ``anthropic.Anthropic``; without the ``anthropic`` package it
        raises :class:`~pytest_dsh_replay.DshReplayError`.
        """
        return self._sdk_client("anthropic", options, asynchronous=False)

    def async_anthropic_client(self, **options: Any) -> Any:
        """An ``anthropic.AsyncAnthropic`` client on the endpoint (as :meth:`anthropic_client`)."""
        return self._sdk_client("anthropic", options, asynchronous=True)
