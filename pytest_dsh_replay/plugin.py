"""The pytest plugin, registered through the ``pytest11`` entry point ``dsh_replay``.

This layer only wires pytest to the core: options and ini keys, the ``dsh_scenario``
marker, the ``dsh_replay`` fixture, the end-of-test checks and the terminal summary.
The core (``runtime``, ``scenario``, ``model``, ``store``) is imported only when a test
asks for the fixture, so loading the plugin costs next to nothing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion

    from ._fixture.dsh_replay import DshReplay
    from ._plugin.suite import SuiteState

RECORD_MODES: Final = ("all", "missing")
"""The values ``--dsh-record`` accepts (a bare ``--dsh-record`` means ``all``)."""

DEFAULT_SNAPSHOT_DIR: Final = "dsh_snapshots"
_DEFAULT_ROOT_PART: Final = f"{os.sep}{DEFAULT_SNAPSHOT_DIR}{os.sep}"
_MARKER_KEYWORDS: Final = frozenset({"compare_logs", "record"})


def _parse_record_mode(value: str) -> str:
    """Validate ``--dsh-record``'s value (argparse ``type=``)."""
    if value in RECORD_MODES:
        return value
    hint = ""
    if "/" in value or os.sep in value or "::" in value or value.endswith(".py"):
        hint = f"; it looks like a test path: write --dsh-record=all {value}"
    raise pytest.UsageError(
        f"--dsh-record accepts {' or '.join(RECORD_MODES)} (a bare --dsh-record means all), "
        f"got {value!r}{hint}"
    )


_HOW_TO_RECORD: Final = (
    "--dsh-record needs a live model: set DSH_RECORD_BASE_URL, DSH_RECORD_API_KEY (and "
    "DSH_RECORD_MODEL to override the model requests ask for) for an OpenAI-compatible "
    "endpoint (pip install 'pytest-dsh-replay[record]'), or implement the hook "
    "pytest_dsh_replay_live_model"
    "(config, scenario_path) in a conftest.py at the root of your tests"
)


def _env_live_model(config: pytest.Config) -> Any:
    """The built-in adapter configured from ``DSH_RECORD_*`` (one per run), or ``None``."""
    state = _state(config)
    if state.env_model is None:
        from ._errors import RecordingError
        from ._recording.live_openai import OpenAICompatibleModel

        try:
            state.env_model = OpenAICompatibleModel.from_env()
        except RecordingError as err:
            raise pytest.UsageError(str(err)) from None
    return state.env_model


def _check_live_model_available(config: pytest.Config) -> None:
    """Stop at start-up when ``--dsh-record`` has no live model to record from."""
    if config.pluginmanager.hook.pytest_dsh_replay_live_model.get_hookimpls():
        return
    if _env_live_model(config) is None:
        raise pytest.UsageError(_HOW_TO_RECORD)


def _live_model(config: pytest.Config, path: Path) -> Any:
    live = config.hook.pytest_dsh_replay_live_model(config=config, scenario_path=path)
    if live is not None:
        return live
    live = _env_live_model(config)
    if live is None:
        pytest.fail(f"no live model to record {path}: {_HOW_TO_RECORD}", pytrace=False)
    return live


_STATE = pytest.StashKey["SuiteState"]()


@dataclass
class _Run:
    """One test's run: the fixture value the test received."""

    replay: DshReplay


