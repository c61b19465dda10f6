"""Azure OpenAI chat completions: the OpenAI wire on Azure's paths, keys and errors.

Azure OpenAI serves the OpenAI chat-completions API under its own paths
([docs/wires.md#azure-openai](../wires.md#azure-openai)):

- ``POST /openai/deployments/{deployment}/chat/completions?api-version=...``: the model
  is the deployment in the path (the body may name none, and a name it has is not
  used); the ``openai`` SDK's ``AzureOpenAI`` client calls this route;
- ``POST /openai/v1/chat/completions``: the v1 form, the model in the body.

A streamed answer is the OpenAI wire's ``chat.completion.chunk`` frames after the chunk
Azure sends first: empty ``choices``, an empty ``id`` and the ``prompt_filter_results``
of its content filter (code that reads ``chunk.choices[0]`` without a check fails on
Azure, and so on replay). A whole answer carries ``prompt_filter_results`` and each
choice's ``content_filter_results``. Errors are Azure's: ``{"error": {"code": "429",
"message"}}``, and a content-filter refusal is the 400 with ``code: "content_filter"``
and its ``innererror``.

`AzureSide` is what both Azure wires (this one and `azure_responses`) share: the
``AzureOpenAI`` client, the variables it reads, the ``api-key`` header, the live URL
of a call (the client's path on the resource's URL, its ``api-version`` kept).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import orjson

from .._format.events import JSONObject, StreamChunk
from .base import (
    BaseWire,
    Failure,
    History,
    InProcess,
    WireError,
    failure_message,
    failure_status,
    import_sdk,
    join_path,
    wire_error,
    with_model,
)
from .framing import SSE
from .openai import (
    OpenAIDecoder,
    OpenAIEncoder,
    OpenAIWire,
    decode_completion,
    openai_completion,
    openai_error,
    openai_failure,
)
from .shapes import FailureRecord

__all__ = [
    "API_VERSION",
    "WIRE",
    "AzureDecoder",
    "AzureEncoder",
    "AzureSide",
    "AzureWire",
    "azure_completion",
    "azure_error",
    "azure_failure",
    "azure_upstream",
]

API_VERSION: Final = "2024-10-21"
"""The ``api-version`` the fixture's ``AzureOpenAI`` client and ``OPENAI_API_VERSION`` give
(any version is served alike)."""

_DEPLOYMENT: Final = re.compile(r"^/openai/deployments/(?P<deployment>[^/?]+)/")
"""A deployments path; its segment is the request's model."""

_SAFE: Final = {"filtered": False, "severity": "safe"}
CONTENT_FILTER_RESULTS: Final[JSONObject] = {
    kind: dict(_SAFE) for kind in ("hate", "self_harm", "sexual", "violence")
}
"""What Azure's content filter says of text it let through, per category."""

PROMPT_FILTER_RESULTS: Final[list[object]] = [
    {"prompt_index": 0, "content_filter_results": CONTENT_FILTER_RESULTS}
]
"""Azure's ``prompt_filter_results`` for a prompt its filter let through."""

PROMPT_FILTER_FRAME: Final = SSE.frame(
    orjson.dumps(
        {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": PROMPT_FILTER_RESULTS,
        }
    )
)
"""The frame Azure streams before the first ``chat.completion.chunk``."""


def deployment_of(path: str) -> str | None:
    """The deployment a request path names (``/openai/deployments/<d>/...``), or ``None``."""
    found = _DEPLOYMENT.match(path)
    return found["deployment"] if found is not None else None


class AzureEncoder(OpenAIEncoder):
    """The OpenAI wire's encoder, its stream opened by Azure's prompt-filter frame."""

    def start(self) -> bytes:
        """`PROMPT_FILTER_FRAME`, then the assistant role delta."""
        return PROMPT_FILTER_FRAME + super().start()


