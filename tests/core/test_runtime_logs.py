"""The dsh runtime's own logs as a recording: what is compared, written and shown.

No runtime here: the runtime's logs are the project's committed recording
``example_snapshots/runtime-mixed`` (a primary with a spawn and a fork child), laid out
as a sessions root the way the runtime writes one, and changed the ways two runs of the
runtime differ (ids, times, the working directory, the order of bookkeeping events) or
the ways a behaviour change shows.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_dsh_replay import (
    LogMismatchError,
    ReplayModel,
    ReplayOrderError,
    load_scenario,
    read_session_log,
)
from pytest_dsh_replay._jsonl import dump_session_log
from pytest_dsh_replay._normalize import Normalizer, canonical_log
from pytest_dsh_replay._redact import Redactor
from pytest_dsh_replay._runtime import DshReplay
from pytest_dsh_replay._runtime_logs import compare_model_views, model_view, runtime_logs
from pytest_dsh_replay._transcript import render_transcript
from pytest_dsh_replay._wire_anthropic import AnthropicEncoder

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "example_snapshots"
MIXED = EXAMPLES / "runtime-mixed"


def recorded() -> list[tuple[Any, list[dict[str, Any]]]]:
    return [read_session_log(s.path) for s in load_scenario(MIXED).scripts]  # type: ignore[arg-type]


def another_run(
    logs: list[tuple[Any, list[dict[str, Any]]]], cwd: str = "/tmp/run-2/work"
) -> list[tuple[Any, list[dict[str, Any]]]]:
    """The same behaviour as another run logs it: new ids, later times, another cwd."""
    text = b"\n".join(
        b"\n".join(orjson.dumps(e) for e in [h.to_json(), *events]) for h, events in logs
    ).decode()
    for old in {h.id for h, _ in logs if h.id != "sess-main"}:
        text = text.replace(old, str(uuid.uuid4()))
    text = text.replace("{{cwd}}", cwd)
    out = []
    lines = iter(text.split("\n"))
    for _, events in logs:
        header = orjson.loads(next(lines))
        moved = [orjson.loads(next(lines)) for _ in events]
        for event in moved:
            event["time"] += 86_400_000
        out.append((header, moved))
    return [(type(logs[0][0]).from_json(h), e) for h, e in out]


def lay_out(root: Path, logs: list[tuple[Any, list[dict[str, Any]]]]) -> Path:
    """Write logs as the runtime's sessions root: ``<root>/<project>/<id>/session.v4.jsonl``."""
    for header, events in logs:
        directory = root / "--tmp-run-2-work--" / header.id
        directory.mkdir(parents=True)
        (directory / "session.v4.jsonl").write_bytes(dump_session_log(header.to_json(), events))
    return root


def compare(expected: Any, actual: Any) -> Any:
    """The first difference over a scenario's sessions, each side normalized as a whole."""
    mine = Normalizer(session_ids=[h.id for h, _ in expected], cwds=["{{cwd}}"])
    theirs = Normalizer(session_ids=[h.id for h, _ in actual], cwds=["/tmp/run-2/work"])
    for k, (e, a) in enumerate(zip(expected, actual, strict=True)):
        diff = compare_model_views(
            f"session.{k}.jsonl", e, a, expected_normalizer=mine, actual_normalizer=theirs
        )
        if diff is not None:
            return diff
    return None


def test_the_model_view_keeps_messages_settings_and_calls_without_times() -> None:
    (_, events), *_ = recorded()
    view = model_view(events)
    kinds = {item["type"] for _, item in view}
    assert kinds == {
        "system/message",
        "user/message",
        "assistant/message",
        "tool/result",
        "request/header",
        "request/context",
    }
    calls = [item for _, item in view if item["type"] == "assistant/message"]
    assert len(calls) == 5
    assert all("stream" not in c["data"] and c["data"]["chunks"] for c in calls)
    assert all("time" not in chunk for c in calls for chunk in c["data"]["chunks"])
    assert calls[0]["data"]["chunks"][-1]["type"] == "finish"


