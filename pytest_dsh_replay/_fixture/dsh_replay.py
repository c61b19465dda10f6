"""What a test gets from the ``dsh_replay`` fixture, without pytest.

Documented in [docs/api/fixture-and-plugin.md#api-fixture](fixture-and-plugin.md#api-fixture).

The pytest plugin is a thin layer over this module: it resolves the scenario path from
the test, builds a [`DshReplay`][pytest_dsh_replay.DshReplay], and calls
[`DshReplay.finish`][pytest_dsh_replay.DshReplay.finish] after a passing test. Everything
here is plain Python, so other runners (or a REPL) can use it too::

    replay = DshReplay.open("tests/dsh_snapshots/spawn", workdir=tmp)
    run_agent(replay.model, replay.sessions)
    replay.finish()  # raises when calls were left unused or the logs differ
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .._check.log_check import (
    Comparison,
    Drift,
    Redaction,
    drift_of,
    first_difference,
    forms_agree,
    lines_forms,
    log_forms,
    logs_agree,
    recorded_pairing,
    unchanged_recording,
)
from .._check.normalize import (
    LogDifference,
    Normalizer,
    RunTexts,
    canonical_log,
    describe_difference,
    diff_logs,
    in_committed_form,
)
from .._endpoint.clients import EndpointClients
from .._errors import DshReplayError, FaultError, LogMismatchError, RecordingError
from .._format.events import Event, JSONObject, SessionHeader, SessionLike, SessionLog
from .._format.jsonl import event_line, read_session_log
from .._format.redact import Redactor, TextRedaction
from .._identity.faults import Fault, FaultQueue
from .._recording.recorder import RecordingModel, child_meta
from .._recording.watched import LiveFailure, WatchedLive
from .._replay.model import ReplayBinding, ReplayModel
from .._scripts.loading import ScenarioCache, load_scenario
from .._scripts.scenario import (
    Scenario,
    SessionScript,
    order_sessions,
    refuse_foreign,
    refuse_nested,
    write_scenario,
)
from .._store.atomic import check_writable, recover
from .._store.backends.base import MemoryBackend
from .._store.store import SessionStore
from .new_calls import (
    CONTINUED_TURN,
    NewCallsModel,
    NewSplit,
    appended_logs,
    continues_closed_turn,
    split_sessions,
)
from .runtime_logs import RuntimeSessions, compare_model_views

_S = TypeVar("_S", bound=SessionLike)

if TYPE_CHECKING:
    # The SDK types of the in-process clients, for type checkers only: each SDK is
    # imported when its client is asked for (docs/wires.md#clients), never here.
    from anthropic import Anthropic, AnthropicBedrock, AsyncAnthropic, AsyncAnthropicBedrock
    from google.genai import Client as GeminiClient
    from google.genai.client import AsyncClient as AsyncGeminiClient
    from openai import AsyncAzureOpenAI, AsyncOpenAI, AzureOpenAI, OpenAI

    from .._endpoint.endpoint import Endpoint
    from .usage import UsageTotals

__all__ = [
    "DshReplay",
    "Mode",
]

Mode = Literal["replay", "record", "new"]
"""``"replay"`` serves recordings; ``"record"`` calls the live model and writes them;
``"new"`` replays a recording and appends the calls past it, made live
([docs/recording.md#record-new](../recording.md#record-new))."""


def _new_store() -> SessionStore:
    """The test's own store, in memory: nothing unredacted ever reaches the disk."""
    return SessionStore(MemoryBackend())


def _check_place(p: Path, *, replacing: bool = True) -> None:
    """Refuse to record into ``p`` when the write would fail, before the live model is called.

    ``replacing``: the recording replaces the directory (appending keeps what else it
    holds, so other entries do not matter then).

    Raises:
        RecordingError: ``p`` is a file, holds or lies inside another scenario, holds
            entries no scenario holds when ``replacing`` (`refuse_foreign`), or cannot
            be written or replaced (tried:
            [docs/recording.md#writing](../recording.md#writing)).
    """
    if p.exists() and not p.is_dir():
        raise RecordingError(
            f"cannot record into {p}: it is a file (a single log or a SQLite store), and "
            "a recording is written as a scenario directory; point the dsh_scenario "
            "marker at a directory, or record with record=False on this test"
        )
    refuse_nested(p)
    if replacing:
        refuse_foreign(p)
    try:
        check_writable(p)
    except OSError as err:
        raise RecordingError(
            f"cannot record into {p}: {err.filename or p}: {err.strerror or err}; "
            "nothing was recorded (the live model was not called) and the previous "
            "recording, if any, is kept"
        ) from None


def _log_path(script: SessionScript) -> Path:
    assert script.path is not None  # a store scenario has no per-session file
    return script.path


def _late_depths(late: Mapping[str, str], headers: Mapping[str, SessionHeader]) -> dict[str, int]:
    """Each session's ``delegationDepth`` once the late parents are given.

    A session that got its parent late is one deeper than that parent ends up; one that
    had its parent from the start moves with it (three conversations at once, filed as
    a chain: the third's live parent is the second, which got its own parent late). A
    cycle stops where it closes.
    """
    depths: dict[str, int] = {}

    def depth(session: str, seen: frozenset[str]) -> int:
        found = depths.get(session)
        if found is not None:
            return found
        own = _own_depth(session, headers)
        header = headers.get(session)
        parent = late.get(session)
        above = None if header is None else header.parent_session
        if parent is not None and parent not in seen:
            value = depth(parent, seen | {session}) + 1
        elif (
            above is not None
            and above not in seen
            and above in headers
            and header is not None
            and header.origin == "subagent"  # its depth is its parent's + 1 (a store fork: 0)
        ):
            value = own + depth(above, seen | {session}) - _own_depth(above, headers)
        else:
            value = own
        depths[session] = value
        return value

    for session in headers:
        depth(session, frozenset())
    return depths


def _own_depth(session: str, headers: Mapping[str, SessionHeader]) -> int:
    header = headers.get(session)
    return 0 if header is None else header.delegation_depth or 0


@dataclass
class DshReplay:
    """The ``dsh_replay`` fixture's value: one test's recorded scenario and its model.

    Attributes:
        path: The scenario directory (or log / store) this test replays or records.
        mode: ``"replay"``, ``"record"`` or ``"new"`` (`append`).
        scenario: The loaded scenario; in record mode the previous recording, if any.
        model: What the code under test streams from: a
            [`RecordingModel`][pytest_dsh_replay.RecordingModel] that logs each call's
            conversation into the calling session of `sessions`, around a
            [`ReplayModel`][pytest_dsh_replay.ReplayModel] (replay mode) or the live model
            (record mode). Replay attributes (``bindings``, ``assert_consumed``,
            ``cancel``) are the replay model's.
        sessions: The [`SessionStore`][pytest_dsh_replay.SessionStore] the code under test
            persists its sessions in, in memory (a recording is written, redacted, only
            when the test passed).
        workdir: The temporary directory owned by this run (ready files).
        compare_logs: Whether [`finish`][pytest_dsh_replay.DshReplay.finish] compares the
            replayed logs with the recording (replay mode).
        redactor: The secret rules applied before anything is written (and to the
            replayed side before comparing).
        redact_hook: Extra redaction, called with each event copy (changes it in place).
        redact_header_hook: Extra redaction, called with each session header's JSON
            object (``{"type": "session", "id", ...}``; changes it in place).
        unchanged: Set by [`finish`][pytest_dsh_replay.DshReplay.finish] in record mode: the
            recording equals the previous one (normalized), whose files were left untouched;
            in ``"new"`` mode: no call or session was new, and nothing was written.
        appended_calls: Set by [`finish`][pytest_dsh_replay.DshReplay.finish] in ``"new"``
            mode: how many model calls were appended (new sessions' included).
    """

    path: Path
    mode: Mode
    scenario: Scenario | None
    model: RecordingModel
    sessions: SessionStore
    workdir: Path
    compare_logs: bool = True
    redactor: Redactor = field(default_factory=Redactor)
    redact_hook: Callable[[Event], object] | None = None
    redact_header_hook: Callable[[JSONObject], object] | None = None
    unchanged: bool = field(default=False, init=False)
    appended_calls: int = field(default=0, init=False)
    _http: EndpointClients = field(init=False, repr=False)
    _live: object = field(default=None, init=False, repr=False)
    _live_mark: int = field(default=0, init=False, repr=False)
    _watched: WatchedLive | None = field(default=None, init=False, repr=False)
    _cache: ScenarioCache | None = field(default=None, init=False, repr=False)
    _replayer: ReplayModel | None = field(default=None, init=False, repr=False)
    _recorder: RecordingModel = field(init=False, repr=False)
    _runtime: RuntimeSessions = field(init=False, repr=False)
    _refresh: bool = field(default=False, init=False, repr=False)
    _drift: Drift | None = field(default=None, init=False, repr=False)
    _new: NewCallsModel | None = field(default=None, init=False, repr=False)
    _new_split: NewSplit | None = field(default=None, init=False, repr=False)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        workdir: Path,
        pace_ms: int = 0,
        pace: float = 0.0,
        compare_logs: bool = True,
        redactor: Redactor | None = None,
        redact_hook: Callable[[Event], object] | None = None,
        redact_header_hook: Callable[[JSONObject], object] | None = None,
        cache: ScenarioCache | None = None,
        max_body_bytes: int | None = None,
        rerecord: str | Callable[[], str] | None = None,
        append: str | Callable[[], str] | None = None,
    ) -> DshReplay:
        """Load a recorded scenario for replay.

        When ``path`` is missing because a recording was killed while replacing it, the
        previous recording it moved aside is put back first.

        Args:
            path: The scenario (directory, log file or SQLite store).
            workdir: A directory this run owns; sessions are stored under it and relative
                ``readyFile`` paths of ``hang`` entries resolve inside it.
            pace_ms: Delay between replayed chunks, in milliseconds.
            pace: Serve chunks at their recorded times scaled by this factor (a finite
                number >= 0; 0: as fast as possible;
                [docs/scenarios.md#pacing](../scenarios.md#pacing)).
            compare_logs: Compare the logs the code under test writes with the recording.
            redactor: Secret rules (see `redactor`).
            redact_hook: Extra redaction (see `redact_hook`).
            redact_header_hook: Extra header redaction (see `redact_header_hook`).
            cache: Share the loaded scenario, and the recorded logs the log check reads,
                with other runs that use the same cache (the pytest plugin keeps one per
                test run); ``None`` loads afresh.
            max_body_bytes: The largest request body the HTTP endpoint accepts, in bytes
                (``None``: [`MAX_BODY_BYTES`][pytest_dsh_replay.MAX_BODY_BYTES]).
            rerecord: The command that re-records the scenario, quoted by the replay's
                binding and exhausted errors (see [`ReplayModel`][pytest_dsh_replay.ReplayModel];
                the plugin passes the test's ``pytest --dsh-record=all <node id>``).
            append: The command that appends what the recording lacks, quoted after
                ``rerecord`` when the code made more calls or sessions than were recorded
                (the plugin passes the test's ``pytest --dsh-record=new <node id>``).

        Raises:
            DshReplayError: The scenario does not exist or does not load (the core's
                message: file, line and what was expected).
            ValueError: ``pace_ms`` or ``pace`` is not a number >= 0.
        """
        p = Path(path)
        if not p.exists():
            recover(p)  # a killed recording may have moved the old one aside
        scenario = load_scenario(p) if cache is None else cache.load(p, keep_logs=compare_logs)
        replayer = ReplayModel(
            scenario,
            pace_ms=pace_ms,
            pace=pace,
            workdir=workdir,
            redactor=redactor,
            redact_hook=redact_hook,
            rerecord=rerecord,
            append=append,
        )
        # The replay model answers; the recorder logs each call into the calling
        # session exactly as recording does, so the two runs' logs can be compared.
        replay = cls._logged_run(
            p, scenario, replayer, replayer, workdir, redactor, redact_hook, redact_header_hook
        )
        replay._http.max_body_bytes = max_body_bytes
        replay.compare_logs = compare_logs
        replay._cache = cache
        return replay

    @classmethod
    def record(
        cls,
        path: str | os.PathLike[str],
        *,
        live: object,
        workdir: Path,
        redactor: Redactor | None = None,
        redact_hook: Callable[[Event], object] | None = None,
        redact_header_hook: Callable[[JSONObject], object] | None = None,
        max_body_bytes: int | None = None,
        refresh: bool = False,
    ) -> DshReplay:
        """Prepare to record a scenario from a live model.

        Nothing is written until [`finish`][pytest_dsh_replay.DshReplay.finish] (called
        after the test passed), and then atomically: a failing or interrupted test leaves
        the previous recording as it was.

        Args:
            path: The scenario directory to (re)write.
            live: The live model (``stream``, and ``astream`` for async callers).
            workdir: A directory this run owns (sessions are stored under it).
            redactor: Secret rules applied before writing.
            redact_hook: Extra redaction applied before writing.
            redact_header_hook: Extra header redaction applied before writing.
            max_body_bytes: The largest request body the HTTP endpoint accepts, in bytes
                (``None``: [`MAX_BODY_BYTES`][pytest_dsh_replay.MAX_BODY_BYTES]).
            refresh: Write the new recording even when it equals the previous one: an
                expired recording gets the new run's header times
                ([docs/recording.md#expiry](../recording.md#expiry)).

        Raises:
            RecordingError: ``path`` is an existing file, not a scenario directory; it
                holds another scenario or lies inside one; or it cannot be written (a
                read-only directory, a parent that is a file), checked here, before the
                live model is ever called.
        """
        p = Path(path)
        _check_place(p)
        previous: Scenario | None = None
        if p.exists():
            try:
                previous = load_scenario(p)
            except DshReplayError:
                previous = None  # a broken old recording is about to be replaced
        # What the live model raises is kept: the test fails with it first, typed
        # (docs/recording.md#live-model-failures).
        watched = WatchedLive(live, redactor or Redactor())
        replay = cls._logged_run(
            p, previous, watched, None, workdir, redactor, redact_hook, redact_header_hook
        )
        replay._http.max_body_bytes = max_body_bytes
        replay._watch(live, watched)
        replay._refresh = refresh
        return replay

    def _watch(self, live: object, watched: WatchedLive) -> None:
        """Report what ``live`` (watched as ``watched``) fails with from now on."""
        self._live = live
        self._live_mark = len(getattr(live, "network_failures", ()))
        self._watched = watched

    @classmethod
    def append(
        cls,
        path: str | os.PathLike[str],
        *,
        live: object,
        workdir: Path,
        redactor: Redactor | None = None,
        redact_hook: Callable[[Event], object] | None = None,
        redact_header_hook: Callable[[JSONObject], object] | None = None,
        max_body_bytes: int | None = None,
        rerecord: str | Callable[[], str] | None = None,
    ) -> DshReplay:
        """Replay a recorded scenario and record what goes past it (``--dsh-record=new``).

        A call of a live session whose recorded session still has calls replays as in
        [`open`][pytest_dsh_replay.DshReplay.open] (the same binding); a call past its
        session's recording, and every call of a session the recording lacks (a new
        spawn or fork child), goes to ``live``. [`finish`][pytest_dsh_replay.DshReplay.finish]
        checks the recorded calls as a replay does, then appends the new calls to the
        recorded logs and the new sessions as new child files, atomically, without
        changing a byte of what was there
        ([docs/recording.md#record-new](../recording.md#record-new)).

        Args:
            path: The scenario directory (a recording this plugin wrote).
            live: The live model (``stream``, and ``astream`` for async callers).
            workdir: A directory this run owns.
            redactor: Secret rules applied before writing (and to replayed texts).
            redact_hook: Extra redaction applied before writing.
            redact_header_hook: Extra header redaction applied before writing.
            max_body_bytes: The largest request body the HTTP endpoint accepts, in bytes.
            rerecord: The command that re-records the scenario, for the replay's errors.

        Raises:
            RecordingError: ``path`` is not a scenario directory, cannot be written, or
                holds a log that is not in the committed form (checked here, before the
                live model is called).
            DshReplayError: The recording does not load.
        """
        p = Path(path)
        if not p.is_dir():
            raise RecordingError(
                f"cannot append to {p}: --dsh-record=new appends to a scenario directory, and "
                "this is a file (a single log or a SQLite store); record it with "
                "--dsh-record=all, or mark the test record=False"
            )
        _check_place(p, replacing=False)
        scenario = load_scenario(p)
        from .._scripts.appending import check_appendable

        # before the live model is called: a log another program wrote cannot keep its bytes
        check_appendable(p, [script.file for script in (scenario.primary, *scenario.children)])
        replayer = ReplayModel(
            scenario,
            workdir=workdir,
            redactor=redactor,
            redact_hook=redact_hook,
            rerecord=rerecord,
        )
        watched = WatchedLive(live, redactor or Redactor())
        answering = NewCallsModel(replayer, watched)
        replay = cls._logged_run(
            p,
            scenario,
            answering,
            replayer,
            workdir,
            redactor,
            redact_hook,
            redact_header_hook,
            new=answering,
        )
        replay._http.max_body_bytes = max_body_bytes
        replay._watch(live, watched)
        return replay

    @classmethod
    def _logged_run(
        cls,
        path: Path,
        scenario: Scenario | None,
        answering: object,
        replayer: ReplayModel | None,
        workdir: Path,
        redactor: Redactor | None,
        redact_hook: Callable[[Event], object] | None,
        redact_header_hook: Callable[[JSONObject], object] | None,
        *,
        new: NewCallsModel | None = None,
    ) -> DshReplay:
        """A run whose model logs every call ``answering`` answers, in a new in-memory store.

        ``answering`` is the replay model ``replayer`` (replay mode), the live model
        (record mode, ``replayer`` ``None``), or ``new`` around both (``"new"`` mode);
        either way the recorder logs each call into the calling session, with requests
        (and a live model's chunks) made text-safe.
        """
        sessions = _new_store()
        replayed_only = replayer is not None and new is None
        model = RecordingModel(
            answering,
            sessions,
            create_sessions=True,
            parsed_chunks=replayed_only,
            text_safe=True,
            request_views=replayed_only,
        )
        mode: Mode = "record" if replayer is None else "replay" if new is None else "new"
        replay = cls(
            path=path,
            mode=mode,
            scenario=scenario,
            model=model,
            sessions=sessions,
            workdir=workdir,
            redactor=redactor or Redactor(),
            redact_hook=redact_hook,
            redact_header_hook=redact_header_hook,
        )
        replay._replayer = replayer
        replay._recorder = model
        model.faults = FaultQueue()
        replay._http = EndpointClients(
            model,
            replay=replayer,
            redact=TextRedaction(replay.redactor, redact_hook),
            live_calls=new,
        )
        replay._runtime = RuntimeSessions(scenario, replayer)
        replay._new = new
        return replay

    def _live_problem(self) -> RecordingError | None:
        """The live model could not be reached, or raised, during this recording.

        Each failure is reported once: the built-in adapter's ``network_failures`` (it
        never raises) and what the watched live model raised, the first one named.
        """
        failures = list(getattr(self._live, "network_failures", ()))
        new = [LiveFailure(text, True) for text in failures[self._live_mark :]]
        self._live_mark = len(failures)
        if self._watched is not None:
            new.extend(self._watched.take_failures())
        if not new:
            return None
        more = f" (and {len(new) - 1} more failed call(s))" if len(new) > 1 else ""
        hint = (
            " Check that the live model's server is running and that the base URL it calls "
            "(DSH_RECORD_BASE_URL, or the one of the model the pytest_dsh_replay_live_model "
            "hook returns) points at it"
            if new[0].network and "DSH_RECORD_TIMEOUT" not in new[0].message
            else ""
        )
        return RecordingError(
            f"recording {self.path} failed: {new[0].message}{more}; nothing was written.{hint}"
        )

    # --- the model endpoint (its accessors and clients: EndpointClients) ---------------

    def close(self) -> None:
        """Stop the endpoint (hanging calls end, the server stops); safe to call twice.

        Raises:
            DshReplayError: The first replay error an HTTP call met (binding, exhausted,
                placeholder, script) and nothing reported yet: the call was answered with a
                400 ([docs/wires.md#replay-errors](../wires.md#replay-errors)), and this
                makes the test fail with the typed error.
            RecordingError: While recording, the live model could not be reached or
                raised (the message names it, its redacted base URL and the error).
        """
        faults = self._recorder.faults
        if faults is not None:
            faults.close()  # an injected latency being waited ends now
        self._http.close()
        self._recorder.forget_finished_calls()  # freed at once when dropped
        problem = self._take_problem()
        if problem is not None:
            raise problem

    def guessed_parents(self) -> int:
        """How many sessions the endpoint started whose parent content could not decide.

        A request that names no session (no ``x-dsh-session-id`` header) and starts a new
        conversation without a seed is a child of the session waiting for its tools; when
        several were waiting, or none and several were live, its parent was guessed
        ([docs/wires.md#calling-session](../wires.md#calling-session)). Record mode reports
        the count in the summary.

        Returns:
            The count; ``0`` when the endpoint was not used, or with
            [`use_sessions`][pytest_dsh_replay.DshReplay.use_sessions] (the dsh runtime's
            own logs name every session's parent).
        """
        if self._runtime.source is not None:
            return 0
        return self._http.guessed_parents()

    def _calls_opened(self) -> int:
        """How many model calls the recorder opened so far (``0`` when replaying)."""
        recorder = getattr(self, "_recorder", None)
        return 0 if recorder is None else recorder.calls_opened

    def _take_problem(self) -> DshReplayError | None:
        """What made model calls fail so far, each reported once (see `close`).

        Returns:
            While recording, the first call the recorder refused (a chunk the loader
            would refuse: what the live model or the code met after it is its echo),
            else the live model not being reached or raising (an HTTP call's error after
            it is its echo and is dropped); else the first replay error HTTP calls met;
            ``None`` when none happened since the last call.
        """
        errors = self._http.take_errors()
        if self.mode == "replay":
            return errors[0] if errors else None
        refused = self._recorder.take_refused()
        live = self._live_problem()
        if refused:
            return refused[0]
        if live is not None:
            return live  # the root cause: what an HTTP call met after it is its echo
        return errors[0] if errors else None

    # --- the model endpoint --------------------------------------------------------------

    @property
    def _endpoint(self) -> Endpoint:
        """The HTTP model endpoint of this run (created on first use)."""
        return self._http.endpoint

    @property
    def base_url(self) -> str:
        """The endpoint's root URL, ``http://127.0.0.1:<port>`` (clients add ``/v1``).

        The server starts on first use, listens on 127.0.0.1 only, and stops at
        [`close`][pytest_dsh_replay.DshReplay.close] (the fixture's teardown).
        """
        return self._http.base_url

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point an agent process at `base_url`.

        Every wire's (each wire's section of
        [docs/wires.md](../wires.md) says how its SDK reads them):

        - OpenAI: ``OPENAI_BASE_URL`` and ``OPENAI_API_BASE`` (with ``/v1``),
          ``OPENAI_API_KEY``;
        - Anthropic and the dsh runtime's DeepSeek route: ``ANTHROPIC_BASE_URL``,
          ``DEEPSEEK_BASE_URL`` (the root), ``ANTHROPIC_API_KEY``, ``DEEPSEEK_API_KEY``;
        - Gemini: ``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_API_KEY``, ``GOOGLE_API_KEY``;
        - Vertex AI: ``GOOGLE_VERTEX_BASE_URL``, ``GOOGLE_CLOUD_PROJECT``,
          ``GOOGLE_CLOUD_LOCATION``, and for ``AnthropicVertex``
          ``ANTHROPIC_VERTEX_BASE_URL``, ``ANTHROPIC_VERTEX_PROJECT_ID``,
          ``CLOUD_ML_REGION``;
        - Azure OpenAI: ``AZURE_OPENAI_ENDPOINT``, ``AZURE_OPENAI_API_KEY``,
          ``OPENAI_API_VERSION``;
        - Bedrock: ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, ``ANTHROPIC_BEDROCK_BASE_URL``,
          dummy ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` and a region
          (``AWS_REGION``, ``AWS_DEFAULT_REGION``);
        - Ollama: ``OLLAMA_HOST``;
        - ``NO_PROXY`` and ``no_proxy`` for the loopback address.

        Keys are dummies: the endpoint ignores them. Merge them into the process's
        environment: ``subprocess.run(cmd, env={**os.environ, **dsh_replay.env})``.
        """
        return self._http.env

    @overload
    def client(
        self,
        wire: Literal["openai", "openai-responses"],
        async_: Literal[False] = False,
        **options: object,
    ) -> OpenAI: ...
    @overload
    def client(
        self, wire: Literal["openai", "openai-responses"], async_: Literal[True], **options: object
    ) -> AsyncOpenAI: ...
    @overload
    def client(
        self, wire: Literal["anthropic"], async_: Literal[False] = False, **options: object
    ) -> Anthropic: ...
    @overload
    def client(
        self, wire: Literal["anthropic"], async_: Literal[True], **options: object
    ) -> AsyncAnthropic: ...
    @overload
    def client(
        self, wire: Literal["gemini"], async_: Literal[False] = False, **options: object
    ) -> GeminiClient: ...
    @overload
    def client(
        self, wire: Literal["gemini"], async_: Literal[True], **options: object
    ) -> AsyncGeminiClient: ...
    @overload
    def client(
        self,
        wire: Literal["azure", "azure-responses"],
        async_: Literal[False] = False,
        **options: object,
    ) -> AzureOpenAI: ...
    @overload
    def client(
        self, wire: Literal["azure", "azure-responses"], async_: Literal[True], **options: object
    ) -> AsyncAzureOpenAI: ...
    @overload
    def client(
        self, wire: Literal["anthropic-bedrock"], async_: Literal[False] = False, **options: object
    ) -> AnthropicBedrock: ...
    @overload
    def client(
        self, wire: Literal["anthropic-bedrock"], async_: Literal[True], **options: object
    ) -> AsyncAnthropicBedrock: ...
    @overload
    def client(self, wire: str, async_: bool = False, **options: object) -> Any: ...
    def client(self, wire: str, async_: bool = False, **options: object) -> Any:
        """An SDK client of ``wire`` that talks to the endpoint in process (no socket).

        ``client("openai")`` is
        [`openai_client`][pytest_dsh_replay.DshReplay.openai_client],
        ``client("anthropic", async_=True)``
        [`async_anthropic_client`][pytest_dsh_replay.DshReplay.async_anthropic_client];
        every wire of [docs/wires.md#clients](../wires.md#clients) has one
        (``"openai-responses"`` gives the OpenAI client, whose ``responses`` reach that
        wire; ``"azure"`` and ``"azure-responses"`` both give ``openai.AzureOpenAI``;
        ``"bedrock"`` a boto3 ``bedrock-runtime`` client (sync only);
        ``"anthropic-bedrock"`` ``anthropic.AnthropicBedrock``; ``"vertex"`` a
        ``google.genai.Client(vertexai=True)``; ``"anthropic-vertex"``
        ``anthropic.AnthropicVertex``; ``"ollama"`` ``ollama.Client``).
        The client never retries unless ``options`` say so.

        Args:
            wire: The wire's name: ``"openai"``, ``"openai-responses"``,
                ``"anthropic"``, ``"gemini"``, ``"azure"``, ``"azure-responses"``,
                ``"bedrock"``, ``"anthropic-bedrock"``, ``"vertex"``,
                ``"anthropic-vertex"`` or ``"ollama"`` (each wire of
                [docs/wires.md#clients](../wires.md#clients)).
            async_: The SDK's async client (``openai.AsyncOpenAI`` and
                ``AsyncAzureOpenAI``, ``anthropic.AsyncAnthropic``,
                ``AsyncAnthropicBedrock`` and ``AsyncAnthropicVertex``, a
                ``google.genai.Client``'s ``.aio``, ``ollama.AsyncClient``); boto3 has
                none (``client("bedrock", async_=True)`` is a `DshReplayError`).
            **options: Passed to the client's constructor (``max_retries``,
                ``timeout``, ...; ``api_key`` defaults to a dummy key; for Gemini,
                ``http_options`` keeps its other settings).

        Returns:
            The client: ``openai.OpenAI``, ``anthropic.Anthropic``,
            ``google.genai.Client``, ``openai.AzureOpenAI``, a boto3 client,
            ``anthropic.AnthropicBedrock``, ``anthropic.AnthropicVertex``,
            ``ollama.Client``, or their async faces.

        Raises:
            UnknownWireError: No wire is called ``wire`` (a
                [`DshReplayError`][pytest_dsh_replay.DshReplayError] and a ``LookupError``; the
                message names every wire).
            DshReplayError: The wire's SDK package is not installed (the message names
                what to ``pip install``).
        """
        return self._http.sdk_client(wire, options, asynchronous=async_)

    def openai_client(self, **options: object) -> OpenAI:
        """An ``openai.OpenAI`` client on the endpoint in process: ``client("openai")``.

        Args:
            **options: Passed to ``openai.OpenAI`` (``max_retries``, ``timeout``, ...).

        Raises:
            DshReplayError: The ``openai`` package is not installed.
        """
        return self.client("openai", False, **options)

    def async_openai_client(self, **options: object) -> AsyncOpenAI:
        """An ``openai.AsyncOpenAI`` client on the endpoint, like `openai_client`."""
        return self.client("openai", True, **options)

    def anthropic_client(self, **options: object) -> Anthropic:
        """An ``anthropic.Anthropic`` client on the endpoint: ``client("anthropic")``.

        ``options`` go to ``anthropic.Anthropic``; without the ``anthropic`` package it
        raises [`DshReplayError`][pytest_dsh_replay.DshReplayError].
        """
        return self.client("anthropic", False, **options)

    def async_anthropic_client(self, **options: object) -> AsyncAnthropic:
        """An ``anthropic.AsyncAnthropic`` client on the endpoint (as `anthropic_client`)."""
        return self.client("anthropic", True, **options)

    def gemini_client(self, **options: object) -> GeminiClient:
        """A ``google.genai.Client`` on the endpoint in process: ``client("gemini")``.

        ``client.models.generate_content(...)`` and ``generate_content_stream(...)`` reach
        the endpoint's Gemini routes ([docs/wires.md#gemini](../wires.md#gemini)); the
        client never retries.

        Args:
            **options: Passed to ``google.genai.Client``; ``http_options`` keeps its
                other settings, its base URL and HTTP clients are the endpoint's.

        Raises:
            DshReplayError: The ``google-genai`` package is not installed.
        """
        return self.client("gemini", False, **options)

    def async_gemini_client(self, **options: object) -> AsyncGeminiClient:
        """The async ``google.genai`` client (a ``Client``'s ``.aio``) on the endpoint.

        ``await client.models.generate_content(...)``, ``async for chunk in await
        client.models.generate_content_stream(...)``; ``options`` as for
        [`gemini_client`][pytest_dsh_replay.DshReplay.gemini_client].
        """
        return self.client("gemini", True, **options)

    # --- the dsh runtime's own logs --------------------------------------------------------

    def use_sessions(
        self, root: str | os.PathLike[str], session_id: str, *, order_timeout: float = 10.0
    ) -> None:
        """Make the dsh runtime's own session logs this test's recording.

        Call it before the runtime starts, with the sessions root the runtime writes to
        (its ``session-persistence-jsonl`` patch, plain JSONL) and the id of the session
        the test prompts. Then:

        - record mode: the scenario directory is written from the runtime's logs of that
          session and its descendants (spawn and fork children): the primary as
          ``session.jsonl``, the children as ``session.<n>.jsonl`` by creation time,
          format 4 as the runtime wrote it, redacted and with the working directory as
          ``{{cwd}}``, atomically, when the test passes;
        - replay mode: the replay model keeps the recorded interleaving of the
          runtime's sessions on the logs the runtime writes as it runs (a child's last
          answer waits, bounded, until its parent's live log reached the point where
          the recording shows the child's notice could land, and the parent's answer
          that ends that step until the notice is in its live log;
          [docs/recording.md#runtime-recording](../recording.md#runtime-recording)), and
          after the test the runtime's logs of this run must show the model what the
          recording shows it: the same messages, request settings and served chunks per
          session, ids, times and the working directory normalized (the runtime's
          bookkeeping events, whose order varies between runs, are not compared);
        - [`transcript`][pytest_dsh_replay.DshReplay.transcript] renders the runtime's logs.

        Args:
            root: The runtime's sessions root (``<root>/<project key>/<id>/...``).
            session_id: The primary session's id (the one the test prompts).
            order_timeout: Replay mode: the longest a call waits for the recorded order,
                in seconds; then it fails with
                [`ReplayOrderError`][pytest_dsh_replay.ReplayOrderError] naming the session whose
                live log it waited for and the recorded event (the runtime gets an HTTP
                400, which it does not retry, and the test fails with the error).

        Raises:
            RecordingError: In ``"new"`` mode: the runtime's own logs are not appended to
                ([docs/recording.md#record-new](../recording.md#record-new)).
        """
        if self.mode == "new":
            raise RecordingError(
                f"--dsh-record=new cannot append to {self.path}: the dsh runtime writes its "
                "own logs (use_sessions), in format 4 with times, and they are recorded "
                "whole; re-record the scenario with --dsh-record=all"
            )
        self._runtime.use(root, session_id, order_timeout=order_timeout)

    def _runtime_races(self) -> list[str]:
        """The races inside the dsh runtime this replay took otherwise.

        Empty when the test named no runtime logs, when recording, or when none did
        ([docs/limits.md#runtime-races](../limits.md#runtime-races)).
        """
        return self._runtime.races()

    # --- views -------------------------------------------------------------------------

    def transcript(self) -> str:
        """The run's sessions as a normalized Markdown transcript.

        Every session of `sessions`: the ones the code under test wrote, and the
        ones the model created for calls from sessions it did not know (each with its
        turns: the messages, the model's answers, tool calls and results). Compare it
        with a snapshot:
        ``assert dsh_replay.transcript() == dsh_transcript``.
        """
        from .._check.transcript import render_transcript

        return render_transcript(
            self.redacted_sessions(), redactor=self.redactor, aliases=self.bound_ids()
        )

    def events_snapshot(self) -> str:
        """The run's sessions as normalized JSON lines (the ``.jsonl`` snapshot's text).

        The sessions of
        [`redacted_sessions`][pytest_dsh_replay.DshReplay.redacted_sessions], each header
        then its events, ids, times and the working directory normalized as in
        [`transcript`][pytest_dsh_replay.DshReplay.transcript].
        """
        from .._check.transcript import sessions_as_jsonl

        return sessions_as_jsonl(
            self.redacted_sessions(), redactor=self.redactor, aliases=self.bound_ids()
        )

    def inject(self, fault: Fault, *, session: str | None = None, call: int = 1) -> None:
        """Make a session's ``call``-th model call fail once with ``fault``.

        The fault answers that call's next attempt instead of the model: over HTTP in
        the wire's own shape (a 429 with ``Retry-After``, a 5xx, a connection cut after
        some chunks, an answer that starts late), in process as the
        [`ReplayedModelError`][pytest_dsh_replay.ReplayedModelError] a failed call raises.
        The attempt is not a call: nothing is logged and the recording's cursor stays, so
        the retry gets the recorded answer and the log check is unchanged. Faults queued
        for one call happen on its successive attempts, in the order injected; a fault
        that never happened fails the test at its end
        ([docs/recording.md#faults](../recording.md#faults)).

        Args:
            fault: A [`Fault`][pytest_dsh_replay.Fault] (``Fault.rate_limit(...)``, ...).
            session: The live session's id (the ``session_id`` it calls with, its
                ``x-dsh-session-id`` or dsh runtime header); ``None``: the primary, the
                first session that calls the model.
            call: Which of the session's calls, from 1; faulted attempts are not counted.

        Raises:
            FaultError: ``fault`` is no ``Fault``, ``session`` no string or ``None``,
                ``call`` no integer >= 1.
        """
        faults = self._recorder.faults
        assert faults is not None  # every run's recorder has its queue (_logged_run)
        faults.inject(fault, session=session, call=call)

    def _check_faults(self) -> None:
        """Fail when injected faults never happened (the code made fewer attempts)."""
        faults = self._recorder.faults
        unfired = [] if faults is None else faults.unfired()
        if unfired:
            raise FaultError(
                f"{len(unfired)} injected fault(s) never happened: "
                + "; ".join(unfired)
                + ". The code under test made fewer model calls (or attempts) than the "
                "faults were injected for"
            )

    def usage(self, session: str | None = None) -> UsageTotals:
        """The token usage and cost of this test's model calls so far.

        Read from the run's session logs: one call per model call made (replayed, or
        recorded under ``--dsh-record``), its tokens from the ``usage`` chunk it
        streamed, its price from the optional ``genai-prices`` package for the model the
        client asked for ([docs/checks.md#usage](../checks.md#usage)).

        Args:
            session: A live session id: that session's calls only; ``None``: every
                session's.

        Returns:
            The [`UsageTotals`][pytest_dsh_replay.UsageTotals]: ``calls``,
            ``input_tokens`` (cached ones included), ``output_tokens`` (reasoning
            included), ``reasoning_tokens``, ``cached_tokens``, and ``cost_usd`` (US
            dollars; ``None`` when ``genai-prices`` is not installed or does not know a
            call's model).

        Raises:
            UnknownSessionError: No session of this run has the id ``session``.
        """
        from .usage import totals

        if self._runtime.source is not None:
            return totals(self._runtime.logs(), session)
        return totals(self.sessions.sessions(), session)

    def redacted_sessions(self) -> list[SessionLog]:
        """Every session of `sessions` as a recording would write it.

        Secrets are redacted (`redactor` and the redact hooks) and the working
        directory is ``{{cwd}}``.

        Returns:
            Objects with ``.header`` and ``.events``, in scenario order: replaying, the
            order of the recorded sessions they replay
            ([docs/checks.md#session-order](../checks.md#session-order)); recording, the
            order of the files the recording keeps or writes (a re-record of unchanged
            behaviour keeps the previous files and their numbering,
            [docs/checks.md#unchanged](../checks.md#unchanged)).
        """
        if self.mode == "record":
            return self._recorded_view()
        if self._runtime.source is not None:
            live: Sequence[SessionLike] = self._runtime.logs()
        else:
            live = self._with_late_parents(self.sessions.sessions())
        return [self._redacted(s.header, s.events) for s in self._in_recorded_order(live)]

    def _recorded_view(self) -> list[SessionLog]:
        """Record mode: the sessions in the order of the files the recording will hold.

        The previous recording's order when this run is the same behaviour (its files
        are kept), else the order a new recording writes (primary, then the children by
        creation time); the creation order of the store when no single primary exists
        (nothing can be written then).
        """
        try:
            logs = self._written_logs()
        except RecordingError:  # not exactly one primary: nothing would be written
            return [self._redacted(s.header, s.events) for s in self.sessions.sessions()]
        pairing = self._pairing(logs)
        return logs if pairing is None else [logs[k] for k in pairing]

    def _in_recorded_order(self, sessions: Sequence[_S]) -> list[_S]:
        """``sessions`` in the order of the recorded sessions they replay, never by arrival.

        A live session bound to a recorded one takes that session's place in the
        scenario (``session.jsonl``, ``session.1.jsonl``, ...); the others follow in the
        order given (creation order). Children started at once may reach the model in
        either order, so their creation order varies between runs; the recording's does
        not ([docs/checks.md#session-order](../checks.md#session-order)).
        """
        bindings = self._bindings()
        if not bindings or self.scenario is None:
            return list(sessions)
        place = {script.file: n for n, script in enumerate(self.scenario.scripts)}
        last = len(place)

        def rank(indexed: tuple[int, _S]) -> tuple[int, int]:
            n, session = indexed
            binding = bindings.get(session.header.id)
            return (place.get(binding.file, last) if binding is not None else last, n)

        return [session for _, session in sorted(enumerate(sessions), key=rank)]

    # --- checks ------------------------------------------------------------------------

    def assert_consumed(self) -> None:
        """Check that every recorded model call was used (replay mode; no-op in record mode).

        Raises:
            ReplayConsumptionError: Some bound session left calls unused, or a recorded
                session with calls was never bound; the message lists each one.
        """
        if self.mode != "record":
            self.model.assert_consumed()  # the model's (a hook may have wrapped it)

    def _redacted(self, header: SessionHeader, events: Sequence[Event]) -> SessionLog:
        """A session as it is written or shown: secrets redacted, cwd tokenized, hooks run."""
        return self._redaction().apply(header, events)

    def _take_in_process(self) -> DshReplayError | None:
        """The first binding or exhausted error a call in process met, taken once.

        What the plugin's end-of-test report leads with when the code under test did not
        let it reach the test ([docs/scenarios.md#binding](../scenarios.md#binding));
        `close` never raises it (a caller of its own got it from the stream).
        """
        raised = [] if self._replayer is None else self._replayer.take_raised()
        return raised[0] if raised else None

    def recorded_elsewhere(self) -> bool:
        """Whether the recording was written by other code than this plugin.

        This plugin writes every log in its committed form; a log in another form (the
        harness's full form, say) was written elsewhere, and its calls may be logged in
        a way the replayed-log check does not expect.
        """
        if self.scenario is None:
            return False
        for script in self.scenario.scripts:
            if script.path is None:
                return True  # a SQLite store: never written by this plugin
            try:
                data = script.path.read_bytes()
                if not in_committed_form(data, canonical_log(data, source=str(script.path))):
                    return True
            except (OSError, DshReplayError):
                return True
        return False

    def _bindings(self) -> dict[str | None, ReplayBinding]:
        """The replay's bindings (live id -> binding); ``{}`` when recording."""
        return {} if self._replayer is None else self._replayer.bindings

    def _with_late_parents(self, sessions: Sequence[_S]) -> list[_S | SessionLog]:
        """``sessions``, each one that got its parent after it started with that parent.

        A conversation that called before the session replaying its recorded parent
        existed (two conversations started at once, told apart by content) was created
        without a parent; the recording it binds to names one, and by the time its log
        is checked the live session replaying that parent is known
        ([docs/scenarios.md#binding](../scenarios.md#binding)). Such a session is given
        as a `SessionLog` with that parent in its header; the others as they are.
        """
        # One top-level session (every scenario but these) needs nothing: the common case
        if sum(s.header.parent_session is None for s in sessions) < 2:
            return list(sessions)
        bindings = self._bindings()
        if not bindings or self.scenario is None:
            return list(sessions)
        parents = {s.recorded_id: s.parent_session for s in self.scenario.scripts}
        live_of = self.bound_ids()
        late: dict[str, str] = {}  # live id -> the parent it got late
        for session in sessions:
            header = session.header
            binding = bindings.get(header.id)
            recorded_parent = parents.get(binding.recorded_id) if binding is not None else None
            parent = live_of.get(recorded_parent) if recorded_parent else None
            if header.parent_session is None and parent is not None and parent != header.id:
                late[header.id] = parent
        if not late:
            return list(sessions)
        depths = _late_depths(late, {s.header.id: s.header for s in sessions})
        out: list[_S | SessionLog] = []
        for session in sessions:
            header = session.header
            parent = late.get(header.id)
            depth = depths[header.id]
            if parent is None and depth == (header.delegation_depth or 0):
                out.append(session)
                continue
            meta = {} if parent is None else child_meta(parent, None)
            fields = {**header.to_json(), **meta, "delegationDepth": depth}
            out.append(SessionLog(SessionHeader.from_json(fields), list(session.events)))
        return out

    def bound_ids(self) -> dict[str, str]:
        """``{recorded id: live id}`` of the sessions this replay bound (empty when recording).

        A replayed answer that names a recorded session (a parent told its child's id)
        names the live session that replays it; the log check, transcripts and
        ``.jsonl`` snapshots count the one as the other.
        """
        bindings = self._bindings()
        return {b.recorded_id: key for key, b in bindings.items() if key and b.recorded_id}

    def _redaction(self) -> Redaction:
        return Redaction(self.redactor, self.redact_hook, self.redact_header_hook)

    def _written_logs(self) -> list[SessionLog]:
        """The sessions the code under test wrote, redacted, in scenario order.

        With [`use_sessions`][pytest_dsh_replay.DshReplay.use_sessions], the dsh runtime's logs.
        """
        if self._runtime.source is not None:
            return [self._redacted(log.header, log.events) for log in self._runtime.logs()]
        return [
            self._redacted(s.header, s.events) for s in order_sessions(self.sessions.sessions())
        ]

    def _check_logs(self) -> None:
        """Compare the logs of this replayed run with the recording (replay mode).

        Every session of `sessions` is compared: the ones the code under test
        wrote and the ones the model created for its calls, since the model logs each
        call's conversation (system prompt and tools, the new messages, the chunks) the
        same way in both modes. Sessions are paired with recorded logs by the model's
        bindings (then by order), normalized (ids, times, the working directory) and
        compared event by event. Does nothing when the run wrote no session, or for a
        SQLite scenario (no per-session file).

        Raises:
            LogMismatchError: The first difference, with an event-level report and the
                command that re-records the scenario.
        """
        if self.mode != "replay" or self.scenario is None:
            return
        if self._runtime.source is not None:
            self._check_runtime_logs()
            return
        recorded = [s for s in self.scenario.scripts if s.path is not None]
        files = len(recorded) == len(self.scenario.scripts)  # not a SQLite scenario's
        if files and self._passes_by_reference(recorded):
            return
        self._recorder.close_open_calls()
        live = self._in_recorded_order(self._with_late_parents(self.sessions.sessions()))
        if not live or not files:
            return  # no model call and no session, or no per-session file to compare with
        pairs = self._paired(live, recorded)
        logs = [(script.file, self._recorded_log(script), session) for script, session in pairs]
        headers = [s.header for s in recorded]
        live_headers = [s.header for s in live]
        # The digests first: equal normalized forms are no difference; only unequal
        # ones are diffed, for the verdict and today's message (docs/checks.md#log-check).
        forms = self._recorded_forms(logs, headers)
        if forms_agree(forms, logs, live=live_headers, aliases=self.bound_ids()):
            return
        self._raise_first_difference(
            logs,
            headers,
            live_headers,
            diff_logs,
            lambda file: (
                "the replayed session log differs from the recording "
                f"{self.path / file if self.path.is_dir() else self.path}:\n"
            ),
        )

    def _passes_by_reference(self, recorded: list[SessionScript]) -> bool:
        """Whether the log check passes by reference, its sessions left unbuilt.

        See [docs/checks.md#by-reference](../checks.md#by-reference): every session
        holds only replayed calls that streamed their entries to the end, their logs are
        worked out by the recorder without being built, and they agree with the
        recording (event by event on the recording's first check in the run, by their
        normalized forms on later ones). ``False`` says nothing: the full check runs,
        for its verdict and its message. ``recorded``: the scenario's sessions, each
        with its file.
        """
        references = []
        sessions = self.sessions.sessions()
        if any(isinstance(s, SessionLog) for s in self._with_late_parents(sessions)):
            return False  # a header told late: the full check compares it as it ends up
        for session in sessions:
            reference = self._recorder._by_reference(session)
            if reference is None:
                return False
            references.append(reference)
        live = self._in_recorded_order(references)
        if not live or len(live) != len(recorded):
            return False
        pairs = self._paired(live, recorded)
        headers = [s.header for s in recorded]
        live_headers = [r.header for r in live]
        aliases = self.bound_ids()
        segments = [(ref.header, ref.segments) for _, ref in pairs]
        # The recording's form made once from the lines its load parsed, compared from
        # its first check, its runs taken by identity; a difference runs the full check.
        made = self._kept_forms(recorded)
        if made is not None:
            if made[0] != log_forms(segments, live_headers, aliases, segmented=True, runs=made[1]):
                return False
        else:
            # Without kept lines: a recording's first check compares events (one pass
            # over both sides), later ones the digests, kept with the run's scenarios.
            logs = [(script.file, self._recorded_log(script), ref) for script, ref in pairs]
            forms = self._recorded_forms(logs, headers)
            if forms is None:
                if not logs_agree(
                    logs, recorded=headers, live=live_headers, compare=diff_logs, aliases=aliases
                ):
                    return False
            elif forms != log_forms(segments, live_headers, aliases, segmented=True):
                return False
        if not all(self._recorder._adopt(reference) for reference in references):
            return False  # never on the test's own thread: compare in full
        self._recorder.forget_finished_calls()
        return True

    def _paired(
        self, live: Sequence[_S], recorded: list[SessionScript]
    ) -> list[tuple[SessionScript, _S]]:
        """Each live session with the recorded session it is compared with, in file order.

        Bound sessions with what they replay, the others by order (top-level first, then
        creation order).

        Raises:
            LogMismatchError: Another number of sessions than the recording's.
        """
        by_file = {s.file: s for s in recorded}
        bound = {key: by_file.get(b.file) for key, b in self._bindings().items() if key is not None}
        pairs: list[tuple[SessionScript, _S]] = []
        # Top-level first, then creation order (ids are random and times can tie).
        free_live = sorted(live, key=lambda s: s.header.parent_session is not None)
        free_recorded = list(recorded)
        for session in list(free_live):
            script = bound.get(session.header.id)
            if script is not None and script in free_recorded:
                pairs.append((script, session))
                free_live.remove(session)
                free_recorded.remove(script)
        if len(free_live) != len(free_recorded):
            raise LogMismatchError(
                f"this run wrote {len(live)} session log(s), the recording {self.path} has "
                f"{len(recorded)}"
            )
        pairs.extend(zip(free_recorded, free_live, strict=True))
        pairs.sort(key=lambda pair: recorded.index(pair[0]))
        return pairs

    def _recorded_forms(
        self, logs: Sequence[tuple[str, SessionLog, SessionLike]], headers: list[SessionHeader]
    ) -> tuple[tuple[bytes, ...], ...] | None:
        """The recorded side's normalized forms, kept with the run's cached recording.

        Made once per recording per run, from its second check on (the first one is a
        full comparison, so a recording one test replays costs nothing more); ``None``
        without a cache, or on that first check.
        """
        if self._cache is None:
            return None
        recorded = tuple(log for _, log, _ in logs)
        return self._cache.derived((*recorded, *headers), lambda: log_forms(recorded, headers))

    def _kept_forms(
        self, recorded: list[SessionScript]
    ) -> tuple[tuple[tuple[bytes, ...], ...], RunTexts] | None:
        """The recording's forms and runs (`lines_forms`), made once per loaded scenario.

        From the log lines the run's cache kept when it loaded the scenario
        ([docs/checks.md#by-reference](../checks.md#by-reference)); ``None`` without a
        cache, for a log whose lines were not kept, or when a form cannot vouch for its
        values.
        """
        cache = self._cache
        if cache is None:
            return None
        kept = []
        for script in recorded:
            lines = cache.kept_lines(_log_path(script))
            if lines is None:
                return None
            kept.append(lines)
        entries = [script.entries for script in recorded]
        return cache.derived(
            (*kept, *recorded),
            lambda: lines_forms(
                [(k.header, k.lines, k.source, e) for k, e in zip(kept, entries, strict=True)],
                [k.header for k in kept],
            ),
            now=True,
        )

    def _recorded_log(self, script: SessionScript) -> SessionLog:
        """The recorded log of ``script``, through the run's cache when there is one.

        ``script`` belongs to a scenario with a file per session.
        """
        path = _log_path(script)
        return read_session_log(path) if self._cache is None else self._cache.recorded_log(path)

    def _raise_first_difference(
        self,
        logs: Sequence[tuple[str, SessionLog, SessionLike]],
        recorded: list[SessionHeader],
        live: list[SessionHeader],
        compare: Comparison,
        heading: Callable[[str], str],
    ) -> None:
        """Raise the first difference of ``logs`` (``(file, recorded log, live log)``).

        Raises:
            LogMismatchError: ``heading(file)`` and the event-level report.
        """
        found = first_difference(
            logs,
            recorded=recorded,
            live=live,
            compare=compare,
            redaction=self._redaction(),
            aliases=self.bound_ids(),
        )
        if found is not None:
            file, diff = found
            line = None
            if diff.index is not None and self.path.is_dir():
                events = next(len(log[1]) for name, log, _ in logs if name == file)
                line = event_line(self.path / file, diff.index, events)
            report = heading(file) + describe_difference(diff, line=line)
            recorded_log, live_log = next((r, a) for name, r, a in logs if name == file)
            self._drift = drift_of(  # for a picture of it (docs/guide/picture.md#drift)
                file,
                diff,
                recorded_log,
                live_log,
                redaction=self._redaction(),
                report=report,
                headers=(recorded, live),
                aliases=self.bound_ids(),
            )
            raise LogMismatchError(report)

    def _check_runtime_logs(self) -> None:
        """Compare the runtime's logs of this replay with the recording, as the model saw them."""
        assert self.scenario is not None
        recorded = list(self.scenario.scripts)
        try:
            live = self._runtime.logs()
        except DshReplayError as err:
            raise LogMismatchError(
                f"the dsh runtime's logs of this run cannot be read: {err}"
            ) from None
        if len(live) != len(recorded) or any(s.path is None for s in recorded):
            raise LogMismatchError(
                f"the dsh runtime wrote {len(live)} session log(s) in this run, the recording "
                f"{self.path} has {len(recorded)}"
            )
        sources = {script.file: str(log.path) for script, log in zip(recorded, live, strict=True)}

        def compare(
            file: str,
            expected: tuple[SessionHeader, Sequence[Event]],
            actual: tuple[SessionHeader, Sequence[Event]],
            *,
            expected_normalizer: Normalizer,
            actual_normalizer: Normalizer,
        ) -> LogDifference | None:
            return compare_model_views(
                file,
                expected,
                actual,
                expected_normalizer=expected_normalizer,
                actual_normalizer=actual_normalizer,
                actual_source=sources[file],
            )

        self._raise_first_difference(
            [  # logs() orders the live logs by the recording they replay
                (script.file, self._recorded_log(script), log)
                for script, log in zip(recorded, live, strict=True)
            ],
            [s.header for s in recorded],
            [log.header for log in live],
            compare,
            lambda file: (
                "the dsh runtime's session log of this replay shows the model "
                f"something else than the recording {self.path / file} (compared: messages, "
                "request settings and served chunks per session):\n"
            ),
        )

    def _save(self) -> list[Path]:
        """Write the recorded sessions as the scenario, atomically (record mode).

        A re-record of unchanged behaviour is stable: when the new logs equal the
        previous recording's after normalization (ids, times, the working directory, as
        the replayed-log check compares them), the directory holds nothing else and its
        logs are in the committed form, nothing is written and `unchanged` is set,
        so the files keep their bytes, ids and times.

        Returns:
            The written log files (the previous ones when `unchanged`).

        Raises:
            RecordingError: The test wrote no session, or not exactly one primary, or the
                directory cannot be written.
        """
        self._recorder.close_open_calls()
        if self._runtime.source is not None:
            return self._save_runtime_logs()
        sessions = self.sessions.sessions()
        if not sessions:
            raise RecordingError(
                f"nothing to record for {self.path}: the test made no model call through "
                "dsh_replay.model and created no session in dsh_replay.sessions"
            )
        logs = self._written_logs()
        kept = self._unchanged(logs)
        if kept is not None:
            self.unchanged = True
            return kept
        return write_scenario(self.path, logs)

    def _split(self) -> NewSplit:
        """``"new"`` mode: the run's sessions as replays of recorded ones, or new ones."""
        if self._new_split is None:
            assert self._new is not None
            assert self.scenario is not None
            self._recorder.close_open_calls()
            anonymous = self._recorder._anonymous
            self._new_split = split_sessions(
                self.scenario.scripts,
                self.sessions.sessions(),
                {anonymous if key is None else key: b for key, b in self._bindings().items()},
                {anonymous if key is None else key for key in self._new.fresh},
            )
        return self._new_split

    def check_recorded_calls(self) -> None:
        """``"new"`` mode: the recorded calls were made as recorded (a replay's checks).

        Every recorded call was made
        ([`assert_consumed`][pytest_dsh_replay.DshReplay.assert_consumed]), and each
        replayed session's log starts with its recording's events exactly (normalized as
        the replayed-log check compares them): a recorded call whose request drifted is
        not recorded again ([docs/recording.md#record-new](../recording.md#record-new)).
        Does nothing in the other modes.

        Raises:
            ReplayConsumptionError: A recorded call was not made.
            LogMismatchError: The first difference in the recorded part of a log.
        """
        if self.mode != "new" or self.scenario is None:
            return
        self.assert_consumed()
        split = self._split()
        logs: list[tuple[str, SessionLog, SessionLike]] = []
        continued: set[str] = set()
        for script, session in split.pairs:
            recorded = self._recorded_log(script)
            head = SessionLog(session.header, list(session.events[: len(recorded.events)]))
            logs.append((script.file, recorded, head))
            if continues_closed_turn(recorded.events, session.events):
                continued.add(script.file)
        self._raise_first_difference(
            logs,
            [s.header for s in self.scenario.scripts],
            [s.header for s in self.sessions.sessions()],
            diff_logs,
            lambda file: (
                f"a recorded call of {self.path / file} was not made as recorded "
                "(--dsh-record=new records only the calls past a recording and never "
                "changes a recorded one)"
                + (f"; {CONTINUED_TURN}" if file in continued else "")
                + ":\n"
            ),
        )

    def _save_appended(self) -> list[Path]:
        """``"new"`` mode: append the new calls and sessions to the recording.

        Sets `appended_calls`, and `unchanged` when nothing is new (nothing written).
        """
        from .._scripts.appending import append_scenario

        assert self.scenario is not None
        split = self._split()
        pairs = [
            (script.file, self._recorded_log(script), self._redacted(s.header, s.events))
            for script, s in split.pairs
        ]
        names = {
            session.header.id: script.recorded_id
            for script, session in split.pairs
            if script.recorded_id and session.header.id != script.recorded_id
        }
        found = appended_logs(
            pairs,
            [self._redacted(s.header, s.events) for s in split.new],
            names,
            max(script.created_at for script in self.scenario.scripts),
        )
        self.appended_calls = found.calls
        if found.empty:
            self.unchanged = True
            return []
        return append_scenario(self.path, found.appended, found.children)

    def _save_runtime_logs(self) -> list[Path]:
        """Write the dsh runtime's logs of this run as the scenario (record mode)."""
        assert self._runtime.source is not None
        root, session_id = self._runtime.source
        try:
            logs = self._written_logs()
        except DshReplayError as err:
            raise RecordingError(
                f"nothing to record for {self.path}: the dsh runtime's session {session_id!r} "
                f"cannot be read from the sessions root {root}: {err}"
            ) from None
        kept = self._unchanged(logs)
        if kept is not None:
            self.unchanged = True
            return kept
        return write_scenario(self.path, logs)

    def _comparison(self) -> Comparison:
        """How this run's logs compare with a recording: the runtime's as the model saw them."""
        return compare_model_views if self._runtime.source is not None else diff_logs

    def _unchanged(self, logs: Sequence[SessionLog]) -> list[Path] | None:
        """The previous recording's files when they hold exactly ``logs``, else ``None``."""
        if self.scenario is None or self._refresh:
            return None
        return unchanged_recording(self.path, logs, self._comparison())

    def _pairing(self, logs: Sequence[SessionLog]) -> list[int] | None:
        """Which of ``logs`` each previous file holds, when this run is unchanged."""
        if self.scenario is None:
            return None
        return recorded_pairing(self.path, logs, self._comparison())

    def finish(self) -> list[Path]:
        """Run the end-of-test work of a passing test.

        Replay mode: the first replay error an HTTP call met (if any), then
        [`assert_consumed`][pytest_dsh_replay.DshReplay.assert_consumed], then the
        replayed-log check (when `compare_logs`). Record mode: the recording is written
        (atomically; a re-record of unchanged behaviour keeps the files as they are, and
        `unchanged` says so), unless an HTTP call met an error, the recorder refused a live
        model's chunk, or the live model could not be reached: then that error is raised and
        nothing is written.

        Returns:
            The files written (record mode), else ``[]``.

        Raises:
            DshReplayError: A check failed or the recording could not be written.
        """
        if self.mode == "record":
            problem = self._take_problem()  # nothing is written after a failed call
            if problem is not None:
                raise problem
            self._check_faults()
            return self._save()
        if self.mode == "new":
            problem = self._take_problem()
            if problem is not None:
                raise problem
            self._new_split = None  # a fixture's teardown may have made calls since a check
            self.check_recorded_calls()
            return self._save_appended()
        errors = self._http.take_errors()
        if errors:
            raise errors[0]  # the root cause: unused calls would only be its echo
        self._check_faults()
        self.assert_consumed()
        if self.compare_logs:
            self._check_logs()
        return []