def azure_completion(chunks: list[StreamChunk], *, model: str, completion_id: str) -> JSONObject:
    """The whole ``chat.completion`` (`openai_completion`) with Azure's filter results."""
    out = openai_completion(chunks, model=model, completion_id=completion_id)
    for choice in out["choices"]:
        choice["content_filter_results"] = CONTENT_FILTER_RESULTS
    out["prompt_filter_results"] = PROMPT_FILTER_RESULTS
    return out


def azure_error(failure: Failure) -> WireError:
    """The HTTP error Azure OpenAI answers for a recorded failure.

    A context-window overflow is OpenAI's body (`openai_error`: Azure passes it on);
    ``CONTENT_FILTER`` is the 400 ``{"error": {"code": "content_filter", "message",
    "param": "prompt", "status": 400, "innererror": {"code":
    "ResponsibleAIPolicyViolation", "content_filter_result"}}}``; any other failure
    ``{"error": {"code": "<status>", "message"}}`` with `failure_status`'s status.
    """
    code = failure.get("code")
    if code == "CONTEXT_WINDOW_EXCEEDED":
        return openai_error(failure)
    status = failure_status(failure, overloaded=503)
    error: JSONObject = {"code": str(status), "message": failure_message(failure)}
    if code == "CONTENT_FILTER":
        filtered = {**CONTENT_FILTER_RESULTS, "hate": {"filtered": True, "severity": "high"}}
        error = {
            "code": "content_filter",
            "message": failure_message(failure),
            "param": "prompt",
            "status": status,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": filtered,
            },
        }
    return wire_error(failure, status, {"error": error})


def azure_failure(
    status: int | None, body: object, headers: Mapping[str, str], *, message: str | None = None
) -> FailureRecord:
    """The dsh failure for an Azure OpenAI HTTP error (`openai_failure`, and Azure's ways).

    A body whose ``error.code`` is ``content_filter`` (or whose ``innererror`` is a
    ``ResponsibleAIPolicyViolation``) is ``CONTENT_FILTER``; Azure's ``apim-request-id``
    is the ``requestId`` when there is no ``x-request-id``.
    """
    failure = openai_failure(status, body, headers, message=message)
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        inner = error.get("innererror")
        inner_code = inner.get("code") if isinstance(inner, Mapping) else None
        if error.get("code") == "content_filter" or inner_code == "ResponsibleAIPolicyViolation":
            failure["code"] = "CONTENT_FILTER"
    request_id = headers.get("apim-request-id")
    if request_id and "requestId" not in failure:
        failure["requestId"] = request_id
    return failure


class AzureDecoder(OpenAIDecoder):
    """The OpenAI decoder, reading Azure's chunks: the empty ``id`` of its first is no id."""

    def feed(self, chunk: Mapping[str, object]) -> list[StreamChunk]:
        """The dsh chunks for one ``chat.completion.chunk`` (or prompt-filter) object."""
        if chunk.get("id") == "":
            chunk = {key: value for key, value in chunk.items() if key != "id"}
        return super().feed(chunk)


def azure_upstream(base_url: str, path: str, body: bytes, model: str | None) -> tuple[str, bytes]:
    """The live URL and body of an Azure OpenAI call.

    The client's path goes on the resource's URL: a base URL that already ends in the
    ``/openai`` part of the API (``https://r.openai.azure.com/openai``, ``.../openai/v1``)
    is cut there, so the path is not doubled. The base URL's query is kept and its
    parameters win over the client's (``?api-version=2025-04-01-preview`` on the base URL
    is the version every recorded call uses). ``model`` replaces a deployments path's
    deployment (the body goes as it is), else the body's ``model``.
    """
    parts = urlsplit(base_url)
    base_path = parts.path.rstrip("/")
    cut = f"{base_path}/".rfind("/openai/")
    if cut >= 0:
        base_path = base_path[:cut]
    base = urlunsplit((parts.scheme, parts.netloc, base_path, parts.query, parts.fragment))
    deployment = deployment_of(path)
    if model is None:
        return join_path(base, path), body
    if deployment is not None:
        path = path.replace(f"/deployments/{deployment}/", f"/deployments/{model}/", 1)
        return join_path(base, path), body
    return join_path(base, path), with_model(body, model)


