"""Redaction: nothing that looks like a secret is written or shown.

Before a recording is written, every string that looks like a secret (API keys, bearer
tokens, cloud and forge tokens, plus literal values such as the recording API key) is
replaced with ``[REDACTED]``; a secret streamed in pieces is found in the joined text of
its run, and the run keeps its delta boundaries. The same rules find secrets in
committed logs (``dsh-replay check``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

from .events import Event

__all__ = [
    "DEFAULT_SECRET_PATTERNS",
    "RECORD_URL_VARIABLES",
    "REDACTED",
    "Redactor",
    "TextRedaction",
    "builtin_redact",
    "builtin_redactor",
    "delta_runs",
    "recording_redactor",
    "shown_url",
    "stream_runs_of",
    "url_secrets",
]

_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NO_KEY: Final = object()  # Redactor.find: a value that is no object's member
_DELTA_FIELDS: Final = {
    "text-delta": "text",
    "reasoning-delta": "text",
    "tool-call-delta": "argumentsDelta",
}


def _hashable(value: object) -> Any:
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


REDACTED: Final = "[REDACTED]"
"""What a secret is replaced with."""

DEFAULT_SECRET_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    ("api key (sk-...)", r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{16,}"),
    ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*"),
    ("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ("Slack token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}"),
)
"""``(name, regex)`` pairs of the built-in secret shapes."""


class Redactor:
    """Replaces secrets in every string (and object key) of a JSON value.

    Args:
        literals: Exact secret values (for example the recording API key); each
            occurrence is replaced. Values shorter than 6 characters are ignored, since
            they would redact ordinary text.
        patterns: ``(name, regex)`` pairs; the built-in `DEFAULT_SECRET_PATTERNS`
            are always included, extra ones add to them.

    A redactor never shows its literals: its ``repr`` (what a failing assertion or
    ``--showlocals`` prints) only counts them, and it has no fields a dataclass-aware
    diff could print.
    """

    __slots__ = ("_any", "_compiled", "_literals", "_patterns")

    def __init__(self, literals: Iterable[str] = (), patterns: Iterable[tuple[str, str]] = ()):
        self._literals = tuple(sorted({s for s in literals if len(s) >= 6}, key=len, reverse=True))
        self._patterns = tuple(patterns)
        rules = [(name, re.compile(rx)) for name, rx in (*DEFAULT_SECRET_PATTERNS, *self._patterns)]
        if self._literals:
            rules.insert(
                0, ("configured secret", re.compile("|".join(map(re.escape, self._literals))))
            )
        self._compiled: tuple[tuple[str, re.Pattern[str]], ...] = tuple(rules)
        self._any = _first_match(self._compiled)

    @property
    def literals(self) -> tuple[str, ...]:
        """The literal secrets (6 characters or more), longest first."""
        return self._literals

    @property
    def patterns(self) -> tuple[tuple[str, str], ...]:
        """The extra ``(name, regex)`` rules given (the built-in ones are always on)."""
        return self._patterns

    def __repr__(self) -> str:
        return (
            f"Redactor(<{len(self._literals)} literal secret(s) hidden>, "
            f"{len(self._patterns)} extra pattern(s))"
        )

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """The merged ``[start, end)`` ranges of ``text`` that some rule calls secret."""
        if not self._any(text):
            return []  # the common case, one scan
        found = sorted(
            m.span() for _, rx in self._compiled for m in rx.finditer(text) if m.end() > m.start()
        )
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    def redact_text(self, text: str) -> str:
        """Return ``text`` with every secret replaced by `REDACTED`.

        Every rule looks at the original text; overlapping matches become one
        `REDACTED`.
        """
        return self.redact_pieces([text])[0]

    def redact_pieces(self, pieces: Sequence[str]) -> list[str]:
        """Redact a text that arrived in pieces (stream deltas), keeping the pieces.

        The rules look at the pieces joined, so a secret split anywhere is found, even
        where one piece alone already looks like a secret. Each secret becomes one
        `REDACTED` in the piece where it starts; its characters in later pieces are
        dropped. Everything else stays in its own piece, so the number of pieces and
        their boundaries outside secrets are kept.

        Args:
            pieces: The texts, in order.

        Returns:
            One redacted text per piece (``""`` for a piece that held only secret text).
        """
        joined = "".join(pieces)
        spans = self._spans(joined)
        if not spans:
            return list(pieces)
        out: list[str] = []
        offset = 0
        k = 0  # the first span that may still reach into the current piece
        for piece in pieces:
            start, end = offset, offset + len(piece)
            parts: list[str] = []
            pos = start
            while k < len(spans) and spans[k][0] < end:
                s0, s1 = spans[k]
                if s0 >= pos:
                    parts.append(joined[pos:s0])
                    parts.append(REDACTED)
                pos = max(pos, min(s1, end))
                if s1 > end:
                    break
                k += 1
            parts.append(joined[pos:end])
            out.append("".join(parts))
            offset = end
        return out

    def redact(self, value: object) -> Any:
        """Return a copy of a JSON value with secrets replaced in every string and key.

        A key that holds a secret becomes ``[REDACTED]`` (``[REDACTED]#2``, ... when an
        object has several); non-string leaves are unchanged.
        """
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for k, v in value.items():
                key = self.redact_text(k) if isinstance(k, str) else k
                if key != k:
                    n = 1
                    while key in out or key in value:
                        n += 1
                        key = f"{REDACTED}#{n}"
                out[key] = self.redact(v)
            return out
        if isinstance(value, list):
            return [self.redact(v) for v in value]
        return value

    def redact_events(self, events: Iterable[Event]) -> list[Event]:
        """Redacted copies of a session's events, including secrets split across deltas.

        A streamed secret can arrive in pieces (``"sk-ab"``, ``"cdef..."``), and a first
        piece may already look like a secret on its own. The deltas of each run (one
        block of one call) are therefore redacted together with
        [`redact_pieces`][pytest_dsh_replay.Redactor.redact_pieces]: the joined text is what
        the rules see, and each delta keeps its place and its own text outside secrets. The
        same holds for the run records of the streams that format 2-5 logs embed in
        ``assistant/message`` and ``assistant/attempt`` (their ``texts`` / ``args``). Every
        other string is redacted on its own. The input events are not changed.
        """
        source = list(events)
        out = [self.redact(event) for event in source]
        for run in delta_runs(source):
            texts = [source[i]["data"]["chunk"][name] for i, name in run]
            for (i, name), text in zip(run, self.redact_pieces(texts), strict=True):
                out[i]["data"]["chunk"][name] = text
        for i, k, name in stream_runs_of(source):
            pieces = source[i]["data"]["stream"][k][name]
            out[i]["data"]["stream"][k][name] = self.redact_pieces(pieces)
        return out

    def find(self, value: object, path: str = "$") -> Iterable[tuple[str, str]]:
        """Yield ``(json_path, rule_name)`` for each string or key in ``value`` with a secret.

        Strings and keys are visited in document order, without recursion, so a value
        of any depth is searched ([docs/limits.md#nesting](../limits.md#nesting)).
        """
        # (the key it is found under, or _NO_KEY; the value; the path of its container)
        stack: list[tuple[Any, Any, str]] = [(_NO_KEY, value, path)]
        pop, push, rules = stack.pop, stack.extend, self._compiled
        while stack:
            key, value, path = pop()
            if key is not _NO_KEY:  # a member of an object: its key first, then its value
                sub = f"{path}.{key}" if _IDENT.fullmatch(key) else f"{path}[{key!r}]"
                for name, rx in rules:
                    if rx.search(key):
                        yield f"{path} (a key)", name
                        sub = f"{path}[{REDACTED!r}]"
                        break
                path = sub
            if isinstance(value, str):
                for name, rx in rules:
                    if rx.search(value):
                        yield path, name
                        break
            elif isinstance(value, dict):
                push([(k, v, path) for k, v in reversed(value.items())])
            elif isinstance(value, list):
                push([(_NO_KEY, v, f"{path}[{i}]") for i, v in reversed(list(enumerate(value)))])


def _first_match(rules: Sequence[tuple[str, re.Pattern[str]]]) -> Callable[[str], bool]:
    """A test for "some rule matches": one combined scan when the rules allow it."""
    parts = []
    for _, rx in rules:
        flags = "".join(
            f for f, bit in (("i", re.I), ("m", re.M), ("s", re.S), ("x", re.X)) if rx.flags & bit
        )
        body = rx.pattern
        if flags:  # global flags become scoped ones inside the alternation
            body = re.sub(r"^\(\?[aiLmsux]+\)", "", body)
            parts.append(f"(?{flags}:{body})")
        else:
            parts.append(f"(?:{body})")
    try:
        combined = re.compile("|".join(parts))
    except re.error:  # an extra pattern that cannot be combined: one scan per rule
        return lambda text: any(rx.search(text) for _, rx in rules)
    return lambda text: combined.search(text) is not None


RECORD_URL_VARIABLES: Final[tuple[str, ...]] = ("DSH_RECORD_BASE_URL",)
"""The variable that holds where recording calls go (its credentials are secrets); each
wire adds its own (``_wire.table.RECORD_URL_VARIABLES`` lists them all)."""


def recording_redactor(
    environ: Mapping[str, str] | None = None,
    *,
    url_variables: Iterable[str] = RECORD_URL_VARIABLES,
) -> Redactor:
    """The redactor recordings use: the built-in rules plus the recording's secrets.

    Args:
        environ: Where to read ``DSH_RECORD_API_KEY`` and the base URLs of
            ``url_variables`` (default: ``os.environ``).
        url_variables: The variables that hold base URLs (default:
            `RECORD_URL_VARIABLES`; the wires' table passes every wire's).

    Returns:
        A [`Redactor`][pytest_dsh_replay.Redactor] whose literals are the key, when it is
        set, and the credentials the base URLs carry (`url_secrets`).
    """
    env = os.environ if environ is None else environ
    key = env.get("DSH_RECORD_API_KEY", "")
    literals = [key] if key else []
    for name in url_variables:
        literals.extend(url_secrets(env.get(name, "")))
    return Redactor(literals=literals)


_SECRET_QUERY: Final = re.compile(r"(?i)(key|token|secret|password|auth|sig|credential)")


def _secret_name(name: str) -> bool:
    return _SECRET_QUERY.search(name) is not None


def url_secrets(url: str) -> list[str]:
    """The secrets a URL carries: its password and its secret-looking query values.

    A query parameter is secret when its name says key, token, secret, password, auth,
    sig or credential (``?key=...``, ``?access_token=...``). The user name is not a
    secret (it is hidden when the URL is shown, see `shown_url`).

    Args:
        url: A text; one that does not parse as a URL has no secrets.

    Returns:
        The values, raw and percent-decoded (both may be printed), without repeats.
    """
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    found = [password, unquote(password)] if password else []
    for piece in parts.query.split("&"):
        name, _, value = piece.partition("=")
        if value and _secret_name(unquote(name)):
            found.extend((value, unquote(value.replace("+", " "))))
    return list(dict.fromkeys(value for value in found if value))


def shown_url(url: str, redactor: Redactor | None = None) -> str:
    """``url`` as it may be printed: no credentials, no secret-looking query values.

    The ``user:password@`` part becomes ``[REDACTED]@``; the value of a query parameter
    whose name says key, token, secret, password, auth, sig or credential becomes
    ``[REDACTED]``; the rest goes through ``redactor`` (default: the built-in rules).
    A value that does not parse as a URL is only redacted.
    """
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    rules = redactor or builtin_redactor()
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(k, REDACTED if _secret_name(k) else v) for k, v in pairs], safe="[]"
            )
        url = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        pass
    return rules.redact_text(url)


class TextRedaction:
    """A text as a recording would hold it: the secret rules, then the event hook.

    A recording holds ``[REDACTED]`` where the live session had a secret (and whatever
    the user's ``pytest_dsh_replay_redact`` hook made of its events), so replay compares
    live text with recorded text, and quotes live text in its messages, through this
    ([docs/checks.md#redaction](../checks.md#redaction)).

    Args:
        redactor: The secret rules (default: the built-in ones).
        event_hook: The user's redaction of an event (changes it in place), or ``None``.
            A text goes through it as the text block of a ``user/message`` event; a hook
            that leaves no text there makes the whole text ``[REDACTED]``.

    Calling it with a text returns the redacted text.
    """

    __slots__ = ("event_hook", "redactor")

    def __init__(
        self,
        redactor: Redactor | None = None,
        event_hook: Callable[[Event], object] | None = None,
    ):
        self.redactor = builtin_redactor() if redactor is None else redactor
        self.event_hook = event_hook

    def __repr__(self) -> str:
        hook = "" if self.event_hook is None else ", with an event hook"
        return f"TextRedaction({self.redactor!r}{hook})"

    def __call__(self, text: str) -> str:
        redacted = self.redactor.redact_text(text)
        if self.event_hook is None:
            return redacted
        event: Event = {
            "type": "user/message",
            "data": {"role": "user", "content": [{"type": "text", "text": redacted}]},
        }
        self.event_hook(event)
        data = event.get("data")
        content = data.get("content") if isinstance(data, dict) else None
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [b.get("text") for b in content if isinstance(b, dict)]
            if texts and all(isinstance(t, str) for t in texts):
                return "".join(str(t) for t in texts)
        return REDACTED


@lru_cache(maxsize=1)
def builtin_redactor() -> Redactor:
    """The built-in rules alone, compiled once per process (`Redactor` with no arguments)."""
    return Redactor()


def builtin_redact(text: str) -> str:
    """``text`` redacted by the built-in rules (compiled on the first call)."""
    return builtin_redactor().redact_text(text)


def delta_runs(events: Sequence[Event]) -> list[list[tuple[int, str]]]:
    """Group the stream deltas of a session's events into runs, one per block of a call.

    A run is the ``text-delta``, ``reasoning-delta`` or ``tool-call-delta`` chunks of
    one block (same ``turn``, ``step``, call, ``index`` and type) in order; a
    ``block-start`` or ``block-end`` of that index, or the call's ``finish``, ends it.

    Args:
        events: A session's events (expanded, not packed rows).

    Returns:
        Runs of ``(event index, delta field name)`` pairs, in order of their first delta.
    """
    runs: list[list[tuple[int, str]]] = []
    open_runs: dict[tuple[object, ...], list[tuple[int, str]]] = {}
    calls: dict[tuple[object, object], int] = {}
    for i, event in enumerate(events):
        data = event.get("data") if event.get("type") == "assistant/chunk" else None
        chunk = data.get("chunk") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(chunk, dict):
            continue
        call = (_hashable(data.get("turn")), _hashable(data.get("step")))
        kind = chunk.get("type")
        if kind == "finish":
            calls[call] = calls.get(call, 0) + 1
            continue
        where = (*call, calls.get(call, 0), _hashable(chunk.get("index")))
        if kind in ("block-start", "block-end"):
            for delta_kind in _DELTA_FIELDS:
                open_runs.pop((*where, delta_kind), None)
            continue
        field_name = _DELTA_FIELDS.get(kind) if isinstance(kind, str) else None
        if field_name is None or not isinstance(chunk.get(field_name), str):
            continue
        key = (*where, kind)
        run = open_runs.get(key)
        if run is None:
            run = open_runs[key] = []
            runs.append(run)
        run.append((i, field_name))
    return runs


_STREAM_PIECES: Final = {
    "text-chunks": "texts",
    "reasoning-chunks": "texts",
    "tool-call-chunks": "args",
}


def stream_runs_of(events: Sequence[Event]) -> list[tuple[int, int, str]]:
    """Where the delta runs of embedded streams (formats 2 to 5) keep their pieces.

    Returns:
        ``(event index, stream record index, field)`` of every ``text-chunks``,
        ``reasoning-chunks`` (``texts``) and ``tool-call-chunks`` (``args``) record of
        the ``data.stream`` of ``assistant/message`` and ``assistant/attempt`` events.
    """
    found: list[tuple[int, int, str]] = []
    for i, event in enumerate(events):
        if event.get("type") not in ("assistant/message", "assistant/attempt"):
            continue
        data = event.get("data")
        stream = data.get("stream") if isinstance(data, dict) else None
        if not isinstance(stream, list):
            continue
        for k, record in enumerate(stream):
            kind = record.get("type") if isinstance(record, dict) else None
            name = _STREAM_PIECES.get(kind) if isinstance(kind, str) else None
            if name is None:
                continue
            pieces = record.get(name)
            if isinstance(pieces, list) and all(isinstance(p, str) for p in pieces):
                found.append((i, k, name))
    return found
