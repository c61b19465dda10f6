"""One test's run of the ``dsh_replay`` fixture, from set-up to teardown (pytest-free).

`start` resolves the test's scenario and opens it for replay or for recording,
counting what the summary reports; `check_replayed`, `check_recorded`,
`failed_call`, `end_recording` and `close` run the end-of-test work
and return the failure text, if any. The plugin supplies what only pytest has (the
temporary base, the redact hooks, the live model) as callables, and turns
`ScenarioUnavailable` and the returned texts into test failures.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .._errors import DshReplayError, RecordingExpiredWarning

if TYPE_CHECKING:
    from .._fixture.dsh_replay import DshReplay
    from .._format.events import Event
    from .._scripts.loading import ScenarioCache
    from .._store.atomic import Recovery
    from .._store.lock import RecordingLock
    from .age import Expiry
    from .collected import CollectedTest
    from .suite import Redaction, SuiteState

__all__ = [
    "RecordedSession",
    "RecordedSessions",
    "ScenarioUnavailable",
    "check_appended",
    "check_recorded",
    "check_replayed",
    "close",
    "end_recording",
    "failed_call",
    "recorded_calls",
    "snapshot_drift",
    "start",
]


class RecordedSession(Protocol):
    """What `recorded_calls` reads of a recorded session."""

    @property
    def events(self) -> Sequence[Event]:
        """The session's events."""
        ...

    @property
    def seed_length(self) -> int:
        """How many leading events a fork inherited."""
        ...


class RecordedSessions(Protocol):
    """What `recorded_calls` reads of a store (a ``SessionStore``)."""

    def sessions(self) -> Iterable[RecordedSession]:
        """Every session."""
        ...


class ScenarioUnavailable(DshReplayError):
    """A test cannot get its scenario; the message is the whole text shown to the user.

    Raised at set-up for a refused layout, a missing recording, a recording that does
    not load, or a recording that cannot be prepared.
    """


