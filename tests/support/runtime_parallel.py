"""A dsh runtime task with two parallel spawned children of equal speed, then a fork.

The primary remembers a codeword, then starts, in one answer, two spawned children with
the same kind of task (each lists the text files of its working directory with the
runtime's ``glob`` tool, then answers ``TOOL_OK``) and a fork child (it answers with the
codeword it inherited). :func:`parallel_model` is the live model's script, a
``ScriptedModel``: each answer depends only on the request, never on arrival order.

The children run at once and finish in whichever order the scheduler gives, so their
creation order and the order of their "finished" notices vary between runs; what the
model is asked does not, with one hold: the primary's answer to its tool results is
held until every child's notice has reached the primary's inbox (:class:`NoticeHold`,
which reads the runtime's live log of the primary), so all notices reach the primary
in one request, whatever the machine's load. That request's notices come in their
settling order, which varies.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ScriptedRequest, ToolCall
from support.runtime_agent import PRIMARY_ID, TIMEOUT_S, WARMUP, _fork_answer, _said

MAIN_TASK = "MAIN_TASK: delegate to two tool-using spawn children and a fork child."
PROMPTS = [WARMUP, MAIN_TASK]
"""What the test sends the primary, in order."""

CHILDREN = 3
"""How many children the primary starts: two spawned, one forked."""

_TOOL_TASK = "TOOL_TASK"


def _task(description: str, prompt: str) -> str:
    return json.dumps({"description": description, "prompt": prompt})


_DELEGATION = [
    ToolCall("subagent", _task("Alpha", f"{_TOOL_TASK} alpha: list the text files")),
    ToolCall("subagent", _task("Beta", f"{_TOOL_TASK} beta: list the text files")),
    ToolCall("subagent_fork", _task("Review", "FORK_TASK: what is the codeword?")),
]


class NoticeHold:
    """Holds an answer until the runtime's primary has every child's notice in its inbox.

    :meth:`watch` names the sessions root of the run (the runtime writes the primary's
    log there as it goes); :meth:`wait` returns once that log holds ``count``
    ``subagent-settled`` notices spliced into the inbox, or after ``timeout`` seconds (the
    recording then shows the notices where they came, and the test says so).
    """

    def __init__(self, count: int = CHILDREN, timeout: float = TIMEOUT_S):
        self.count = count
        self.timeout = timeout
        self._root: Path | None = None
        self._lock = threading.Lock()

    def watch(self, root: Path) -> None:
        """Read the primary's log under ``root`` from now on."""
        with self._lock:
            self._root = root

    def spliced(self) -> int:
        """How many settled notices the primary's live log shows spliced so far."""
        with self._lock:
            root = self._root
        if root is None:
            return 0
        found = 0
        for log in root.glob(f"*/{PRIMARY_ID}/session.v4.jsonl"):
            for line in log.read_text(encoding="utf-8").splitlines():
                if '"agent/inbox/spliced"' in line:
                    found += line.count('"kind":"subagent-settled"')
        return found

    def wait(self) -> None:
        """Return once every notice is spliced (bounded by ``timeout``)."""
        deadline = time.monotonic() + self.timeout
        while self.spliced() < self.count and time.monotonic() < deadline:
            time.sleep(0.01)


HOLD = NoticeHold()
"""The hold the tests' model uses (one test at a time per process)."""


def _delegated(request: ScriptedRequest) -> Answer:
    HOLD.wait()
    return Answer(text="DELEGATED")


def parallel_model() -> ScriptedModel:
    """The scripted model's answers for this task (any wire's request).

    A child's tool result gets ``TOOL_OK``, the primary's (the children started)
    ``DELEGATED`` once every child's notice reached it, the notices ``NOTED``; a
    child's task calls ``glob``, the fork answers with the codeword, the warm-up is
    acknowledged, and the main task starts the three children in one answer.
    """

    def child(request: ScriptedRequest) -> bool:
        return any(_TOOL_TASK in text for role, text in request.messages if role == "user")

    return ScriptedModel(
        [
            Rule(Answer(text="TOOL_OK"), when=lambda r: bool(r.tool_results) and child(r)),
            Rule(_delegated, when=lambda r: bool(r.tool_results)),
            Rule(Answer(text="NOTED"), when=lambda r: _said(r).startswith("Background subagent")),
            Rule(
                Answer(tool_calls=[ToolCall("glob", {"pattern": "*.txt"})]),
                when=lambda r: _said(r).startswith(_TOOL_TASK),
            ),
            Rule(_fork_answer, when=lambda r: _said(r).startswith("FORK_TASK")),
            Rule(Answer(tool_calls=_DELEGATION), when=lambda r: MAIN_TASK in _said(r)),
            Rule(
                Answer(reasoning="The user wants me to remember it.", text="OK remembered"),
                when=lambda r: _said(r).startswith("WARMUP"),
            ),
        ],
        default=Answer(text="UNPLANNED"),
    )
