"""The model endpoint: HTTP requests in, the model's stream out on the caller's wire.

:class:`~.endpoint.Endpoint` answers one request whatever carries it; which live session
calls (:mod:`.routing`); responses and cancels (:mod:`.response`); the in-process
``httpx`` transports (:mod:`.transport`), the loopback server (:mod:`.server`) and the
fixture's endpoint part with its SDK clients (:mod:`.clients`).
"""