def start(
    test: CollectedTest,
    state: SuiteState,
    *,
    layout_problem: str | None,
    workbase: Callable[[], Path],
    redaction: Callable[[], Redaction],
    live: Callable[[Path], object],
    recorders: Iterable[CollectedTest],
) -> DshReplay:
    """Open the test's scenario for replay, or prepare to record it.

    Args:
        test: The test that requested the fixture.
        state: The run's state; its counts (replayed, missing, broken), the scenarios
            used and the shared scenario cache are updated here.
        layout_problem: Why collection refused this test's scenario, if it did.
        workbase: Makes the run's temporary base directory (called once per run).
        redaction: Makes the redactor and the redact hooks (called once per run).
        live: Gives the live model that records the scenario at the given path.
        recorders: The collected tests that record (read only for a missing recording
            of a replay-only test, to name the test that records it).

    Returns:
        The test's [`DshReplay`][pytest_dsh_replay.DshReplay], in ``"record"`` mode when the
        test records under ``--dsh-record``, else in ``"replay"`` mode.

    Raises:
        ScenarioMarkerError: The test's ``dsh_scenario`` marker is broken.
        ScenarioUnavailable: The scenario's name was refused (not a directory strictly
            inside the snapshot root; [docs/limits.md#paths](../limits.md#paths)), its
            marker's ``pace`` is not a factor >= 0, the
            layout was refused, the recording is missing or does not load, or it cannot be
            recorded (another process records it right now,
            [docs/recording.md#one-recorder](../recording.md#one-recorder); the place is not
            writable).
    """
    from .._fixture.dsh_replay import DshReplay
    from .messages import cannot_record, does_not_load, missing_recording, record_command
    from .pace import PaceError, replay_pace
    from .scenarios import closest_scenario, compare_logs, resolved_root, snapshot_root

    path, expired, recording, appending = _plan(test, state)
    try:
        pace = replay_pace(test, state)  # docs/scenarios.md#pacing
    except PaceError as err:
        raise ScenarioUnavailable(str(err)) from None
    _first_use(state, path)
    state.roots.add(resolved_root(state, snapshot_root(test, state)))
    if state.workbase is None:
        state.workbase = workbase()
    state.runs += 1
    workdir = state.workbase / str(state.runs)  # created on first use, if ever
    if state.redaction is None:
        state.redaction = redaction()
    redactor, redact_hook, redact_header_hook = state.redaction
    if layout_problem is not None:
        raise ScenarioUnavailable(layout_problem)
    # The command that re-records the scenario (quoted by appending, by the replay's
    # errors and by a recording that does not load) and the one that appends are made at
    # most once each; both may look for the recording test in `recorders`.
    recorders = _ReadOnce(recorders)
    rerecord = _once(
        lambda: record_command(test, path, state.modes.to_record(exists=True), state, recorders)
    )
    if recording or appending:
        if appending and expired is not None:
            _replaying_expired(test, state, path, expired, recorders)
        lock, unlocked = _hold(test, path)  # before the live model is asked for
        try:
            opened = (
                functools.partial(DshReplay.append, rerecord=rerecord)
                if appending
                else functools.partial(DshReplay.record, refresh=expired is not None)
            )
            replay = opened(
                path,
                live=live(path),
                workdir=workdir,
                redactor=redactor,
                redact_hook=redact_hook,
                redact_header_hook=redact_header_hook,
                max_body_bytes=state.max_body_bytes,
            )
        except DshReplayError as err:
            lock.release()
            raise ScenarioUnavailable(cannot_record(test.nodeid, err)) from None
        except BaseException:
            lock.release()
            raise
        if unlocked is not None:
            replay.close()
            raise ScenarioUnavailable(cannot_record(test.nodeid, _unlockable(path, unlocked)))
        state.locks[test.nodeid] = lock  # released by end_recording
        if expired is not None and recording:
            state.refreshed += 1
        return replay
    if not path.exists():
        state.missing += 1
        command = record_command(test, path, state.modes.to_record(exists=False), state, recorders)
        near = closest_scenario(path)
        raise ScenarioUnavailable(
            missing_recording(test.nodeid, path, command, near, live_source=state.live_source())
        )
    if expired is not None:
        _replaying_expired(test, state, path, expired, recorders)
    try:
        replay = DshReplay.open(
            path,
            cache=_cache(state),
            pace=pace,
            workdir=workdir,
            compare_logs=compare_logs(test, state),
            redactor=redactor,
            redact_hook=redact_hook,
            redact_header_hook=redact_header_hook,
            max_body_bytes=state.max_body_bytes,
            rerecord=rerecord,
            append=_appending_command(test, path, state, recorders),
        )
    except DshReplayError as err:
        state.broken += 1
        raise ScenarioUnavailable(does_not_load(test.nodeid, err, rerecord())) from None
    state.replayed += 1
    return replay


def _appending_command(
    test: CollectedTest, path: Path, state: SuiteState, recorders: Iterable[CollectedTest]
) -> Callable[[], str] | None:
    """The command that appends what ``path`` lacks, if a record mode does that.

    ``None`` for a scenario that is no directory (only directories are appended to,
    [docs/recording.md#record-new](../recording.md#record-new)).
    """
    from .messages import record_command

    mode = state.modes.to_append()
    if mode is None or path.suffix:
        return None

    def command() -> str:  # "" when the test that records it is not in the run
        made = record_command(test, path, mode, state, recorders)
        return made if made.startswith("pytest ") else ""

    return _once(command)


