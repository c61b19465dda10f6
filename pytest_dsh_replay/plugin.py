"""The pytest plugin, registered through the ``pytest11`` entry point ``dsh_replay``.

Only pytest wiring: options and ini keys, the ``dsh_scenario`` marker, the fixtures, and
hooks that turn pytest objects into plain values and ask the pytest-free policy in
``_plugin``. The policy and the core are imported inside the hooks and fixtures that
need them, so loading the plugin costs next to nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion

    from ._fixture.dsh_replay import DshReplay
    from ._format.events import Event, JSONObject
    from ._plugin.collected import CollectedTest
    from ._plugin.suite import Redaction, RunScope, SuiteState

DEFAULT_SNAPSHOT_DIR: Final = "dsh_snapshots"
"""The snapshot root beside each test module when ``dsh_snapshot_dir`` is not set."""


@dataclass
class _Run:
    """One test's run: the fixture value it received, and whether its body passed.

    ``test`` is the test as the fixture read it at set-up (its marker looked up once):
    the end-of-test check reads the same values, not a second lookup.
    """

    replay: DshReplay
    test: CollectedTest
    passed: bool = False
    calls_in_body: int = 0  # a recording's model calls when its body ended


_STATE = pytest.StashKey["SuiteState"]()
_RECORDERS = pytest.StashKey[list[pytest.Item]]()  # the collected items that record
_RUN = pytest.StashKey[_Run]()
_LAYOUT_PROBLEM = pytest.StashKey[str]()
_TRANSCRIPT_PROBLEM = pytest.StashKey[str]()  # two tests would share a transcript file
_FAILED = pytest.StashKey[bool]()  # a phase of a test that requests dsh_replay failed
_PAGES = pytest.StashKey[Path]()  # --dsh-html's directory


def _parse_record_mode(value: str) -> str:
    """Validate ``--dsh-record``'s value (argparse ``type=``); the option keeps the value."""
    from ._plugin.modes import RECORD_MODES, RecordModeError

    try:
        return RECORD_MODES.parse(value).value
    except RecordModeError as err:
        raise pytest.UsageError(str(err)) from None


