"""The dsh runtime's own session logs as a test's recording, and how two runs compare.

A test that drives the real dsh runtime lets the runtime write its session logs (plain
JSONL under a sessions root of the test's own) and names them to the fixture
(``dsh_replay.use_sessions(root, session_id)``). Recording writes the scenario from
those logs; replay compares the logs the runtime writes while replaying with the
recording. `RuntimeSessions` is the part of
[`DshReplay`][pytest_dsh_replay.DshReplay] that does the naming
(`use`) and reads those logs back in recorded order.

Two runs of the runtime never log the same events in the same order: session and
message ids are random UUIDs, times differ, and parallel tool calls reorder the
runtime's bookkeeping between runs (both ``subagent/catalog`` events before either
``tool/result`` in about half the runs). What must not differ is what the model saw and
what it answered. `model_view` keeps exactly that, per session, in log order:

- the messages: ``system/message``, ``developer/message``, ``user/message``,
  ``assistant/message`` and ``tool/result`` (the results of one step's parallel tool
  calls ordered by tool call id, and the settled notices of children that one request
  carries ordered by the id of the tool call that started each child);
- the request settings: ``request/header`` (model, limits, tools) and
  ``request/context``;
- every model call's chunks, expanded from the embedded stream without their times:
  settled calls (``assistant/message``), failed attempts (``assistant/attempt``: a retried
  429 is a call too) and LLM compaction summaries;

and leaves out the rest: turn and step brackets, inbox splices, catalogs, titles,
delivery receipts and retry notes (their delays are random). Ids, times and the working
directory are normalized as everywhere (`Normalizer`).

While a replay runs, `LiveRuntimeLogs` reads the logs the runtime is writing, as
it writes them, so that the replay can keep the recorded interleaving of its sessions
(`LogOrderGate`). Live sessions are matched with
the recorded ones by announcement: a parent's ``subagent``/``subagent_fork`` tool result
(``started subagent <child id>``) names the child its tool call started, and a replay
serves the recorded tool call ids, so the same tool call id names the recorded child in
the recording and the live child in the run (`match_by_announcement`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .._check.normalize import LogDifference, Normalizer, value_difference
from .._check.transcript import notices_in_announcement_order
from .._errors import DshReplayError, SessionLogError
from .._format.events import Event, JSONObject, SessionHeader, SessionLog, StreamChunk
from .._format.json_values import ABSENT
from .._format.jsonl import parse_json_text, read_session_log
from .._format.stream_records import STREAM_EVENTS, stream_runs
from .._identity.announce import runtime_announcements
from .._scripts.entries import ChunksEntry
from .._scripts.loading import load_scenario
from .._store.backends.jsonl import encode_segment

if TYPE_CHECKING:
    from .._replay.model import ReplayModel
    from .._scripts.scenario import Scenario, SessionScript

__all__ = [
    "MODEL_VIEW_EVENTS",
    "LiveRuntimeLogs",
    "RuntimeLog",
    "RuntimeSessions",
    "announced_children",
    "compare_model_views",
    "first_seen",
    "match_by_announcement",
    "model_view",
    "runtime_logs",
]

MODEL_VIEW_EVENTS: Final = frozenset(
    {
        "system/message",
        "developer/message",
        "user/message",
        "assistant/message",
        "assistant/attempt",
        "tool/result",
        "request/header",
        "request/context",
        "compaction/summary",
    }
)
"""The event types `model_view` keeps: what the model saw and what it answered."""


@dataclass(frozen=True, slots=True)
class RuntimeLog:
    """One session log the runtime wrote.

    Attributes:
        log: The session header and its events, as written (``seq``, ``time``, embedded
            streams).
        path: The log file.
    """

    log: SessionLog
    path: Path

    @property
    def header(self) -> SessionHeader:
        """The session header."""
        return self.log.header

    @property
    def events(self) -> list[Event]:
        """The session's events."""
        return self.log.events


