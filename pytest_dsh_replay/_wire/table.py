"""The table of wires: which wire a request path speaks.

The endpoint serves each wire's routes (:attr:`~.base.Wire.routes`); adding a wire is one
wire module and one entry in :data:`WIRES`.
"""

from __future__ import annotations

from typing import Final

from . import anthropic, openai
from .base import Wire

__all__ = ["ROUTES", "WIRES", "wire_for"]

WIRES: Final[tuple[Wire, ...]] = (openai.WIRE, anthropic.WIRE)
"""Every wire the endpoint speaks."""

ROUTES: Final[dict[str, Wire]] = {route: wire for wire in WIRES for route in wire.routes}
"""Request path (no query, no trailing slash) -> the wire it speaks."""


def wire_for(path: str) -> Wire | None:
    """The wire a request path speaks (a query string and a trailing ``/`` are ignored)."""
    return ROUTES.get(path.split("?", 1)[0].rstrip("/") or "/")