_RUN = pytest.StashKey[_Run]()
_PASSED = pytest.StashKey[bool]()
_LAYOUT_PROBLEM = pytest.StashKey[str]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register this plugin's hook specifications."""
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ``dsh-replay`` option group and its ini keys."""
    group = parser.getgroup("dsh-replay", "dsh-replay (replay and record dsh agent sessions)")
    group.addoption(
        "--dsh-record",
        action="store",
        nargs="?",
        const="all",
        default=None,
        type=_parse_record_mode,
        dest="dsh_record",
        metavar="all|missing",
        help="record scenarios against the live model instead of replaying them: "
        "all (the default when no value is given) re-records every selected scenario, "
        "missing records only scenarios that have no recording yet.",
    )
    group.addoption(
        "--dsh-fail-unused",
        action="store_true",
        default=False,
        dest="dsh_fail_unused",
        help="fail the run when a complete run (no -k, -m, deselection or early stop) "
        "leaves scenario directories under the snapshot root that no test used.",
    )
    parser.addini(
        "dsh_compare_logs",
        "compare the session logs a replayed test writes with the recording (default: true).",
        type="bool",
        default=True,
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
        "dsh_scenario(name_or_path=None, *, compare_logs=True, record=True): the recorded "
        "dsh scenario the dsh_replay fixture uses: a name relative to dsh_snapshot_dir or "
        "an absolute path (default: derived from the test's name); compare_logs=False "
        "skips the replayed-log check; record=False makes the test replay even under "
        "--dsh-record (another test records the scenario).",
    )
    raw_root = str(config.getini("dsh_snapshot_dir")).strip()
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    from ._plugin.suite import SuiteState

    state = SuiteState(
        record=config.getoption("dsh_record"),
        ini_root=(base / raw_root) if raw_root else None,
        subset=bool(config.getoption("keyword") or config.getoption("markexpr")),
        compare_logs=bool(config.getini("dsh_compare_logs")),
        fail_unused=bool(config.getoption("dsh_fail_unused")),
    )
    if state.ini_root is not None:
        state.ini_root_prefix = os.path.join(os.path.normpath(state.ini_root), "")
    config.stash[_STATE] = state
    if config.option.collectonly:
        # Nothing is asserted in a collect-only run, so no snapshot can be "unused";
        # syrupy (a dependency of this plugin) would fail `pytest --co` saying so.
        if hasattr(config.option, "disable_unused_snapshots"):
            config.option.disable_unused_snapshots = True
        elif hasattr(config.option, "warn_unused_snapshots"):  # an older syrupy
            config.option.warn_unused_snapshots = True
    if state.record is not None and not hasattr(config, "workerinput"):
        _check_live_model_available(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(), "dsh_replay_xdist")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Release the built-in live model's connection, if one was made."""
    state = config.stash.get(_STATE, None)
    if state is not None and state.env_model is not None:
        state.env_model.close()


class _XdistController:
    """Collect what each ``pytest-xdist`` worker used; only the controller decides."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        report = getattr(node, "workeroutput", {}).get("dsh_replay")
        if report is not None:
            _state(node.config).merge(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Workers hand their report to the controller; the controller finds unused scenarios."""
    state = _state(session.config)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["dsh_replay"] = state.report()
        return
    if (state.used or state.ini_root is not None) and _is_complete_run(session, state):
        from ._plugin.suite import unused_scenarios

        state.unused = unused_scenarios(state)
        if state.unused and state.fail_unused and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _state(config: pytest.Config) -> SuiteState:
    return config.stash[_STATE]


def _snapshot_root(item: pytest.Item, state: SuiteState) -> Path:
    if state.ini_root is not None:
        return state.ini_root
    return item.path.parent / DEFAULT_SNAPSHOT_DIR


def _resolved_root(state: SuiteState, root: Path) -> str:
    """``str(root.resolve())``, resolved once per run and root."""
    resolved = state.resolved_roots.get(root)
    if resolved is None:
        resolved = state.resolved_roots[root] = str(root.resolve())
    return resolved


def _test_name(item: pytest.Item) -> str:
    """The test's name inside its module, classes included (``TestX::test_y[id]``)."""
    module = item.nodeid.split("::", 1)
    return module[1] if len(module) == 2 else item.name


def _scenario_path(item: pytest.Item, state: SuiteState) -> Path:
    from ._errors import ScenarioError
    from ._plugin.naming import resolve_scenario, scenario_name

    root = _snapshot_root(item, state)
    marker = item.get_closest_marker("dsh_scenario")
    if marker is not None and not marker.args:
        marker = None
    if marker is None:
        # Named after the module and the test, so tests of different modules that
        # share a root (one dsh_snapshot_dir, or modules side by side) never collide.
        rel = Path(item.path.name)
        if state.ini_root is not None and item.path.is_relative_to(item.config.rootpath):
            rel = item.path.relative_to(item.config.rootpath)
        name = "::".join([*rel.with_suffix("").parts, _test_name(item)])
        return root / scenario_name(name)
    if len(marker.args) != 1 or not isinstance(marker.args[0], str | os.PathLike):
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.dsh_scenario takes one scenario name or path, "
            f"got args={marker.args!r}"
        )
    unknown = set(marker.kwargs) - _MARKER_KEYWORDS
    if unknown:
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.dsh_scenario accepts the keywords "
            f"{', '.join(sorted(_MARKER_KEYWORDS))}, got {', '.join(sorted(unknown))}"
        )
    try:
        return resolve_scenario(root, marker.args[0], resolved_root=_resolved_root(state, root))
    except ScenarioError as err:
        raise pytest.UsageError(f"{item.nodeid}: {err}") from None


