"""What the plugin tells users when a test cannot replay or record, and how to fix it.

Each function returns the whole text the plugin shows (as a usage error or a test
failure without a traceback); the wording is part of the plugin's interface.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .modes import bad_record_mode

if TYPE_CHECKING:
    from .collected import CollectedTest
    from .modes import RecordMode
    from .suite import SuiteState

__all__ = [
    "HOW_TO_RECORD",
    "RECORDED_ELSEWHERE",
    "bad_record_mode",
    "call_failed_after",
    "calls_after_the_body",
    "cannot_record",
    "does_not_load",
    "endpoint_failed",
    "http_call_failed",
    "met_over_http",
    "missing_recording",
    "no_live_model",
    "not_a_live_model",
    "not_written",
    "record_command",
    "rerecord",
    "rerecord_unnamed",
    "snapshot_differs_while_recording",
    "snapshot_drift",
    "snapshot_out_of_date",
]

HOW_TO_RECORD: Final = (
    "--dsh-record needs a live model: set DSH_RECORD_BASE_URL, DSH_RECORD_API_KEY (and "
    "DSH_RECORD_MODEL to override the model requests ask for) for an OpenAI-compatible "
    "endpoint (this needs the openai package, the plugin's record extra: pip install "
    "openai), or implement the hook "
    "pytest_dsh_replay_live_model"
    "(config, scenario_path) in a conftest.py at the root of your tests"
)
"""Where ``--dsh-record`` gets its live model from (shown when it has none)."""

RECORDED_ELSEWHERE: Final = (
    "\n(this recording was not written by pytest-dsh-replay; one made by "
    "other code, such as the dsh harness's own, replays without this check: "
    "@pytest.mark.dsh_scenario(..., compare_logs=False))"
)
"""Appended to a log mismatch when another program wrote the recording."""


def no_live_model(path: Path, hooks: Sequence[str] = ()) -> str:
    """No hook and no ``DSH_RECORD_*`` variables give a live model to record ``path``.

    ``hooks``: where each ``pytest_dsh_replay_live_model`` implementation is defined
    (``file:line``); they all returned ``None``, which the message says first.
    """
    if hooks:
        return (
            f"no live model to record {path}: pytest_dsh_replay_live_model "
            f"({', '.join(hooks)}) returned None; return the live model (an object with "
            "stream(request, **options)), or None only to let the DSH_RECORD_* variables "
            "answer (none are set)"
        )
    return f"no live model to record {path}: {HOW_TO_RECORD}"


def not_a_live_model(live: object, path: Path) -> str:
    """A ``pytest_dsh_replay_live_model`` hook returned something that cannot stream."""
    return (
        f"pytest_dsh_replay_live_model returned {type(live).__qualname__} "
        f"({_short(live)}) to record {path}; expected a live model: an object with "
        "stream(request, **options) yielding dsh stream chunks, such as a ScriptedModel "
        "(ScriptedModel([Rule(Answer(...))]), not the Answer itself), or None"
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def record_command(
    test: CollectedTest,
    path: Path,
    mode: RecordMode,
    state: SuiteState,
    recorders: Iterable[CollectedTest],
) -> str:
    """The command that (re-)records ``path``, node ids quoted for any shell.

    Args:
        test: The test that replays ``path``.
        path: Its scenario.
        mode: The ``--dsh-record`` mode the command uses.
        state: The run's state.
        recorders: The collected tests that record (read only for a replay-only test).

    Returns:
        ``pytest --dsh-record=<mode> <node id>``, with ``--snapshot-update`` when the
        recording test or ``test`` requests a syrupy snapshot (a transcript is recorded
        with its scenario).
        A replay-only test (``record=False``) would only replay again under
        ``--dsh-record``: the command names the test that records the scenario instead
        (with that test's flags), or, when none was collected, the text says to run
        that test (`appending_command` then gives none).
    """
    recorder: CollectedTest | None = test
    if test.replay_only:
        from .scenarios import recording_test

        recorder = recording_test(path, recorders, state)
    if recorder is None:
        return (
            f"run the test that records {path} with --dsh-record={mode.value} (not in this "
            f"run; {test.nodeid} only replays it: dsh_scenario(..., record=False))"
        )
    flags = f"--dsh-record={mode.value}"
    if recorder.uses_snapshots or test.uses_snapshots:
        flags += " --snapshot-update"
    return f"pytest {flags} {shlex.quote(recorder.nodeid)}"


def missing_recording(
    nodeid: str,
    path: Path,
    command: str,
    near: Path | None = None,
    *,
    live_source: str | None = None,
) -> str:
    """A replayed test has no recording: where it looked and how to record one.

    Args:
        nodeid: The test.
        path: The scenario it looked for.
        command: The command that records it (`record_command`).
        near: The existing scenario whose name is closest to ``path``'s, if one is
            close (a mistyped name): the message asks whether it was meant.
        live_source: What already gives ``--dsh-record`` its live model (``"the
            pytest_dsh_replay_live_model hook"``, ``"DSH_RECORD_BASE_URL"``), or ``None``
            when nothing does: then the message says how to give one.

    Returns:
        The message: where it looked, ``did you mean`` when ``near`` is given, the
        record command, and where its live model comes from or how to give one.
    """
    guess = "" if near is None else f"  did you mean: {near}?\n"
    if live_source is not None:
        live = f"  (recording calls the live model that {live_source} gives)"
    else:
        live = (
            "  (recording calls the live model: set DSH_RECORD_BASE_URL and "
            "DSH_RECORD_API_KEY, and DSH_RECORD_MODEL to override the model, or implement "
            "the hook pytest_dsh_replay_live_model; see pytest --help, group dsh-replay)"
        )
    return (
        f"no recorded dsh scenario for {nodeid}\n"
        f"  looked at: {path}\n"
        f"{guess}"
        f"  record it: {command}\n"
        f"{live}"
    )


def cannot_record(nodeid: str, err: Exception) -> str:
    """A test's recording could not be prepared (``err`` says why)."""
    return f"cannot record the dsh scenario for {nodeid}:\n  {err}"


def does_not_load(nodeid: str, err: Exception, command: str) -> str:
    """A test's recording exists but does not load (``err`` names the file and line).

    ``command`` re-records it (`record_command`): a damaged recording is replaced whole,
    which ``--dsh-record=missing`` does not do. A log written by hand is fixed instead.
    An override sidecar (an `OverrideError`) is always written by hand, and a re-record
    would delete it with the rest of the directory: that one is fixed, never re-recorded.
    """
    from .._errors import OverrideError

    if isinstance(err, OverrideError):
        return (
            f"the dsh scenario for {nodeid} does not load:\n  {err}\n"
            "  fix the sidecar (the docs' Override sidecars section of the Scenarios "
            "page); re-recording would delete it with the old recording"
        )
    return (
        f"the dsh scenario for {nodeid} does not load:\n  {err}\n"
        f"  re-record it: {command}\n"
        "  (or, for a log written by hand, fix that line: the formats are in the docs' "
        "Session logs page)"
    )


def rerecord(problem: str, command: str) -> str:
    """An end-of-test check failed: the problem, then the command that re-records."""
    return f"{problem}\n(if the new behaviour is right, re-record: {command})"


def rerecord_unnamed(problem: str, files: Sequence[str], command: str) -> str:
    """A log mismatch of a recording whose header names no session (an empty ``id``).

    Every recording this plugin writes names its sessions: ``files`` were damaged or
    edited by hand, so the hint is to re-record, not that the behaviour changed.
    """
    return (
        f"{problem}\n(the recording's header has no session id ({', '.join(files)}): "
        "the log was damaged or edited by hand, not changed by the code under test; "
        f"re-record it: {command})"
    )


def snapshot_drift(problem: str) -> str:
    """A replayed test's snapshot differs, and so does the replay from its recording.

    ``problem`` is the end-of-test check's failure text, its re-record command included
    (`rerecord`): the snapshot shows a replay that the recording does not hold.
    """
    return f"the snapshot differs because the replay differs from its recording:\n{problem}"


def snapshot_out_of_date(nodeid: str, path: Path, *, checked: bool) -> str:
    """A replayed test's snapshot differs while the replay matches its recording.

    Args:
        nodeid: The test.
        path: Its scenario.
        checked: Whether the replayed-log check ran (``compare_logs``); without it the
            replay may differ from the recording unseen.
    """
    update = f"pytest --snapshot-update {shlex.quote(nodeid)}"
    if not checked:
        return (
            f"the snapshot differs from this replay of {path}, whose logs are not compared "
            "with the recording (compare_logs=False): if the recording is right, update "
            f"the snapshot: {update}"
        )
    return (
        f"the replay matches its recording {path} (every call used, the logs as recorded): "
        f"the snapshot is out of date, not the recording; update it: {update}"
    )


def snapshot_differs_while_recording(command: str) -> str:
    """A recording test's snapshot differs: nothing was written, the test failed."""
    return (
        "the snapshot differs from this recording run, so the test failed and nothing was "
        f"recorded; record the new behaviour with its snapshots: {command}"
    )


def endpoint_failed(problem: str) -> str:
    """The model endpoint met an unexpected exception: no re-record hint (it would not help)."""
    return (
        f"{problem}\n(this is a bug of the endpoint, not of the recording: an unexpected "
        "exception while answering an HTTP call; re-recording does not fix it)"
    )


def not_written(nodeid: str, problem: str, *, kept: bool) -> str:
    """A passing test's recording could not be saved; ``kept``: an old one stays."""
    outcome = (
        "the previous recording is kept"
        if kept
        else "there was no recording before, and there is none now"
    )
    return f"the recording of {nodeid} was not written: {problem}; {outcome}"


def http_call_failed(err: Exception) -> str:
    """A replay error an HTTP call met, shown at teardown, with the status its client got.

    That is 404 for a route the endpoint does not serve, else
    `REPLAY_ERROR_STATUS` (400).
    """
    from .._endpoint.endpoint import REPLAY_ERROR_STATUS
    from .._errors import UnservedRouteError

    status = 404 if isinstance(err, UnservedRouteError) else REPLAY_ERROR_STATUS
    return (
        f"{type(err).__name__}: {err}\n(a model call to the model endpoint met this error: "
        f"its client got a {status} with this message)"
    )


def met_over_http(err: Exception) -> str:
    """What made an HTTP call fail, shown once: the typed error first.

    A live model the recording could not reach (a
    [`RecordingError`][pytest_dsh_replay.RecordingError]) is shown as itself, an endpoint's bug
    (an [`EndpointError`][pytest_dsh_replay.EndpointError]) with the note of
    `endpoint_failed`, a replay error as `http_call_failed` shows it.
    """
    from .._errors import EndpointError, RecordingError

    if isinstance(err, RecordingError):
        return f"{type(err).__name__}: {err}"
    if isinstance(err, EndpointError):
        return endpoint_failed(http_call_failed(err))
    return http_call_failed(err)


def met_in_process(err: Exception) -> str:
    """A replay error a call in process met that never reached the test, shown once.

    The code under test caught it, or met it in another thread (a warning at most): the
    typed error is what the test fails with, first.
    """
    return (
        f"{type(err).__name__}: {err}\n(a model call in process met this error, and the "
        "code under test did not let it reach the test: it caught it, or met it in another "
        "thread)"
    )


def call_failed_after(err: Exception, raised: str, *, over_http: bool = True) -> str:
    """A test whose code raised (``raised``, as shown) after an HTTP call failed (``err``).

    `met_over_http` leads: the code's exception (an SDK's, usually) is only its
    echo, shown under it, with the error's text (which the SDK's message repeats from
    the response body) shown once: there it reads ``(the error above)``. Only the
    text's first line is looked for when the SDK's rendering split the rest.
    """
    met = met_over_http(err) if over_http else met_in_process(err)
    return (
        f"{met}\n\nthe code under test then raised (caused by the error "
        f"above):\n{_without_echo(raised, str(err))}"
    )


_ECHO_MIN = 40  # a shorter first line could be any text of the exception's
_SEE_ABOVE = "(the error above)"


def _without_echo(raised: str, text: str) -> str:
    """``raised`` with ``text`` (or its first line, if long enough) as ``(the error above)``."""
    if text and text in raised:
        return raised.replace(text, _SEE_ABOVE)
    first = text.split("\n", 1)[0]
    if len(first) >= _ECHO_MIN and first in raised:
        return raised.replace(first, _SEE_ABOVE)
    return raised


def calls_after_the_body(nodeid: str, path: Path, calls: int) -> str:
    """A recording not written: the test made model calls after its body ended."""
    return (
        f"{nodeid}: {calls} model call(s) were made after the test body ended (in a "
        f"fixture's teardown), so {path} was not recorded: a replay checks the calls when "
        "the body ends, and such a recording would fail it; make the calls in the test or "
        "in a fixture's set-up (see docs/guide/writing-tests.md#fixture)"
    )
