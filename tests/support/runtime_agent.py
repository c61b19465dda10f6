"""The real dsh runtime as the code under test: a small driver and the model's plans.

The runtime (PyPI ``deepseek-harness-runtime-bin``, driven through its Python SDK
``deepseek-harness-sdk``, the ``e2e`` extra) is started with everything private to one
test: ``DSH_HOME``, the working directory and the sessions root live in the test's
temporary directory, telemetry is off, and session logs are patched to plain JSONL under
that root. Its model is whatever ``base_url`` points at: ``dsh_replay.base_url`` in the
tests (the recording proxy under ``--dsh-record``, the replay endpoint otherwise), or
the scripted model served on loopback directly.

:class:`RuntimeDriver` runs prompts in the primary session ``sess-main`` and waits,
bounded, until every child the runtime started has finished and its notice reached the
parent. :func:`runtime_model` is the live model's script, a ``ScriptedModel`` of the package:
each answer depends only on the request it answers, never on arrival order, so
concurrent children get the same answers on every run.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ScriptedRequest, ToolCall
from support.scripted import RETRY_AFTER, fail_once

PRIMARY_ID = "sess-main"
PROVIDER = "deepseek-official"
MODEL = "deepseek-flash"  # in the runtime's catalog (its SDK default is not)
# The runtime's OpenAI-compatible route: its llm-pi-ai provider, configured by a patch.
OPENAI_PROVIDER = "fake-openai"
OPENAI_MODEL = "fake-model"
OPENAI_KEY_VARIABLE = "FAKE_OPENAI_API_KEY"
TIMEOUT_S = 30.0  # the longest a test waits for the runtime, per step

WARMUP = "WARMUP: remember the codeword MARMALADE."
SPAWN_TASK = "SPAWN_TASK: reply SPAWN_OK"
SLOW_SPAWN_TASK = "SPAWN_TASK (slow): reply SPAWN_OK"
FORK_TASK = "FORK_TASK: what is the codeword?"
TOOL_TASK = "TOOL_TASK {name}: look for *.nothing files, then report"
REVIEW_TASK = "REVIEW_TASK: review what the workers found"
PARALLEL_TASK = "MAIN_TASK: delegate to two tool workers, then fork a reviewer."


def runtime_missing() -> str | None:
    """Why the runtime cannot run here (``None`` when it can)."""
    try:
        import deepseek_harness  # noqa: F401
        from deepseek_harness_runtime import bundled_runtime_path

        bundled_runtime_path()
    except (ImportError, FileNotFoundError, OSError, ValueError) as error:
        return (
            "the dsh runtime is not installed here (the e2e extra installs "
            f"deepseek-harness-runtime-bin on linux x86_64 only): {error}"
        )
    return None


def require_runtime() -> None:
    """Skip the calling test, with the reason, where the runtime cannot run."""
    reason = runtime_missing()
    if reason is not None:
        pytest.skip(reason)


# --- the live model's plan ----------------------------------------------------------------


def _task(description: str, prompt: str) -> str:
    return json.dumps({"description": description, "prompt": prompt})


SCENARIOS: dict[str, list[str]] = {
    "runtime-spawn": [WARMUP, "MAIN_TASK: delegate to a spawn child."],
    "runtime-fork": [WARMUP, "MAIN_TASK: delegate to a fork child."],
    "runtime-mixed": [WARMUP, "MAIN_TASK: delegate to a spawn and a fork child."],
    "runtime-retry": [f"{WARMUP} [[fail 429]]", "MAIN_TASK: delegate to a flaky spawn child."],
    "runtime-openai": [WARMUP, "MAIN_TASK: delegate to a spawn and a fork child."],
    "runtime-parallel": [WARMUP, PARALLEL_TASK],
    "runtime-parallel-openai": [WARMUP, PARALLEL_TASK],
}
"""The prompts each example scenario sends to the primary, in order."""

ROUTES: dict[str, str] = {"runtime-openai": "openai", "runtime-parallel-openai": "openai"}
"""The scenarios whose runtime reaches its model over the OpenAI route (others: Messages)."""

_DELEGATIONS: dict[str, list[ToolCall]] = {
    "delegate to a spawn child.": [ToolCall("subagent", _task("Spawn check", SPAWN_TASK))],
    "delegate to a fork child.": [ToolCall("subagent_fork", _task("Fork check", FORK_TASK))],
    "delegate to a spawn and a fork child.": [
        ToolCall("subagent", _task("Spawn check", SLOW_SPAWN_TASK)),
        ToolCall("subagent_fork", _task("Fork check", FORK_TASK)),
    ],
    "delegate to a flaky spawn child.": [
        ToolCall("subagent", _task("Flaky check", f"{SPAWN_TASK} [[fail 500]]"))
    ],
    # Two spawn children of equal speed that each use a tool: their notices reach the
    # parent close together (issue 40); the parent then forks a reviewer.
    PARALLEL_TASK.removeprefix("MAIN_TASK: "): [
        ToolCall("subagent", _task("Worker alpha", TOOL_TASK.format(name="alpha"))),
        ToolCall("subagent", _task("Worker beta", TOOL_TASK.format(name="beta"))),
    ],
    # The README's example.
    "Ask a fork child for the codeword and a spawn child to say hi.": [
        ToolCall("subagent_fork", _task("Fork check", FORK_TASK)),
        ToolCall("subagent", _task("Spawn check", SLOW_SPAWN_TASK)),
    ],
}
_CODEWORD = re.compile(r"codeword ([A-Z]{3,})")
_SLOW_S = 0.3  # the slow spawn child answers this late, so its notice comes last


def _is_receipt(note: Any, message_id: str) -> bool:
    """Whether a notification is the primary's inbox taking the prompt ``message_id``."""
    if note.method != "session.event" or note.payload.get("sessionId") != PRIMARY_ID:
        return False
    event = note.payload.get("event")
    data = event.get("data") if isinstance(event, dict) else None
    inserted = data.get("inserted") if isinstance(data, dict) else None
    return (
        isinstance(event, dict)
        and event.get("type") == "agent/inbox/spliced"
        and isinstance(inserted, list)
        and any(isinstance(m, dict) and m.get("id") == message_id for m in inserted)
    )


