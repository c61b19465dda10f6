"""The exception tree of pytest-dsh-replay (see [docs/api/errors.md#errors](errors.md#errors)).

Every error this package raises on purpose derives from
[`DshReplayError`][pytest_dsh_replay.DshReplayError], so a caller can catch one base. Each
subclass also inherits the builtin whose meaning it shares, so code that already catches
``ValueError`` or ``RuntimeError`` keeps working::

    DshReplayError
    ├── SessionLogError(ValueError)            a log file or header is malformed (path, line)
    │   └── ScenarioError                      a scenario directory is malformed (naming, gaps)
    ├── ScriptError(ValueError)                events cannot be derived into a script
    │   └── PlaceholderError                   a {{fromRequest:...}} placeholder cannot resolve
    ├── OverrideError(ValueError)              a replay.override.json sidecar is invalid
    ├── SchemaVersionError(ValueError)         a SQLite store has the wrong schema or identity
    ├── SessionStoreError(ValueError)          a store operation was refused
    │   └── SessionForkError                   fork refused; ``.code`` says why
    ├── ReplayBindingError(RuntimeError)       a live session has no recorded script
    ├── ReplayExhaustedError(RuntimeError)     a session asked for more calls than recorded
    ├── ReplayConsumptionError(AssertionError) recorded calls were left unused
    ├── LogMismatchError(AssertionError)       replayed logs differ from the recording
    ├── ReplayedModelError(RuntimeError)       a recorded ``throw`` entry, replayed
    ├── ReplayCancelledError(RuntimeError)     a replayed call was cancelled
    ├── ReplayOrderError(RuntimeError)         concurrent sessions left the recorded order
    ├── UnservedRouteError(LookupError)        a client called a route the endpoint does not serve
    ├── EndpointError(RuntimeError)            the endpoint failed answering a request (a bug)
    ├── RecordingError(RuntimeError)           a recording could not be written
    ├── PictureError(RuntimeError)             a picture of a scenario could not be written
    └── ScriptedModelError(ValueError)         a scripted model's rule is invalid or none answers

Messages follow one form: where (file:line, session, call), what was expected, what was
found, and the fix when there is one. The fork codes are explained in
[docs/scenarios.md#store-fork](../scenarios.md#store-fork).
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "FORK_ERROR_CODES",
    "DshReplayError",
    "EndpointError",
    "FaultError",
    "ForkErrorCode",
    "LogMismatchError",
    "OverrideError",
    "PictureError",
    "PlaceholderError",
    "RecordingError",
    "RecordingExpiredWarning",
    "ReplayBindingError",
    "ReplayCancelledError",
    "ReplayConsumptionError",
    "ReplayExhaustedError",
    "ReplayOrderError",
    "ReplayedModelError",
    "ScenarioError",
    "SchemaVersionError",
    "ScriptError",
    "ScriptedModelError",
    "SessionForkError",
    "SessionLogError",
    "SessionStoreError",
    "UnknownSessionError",
    "UnknownWireError",
    "UnservedRouteError",
]


class DshReplayError(Exception):
    """Base class of every error raised by pytest-dsh-replay."""


def _where(path: str | None, line: int | None) -> str:
    if path is None:
        return "" if line is None else f"line {line}: "
    return f"{path}: " if line is None else f"{path}:{line}: "


class SessionLogError(DshReplayError, ValueError):
    """A session log (header, event line, packed chunk row, container) is malformed.

    Attributes:
        path: The file the problem is in, or ``None`` for in-memory text.
        line: The 1-based physical line (header and blank lines counted), or ``None``
            when the problem is not tied to one line.
        reason: The message without the location prefix.
    """

    path: str | None
    line: int | None
    reason: str

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None):
        self.reason = reason
        self.path = path
        self.line = line
        super().__init__(_where(path, line) + reason)

    def at(self, *, path: str | None, line: int | None) -> SessionLogError:
        """Return a copy of this error located at ``path``/``line`` (existing values win)."""
        return type(self)(
            self.reason,
            path=self.path if self.path is not None else path,
            line=self.line if self.line is not None else line,
        )


class ScenarioError(SessionLogError):
    """A scenario directory or store breaks the naming rules (no primary, a gap, a bad name)."""


class ScriptError(DshReplayError, ValueError):
    """Recorded events cannot be turned into a replay script.

    Attributes:
        path: The log file, when known.
        line: The physical line of the offending event, when known.
        call_key: The model call's key in ``turn/step`` form (``"1/1"``), when the error
            is about one call.
        event_index: The 0-based index of the offending event in the decoded log, when
            known; used to find ``line`` after the fact.
        reason: The message without the location prefix.
    """

    path: str | None
    line: int | None
    call_key: str | None
    event_index: int | None
    reason: str

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        line: int | None = None,
        call_key: str | None = None,
        event_index: int | None = None,
    ):
        self.reason = reason
        self.path = path
        self.line = line
        self.call_key = call_key
        self.event_index = event_index
        super().__init__(_where(path, line) + reason)

    def at(self, *, path: str | None, line: int | None) -> ScriptError:
        """Return a copy of this error located at ``path``/``line``."""
        return type(self)(
            self.reason,
            path=path,
            line=line,
            call_key=self.call_key,
            event_index=self.event_index,
        )


class PlaceholderError(ScriptError):
    """A ``{{fromRequest:<pattern>}}`` placeholder cannot be resolved."""


class OverrideError(DshReplayError, ValueError):
    """A ``replay.override.json`` sidecar is invalid.

    Attributes:
        path: The sidecar file.
        line: The 1-based line of a JSON syntax error, else ``None``.
        reason: The message without the location prefix.
    """

    path: str | None
    line: int | None
    reason: str

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None):
        self.reason = reason
        self.path = path
        self.line = line
        super().__init__(_where(path, line) + reason)


class SchemaVersionError(DshReplayError, ValueError):
    """A SQLite session store has a foreign schema version, application id or schema.

    The store is refused, never migrated.

    Attributes:
        path: The database file.
        found: What the file holds (a version number, an application id, or a schema
            description).
        required: What this build needs.
    """

    path: str
    found: object
    required: object

    def __init__(self, reason: str, *, path: str, found: object, required: object):
        self.path = path
        self.found = found
        self.required = required
        super().__init__(f"{path}: {reason}")


class SessionStoreError(DshReplayError, ValueError):
    """A session store operation was refused (duplicate id, invalid event, detached session)."""


ForkErrorCode = Literal[
    "SESSION_NOT_FOUND",
    "SESSION_NOT_LIVE",
    "SESSION_ALREADY_EXISTS",
    "INVALID_BOUNDARY",
    "OPEN_TURN",
]
"""What a [`SessionForkError`][pytest_dsh_replay.SessionForkError]'s ``code`` says went wrong.

