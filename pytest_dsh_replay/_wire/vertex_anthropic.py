"""dsh stream chunks <-> Anthropic Messages on Vertex AI (``AnthropicVertex``).

Vertex AI serves Anthropic's models with the Messages bodies and events, under a project
and a location, the model in the path and not in the body:
``POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}``
``:streamRawPredict`` streams (SSE, the Messages events), ``...:rawPredict`` answers one
``message``. The body carries ``anthropic_version`` (``vertex-2023-10-16``) instead of
the ``anthropic-version`` header. The encoding is the Anthropic wire's; what differs is
the routes, the model read from the path, the authentication (``Authorization: Bearer
<token>``), where a recorded call goes (`vertex_upstream`: the model stays in the path),
the errors Vertex itself answers (Google's shape, read by `vertex_anthropic_failure`) and
the client. See [docs/wires.md#anthropic-on-vertex](../wires.md#anthropic-on-vertex).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import unquote

from .._format.events import JSONObject
from .anthropic import AnthropicWire, anthropic_failure
from .base import History, InProcess, import_sdk
from .gemini import gemini_failure
from .shapes import FailureRecord
from .vertex import DUMMY_PROJECT, vertex_upstream

__all__ = ["DUMMY_REGION", "WIRE", "AnthropicVertexWire", "vertex_anthropic_failure"]

DUMMY_REGION: Final = "us-east5"
"""The region the fixture's ``AnthropicVertex`` clients and variables name (any is served)."""

_PATH: Final = re.compile(r"/models/(?P<model>[^/:?]+):(?P<method>[A-Za-z]+)")


def vertex_anthropic_failure(
    status: int | None, body: object, headers: Mapping[str, str], *, message: str | None = None
) -> FailureRecord:
    """The dsh failure of an error answered on Vertex AI's Anthropic routes.

    An error of the model is Anthropic's (``{"type": "error", "error": {"type",
    "message"}}``: `anthropic_failure`); one of Vertex AI itself (authentication,
    quota, an unknown model) is Google's (``{"error": {"code", "message", "status"}}``:
    `gemini_failure`). ``message`` is `anthropic_failure`'s.
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and isinstance(error.get("status"), str):
        return gemini_failure(status, body, headers)
    return anthropic_failure(status, body, headers, message=message)


class AnthropicVertexWire(AnthropicWire):
    """Anthropic on Vertex AI (``POST /v1/projects/{p}/locations/{l}/publishers/anthropic/...``)."""

    # AnthropicWire's attributes are typed by their values (two routes): the ignores
    name = "anthropic-vertex"
    routes = tuple(  # type: ignore[assignment]
        f"/v1/projects/{{project}}/locations/{{location}}/publishers/anthropic/models/{{model}}:{verb}"
        for verb in ("streamRawPredict", "rawPredict")
    )
    list_routes = ()
    list_headers = ()
    record_base_url_variable = "DSH_RECORD_ANTHROPIC_VERTEX_BASE_URL"
    sdk = None  # type: ignore[assignment]  # `client` makes the client

    failure = staticmethod(vertex_anthropic_failure)

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """The Anthropic wire's reading, with the path's model (percent-decoded).

        A ``:streamRawPredict`` call streams unless its body says ``"stream": false``.

        Raises:
            BadRequest: As the Anthropic wire's `canonical`.
        """
        request = super().canonical(body, path=path, history=history)
        found = _PATH.search(path.split("?", 1)[0])
        if found is None:
            return request
        out = dict(request)
        out.setdefault("model", unquote(found["model"]))
        out.setdefault("stream", found["method"] == "streamRawPredict")
        return out

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """See `vertex_upstream`; ``model`` replaces the path's, the body goes unchanged."""
        return vertex_upstream(base_url, path, model), body

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """``Authorization: Bearer <token>`` (an OAuth access token, as Vertex AI takes)."""
        return {"authorization": f"Bearer {api_key}"}

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``ANTHROPIC_VERTEX_BASE_URL`` (the root and ``/v1``), the project and region.

        ``ANTHROPIC_VERTEX_PROJECT_ID`` and ``CLOUD_ML_REGION``, which ``AnthropicVertex``
        reads; its access token is the agent's to give
        ([docs/guide/vertex-ai.md#agent-processes](../guide/vertex-ai.md#agent-processes)).
        """
        return {
            "ANTHROPIC_VERTEX_BASE_URL": f"{root}/v1",
            "ANTHROPIC_VERTEX_PROJECT_ID": DUMMY_PROJECT,
            "CLOUD_ML_REGION": DUMMY_REGION,
        }

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """An ``anthropic.AnthropicVertex`` (``AsyncAnthropicVertex``) on the endpoint.

        Given ``region`` (`DUMMY_REGION`), ``project_id``, a dummy ``access_token``
        (so ``google-auth`` is never asked for credentials), ``base_url`` (the in-process
        root and ``/v1``) and the endpoint's ``http_client``; ``options`` override each.

        Raises:
            DshReplayError: ``anthropic`` is not installed.
        """
        module = import_sdk("anthropic")
        cls = module.AsyncAnthropicVertex if asynchronous else module.AnthropicVertex
        options.setdefault("region", DUMMY_REGION)
        options.setdefault("project_id", DUMMY_PROJECT)
        options.setdefault("access_token", http.api_key)
        options.setdefault("base_url", f"{http.url}/v1")
        options.setdefault("http_client", http.http_client(asynchronous))
        return cls(**options)


WIRE: Final = AnthropicVertexWire()
"""Anthropic Messages on Vertex AI."""
