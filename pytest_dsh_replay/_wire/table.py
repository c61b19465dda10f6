"""The table of wires: which wire a request path speaks, and the routes served.

The endpoint serves each wire's routes (`routes`, ``POST``) and
model lists (`list_routes`, ``GET``); adding a wire is one wire
module and one entry in `WIRES`
([docs/architecture.md#adding-a-wire](../architecture.md#adding-a-wire)). A route's
placeholder segment (``{model}``, ``{project}``, any ``{name}``) matches one path segment;
where the route goes on with a ``:`` right after it, up to that ``:`` (the Gemini routes
carry the model in the path, ``models/{model}:verb``), else ``:`` included (a Bedrock model
id, ``anthropic.claude-...-v1:0``, as the ``anthropic`` SDK sends it).
What the layers above need of all wires at once is here too: the environment that points
clients at the endpoint (`endpoint_env`), the variables whose URLs are secrets while
recording (`RECORD_URL_VARIABLES`), a wire by its name (`wire_named`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Final

from .._errors import UnknownWireError
from .._format.redact import RECORD_URL_VARIABLES as _BASE_URL_VARIABLES
from .._format.redact import Redactor
from .._format.redact import recording_redactor as _recording_redactor
from . import (
    anthropic,
    anthropic_bedrock,
    azure,
    azure_responses,
    bedrock,
    gemini,
    ollama,
    openai,
    responses,
    vertex,
    vertex_anthropic,
)
from .base import Wire

__all__ = [
    "RECORD_URL_VARIABLES",
    "ROUTES",
    "WIRES",
    "closest_route",
    "endpoint_env",
    "list_wire",
    "recording_redactor",
    "served_routes",
    "wire_for",
    "wire_named",
]

WIRES: Final[tuple[Wire, ...]] = (
    openai.WIRE,
    responses.WIRE,
    anthropic.WIRE,
    gemini.WIRE,
    azure.WIRE,
    azure_responses.WIRE,
    bedrock.WIRE,
    ollama.WIRE,
    vertex.WIRE,
    vertex_anthropic.WIRE,
    anthropic_bedrock.WIRE,
)
"""Every wire the endpoint speaks."""

ROUTES: Final[dict[str, Wire]] = {
    route: wire for wire in WIRES for route in wire.routes if "{" not in route
}
"""Request path (no query, no trailing slash) -> the wire it speaks (fixed paths)."""

_PLACEHOLDER: Final = re.compile(r"\{\w+\}")
"""A route's placeholder segment (``{model}``, ``{project}``, ...)."""


def _template(route: str) -> re.Pattern[str]:
    """The pattern of a route with placeholders: each matches one segment.

    A placeholder the route follows with ``:`` stops at the first ``:`` of the segment.
    """
    first, *rest = _PLACEHOLDER.split(route)
    pattern = re.escape(first)
    for after in rest:
        pattern += ("[^/:]+" if after.startswith(":") else "[^/]+") + re.escape(after)
    return re.compile(pattern + r"\Z")


_TEMPLATES: Final[tuple[tuple[re.Pattern[str], Wire], ...]] = tuple(
    (_template(route), wire) for wire in WIRES for route in wire.routes if "{" in route
)

_LISTS: Final[dict[str, tuple[Wire, ...]]] = {}
for _wire in WIRES:
    for _route in _wire.list_routes:
        _LISTS[_route] = (*_LISTS.get(_route, ()), _wire)


def _bare(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/") or "/"


def wire_for(path: str) -> Wire | None:
    """The wire a ``POST`` path speaks (a query string and a trailing ``/`` are ignored)."""
    bare = _bare(path)
    wire = ROUTES.get(bare)
    if wire is not None:
        return wire
    for pattern, candidate in _TEMPLATES:
        if pattern.match(bare):
            return candidate
    return None


def list_wire(path: str, headers: Mapping[str, str]) -> Wire | None:
    """The wire whose model list a ``GET`` path is, or ``None``.

    Where wires list models on one path (``/v1/models``), a request with one of a
    wire's `list_headers` gets that wire's list (an
    ``anthropic-version`` header the Anthropic list, Google's ``x-goog-api-key`` or
    ``x-goog-api-client`` the Gemini list), any other the first wire's.
    """
    wires = _LISTS.get(_bare(path))
    if not wires:
        return None
    for wire in wires:
        if any(name in headers for name in wire.list_headers):
            return wire
    return wires[0]


def served_routes() -> list[str]:
    """Every route served, as ``"METHOD path"``, model calls first."""
    posts = [f"POST {route}" for wire in WIRES for route in wire.routes]
    gets = [f"GET {route}" for route in _LISTS]
    return [*posts, *gets]


def closest_route(method: str, path: str) -> str | None:
    """The served route most like ``METHOD path`` (``None`` when none is close)."""
    asked = f"{method.upper()} {_bare(path)}"
    found = difflib.get_close_matches(asked, served_routes(), n=1, cutoff=0.5)
    return found[0] if found else None


def wire_named(name: str) -> Wire:
    """The wire called ``name`` (`name`).

    Raises:
        UnknownWireError: No wire has that name (the message names every wire).
    """
    for wire in WIRES:
        if wire.name == name:
            return wire
    known = ", ".join(repr(wire.name) for wire in WIRES)
    raise UnknownWireError(f"no wire is called {name!r}; the wires are {known}")


def endpoint_env(root: str, api_key: str) -> dict[str, str]:
    """Every wire's variables that point its clients at the endpoint at ``root``.

    Args:
        root: The endpoint's root URL (``http://127.0.0.1:<port>``).
        api_key: The dummy key the variables give.
    """
    env: dict[str, str] = {}
    for wire in WIRES:
        env.update(wire.endpoint_env(root, api_key))
    return env


def _record_url_variables() -> tuple[str, ...]:
    named = (wire.record_base_url_variable for wire in WIRES)
    return tuple(dict.fromkeys([*_BASE_URL_VARIABLES, *(name for name in named if name)]))


RECORD_URL_VARIABLES: Final = _record_url_variables()
"""The variables that hold where recording calls go (their credentials are secrets):
``DSH_RECORD_BASE_URL`` and each wire's `record_base_url_variable`."""


def recording_redactor(environ: Mapping[str, str] | None = None) -> Redactor:
    """The redactor recordings use, knowing every wire's base URL variable.

    See `recording_redactor`; the base URLs read are those of
    `RECORD_URL_VARIABLES`.
    """
    return _recording_redactor(environ, url_variables=_record_url_variables())