def test_another_run_of_the_same_behaviour_compares_equal() -> None:
    logs = recorded()
    again = another_run(logs)
    primary = again[0][1]
    # Parallel tool calls: this time the catalog events come after the tool results.
    kinds = [e["type"] for e in primary]
    first_catalog = kinds.index("subagent/catalog")
    catalogs = [e for e in primary if e["type"] == "subagent/catalog"]
    rest = [e for e in primary if e["type"] != "subagent/catalog"]
    last_result = max(i for i, e in enumerate(rest) if e["type"] == "tool/result")
    again[0] = (again[0][0], rest[: last_result + 1] + catalogs + rest[last_result + 1 :])
    assert [e["type"] for e in again[0][1]].index("subagent/catalog") > first_catalog
    assert compare(logs, again) is None


def test_tool_results_of_one_step_compare_in_any_order() -> None:
    logs = recorded()
    again = another_run(logs)
    primary = again[0][1]
    results = [i for i, e in enumerate(primary) if e["type"] == "tool/result"]
    assert len(results) == 2
    a, b = results
    primary[a], primary[b] = primary[b], primary[a]
    assert compare(logs, again) is None


def test_a_changed_prompt_is_reported_at_its_event_and_path() -> None:
    logs = recorded()
    again = another_run(logs)
    primary = again[0][1]
    index = next(
        i
        for i, e in enumerate(primary)
        if e["type"] == "user/message" and "MAIN_TASK" in e["data"]["content"][0]["text"]
    )
    primary[index]["data"]["content"][0]["text"] = "MAIN_TASK: do it yourself."
    diff = compare(logs, again)
    assert diff is not None
    assert (diff.file, diff.index, diff.event_type) == ("session.0.jsonl", index, "user/message")
    assert diff.path == "$.data.content[0].text"
    assert diff.actual == "MAIN_TASK: do it yourself."


def test_a_served_chunk_that_differs_is_reported() -> None:
    logs = recorded()
    again = another_run(logs)
    child = again[1][1]
    call = next(e for e in child if e["type"] == "assistant/message")
    run = next(r for r in call["data"]["stream"] if r["type"] == "text-chunks")
    run["texts"][0] = "SPAWN_NOT_OK"
    diff = compare(logs, again)
    assert diff is not None
    assert diff.event_type == "assistant/message"
    assert diff.path.startswith("$.data.chunks[")
    assert diff.actual == "SPAWN_NOT_OK"


def test_a_missing_turn_is_reported_as_the_model_seeing_less() -> None:
    logs = recorded()
    again = another_run(logs)
    primary = again[0][1]
    last_turn = max(i for i, e in enumerate(primary) if e["type"] == "turn/start")
    again[0] = (again[0][0], primary[:last_turn])
    diff = compare(logs, again)
    assert diff is not None
    assert "shows the model less" in diff.note


def test_replay_compares_the_runtimes_logs_and_names_the_difference(tmp_path: Path) -> None:
    logs = recorded()
    root = lay_out(tmp_path / "sessions", another_run(logs))
    replay = DshReplay.open(MIXED, workdir=tmp_path / "work")
    replay.use_sessions(root, "sess-main")
    replay.check_logs()  # the same behaviour: no error

    changed = another_run(logs)
    tool_result = next(e for e in changed[0][1] if e["type"] == "tool/result")
    tool_result["data"]["message"]["content"][0]["text"] = "could not start"
    other = lay_out(tmp_path / "changed", changed)
    replay.use_sessions(other, "sess-main")
    with pytest.raises(LogMismatchError) as caught:
        replay.check_logs()
    report = str(caught.value)
    assert "session.jsonl: event #" in report
    assert "(tool/result)" in report
    assert "$.data.message.content[0].text" in report
    assert '"could not start"' in report


