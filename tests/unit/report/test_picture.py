"""The picture of a scenario and its page (docs/guide/picture.md), without pytest's plugin.

The example scenarios are read in place: ``mixed`` (format 0 in the committed form: a
spawn and a fork child started by one call's two tool calls, no times) and
``runtime-mixed`` (the dsh runtime's format 4, with times). Hostile text is built here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.chunks import chunk_events, text_call
from support.paths import EXAMPLES

from pytest_dsh_replay import PictureError, load_scenario
from pytest_dsh_replay._check.log_check import Redaction, drift_of
from pytest_dsh_replay._check.normalize import LogDifference
from pytest_dsh_replay._format.events import SessionHeader, SessionLog
from pytest_dsh_replay._format.redact import Redactor
from pytest_dsh_replay._report.html import PageStatus, render_page
from pytest_dsh_replay._report.pages import page_name, scenario_picture, write_page
from pytest_dsh_replay._report.picture import picture_of

SECRET = "sk-" + "A1b2C3d4" * 4


def header(sid: str, **fields: Any) -> SessionHeader:
    return SessionHeader.from_json({"type": "session", "id": sid, "createdAt": 1, **fields})


def user(text: str) -> dict[str, Any]:
    return {"type": "user/message", "data": {"role": "user", "content": text}}


def test_a_spawn_and_a_fork_hang_under_the_call_that_started_them() -> None:
    picture = scenario_picture(load_scenario(EXAMPLES / "mixed"))
    primary, spawn, fork = picture.sessions
    assert [(s.role, s.parent) for s in picture.sessions] == [
        ("primary", None),
        ("spawn", 0),
        ("fork", 0),
    ]
    assert [s.file for s in picture.sessions] == [
        "session.jsonl",
        "session.1.jsonl",
        "session.2.jsonl",
    ]
    assert [len(s.calls) for s in picture.sessions] == [3, 1, 1]
    (subagent, subagent_fork) = primary.calls[1].tool_calls
    assert (subagent.name, subagent.children) == ("subagent", (1,))
    assert (subagent_fork.name, subagent_fork.children) == ("subagent_fork", (2,))
    assert spawn.started_by == (2, 0)
    assert fork.started_by == (2, 1)
    assert (spawn.seed_length, fork.seed_length) == (0, 14)
    assert fork.inherited_calls == 1  # the parent's first call, before the fork
    assert [m.text for m in fork.inherited if m.role == "user"] == [
        "Remember: the codeword is SAFFRON."
    ]
    assert fork.calls[0].request.model == "unknown"  # carried from the inherited request
    assert fork.calls[0].text == "echo: Recall it."
    assert primary.calls[1].finish == "tool-calls"
    assert primary.calls[1].usage == {"inputTokens": 44, "outputTokens": 12, "reasoningTokens": 4}
    assert not picture.timed  # the committed form keeps no times
    page = render_page(picture)
    assert page.count("data-node=") == 3
    assert "no times recorded" in page


def test_a_runtime_recording_has_a_time_line_and_its_announced_children() -> None:
    picture = scenario_picture(load_scenario(EXAMPLES / "runtime-mixed"))
    primary, spawn, fork = picture.sessions
    assert picture.timed
    assert [len(s.calls) for s in picture.sessions] == [5, 1, 1]
    first = primary.calls[0]
    assert (first.reasoning, first.text) == ("The user wants me to remember it.", "OK remembered")
    assert first.start is not None
    assert first.end is not None
    assert first.start <= first.end
    assert first.request.model == "deepseek-flash"
    assert "subagent_fork" in first.request.tools
    assert [t.children for t in primary.calls[1].tool_calls] == [(1,), (2,)]
    assert fork.seed_length == 17
    assert fork.role == "fork"
    assert spawn.role == "spawn"
    assert primary.span is not None
    assert fork.span is not None
    assert primary.span[0] <= fork.span[0] <= fork.span[1]
    page = render_page(picture)
    assert "ms from the first event to the last" in page
    assert page.count('class="bar ') == 7  # one bar per call
    assert 'href="#session-0-call-2"' in page  # the children's "started by" links


def test_text_is_escaped_and_secrets_redacted_everywhere() -> None:
    hostile = f"<script>alert(1)</script> & {SECRET} \x1b[31m"
    log = SessionLog(
        header(f'<img src=x onerror="alert(2)"> {SECRET}'),
        [user(f"<b>{SECRET}</b>"), *chunk_events(text_call(hostile))],
    )
    page = render_page(
        picture_of("<title>", [log], files=["<f>.jsonl"]),
        status=PageStatus("t.py::test[<x>]", "passed"),
    )
    assert SECRET not in page
    assert "[REDACTED]" in page
    assert "<script" not in page
    assert "<img" not in page
    assert "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; [REDACTED]" in page
    assert "\x1b" not in page  # shown as a visible symbol, never obeyed


def test_the_page_needs_nothing_from_the_network() -> None:
    page = render_page(scenario_picture(load_scenario(EXAMPLES / "runtime-mixed")))
    assert re.findall(r"\b(?:src|srcset|action)=", page) == []
    assert re.findall(r"https?://|//[a-z]|@import|url\(|<link|<script|<iframe", page) == []
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs
    assert all(h.startswith("#session-") for h in hrefs)


def test_a_session_whose_parent_is_missing_or_itself_is_drawn_at_the_top() -> None:
    orphan = SessionLog(header("child", parentSession="gone"), chunk_events(text_call("hi")))
    loop = SessionLog(header("loop", parentSession="loop"), [])
    picture = picture_of("x", [orphan, loop])
    assert [s.parent for s in picture.sessions] == [None, None]
    assert render_page(picture).count("data-node=") == 2


def test_a_child_no_tool_call_announced_is_listed_after_its_parent() -> None:
    parent = SessionLog(header("p"), [user("go"), *chunk_events(text_call("done"))])
    child = SessionLog(header("c", parentSession="p"), [user("a task nobody gave")])
    picture = picture_of("x", [parent, child])
    assert picture.sessions[0].unlinked == (1,)
    assert picture.sessions[1].started_by is None
    assert "Also started" in render_page(picture)


def test_a_log_that_ends_inside_a_call_shows_what_it_streamed() -> None:
    chunks = text_call("half")[:-1]  # no finish chunk
    picture = picture_of("x", [SessionLog(header("p"), chunk_events(chunks))])
    (call,) = picture.sessions[0].calls
    assert (call.text, call.finish) == ("half", "none")


def test_a_drift_shows_the_events_around_the_difference_side_by_side() -> None:
    recorded = SessionLog(header("r"), [user(f"q{n}") for n in range(10)])
    replayed = SessionLog(header("l"), [user(f"q{n}") for n in range(6)] + [user("other")])
    diff = LogDifference("session.jsonl", 6, "user/message", "$.data.content", "q6", "other", "x")
    drift = drift_of(
        "session.jsonl",
        diff,
        recorded,
        replayed,
        redaction=Redaction(Redactor()),
        report="the report",
    )
    assert drift.first == 3
    assert [e["data"]["content"] for e in drift.recorded] == [
        "q3",
        "q4",
        "q5",
        "q6",
        "q7",
        "q8",
        "q9",
    ]
    assert [e["data"]["content"] for e in drift.replayed] == ["q3", "q4", "q5", "other"]
    page = render_page(picture_of("x", [recorded]), drift=drift)
    rows = re.findall(r"<tr( class=differs)?><td>(#\d+)</td>", page)
    assert rows == [("", f"#{n}") if n != 6 else (" class=differs", "#6") for n in range(3, 10)]
    assert page.count("(none)") == 3  # the replayed log ended first


def test_a_header_drift_shows_both_headers_redacted() -> None:
    recorded = SessionLog(header("r", cwd="/a"), [])
    replayed = SessionLog(header("l", cwd=f"/b/{SECRET}"), [])
    diff = LogDifference("session.jsonl", None, "session", "$.cwd", "/a", "/b", "header differs")
    drift = drift_of("f", diff, recorded, replayed, redaction=Redaction(Redactor()), report="r")
    assert [h["cwd"] for h in (*drift.recorded, *drift.replayed)] == ["{{cwd}}", "/b/[REDACTED]"]
    page = render_page(picture_of("x", [recorded]), drift=drift)
    assert "<td>header</td>" in page
    assert SECRET not in page


@pytest.mark.parametrize(
    "nodeid",
    ["t.py::test", "a/b.py::C::test[../../x]", "t.py::test[" + "é/" * 200 + "]", ".hidden"],
)
def test_a_page_name_is_one_safe_file_name(nodeid: str) -> None:
    name = page_name(nodeid)
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*-[0-9a-f]{10}\.html", name)
    assert len(name) <= 140
    assert page_name(nodeid + "x") != name


def test_writing_a_page_replaces_it_whole_and_refuses_a_directory(tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    out.write_text("old", encoding="utf-8")
    write_page(out, "<p>new</p>")
    assert out.read_text(encoding="utf-8") == "<p>new</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]
    with pytest.raises(PictureError, match="is a directory"):
        write_page(tmp_path, "x")
    with pytest.raises(PictureError, match=r"cannot write .*page\.html/inside\.html"):
        write_page(out / "inside.html", "x")  # under a file
    assert out.read_text(encoding="utf-8") == "<p>new</p>"


def test_a_drift_numbers_every_session_id_of_its_side_as_the_check_does() -> None:
    parent = header("main-session")
    recorded = SessionLog(header("c1", parentSession="main-session"), [user("from main-session")])
    replayed = SessionLog(header("c2", parentSession="live-main"), [user("from live-main")])
    diff = LogDifference("session.1.jsonl", 0, "user/message", "$.data", None, None, "x")
    drift = drift_of(
        "session.1.jsonl",
        diff,
        recorded,
        replayed,
        redaction=Redaction(Redactor()),
        report="r",
        headers=([parent], [header("live-main")]),
    )
    assert drift.recorded == drift.replayed  # both parents' ids are ids, not text
    assert "main-session" not in str(drift.recorded)
