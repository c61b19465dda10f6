"""dsh stream chunks <-> Gemini on Vertex AI (``google-genai`` with ``vertexai=True``).

Vertex AI serves the Gemini API's bodies (``generateContent``, ``GenerateContentResponse``)
under a project and a location, with the model in the path:
``POST /v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}``
``:streamGenerateContent?alt=sse`` streams, ``...:generateContent`` answers one object
(also under ``/v1/``, and without the ``projects/.../locations/...`` part in express mode,
a Vertex API key). The encoding, decoding and errors are the Gemini wire's; what differs
is the routes, the model list (``GET /v1beta1/publishers/google/models``,
``publisherModels``), the authentication (``Authorization: Bearer <token>``), where a
recorded call goes (`vertex_upstream`) and the client. See
[docs/wires.md#vertex](../wires.md#vertex).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from .._format.events import JSONObject
from .base import InProcess, import_sdk
from .gemini import GeminiWire

__all__ = ["DUMMY_LOCATION", "DUMMY_PROJECT", "WIRE", "VertexWire", "vertex_upstream"]

DUMMY_PROJECT: Final = "dsh-replay"
"""The Google Cloud project the fixture's Vertex clients and variables name (any is served)."""

DUMMY_LOCATION: Final = "us-central1"
"""The location the fixture's Vertex clients and variables name (any is served)."""

_VERSIONS: Final = ("v1beta1", "v1")
_PROJECT_PATH: Final = "/projects/{project}/locations/{location}"
_VERSION_HEAD: Final = re.compile(r"/(v1beta1|v1)(?=/)")
_VERSION_TAIL: Final = re.compile(r"/(v1beta1|v1)\Z")
_MODEL: Final = re.compile(r"/models/[^/:?]+:")


def vertex_upstream(base_url: str, path: str, model: str | None, *, stream_query: str = "") -> str:
    """The live URL of a Vertex call: the client's path joined to ``base_url``.

    The project and location of the live call are the base URL's when it names them
    (``https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1``:
    the client's ``/publishers/...`` part is appended), else the client's path is kept
    whole (``https://us-central1-aiplatform.googleapis.com``); a base ending in a version
    (``/v1``) replaces the path's version (never doubled). ``model`` replaces the path's
    model when set; ``stream_query`` (``alt=sse``) is added to a call whose path ends in
    ``:streamGenerateContent`` when its query lacks it. The base URL's query is kept.

    Args:
        base_url: The configured live base URL of the wire.
        path: The path (and query) the client called.
        model: The model that replaces the one in the path, if any.
        stream_query: The query a streamed Gemini call must carry (``""``: none).
    """
    parts = urlsplit(base_url)
    base = parts.path.rstrip("/")
    bare, _, query = path.partition("?")
    publishers = bare.find("/publishers/")
    if "/projects/" in f"{base}/" and publishers >= 0:
        bare = bare[publishers:]
    elif _VERSION_TAIL.search(base) and (head := _VERSION_HEAD.match(bare)) is not None:
        bare = bare[head.end() :]
    if model is not None:
        bare = _MODEL.sub(lambda _: f"/models/{model}:", bare, count=1)
    query = "&".join(q for q in (parts.query, query) if q)
    if stream_query and bare.endswith(":streamGenerateContent") and "alt=" not in query:
        query = f"{query}&{stream_query}" if query else stream_query
    return urlunsplit((parts.scheme, parts.netloc, base + bare, query, parts.fragment))


def _routes() -> tuple[str, ...]:
    models = "/publishers/google/models/{model}"
    return tuple(
        f"/{version}{scope}{models}:{method}"
        for scope in (_PROJECT_PATH, "")
        for version in _VERSIONS
        for method in ("streamGenerateContent", "generateContent")
    )


class VertexWire(GeminiWire):
    """Gemini on Vertex AI (``POST /v1beta1/projects/{p}/locations/{l}/publishers/google/...``)."""

    name = "vertex"
    routes = _routes()
    list_routes = ("/v1beta1/publishers/google/models", "/v1/publishers/google/models")
    list_headers = ()  # type: ignore[assignment]  # GeminiWire's is typed by its two values
    record_base_url_variable = "DSH_RECORD_VERTEX_BASE_URL"

    def model_list(self, names: list[str]) -> JSONObject:
        """``{"publisherModels": [{"name": "publishers/google/models/<n>", ...}]}``."""
        return {
            "publisherModels": [
                {
                    "name": f"publishers/google/models/{name}",
                    "versionId": "001",
                    "openSourceCategory": "PROPRIETARY",
                    "launchStage": "GA",
                }
                for name in names
            ]
        }

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """See `vertex_upstream` (``alt=sse`` for a stream); the body goes unchanged."""
        return vertex_upstream(base_url, path, model, stream_query="alt=sse"), body

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """``Authorization: Bearer <token>`` (an OAuth access token, as Vertex AI takes)."""
        return {"authorization": f"Bearer {api_key}"}

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``GOOGLE_VERTEX_BASE_URL`` (the root), the project and the location.

        ``GOOGLE_CLOUD_PROJECT`` and ``GOOGLE_CLOUD_LOCATION``. ``google-genai`` reads
        ``GOOGLE_VERTEX_BASE_URL`` for ``Client(vertexai=True)``.
        ``GOOGLE_GENAI_USE_VERTEXAI`` is not set: it would turn every plain
        ``genai.Client()`` of the agent process into a Vertex client
        ([docs/guide/vertex-ai.md#agent-processes](../guide/vertex-ai.md#agent-processes)).
        """
        return {
            "GOOGLE_VERTEX_BASE_URL": root,
            "GOOGLE_CLOUD_PROJECT": DUMMY_PROJECT,
            "GOOGLE_CLOUD_LOCATION": DUMMY_LOCATION,
        }

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """A ``google.genai.Client(vertexai=True)`` on the endpoint in process, or its ``.aio``.

        As the Gemini wire's client, with ``vertexai=True``, ``project`` and ``location``
        (`DUMMY_PROJECT`, `DUMMY_LOCATION` unless ``options`` name them) and
        ``credentials`` that hold a token and never expire
        (``google.oauth2.credentials.Credentials(token=<dummy>)``), so ``google-auth``
        neither looks for application default credentials nor refreshes a token: no
        call leaves the process.

        Args:
            http: The endpoint's in-process transports.
            options: Passed to ``google.genai.Client`` (``http_options`` keeps its other
                settings, ``credentials`` replaces the dummy ones).
            asynchronous: The async client.

        Raises:
            DshReplayError: ``google-genai`` (or ``google-auth``) is not installed.
        """
        oauth2 = import_sdk("google.oauth2.credentials", "google-auth")
        options.setdefault("vertexai", True)
        options.setdefault("project", DUMMY_PROJECT)
        options.setdefault("location", DUMMY_LOCATION)
        if options.get("api_key") is None:
            options["api_key"] = None  # a key and credentials exclude each other
            options.setdefault("credentials", oauth2.Credentials(token=http.api_key))
        return super().client(http, options, asynchronous=asynchronous)


WIRE: Final = VertexWire()
"""Gemini on Vertex AI."""