def runtime_logs(root: str | os.PathLike[str], session_id: str) -> list[RuntimeLog]:
    """The logs of one session and its descendants under a runtime's sessions root.

    Args:
        root: The sessions root (``<root>/<project key>/<session id>/session.v4.jsonl``).
        session_id: The primary session's id.

    Returns:
        The primary's log first, then its descendants by ``parentSession``, by
        (``createdAt``, id): the order a scenario directory stores them in.

    Raises:
        ScenarioError: The root cannot be listed or holds no such session.
        SessionLogError: A log does not load (file and line named).
    """
    scenario = load_scenario(root, session_id)
    logs = []
    for script in scenario.scripts:
        assert script.path is not None  # a sessions root always has files
        logs.append(RuntimeLog(read_session_log(script.path), script.path))
    return logs


def _chunks(event: Event, source: str | None) -> list[StreamChunk]:
    data = event["data"]
    runs = stream_runs(data.get("stream"), event_type=event["type"], source=source, line=None)
    return ChunksEntry.from_runs(runs, 0).chunks


def _call_view(event: Event, source: str | None) -> JSONObject:
    """A model call's data with its stream as timeless chunks."""
    data = {k: v for k, v in event["data"].items() if k != "stream"}
    if "stream" in event["data"]:
        data["chunks"] = _chunks(event, source)
    return data


def _tool_call_id(item: tuple[int, JSONObject]) -> str:
    message = item[1]["data"].get("message")
    call_id = message.get("toolCallId") if isinstance(message, dict) else None
    return call_id if isinstance(call_id, str) else ""


def _step(data: object) -> tuple[object, object]:
    return (data.get("turn"), data.get("step")) if isinstance(data, dict) else (None, None)


def model_view(
    events: Sequence[Event], *, source: str | None = None
) -> list[tuple[int, JSONObject]]:
    """What the model saw and answered in one session, without the run's accidents.

    Args:
        events: The session's events (a runtime log of format 2 to 5, or any log).
        source: The log file, for messages.

    Returns:
        ``(index, {"type", "data"})`` pairs: the event's index in ``events`` and the
        event as compared, for the types of `MODEL_VIEW_EVENTS` in log order.
        Calls carry ``chunks`` (their expanded stream, no times) instead of ``stream``;
        the results of one step's consecutive tool calls are ordered by tool call id,
        and the children's settled notices one request carries by the id of the tool
        call that announced each child (the order they settled in is the scheduler's).

    Raises:
        SessionLogError: An embedded stream is malformed (the file named).
    """
    view: list[tuple[int, JSONObject]] = []
    results: list[tuple[int, JSONObject]] = []

    def flush() -> None:
        view.extend(sorted(results, key=_tool_call_id))
        results.clear()

    position = {id(event): index for index, event in enumerate(events)}
    for event in notices_in_announcement_order(events):
        index = position[id(event)]
        kind = event.get("type")
        if kind not in MODEL_VIEW_EVENTS:
            continue
        data = event.get("data")
        if not isinstance(data, dict):
            raise SessionLogError(
                f"{kind} event #{index} has no data object", path=source, line=None
            )
        if kind == "tool/result":
            if results and _step(results[-1][1]["data"]) != _step(data):
                flush()
            results.append((index, {"type": kind, "data": data}))
            continue
        flush()
        shown = _call_view(event, source) if kind in STREAM_EVENTS else data
        view.append((index, {"type": kind, "data": shown}))
    flush()
    return view


def _compared_header(normalizer: Normalizer, header: SessionHeader) -> JSONObject:
    """A header as the runtime log check compares it: normalized, without ``version``."""
    compared = normalizer.header(header)
    compared.pop("version", None)
    return compared


