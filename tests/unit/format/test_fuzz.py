"""A mutation fuzzer over the real corpus logs (issue 8).

Every case takes a corpus scenario, damages one of its files (flipped bits, truncation,
duplicated, deleted or swapped lines, changed types and numbers, invalid UTF-8, huge
numbers, deep nesting, CRLF and blank lines, retagged records, header fields) and loads
it. The outcome must be a loaded scenario whose calls all materialize, or a
``DshReplayError`` that names the file and, when the problem is on a line, a line that
exists; never another exception and never a hang (each case runs under a deadline).

The test runs a bounded, seeded set of cases; ``python3 benchmarks/fuzz.py --cases N``
runs the same engine for longer.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from support.corpus_support import corpus_scenarios, require_corpus
from support.flips import rewrite
from support.hang_guard import deadline
from support.values import json_paths, replace_at

from pytest_dsh_replay import (
    DshReplayError,
    OverrideError,
    ScenarioError,
    ScriptError,
    SessionLogError,
    derive_replay_script,
    load_scenario,
    parse_session_log,
)

CASES = 2500
SEED = 20261130
CASE_DEADLINE_S = 20

_HOLE = "__dsh_fuzz_hole__"
# Raw JSON literals spliced in where a value was: types and numbers the reference and
# we must both survive. (A literal that is not valid JSON makes the line invalid.)
_LITERALS: tuple[bytes, ...] = (
    b"null",
    b"true",
    b"false",
    b"0",
    b"-0",
    b"-1",
    b"1.5",
    b"3.0",
    b"1e2",
    b"9007199254740991",
    b"9007199254740992",
    b"-9007199254740993",
    b"18446744073709551615",
    b"18446744073709551616",
    b"123456789012345678901234567890123456789",
    b"1e308",
    b"-1e308",
    b"1e400",
    b"5e-324",
    b'""',
    b'"x"',
    b'"\\ud800"',
    b'"\xff\xfe"',
    b'"\xc0\xaf"',
    b'"{{fromRequest:(a+)+$}}"',
    b"[]",
    b"{}",
    b'["a","b","c"]',
    b"[0,0]",
    b'{"type":"finish","reason":{"kind":"stop"}}',
    b"[" * 300 + b"]" * 300,
    b"[" * 2000 + b"]" * 2000,
    b'{"a":' * 260 + b"1" + b"}" * 260,
)
_TYPES = (
    "assistant/chunk",
    "text-chunks",
    "reasoning-chunks",
    "tool-call-chunks",
    "compaction/summary",
    "user/message",
    "session",
    "",
)


_KEYS = frozenset(
    [
        "type",
        "seq",
        "time",
        "seq0",
        "time0",
        "turn",
        "step",
        "index",
        "data",
        "chunk",
        "dt",
        "texts",
        "args",
        "seedLength",
        "id",
        "llmStreamCall",
        "rawOutput",
        "readyFile",
        "kind",
        "chunks",
        "patches",
        "at",
    ]
)


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _splice(rng: random.Random, line: bytes) -> bytes | None:
    """Replace one value of a JSON line (or one key) with a hostile literal."""
    try:
        value = orjson.loads(line)
        orjson.dumps(value)  # a line an earlier mutation nested too deep is left alone
    except (orjson.JSONDecodeError, TypeError):
        return None
    paths = list(json_paths(value))
    interesting = [
        p
        for p in paths
        if (p and p[-1] in _KEYS) or (len(p) >= 2 and p[-2] in ("dt", "texts", "args"))
    ]
    path = rng.choice(interesting if interesting and rng.random() < 0.7 else paths)
    if path and isinstance(path[-1], str) and rng.random() < 0.1:
        # Drop the key instead (a missing envelope field or data key).
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        return orjson.dumps(value) + b"\n"
    if path and path[-1] == "type" and rng.random() < 0.5:
        return orjson.dumps(replace_at(value, path, rng.choice(_TYPES))) + b"\n"
    text = orjson.dumps(replace_at(value, path, _HOLE))
    return text.replace(b'"' + _HOLE.encode() + b'"', rng.choice(_LITERALS), 1) + b"\n"


def _flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def _line_edit(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    if len(lines) < 2:
        return data + data
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    op = rng.randrange(5)
    if op == 0:
        lines.insert(j, lines[i])  # duplicate
    elif op == 1:
        del lines[i]  # delete
    elif op == 2:
        lines[i], lines[j] = lines[j], lines[i]  # swap
    elif op == 3:
        lines.insert(j, rng.choice([b"\n", b"\r\n", b"   \n", b"\xef\xbb\xbf\n", b"\x1c\n"]))
    else:
        lines[i] = lines[i].rstrip(b"\n") + b"\r\n"
    return b"".join(lines)


def _value_edit(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(8):
        i = rng.randrange(len(lines))
        new = _splice(rng, lines[i])
        if new is not None:
            lines[i] = new
            return b"".join(lines)
    return _flip(rng, data)


def _bytes_edit(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    op = rng.randrange(4)
    if op == 0:
        return data[:i]  # truncate
    if op == 1:
        return (
            data[:i]
            + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xf4\x90"])
            + data[i:]
        )
    if op == 2:
        return data[:i] + rng.choice(_LITERALS) + data[i:]
    return data.rstrip(b"\n")  # no final newline


MUTATORS: tuple[Callable[[random.Random, bytes], bytes], ...] = (
    _flip,
    _line_edit,
    _value_edit,
    _value_edit,
    _value_edit,
    _bytes_edit,
)


@dataclass(frozen=True)
class Case:
    """One fuzz case: which file of which scenario, damaged how."""

    number: int
    scenario: Path
    file: str
    mutator: str
    data: bytes


def cases(scenarios: list[Path], count: int, seed: int) -> Iterator[Case]:
    """Deterministic cases: ``count`` damaged files over ``scenarios`` (round robin)."""
    rng = random.Random(seed)
    files = {
        d: sorted(
            p.name
            for p in d.iterdir()
            if p.name.startswith("session.") or p.name.startswith("replay.")
        )
        for d in scenarios
    }
    for n in range(count):
        d = scenarios[n % len(scenarios)]
        name = rng.choice(files[d])
        data = (d / name).read_bytes()
        mutator = rng.choice(MUTATORS)
        damaged = data if not data else mutator(rng, data)
        if rng.random() < 0.2 and damaged:  # now and then, a second mutation
            damaged = rng.choice(MUTATORS)(rng, damaged)
        yield Case(n, d, name, mutator.__name__, damaged)


def _check_error(err: DshReplayError, files: dict[str, bytes], where: str) -> None:
    if isinstance(err, ScenarioError | OverrideError):
        assert getattr(err, "path", None), f"{where}: no file named: {err!r}"
        return
    assert isinstance(err, SessionLogError | ScriptError), f"{where}: {type(err)}: {err}"
    assert err.path is not None, f"{where}: no file named: {err}"
    name = Path(err.path).name
    assert name in files, f"{where}: names {err.path}"
    if err.line is None:
        assert "empty session log" in str(err) or "cannot read" in str(err), f"{where}: {err}"
        return
    lines = files[name].count(b"\n") + 1
    assert 1 <= err.line <= lines, f"{where}: line {err.line} of {lines}: {err}"


def run_case(case: Case, workdir: Path) -> str:
    """Run one case in ``workdir`` (a copy of the scenario); return its outcome name."""
    target = workdir / case.file
    original = target.read_bytes()
    rewrite(target, case.data)
    where = f"case {case.number} ({case.scenario.name}/{case.file}, {case.mutator})"
    files = {p.name: p.read_bytes() for p in workdir.iterdir()}
    try:
        with deadline(CASE_DEADLINE_S):
            try:
                scenario = load_scenario(workdir)
            except DshReplayError as err:
                _check_error(err, files, where)
                outcome = type(err).__name__
            else:
                for script in scenario.scripts:
                    for entry in script.entries:
                        entry.to_json()  # every stored call materializes
                outcome = "loaded"
            if case.file.startswith("session."):
                try:
                    events = parse_session_log(case.data, source=case.file)
                except SessionLogError as err:
                    _check_error(err, {case.file: case.data}, where)
                else:
                    # A call that cannot be derived, or a chunk or event type the format
                    # does not allow (docs/format.md#vocabulary), is a typed refusal.
                    with contextlib.suppress(ScriptError, SessionLogError):
                        derive_replay_script(events, source=case.file)
    finally:
        rewrite(target, original)
    return outcome


def fuzz(
    scenarios: list[Path], count: int, seed: int, tmp: Path, progress: Callable[[int], None] | None
) -> dict[str, int]:
    """Run ``count`` cases; return how many ended in each outcome."""
    copies: dict[Path, Path] = {}
    outcomes: dict[str, int] = {}
    for case in cases(scenarios, count, seed):
        work = copies.get(case.scenario)
        if work is None:
            work = tmp / f"s{len(copies)}"
            work.mkdir()
            for p in case.scenario.iterdir():
                if p.name.startswith(("session.", "replay.")):
                    (work / p.name).write_bytes(p.read_bytes())
            copies[case.scenario] = work
        outcome = run_case(case, work)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if progress is not None:
            progress(case.number)
    return outcomes


def test_damaged_corpus_logs_load_or_fail_with_file_and_line(tmp_path: Path) -> None:
    require_corpus()
    outcomes = fuzz(corpus_scenarios(), CASES, SEED, tmp_path, None)
    assert sum(outcomes.values()) == CASES
    # The mutations reach both sides: damage that is refused, and damage that loads.
    assert outcomes.get("loaded", 0) > CASES // 10
    assert outcomes.get("SessionLogError", 0) > CASES // 10


def test_the_case_generator_is_deterministic() -> None:
    require_corpus()
    scenarios = corpus_scenarios()[:5]
    first = [(c.file, c.mutator, c.data) for c in cases(scenarios, 40, 7)]
    assert first == [(c.file, c.mutator, c.data) for c in cases(scenarios, 40, 7)]


@pytest.mark.parametrize("literal", _LITERALS, ids=range(len(_LITERALS)))
def test_every_hostile_literal_in_a_packed_row_is_handled(tmp_path: Path, literal: bytes) -> None:
    header = b'{"type":"session","id":"s","createdAt":1}\n'
    for field in (b"turn", b"dt", b"texts", b"seq0", b"time0", b"index"):
        row = {
            "type": "text-chunks",
            "seq0": 0,
            "time0": 0,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]},
        }
        text = orjson.dumps(row)
        if field in (b"seq0", b"time0"):
            text = text.replace(b'"%s":0' % field, b'"%s":%s' % (field, literal), 1)
        else:
            text = text.replace(b'"%s":' % field, b'"%s":%s,"_":' % (field, literal), 1)
            text = text.replace(b',"_":', b',"__":', 1)
        d = tmp_path / field.decode()
        d.mkdir()
        (d / "session.jsonl").write_bytes(header + text + b"\n")
        files = {"session.jsonl": header + text + b"\n"}
        with deadline(CASE_DEADLINE_S):
            try:
                load_scenario(d)
            except DshReplayError as err:
                _check_error(err, files, f"{field!r}={literal[:20]!r}")
