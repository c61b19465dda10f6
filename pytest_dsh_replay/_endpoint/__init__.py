"""The model endpoint: HTTP requests in, the model's stream out on the caller's wire.

`Endpoint` answers one request whatever carries it; which live session
calls (`routing`); responses and cancels (`response`); the in-process
``httpx`` transports (`transport`), the loopback server (`server`) and the
fixture's endpoint part with its SDK clients (`clients`).
"""
