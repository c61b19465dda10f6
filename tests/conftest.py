"""Shared test configuration: the live model that ``--dsh-record`` uses in this repo.

The project's example scenarios (``example_snapshots/``) are recorded through the
built-in OpenAI-compatible adapter against the package's scripted live model served on
127.0.0.1 (``ScriptedServer``), which this conftest starts on demand with the script of
``tests/support/scripted.py``: no network, no API key. Scenarios named ``runtime-*`` (the
real dsh runtime, ``tests/e2e/test_dsh_runtime.py``) get a second scripted server whose
answers follow ``runtime_agent.runtime_model``; the runtime reaches it through the
fixture's recording proxy (``POST /v1/messages``).
Set ``DSH_RECORD_BASE_URL``, ``DSH_RECORD_API_KEY`` and ``DSH_RECORD_MODEL`` to record
against a real OpenAI-compatible endpoint instead.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_SERVER = pytest.StashKey[Any]()
_RUNTIME_SERVER = pytest.StashKey[Any]()
LOCAL_KEY = "sk-local-scripted-server-0000000000"


def pytest_dsh_replay_live_model(config: pytest.Config, scenario_path: Path) -> Any:
    if os.environ.get("DSH_RECORD_BASE_URL"):
        return None  # the built-in adapter, configured from the environment
    from support.scripted import directive_model

    from pytest_dsh_replay._recording.live_openai import OpenAICompatibleModel

    if scenario_path.name.startswith("runtime-"):
        from support.runtime_agent import runtime_model

        previous = config.stash.get(_RUNTIME_SERVER, None)
        if previous is not None:
            previous.stop()
        # a fresh script per scenario (its [[fail]] memory)
        runtime = config.stash[_RUNTIME_SERVER] = runtime_model().serve(idle_timeout=600)
        return OpenAICompatibleModel(base_url=runtime.base_url + "/v1", api_key=LOCAL_KEY)
    server: Any = config.stash.get(_SERVER, None)
    if server is None or not server.running:
        server = config.stash[_SERVER] = directive_model().serve(idle_timeout=600)
    return OpenAICompatibleModel(
        base_url=server.base_url + "/v1", api_key=LOCAL_KEY, model="scripted"
    )


def _cost(item: pytest.Item) -> int:
    """How costly a test is likely to be: 0 (the real runtime, subprocesses) to 3."""
    if item.get_closest_marker("e2e") is not None:
        return 0
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        return 1
    return 2 if "pytester" in getattr(item, "fixturenames", ()) else 3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the modules with the costliest tests run first.

    README's test command hands tests to the workers a few at a time
    (``--maxschedchunk``) in this order, so the long tests are spread over the workers
    early and the run ends on short ones instead of a long tail. A module's tests stay
    together, in their order. Each worker sorts the same collection the same way; a run
    without xdist keeps pytest's order.
    """
    if not hasattr(config, "workerinput"):
        return
    rank: dict[Path, int] = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, 3), _cost(item))
    order = {id(item): n for n, item in enumerate(items)}

    def key(item: pytest.Item) -> tuple[int, int]:
        return rank[item.path], order[id(item)]

    items.sort(key=key)


_COLLECTOR_PAUSED = pytest.StashKey[bool]()


# What this suite needs from README's first command: two plugins registered (the
# package's own, whose hook this conftest implements, and pytest-asyncio, whose ini
# option pyproject.toml sets: missing, each is an INTERNALERROR) and the packages the
# test modules import (missing, a collection error per module).
_NEEDED_PLUGINS = {"dsh_replay": "pytest-dsh-replay itself", "asyncio": "pytest-asyncio"}
_NEEDED_MODULES = {"syrupy": "syrupy", "hypothesis": "hypothesis", "zstandard": "zstandard"}
_INSTALL = "python3 -m pip install -e '.[test]'"


def _refuse_an_environment_without_the_test_extras(config: pytest.Config) -> None:
    """Stop at once, saying what to install, in an interpreter without the test extras."""
    from importlib.util import find_spec

    missing = [
        what for name, what in _NEEDED_PLUGINS.items() if not config.pluginmanager.hasplugin(name)
    ]
    missing += [what for name, what in _NEEDED_MODULES.items() if find_spec(name) is None]
    if missing:
        raise pytest.UsageError(
            f"this test suite needs the project and its test extras installed in the "
            f"interpreter that runs it ({sys.executable}); missing: {', '.join(missing)}. "
            f"Install them from the repository's root (README's quick start): {_INSTALL}"
        )


def pytest_configure(config: pytest.Config) -> None:
    """Check the environment, then pause the cyclic garbage collector during collection.

    Collection imports the SDKs and the test modules: objects that live as long as the
    process, which the collector's full passes kept walking again as the heap grew (a
    quarter of each worker's collection CPU). Resumed when collection ends, or at the
    latest when the run ends. Not in an xdist controller, which collects nothing.
    """
    _refuse_an_environment_without_the_test_extras(config)
    if getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        return
    config.stash[_COLLECTOR_PAUSED] = gc.isenabled()
    gc.disable()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Exempt what exists once the tests are collected from the cyclic garbage collector.

    The modules, the SDKs and the collected tests live as long as the process; each full
    collection (the interpreter's own as the heap grows, and pytest's five at the end of
    the session) walked all of them again, about a tenth of the in-process tests' CPU.
    Garbage the tests make is collected as before, less often. Frozen once per process: an inner run
    that copies this conftest into an in-process pytester run leaves the outer process's
    objects as they are.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        # The youngest generation collected every 20,000 new objects instead of 700:
        # a test's cycles are still collected, in fewer, larger passes.
        gc.set_threshold(20_000, 20, 20)
    _resume_the_collector(session.config)


def _resume_the_collector(config: pytest.Config) -> None:
    if config.stash.get(_COLLECTOR_PAUSED, False):
        config.stash[_COLLECTOR_PAUSED] = False
        gc.enable()


def pytest_unconfigure(config: pytest.Config) -> None:
    _resume_the_collector(config)
    for key in (_SERVER, _RUNTIME_SERVER):
        server = config.stash.get(key, None)
        if server is not None:
            server.stop()


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest's ``tmp_path``, made in constant time: a new, empty directory per test.

    Like pytest's, it is private to the test (mode 0o700), lies in the session's base
    temporary directory and is named after the test; pytest numbers its directories by
    listing every earlier one of the same name, which a module of 1,200 parametrized
    tests paid on each of them (about 1.5 ms a test, 3,300 tests here).
    """
    name = re.sub(r"[\W]", "_", request.node.name)[:30]
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="session", autouse=True)
def _the_shared_corpus_is_left_as_it_was() -> Iterator[None]:
    """Fail the run when its tests leave a new file in the shared corpus, or remove one.

    Other runs read the corpus beside the clone at the same time; a hang entry's ready
    file written there once went unnoticed (``workdir=`` the scenario's own directory).
    """
    from support.corpus_support import corpus_changes, corpus_listing

    before = corpus_listing()
    yield
    problem = corpus_changes(before, corpus_listing())
    if problem is not None:
        pytest.fail(problem, pytrace=False)