_CONTEXT = "Current runtime context."


def _said(request: ScriptedRequest) -> str:
    """The user's own words last sent: over the OpenAI route the runtime's context is a
    user message of its own after them (over Messages, a later block of the same one)."""
    for role, text in reversed(request.messages):
        if role == "user" and not text.startswith(_CONTEXT):
            return text
    return ""


def _fork_answer(request: ScriptedRequest) -> Answer:
    history = " ".join(text for _, text in request.messages[:-1])
    found = _CODEWORD.search(history)
    return Answer(text=f"FORK_OK: {found.group(1) if found else 'no codeword known'}")


def _worker_answer(request: ScriptedRequest) -> Answer:
    """A tool worker: a ``glob`` call first, then a report once its result came back."""
    name = _said(request).split()[1].rstrip(":")
    if request.tool_results:
        return Answer(text=f"WORKER_OK {name}")
    return Answer(tool_calls=[ToolCall("glob", {"pattern": "*.nothing"})])


def _notice_answer(request: ScriptedRequest) -> Answer:
    """A child's notice: noted, except that both workers' reports fork the reviewer."""
    reports = sum(text.count("WORKER_OK") for role, text in request.messages if role == "user")
    started = sum(
        text.startswith("started subagent") for role, text in request.messages if role == "tool"
    )
    if reports == 2 and started == 2:
        return Answer(tool_calls=[ToolCall("subagent_fork", _task("Review", REVIEW_TASK))])
    return Answer(text="NOTED")


def _delegate(request: ScriptedRequest) -> Answer:
    calls = next(calls for task, calls in _DELEGATIONS.items() if task in _said(request))
    return Answer(tool_calls=calls)


