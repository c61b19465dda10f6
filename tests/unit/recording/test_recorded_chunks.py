"""The recorder refuses a live model's chunk that its own loader would refuse.

A chunk the format does not allow (docs/format.md#stream-chunks), one nested deeper than
a log can store, or one after the call's ``finish`` fails the recording with the
loader's sentence, and nothing is written: the previous recording stays byte for byte.
Whatever the recorder accepts, the loader loads back as it was streamed.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.scenarios import make_scenario
from support.values import UTF8

from pytest_dsh_replay import DshReplayError, RecordingError, load_scenario
from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._format.vocabulary import CHUNK_FIELDS, chunk_problem
from pytest_dsh_replay._recording.recorder import RECORDED_CHUNK_NESTING

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STOP: dict[str, Any] = {"type": "finish", "reason": {"kind": "stop"}}

# One chunk of each type, with every field it may have.
VALID: dict[str, dict[str, Any]] = {
    "block-start": {"type": "block-start", "index": 0, "blockType": "text"},
    "text-delta": {"type": "text-delta", "index": 0, "text": "hi"},
    "reasoning-delta": {"type": "reasoning-delta", "index": 1, "text": "hm"},
    "tool-call-delta": {
        "type": "tool-call-delta",
        "index": 2,
        "id": "call_1",
        "name": "f",
        "argumentsDelta": "{}",
    },
    "block-end": {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hi"}},
    "usage": {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}},
    "finish": {"type": "finish", "reason": {"kind": "stop"}, "replayState": {"k": [1]}},
}


def _broken() -> Iterator[tuple[str, dict[str, Any]]]:
    """A chunk breaking each rule of the loader's table: a field missing, mistyped, extra."""
    yield "an unknown type", {"type": "text-delat", "index": 0, "text": "x"}
    yield "a type that is no string", {"type": 3, "index": 0}
    yield "no object at all", ["text-delta", 0, "x"]  # type: ignore[misc]
    for kind, (required, optional) in CHUNK_FIELDS.items():
        valid = VALID[kind]
        for field in required:
            missing = {k: v for k, v in valid.items() if k != field}
            yield f"{kind} without {field}", missing
        for field in [*required, *optional]:
            yield f"{kind} with a mistyped {field}", {**valid, field: [None]}
        yield f"{kind} with an unknown field", {**valid, "extra": 1}
    yield (
        "a block-end whose block has no text",
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "text"},
        },
    )
    yield "an error finish without its failure", {"type": "finish", "reason": {"kind": "error"}}


BROKEN = dict(_broken())


class Live:
    """A live model whose every call streams ``chunks`` (copies)."""

    def __init__(self, chunks: list[Any]):
        self.chunks = chunks

    def stream(self, request: Any, **kwargs: Any) -> Iterator[Any]:
        yield from copy.deepcopy(self.chunks)


def stream_of(chunk: Any) -> list[Any]:
    """A call that streams ``chunk`` in the middle, or last when it is a finish."""
    opening = [VALID["block-start"], VALID["text-delta"]]
    if isinstance(chunk, dict) and chunk.get("type") == "finish":
        return [*opening, chunk]
    return [*opening, chunk, STOP]


def record(path: Path, workdir: Path, chunks: list[Any]) -> tuple[list[Any], RecordingError | None]:
    """Record one call streaming ``chunks``; what the caller got, and the error it met.

    The caller swallows the error (the recording must fail all the same); the recording
    is then finished, as after a passing test.
    """
    recording = DshReplay.record(path, live=Live(chunks), workdir=workdir)
    got: list[Any] = []
    met: RecordingError | None = None
    try:
        try:
            for chunk in recording.model.stream(REQUEST, session_id="s"):
                got.append(chunk)
        except RecordingError as error:
            met = error
        if met is None:
            recording.finish()
        else:
            with pytest.raises(RecordingError) as failed:
                recording.finish()
            assert str(failed.value) == str(met)  # nothing written: the same refusal
    finally:
        recording.close()
    return got, met


def loader_refusal(tmp_path: Path, chunk: Any) -> str:
    """The loader's error for a log whose one call streams ``chunk``."""
    log = tmp_path / "handmade" / "session.jsonl"
    log.parent.mkdir()
    events = [{"type": "user/message", "data": {"role": "user", "content": "hi"}}]
    events += [
        {"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": c}}
        for c in stream_of(chunk)
    ]
    lines = [{"type": "session", "id": "s", "createdAt": 1}, *events]
    log.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    with pytest.raises(DshReplayError) as refused:
        load_scenario(log.parent)
    return str(refused.value)


