"""The dsh runtime's own session logs as a test's recording, and how two runs compare.

A test that drives the real dsh runtime lets the runtime write its session logs (plain
JSONL under a sessions root of the test's own) and names them to the fixture
(``dsh_replay.use_sessions(root, session_id)``). Recording writes the scenario from
those logs; replay compares the logs the runtime writes while replaying with the
recording. :class:`RuntimeSessions` is the part of
:class:`~pytest_dsh_replay.DshReplay` that does the naming
(:meth:`~RuntimeSessions.use`) and reads those logs back in recorded order.

Two runs of the runtime never log the same events in the same order: session and
message ids are random UUIDs, times differ, and parallel tool calls reorder the
runtime's bookkeeping between runs (both ``subagent/catalog`` events before either
``tool/result`` in about half the runs). What must not differ is what the model saw and
what it answered. :func:`model_view` keeps exactly that, per session, in log order:

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
directory are normalized as everywhere (:class:`~pytest_dsh_replay._check.normalize.Normalizer`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._check.normalize import LogDifference, Normalizer, value_difference
from .._check.transcript import notices_in_announcement_order
from .._errors import SessionLogError
from .._format.events import Event, JSONObject, SessionHeader, SessionLog
from .._format.jsonl import read_session_log
from .._format.stream_records import STREAM_EVENTS, stream_runs
from .._scripts.entries import ChunksEntry
from .._scripts.loading import load_scenario

if TYPE_CHECKING:
    from .._replay.model import ReplayModel
    from .._scripts.scenario import Scenario

__all__ = [
    "MODEL_VIEW_EVENTS",
    "RuntimeLog",
    "RuntimeSessions",
    "compare_model_views",
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
"""The event types :func:`model_view` keeps: what the model saw and what it answered."""


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


def _chunks(event: Event, source: str | None) -> list[Any]:
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


def _step(data: Any) -> tuple[Any, Any]:
    return (data.get("turn"), data.get("step")) if isinstance(data, dict) else (None, None)


def model_view(
    events: Sequence[Event], *, source: str | None = None
) -> list[tuple[int, JSONObject]]:
    """What the model saw and answered in one session, without the run's accidents.

    Args:
        events: The session's events (a runtime log of format 2 to 4, or any log).
        source: The log file, for messages.

    Returns:
        ``(index, {"type", "data"})`` pairs: the event's index in ``events`` and the
        event as compared, for the types of :data:`MODEL_VIEW_EVENTS` in log order.
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

    The headers are compared without ``createdAt``, then the :func:`model_view` items
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
        ``None`` when they agree, else the first :class:`LogDifference`; its ``index``
        is the recorded event's index in its log (the replayed one's when the recording
        ended first).
    """
    found = value_difference(
        expected_normalizer.header(expected[0]), actual_normalizer.header(actual[0])
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
        if self._replay is not None:
            self._replay.keep_recorded_order(timeout=order_timeout)

    def logs(self) -> list[RuntimeLog]:
        """The runtime's logs of this run, in the order of the recording they replay.

        Record mode: creation order (as they are written). Replay mode: the children by
        the recorded file each one replays, so a transcript shows them as recorded.
        """
        assert self.source is not None
        root, session_id = self.source
        logs = runtime_logs(root, session_id)
        if self._replay is not None and self._scenario is not None:
            files = [s.file for s in self._scenario.scripts]
            bindings = self._replay.bindings
            bound = {k: b.file for k, b in bindings.items() if k is not None}

            def place(log: RuntimeLog) -> int:
                file = bound.get(log.header.id)
                return files.index(file) if file in files else len(files)

            logs = [logs[0], *sorted(logs[1:], key=place)]
        return logs
