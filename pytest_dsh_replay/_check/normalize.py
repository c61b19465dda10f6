"""Normalization of session logs, and finding where two of them differ.

- **Normalization** (`Normalizer`, `diff_logs`): two logs of the same
  behaviour differ in ids, times and paths. Session ids and every other UUID are mapped
  to ``{{id-1}}``, ``{{id-2}}``, ... by first appearance; ``time``, ``createdAt`` and
  ``durationMs`` are zeroed; the working directory becomes ``{{cwd}}``; envelopes
  (``seq``, ``time``) are dropped. Events are compared as parsed values, so packing and
  key order never matter.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .._format.chunk_rows import PackedRow
from .._format.events import Event, JSONObject, SessionHeader
from .._format.json_values import ABSENT, PLAIN_ONLY, is_lossless, map_strings
from .._scripts.entries import ChunksEntry, EntryRun

__all__ = [
    "LogDifference",
    "Normalizer",
    "canonical_log",
    "describe_difference",
    "diff_logs",
    "in_committed_form",
    "normalized_form",
    "records_form",
    "segments_form",
    "standalone_ids",
    "tokenize_cwd",
    "value_difference",
]

_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UUID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_UUID_BYTES: Final = re.compile(_UUID.pattern.encode("ascii"))
_UUID_HINT: Final = re.compile(rb"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-")
_UUID_HINT_TEXT: Final = re.compile(_UUID_HINT.pattern.decode("ascii"))
_ZEROED_KEYS: Final = frozenset({"createdAt", "durationMs"})
_ZEROED_KEY_TEXTS: Final = tuple(orjson.dumps(k) for k in sorted(_ZEROED_KEYS))
_ID_KEYS: Final = frozenset({"responseId"})
"""Keys whose string values are provider-generated ids: compared as ids, by first appearance."""
_ID_KEY_TEXTS: Final = tuple(orjson.dumps(k) for k in sorted(_ID_KEYS))
_ENVELOPE: Final = frozenset({"seq", "time", "seq0", "time0"})
_KEPT_SCALARS: Final = frozenset({int, float, bool, type(None)})
"""Exact types `Normalizer.value` keeps as they are (unless a key zeroes a number)."""


class Normalizer:
    """Maps ids, times and paths of a group of logs to stable placeholders.

    See [docs/checks.md#normalization](../checks.md#normalization).

    One normalizer is used for all sessions of one scenario, primary first, so that a
    parent id and a child's ``parentSession`` map to the same placeholder. Feed the two
    sides of a comparison to two separate normalizers.

    Args:
        session_ids: Ids that are not UUIDs but must be treated as ids (``session-3``,
            ``main``). A string equal to such an id is always replaced; inside longer text
            an id is replaced only when it has at least 8 characters and stands alone
            (not part of a longer word), so short ids never rewrite ordinary prose.
        cwds: Working directories to replace with ``{{cwd}}``.
        aliases: Ids that stand for other ids: ``{recorded id: live id}`` on the replayed
            side, so a recorded id that a replayed answer repeats (the model named a
            child it started) maps to the placeholder of the live id bound to it.
    """

    def __init__(
        self,
        *,
        session_ids: Iterable[str] = (),
        cwds: Iterable[str] = (),
        aliases: Mapping[str, str] | None = None,
    ):
        self._ids: dict[str, str] = {}
        self._aliases = {
            (k.lower() if _UUID.fullmatch(k) else k): (v.lower() if _UUID.fullmatch(v) else v)
            for k, v in (aliases or {}).items()
            if k and v and k != v
        }
        session_ids = [*session_ids, *self._aliases]
        extra = {s for s in session_ids if s and not _UUID.fullmatch(s)}
        self._exact = frozenset(extra)
        embedded = sorted((s for s in extra if len(s) >= 8), key=len, reverse=True)
        self._embedded = tuple(embedded)
        parts = [_UUID.pattern]
        standing = standalone_ids(extra)
        if standing is not None:
            parts.append(standing)
        self._id_rx = re.compile("|".join(f"(?:{p})" for p in parts))
        paths = sorted({c.rstrip("/") for c in cwds if c and c.rstrip("/")}, key=len, reverse=True)
        self._paths = tuple(paths)
        self._cwd_rx = (
            re.compile("|".join(re.escape(c) for c in paths) + r"(?=$|[/\\\s\"'<>()\[\]{},;:!?=.])")
            if paths
            else None
        )
        # What `untouched` looks for in serialized JSON: every id as a whole
        # string (quoted) or, when it may be replaced inside text, unquoted; every cwd.
        try:
            needles = [
                *(orjson.dumps(i) if len(i) < 8 else orjson.dumps(i)[1:-1] for i in extra),
                *(orjson.dumps(c)[1:-1] for c in paths),
                *_ZEROED_KEY_TEXTS,
                *_ID_KEY_TEXTS,
            ]
        except orjson.JSONEncodeError:  # an id or cwd with a lone surrogate: no shortcut
            self._needles: tuple[bytes, ...] | None = None
        else:
            self._needles = tuple(needles)

    def copy(self) -> Normalizer:
        """An independent copy: the same rules and the placeholders assigned so far.

        What the copy assigns from then on leaves this normalizer as it was, so a
        comparison can be tried and its numbering kept only when it is wanted.
        """
        clone = copy.copy(self)
        clone._ids = dict(self._ids)
        return clone

    def _placeholder(self, key: str) -> str:
        key = self._aliases.get(key, key)
        placeholder = self._ids.get(key)
        if placeholder is None:
            placeholder = self._ids[key] = f"{{{{id-{len(self._ids) + 1}}}}}"
        return placeholder

    def _id(self, match: re.Match[str]) -> str:
        found = match.group(0)
        return self._placeholder(found.lower() if _UUID.fullmatch(found) else found)

    def text(self, value: str) -> str:
        """Normalize one string: the cwd first, then ids by first appearance."""
        if value in self._exact:
            return self._placeholder(value)
        # The substitutions run only where a substring search says they may match
        # (their patterns test a character class at every position of the text).
        cwd_rx = self._cwd_rx
        if cwd_rx is not None:
            for path in self._paths:
                if path in value:
                    value = cwd_rx.sub("{{cwd}}", value)
                    break
        if _UUID_HINT_TEXT.search(value) is not None:
            return self._id_rx.sub(self._id, value)
        for embedded in self._embedded:
            if embedded in value:
                return self._id_rx.sub(self._id, value)
        return value

    def value(self, value: Any, key: str | None = None) -> Any:
        """Normalize a JSON value: strings as `text`, ``createdAt``/``durationMs`` to 0.

        A ``responseId`` string (the provider's id of an answer, which a recording
        cannot predict) is replaced as an id, whatever its form.
        """
        # Plain JSON types first, by class (most values are); numbers, booleans and
        # null that no key zeroes are kept as they are without a call of their own.
        cls = value.__class__
        if cls is dict:
            of = self.value
            return {
                k: v if v.__class__ in _KEPT_SCALARS and k not in _ZEROED_KEYS else of(v, k)
                for k, v in value.items()
            }
        if cls is str:
            if key in _ID_KEYS and value:  # a provider's id of an answer
                return self._placeholder(value)
            return self.text(value)
        if cls is list:
            of = self.value
            return [v if v.__class__ in _KEPT_SCALARS else of(v) for v in value]
        return self._other(value, key)

    def _other(self, value: Any, key: str | None) -> Any:
        """`value` of anything but a plain ``dict``, ``str`` or ``list``."""
        if isinstance(value, str):
            if key in _ID_KEYS and value:
                return self._placeholder(value)
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if key in _ZEROED_KEYS and isinstance(value, int | float) and not isinstance(value, bool):
            return 0
        return value

    def untouched(self, text: bytes) -> bool:
        """Whether a JSON value serialized as ``text`` normalizes to itself.

        ``True`` only when the text holds no UUID, none of the extra ids (as a whole
        string, or inside text for ids this normalizer replaces there), no working
        directory and no ``createdAt``/``durationMs``/``responseId`` key; then `value` would
        return an equal value and assign no placeholder. May say ``False`` for a value
        that does normalize to itself (text inside a string, a key).
        """
        needles = self._needles
        if needles is None:
            return False
        for needle in needles:
            if needle in text:
                return False
        # A UUID holds "-XXXX-XXXX-XXXX-": that literal-led search is fast, the full
        # pattern (a character class at every position) runs only where it matched.
        return _UUID_HINT.search(text) is None or _UUID_BYTES.search(text) is None

    def header(self, header: SessionHeader) -> JSONObject:
        """The header as compared: ids mapped, ``createdAt`` dropped."""
        raw = header.to_json()
        raw.pop("createdAt", None)
        return self.value(raw)  # type: ignore[no-any-return]

    def event(self, event: Event) -> JSONObject:
        """An event as compared: envelope (``seq``, ``time``) dropped, payload normalized."""
        return {k: self.value(v, k) for k, v in event.items() if k not in _ENVELOPE}


@dataclass(frozen=True)
class LogDifference:
    """The first difference between an expected (recorded) and an actual (replayed) log.

    Attributes:
        file: The recorded log's name (``session.1.jsonl``).
        index: The event index (0-based, in the recorded log; ``None`` for the header).
        event_type: The ``type`` of the recorded event there (or of the actual one
            when the recording ended first).
        path: The JSON path of the first differing value (``$.data.message.content[0].text``).
        expected: The recorded value at ``path`` (normalized); ``None`` when missing.
        actual: The replayed value at ``path`` (normalized); ``None`` when missing.
        note: A short description (``"event differs"``, ``"replayed log is longer"``, ...).
    """

    file: str
    index: int | None
    event_type: str | None
    path: str
    expected: Any
    actual: Any
    note: str


def _first_difference(expected: Any, actual: Any, path: str) -> tuple[str, Any, Any] | None:
    if type(expected) is not type(actual) and not (
        isinstance(expected, int | float)
        and isinstance(actual, int | float)
        and not isinstance(expected, bool)
        and not isinstance(actual, bool)
    ):
        return path, expected, actual
    if isinstance(expected, dict):
        for k in expected:
            sub = f"{path}.{k}" if _IDENT.fullmatch(k) else f"{path}[{orjson.dumps(k).decode()}]"
            if k not in actual:
                return sub, expected[k], ABSENT
            found = _first_difference(expected[k], actual[k], sub)
            if found is not None:
                return found
        for k in actual:
            if k not in expected:
                sub = (
                    f"{path}.{k}" if _IDENT.fullmatch(k) else f"{path}[{orjson.dumps(k).decode()}]"
                )
                return sub, ABSENT, actual[k]
        return None
    if isinstance(expected, list):
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            found = _first_difference(e, a, f"{path}[{i}]")
            if found is not None:
                return found
        if len(expected) != len(actual):
            n = min(len(expected), len(actual))
            return (
                f"{path}[{n}]",
                expected[n] if n < len(expected) else ABSENT,
                actual[n] if n < len(actual) else ABSENT,
            )
        return None
    return None if expected == actual else (path, expected, actual)


def _present(value: Any) -> Any:
    return None if value is ABSENT else value


def value_difference(expected: Any, actual: Any, path: str = "$") -> tuple[str, Any, Any] | None:
    """The first place where two JSON values differ (objects by key, arrays by position).

    Args:
        expected: The recorded value.
        actual: The replayed value.
        path: The JSON path of the values themselves.

    Returns:
        ``None`` when they are equal (numbers compare by value), else ``(json_path,
        expected_there, actual_there)`` with ``None`` for a side where the value is
        missing.
    """
    found = _first_difference(expected, actual, path)
    if found is None:
        return None
    return found[0], _present(found[1]), _present(found[2])


def diff_logs(
    file: str,
    expected: tuple[SessionHeader, Sequence[Event]],
    actual: tuple[SessionHeader, Sequence[Event]],
    *,
    expected_normalizer: Normalizer,
    actual_normalizer: Normalizer,
    shortcut: bool = True,
) -> LogDifference | None:
    """Find the first difference between a recorded and a replayed session log.

    Both logs are normalized (ids, times, cwd, envelopes) with their own normalizer and
    compared event by event as parsed values; the scan stops at the first difference,
    so a long log costs one pass at most.

    Args:
        file: The recorded log's name, for the report.
        expected: The recorded header and events.
        actual: The replayed header and events.
        expected_normalizer: The normalizer of the recorded side (shared by its sessions).
        actual_normalizer: The normalizer of the replayed side.
        shortcut: Pass over a pair of events at once when both serialize to the same
            bytes that neither normalizer would change (most events of a replay); the
            result is the same either way, ``False`` normalizes every event.

    Returns:
        ``None`` when the logs agree, else the first `LogDifference`.
    """
    eh = expected_normalizer.header(expected[0])
    ah = actual_normalizer.header(actual[0])
    found = None if _same_text(eh, ah) else _first_difference(eh, ah, "$")
    if found is not None:
        return LogDifference(
            file,
            None,
            "session",
            found[0],
            _present(found[1]),
            _present(found[2]),
            "header differs",
        )
    # Plain lists: a session's live view would settle its log on every index.
    exp_events = expected[1] if expected[1].__class__ is list else list(expected[1])
    act_events = actual[1] if actual[1].__class__ is list else list(actual[1])
    skipped = 0  # events before it agree (a run of chunk events found so)
    run_end = 0  # events before it were looked at as a run of chunk events already
    for i in range(max(len(exp_events), len(act_events))):
        if shortcut and i >= run_end and i < len(exp_events) and i < len(act_events):
            # A run of chunk events (most of a replayed log) is compared at once.
            agree, run_end = _unchanged_chunk_run(
                exp_events, act_events, i, expected_normalizer, actual_normalizer
            )
            if agree:
                skipped = run_end
        if i < skipped:
            continue
        if i >= len(exp_events):
            extra = act_events[i]
            return LogDifference(
                file,
                i,
                str(extra.get("type")),
                "$",
                None,
                actual_normalizer.event(extra),
                f"the replayed log is longer: {len(act_events)} events, the recording has "
                f"{len(exp_events)}",
            )
        if (
            shortcut
            and i < len(act_events)
            and _unchanged_pair(
                exp_events[i], act_events[i], expected_normalizer, actual_normalizer
            )
        ):
            continue
        e = expected_normalizer.event(exp_events[i])
        if i >= len(act_events):
            return LogDifference(
                file,
                i,
                str(exp_events[i].get("type")),
                "$",
                e,
                None,
                f"the replayed log is shorter: {len(act_events)} events, the recording has "
                f"{len(exp_events)}",
            )
        a = actual_normalizer.event(act_events[i])
        if _same_text(e, a):
            continue
        found = _first_difference(e, a, "$")
        if found is not None:
            return LogDifference(
                file,
                i,
                str(exp_events[i].get("type")),
                found[0],
                _present(found[1]),
                _present(found[2]),
                "event differs",
            )
    return None


_CHUNK_EVENT_KEYS: Final = frozenset({"type", "seq", "time", "data"})


def _unchanged_chunk_run(
    expected: Sequence[Event],
    actual: Sequence[Event],
    start: int,
    en: Normalizer,
    an: Normalizer,
) -> tuple[bool, int]:
    """Whether the run of chunk events from ``start`` certainly agrees, and its end.

    Each pair agrees as `_unchanged_pair` would judge it. The run is the longest
    one in which both sides hold ``assistant/chunk`` events with nothing but ``type``,
    ``seq``, ``time`` and ``data``; both sides' ``data`` lists are serialized once and
    judged as one text (a needle found across two events only sends the run back to the
    pair-by-pair comparison).
    """
    end = start
    limit = min(len(expected), len(actual))
    while end < limit:
        e, a = expected[end], actual[end]
        if (
            e.__class__ is not dict
            or a.__class__ is not dict
            or e.get("type") != "assistant/chunk"
            or a.get("type") != "assistant/chunk"
            or e.keys() != _CHUNK_EVENT_KEYS
            or a.keys() != _CHUNK_EVENT_KEYS
        ):
            break
        end += 1
    if end - start < 2:
        return False, end
    try:
        text = orjson.dumps([e["data"] for e in expected[start:end]])
        if text != orjson.dumps([a["data"] for a in actual[start:end]]):
            return False, end
    except TypeError:  # orjson.JSONEncodeError included
        return False, end
    if b"null" in text or not (en.untouched(text) and an.untouched(text)):
        return False, end
    return True, end


def _same_text(expected: Any, actual: Any) -> bool:
    """Whether two normalized values certainly agree: the same JSON text, and no ``null``.

    Equal text means equal values of equal types (``true`` is not ``1``); a ``null``
    may stand for a non-finite float, which must be compared as a value. ``False``
    only sends the pair to the value-by-value comparison.
    """
    try:
        text = orjson.dumps(expected, option=PLAIN_ONLY)
        if text != orjson.dumps(actual, option=PLAIN_ONLY) or b"null" in text:
            return False
    except TypeError:  # orjson.JSONEncodeError included
        return False
    # Tuples, enums and UUIDs serialize as JSON values too: equal text is not equal types.
    return bool(expected == actual)


def _unchanged_pair(expected: Any, actual: Any, en: Normalizer, an: Normalizer) -> bool:
    """Whether two events certainly agree once normalized, without changing a normalizer.

    That is: the same bytes without their envelopes, nothing either normalizer changes,
    and no ``null`` (which a non-finite float also serializes to).
    """
    if expected.__class__ is not dict or actual.__class__ is not dict:
        return False
    try:
        text = orjson.dumps({k: v for k, v in expected.items() if k not in _ENVELOPE})
        if text != orjson.dumps({k: v for k, v in actual.items() if k not in _ENVELOPE}):
            return False
    except TypeError:  # orjson.JSONEncodeError included
        return False
    return b"null" not in text and en.untouched(text) and an.untouched(text)


_FORM_OPTIONS: Final = orjson.OPT_SORT_KEYS | PLAIN_ONLY
_NULL_TOKENS: Final = (b":null", b",null", b"[null")
_CHUNK_TYPE_TEXT: Final = orjson.dumps("assistant/chunk")


def normalized_form(
    header: SessionHeader, events: Sequence[Event], normalizer: Normalizer
) -> tuple[bytes, ...] | None:
    """A log's normalized header and events as JSON texts: what `diff_logs` compares.

    The log check's digest ([docs/checks.md#log-check](../checks.md#log-check)). The header as
    `Normalizer.header` makes it (``H`` and its JSON text, keys sorted), then the
    events in log order, fed to ``normalizer`` in the order `diff_logs` feeds it:
    a run of plain ``assistant/chunk`` events (``type``, ``seq``, ``time``, ``data``
    only) that ``normalizer`` leaves as they are (`Normalizer.untouched`) as one
    ``R`` text of their ``data`` list, any other event as ``E`` and the JSON text of
    what `Normalizer.event` makes of it.

    Sound, not complete: two logs whose forms are equal agree under `diff_logs`
    (given normalizers in the same state), since equal texts of plain JSON values are
    equal values of equal types, and an ``R`` text stands for exactly the events
    `Normalizer.event` would return; two logs that agree may still have unequal
    forms (key order aside: ``1`` against ``1.0``, a run judged on one side only), which
    only sends them to `diff_logs`.

    Returns:
        The form, or ``None`` when equal text would not vouch for equal values: a value
        that is not plain JSON (a subclass, a tuple), or a ``null`` in a value that holds
        a non-finite float (it serializes to ``null`` too; an unsafe integer is refused
        as well). Then compare with `diff_logs`.
    """
    items = events if events.__class__ is list else list(events)
    plain_chunk = [
        e.__class__ is dict and e.get("type") == "assistant/chunk" and e.keys() == _CHUNK_EVENT_KEYS
        for e in items
    ]
    segments: list[Any] = []
    n = len(items)
    i = 0
    while i < n:
        end = i
        while end < n and plain_chunk[end]:
            end += 1
        if end > i:
            segments.append([e["data"] for e in items[i:end]])
            i = end
        else:
            segments.append(items[i])
            i += 1
    return segments_form(header, segments, normalizer)


RunTexts = dict[int, tuple[ChunksEntry, int, int, bytes]]
"""The recorded runs an entry was derived from: ``id(entry) -> (entry, turn, step, R item)``.

The ``R`` item is the very bytes object of the recorded form (`records_form`) that
stands for the run's events ``{"turn": turn, "step": step, "chunk": c}``, one per chunk
``c`` of the entry (ints ``turn`` and ``step``).
"""


def _entry_run_text(
    segment: EntryRun, runs: RunTexts | None, normalizer: Normalizer
) -> bytes | None:
    """The recorded ``R`` item of the run ``segment`` stands for, when it is the same run."""
    known = None if runs is None else runs.get(id(segment.entry))
    if (
        known is None
        or known[0] is not segment.entry
        or segment.turn.__class__ is not int
        or segment.step.__class__ is not int
        or segment.turn != known[1]
        or segment.step != known[2]
    ):
        return None
    text = known[3]
    return text if normalizer.untouched(text) else None


def segments_form(
    header: SessionHeader,
    segments: Sequence[Any],
    normalizer: Normalizer,
    *,
    runs: RunTexts | None = None,
    texts: list[bytes | None] | None = None,
) -> tuple[bytes, ...] | None:
    """`normalized_form` of a log given as its segments, in log order.

    A segment is a maximal run of plain ``assistant/chunk`` events (``type``, ``seq``,
    ``time``, ``data`` only), given as the list of their ``data`` values or as an
    `EntryRun` (a whole entry's chunks, not built), or one other event (a dict). What
    `normalized_form` splits a log's events into; the log check by reference
    ([docs/checks.md#by-reference](../checks.md#by-reference)) gives a worked-out log so,
    without building its chunk events. Two runs are never adjacent.

    Args:
        header: The log's header.
        segments: The segments in log order.
        normalizer: The side's normalizer (fed as `diff_logs` feeds it).
        runs: The recorded runs entries were derived from (`records_form`): an
            `EntryRun` of such an entry, with the recorded turn and step, is that run's
            ``R`` item itself, by identity, when this normalizer leaves it as it is;
            any other `EntryRun` is built and judged by its values.
        texts: Receives, per run segment in order, its ``R`` item or ``None`` (the
            run's events were normalized one by one).

    Returns:
        As `normalized_form`.
    """
    out: list[bytes] = []

    def add(tag: bytes, text: bytes, value: Any) -> bool:
        # A null may be a non-finite float (serialized as null): such a value is looked at.
        if b"null" in text and any(t in text for t in _NULL_TOKENS) and not is_lossless(value):
            return False
        out.append(tag + text)
        return True

    try:
        head = normalizer.header(header)
        if not add(b"H", orjson.dumps(head, option=_FORM_OPTIONS), head):
            return None
        chunk_type_kept = normalizer.untouched(_CHUNK_TYPE_TEXT)
        noted: list[bytes | None] = [] if texts is None else texts
        for segment in segments:
            if segment.__class__ is EntryRun:
                same = _entry_run_text(segment, runs, normalizer) if chunk_type_kept else None
                if same is not None:  # the recorded run itself (docs/checks.md#by-reference)
                    out.append(same)
                    noted.append(same)
                    continue
                segment = segment.datas()
            if segment.__class__ is list:
                if chunk_type_kept:  # a run of plain chunk events, judged at once
                    text = orjson.dumps(segment, option=_FORM_OPTIONS)
                    if normalizer.untouched(text):
                        if not add(b"R", text, segment):
                            return None
                        noted.append(out[-1])
                        continue
                noted.append(None)
                run = [{"type": "assistant/chunk", "data": data} for data in segment]
            else:
                run = [segment]
            if not _add_events(run, normalizer, add):
                return None
    except TypeError:  # orjson.JSONEncodeError included: not plain JSON
        return None
    return tuple(out)


def _add_events(
    run: list[Any], normalizer: Normalizer, add: Callable[[bytes, bytes, Any], bool]
) -> bool:
    """`segments_form`'s ``E`` items of ``run``'s events, each normalized; ``False``: refused.

    Raises:
        TypeError: An event is not plain JSON.
    """
    for event in run:
        value: Any = (
            {k: v for k, v in event.items() if k not in _ENVELOPE}
            if event.__class__ is dict
            else None
        )
        text = b"" if value is None else orjson.dumps(value, option=_FORM_OPTIONS)
        if value is None or not normalizer.untouched(text):
            value = normalizer.event(event)
            text = orjson.dumps(value, option=_FORM_OPTIONS)
        if not add(b"E", text, value):
            return False
    return True


def _row_datas(row: PackedRow) -> list[JSONObject]:
    """The ``data`` of a packed row's member events, without the events."""
    turn, step = row.turn, row.step
    return [{"turn": turn, "step": step, "chunk": chunk} for chunk in row.chunks()]


_RUN_DATA_KEYS: Final = frozenset({"turn", "step", "chunk"})


def records_form(
    header: SessionHeader,
    records: Iterable[tuple[int, Event | PackedRow]],
    normalizer: Normalizer,
    origins: Mapping[tuple[int, int], ChunksEntry] | None = None,
    runs: RunTexts | None = None,
) -> tuple[bytes, ...] | None:
    """`normalized_form` of a log given as the records its lines hold, no event built.

    The recorded side of the log check made from what a load parsed
    ([docs/checks.md#by-reference](../checks.md#by-reference)): ``records`` are
    ``(line, record)`` as ``iter_records`` gives them, a packed row's members going
    straight into their run's ``data`` list. The form equals `normalized_form` of the
    log's events.

    Args:
        header: The log's header.
        records: The log's records in order.
        normalizer: The recorded side's normalizer.
        origins: The entries derived from this log whose chunks are its own values, by
            the lines they came from (``ChunksEntry.origin``).
        runs: Receives, for each such entry whose lines are exactly one run of the form
            with one int turn and step and nothing else in its events' ``data``, the
            run's ``R`` item (see `RunTexts`).

    Returns:
        As `normalized_form`.
    """
    segments: list[Any] = []
    spans: list[tuple[int, int, object, object] | None] = []  # per run: lines, turn, step
    run: list[JSONObject] | None = None
    for line, record in records:
        if record.__class__ is PackedRow:
            assert isinstance(record, PackedRow)
            datas = _row_datas(record)
            turn: object = record.turn
            step: object = record.step
        elif (
            record.__class__ is dict
            and record.get("type") == "assistant/chunk"
            and record.keys() == _CHUNK_EVENT_KEYS
        ):
            data = record["data"]
            datas = [data]
            if data.__class__ is dict and data.keys() == _RUN_DATA_KEYS:
                turn, step = data["turn"], data["step"]
            else:
                turn = step = ABSENT
        else:
            run = None
            segments.append(record)
            continue
        ints = turn.__class__ is int and step.__class__ is int
        if run is None:
            run = datas
            segments.append(run)
            spans.append((line, line, turn, step) if ints else None)
            continue
        run.extend(datas)
        span = spans[-1]
        if span is not None:
            same = ints and span[2] == turn and span[3] == step
            spans[-1] = (span[0], line, turn, step) if same else None
    texts: list[bytes | None] = []
    form = segments_form(header, segments, normalizer, texts=texts)
    if form is None or not origins or runs is None:
        return form
    for span, text in zip(spans, texts, strict=True):
        if span is None or text is None:
            continue
        first, last, turn, step = span
        entry = origins.get((first, last))
        if entry is not None:
            assert isinstance(turn, int)
            assert isinstance(step, int)
            runs[id(entry)] = (entry, turn, step, text)
    return form


def _show(value: Any) -> str:
    return orjson.dumps(value).decode() if value is not None else "(missing)"


def describe_difference(
    diff: LogDifference, *, max_chars: int = 2000, line: int | None = None
) -> str:
    """Render a `LogDifference` as a readable, bounded report.

    Long strings (or strings spanning lines) are shown as a unified diff of lines;
    other values as compact JSON. The report is cut at ``max_chars`` characters.

    Args:
        diff: The difference.
        max_chars: The report's length cap, in characters.
        line: The recorded file's line that holds the differing event (1-based), shown
            beside the event's index when known.
    """
    if diff.index is None:
        where = "header"
    else:
        at = "" if line is None else f", line {line}"
        where = f"event #{diff.index} ({diff.event_type}{at})"
    lines = [f"{diff.file}: {where}: {diff.note}", f"  at {diff.path}"]
    e, a = diff.expected, diff.actual
    if isinstance(e, str) and isinstance(a, str) and (len(e) > 60 or "\n" in e or "\n" in a):
        delta = difflib.unified_diff(
            e.splitlines(), a.splitlines(), "recorded", "replayed", lineterm="", n=2
        )
        lines.extend("  " + line for line in delta)
    else:
        lines.append(f"  recorded: {_show(e)}")
        lines.append(f"  replayed: {_show(a)}")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[: max_chars - 20] + "\n  ... (truncated)"
    return text


def tokenize_cwd(value: Any, cwd: str | None) -> Any:
    """Replace the working directory ``cwd`` with ``{{cwd}}`` in every string of ``value``.

    A recording keeps no machine path: the header's ``cwd`` and every path under it
    become ``{{cwd}}``-relative ([docs/checks.md#normalization](../checks.md#normalization),
    as the dsh harness's ``tokenizeSessionFixtureCwd`` does). Only whole path prefixes are
    replaced (``/w`` does not touch ``/work``).

    Args:
        value: A JSON value (an event or a header object).
        cwd: The absolute working directory; ``None`` or ``"/"`` leaves ``value`` as is.

    Returns:
        A copy of ``value`` with ``cwd`` tokenized.
    """
    if not cwd or not cwd.rstrip("/"):
        return value
    rx = re.compile(re.escape(cwd.rstrip("/")) + r"(?=$|[/\\\s\"'<>()\[\]{},;:!?=.])")

    return map_strings(value, lambda text: rx.sub("{{cwd}}", text))


def standalone_ids(ids: Iterable[str]) -> str | None:
    """The pattern of ``ids`` inside longer text; ``None`` when no id is long enough.

    Ids of 8 characters or more, each standing alone (no word character or ``-`` beside
    it), longest first.

    The rule of [docs/checks.md#normalization](../checks.md#normalization) for ids that are
    no UUIDs (a string equal to an id is replaced whatever its length).
    """
    embedded = sorted((i for i in ids if len(i) >= 8), key=len, reverse=True)
    if not embedded:
        return None
    return rf"(?<![\w-])(?:{'|'.join(map(re.escape, embedded))})(?![\w-])"


def in_committed_form(data: bytes, canonical: bytes) -> bool:
    r"""Whether a log's bytes are its `canonical_log` form, line endings aside.

    A checkout that turns ``\n`` into ``\r\n`` (git's ``core.autocrlf``) changes no
    record: the log is still in the committed form
    ([docs/format.md#committed-form](../format.md#committed-form)).
    """
    return data == canonical or data.replace(b"\r\n", b"\n") == canonical


def canonical_log(data: bytes, *, source: str | None = None) -> bytes:
    r"""A log in the canonical committed form.

    See [docs/format.md#committed-form](../format.md#committed-form) (the dsh harness's
    ``canonicalSessionFixture``).

    The header line exactly as found (without a byte-order mark or ``\r``), then every
    event packed into chunk rows in one pass with the top-level ``seq``/``time``
    (``seq0``/``time0``) removed, one record per line, a final newline. A log of format
    2 to 5 (the dsh runtime's) has no other form: its events stay as they are, envelope
    included, one compact record per line. The rewrite leaves every event payload
    unchanged and is idempotent.

    Args:
        data: The log's bytes.
        source: The file name used in error messages.

    Raises:
        SessionLogError: The log does not parse.
    """
    from .._format.jsonl import dump_session_log, header_line, parse_session_log

    events = parse_session_log(data, source=source)  # raises on an empty or broken log
    line, head = header_line(data, source=source)
    if isinstance(head, dict) and SessionHeader.from_json(head).spec.whole_events:
        # Formats 2 to 5 have one form: every event as written, with seq and time.
        body = dump_session_log(head, events).split(b"\n", 1)[1]
    else:
        body = dump_session_log({}, events, envelope=False).split(b"\n", 1)[1]
    return line + b"\n" + body
