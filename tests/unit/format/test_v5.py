"""Format 5, the harness's newest log format: format 4 with a new header version and origin.

The v4 -> v5 step changes only the header: ``version`` is 5 and ``origin`` may be
``"automation"``; events, ids, times and inherited cuts are format 4's. The runtime's
real format 4 logs (``../shared/runtime-samples/``), re-headed as format 5, must load
into the same scripts; a directory of several generations reads the highest; a newer,
unknown generation is refused with an upgrade hint, never read as an older one.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import zstandard
from support.corpus_support import SAMPLES, require_corpus

from pytest_dsh_replay import Scenario, SessionLogError, load_scenario, write_scenario
from pytest_dsh_replay._format.events import header_problem
from pytest_dsh_replay._format.jsonl import read_session_log
from pytest_dsh_replay._scripts.scenario import load_session_script

PRIMARY = SAMPLES / "t5-primary.session.v4.jsonl"
SPAWN = SAMPLES / "t5-spawn-child.session.v4.jsonl"
FORK = SAMPLES / "t5-fork-child.session.v4.jsonl"


@pytest.fixture(autouse=True)
def _samples() -> None:
    require_corpus(SAMPLES)


def as_version(log: Path, version: int, origin: str | None = None) -> bytes:
    """The bytes of ``log`` with its header's ``version`` (and ``origin``) changed.

    The keys keep the order the runtime writes: ``origin`` before ``delegationDepth``.
    """
    first, rest = log.read_bytes().split(b"\n", 1)
    header = {**orjson.loads(first), "version": version}
    if origin is not None:
        header.pop("origin", None)
        depth = header.pop("delegationDepth")
        header = {**header, "origin": origin, "delegationDepth": depth}
    return orjson.dumps(header) + b"\n" + rest


def _sessions_root(tmp_path: Path, versions: tuple[int, ...]) -> Path:
    """A runtime sessions root of the sample run, each session written in ``versions``."""
    root = tmp_path / "sessions"
    for log in (PRIMARY, SPAWN, FORK):
        sid = json.loads(log.read_bytes().split(b"\n", 1)[0])["id"]
        d = root / "--home-u-proj--" / sid
        d.mkdir(parents=True)
        for version in versions:
            (d / f"session.v{version}.jsonl").write_bytes(as_version(log, version))
    return root


def _entries(scenario: Scenario) -> list[list[list[object]]]:
    return [[list(e.chunks) for e in s.entries] for s in scenario.scripts]


def test_a_v5_log_loads_as_the_same_v4_log_does(tmp_path: Path) -> None:
    for log, primary in ((PRIMARY, True), (SPAWN, False), (FORK, False)):
        v5 = tmp_path / f"{log.name}.session.v5.jsonl"
        v5.write_bytes(as_version(log, 5))
        four = load_session_script(log, primary=primary)
        five = load_session_script(v5, primary=primary)
        assert [e.chunks for e in five.entries] == [e.chunks for e in four.entries]
        assert five.seed_length == four.seed_length
    assert load_session_script(FORK, primary=False).seed_length == 17  # the inherited cut, as in 4


def test_a_v5_sessions_root_and_a_compressed_v5_log(tmp_path: Path) -> None:
    v4 = load_scenario(_sessions_root(tmp_path / "a", (4,)), session_id="sess-main")
    v5 = load_scenario(_sessions_root(tmp_path / "b", (5,)), session_id="sess-main")
    assert _entries(v5) == _entries(v4)
    assert [s.seed_length for s in v5.scripts] == [0, 0, 17]
    assert v5.scripts[1].file.endswith("/session.v5.jsonl")
    zstd = tmp_path / "z" / "session.v5.jsonl.zstd"
    zstd.parent.mkdir()
    zstd.write_bytes(zstandard.ZstdCompressor().compress(as_version(PRIMARY, 5)))
    assert _entries(load_scenario(zstd.parent)) == _entries(v5)[:1]


def test_a_directory_of_two_generations_reads_the_highest(tmp_path: Path) -> None:
    root = _sessions_root(tmp_path, (4, 5))
    scenario = load_scenario(root, session_id="sess-main")
    assert all(s.file.endswith("/session.v5.jsonl") for s in scenario.scripts)


def test_a_newer_generation_is_refused_never_read_as_an_older_one(tmp_path: Path) -> None:
    root = _sessions_root(tmp_path, (5, 6))
    with pytest.raises(SessionLogError) as info:
        load_scenario(root, session_id="sess-main")
    message = str(info.value)
    assert "session.v6.jsonl:1:" in message
    assert "format v6 is not one this build reads (v0 to v5)" in message
    assert "upgrade pytest-dsh-replay" in message


def test_only_a_v5_header_may_come_from_an_automation() -> None:
    header = orjson.loads(PRIMARY.read_bytes().split(b"\n", 1)[0])
    assert header_problem({**header, "version": 5, "origin": "automation"}, "replay") is None
    assert header_problem({**header, "version": 5, "origin": "subagent"}, "replay") is None
    problem = header_problem({**header, "version": 4, "origin": "automation"}, "replay")
    assert problem is not None
    assert "origin must be" in problem
    problem = header_problem({**header, "version": 5, "origin": "cron"}, "replay")
    assert problem is not None
    assert "origin must be" in problem


def test_a_v5_log_is_written_back_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "in" / "session.v5.jsonl"
    source.parent.mkdir()
    source.write_bytes(as_version(PRIMARY, 5, origin="automation"))

    class Log:
        def __init__(self, path: Path) -> None:
            self.header, self.events = read_session_log(path)

    (written,) = write_scenario(tmp_path / "copy", [Log(source)])
    assert written.read_bytes() == source.read_bytes()  # format 5 has no other form
    assert _entries(load_scenario(written.parent)) == _entries(load_scenario(source))
