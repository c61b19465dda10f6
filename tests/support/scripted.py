"""The project's live-model script, as rules of the package's ``ScriptedModel``.

:func:`directive_model` answers the small script the example agents write into their
prompts (the tests' own convention, read from the request alone, so concurrent callers
get the same answers on every run):

- a request whose last messages are tool results gets the text
  ``"tool results: <result>; <result>"``;
- ``[[tool NAME {"json": "arguments"}]]`` in the prompt calls tool ``NAME`` (several make
  parallel calls), with the reasoning ``"calling NAME"`` and no text;
- ``[[fail STATUS]]`` fails the first request with that prompt with HTTP ``STATUS``
  (429 with ``Retry-After: 1``); later ones go on;
- ``[[think TEXT]]`` adds the reasoning ``TEXT``;
- anything else gets ``"echo: <prompt>"`` (directives removed).

:func:`fail_once` is the ``[[fail]]`` rule alone, for other scripts
(``runtime_agent.runtime_model``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping

from pytest_dsh_replay import (
    Answer,
    Hang,
    ProviderFailure,
    Rule,
    ScriptedModel,
    ScriptedRequest,
    ToolCall,
)

_DIRECTIVE = re.compile(r"\[\[(tool|fail|think)\b\s*(.*?)\]\]", re.DOTALL)
_FAIL = re.compile(r"\[\[fail (\d{3})\]\]")
RETRY_AFTER = {429: 1.0}  # seconds a failure of this status asks the client to wait


def fail_once(
    message: Callable[[int], str] = lambda status: "",
    retry_after: Mapping[int, float] = RETRY_AFTER,
) -> Rule:
    """A rule: the first request whose prompt holds ``[[fail STATUS]]`` fails with it.

    ``retry_after``: per status, the seconds its failure asks the client to wait
    (``Retry-After``); a status not in it asks nothing (the client's own backoff).
    """
    failed: set[str] = set()
    lock = threading.Lock()

    def first_time(request: ScriptedRequest) -> bool:
        if _FAIL.search(request.prompt) is None:
            return False
        with lock:
            new = request.prompt not in failed
            failed.add(request.prompt)
        return new

    def failure(request: ScriptedRequest) -> ProviderFailure:
        found = _FAIL.search(request.prompt)
        status = int(found.group(1)) if found else 500
        return ProviderFailure(status, message(status), retry_after=retry_after.get(status))

    return Rule(failure, when=first_time)


def _answer(request: ScriptedRequest, pieces: int) -> Answer | ProviderFailure | Hang:
    prompt = request.prompt
    directives = _DIRECTIVE.findall(prompt)
    calls = []
    for kind, argument in directives:
        if kind == "tool":
            name, _, arguments = argument.strip().partition(" ")
            calls.append(ToolCall(name, arguments.strip() or "{}"))
    if calls:
        reasoning = "; ".join(f"calling {call.name}" for call in calls)
        return Answer(reasoning=reasoning, tool_calls=calls, pieces=pieces)
    plain = " ".join(_DIRECTIVE.sub(" ", prompt).split())
    reasoning = " ".join(arg.strip() for kind, arg in directives if kind == "think")
    return Answer(text=f"echo: {plain}", reasoning=reasoning, pieces=pieces)


def directive_model(*, pieces: int = 3) -> ScriptedModel:
    """A fresh model with the directive script (its ``[[fail]]`` memory is its own)."""
    return ScriptedModel(
        [
            Rule(
                lambda r: Answer(text="tool results: " + "; ".join(r.tool_results), pieces=pieces),
                when=lambda r: bool(r.tool_results) and not r.prompt,
            ),
            fail_once(),
            Rule(lambda r: _answer(r, pieces)),
        ]
    )
