"""The log check's digests agree with the full event diff (docs/checks.md#log-check).

The check compares normalized forms first and runs the full diff only when they differ,
so the forms must never hide a difference the diff reports:

- on every corpus scenario that loads (CI requires the corpus), the recorded logs
  against the same logs as another run writes them (new ids, later times) and against
  generated mismatches of them (a changed prompt, tool result, chunk or setting, an
  extra and a missing event): equal forms only where the diff finds nothing;
- through the fixture, on generated recordings replayed with generated changes (a
  changed prompt, tool result or setting, an extra and a missing call): a run whose
  check uses the forms (a recording's second check in a run) passes or fails exactly as
  the first run, a full comparison, with the same message.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus

from pytest_dsh_replay import (
    DshReplayError,
    LogMismatchError,
    MemoryBackend,
    RecordingModel,
    SessionStore,
    load_scenario,
    read_session_log,
    write_scenario,
)
from pytest_dsh_replay._check import log_check
from pytest_dsh_replay._check.log_check import Redaction, first_difference, forms_agree, log_forms
from pytest_dsh_replay._check.normalize import diff_logs
from pytest_dsh_replay._fixture import dsh_replay as dsh_replay_module
from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._format.events import SessionHeader, SessionLog
from pytest_dsh_replay._format.redact import Redactor
from pytest_dsh_replay._scripts.loading import ScenarioCache

_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _loaded(path: Path) -> list[SessionLog] | None:
    try:
        scenario = load_scenario(path)
        return [read_session_log(s.path) for s in scenario.scripts if s.path is not None]
    except DshReplayError:
        return None


_SCENARIOS = corpus_scenarios()


def _another_run(logs: list[SessionLog]) -> list[SessionLog]:
    """The same logs as another run writes them: every UUID new (consistently), times later."""
    text = b"\n".join(
        b"\n".join(orjson.dumps(e) for e in [h.to_json(), *events]) for h, events in logs
    )
    fresh: dict[bytes, bytes] = {}
    text = _UUID.sub(lambda m: fresh.setdefault(m[0].lower(), str(uuid.uuid4()).encode()), text)
    lines = iter(text.split(b"\n"))
    out = []
    for _, events in logs:
        header = SessionHeader.from_json(orjson.loads(next(lines)))
        moved = [orjson.loads(next(lines)) for _ in events]
        for event in moved:
            if isinstance(event.get("time"), int):
                event["time"] += 86_400_000
        out.append(SessionLog(header, moved))
    return out


def _strings(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _strings(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _strings(v, (*path, i))]
    return []


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


_KINDS = {
    "prompt": ("user/message",),
    "tool result": ("tool/result",),
    "chunk": ("assistant/chunk",),
    "setting": ("request/header",),
}


def _mutate(logs: list[SessionLog], data: Any) -> None:
    """One generated mismatch, in place: a changed string of an event, an extra or a lost one."""
    kind = data.draw(st.sampled_from([*_KINDS, "any", "extra", "missing", "number"]))
    places = [
        (n, i)
        for n, (_, events) in enumerate(logs)
        for i, e in enumerate(events)
        if kind not in _KINDS or e.get("type") in _KINDS[kind]
    ]
    if not places:
        return
    n, i = data.draw(st.sampled_from(places))
    events = logs[n].events
    if kind == "extra":
        events.insert(i, orjson.loads(orjson.dumps(events[i])))
    elif kind == "missing":
        del events[i]
    elif kind == "number":
        events[i].setdefault("data", {})
        if isinstance(events[i]["data"], dict):
            events[i]["data"]["temperature"] = data.draw(st.sampled_from([0, 1, 0.5, 1.0]))
    else:
        paths = _strings(events[i].get("data"))
        if paths:
            path = data.draw(st.sampled_from(paths))
            new = data.draw(st.sampled_from(["6*8", "", "other text", str(uuid.uuid4())]))
            _set(events[i]["data"], path, new)


def _verdicts(recorded: list[SessionLog], live: list[SessionLog]) -> tuple[bool, Any]:
    headers = [h for h, _ in recorded]
    pairs = [
        (f"session.{n}.jsonl", r, lv) for n, (r, lv) in enumerate(zip(recorded, live, strict=True))
    ]
    agree = forms_agree(log_forms(recorded, headers), pairs, live=[h for h, _ in live])
    found = first_difference(
        pairs,
        recorded=headers,
        live=[h for h, _ in live],
        compare=diff_logs,
        redaction=Redaction(Redactor()),
    )
    return agree, found


_BASELINES: dict[Path, tuple[list[SessionLog], list[tuple[SessionHeader, bytes]]] | None] = {}


def _baseline(path: Path) -> tuple[list[SessionLog], list[tuple[SessionHeader, bytes]]] | None:
    """A scenario's logs and another run's logs of them (each session's events as JSON),
    checked to agree; loaded and checked once per scenario, not once per example."""
    if path not in _BASELINES:
        recorded = _loaded(path)
        if recorded is None:
            _BASELINES[path] = None
            return None
        live = _another_run(recorded)
        agree, found = _verdicts(recorded, live)
        assert found is None  # the same behaviour, as another run logs it
        assert agree or log_forms(recorded, [h for h, _ in recorded]) is None
        _BASELINES[path] = (recorded, [(h, orjson.dumps(events)) for h, events in live])
    return _BASELINES[path]


@pytest.mark.parametrize("path", corpus_params(_SCENARIOS))
@settings(  # 4 mutations a scenario: about 480 over the corpus, each kind many times over
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_forms_never_hide_what_the_diff_finds_on_the_corpus(path: Path | None, data: Any) -> None:
    if path is None:
        require_corpus()
        return
    baseline = _baseline(path)
    if baseline is None:
        return  # a scenario the reference refuses: nothing is replayed from it
    recorded, live_text = baseline
    live = [SessionLog(header, orjson.loads(events)) for header, events in live_text]
    _mutate(live, data)
    agree, found = _verdicts(recorded, live)
    assert not (agree and found is not None), found


# --- through the fixture: replayed runs with generated changes ---------------------------


class _Scripted:
    """Answers each call with its reply in turn: text, or tool calls."""

    def __init__(self, replies: list[list[str]]):
        self.replies = list(replies)

    def stream(self, request: Any, **kwargs: Any) -> Any:
        reply = self.replies.pop(0)
        if reply and reply[0].startswith("tool:"):
            for n, name in enumerate(reply):
                call = {"id": f"call_{n}", "name": name[5:]}
                yield {"type": "block-start", "index": n, "blockType": "tool-call"}
                yield {"type": "tool-call-delta", "index": n, **call, "argumentsDelta": "{}"}
                block = {"type": "tool-call", **call, "arguments": "{}"}
                yield {"type": "block-end", "index": n, "block": block}
            yield {"type": "finish", "reason": {"kind": "tool-calls"}}
            return
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for text in reply:
            yield {"type": "text-delta", "index": 0, "text": text}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(reply)}}
        yield {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": len(reply)}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


_words = st.text(alphabet="abc xyz*67", min_size=1, max_size=8)


@st.composite
def _conversations(draw: Any) -> list[dict[str, Any]]:
    """Calls of one session: a user turn, or tool results after a reply asking for tools."""
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        tools = draw(st.lists(st.sampled_from(["read", "grep"]), max_size=2, unique=True))
        calls.append(
            {
                "user": draw(_words),
                "temperature": draw(st.sampled_from([None, 0, 0.7])),
                "tools": tools,
                "results": [draw(_words) for _ in tools],
                "reply": draw(st.lists(_words, min_size=1, max_size=4)),
            }
        )
    return calls


def _requests(calls: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[str]]]:
    """Each model call's request and reply, the conversation growing as an agent's does."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    out = []
    for call in calls:
        messages = [*messages, {"role": "user", "content": call["user"]}]
        settings_ = {} if call["temperature"] is None else {"temperature": call["temperature"]}
        if call["tools"]:
            out.append(({"messages": messages, **settings_}, [f"tool:{t}" for t in call["tools"]]))
            tool_calls = [
                {"id": f"call_{n}", "type": "function", "function": {"name": t, "arguments": "{}"}}
                for n, t in enumerate(call["tools"])
            ]
            messages = [
                *messages,
                {"role": "assistant", "content": None, "tool_calls": tool_calls},
                *(
                    {"role": "tool", "tool_call_id": f"call_{n}", "content": r}
                    for n, r in enumerate(call["results"])
                ),
            ]
        out.append(({"messages": messages, **settings_}, call["reply"]))
        messages = [*messages, {"role": "assistant", "content": "".join(call["reply"])}]
    return out


def _changed(calls: list[dict[str, Any]], data: Any) -> list[dict[str, Any]]:
    """The calls with one generated change (or none)."""
    kind = data.draw(
        st.sampled_from(["none", "prompt", "tool result", "setting", "extra call", "missing call"])
    )
    calls = [dict(c, results=list(c["results"])) for c in calls]
    n = data.draw(st.integers(0, len(calls) - 1))
    if kind == "prompt":
        calls[n]["user"] += "!"
    elif kind == "tool result" and calls[n]["results"]:
        calls[n]["results"][0] += "?"
    elif kind == "setting":
        calls[n]["temperature"] = 1 if calls[n]["temperature"] != 1 else 0
    elif kind == "extra call":
        calls.append(dict(calls[n]))
    elif kind == "missing call" and len(calls) > 1:
        calls.pop(n)
    return calls


def _outcome(replay: DshReplay, requests: list[tuple[dict[str, Any], list[str]]]) -> str:
    try:
        for request, _ in requests:
            for _chunk in replay.model.stream(request, session_id="main"):
                pass
        replay._check_logs()
    except (LogMismatchError, DshReplayError) as err:
        return f"{type(err).__name__}: {err}"
    finally:
        replay.close()
    return "pass"


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=_conversations(), data=st.data())
def test_a_check_by_digests_gives_the_full_diffs_verdict_and_message(
    tmp_path_factory: pytest.TempPathFactory, calls: list[dict[str, Any]], data: Any
) -> None:
    root = tmp_path_factory.mktemp("digest")
    recorded = _requests(calls)
    store = SessionStore(MemoryBackend())
    model = RecordingModel(_Scripted([reply for _, reply in recorded]), store)
    for request, _ in recorded:
        for _chunk in model.stream(request, session_id="main"):
            pass
    model.close_open_calls()
    write_scenario(root / "s", store.sessions())
    live = _requests(_changed(calls, data))
    cache = ScenarioCache()
    made: list[Any] = []
    real = log_check.log_forms

    def spy(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    outcomes = []
    for n in range(3):  # the first check compares in full, the later ones digests first
        replay = DshReplay.open(root / "s", workdir=root / f"w{n}", cache=cache)
        outcomes.append(_outcome(replay, live))
    assert outcomes[0] == outcomes[1] == outcomes[2]
    if outcomes[0] == "pass":  # the digests decided, and agreed
        replay = DshReplay.open(root / "s", workdir=root / "w", cache=cache)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(log_check, "log_forms", spy)
            patch.setattr(dsh_replay_module, "log_forms", spy)  # the check by reference's
            assert _outcome(replay, live) == "pass"
        assert made
        assert made[-1] is not None  # the live side's forms: the digests decided