def compare_model_views(
    file: str,
    expected: tuple[SessionHeader, Sequence[Event]],
    actual: tuple[SessionHeader, Sequence[Event]],
    *,
    expected_normalizer: Normalizer,
    actual_normalizer: Normalizer,
    expected_source: str | None = None,
    actual_source: str | None = None,
) -> LogDifference | None:
    """Find the first difference between two runs of one session, as the model saw them.

    The headers are compared without ``createdAt`` and ``version`` (a format 5
    recording replays against a runtime that writes format 4: the events are alike),
    then the `model_view` items
    one by one, each side normalized by its own normalizer (share one per side across
    the sessions of a scenario, primary first, so ids map alike).

    Args:
        file: The recorded log's name, for the report.
        expected: The recorded header and events.
        actual: The replayed header and events.
        expected_normalizer: The recorded side's normalizer.
        actual_normalizer: The replayed side's normalizer.
        expected_source: The recorded log's path, for messages.
        actual_source: The replayed log's path, for messages.

    Returns:
        ``None`` when they agree, else the first `LogDifference`; its ``index``
        is the recorded event's index in its log (the replayed one's when the recording
        ended first).
    """
    found = value_difference(
        _compared_header(expected_normalizer, expected[0]),
        _compared_header(actual_normalizer, actual[0]),
    )
    if found is not None:
        return LogDifference(file, None, "session", *found, "header differs")
    mine = model_view(expected[1], source=expected_source)
    theirs = model_view(actual[1], source=actual_source)
    for k in range(max(len(mine), len(theirs))):
        if k >= len(mine):
            index, extra = theirs[k]
            return LogDifference(
                file,
                index,
                str(extra["type"]),
                "$",
                None,
                actual_normalizer.value(extra),
                f"the replayed run shows the model more: {len(theirs)} messages and calls, "
                f"the recording {len(mine)}",
            )
        index, item = mine[k]
        e = expected_normalizer.value(item)
        if k >= len(theirs):
            return LogDifference(
                file,
                index,
                str(item["type"]),
                "$",
                e,
                None,
                f"the replayed run shows the model less: {len(theirs)} messages and calls, "
                f"the recording {len(mine)}",
            )
        a = actual_normalizer.value(theirs[k][1])
        found = value_difference(e, a)
        if found is not None:
            return LogDifference(file, index, str(item["type"]), *found, "event differs")
    return None


_LOG_NAME: Final = "session.v4.jsonl"


def announced_children(events: Sequence[Event]) -> dict[str, str]:
    """The children a session's tool calls started, as its log announces them.

    The dsh runtime answers a ``subagent`` or ``subagent_fork`` tool call at once with
    the text ``started subagent <child id>``
    (`runtime_announcements`).

    Args:
        events: The session's events.

    Returns:
        ``{tool call id: child session id}`` in log order.
    """
    return {call: child for child, call in runtime_announcements(events).items()}


def match_by_announcement(
    recorded: Sequence[tuple[str, Sequence[Event]]],
    live: Mapping[str, Sequence[Event]],
    primary: str,
) -> dict[int, str]:
    """Which live session replays each recorded one, by the tool calls that started them.

    Args:
        recorded: Per recorded session (scenario order, the primary first), its id and
            its events.
        live: Live session id -> its events so far.
        primary: The live primary's id.

    Returns:
        Recorded session index -> live session id, for the primary and every child
        whose starting tool call (the same tool call id on both sides) both logs
        announce, down the tree.
    """
    index = {recorded_id: i for i, (recorded_id, _) in enumerate(recorded)}
    found = {0: primary} if recorded else {}
    pending = [0] if recorded else []
    while pending:
        parent = pending.pop()
        theirs = announced_children(live.get(found[parent], ()))
        for call_id, child in announced_children(recorded[parent][1]).items():
            k = index.get(child)
            if k is not None and k not in found and call_id in theirs:
                found[k] = theirs[call_id]
                pending.append(k)
    return found


class _Tail:
    """One log the runtime is writing, read as it grows: complete lines only."""

    def __init__(self, path: Path):
        self.path = path
        self.events: list[Event] = []
        self._offset = 0
        self._partial = b""
        self._lines = 0

    def read(self) -> list[Event]:
        """The events appended since the last read.

        Raises:
            SessionLogError: A complete line is not a JSON object (file and line named).
        """
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        except OSError as err:
            raise SessionLogError(f"cannot read: {err}", path=str(self.path), line=None) from None
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        new: list[Event] = []
        for raw in lines:
            self._lines += 1
            if self._lines == 1:
                continue  # the header
            value = parse_json_text(raw)
            if value is ABSENT or not isinstance(value, dict):
                raise SessionLogError(
                    "the live log holds a line that is not a JSON object (an event was expected)",
                    path=str(self.path),
                    line=self._lines,
                )
            new.append(value)
        self.events.extend(new)
        return new


