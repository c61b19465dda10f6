"""Session logs of formats 2 to 4, as the dsh runtime writes them (read in place).

The real logs in ``../shared/runtime-samples/`` are the ground truth: a primary, a spawn
child and a fork child of one run, plus an excerpt of an error run. Each call's embedded
stream must expand into exactly the chunks the runtime received (its settled message,
usage and replay state agree with them, and the deltas equal what the loopback server
sent in the request/response pairs).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from support.corpus_support import SAMPLES, require_corpus

from pytest_dsh_replay import (
    ScenarioError,
    ScriptError,
    SessionLogError,
    derive_replay_script,
    load_scenario,
    parse_session_log,
    write_scenario,
)
from pytest_dsh_replay._format.jsonl import read_session_log
from pytest_dsh_replay._scripts.scenario import load_session_script
from pytest_dsh_replay.cli import main

PRIMARY = SAMPLES / "t5-primary.session.v4.jsonl"
SPAWN = SAMPLES / "t5-spawn-child.session.v4.jsonl"
FORK = SAMPLES / "t5-fork-child.session.v4.jsonl"
ERRORS = SAMPLES / "e1-errors-excerpt.session.v4.jsonl"
LOGS = [PRIMARY, SPAWN, FORK, ERRORS]


@pytest.fixture(autouse=True)
def _samples() -> None:
    require_corpus(SAMPLES)


def _calls(path: Path) -> list[dict[str, Any]]:
    """The ``assistant/message`` / ``assistant/attempt`` events of a log, in order."""
    lines = path.read_bytes().splitlines()[1:]
    return [
        e
        for e in map(orjson.loads, lines)
        if e["type"] in ("assistant/message", "assistant/attempt")
    ]


def _assembled(chunks: list[dict[str, Any]]) -> list[Any]:
    return [c["block"] for c in chunks if c["type"] == "block-end"]


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_every_call_expands_into_what_the_runtime_settled(path: Path) -> None:
    script = load_session_script(path, primary=True)
    calls = _calls(path)
    assert len(script.entries) == len(calls)
    for entry, event in zip(script.entries, calls, strict=True):
        chunks = entry.chunks
        assert chunks[-1]["type"] == "finish"
        data = event["data"]
        if event["type"] == "assistant/message":
            message = data["message"]
            assert _assembled(chunks) == message["content"]
            usage = [c["usage"] for c in chunks if c["type"] == "usage"]
            assert usage[-1] == data["usage"]
            assert chunks[-1].get("replayState") == message["source"]["replayState"]
        else:
            assert chunks[-1]["reason"]["kind"] in ("error", "aborted")


def test_a_fork_child_replays_only_what_follows_its_inherited_marker() -> None:
    child = load_session_script(FORK, primary=False)
    whole = load_session_script(FORK, primary=True)
    parent = load_session_script(PRIMARY, primary=True)
    assert (child.seed_length, child.event_count) == (17, 32)
    assert (len(whole.entries), len(child.entries)) == (2, 1)
    assert whole.entries[0] == parent.entries[0]  # the parent's turn-1 call, inherited
    assert child.entries[0] == whole.entries[1]
    assert child.first_user_text is not None
    assert "FORK_TASK" in child.first_user_text
    assert whole.first_user_text is not None
    assert "WARMUP" in whole.first_user_text


def _sse_deltas(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        if event["type"] == "content_block_delta":
            delta = event["delta"]
            for key in ("text", "thinking", "partial_json"):
                if key in delta:
                    out.append(delta[key])
    return out


def _chunk_deltas(chunks: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in chunks:
        if c["type"] in ("text-delta", "reasoning-delta"):
            out.append(c["text"])
        elif c["type"] == "tool-call-delta" and c["argumentsDelta"]:
            out.append(c["argumentsDelta"])
    return out


@pytest.mark.parametrize(
    ("pair", "log", "primary", "call"),
    [
        ("pair1-t5-main-turn2-tool-use.json", PRIMARY, True, 1),
        ("pair2-t5-fork-child-first-call.json", FORK, False, 0),
        ("pair5-e1-thinking.json", ERRORS, True, 4),
    ],
)
def test_scripts_hold_every_delta_the_server_sent(
    pair: str, log: Path, primary: bool, call: int
) -> None:
    sent = json.loads((SAMPLES / pair).read_text())["response"]["sse_events"]
    entry = load_session_script(log, primary=primary).entries[call]
    assert _chunk_deltas(entry.chunks) == _sse_deltas(sent)


def test_the_error_excerpt_keeps_each_attempt_with_its_failure() -> None:
    entries = load_session_script(ERRORS, primary=True).entries
    finishes = [e.chunks[-1]["reason"] for e in entries]
    failures = [r["failure"]["code"] for r in finishes if r["kind"] == "error"]
    assert failures == ["SERVER", "SERVER", "STREAM_CLOSED", "AUTH"]
    assert [r["kind"] for r in finishes].count("stop") == 3


def _scenario_dir(tmp_path: Path) -> Path:
    d = tmp_path / "scenario"
    d.mkdir()
    shutil.copy(PRIMARY, d / "session.jsonl")
    shutil.copy(SPAWN, d / "session.1.v4.jsonl")
    shutil.copy(FORK, d / "session.2.jsonl")
    return d


def test_a_scenario_directory_of_v4_logs(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario_dir(tmp_path))
    assert [s.recorded_id[:8] for s in scenario.scripts] == ["sess-mai", "846d1139", "81c27db7"]
    assert [len(s.entries) for s in scenario.scripts] == [5, 1, 1]
    assert [s.seed_length for s in scenario.scripts] == [0, 0, 17]


def _sessions_root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    for log in (PRIMARY, SPAWN, FORK):
        sid = json.loads(log.read_bytes().split(b"\n", 1)[0])["id"]
        d = root / "--home-u-proj--" / sid
        d.mkdir(parents=True)
        shutil.copy(log, d / "session.v4.jsonl")
        (d / "session.lock").touch()
    other = root / "--home-u-other--" / "unrelated"
    other.mkdir(parents=True)
    (other / "session.v4.jsonl").write_bytes(
        b'{"type":"session","version":4,"id":"unrelated","createdAt":1,"isSeeded":false,'
        b'"delegationDepth":0}\n'
    )
    return root


def test_a_runtime_sessions_root_and_a_session_id(tmp_path: Path) -> None:
    root = _sessions_root(tmp_path)
    scenario = load_scenario(root, session_id="sess-main")
    assert [len(s.entries) for s in scenario.scripts] == [5, 1, 1]
    assert scenario.scripts[2].seed_length == 17
    assert (
        scenario.scripts[1].file
        == f"--home-u-proj--/{scenario.scripts[1].recorded_id}/session.v4.jsonl"
    )
    assert load_scenario(root, session_id="unrelated").scripts[0].entries == ()
    with pytest.raises(Exception, match="no session 'nope' under this sessions root"):
        load_scenario(root, session_id="nope")
    with pytest.raises(Exception, match="sessions root: pass the primary's session id"):
        load_scenario(root)


def test_a_session_directory_with_one_generation_plain_and_compressed_is_refused(
    tmp_path: Path,
) -> None:
    root = _sessions_root(tmp_path)
    session_dir = root / "--home-u-proj--" / "sess-main"
    plain = (session_dir / "session.v4.jsonl").read_bytes()
    (session_dir / "session.v4.jsonl.zstd").write_bytes(zstandard.ZstdCompressor().compress(plain))
    with pytest.raises(ScenarioError) as info:
        load_scenario(root, session_id="sess-main")
    assert str(session_dir) in str(info.value)
    assert (
        "holds one generation twice (session.v4.jsonl, session.v4.jsonl.zstd), "
        "compressed and plain; keep one" in str(info.value)
    )


def test_the_cli_reads_a_sessions_root(tmp_path: Path) -> None:
    root = _sessions_root(tmp_path)
    out = io.StringIO()
    assert main(["scripts", str(root), "--session", "sess-main", "--json"], stdout=out) == 0
    scripts = json.loads(out.getvalue())["scripts"]
    assert [s["seedLength"] for s in scripts] == [0, 0, 17]
    out = io.StringIO()
    assert main(["show", str(root), "--session", "sess-main"], stdout=out) == 0
    assert "3 session(s), 7 model call(s)" in out.getvalue()


def test_check_counts_the_primaries_of_a_sessions_root_as_scenarios(tmp_path: Path) -> None:
    root = _sessions_root(tmp_path)  # sess-main with a spawn and a fork child; unrelated
    out = io.StringIO()
    assert main(["check", str(root)], stdout=out) == 0
    assert out.getvalue() == "ok: 2 scenario(s)\n"


@pytest.mark.parametrize("broken", ["sess-main", "a child"])
def test_a_broken_log_under_a_sessions_root_still_counts_with_its_scenario(
    tmp_path: Path, broken: str
) -> None:
    root = _sessions_root(tmp_path)  # 2 scenarios: sess-main (and 2 children), unrelated
    sessions = sorted((root / "--home-u-proj--").iterdir())
    target = next(d for d in sessions if (d.name == "sess-main") == (broken == "sess-main"))
    log = target / "session.v4.jsonl"
    log.write_bytes(log.read_bytes()[:-100])  # cut inside its last line
    err = io.StringIO()
    assert main(["check", str(root)], stderr=err) == 1
    assert err.getvalue().endswith("1 problem(s) in 2 scenario(s)\n")


def test_the_runtime_home_points_at_its_sessions_root(tmp_path: Path) -> None:
    root = _sessions_root(tmp_path)  # tmp_path is the home: $DSH_HOME/sessions
    for session_id in (None, "sess-main"):
        with pytest.raises(ScenarioError) as info:
            load_scenario(tmp_path, session_id=session_id)
        assert (
            f"this looks like the dsh runtime's home ($DSH_HOME), whose sessions root is "
            f"{root}: pass that directory" in str(info.value)
        )
    err = io.StringIO()
    assert main(["show", str(tmp_path), "--session", "sess-main"], stderr=err) == 1
    assert f"dsh-replay show {root} --session sess-main" in err.getvalue()
    assert main(["show", str(tmp_path)], stderr=err) == 1
    assert f"dsh-replay show {root} --session ID" in err.getvalue()


def test_write_scenario_keeps_format_4(tmp_path: Path) -> None:
    d = _scenario_dir(tmp_path)
    before = load_scenario(d)

    class Log:
        def __init__(self, path: Path) -> None:
            self.header, self.events = read_session_log(path)

    written = write_scenario(tmp_path / "copy", [Log(p) for p in sorted(d.iterdir())])
    assert [p.name for p in written] == ["session.jsonl", "session.1.jsonl", "session.2.jsonl"]
    assert written[0].read_bytes() == PRIMARY.read_bytes()  # v4 has no other form
    assert load_scenario(tmp_path / "copy").to_json() == {
        "scripts": [
            {**s, "file": n}
            for s, n in zip(
                before.to_json()["scripts"],
                ["session.jsonl", "session.1.jsonl", "session.2.jsonl"],
                strict=True,
            )
        ]
    }


# --- what is refused, and how ------------------------------------------------------------

V4 = {"type": "session", "version": 4, "id": "s", "createdAt": 1, "isSeeded": False}


def _log(tmp_path: Path, header: dict[str, Any], *events: dict[str, Any], name: str) -> Path:
    path = tmp_path / name
    lines = [header, *({"seq": i, "time": 0, **e} for i, e in enumerate(events))]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def _message(stream: list[Any], kind: str = "assistant/message") -> dict[str, Any]:
    return {"type": kind, "data": {"turn": 1, "step": 1, "stream": stream}}


STOP = {"type": "chunk", "time": 5, "chunk": {"type": "finish", "reason": {"kind": "stop"}}}


@pytest.mark.parametrize(
    ("header", "name", "message"),
    [
        ({**V4, "version": 6}, "session.jsonl", "format v6 is not one this build reads"),
        ({**V4, "version": 6}, "session.v6.jsonl", "format v6 is not one this build reads"),
        ({**V4, "seedLength": 0}, "session.jsonl", "unknown field 'seedLength'"),
        ({**V4, "sandboxMode": "x"}, "session.jsonl", "retired policy baseline fields"),
        ({k: v for k, v in V4.items() if k != "isSeeded"}, "session.jsonl", "isSeeded"),
        ({**V4, "delegationDepth": -1}, "session.jsonl", "delegationDepth"),
        ({**V4, "version": 0}, "session.v4.jsonl", "name says log format v4 but its header"),
    ],
)
def test_headers_a_reader_refuses(
    tmp_path: Path, header: dict[str, Any], name: str, message: str
) -> None:
    if "delegationDepth" not in header and "isSeeded" in header:
        header = {**header, "delegationDepth": 0}
    path = _log(tmp_path, header, name=name)
    with pytest.raises(SessionLogError, match=message) as info:
        load_scenario(path)
    assert str(path) in str(info.value)
    assert ":1:" in str(info.value).replace(str(path), "")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("x", "Assistant stream record must be an object"),
        ({"type": "nope"}, 'Unsupported Assistant stream record "nope"'),
        ({"time": 1}, "Unsupported Assistant stream record undefined"),
        (
            {"type": "text-chunks", "time0": 1, "index": 0, "dt": []},
            "text-chunks Assistant stream record must contain exactly type, time0, index, "
            "dt, texts",
        ),
        (
            {"type": "tool-call-chunks", "time0": 1, "index": 0, "dt": [], "id": "c"},
            "tool-call-chunks Assistant stream record must contain exactly type, time0, "
            "index, dt, id, args",
        ),
        (
            {"type": "chunk", "time": 1},
            "chunk Assistant stream record must contain exactly type, time, chunk",
        ),
        (
            {"type": "text-chunks", "time0": 1, "index": 0, "dt": [], "texts": [1]},
            "text-chunks texts must be a string array",
        ),
        (
            {"type": "reasoning-chunks", "time0": 1, "index": 0, "dt": [], "texts": []},
            "reasoning-chunks texts must be non-empty",
        ),
        (
            {"type": "tool-call-chunks", "time0": 1, "index": 0, "dt": [], "id": "", "args": ["a"]},
            "tool-call-chunks id must be a non-empty string",
        ),
        (
            {
                "type": "tool-call-chunks",
                "time0": 1,
                "index": 0,
                "dt": [],
                "id": "c",
                "name": "",
                "args": ["a"],
            },
            "tool-call-chunks name must be a non-empty string",
        ),
        (
            {"type": "text-chunks", "time0": 1.5, "index": 0, "dt": [], "texts": ["a"]},
            "Assistant stream time must be a safe integer, got 1.5",
        ),
        (
            {"type": "text-chunks", "time0": 1, "index": -1, "dt": [], "texts": ["a"]},
            "text-chunks index must be a non-negative safe integer",
        ),
        (
            {"type": "text-chunks", "time0": 1, "index": 0, "dt": ["1"], "texts": ["a", "b"]},
            "text-chunks dt must contain safe integers",
        ),
        (
            {"type": "text-chunks", "time0": 1, "index": 0, "dt": [True], "texts": ["a", "b"]},
            "text-chunks dt must contain safe integers",
        ),
        (
            {"type": "text-chunks", "time0": 1, "index": 0, "dt": [], "texts": ["a", "b"]},
            "text-chunks dt length must be one less than its members",
        ),
        (
            {
                "type": "text-chunks",
                "time0": 2**53 - 1,
                "index": 0,
                "dt": [1],
                "texts": ["a", "b"],
            },
            "text-chunks member times must stay safe integers",
        ),
        (
            {"type": "chunk", "time": 1, "chunk": [1]},
            "Assistant stream raw chunk must be a lossless JSON object",
        ),
    ],
)
def test_malformed_stream_records_use_the_runtime_texts(
    tmp_path: Path, record: Any, message: str
) -> None:
    path = _log(tmp_path, {**V4, "delegationDepth": 0}, _message([record, STOP]), name="a.jsonl")
    with pytest.raises(SessionLogError) as info:
        load_scenario(path)
    assert info.value.reason == f"assistant/message stream record 0: {message}"
    assert info.value.line == 2
    assert info.value.path == str(path)


def _fork_log(tmp_path: Path, *events: dict[str, Any], seeded: bool = True) -> Path:
    header = {**V4, "isSeeded": seeded, "parentSession": "p", "delegationDepth": 1}
    return _log(tmp_path, header, *events, name="child.jsonl")


_START = {"type": "block-start", "index": 0, "blockType": "text"}
PARENT_CALL = _message([{"type": "chunk", "time": 1, "chunk": _START}])  # no finish
OWN_CALL = _message([STOP])
INHERITED = {"type": "session/end-seed", "data": {"inherited": True}}
RESUMED = {"type": "session/end-seed", "data": {}}


def test_the_boundary_is_the_last_inherited_marker_never_a_resume_marker(tmp_path: Path) -> None:
    path = _fork_log(
        tmp_path,
        PARENT_CALL,  # an unterminated call in the inherited part is the parent's problem
        INHERITED,  # a fork of a fork: the ancestor's marker, copied
        OWN_CALL,  # the parent's own call, inherited by this child
        INHERITED,  # this child's cut
        {"type": "user/message", "data": {"role": "user", "content": "mine"}},
        OWN_CALL,
        RESUMED,  # a resume marker cuts nothing
        OWN_CALL,
    )
    child = load_session_script(path, primary=False)
    assert (child.seed_length, len(child.entries), child.first_user_text) == (3, 2, "mine")
    with pytest.raises(ScriptError, match=r"model call 1/1 .* replay\.override\.json"):
        load_session_script(path, primary=True)  # the primary is never sliced


def test_seed_markers_must_agree_with_the_header(tmp_path: Path) -> None:
    with pytest.raises(SessionLogError, match="seeded session lacks an inherited end-seed"):
        load_session_script(_fork_log(tmp_path, OWN_CALL), primary=False)
    with pytest.raises(SessionLogError, match="unseeded session contains an inherited"):
        load_session_script(_fork_log(tmp_path, INHERITED, seeded=False), primary=False)


def test_attempts_and_settled_messages(tmp_path: Path) -> None:
    aborted = _message([], "assistant/attempt")
    empty = _message([])  # a migrated message without its chunks: no call
    path = _log(tmp_path, {**V4, "delegationDepth": 0}, empty, OWN_CALL, name="a.jsonl")
    assert len(load_scenario(path).primary.entries) == 1
    path = _log(tmp_path, {**V4, "delegationDepth": 0}, OWN_CALL, aborted, name="b.jsonl")
    with pytest.raises(ScriptError, match=r"model call 1/1 \(call #2 .*patch at 1"):
        load_scenario(path)


def test_members_expand_exactly(tmp_path: Path) -> None:
    stream = [
        {
            "type": "tool-call-chunks",
            "time0": 1,
            "index": 1,
            "dt": [0, 2],
            "id": "c",
            "name": "bash",
            "args": ["", '{"a"', ":1}"],
        },
        {"type": "reasoning-chunks", "time0": 3, "index": 0, "dt": [], "texts": ["hm"]},
        STOP,
    ]
    path = _log(tmp_path, {**V4, "delegationDepth": 0}, _message(stream), name="a.jsonl")
    assert load_scenario(path).primary.entries[0].chunks == [
        {"type": "tool-call-delta", "index": 1, "id": "c", "name": "bash", "argumentsDelta": a}
        for a in ("", '{"a"', ":1}")
    ] + [{"type": "reasoning-delta", "index": 0, "text": "hm"}, STOP["chunk"]]


def test_compact_summary_is_the_older_name_of_a_summary_call() -> None:
    events = [
        {"type": "compact/summary", "data": {"llmStreamCall": True, "rawOutput": []}},
        {"type": "compaction/summary", "data": {"llmStreamCall": False}},
    ]
    (entry,) = derive_replay_script(events)
    assert entry.chunks == [{"type": "finish", "reason": {"kind": "stop"}}]


def test_parse_session_log_reads_v4_events_as_they_are() -> None:
    events = parse_session_log(PRIMARY.read_bytes())
    assert len(events) == 52
    assert [e["seq"] for e in events] == list(range(52))
    assert [e.to_json() for e in derive_replay_script(events)] == [
        e.to_json() for e in load_session_script(PRIMARY).entries
    ]


def test_a_surrogate_pair_split_across_deltas_loads_joined(tmp_path: Path) -> None:
    """JavaScript writes the halves of a split pair as lone escapes; orjson refuses them."""
    header = b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}\n'
    chunk = '{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":%s}}\n'
    body = [
        chunk % '{"type":"text-delta","index":0,"text":"a\\ud83d"}',
        chunk % '{"type":"text-delta","index":0,"text":"\\ude00b"}',
        chunk % '{"type":"text-delta","index":0,"text":"lone \\udc00"}',
        chunk % '{"type":"finish","reason":{"kind":"stop"}}',
    ]
    path = tmp_path / "session.jsonl"
    path.write_bytes(header + "".join(body).encode())
    (entry,) = load_scenario(path).primary.entries
    texts = [c["text"] for c in entry.chunks if c["type"] == "text-delta"]
    assert texts == ["a", "\U0001f600b", "lone \ufffd"]
    v4 = _log(
        tmp_path,
        {**V4, "delegationDepth": 0},
        _message(
            [
                {"type": "text-chunks", "time0": 1, "index": 0, "dt": [0], "texts": ["x", "y"]},
                STOP,
            ]
        ),
        name="v4.jsonl",
    )
    text = v4.read_text().replace('"texts":["x","y"]', '"texts":["\\ud83d","\\ude00"]')
    v4.write_text(text)
    (entry,) = load_scenario(v4).primary.entries
    assert [c["text"] for c in entry.chunks if c["type"] == "text-delta"] == ["", "\U0001f600"]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(header + b'{"type":"x","data":"\\ud83d",NaN}\n')
    with pytest.raises(SessionLogError, match=r"bad\.jsonl:2: invalid JSON"):
        load_scenario(bad)


def test_large_time_steps_that_come_back_stay_safe(tmp_path: Path) -> None:
    # Each running time is safe although the steps' absolute sum is not.
    steps = {"type": "text-chunks", "time0": 2**52, "index": 0, "dt": [2**51, -(2**51)]}
    record = {**steps, "texts": ["a", "b", "c"]}
    path = _log(tmp_path, {**V4, "delegationDepth": 0}, _message([record, STOP]), name="a.jsonl")
    (entry,) = load_scenario(path).primary.entries
    assert [c.get("text") for c in entry.chunks[:3]] == ["a", "b", "c"]