def _plan(test: CollectedTest, state: SuiteState) -> tuple[Path, Expiry | None, bool, bool]:
    """The test's scenario, its recording's expiry, whether the test records it or appends.

    Raises:
        ScenarioMarkerError: The test's ``dsh_scenario`` marker is broken.
        ScenarioUnavailable: The scenario's name, or the marker's ``max_age``, was refused
            (before anything is touched or a live model is asked).
    """
    from .age import MaxAgeError
    from .scenarios import (
        ScenarioNameError,
        appends,
        max_age,
        records,
        refuse_recording_outside,
        scenario_path,
    )

    try:
        path = scenario_path(test, state)
        allowed = max_age(test, state)
        expired = None if allowed is None else _expiry(test, state, path, allowed)
        recording = records(test, state, path, expired=expired is not None)
        appending = appends(test, state, path, expired=expired is not None)
        if recording or appending:
            refuse_recording_outside(test, state, path)
    except (ScenarioNameError, MaxAgeError) as err:
        raise ScenarioUnavailable(str(err)) from None
    return path, expired, recording, appending


def _replaying_expired(
    test: CollectedTest,
    state: SuiteState,
    path: Path,
    expired: Expiry,
    recorders: Iterable[CollectedTest],
) -> None:
    """Warn that the test replays an expired recording, or fail it (``--dsh-strict-age``).

    Raises:
        ScenarioUnavailable: Under ``--dsh-strict-age``, with the warning's text.
    """
    from .messages import record_command

    command = record_command(test, path, state.modes.to_record(exists=True), state, recorders)
    text = f"{test.nodeid}: recording {path} is {expired.describe()}; re-record it: {command}"
    if state.strict_age:
        raise ScenarioUnavailable(f"{text} (--dsh-strict-age)")
    state.expired += 1
    warnings.warn(RecordingExpiredWarning(text), stacklevel=1)


def _cache(state: SuiteState) -> ScenarioCache:
    """The run's scenario cache, made on first use."""
    if state.cache is None:
        from .._scripts.loading import ScenarioCache

        # A scenario's files are examined once per run; a recording forgets what it
        # replaces (docs/scenarios.md#loaded-once).
        state.cache = ScenarioCache(recheck=False)
    return state.cache


