"""The table of wires: which wire a request path speaks, and the routes served.

The endpoint serves each wire's routes (:attr:`~.base.Wire.routes`, ``POST``) and model
lists (:attr:`~.base.Wire.list_routes`, ``GET``); adding a wire is one wire module and
one entry in :data:`WIRES`. A route's ``{model}`` segment matches any model name (the
Gemini routes carry the model in the path).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Final

from . import anthropic, gemini, openai, responses
from .base import Wire

__all__ = ["ROUTES", "WIRES", "closest_route", "list_wire", "served_routes", "wire_for"]

WIRES: Final[tuple[Wire, ...]] = (openai.WIRE, responses.WIRE, anthropic.WIRE, gemini.WIRE)
"""Every wire the endpoint speaks."""

ROUTES: Final[dict[str, Wire]] = {
    route: wire for wire in WIRES for route in wire.routes if "{" not in route
}
"""Request path (no query, no trailing slash) -> the wire it speaks (fixed paths)."""

_TEMPLATES: Final[tuple[tuple[re.Pattern[str], Wire], ...]] = tuple(
    (re.compile(re.escape(route).replace(re.escape("{model}"), "[^/:]+") + r"\Z"), wire)
    for wire in WIRES
    for route in wire.routes
    if "{" in route
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

    Where wires list models on one path (``/v1/models``), a request with an
    ``anthropic-version`` header gets the Anthropic list, one with Google's
    ``x-goog-api-key`` or ``x-goog-api-client`` header the Gemini list, any other the
    first wire's.
    """
    wires = _LISTS.get(_bare(path))
    if not wires:
        return None
    if "anthropic-version" in headers:
        return next((w for w in wires if w.name == "anthropic"), wires[0])
    if "x-goog-api-key" in headers or "x-goog-api-client" in headers:
        return next((w for w in wires if w.name == "gemini"), wires[0])
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
