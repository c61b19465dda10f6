"""The public API given what it does not take: a typed error saying what was expected.

Each case is a call a user could write by mistake (a value of the wrong kind, a float JSON
cannot hold, an empty path); each must raise the error its docstring names, with a
message that says what was wrong, never a bare ``AttributeError``/``IndexError`` from
deep inside nor a silent wrong result (a NaN written as ``null``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from support.paths import EXAMPLES

from pytest_dsh_replay import (
    ChunksEntry,
    HangEntry,
    MemoryBackend,
    RecordingError,
    ReplayModel,
    Scenario,
    ScenarioError,
    ScriptedModel,
    ScriptedModelError,
    ScriptedServer,
    ScriptError,
    SessionLogError,
    SessionStore,
    SessionStoreError,
    derive_replay_script,
    dump_session_log,
    load_scenario,
    parse_session_header,
    write_scenario,
)

NAN_USAGE = {"type": "usage", "usage": {"inputTokens": math.nan, "outputTokens": 1}}
STOP = {"type": "finish", "reason": {"kind": "stop"}}


def _sessions() -> list[object]:
    store = SessionStore(MemoryBackend())
    session = store.create("main")
    session.append("turn/start", {"turn": 1})
    return [session]


CASES: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    ("chunks-nan", lambda: ChunksEntry([NAN_USAGE, STOP]), ScriptError, "NaN or infinite"),
    ("chunks-none", lambda: ChunksEntry(None), ScriptError, "chunks must be a list of chunks"),  # type: ignore[arg-type]
    (
        "dump-nan",
        lambda: dump_session_log({"type": "session", "id": "x"}, [{"data": math.inf}]),
        SessionLogError,
        r"record 1 \(line 2\) .* NaN or infinite",
    ),
    (
        "dump-header",
        lambda: dump_session_log("x", []),  # type: ignore[arg-type]
        SessionLogError,
        "the header must be a SessionHeader or a JSON object, got 'x'",
    ),
    (
        "derive-none",
        lambda: derive_replay_script(None),  # type: ignore[arg-type]
        ScriptError,
        "events must be a list of event objects",
    ),
    ("hang-int", lambda: HangEntry(5), ScriptError, "ready_file must be a non-empty string"),  # type: ignore[arg-type]
    ("hang-empty", lambda: HangEntry(""), ScriptError, "ready_file must be a non-empty string"),
    (
        "scenario-empty",
        lambda: Scenario(path=Path("x"), scripts=()),
        ScenarioError,
        "at least one script",
    ),
    (
        "server-body",
        lambda: ScriptedServer(ScriptedModel(), max_body_bytes=0),
        ScriptedModelError,
        r"max_body_bytes=...\) must be a positive number of bytes",
    ),
    (
        "replay-model-int",
        lambda: ReplayModel(5),  # type: ignore[arg-type]
        TypeError,
        "ReplayModel takes a Scenario or a path",
    ),
    (
        "write-empty-path",
        lambda: write_scenario("", _sessions()),  # type: ignore[arg-type]
        RecordingError,
        "an empty path names no scenario directory",
    ),
    (
        "write-a-string",
        lambda: write_scenario("/nonexistent/x", "abc"),  # type: ignore[arg-type]
        RecordingError,
        "sessions must be an iterable of sessions",
    ),
    (
        "write-no-sessions",
        lambda: write_scenario("/nonexistent/x", [{"header": {}}]),  # type: ignore[list-item]
        RecordingError,
        "each session must have a SessionHeader header",
    ),
    (
        "header-not-json",
        lambda: parse_session_header("not json"),
        SessionLogError,
        r"line 1: invalid JSON",
    ),
    (
        "header-an-int",
        lambda: parse_session_header(5),  # type: ignore[arg-type]
        TypeError,
        "takes the log as str or bytes",
    ),
    (
        "store-negative-clock",
        lambda: SessionStore(MemoryBackend(), clock=lambda: -5).create("neg"),
        SessionStoreError,
        "Unix ms as an int >= 0, got -5",
    ),
    (
        "seed-hint",
        lambda: SessionStore(MemoryBackend()).create(
            "s", seed=[{"type": "turn/start", "seq": 0, "data": {"turn": 1}}]
        ),
        SessionStoreError,
        r"^create\(seed=...\): .*time(?!.*contiguous)",
    ),
    (
        "session-id-of-a-scenario",
        lambda: load_scenario(EXAMPLES / "fork", session_id="main"),
        ScenarioError,
        "this is a scenario directory .* load it without session_id",
    ),
]


@pytest.mark.parametrize(
    ("build", "error", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_wrong_value_gets_the_documented_error_saying_what_was_expected(
    build: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        build()


def test_a_float_json_can_hold_and_null_are_still_written() -> None:
    assert ChunksEntry([{"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}}, STOP])
    line = dump_session_log({"type": "session", "id": "x"}, [{"data": None, "x": 1.5}])
    assert line.endswith(b'{"data":null,"x":1.5}\n')


def test_the_env_docstring_names_every_variable_env_sets() -> None:
    from pytest_dsh_replay import DshReplay
    from pytest_dsh_replay._endpoint.transport import endpoint_env

    documented = DshReplay.env.__doc__ or ""
    missing = [
        name for name in endpoint_env("http://127.0.0.1:1") if f"``{name}``" not in documented
    ]
    assert missing == []