class LiveRuntimeLogs:
    """The logs the dsh runtime is writing during a replay, per recorded session.

    Implements `LiveLogs`. The primary's log is
    found under the sessions root by its id; each child's once a live parent's tool
    result announces it (`match_by_announcement`). Logs are read incrementally, a
    complete line at a time, at most every `poll_s` / 2 seconds however many calls
    wait.

    Args:
        root: The runtime's sessions root (plain JSONL logs).
        session_id: The live primary's id.
        scenario: The recording replayed.
    """

    poll_s: float = 0.005

    def __init__(self, root: Path, session_id: str, scenario: Scenario):
        self._root = root
        self._files = [s.file for s in scenario.scripts]
        self._recorded: list[tuple[str, Sequence[Event]]] = []
        for script in scenario.scripts:
            events = read_session_log(script.path).events if script.path is not None else []
            self._recorded.append((script.recorded_id, events))
        self._ids: dict[int, str] = {0: session_id} if self._files else {}
        self._tails: dict[int, _Tail] = {}
        self._lock = threading.Lock()
        self._last = 0.0

    def refresh(self) -> None:
        """Read what the runtime logged since the last look, and find new children."""
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.poll_s / 2:
                return
            self._last = now
            for script in list(self._ids):
                self._read(script)

    def _read(self, script: int) -> None:
        tail = self._tails.get(script) or self._find(script)
        if tail is None:
            return
        for event in tail.read():
            for live_child, call in runtime_announcements((event,)).items():
                mine = announced_children(self._recorded[script][1]).get(call)
                child = next((k for k, (rid, _) in enumerate(self._recorded) if rid == mine), None)
                if child is not None and child not in self._ids:
                    self._ids[child] = live_child
                    self._read(child)

    def _find(self, script: int) -> _Tail | None:
        """The live log of a recorded session whose live id is known, once it exists."""
        name = encode_segment(self._ids[script])
        for path in self._root.glob(f"*/{name}/{_LOG_NAME}"):
            self._tails[script] = _Tail(path)
            return self._tails[script]
        return None

    def events(self, script: int) -> Sequence[Event]:
        """The events the live session of recorded session ``script`` logged so far."""
        tail = self._tails.get(script)
        return tail.events if tail is not None else ()

    def where(self, script: int) -> str:
        """The live log of recorded session ``script``, or why it is not known yet."""
        tail = self._tails.get(script)
        if tail is not None:
            return str(tail.path)
        if script in self._ids:
            name = encode_segment(self._ids[script])
            compressed = next(self._root.glob(f"*/{name}/{_LOG_NAME}.zst*"), None)
            if compressed is not None:
                return (
                    f"the live session {self._ids[script]!r} writes its log compressed "
                    f"({compressed}), and only a plain JSONL log can be read while it is "
                    "written: give the runtime's session-persistence patch compression: none "
                    "(docs/recording.md#runtime-recording); re-recording does not help"
                )
            return (
                f"no plain JSONL log {_LOG_NAME} of live session {self._ids[script]!r} "
                f"under {self._root} yet"
            )
        return (
            f"no live session announced as {self._files[script]}'s yet (its parent's "
            "tool result names it)"
        )


def first_seen(events: Sequence[Event], sender: str) -> tuple[object, object] | None:
    """Where a session's model first saw a message another session sent it.

    Args:
        events: The receiving session's events.
        sender: The sending session's id (the message's ``source.senderSessionId``).

    Returns:
        ``(turn, step)`` of the first call after the ``user/message`` that shows the
        message, or ``None`` when no call saw it.
    """
    shown = False
    for event in events:
        kind = event.get("type")
        data = event.get("data")
        if not shown and kind == "user/message" and isinstance(data, dict):
            source = data.get("source")
            shown = isinstance(source, dict) and source.get("senderSessionId") == sender
        elif shown and kind in STREAM_EVENTS:
            return _step(data)
    return None