def _parse_pace(value: str) -> float:
    """Validate ``--dsh-pace``'s value (argparse ``type=``): a factor >= 0."""
    from ._plugin.pace import PaceError, parse_pace_option

    try:
        return parse_pace_option(value)
    except PaceError as err:
        raise pytest.UsageError(str(err)) from None


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register this plugin's hook specifications."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ``dsh-replay`` option group and its ini keys."""
    from ._plugin.modes import RECORD_MODES

    group = parser.getgroup("dsh-replay", "dsh-replay (replay and record dsh agent sessions)")
    group.addoption(
        "--dsh-record",
        action="store",
        nargs="?",
        const=RECORD_MODES.default.value,
        default=None,
        type=_parse_record_mode,
        dest="dsh_record",
        metavar=RECORD_MODES.metavar,
        help=RECORD_MODES.help,
    )
    group.addoption(
        "--dsh-fail-unused",
        action="store_true",
        default=False,
        dest="dsh_fail_unused",
        help="fail the run when a complete run (no -k, -m, deselection or early stop) "
        "leaves scenario directories under the snapshot root that no test used.",
    )
    group.addoption(
        "--dsh-strict-age",
        action="store_true",
        default=False,
        dest="dsh_strict_age",
        help="fail a test whose recording is older than its max age (dsh_max_age, or the "
        "dsh_scenario marker's max_age) instead of warning.",
    )
    parser.addini(
        "dsh_max_age",
        "the largest age of a recording before its replay warns (30d, 12h, 1d12h; read from "
        "the recording's own header time; default: none).",
        default="",
    )
    group.addoption(
        "--dsh-pace",
        action="store",
        default=0.0,
        type=_parse_pace,
        dest="dsh_pace",
        metavar="FACTOR",
        help="serve replayed chunks at their recorded times scaled by FACTOR (1: as "
        "recorded, 0.5: twice as fast; default 0: as fast as possible); a dsh_scenario "
        "marker's pace= wins.",
    )
    group.addoption(
        "--dsh-usage",
        action="store_true",
        default=False,
        dest="dsh_usage",
        help="print each dsh_replay test's model calls, tokens and cost (genai-prices) in "
        "the terminal summary.",
    )
    group.addoption(
        "--dsh-html",
        action="store",
        default=None,
        dest="dsh_html",
        metavar="DIR",
        help="write a picture of each replayed test's recording into DIR (one "
        "self-contained HTML page per test; a drift of the replayed log side by side).",
    )
    parser.addini(
        "dsh_compare_logs",
        "compare the session logs a replayed test writes with the recording (default: true).",
        type="bool",
        default=True,
    )
    parser.addini(
        "dsh_replay_max_body_bytes",
        "the largest request body, in bytes, the dsh_replay fixture's HTTP endpoint "
        "accepts; a larger one is answered 413 (default: 33554432, 32 MiB).",
        default="",
    )
    parser.addini(
        "dsh_snapshot_dir",
        "directory holding recorded dsh scenarios, relative to the ini file "
        f"(default: {DEFAULT_SNAPSHOT_DIR}/ beside each test module).",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and set up the plugin state."""
    config.addinivalue_line(
        "markers",
        "dsh_scenario(name_or_path=None, *, compare_logs=True, record=True, max_age=None, "
        "pace=None): "
        "the recorded dsh scenario the dsh_replay fixture uses: a name relative to "
        "dsh_snapshot_dir or an absolute path (default: derived from the test's name); "
        "compare_logs=False skips the replayed-log check; record=False makes the test "
        "replay even under --dsh-record (another test records the scenario); max_age "
        "(30d, 12h) warns when the recording is older (default: the dsh_max_age ini key); "
        "pace serves chunks at their recorded times scaled by it (default: --dsh-pace).",
    )
    config.addinivalue_line(
        "markers",
        "dsh_budget(*, max_calls=None, max_output_tokens=None, max_cost_usd=None): fail a "
        "dsh_replay test whose model calls go over these limits (the cost needs "
        "genai-prices).",
    )
    from ._plugin.age import parse_max_age
    from ._plugin.modes import RECORD_MODES
    from ._plugin.suite import SuiteState, body_cap

    try:
        max_body_bytes = body_cap(str(config.getini("dsh_replay_max_body_bytes")))
        max_age = parse_max_age(str(config.getini("dsh_max_age")), "the dsh_max_age ini key")
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    raw_root = str(config.getini("dsh_snapshot_dir")).strip()
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    try:
        compare_logs = bool(config.getini("dsh_compare_logs"))
    except (ValueError, pytest.UsageError) as err:  # (pytest 9 raises the latter itself)
        raise pytest.UsageError(f"dsh_compare_logs: {err}; expected true or false") from None
    config.stash[_STATE] = state = SuiteState(
        record=None
        if (mode := config.getoption("dsh_record")) is None
        else RECORD_MODES.parse(mode),
        ini_root=(base / raw_root) if raw_root else None,
        subset=bool(config.getoption("keyword") or config.getoption("markexpr")),
        compare_logs=compare_logs,
        fail_unused=bool(config.getoption("dsh_fail_unused")),
        max_body_bytes=max_body_bytes,
        live_source=lambda: _live_source(config),
        max_age=max_age,
        strict_age=bool(config.getoption("dsh_strict_age")),
        report_usage=bool(config.getoption("dsh_usage")),
        pace=float(config.getoption("dsh_pace")),
    )
    if (pages := config.getoption("dsh_html")) is not None:
        from ._errors import PictureError
        from ._report.pages import prepare_directory

        if not str(pages).strip():  # an unset variable (--dsh-html=$DIR): not the cwd
            raise pytest.UsageError("--dsh-html takes a directory, got an empty value")
        try:
            config.stash[_PAGES] = prepare_directory(config.invocation_params.dir / pages)
        except PictureError as err:
            raise pytest.UsageError(str(err)) from None
    if config.option.collectonly:
        # Nothing is asserted in a collect-only run, so no snapshot can be "unused";
        # syrupy (a dependency of this plugin) would fail `pytest --co` saying so.
        _no_unused_snapshots(config)
    if state.record is not None and not hasattr(config, "workerinput"):
        _check_live_model_available(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(), "dsh_replay_xdist")
    config.pluginmanager.register(_InterruptedRun(), "dsh_replay_interrupted")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Release the built-in live model's connection, and recording locks an interrupt left.

    A run interrupted in a test's body (Ctrl-C) skips that test's teardown hook, which
    releases its lock ([docs/recording.md#one-recorder](../recording.md#one-recorder)):
    its lock file is removed here instead.
    """
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    if state.env_model is not None:
        state.env_model.close()
    while state.locks:
        state.locks.popitem()[1].release()


class _XdistController:
    """Collect what each ``pytest-xdist`` worker used; only the controller decides."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        report = getattr(node, "workeroutput", {}).get("dsh_replay")
        if report is not None:
            _state(node.config).merge(report)


class _InterruptedRun:
    """An interrupted run (Ctrl-C) keeps every snapshot.

    See [docs/checks.md#transcripts](../checks.md#transcripts).

    It asserted only part of what it selected, so syrupy is told that nothing is unused
    before any ``pytest_sessionfinish`` (syrupy's deletes there under ``--snapshot-update``)
    runs: a wrapper, outside every plain implementation.
    """

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            _no_unused_snapshots(session.config)
        return (yield)


def _no_unused_snapshots(config: pytest.Config) -> None:
    """Tell syrupy that no snapshot of this run is unused: it deletes none, fails on none.

    For a run that asserts nothing or only part of what it selected: a collect-only run,
    one this plugin stops with a usage error after collection, and an interrupted one,
    where syrupy would otherwise take every snapshot not asserted for unused and, under
    ``--snapshot-update``, delete them.
    """
    if hasattr(config.option, "disable_unused_snapshots"):
        config.option.disable_unused_snapshots = True
    elif hasattr(config.option, "warn_unused_snapshots"):  # an older syrupy
        config.option.warn_unused_snapshots = True


def _state(config: pytest.Config) -> SuiteState:
    return config.stash[_STATE]


def _env_live_model(config: pytest.Config) -> object:
    from ._errors import RecordingError

    try:
        return _state(config).env_live_model()
    except RecordingError as err:
        raise pytest.UsageError(str(err)) from None


def _live_source(config: pytest.Config) -> str | None:
    """What gives ``--dsh-record`` its live model, for messages (``None``: nothing)."""
    if config.pluginmanager.hook.pytest_dsh_replay_live_model.get_hookimpls():
        return "your pytest_dsh_replay_live_model hook"
    if os.environ.get("DSH_RECORD_BASE_URL"):
        return "DSH_RECORD_BASE_URL"
    return None


def _check_live_model_available(config: pytest.Config) -> None:
    """Stop at start-up when ``--dsh-record`` has no live model to record from."""
    if config.pluginmanager.hook.pytest_dsh_replay_live_model.get_hookimpls():
        return
    if _env_live_model(config) is None:
        from ._plugin.messages import HOW_TO_RECORD

        raise pytest.UsageError(HOW_TO_RECORD)


def _live_model(item: pytest.Item, path: Path) -> object:
    """The live model that records ``path``: the hook's, else the ``DSH_RECORD_*`` one.

    The hook is asked as pytest asks a test's hooks: a conftest's implementation answers
    for the tests in its directory only. Fails the test when there is none, naming each
    hook implementation that answered ``None`` (a forgotten ``return``), or when a hook
    returned something without a ``stream`` method.
    """
    from ._plugin.messages import no_live_model, not_a_live_model

    config = item.config
    hook = item.ihook.pytest_dsh_replay_live_model
    live = hook(config=config, scenario_path=path)
    if live is not None and not callable(getattr(live, "stream", None)):
        pytest.fail(not_a_live_model(live, path), pytrace=False)
    if live is None:
        live = _env_live_model(config)
    if live is None:
        hooks = [_where(impl.function) for impl in hook.get_hookimpls()]
        pytest.fail(no_live_model(path, hooks), pytrace=False)
    return live


def _where(function: Callable[..., object]) -> str:
    """``file:line`` of ``function``'s definition (its name when that is unknown)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return getattr(function, "__qualname__", repr(function))
    return f"{code.co_filename}:{code.co_firstlineno}"


def _collected(item: pytest.Item) -> CollectedTest:
    """What the policy needs of ``item``, as plain values."""
    from ._plugin.collected import CollectedTest

    marker = item.get_closest_marker("dsh_scenario")
    module = item.path
    parts = item.nodeid.split("::", 1)
    args: tuple[object, ...] = () if marker is None else tuple(marker.args)
    kwargs = {} if marker is None else dict(marker.kwargs)
    if not args and "name_or_path" in kwargs:  # the name given by keyword
        args = (kwargs.pop("name_or_path"),)
    return CollectedTest(
        nodeid=item.nodeid,
        path=module,
        relpath=_relative(os.fspath(module), os.fspath(item.config.rootpath)),
        name=parts[1] if len(parts) == 2 else item.name,
        scenario_args=args,
        scenario_kwargs=kwargs,
        fixturenames=tuple(getattr(item, "fixturenames", ())),
    )


def _relative(path: str, root: str) -> Path | None:
    """``Path(path).relative_to(root)``, or ``None`` outside it, by comparing strings.

    Both are absolute and normalized, as pytest gives a module's path and the rootdir,
    so the lexical test of ``Path.is_relative_to`` is a prefix test of the text.
    """
    if path == root:
        return Path()
    prefix = root if root.endswith(os.sep) else root + os.sep
    return Path(path[len(prefix) :]) if path.startswith(prefix) else None


def _recorders(config: pytest.Config) -> Iterator[CollectedTest]:
    """The collected tests that record, converted only as far as they are read."""
    return (_collected(item) for item in config.stash.get(_RECORDERS, []))


def _hook_redaction(config: pytest.Config) -> Redaction:
    """The built-in redactor, and the ``pytest_dsh_replay_redact`` hooks for events and headers."""
    from ._wire.table import recording_redactor

    hook = config.hook.pytest_dsh_replay_redact
    # Implementations written before headers were redacted take only ``event``: they
    # are left out of header calls.
    event_only = [impl.plugin for impl in hook.get_hookimpls() if "header" not in impl.argnames]
    header_hook = config.pluginmanager.subset_hook_caller("pytest_dsh_replay_redact", event_only)

    def redact_event(event: Event) -> None:
        hook(event=event, header=None)

    def redact_header(header: JSONObject) -> None:
        header_hook(event=None, header=header)

    return recording_redactor(), redact_event, redact_header


def _workbase(request: pytest.FixtureRequest) -> Path:
    """The run's temporary base directory (asked for once per run, by the first test).

    ``tmp_path_factory`` is looked up here rather than requested as an argument: pytest
    keeps a finalizer of every function-scoped fixture that requests a session-scoped
    one on the session-scoped fixture, with the test's fixture request, until the
    session ends, which is memory kept for each finished test
    ([docs/scenarios.md#memory-per-test](../scenarios.md#memory-per-test)).
    """
    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    return factory.mktemp("dsh-replay")


@pytest.fixture
def dsh_replay(request: pytest.FixtureRequest) -> Generator[DshReplay, None, None]:
    """Replay this test's recorded dsh scenario: stream from .model, persist to .sessions.

    A missing or broken recording fails the test here, at set-up, with the real message
    (where it looked and the command that records it; the file and line that do not
    load), also when the fixture is requested through another fixture. At teardown the
    model endpoint stops; a replay error an HTTP call met fails the test there.
    """
    from ._plugin import runs
    from ._plugin.scenarios import ScenarioMarkerError

    item, config = request.node, request.config
    if not isinstance(item, pytest.Item):  # pragma: no cover - function scope guarantees it
        raise pytest.UsageError("dsh_replay is a function-scoped fixture")
    state = _state(config)
    test = _collected(item)
    problem: str | None = None
    try:
        replay = runs.start(
            test,
            state,
            layout_problem=item.stash.get(_LAYOUT_PROBLEM, None),
            workbase=lambda: _workbase(request),
            redaction=lambda: _hook_redaction(config),
            live=lambda path: _live_model(item, path),
            recorders=_recorders(config),
        )
    except (ScenarioMarkerError, runs.ScenarioUnavailable) as err:
        problem = str(err)  # one line, as the other set-up errors (not the fixture's code)
    if problem is not None:  # failed outside the except block: no chained traceback
        pytest.fail(problem, pytrace=False)
    item.stash[_RUN] = _Run(replay, test)
    item.ihook.pytest_dsh_replay_configure(config=config, replay=replay)
    try:
        yield replay
    finally:
        if state.report_usage:
            state.add_usage(item.nodeid, replay.usage())
        problem = runs.close(replay)
        if problem is not None:
            pytest.fail(problem, pytrace=False)


@pytest.fixture
def dsh_transcript(
    snapshot: SnapshotAssertion, request: pytest.FixtureRequest
) -> SnapshotAssertion:
    """Syrupy's ``snapshot``, storing dsh session transcripts as Markdown files.

    ``assert dsh_replay.transcript() == dsh_transcript`` keeps one ``.md`` file per test
    under ``__snapshots__/<module>/`` (``--snapshot-update`` writes it). Two tests whose
    files would be one (parametrize ids that differ only in characters syrupy drops from
    file names) fail at set-up, naming each other.
    """
    from .syrupy_ext import DshTranscriptExtension

    problem = request.node.stash.get(_TRANSCRIPT_PROBLEM, None)
    if problem is not None:
        pytest.fail(problem, pytrace=False)

    return snapshot.use_extension(DshTranscriptExtension)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Check a passing test afterwards: calls consumed, logs as recorded, HTTP calls served.

    A recording test fails here when an HTTP call met a replay error or the live model
    could not be reached (once: not again at teardown).
    """
    try:
        result = yield
    finally:  # the calls the body made, also when it raised (a skip records)
        run = item.stash.get(_RUN, None)
        if run is not None:
            run.calls_in_body = run.replay._calls_opened()
    if run is None:
        return result
    from ._plugin.runs import check_appended, check_recorded, check_replayed

    if run.replay.mode == "replay":
        state = _state(item.config)
        problem = check_replayed(run.test, state, run.replay, _recorders(item.config))
    elif run.replay.mode == "new":
        state = _state(item.config)
        problem = check_appended(run.test, state, run.replay, _recorders(item.config))
    else:
        problem = check_recorded(run.replay)
    if problem is None:
        problem = _over_budget(item, run.replay)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    return result


def _over_budget(item: pytest.Item, replay: DshReplay) -> str | None:
    """Why the test's model calls went over its ``dsh_budget`` marker, if they did."""
    marker = item.get_closest_marker("dsh_budget")
    if marker is None:
        return None
    from ._plugin.budget import budget, over_budget

    try:
        limits = budget(item.nodeid, marker.args, marker.kwargs)
    except ValueError as err:
        return str(err)
    return over_budget(item.nodeid, limits, replay.usage())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember whether the test body passed: only a passing (or self-skipping) test records.

    A body that raised after an HTTP call met a replay error fails with the typed error
    first, and only once ([docs/wires.md#replay-errors](../wires.md#replay-errors)). A test
    that requests ``dsh_replay`` and fails in any phase (its scenario was not loaded, recorded or
    replayed) keeps its syrupy snapshots ([docs/checks.md#transcripts](../checks.md#transcripts)).
    """
    report = yield
    run = item.stash.get(_RUN, None)
    if report.when == "call" and run is not None:
        # A body that skipped itself (pytest.skip after its model calls) is recorded as
        # it ran: its replay makes the same calls and skips at the same place. An xfail
        # is a failure the test expects: not recorded.
        run.passed = report.passed or (
            report.skipped and not hasattr(report, "wasxfail") and run.calls_in_body > 0
        )
        failed = call.excinfo if report.failed else None
        if failed is not None and not _typed_error_first(item, report, failed, run.replay):
            _explain_snapshot_drift(item, report, failed, run)
    if report.skipped and report.when == "setup" and run is None:
        _skipped_keeps_its_scenario(item)
    if report.failed and "dsh_replay" in getattr(item, "fixturenames", ()):
        item.stash[_FAILED] = True
        _withhold_snapshot_writes(item)
    if report.when == "teardown" and item.stash.get(_FAILED, False):
        _keep_snapshots(item)
    return report


def _skipped_keeps_its_scenario(item: pytest.Item) -> None:
    """A test skipped before its ``dsh_replay`` was set up still uses its scenario.

    A ``skip``/``skipif`` marker (a platform's test, say) keeps the recording in use, as
    syrupy keeps a skipped test's snapshots: the unused report and ``--dsh-fail-unused``
    leave it out ([docs/guide/writing-tests.md](../guide/writing-tests.md)). A marker too
    broken to name a scenario names none.
    """
    if "dsh_replay" not in getattr(item, "fixturenames", ()):
        return
    import contextlib

    from ._errors import DshReplayError
    from ._plugin.scenarios import scenario_path

    state = _state(item.config)
    # a broken marker would have failed the test at set-up; it was skipped instead
    with contextlib.suppress(DshReplayError):
        state.used.add(str(scenario_path(_collected(item), state)))


def _typed_error_first(
    item: pytest.Item,
    report: pytest.TestReport,
    excinfo: pytest.ExceptionInfo[BaseException],
    replay: DshReplay,
) -> bool:
    """A body that raised after an HTTP call met a replay error fails once, with that error.

    The typed error leads the report (and its summary line); the exception the body
    raised (an SDK's) follows, short, from the test's own frame on; teardown does not
    report the error again.

    Returns:
        Whether an HTTP call met an error (the report now leads with it).
    """
    from ._plugin.runs import failed_call

    def raised() -> str:
        frames = excinfo.traceback.cut(path=item.path).filter(excinfo)
        if frames:
            excinfo.traceback = frames
        return str(excinfo.getrepr(style="short", chain=False))

    problem = failed_call(replay, raised, excinfo.value)
    if problem is not None:
        report.longrepr = problem
    return problem is not None


def _snapshots(item: pytest.Item) -> list[object]:
    """The syrupy snapshot fixtures the test received (``dsh_transcript``, ``snapshot``)."""
    from ._plugin.collected import SNAPSHOT_FIXTURES

    funcargs = getattr(item, "funcargs", {})
    return [funcargs[name] for name in sorted(SNAPSHOT_FIXTURES) if name in funcargs]


def _explain_snapshot_drift(
    item: pytest.Item,
    report: pytest.TestReport,
    excinfo: pytest.ExceptionInfo[BaseException],
    run: _Run,
) -> None:
    """A body that failed on a snapshot assertion also gets the plugin's own verdict.

    syrupy's diff of the transcript says what changed, not why: the end-of-test check
    says whether the replay differs from its recording (with the command that
    re-records) or the snapshot is out of date
    ([docs/checks.md#transcripts](../checks.md#transcripts)). The text is a section of the
    failure's report, after syrupy's.
    """
    if not isinstance(excinfo.value, AssertionError):
        return
    failed = any(
        not getattr(result, "success", True)
        for snapshot in _snapshots(item)
        for result in getattr(snapshot, "executions", {}).values()
    )
    if not failed:
        return
    from ._plugin.runs import snapshot_drift

    state = _state(item.config)
    text = snapshot_drift(run.test, state, run.replay, _recorders(item.config))
    add = getattr(report.longrepr, "addsection", None)
    if callable(add):  # after syrupy's diff, in the failure's own report
        add("dsh-replay", text)
    else:
        report.sections.append(("dsh-replay", text))


def _withhold_snapshot_writes(item: pytest.Item) -> None:
    """A failing test writes no snapshot: drop what ``--snapshot-update`` queued for it.

    syrupy writes the snapshots it queued when the session ends, whatever became of the
    test afterwards; a test that requests ``dsh_replay`` and fails (the replayed-log
    check after its transcript assertion, a recording not written) keeps the snapshots
    it has ([docs/checks.md#transcripts](../checks.md#transcripts)). Its queued writes are
    dropped and its updated or created assertions count as failed in syrupy's report.
    Nothing happens without syrupy, or with a syrupy that keeps its queue otherwise.
    """
    session = getattr(item.config, "_syrupy", None)
    queued = getattr(session, "_queued_snapshot_writes", None)

    def of_item(entry: object) -> bool:
        parts = entry if isinstance(entry, tuple) else (entry,)
        return any(getattr(part, "nodeid", None) == item.nodeid for part in parts)

    for writes in queued.values() if isinstance(queued, dict) else ():
        if isinstance(writes, dict):
            for key in [key for key in writes if of_item(key)]:
                del writes[key]
        elif isinstance(writes, list):
            writes[:] = [entry for entry in writes if not of_item(entry)]
    for snapshot in _snapshots(item):
        for result in getattr(snapshot, "executions", {}).values():
            if getattr(result, "created", False) or getattr(result, "updated", False):
                result.created = result.updated = result.success = False


def _keep_snapshots(item: pytest.Item) -> None:
    """Count every snapshot of ``item`` as used, so syrupy neither reports nor deletes one.

    syrupy keeps no snapshot of a skipped test from its unused list; its session (which
    its own ``snapshot`` fixture reads from ``config._syrupy``) takes the outcome of each
    test from its report. The teardown report is the last one and syrupy ignores it, so
    an outcome set here is the test's final one. Nothing happens without syrupy.
    """
    ran_item = getattr(getattr(item.config, "_syrupy", None), "ran_item", None)
    if callable(ran_item):
        ran_item(item.nodeid, "skipped")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """Write a recording after the test and every fixture teardown succeeded.

    A replayed test gets its page under ``--dsh-html`` after its teardown, whatever its
    outcome ([docs/guide/picture.md](../guide/picture.md)).
    """
    run = item.stash.get(_RUN, None)
    if run is None:
        return (yield)
    # pytest keeps every finished item: the replay (scenario, model, sessions) is dropped
    # here, or a suite's memory would grow with each test.
    del item.stash[_RUN]
    if run.replay.mode == "replay":
        try:
            return (yield)
        finally:
            _write_page(item, run)
    from ._plugin.runs import end_recording

    try:
        result = yield
    except BaseException:
        end_recording(item.nodeid, _state(item.config), run.replay, passed=False)
        raise
    state = _state(item.config)
    late = _calls_after_the_body(item, run)
    try:
        problem = end_recording(item.nodeid, state, run.replay, passed=run.passed and late is None)
    except BaseException:  # Ctrl-C while the recording is written: the transcripts go
        if item.nodeid not in state.written_interrupted:  # with whichever recording stays
            _withhold_snapshot_writes(item)
        raise
    problem = late if problem is None and run.passed else problem
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    return result


def _calls_after_the_body(item: pytest.Item, run: _Run) -> str | None:
    """Why a recording is not written: model calls made after the test body ended."""
    late = run.replay._calls_opened() - run.calls_in_body
    if late <= 0 or not run.passed:
        return None
    from ._plugin.messages import calls_after_the_body

    return calls_after_the_body(item.nodeid, run.replay.path, late)


def _write_page(item: pytest.Item, run: _Run) -> None:
    """With ``--dsh-html``: the test's page; one that cannot be written is a warning."""
    pages = item.config.stash.get(_PAGES, None)
    if pages is not None:
        from ._report.pages import write_test_page

        problem = write_test_page(pages, item.nodeid, run.replay, passed=run.passed)
        if problem:
            item.warn(pytest.PytestWarning(problem))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """Note the tests that record (before any deselection); refuse unsafe layouts.

    Case collisions fail the tests concerned at set-up; in record mode, two tests that
    record one scenario or nested scenarios stop the run (under ``pytest-xdist``, where a
    worker cannot stop it, the tests concerned fail at set-up instead).
    """
    from ._plugin.layout import case_collisions, recording_layout_problem, transcript_collisions
    from ._plugin.scenarios import ScenarioMarkerError

    state = _state(config)
    tests = [_collected(item) for item in items]
    config.stash[_RECORDERS] = [
        i for i, t in zip(items, tests, strict=True) if t.uses_replay and not t.replay_only
    ]
    for message, pair in case_collisions(tests, state):
        for k in pair:
            items[k].stash[_LAYOUT_PROBLEM] = message
    for message, pair in transcript_collisions(tests):
        for k in pair:
            items[k].stash[_TRANSCRIPT_PROBLEM] = message
    yield
    if session.testsfailed and not config.option.continue_on_collection_errors:
        _no_unused_snapshots(config)  # pytest stops before any test: none is unused
    if state.record is None:
        return
    try:
        problem = recording_layout_problem([_collected(item) for item in items], state)
    except ScenarioMarkerError as err:
        _no_unused_snapshots(config)  # the run stops: nothing of syrupy's is unused
        raise pytest.UsageError(str(err)) from None
    if problem is None:
        return
    message, involved = problem
    if not hasattr(config, "workerinput"):
        _no_unused_snapshots(config)
        raise pytest.UsageError(message)
    for k in involved:
        items[k].stash[_LAYOUT_PROBLEM] = message


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Keep pytest out of recorded scenarios: they hold session logs, never tests."""
    state = config.stash.get(_STATE, None)
    if state is None:
        return None
    from ._plugin.scenarios import ignores

    return True if ignores(state, collection_path) else None


def pytest_deselected(items: list[pytest.Item]) -> None:
    """A deselection of any test makes the run a subset."""
    if items:
        items[0].config.stash[_STATE].subset = True


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Workers hand their report to the controller; the controller finds unused scenarios."""
    state = _state(session.config)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["dsh_replay"] = state.report()
        return
    from ._plugin.suite import find_unused

    if find_unused(state, _run_scope(session)) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _run_scope(session: pytest.Session) -> RunScope:
    """What the complete-run rule reads of the session, as plain values."""
    from ._plugin.suite import RunScope

    config = session.config
    # Paths named on the command line, or the invocation directory pytest chose when
    # started without any (a subdirectory's tests are a subset); testpaths are whole.
    from_args = config.args_source != pytest.Config.ArgsSource.TESTPATHS
    return RunScope(
        collect_only=bool(config.option.collectonly),
        stopped=bool(
            session.shouldstop
            or session.shouldfail
            or session.exitstatus == pytest.ExitCode.INTERRUPTED
        ),
        failed=session.testsfailed,
        maxfail=config.getoption("maxfail") or 0,
        args=tuple(config.args) if from_args else None,
        rootpath=config.rootpath,
        testpaths=tuple(config.getini("testpaths")),
        invocation_dir=config.invocation_params.dir,
        narrowed=bool(
            config.getoption("lf", False)
            or config.getoption("ignore", None)
            or config.getoption("ignore_glob", None)
        ),
    )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Report scenarios replayed, recorded, missing, broken and (on a complete run) unused."""
    from ._plugin.suite import failing_line, summary_lines

    state = _state(config)
    lines = summary_lines(state)
    if lines:
        terminalreporter.write_sep("-", "dsh-replay")
        for line in lines:
            terminalreporter.write_line(line)
    if state.report_usage:
        from ._plugin.budget import usage_table

        terminalreporter.write_sep("-", "dsh-replay usage")
        for line in usage_table(state.usages) or ["no test made a model call"]:
            terminalreporter.write_line(line)
    failing = failing_line(state)
    if failing is not None:  # the last line before pytest's own, which says "passed"
        terminalreporter.write_line(failing, red=True, bold=True)