def runtime_model(retry_after: Mapping[int, float] = RETRY_AFTER) -> ScriptedModel:
    """The scripted model's answers to the runtime (Anthropic Messages requests).

    Read from the request alone: tool results get ``DELEGATED``; ``[[fail NNN]]`` in the
    prompt fails the first request carrying it with HTTP ``NNN`` (the runtime retries);
    a tool worker (``TOOL_TASK``) calls ``glob`` and then reports ``WORKER_OK``; a child's
    notice (``Background subagent ... finished``) gets ``NOTED``, or, once both workers
    reported and no reviewer was started, a ``subagent_fork`` of the reviewer (who says
    ``REVIEW_OK``); otherwise the
    last user message (the user's own words first, before the runtime's context) picks
    the answer: the warm-up is acknowledged with a thought, a delegation task (see
    ``_DELEGATIONS``) makes tool calls, a spawn child says ``SPAWN_OK`` (the slow one
    late, so its notice comes last) and a fork child answers with the codeword it finds
    in its inherited conversation. A fresh model per scenario: its ``[[fail]]`` memory
    is its own. ``retry_after``: per status, the seconds a ``[[fail]]`` asks the runtime
    to wait before its retry (the runtime keeps that delay instead of its own backoff).
    """
    return ScriptedModel(
        [
            Rule(_worker_answer, when=lambda r: _said(r).startswith("TOOL_TASK")),
            Rule(Answer(text="DELEGATED"), when=lambda r: bool(r.tool_results)),
            fail_once(lambda status: f"scripted failure {status}", retry_after),
            Rule(_notice_answer, when=lambda r: _said(r).startswith("Background subagent")),
            Rule(Answer(text="REVIEW_OK"), when=lambda r: _said(r).startswith("REVIEW_TASK")),
            Rule(
                Answer(text="SPAWN_OK", delay=_SLOW_S),
                when=lambda r: _said(r).startswith("SPAWN_TASK (slow)"),
            ),
            Rule(Answer(text="SPAWN_OK"), when=lambda r: _said(r).startswith("SPAWN_TASK")),
            Rule(_fork_answer, when=lambda r: _said(r).startswith("FORK_TASK")),
            Rule(_delegate, when=lambda r: any(task in _said(r) for task in _DELEGATIONS)),
            Rule(
                Answer(reasoning="The user wants me to remember it.", text="OK remembered"),
                when=lambda r: _said(r).startswith(("WARMUP", "Remember the codeword")),
            ),
        ],
        default=Answer(text="UNPLANNED"),
    )


# --- the driver -----------------------------------------------------------------------------


@dataclass
class _Child:
    parent: str
    finished: bool = False
    noticed: bool = False