def _jwt(token: str) -> bool:
    """Whether ``token`` looks like a Microsoft Entra (AAD) access token: a JWT."""
    return token.startswith("eyJ") and token.count(".") == 2


class AzureSide(BaseWire):
    """What the Azure OpenAI wires share: client, variables, key header, live URL.

    Both the chat-completions wire (`AzureWire`) and the Responses wire
    (`AzureResponsesWire`) subclass it before their OpenAI wire; it overrides
    `upstream` and `client` whole, so the OpenAI wires' ``upstream_path`` and ``sdk``
    are not read.
    """

    record_base_url_variable: str | None = "DSH_RECORD_AZURE_BASE_URL"
    key_headers: tuple[str, ...] = ("api-key",)

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """See `azure_upstream`."""
        return azure_upstream(base_url, path, body, model)

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """``api-key: <key>``; an Entra ID (AAD) token (a JWT) as ``Authorization: Bearer``."""
        if _jwt(api_key):
            return {"authorization": f"Bearer {api_key}"}
        return {"api-key": api_key}

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``AZURE_OPENAI_ENDPOINT`` (the root), ``AZURE_OPENAI_API_KEY``, ``OPENAI_API_VERSION``.

        What ``AzureOpenAI()`` reads when it is given no arguments (`API_VERSION`).
        """
        return {
            "AZURE_OPENAI_ENDPOINT": root,
            "AZURE_OPENAI_API_KEY": api_key,
            "OPENAI_API_VERSION": API_VERSION,
        }

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """An ``openai.AzureOpenAI`` (``AsyncAzureOpenAI``) on the endpoint in process.

        ``azure_endpoint`` is the in-process root, ``api_version`` `API_VERSION`, the
        key the dummy key (unless ``options`` gives ``api_key``, ``azure_ad_token`` or
        ``azure_ad_token_provider``), ``http_client`` the endpoint's. The one client
        calls both Azure wires: ``client.chat.completions`` the deployments route,
        ``client.responses`` ``/openai/responses``.

        Args:
            http: The endpoint's in-process transports.
            options: Passed to the client's constructor (``azure_deployment``,
                ``max_retries``, ...).
            asynchronous: An ``AsyncAzureOpenAI``.

        Raises:
            DshReplayError: ``openai`` is not installed.
        """
        openai = import_sdk("openai")
        cls = openai.AsyncAzureOpenAI if asynchronous else openai.AzureOpenAI
        if not {"api_key", "azure_ad_token", "azure_ad_token_provider"} & options.keys():
            options["api_key"] = http.api_key
        options.setdefault("api_version", API_VERSION)
        if "base_url" not in options:
            options.setdefault("azure_endpoint", http.url)
        return cls(http_client=http.http_client(asynchronous), **options)


class AzureWire(AzureSide, OpenAIWire):
    """Azure OpenAI chat completions (``/openai/deployments/{deployment}/chat/completions``)."""

    name = "azure"
    routes = ("/openai/deployments/{deployment}/chat/completions", "/openai/v1/chat/completions")
    list_routes = ("/openai/models", "/openai/v1/models")

    error = staticmethod(azure_error)
    failure = staticmethod(azure_failure)
    decoder = AzureDecoder
    decode_whole = staticmethod(decode_completion)
    stream_encoder = AzureEncoder
    completion = staticmethod(azure_completion)

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """The body, its ``model`` the path's deployment when the path names one.

        Raises:
            BadRequest: ``messages`` or ``tools`` is not an array of objects (400).
        """
        read = super().canonical(body, path=path, history=history)
        deployment = deployment_of(path)
        return read if deployment is None else {**read, "model": deployment}


WIRE: Final = AzureWire()
"""The Azure OpenAI chat-completions wire."""