def _expiry(
    test: CollectedTest, state: SuiteState, path: Path, allowed: timedelta
) -> Expiry | None:
    """The expiry of the test's recording at ``path``, or ``None``: young, absent, unreadable.

    The age is the recording's own: its primary's header ``createdAt``
    ([docs/recording.md#expiry](../recording.md#expiry)). A recording that does not load
    is left for the replay to report.
    """
    from .age import expiry
    from .scenarios import compare_logs

    if not path.exists():
        return None
    try:
        scenario = _cache(state).load(path, keep_logs=compare_logs(test, state))
    except DshReplayError:
        return None
    primary = next((s for s in scenario.scripts if s.primary), None)
    if primary is None:
        return None
    return expiry(primary.created_at, allowed, time.time_ns() // 1_000_000)


def _hold(test: CollectedTest, path: Path) -> tuple[RecordingLock, OSError | None]:
    """The lock on recording ``path``.

    See [docs/recording.md#one-recorder](../recording.md#one-recorder).

    Returns:
        The held lock; or, when its file cannot be created, a lock that holds nothing
        and the error ([`DshReplay.record`][pytest_dsh_replay.DshReplay.record] then says
        why the place cannot be written, which `start` reports first).

    Raises:
        ScenarioUnavailable: Another process records ``path`` (its id is named).
    """
    from .._errors import RecordingError
    from .._store.lock import RecordingLock, hold_recording
    from .messages import cannot_record

    try:
        return hold_recording(path, owner=test.nodeid), None
    except RecordingError as err:
        raise ScenarioUnavailable(cannot_record(test.nodeid, err)) from None
    except OSError as err:
        return RecordingLock(None), err


def _unlockable(path: Path, err: OSError) -> DshReplayError:
    """The recording of ``path`` cannot take its lock (``err``), though the place is writable."""
    from .._errors import RecordingError
    from .._store.lock import lock_path

    return RecordingError(
        f"cannot record into {path}: its lock file {err.filename or lock_path(path)} cannot "
        f"be created: {err.strerror or err}; nothing was recorded (the live model was not "
        "called) and the previous recording, if any, is kept"
    )


class _ReadOnce:
    """``source`` read at most once, on the first iteration; every iteration reads that.

    The test's commands (re-record, append) each look for the test that records its
    scenario; ``source`` is an iterator over the collected tests, made per test and read
    only on those paths.
    """

    def __init__(self, source: Iterable[CollectedTest]) -> None:
        self._source = source
        self._read: list[CollectedTest] | None = None
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[CollectedTest]:
        with self._lock:
            if self._read is None:
                self._read = list(self._source)
            return iter(self._read)


def _once(make: Callable[[], str]) -> Callable[[], str]:
    """``make``, called at most once whatever thread asks."""
    lock = threading.Lock()
    made: list[str] = []

    def once() -> str:
        with lock:
            if not made:
                made.append(make())
            return made[0]

    return once


def _first_use(state: SuiteState, path: Path) -> None:
    """Note the scenario at ``path`` as used this run; on its first test, recover first.

    What a killed writer left is put back or cleaned up once per run and scenario:
    beside it, its own leftovers only (a recording of it killed mid-swap, or killed at all:
    a lock file no process holds,
    [docs/recording.md#one-recorder](../recording.md#one-recorder); the parent is
    listed once per run, ``state.recovered``: another entry's leftovers there are never
    touched, [docs/recording.md#writing](../recording.md#writing)), and inside it (a
    ``dsh-replay fmt`` killed mid-write; before it enters ``state.used``, which the end of
    the run resolves only if needed). The scenario is looked at through the run's cache's listing
    (`ScenarioCache.listing`), which the test's load then reuses: only a leftover in it
    (or no directory) runs the recovery.
    """
    parent = str(path.parent)
    hidden = state.recovered.get(parent)
    if hidden is None:
        hidden = state.recovered[parent] = _hidden_names(path.parent)
    if hidden:  # (most runs: none)
        _recover_beside(state, path, hidden)
    key = str(path)
    if key not in state.used:
        from .._store.atomic import LEFTOVER

        # The cache's own listing, kept for the load that follows: a leftover in it
        # sends the scenario to recovery, and the load lists it again.
        cache = _cache(state)
        names = cache.listing(path)
        if names is None or any(LEFTOVER.fullmatch(name) for name in names if name[0] == "."):
            _recover_interrupted_writes(state, path)
            cache.forget(path)
        state.used.add(key)


def _hidden_names(directory: Path) -> set[str]:
    """The hidden entries of ``directory``: where leftovers and lock files are (one listing)."""
    try:
        return {name for name in os.listdir(directory) if name[:1] == "."}
    except OSError:
        return set()


def _recover_beside(state: SuiteState, path: Path, hidden: set[str]) -> None:
    """Recover the leftovers of ``path``'s own interrupted writes and remove its stale lock.

    ``hidden``: its directory's hidden names not dealt with yet (what is dealt with here
    leaves it); another entry's are never touched.
    """
    from .._store.atomic import LEFTOVER, recover
    from .._store.lock import remove_stale_lock

    own = {n for n in hidden if (m := LEFTOVER.fullmatch(n)) and m.group("name") == path.name}
    if own:
        hidden -= own
        _count_recovery(state, recover(path))
    lock = f".{path.name}.lock"
    if lock in hidden:
        hidden.discard(lock)
        state.cleaned += remove_stale_lock(path)


def _recover_interrupted_writes(state: SuiteState, directory: Path) -> None:
    """Put back or clean up what a killed writer left in ``directory`` (see `_first_use`).

    Only hidden entries named like the temporary files this package writes are touched
    (``.<name>.tmp-<12 hex>``, ``.<name>.old-<12 hex>``; see
    [docs/recording.md](../recording.md)); a directory that does not exist, or a scenario
    that is a file, has none. What could not be put back or removed (a read-only file
    system) is noted for the summary, with the OS error.
    """
    from .._store.atomic import recover_directory

    _count_recovery(state, recover_directory(directory))


def _count_recovery(state: SuiteState, recovery: Recovery) -> None:
    """Note what a recovery put back or removed, and what stays, for the summary."""
    state.cleaned += recovery.done
    state.stuck.extend(stuck.describe() for stuck in recovery.stuck)


def check_replayed(
    test: CollectedTest,
    state: SuiteState,
    replay: DshReplay,
    recorders: Iterable[CollectedTest],
) -> str | None:
    """The end-of-test check of a passing replayed test: every call used, logs as recorded.

    Args:
        test: The test.
        state: The run's state.
        replay: The test's replay (``"replay"`` mode).
        recorders: The collected tests that record (read only for a replay-only test).

    Returns:
        ``None`` when the check passed, else the failure text: the problem (a replay
        error an HTTP call met first, typed, see `met_over_http`), a note
        when another program wrote the recording and the logs differ, and the command
        that re-records the scenario (not after a bug of the endpoint, nor when the run
        met a race inside the dsh runtime, which re-recording cannot fix: then the races);
        a recorded log whose header has no session id is named as damaged, not as a
        change of behaviour.
    """
    from .._check.log_check import race_report
    from .._errors import EndpointError, FaultError, LogMismatchError, UnservedRouteError
    from .messages import (
        RECORDED_ELSEWHERE,
        met_in_process,
        met_over_http,
        record_command,
        rerecord,
        rerecord_unnamed,
    )

    unnamed: list[str] = []  # recorded logs whose header has no id: damaged, not a drift
    met = replay._take_problem()  # the root cause: unused calls would only be its echo
    unseen = replay._take_in_process()  # one the code under test caught, or in a thread
    if met is not None:
        if isinstance(met, EndpointError | UnservedRouteError):
            return met_over_http(met)  # the endpoint's bug or a route it lacks: not a recording's
        problem = met_over_http(met)
    elif unseen is not None:
        problem = met_in_process(unseen)
    else:
        try:
            replay.finish()
        except LogMismatchError as err:
            problem = str(err)
            if replay.recorded_elsewhere():
                problem += RECORDED_ELSEWHERE
            else:  # this plugin's recording always names its sessions
                unnamed = _unnamed_logs(replay)
        except FaultError as err:  # the test's injections, not the recording: no re-record
            return f"FaultError: {err}"
        except DshReplayError as err:
            problem = str(err)
        else:
            return None
    races = replay._runtime_races()
    if races:  # re-recording cannot fix a race (docs/limits.md#runtime-races)
        return race_report(problem, races)
    command = record_command(
        test, replay.path, state.modes.to_record(exists=True), state, recorders
    )
    if unnamed:
        return rerecord_unnamed(problem, unnamed, command)
    # A replay error the code under test swallowed already ends with the command.
    return problem if f"re-record: {command}" in problem else rerecord(problem, command)


def _unnamed_logs(replay: DshReplay) -> list[str]:
    """The recorded logs (their names in the scenario) whose header has no session id.

    Reading takes a missing (or not a string, or empty) ``id`` for ``""``
    ([docs/format.md#lenient-reading](../format.md#lenient-reading)); every recording
    this plugin writes names its sessions, so the replayed-log check's difference is
    the log's damage, not a change of the code under test.
    """
    scenario = replay.scenario
    if scenario is None:
        return []
    return [script.file for script in scenario.scripts if not script.recorded_id]


def check_appended(
    test: CollectedTest,
    state: SuiteState,
    replay: DshReplay,
    recorders: Iterable[CollectedTest],
) -> str | None:
    """The end-of-test check of a passing test under ``--dsh-record=new``.

    The recorded calls are checked as a replay checks them
    ([docs/recording.md#record-new](../recording.md#record-new)): a call the live model
    could not answer, an HTTP call's replay error, a recorded call not made, or a
    recorded call whose request drifted fails the test, with the command that
    re-records the whole scenario (``--dsh-record=all``); nothing is appended then.

    Returns:
        ``None`` when the check passed, else the failure text.
    """
    from .messages import met_over_http, record_command, rerecord

    problem = replay._take_problem()
    if problem is not None:
        return met_over_http(problem)
    try:
        replay.check_recorded_calls()
    except DshReplayError as err:
        command = record_command(
            test, replay.path, state.modes.to_record(exists=True), state, recorders
        )
        return rerecord(str(err), command)
    return None


def snapshot_drift(
    test: CollectedTest,
    state: SuiteState,
    replay: DshReplay,
    recorders: Iterable[CollectedTest],
) -> str:
    """Why a test's syrupy snapshot (its transcript, say) differs, and what to run.

    Called when the test body failed on a snapshot assertion (syrupy shows its diff;
    [docs/checks.md#transcripts](../checks.md#transcripts)). Replaying, the end-of-test
    check runs as it does after a passing body (`check_replayed`): a replay that differs
    from its recording is the cause, told with the command that re-records; one that matches
    it means the snapshot is out of date. Recording, nothing was written.

    Returns:
        The plugin's text, shown beside syrupy's diff.
    """
    from .messages import (
        record_command,
        snapshot_differs_while_recording,
        snapshot_drift,
        snapshot_out_of_date,
    )

    if replay.mode != "replay":
        return snapshot_differs_while_recording(
            record_command(test, replay.path, state.modes.to_record(exists=True), state, recorders)
        )
    problem = check_replayed(test, state, replay, recorders)
    if problem is not None:
        return snapshot_drift(problem)
    return snapshot_out_of_date(test.nodeid, replay.path, checked=replay.compare_logs)


def end_recording(nodeid: str, state: SuiteState, replay: DshReplay, *, passed: bool) -> str | None:
    """Write a recording after its test (body and teardown) passed, and count the outcome.

    Args:
        nodeid: The test's node id.
        state: The run's state; the recording (files and calls written, unchanged or
            not), or that it was not made or not saved (an old recording kept, or none
            there), is counted here.
        replay: The test's replay (``"record"`` mode).
        passed: Whether the test and every fixture teardown passed; if not, nothing is
            written and the previous recording stays.

    Returns:
        ``None``, or the failure text when the recording could not be written. Either
        way the test's lock on recording the scenario (taken by `start`) is
        released.
    """
    lock = state.locks.pop(nodeid, None)
    try:
        return _end_recording(nodeid, state, replay, passed=passed)
    finally:
        if lock is not None:
            lock.release()  # the recording is written or given up: another run may record


def _end_recording(
    nodeid: str, state: SuiteState, replay: DshReplay, *, passed: bool
) -> str | None:
    """`end_recording`, its lock held."""
    if not passed:
        if _has_recording(replay.path):
            state.kept += 1
        else:
            state.not_recorded += 1
        return None
    from .messages import not_written

    sidecars = _sidecars(replay.path)
    before = _identity(replay.path)
    try:
        files = replay.finish()
    except BaseException as err:
        _forget(state, replay.path)  # a failed write may have moved files
        if not isinstance(err, DshReplayError) and _identity(replay.path) not in (None, before):
            # Ctrl-C after the new recording took its place (its clean-up was cut short)
            state.written_interrupted.add(nodeid)
            logs, calls = len(replay.sessions.sessions()), recorded_calls(replay.sessions)
            state.recordings.append((str(replay.path), logs, calls, False, 0, ""))
            raise
        kept = _has_recording(replay.path)  # a failed write leaves what was there
        if kept:
            state.unwritten += 1
        else:
            state.unwritten_new += 1
        if not isinstance(err, DshReplayError):
            raise  # Ctrl-C mid-write: counted as not written, the run stops
        return not_written(nodeid, str(err), kept=kept)
    _forget(state, replay.path)
    if replay.mode == "new":
        state.appended.append((str(replay.path), replay.appended_calls, len(files)))
        return None
    guessed = replay.guessed_parents()
    removed = "" if replay.unchanged else ", ".join(sidecars)
    calls = recorded_calls(replay.sessions)
    state.recordings.append(
        (str(replay.path), len(files), calls, replay.unchanged, guessed, removed)
    )
    return None


def _sidecars(path: Path) -> list[str]:
    """The override sidecars in a scenario directory (a new recording replaces them)."""
    from .._scripts.scenario import looks_like_sidecar

    try:
        return sorted(name for name in os.listdir(path) if looks_like_sidecar(name))
    except OSError:
        return []


def _forget(state: SuiteState, path: Path) -> None:
    """Drop the run's cached copy of a scenario this run wrote.

    See [docs/scenarios.md#loaded-once](../scenarios.md#loaded-once).
    """
    if state.cache is not None:
        state.cache.forget(path)


def _identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path`` (``None``: nothing there): a replacement changes it."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _has_recording(path: Path) -> bool:
    """Whether a recording (even one that does not load) is at ``path``."""
    return os.path.lexists(path)


def recorded_calls(sessions: RecordedSessions) -> int:
    """The model calls recorded in a store's sessions (a fork's inherited calls left out).

    Args:
        sessions: A [`SessionStore`][pytest_dsh_replay.SessionStore] (or anything whose
            ``sessions()`` yields sessions with ``events`` and ``seed_length``).

    Returns:
        The number of finished calls: ``finish`` chunks after each session's seed.
    """
    return sum(
        1
        for s in sessions.sessions()
        for e in s.events[s.seed_length :]  # a fork's inherited calls are not its own
        if e["type"] == "assistant/chunk" and e["data"]["chunk"].get("type") == "finish"
    )


def failed_call(
    replay: DshReplay, raised: Callable[[], str], failure: BaseException | None = None
) -> str | None:
    """The failure text of a test whose body raised after a model call failed.

    Args:
        replay: The test's replay.
        raised: Renders the exception the body raised (an SDK's, usually).
        failure: That exception: a replay error of a call in process that reached the
            test as it is (or as its cause) needs no other report.

    Returns:
        ``None`` when no call met a replay error (or the body raised that very error)
        and, while recording, the live model was reached; else the typed error first,
        the body's exception under it. The error is then reported: `close` does not
        report it again, so the test fails once.
    """
    from .messages import call_failed_after

    problem = replay._take_problem()
    unseen = replay._take_in_process()
    if problem is not None:
        return call_failed_after(problem, raised())
    if unseen is None or _in_chain(unseen, failure):
        return None  # (the test met the error itself: its report is that)
    return call_failed_after(unseen, raised(), over_http=False)


def _in_chain(problem: BaseException, failure: BaseException | None) -> bool:
    """Whether ``failure`` is ``problem`` or was caused by it (``__cause__``/``__context__``)."""
    seen: set[int] = set()
    while failure is not None and id(failure) not in seen:
        if failure is problem:
            return True
        seen.add(id(failure))
        failure = failure.__cause__ or failure.__context__
    return False


def check_recorded(replay: DshReplay) -> str | None:
    """The end-of-test check of a recording test whose body passed.

    Returns:
        ``None``, or the failure text (`met_over_http`) when an HTTP
        call met a replay error or the live model could not be reached: the test fails
        once, in its body, and nothing is written.
    """
    from .messages import met_over_http

    problem = replay._take_problem()
    return None if problem is None else met_over_http(problem)


def close(replay: DshReplay) -> str | None:
    """Stop the model endpoint.

    Returns:
        ``None``, or the failure text (`met_over_http`): a replay error
        an HTTP call met (its client got a 400) and not reported yet, or that the live
        model could not be reached while recording.
    """
    from .messages import met_over_http

    try:
        replay.close()
    except DshReplayError as err:
        return met_over_http(err)
    return None