@dataclass
class RuntimeDriver:
    """The dsh runtime in a subprocess, private to one test; use it as a context manager.

    Args:
        base_url: Where the runtime's model calls go (``POST {base_url}/v1/messages``).
        workdir: A directory of the test's own: ``home/`` (``DSH_HOME``), ``work/`` (the
            session's working directory), ``sessions/`` (the sessions root), ``tmp/``
            (the runtime's ``TMPDIR``) and the persistence patch are created in it.
        api_key: The key the runtime sends (a dummy: the endpoint ignores it).
        timeout: The longest wait of each step, in seconds.
        compression: How the runtime writes its logs: ``"none"`` (plain JSONL, what the
            fixture records) or ``"zstd"`` (the runtime's default).
        route: ``"messages"``, the runtime's own provider (``POST {base_url}/v1/messages``
            with its session headers), or ``"openai"``: its ``llm-pi-ai`` provider
            (``POST {base_url}/v1/chat/completions``, no session identity on the wire).

    Attributes:
        root: The sessions root the runtime writes its logs under.
        answers: The primary's final answer to each prompt.
        children: Every child the runtime started: child id -> parent id.
    """

    base_url: str
    workdir: Path
    api_key: str = "dsh-replay-dummy-key"
    timeout: float = TIMEOUT_S
    compression: str = "none"
    route: str = "messages"
    root: Path = field(init=False)
    answers: list[str] = field(default_factory=list, init=False)
    children: dict[str, str] = field(default_factory=dict, init=False)
    _harness: Any = field(default=None, init=False, repr=False)
    _subscription: Any = field(default=None, init=False, repr=False)
    _seen: list[Any] = field(default_factory=list, init=False, repr=False)
    _kids: dict[str, _Child] = field(default_factory=dict, init=False, repr=False)
    _status: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _inbox: queue.Queue[Any] = field(default_factory=queue.Queue, init=False, repr=False)
    _children_at: int = field(default=-1, init=False, repr=False)
    _primary_status_at: int = field(default=-1, init=False, repr=False)

    def __post_init__(self) -> None:
        self.root = self.workdir / "sessions"

    def __enter__(self) -> RuntimeDriver:
        from deepseek_harness import DeepSeekHarness

        home, cwd, tmp = self.workdir / "home", self.workdir / "work", self.workdir / "tmp"
        for directory in (home, cwd, self.root, tmp):
            directory.mkdir(parents=True, exist_ok=True)
        patch = self.workdir / "persistence.yml"
        patch.write_text(
            "- id: session-persistence-jsonl\n"
            "  config:\n"
            f"    root: {json.dumps(str(self.root.resolve()))}\n"
            f"    compression: {self.compression}\n",
            encoding="utf-8",
        )
        patches, provider, model = [str(patch)], PROVIDER, MODEL
        env = {
            "DSH_TELEMETRY_DISABLED": "1",
            # its temporary files (a spill directory it leaves behind, a native-module
            # loader's copy) stay in the test's directory, not the machine's /tmp
            "TMPDIR": str(tmp),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        if self.route == "openai":
            patches.append(str(self._openai_patch()))
            provider, model = OPENAI_PROVIDER, OPENAI_MODEL
            env[OPENAI_KEY_VARIABLE] = self.api_key
        self._harness = DeepSeekHarness(
            provider=provider,
            model=model,
            cwd=str(cwd),
            dsh_home=str(home),
            api_key=self.api_key,
            base_url=self.base_url,
            patches=tuple(patches),
            env=env,
            initialize_timeout_seconds=self.timeout,
            request_timeout_seconds=self.timeout,
            shutdown_timeout_seconds=2.0,
        )
        try:
            self._harness.start()
            self._subscription = self._harness.client.subscribe_notifications(None)
        except BaseException:
            self._harness.close()
            raise
        threading.Thread(target=self._forward, args=(self._subscription,), daemon=True).start()
        return self

    def _forward(self, subscription: Any) -> None:
        """Hand each notification to :meth:`_wait` as it comes (the SDK's ``next`` blocks).

        Ends with the error the subscription raises once the runtime is closed.
        """
        while True:
            try:
                note = subscription.next()
            except BaseException as error:  # the runtime closed: the last item
                self._inbox.put(error)
                return
            self._inbox.put(note)

    def _openai_patch(self) -> Path:
        """The ``llm-pi-ai`` patch: one OpenAI-compatible provider at ``base_url``."""
        patch = self.workdir / "openai-route.yml"
        patch.write_text(
            "- id: llm-pi-ai\n"
            "  config:\n"
            "    providers:\n"
            f"      {OPENAI_PROVIDER}:\n"
            "        api: openai-completions\n"
            f"        baseURL: {json.dumps(self.base_url.rstrip('/') + '/v1')}\n"
            f"        apiKeyEnv: {OPENAI_KEY_VARIABLE}\n"
            "        models:\n"
            f"          - id: {OPENAI_MODEL}\n",
            encoding="utf-8",
        )
        return patch

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the runtime process (shutdown, then terminate or kill); safe to call twice."""
        harness, self._harness = self._harness, None
        if harness is None:
            return
        # The SDK stops the process but leaves its pipes open (a ResourceWarning when they
        # are collected): close them once it has stopped.
        process = getattr(harness.client, "_proc", None)
        try:
            harness.close()
        finally:
            for pipe in (getattr(process, name, None) for name in ("stdout", "stderr")):
                if pipe is not None:
                    pipe.close()

    # --- notifications -------------------------------------------------------------------

    def _drain(self, timeout: float) -> int:
        """Take the notifications that came, waiting up to ``timeout`` s for the first."""
        got: list[Any] = []
        try:
            got.append(self._inbox.get(timeout=max(timeout, 0.0)))
            while True:
                got.append(self._inbox.get_nowait())
        except queue.Empty:
            pass
        for at, note in enumerate(got, start=len(self._seen)):
            if isinstance(note, BaseException):
                raise note
            self._note(at, note)
        self._seen.extend(got)
        return len(got)

    def _note(self, at: int, note: Any) -> None:
        """Take in notification number ``at``: children, statuses and notices."""
        payload = note.payload
        if note.method == "subagent.started":
            self._children_at = at
            child, parent = payload.get("childSessionId"), payload.get("parentSessionId")
            if isinstance(child, str) and isinstance(parent, str):
                self._kids.setdefault(child, _Child(parent))
                self.children[child] = parent
        elif note.method == "subagent.finished":
            child = payload.get("childSessionId")
            if isinstance(child, str):
                self._kids.setdefault(child, _Child(str(payload.get("parentSessionId"))))
                self._kids[child].finished = True
        elif note.method == "session.status":
            session = str(payload.get("sessionId"))
            self._status[session] = str(payload.get("status"))
            if session == PRIMARY_ID:
                self._primary_status_at = at
        elif note.method == "session.event":
            event = payload.get("event")
            if isinstance(event, dict) and self._notice(event):
                self._children_at = at

    def _notice(self, event: dict[str, Any]) -> bool:
        """Mark the child whose settled notice ``event`` is; whether it is one."""
        if event.get("type") != "user/message":
            return False
        data = event.get("data")
        source = data.get("source") if isinstance(data, dict) else None
        if isinstance(source, dict) and source.get("kind") == "subagent-settled":
            sender = source.get("senderSessionId")
            if isinstance(sender, str) and sender in self._kids:
                self._kids[sender].noticed = True
                return True
        return False

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        """Take notifications as they come until ``done()``; at most ``timeout`` s."""
        deadline = time.monotonic() + self.timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"the dsh runtime did not {what} within {self.timeout:g} s (children: "
                    f"{self._kids}, status: {self._status})"
                )
            self._drain(left)

    # --- driving ------------------------------------------------------------------------

    def prompt(self, text: str) -> str:
        """Send one prompt to the primary and wait until it is idle again.

        Returns:
            The text of the primary's last ``assistant/message`` of that run.
        """
        from deepseek_harness.api import final_response

        client = self._harness.client
        start = len(self._seen)
        message_id = client.session_prompt(PRIMARY_ID, [{"type": "text", "text": text}])

        def receipt() -> int | None:
            for k in range(start, len(self._seen)):
                if _is_receipt(self._seen[k], message_id):
                    return k
            return None

        def idle_after() -> bool:
            mark = receipt()
            return mark is not None and any(
                note.method == "session.status"
                and note.payload.get("sessionId") == PRIMARY_ID
                and note.payload.get("status") == "idle"
                for note in self._seen[mark:]
            )

        self._wait(idle_after, "finish the prompt")
        mark = receipt()
        assert mark is not None
        own = [
            note.payload["event"]
            for note in self._seen[mark:]
            if note.method == "session.event"
            and note.payload.get("sessionId") == PRIMARY_ID
            and isinstance(note.payload.get("event"), dict)
        ]
        answer = str(final_response(own))
        self.answers.append(answer)
        return answer

    def settle(self) -> None:
        """Wait until every child finished, its notice reached its parent, and all is idle.

        A finished child's notice starts another turn of its parent (or joins the one
        running), so the run is over when each child finished, its notice arrived, and
        the primary's last status, reported after the last child's start and notice, is
        idle.
        """

        def over() -> bool:
            kids = self._kids.values()
            return (
                all(k.finished and k.noticed for k in kids)
                and self._status.get(PRIMARY_ID) == "idle"
                and self._primary_status_at > self._children_at
            )

        self._wait(over, "finish its children")

    def run(self, prompts: Sequence[str]) -> list[str]:
        """Send each prompt in turn, then :meth:`settle`; returns the final answers."""
        for text in prompts:
            self.prompt(text)
        self.settle()
        return list(self.answers)
