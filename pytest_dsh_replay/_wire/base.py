"""What every wire shares: the HTTP client library the provider SDKs use."""

from __future__ import annotations

from typing import Any

from .._errors import DshReplayError

__all__ = ["httpx_module"]


def httpx_module() -> Any:
    """The ``httpx`` flavour the installed SDKs use: ``httpx2`` when present, else ``httpx``.

    Raises:
        DshReplayError: Neither is installed (install ``openai`` or ``anthropic``).
    """
    try:
        import httpx2
    except ImportError:
        try:
            import httpx  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise DshReplayError(
                "the in-process clients need httpx (it comes with the openai and anthropic "
                "SDKs): pip install 'pytest-dsh-replay[record]'"
            ) from None
        return httpx
    return httpx2