def _replay_only(item: pytest.Item) -> bool:
    """Whether the test's marker says ``record=False`` (another test records the scenario)."""
    marker = item.get_closest_marker("dsh_scenario")
    return marker is not None and marker.kwargs.get("record", True) is False


def _recording_test(item: pytest.Item, path: Path) -> str | None:
    """The node id of a collected test that records ``path``, or ``None``."""
    state = _state(item.config)
    target = path.resolve()
    for other in state.recorders:
        try:
            if _scenario_path(other, state).resolve() == target:
                return str(other.nodeid)
        except pytest.UsageError:
            continue  # a broken marker fails that test on its own
    return None


def _record_command(item: pytest.Item, path: Path, mode: str) -> str:
    """The command that (re-)records ``path``, node ids quoted for any shell.

    A replay-only test (``record=False``) would only replay again under
    ``--dsh-record``: the command names the test that records the scenario instead.
    """
    if not _replay_only(item):
        return f"pytest --dsh-record={mode} {shlex.quote(item.nodeid)}"
    recorder = _recording_test(item, path)
    if recorder is not None:
        return f"pytest --dsh-record={mode} {shlex.quote(recorder)}"
    return (
        f"{item.nodeid} only replays {path} (dsh_scenario(..., record=False)): run the "
        f"test that records this scenario with --dsh-record={mode}"
    )


def _compare_logs(item: pytest.Item, state: SuiteState) -> bool:
    marker = item.get_closest_marker("dsh_scenario")
    if marker is not None and "compare_logs" in marker.kwargs:
        return bool(marker.kwargs["compare_logs"])
    return state.compare_logs


def _records(item: pytest.Item, state: SuiteState, path: Path) -> bool:
    """Whether this test records (rather than replays) under the current options."""
    if _replay_only(item):
        return False  # another test records this scenario
    return state.record == "all" or (state.record == "missing" and not path.exists())


def _recover_interrupted_writes(state: SuiteState, directory: Path) -> None:
    """Once per run and directory: put back or clean up what a killed recording left."""
    key = str(directory)
    if key in state.recovered:
        return
    state.recovered.add(key)
    from ._store.atomic import recover_directory

    state.cleaned += len(recover_directory(directory))