def test_replay_with_the_runtimes_logs_missing_fails_with_the_root(tmp_path: Path) -> None:
    replay = DshReplay.open(MIXED, workdir=tmp_path / "work")
    (tmp_path / "empty").mkdir()
    replay.use_sessions(tmp_path / "empty", "sess-main")
    with pytest.raises(LogMismatchError, match="no session 'sess-main'"):
        replay.check_logs()


class _NoModel:
    def stream(self, request: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called")


def test_recording_writes_the_runtimes_logs_redacted_in_format_4(tmp_path: Path) -> None:
    logs = another_run(recorded())
    secret = "sk-live-0123456789abcdefghijkl"
    user = next(e for e in logs[0][1] if e["type"] == "user/message")
    user["data"]["content"][0]["text"] += f" My key is {secret}."
    root = lay_out(tmp_path / "sessions", logs)
    target = tmp_path / "scenario"
    replay = DshReplay.record(target, live=_NoModel(), workdir=tmp_path / "work")
    replay.use_sessions(root, "sess-main")
    files = replay.save()
    assert [f.name for f in files] == ["session.jsonl", "session.1.jsonl", "session.2.jsonl"]
    written = [f.read_bytes() for f in files]
    assert all(canonical_log(data) == data for data in written)  # format 4 as written
    assert all(b'"version":4' in data.split(b"\n", 1)[0] for data in written)
    joined = b"".join(written)
    assert secret.encode() not in joined
    assert b"[REDACTED]" in joined
    assert b"/tmp/run-2/work" not in joined
    assert b"{{cwd}}" in joined
    scenario = load_scenario(target)
    assert [len(s.entries) for s in scenario.scripts] == [5, 1, 1]
    assert scenario.scripts[2].seed_length == 17  # the fork child, its seed kept


def test_re_recording_the_same_behaviour_keeps_the_files(tmp_path: Path) -> None:
    target = tmp_path / "scenario"
    first = DshReplay.record(target, live=_NoModel(), workdir=tmp_path / "w1")
    first.use_sessions(lay_out(tmp_path / "run-1", another_run(recorded())), "sess-main")
    files = first.save()
    before = [(f.read_bytes(), f.stat().st_mtime_ns) for f in files]
    again = DshReplay.record(target, live=_NoModel(), workdir=tmp_path / "w2")
    again.use_sessions(lay_out(tmp_path / "run-2", another_run(recorded())), "sess-main")
    assert again.save() == files
    assert again.unchanged is True
    assert [(f.read_bytes(), f.stat().st_mtime_ns) for f in files] == before


def test_recording_without_the_runtimes_logs_says_where_it_looked(tmp_path: Path) -> None:
    replay = DshReplay.record(tmp_path / "scenario", live=_NoModel(), workdir=tmp_path / "w")
    (tmp_path / "empty").mkdir()
    replay.use_sessions(tmp_path / "empty", "sess-main")
    with pytest.raises(Exception, match="cannot be read from the sessions root") as caught:
        replay.save()
    assert type(caught.value).__name__ == "RecordingError"
    assert not (tmp_path / "scenario").exists()


def test_use_sessions_in_replay_keeps_the_recorded_order(tmp_path: Path) -> None:
    replay = DshReplay.open(MIXED, workdir=tmp_path)
    replay.use_sessions(tmp_path / "sessions", "sess-main", order_timeout=0.2)
    request = {"messages": [{"role": "user", "content": "x"}]}
    for _ in range(3):
        list(replay.model.stream(request, session_id="m"))
    # Call #4 waits for the fork child's call, which never comes here.
    with pytest.raises(ReplayOrderError, match="call #1 of session.2.jsonl starting"):
        list(replay.model.stream(request, session_id="m"))


def test_streamed_secrets_of_format_4_are_redacted_as_one_text() -> None:
    secret = "sk-abcdefghijklmnopqrstuvwxyz"
    event: dict[str, Any] = {
        "type": "assistant/message",
        "seq": 3,
        "time": 1,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {"role": "assistant", "content": []},
            "stream": [
                {
                    "type": "text-chunks",
                    "time0": 1,
                    "index": 0,
                    "dt": [0, 0],
                    "texts": ["key: ", secret[:7], secret[7:] + " ok"],
                },
                {
                    "type": "chunk",
                    "time": 2,
                    "chunk": {"type": "finish", "reason": {"kind": "stop"}},
                },
            ],
        },
    }
    (out,) = Redactor().redact_events([event])
    assert out["data"]["stream"][0]["texts"] == ["key: ", "[REDACTED]", " ok"]
    assert event["data"]["stream"][0]["texts"][1] == secret[:7]  # the input is unchanged