class RuntimeSessions:
    """The dsh runtime's own logs named as a run's recording (a part of ``DshReplay``).

    Args:
        scenario: The scenario replayed (replay mode), or the previous recording.
        replay: The replay model (replay mode; ``None`` when recording): it keeps the
            recorded order of calls once logs are named, and its bindings order the
            logs it read back.
    """

    def __init__(self, scenario: Scenario | None, replay: ReplayModel | None):
        self._scenario = scenario
        self._replay = replay
        self.source: tuple[Path, str] | None = None
        """The sessions root and the primary's id, once named (``None``: not named)."""

    def use(self, root: str | os.PathLike[str], session_id: str, *, order_timeout: float) -> None:
        """Name the runtime's logs: its sessions root and the primary session's id.

        In replay mode the replay model keeps the recorded order of calls from now on.
        """
        self.source = (Path(root), session_id)
        if self._replay is not None and self._scenario is not None:
            live = LiveRuntimeLogs(Path(root), session_id, self._scenario)
            self._replay.keep_recorded_order(timeout=order_timeout, live=live)

    def logs(self) -> list[RuntimeLog]:
        """The runtime's logs of this run, in the order of the recording they replay.

        Record mode: creation order (as they are written). Replay mode: the children by
        the recorded file each one replays (matched by announcement, else by the replay's
        bindings), so a transcript shows them as recorded.
        """
        assert self.source is not None
        root, session_id = self.source
        logs = runtime_logs(root, session_id)
        if self._replay is not None and self._scenario is not None:
            scripts = self._scenario.scripts
            files = [s.file for s in scripts]
            recorded = [(s.recorded_id, self._recorded_events(s)) for s in scripts]
            live = {log.header.id: log.events for log in logs}
            announced = {v: k for k, v in match_by_announcement(recorded, live, session_id).items()}
            bound = {k: b.file for k, b in self._replay.bindings.items() if k is not None}

            def place(log: RuntimeLog) -> int:
                if log.header.id in announced:
                    return announced[log.header.id]
                file = bound.get(log.header.id)
                return files.index(file) if file in files else len(files)

            logs = [logs[0], *sorted(logs[1:], key=place)]
        return logs

    def races(self) -> list[str]:
        """The races inside the runtime that the recording shows and this run took otherwise.

        A race is a message between sessions that no replayed call can place
        (`InboxRace`, [docs/limits.md#runtime-races](../limits.md#runtime-races));
        it went otherwise when the receiver's model first saw it in another turn or step
        than recorded (`first_seen`).

        Returns:
            One description per race that went otherwise; empty when none did, when
            recording, or when the logs cannot be read.
        """
        if self.source is None or self._replay is None or self._scenario is None:
            return []
        from .._replay.order import scenario_plan  # only a failed replay asks

        scripts = self._scenario.scripts
        plan = scenario_plan(scripts)
        if not plan.races:
            return []
        root, session_id = self.source
        try:
            logs = runtime_logs(root, session_id)
            recorded = [(s.recorded_id, self._recorded_events(s)) for s in scripts]
        except DshReplayError:
            return []
        live = {log.header.id: log.events for log in logs}
        ids = match_by_announcement(recorded, live, session_id)
        found = []
        for race in plan.races:
            receiver, sender = ids.get(race.script), ids.get(race.sender)
            if receiver is None or sender is None:
                continue
            mine = first_seen(recorded[race.script][1], recorded[race.sender][0])
            theirs = first_seen(live[receiver], sender)
            if mine != theirs:
                found.append(f"{race.why} (recorded: {_where(mine)}; this run: {_where(theirs)})")
        return found

    @staticmethod
    def _recorded_events(script: SessionScript) -> list[Event]:
        return read_session_log(script.path).events if script.path is not None else []


def _where(step: tuple[object, object] | None) -> str:
    """Where a model first saw a message, for messages."""
    return "no call saw it" if step is None else f"first seen in turn {step[0]} step {step[1]}"
