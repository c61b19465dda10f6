"""The OpenAI Responses API on Azure OpenAI: the Responses wire on Azure's paths.

``POST /openai/responses?api-version=...`` (what ``AzureOpenAI().responses.create``
calls) and the v1 form ``POST /openai/v1/responses``: the model is the body's (Azure
names the deployment there), the events and whole answers are the Responses wire's
([docs/wires.md#azure-openai](../wires.md#azure-openai)). The client, its variables, the
``api-key`` header and the live URL are the Azure chat wire's (`AzureSide`): the fixture's
``client("azure")`` and ``client("azure-responses")`` are the same ``AzureOpenAI``.
"""

from __future__ import annotations

from typing import Final

from .azure import AzureSide, azure_failure
from .responses import ResponsesWire

__all__ = ["WIRE", "AzureResponsesWire"]


class AzureResponsesWire(AzureSide, ResponsesWire):
    """The Responses API on Azure OpenAI (``POST /openai/responses``)."""

    name = "azure-responses"
    routes = ("/openai/responses", "/openai/v1/responses")
    list_routes = ()

    failure = staticmethod(azure_failure)


WIRE: Final = AzureResponsesWire()
"""The Azure OpenAI Responses wire."""