def test_the_transcript_of_runtime_logs_shows_children_seeds_and_tool_results() -> None:
    class Log:
        def __init__(self, header: Any, events: Any):
            self.header, self.events = header, events

    text = render_transcript([Log(h, e) for h, e in recorded()])
    assert "# Session {{id-3}} (child of {{id-1}}, fork, seedLength 17)" in text
    assert "# Session {{id-2}} (child of {{id-1}}, spawn)" in text
    assert "> started subagent {{id-2}}" in text
    assert "-> child session {{id-3}}" in text
    assert "> FORK_OK: MARMALADE" in text
    assert "> Its closing message:" in text  # a notice's blocks, one per line


def test_sessions_root_logs_come_primary_first(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "sessions", another_run(recorded()))
    logs = runtime_logs(root, "sess-main")
    assert [log.header.parent_session for log in logs] == [None, "sess-main", "sess-main"]
    assert all(log.path.name == "session.v4.jsonl" for log in logs)


@pytest.mark.parametrize(
    ("state", "start", "signature"),
    [
        (
            {"blocks": [{"type": "reasoning"}, {"type": "text"}]},
            {"type": "thinking", "thinking": ""},
            None,
        ),
        (
            {"blocks": [{"type": "reasoning", "signature": "SIG-1"}]},
            {"type": "thinking", "thinking": "", "signature": ""},
            "SIG-1",
        ),
        (None, {"type": "thinking", "thinking": "", "signature": ""}, None),
    ],
)
def test_a_thinking_block_carries_the_recorded_signature(
    state: Any, start: dict[str, Any], signature: str | None
) -> None:
    encoder = AnthropicEncoder(model="m", message_id="msg-1", replay_state=state)
    chunks = [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "hm"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "hm"}},
    ]
    wire = b"".join(encoder.feed(c) for c in chunks).decode()
    events = [orjson.loads(line[6:]) for line in wire.splitlines() if line.startswith("data: ")]
    assert events[0]["content_block"] == start
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    signatures = [d["signature"] for d in deltas if d["type"] == "signature_delta"]
    assert signatures == ([signature] if signature else [])


def test_the_replay_model_of_a_runtime_recording_binds_children_by_kind() -> None:
    scenario = load_scenario(MIXED)
    model = ReplayModel(scenario)
    list(model.stream({"messages": [{"role": "user", "content": "WARMUP"}]}, session_id="m"))
    _, spawn, fork = scenario.scripts
    assert fork.path is not None
    _, events = read_session_log(fork.path)
    task = next(e for e in events[fork.seed_length :] if e["type"] == "user/message")
    content = orjson.loads(orjson.dumps(task["data"]["content"]).replace(b"sess-main", b"m"))
    # The fork child arrives first, under a fresh id (its parent's id in its task): it
    # binds to the fork child's recording, not to the next file (the spawn child's).
    live = str(uuid.uuid4())
    request = {"messages": [{"role": "user", "content": content}]}
    model.bind(request, session_id=live, parent_session_id="m", seed_length=17)
    assert model.bindings[live].file == fork.file != spawn.file