@pytest.fixture
def dsh_replay(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Generator[DshReplay, None, None]:
    """Replay this test's recorded dsh scenario: stream from .model, persist to .sessions.

    A missing or broken recording fails the test here, at set-up, with the real message
    (where it looked and the command that records it; the file and line that do not
    load), also when the fixture is requested through another fixture. At teardown the
    model endpoint stops; a replay error an HTTP call met fails the test there.
    """
    from ._errors import DshReplayError
    from ._fixture.dsh_replay import DshReplay

    item = request.node
    if not isinstance(item, pytest.Item):  # pragma: no cover - function scope guarantees it
        raise pytest.UsageError("dsh_replay is a function-scoped fixture")
    config = request.config
    state = _state(config)
    path = _scenario_path(item, state)
    _recover_interrupted_writes(state, path.parent)
    state.used.add(str(path))  # resolved only if needed, once, at the end of the run
    state.roots.add(_resolved_root(state, _snapshot_root(item, state)))
    if state.workbase is None:
        state.workbase = tmp_path_factory.mktemp("dsh-replay")
    state.runs += 1
    workdir = state.workbase / str(state.runs)  # created on first use, if ever
    if state.redaction is None:
        from ._plugin.suite import hook_redaction

        state.redaction = hook_redaction(config)
    redactor, redact_hook, redact_header_hook = state.redaction
    problem: str | None = None
    replay: DshReplay | None = None
    layout_problem = item.stash.get(_LAYOUT_PROBLEM, None)
    if layout_problem is not None:
        problem = layout_problem
    elif _records(item, state, path):
        try:
            replay = DshReplay.record(
                path,
                live=_live_model(config, path),
                workdir=workdir,
                redactor=redactor,
                redact_hook=redact_hook,
                redact_header_hook=redact_header_hook,
            )
        except DshReplayError as err:
            problem = f"cannot record the dsh scenario for {item.nodeid}:\n  {err}"
    elif not path.exists():
        state.missing += 1
        problem = (
            f"no recorded dsh scenario for {item.nodeid}\n"
            f"  looked at: {path}\n"
            f"  record it: {_record_command(item, path, 'missing')}\n"
            "  (recording calls the live model; see pytest --help, group dsh-replay)"
        )
    else:
        if state.cache is None:
            from ._scripts.loading import ScenarioCache

            state.cache = ScenarioCache()
        try:
            replay = DshReplay.open(
                path,
                cache=state.cache,
                workdir=workdir,
                compare_logs=_compare_logs(item, state),
                redactor=redactor,
                redact_hook=redact_hook,
                redact_header_hook=redact_header_hook,
            )
        except DshReplayError as err:
            state.broken += 1
            problem = f"the dsh scenario for {item.nodeid} does not load:\n  {err}"
        else:
            state.replayed += 1
    if replay is None:  # failed outside the except blocks: no chained traceback
        pytest.fail(problem or f"no dsh scenario for {item.nodeid}", pytrace=False)
    item.stash[_RUN] = _Run(replay=replay)
    config.hook.pytest_dsh_replay_configure(config=config, replay=replay)
    try:
        yield replay
    finally:
        _close_endpoint(replay)


def _close_endpoint(replay: DshReplay) -> None:
    """Stop the model endpoint; a replay error an HTTP call met fails the test here."""
    from ._errors import DshReplayError, RecordingError

    problem: str | None = None
    try:
        replay.close()
    except RecordingError as err:
        problem = f"{type(err).__name__}: {err}"
    except DshReplayError as err:
        problem = (
            "a model call over HTTP failed (the client got a 500 with this message):\n"
            f"{type(err).__name__}: {err}"
        )
    if problem is not None:
        pytest.fail(problem, pytrace=False)


@pytest.fixture
def dsh_transcript(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """Syrupy's ``snapshot``, storing dsh session transcripts as Markdown files.

    ``assert dsh_replay.transcript() == dsh_transcript`` keeps one ``.md`` file per test
    under ``__snapshots__/<module>/`` (``--snapshot-update`` writes it).
    """
    from .syrupy_ext import DshTranscriptExtension

    return snapshot.use_extension(DshTranscriptExtension)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Check a passing replayed test afterwards: calls consumed, logs as recorded."""
    result = yield
    run = item.stash.get(_RUN, None)
    if run is not None and run.replay.mode == "replay":
        from ._errors import DshReplayError, LogMismatchError

        problem: str | None = None
        try:
            run.replay.finish()
        except LogMismatchError as err:
            problem = str(err)
            if run.replay.recorded_elsewhere():
                problem += (
                    "\n(this recording was not written by pytest-dsh-replay; one made by "
                    "other code, such as the dsh harness's own, replays without this check: "
                    "@pytest.mark.dsh_scenario(..., compare_logs=False))"
                )
        except DshReplayError as err:
            problem = str(err)
        if problem is not None:  # failed outside the except block: no chained traceback
            command = _record_command(item, run.replay.path, "all")
            pytest.fail(
                f"{problem}\n(if the new behaviour is right, re-record: {command})",
                pytrace=False,
            )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember whether the test body passed: only a passing test writes a recording."""
    report = yield
    if report.when == "call" and _RUN in item.stash:
        item.stash[_PASSED] = report.passed
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """Write a recording after the test and every fixture teardown succeeded.

    The test's replay (scenario, model, sessions) is dropped afterwards: pytest keeps
    every finished item, and a suite's memory would grow with each test.
    """
    try:
        return (yield from _teardown(item))
    finally:
        if _RUN in item.stash:
            del item.stash[_RUN]
        if _PASSED in item.stash:
            del item.stash[_PASSED]


def _teardown(item: pytest.Item) -> Generator[None, object, object]:
    run = item.stash.get(_RUN, None)
    recording = run is not None and run.replay.mode == "record"
    try:
        result = yield
    except BaseException:
        if recording:
            _state(item.config).kept += 1
        raise
    if recording and run is not None:
        if not item.stash.get(_PASSED, False):
            _state(item.config).kept += 1
            return result
        from ._errors import DshReplayError

        problem: str | None = None
        try:
            files = run.replay.finish()
        except DshReplayError as err:
            problem = str(err)
        if problem is not None:  # failed outside the except block: no chained traceback
            _state(item.config).unwritten += 1
            pytest.fail(
                f"the recording of {item.nodeid} was not written: {problem}; the previous "
                "recording, if any, is kept",
                pytrace=False,
            )
        calls = sum(
            1
            for s in run.replay.sessions.sessions()
            for e in s.events[s.seed_length :]  # a fork's inherited calls are not its own
            if e["type"] == "assistant/chunk" and e["data"]["chunk"].get("type") == "finish"
        )
        _state(item.config).recordings.append(
            (str(run.replay.path), len(files), calls, run.replay.unchanged)
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """Note the tests that record; in record mode, refuse two that record one scenario.

    The tests that record are noted before any deselection (``-k``, ``-m``), so the
    re-record hint of a replay-only test can name the test that records its scenario.

    Also refused: recording a scenario that holds another one or lies inside one. Under
    ``pytest-xdist`` a worker cannot stop the run, so there the tests concerned fail
    with the same message instead, before anything is recorded.
    """
    state = _state(config)
    state.recorders = [
        item
        for item in items
        if "dsh_replay" in getattr(item, "fixturenames", ()) and not _replay_only(item)
    ]
    _refuse_case_collisions(state, items)
    yield
    if state.record is None:
        return
    problem = _recording_layout_problem(state, items)
    if problem is None:
        return
    message, involved = problem
    if not hasattr(config, "workerinput"):
        raise pytest.UsageError(message)
    for item in involved:
        item.stash[_LAYOUT_PROBLEM] = message


def _refuse_case_collisions(state: SuiteState, items: list[pytest.Item]) -> None:
    """Fail (at set-up) tests whose derived scenario names differ only in letter case.

    Derived names are injective, but a case-insensitive file system (macOS, Windows)
    would give two such tests one directory, and one would replay the other's recording.
    """
    seen: dict[str, tuple[pytest.Item, Path]] = {}
    for item in items:
        if "dsh_replay" not in getattr(item, "fixturenames", ()):
            continue
        marker = item.get_closest_marker("dsh_scenario")
        if marker is not None and marker.args:
            continue  # an explicit name: sharing it is the user's choice
        try:
            path = _scenario_path(item, state)
        except pytest.UsageError:
            continue
        key = str(path).casefold()
        found = seen.get(key)
        if found is None:
            seen[key] = (item, path)
            continue
        other, other_path = found
        message = (
            f"{other.nodeid} and {item.nodeid} derive scenario names that differ only in "
            f"letter case ({other_path.name}, {path.name}): on a case-insensitive file "
            "system (macOS, Windows) they would share one recording; give one of them a "
            "@pytest.mark.dsh_scenario name or another parametrize id"
        )
        other.stash[_LAYOUT_PROBLEM] = item.stash[_LAYOUT_PROBLEM] = message


def _recording_layout_problem(
    state: SuiteState, items: list[pytest.Item]
) -> tuple[str, list[pytest.Item]] | None:
    """The first duplicate or nested scenario among the tests that record, if any."""
    from ._plugin.suite import recording_layout_problem

    recording: list[tuple[pytest.Item, Path]] = []
    for item in items:
        if "dsh_replay" in getattr(item, "fixturenames", ()):
            path = _scenario_path(item, state)
            if _records(item, state, path):
                recording.append((item, path))
    found = recording_layout_problem([(i.nodeid, p) for i, p in recording])
    if found is None:
        return None
    message, which = found
    return message, [recording[k][0] for k in which]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Keep pytest out of recorded scenarios: they hold session logs, never tests.

    A directory under a snapshot root (``dsh_snapshot_dir``, else any ``dsh_snapshots``
    directory) that holds a primary session log is not walked; grouping directories
    between the root and the scenarios still are. Anything else is left to pytest.
    """
    state = config.stash.get(_STATE, None)
    if state is None:
        return None
    # Cheap string tests first: pytest asks about every file and directory it meets.
    text = str(collection_path)
    if state.ini_root_prefix is not None:
        if not text.startswith(state.ini_root_prefix):
            return None
    elif _DEFAULT_ROOT_PART not in text:
        return None
    from ._scripts.scenario import holds_primary_log

    return True if holds_primary_log(collection_path) else None


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Any deselection makes the run a subset."""
    if items:
        items[0].config.stash[_STATE].subset = True


def _is_complete_run(session: pytest.Session, state: SuiteState) -> bool:
    config = session.config
    if config.option.collectonly:  # nothing ran: no scenario can have been used
        return False
    if state.subset or session.shouldstop or session.shouldfail:
        return False
    if (
        session.testsfailed
        and config.getoption("maxfail")
        and (session.testsfailed >= config.getoption("maxfail"))
    ):
        return False
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        base = config.rootpath
        defaults = {base.resolve()} | {(base / p).resolve() for p in config.getini("testpaths")}
        here = config.invocation_params.dir
        return all("::" not in arg and (here / arg).resolve() in defaults for arg in config.args)
    return True


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Report scenarios replayed, recorded, missing, broken and (on a complete run) unused."""
    from ._plugin.suite import summary_lines

    lines = summary_lines(_state(config))
    if lines:
        terminalreporter.write_sep("-", "dsh-replay")
        for line in lines:
            terminalreporter.write_line(line)