def test_every_chunk_type_has_a_valid_example() -> None:
    assert set(VALID) == set(CHUNK_FIELDS)
    assert [kind for kind, chunk in VALID.items() if chunk_problem(chunk)] == []


@pytest.mark.parametrize("chunk", BROKEN.values(), ids=BROKEN.keys())
def test_a_chunk_the_loader_refuses_fails_the_recording_and_writes_nothing(
    tmp_path: Path, chunk: Any
) -> None:
    path = make_scenario(tmp_path / "scenario", primary=["old"])
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    problem = loader_refusal(tmp_path, chunk)  # what the next replay would say
    got, met = record(path, tmp_path / "work", stream_of(chunk))
    assert met is not None
    sentence = chunk_problem(chunk) if isinstance(chunk, dict) else "must be an object"
    assert sentence is not None
    assert sentence in str(met)
    assert sentence in problem or isinstance(chunk, list)
    assert chunk not in got  # the caller never got it
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before


def test_a_chunk_after_the_finish_fails_the_recording(tmp_path: Path) -> None:
    got, met = record(tmp_path / "s", tmp_path / "w", [*stream_of(STOP), VALID["text-delta"]])
    assert met is not None
    assert "came after the call's finish chunk" in str(met)
    assert got == stream_of(STOP)
    assert not (tmp_path / "s").exists()


def test_a_stream_without_its_finish_fails_the_recording_even_when_swallowed(
    tmp_path: Path,
) -> None:
    _, met = record(tmp_path / "s", tmp_path / "w", stream_of(STOP)[:-1])
    assert met is not None
    assert "without a finish chunk" in str(met)
    assert not (tmp_path / "s").exists()


def nested(depth: int) -> dict[str, Any]:
    """A finish whose chunk nests ``depth`` levels of objects (the chunk itself is one)."""
    state: dict[str, Any] = {}
    for _ in range(depth - 2):
        state = {"a": state}
    return {"type": "finish", "reason": {"kind": "stop"}, "replayState": state}


def test_a_chunk_as_deep_as_a_log_stores_is_recorded_and_loads(tmp_path: Path) -> None:
    deepest = nested(RECORDED_CHUNK_NESTING)
    got, met = record(tmp_path / "s", tmp_path / "w", stream_of(deepest))
    assert met is None
    (script,) = load_scenario(tmp_path / "s").scripts
    assert script.entries[0].chunks == got


@pytest.mark.parametrize("depth", [RECORDED_CHUNK_NESTING + 1, 5000])
def test_a_chunk_deeper_than_a_log_stores_fails_the_recording(tmp_path: Path, depth: int) -> None:
    _, met = record(tmp_path / "s", tmp_path / "w", stream_of(nested(depth)))
    assert met is not None
    assert f"at most {RECORDED_CHUNK_NESTING} levels" in str(met)
    assert not (tmp_path / "s").exists()


# --- whatever the recorder accepts loads --------------------------------------------------

_texts = st.text(UTF8, max_size=8)
_chunk = st.one_of(
    st.sampled_from(sorted(VALID)).map(lambda kind: VALID[kind]),
    _texts.map(lambda text: {"type": "text-delta", "index": 0, "text": text}),
    _texts.map(
        lambda text: {"type": "tool-call-delta", "index": 1, "id": text, "argumentsDelta": text}
    ),
    st.sampled_from(sorted(BROKEN)).map(lambda name: BROKEN[name]),
)
_calls = st.tuples(
    st.lists(_chunk, max_size=5),
    st.sampled_from([[], [STOP], [VALID["finish"]], [BROKEN["finish without reason"]]]),
)


@settings(max_examples=40, deadline=None)
@given(_calls)
def test_what_the_recorder_accepts_the_loader_loads_as_it_was_streamed(
    call: tuple[list[Any], list[Any]],
) -> None:
    chunks = [*call[0], *call[1]]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario"
        got, met = record(path, Path(tmp) / "work", chunks)
        if met is not None:
            assert not path.exists()
            return
        (script,) = load_scenario(path).scripts
        assert [entry.chunks for entry in script.entries] == [got]