The source session does not exist, is not live, the child id is taken, the boundary is not
a completed-turn boundary of the source, or the source has a turn open.
"""

FORK_ERROR_CODES: Final[frozenset[str]] = frozenset(
    {
        "SESSION_NOT_FOUND",
        "SESSION_NOT_LIVE",
        "SESSION_ALREADY_EXISTS",
        "INVALID_BOUNDARY",
        "OPEN_TURN",
    }
)


class SessionForkError(SessionStoreError):
    """``SessionStore.fork`` refused.

    See [docs/scenarios.md#store-fork](../scenarios.md#store-fork).

    Attributes:
        code: One of ``SESSION_NOT_FOUND``, ``SESSION_NOT_LIVE``,
            ``SESSION_ALREADY_EXISTS``, ``INVALID_BOUNDARY``, ``OPEN_TURN``.
    """

    code: ForkErrorCode

    def __init__(self, code: ForkErrorCode, message: str):
        if code not in FORK_ERROR_CODES:
            raise ValueError(f"unknown fork error code {code!r}")
        self.code = code
        super().__init__(message)


class ReplayBindingError(DshReplayError, RuntimeError):
    """A live session called the model but the scenario has no script left for it."""


class ReplayExhaustedError(DshReplayError, RuntimeError):
    """A session asked for more model calls than its recording holds.

    Attributes:
        session_id: The live session id (``None`` for the anonymous session).
        recorded_id: The recorded session id the live session is bound to.
        file: The log file of that recording.
        call_number: The 1-based number of the call that was refused.
        recorded: How many calls the recording holds.
    """

    session_id: str | None
    recorded_id: str
    file: str
    call_number: int
    recorded: int

    def __init__(
        self,
        message: str,
        *,
        session_id: str | None,
        recorded_id: str,
        file: str,
        call_number: int,
        recorded: int,
    ):
        self.session_id = session_id
        self.recorded_id = recorded_id
        self.file = file
        self.call_number = call_number
        self.recorded = recorded
        super().__init__(message)


class ReplayConsumptionError(DshReplayError, AssertionError):
    """Recorded model calls were left unused at the end of a test.

    Attributes:
        problems: One line per session with unused calls or per never-bound script.
    """

    problems: list[str]

    def __init__(self, message: str, *, problems: list[str]):
        self.problems = problems
        super().__init__(message)


class LogMismatchError(DshReplayError, AssertionError):
    """The logs a replayed run wrote differ from the recording."""


class ReplayedModelError(DshReplayError, RuntimeError):
    """The replay of a recorded ``throw`` entry: the model failed the way it was told to.

    Also what an injected [`Fault`][pytest_dsh_replay.Fault] raises in process
    ([docs/recording.md#faults](../recording.md#faults)).

    Attributes:
        message: The failure message from the entry.
        code: The failure code from the entry (``AUTH``, ``RATE_LIMIT``, ...).
        status: The HTTP status the failure stands for (an injected fault's: 429, 5xx),
            ``None`` for a recorded ``throw`` entry.
        retry_after_ms: The delay the provider asks for before a retry, in
            milliseconds (an injected rate limit's), else ``None``.
    """

    message: str
    code: str
    status: int | None
    retry_after_ms: int | None

    def __init__(
        self,
        message: str,
        code: str,
        *,
        status: int | None = None,
        retry_after_ms: int | None = None,
    ):
        self.message = message
        self.code = code
        self.status = status
        self.retry_after_ms = retry_after_ms
        super().__init__(f"{message} (code {code})")


class ReplayCancelledError(DshReplayError, RuntimeError):
    """A replayed call was cancelled while it waited (``hang`` entries, pacing)."""


class ReplayOrderError(DshReplayError, RuntimeError):
    """A replayed call waited in vain for the recorded order of calls across sessions.

    The recording shows something before this call was answered: calls of other sessions
    starting or ending (the recorded times), or, replaying the dsh runtime, a session's
    live log reaching a position (a turn begun, a child's notice arrived;
    [docs/recording.md#runtime-recording](../recording.md#runtime-recording)). Replay holds
    the call until it has, and gives up after a bounded wait, naming the session and the
    recorded event: the agent did not get there (it took another path, or made fewer calls).
    """


class UnservedRouteError(DshReplayError, LookupError):
    """A client called the model endpoint on a route it does not serve.

    The endpoint answers such a call 404 with the routes it serves and the closest one
    ([docs/wires.md#unserved-routes](../wires.md#unserved-routes)); the test fails with this
    error at teardown, so a client on an unsupported API shows what it asked for instead of
    a bare 404.
    """


class FaultError(DshReplayError, ValueError):
    """A fault was given a bad argument, or injected faults never happened.

    Raised by [`Fault`][pytest_dsh_replay.Fault]'s constructors and ``dsh_replay.inject``
    for a bad argument: the message names the argument, the value given and what is
    accepted. At the end of a passing test: the faults that were injected and never
    happened (the code under test made fewer attempts), by session and call
    ([docs/recording.md#faults](../recording.md#faults)).
    """


class UnknownWireError(DshReplayError, LookupError):
    """No wire has the name asked for (``DshReplay.client("<name>")``).

    The message names the wire asked for and every wire there is
    ([docs/wires.md#clients](../wires.md#clients)).
    """


class UnknownSessionError(DshReplayError, LookupError):
    """A run was asked about a session it has no log of.

    Raised by [`DshReplay.usage`][pytest_dsh_replay.DshReplay.usage] given a session id
    no session of the run has; the message names the ids it has.
    """


class EndpointError(DshReplayError, RuntimeError):
    """The model endpoint failed answering a request with an unexpected exception.

    The endpoint answers the call 400, as a replay error, with this message
    ([docs/wires.md#refused](../wires.md#refused)) instead of printing a traceback, and the
    test fails with this error at teardown. The message names the request (method and path)
    and the exception (its class and text); the exception is the ``__cause__``.
    """


class RecordingError(DshReplayError, RuntimeError):
    """A recording could not be made or written (``--dsh-record``)."""


class PictureError(DshReplayError, RuntimeError):
    """A picture of a scenario (``dsh-replay show --html``, ``--dsh-html``) could not be written.

    The message names the file or directory and the operating system's reason
    ([docs/guide/picture.md](../guide/picture.md)); a file that was there is left as it was.
    """


class ScriptedModelError(DshReplayError, ValueError):
    """A scripted live model was given an invalid rule or answer, or no rule answers a call.

    Raised when a ``ScriptedModel``, ``Rule``, ``Answer``, ``ToolCall``,
    ``ProviderFailure`` or ``Hang`` is built from values it cannot use (the message names
    the rule by its position and the field, what was expected and what was given), and
    when a call matches no rule and the model has no default answer (the message names
    the call's number and its prompt; over HTTP the call is answered 400, which no SDK
    retries, and the server raises the error when its ``with`` block ends). See
    [docs/recording.md#scripted-model](../recording.md#scripted-model).
    """


class RecordingExpiredWarning(UserWarning):
    """A test replayed a recording older than its largest age allows.

    Issued at the test's set-up. The message names the test, the recording, its age (from
    the recording's own header time) and the largest age allowed, and ends with the exact
    command that records it again. With ``--dsh-strict-age`` the test fails instead; with
    ``--dsh-record=missing`` the recording is made again
    ([docs/recording.md#expiry](../recording.md#expiry)). Turn it into an error for some
    tests only with pytest's ``filterwarnings``.
    """
