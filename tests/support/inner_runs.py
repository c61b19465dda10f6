"""What every inner pytest run (``pytester``) of the plugin and e2e tests starts with."""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import sys
from dataclasses import dataclass
from typing import Any

import pytest

# An in-process inner run drops from sys.modules what was first imported during its test;
# an HTTP library first imported there comes back to later tests as a second copy (httpx2
# then maps none of the second httpcore2's errors). Imported once per session, before any
# test's pytester takes its snapshot of sys.modules. The plugin's own modules too: it
# imports some lazily, and a second copy of one holds second copies of its classes.
# (Every test here gets a pytester, through the autouse fixture below.)
_HTTP_LIBRARIES = ("httpcore2", "httpcore", "httpx2", "httpx", "openai", "anthropic")


@pytest.fixture(scope="session", autouse=True)
def _http_libraries_outlive_inner_runs() -> None:
    for name in _HTTP_LIBRARIES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    package = importlib.import_module("pytest_dsh_replay")
    for module in pkgutil.walk_packages(package.__path__, "pytest_dsh_replay."):
        if not module.name.endswith(".__main__"):  # that one runs the command
            importlib.import_module(module.name)


@pytest.fixture(autouse=True)
def _quiet_third_party_config(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest-asyncio warns at start-up when its loop scope is unset, and the outer run
    # turns warnings into errors: every inner run sets it, as a user's project would.
    # (Set after pytester, which clears PYTEST_ADDOPTS when it starts.)
    # pytest-benchmark, when installed, warns under xdist: keep it out of inner runs.
    # Hypothesis and pytest-recording (vcr) are not used by any inner run and cost about
    # a second of start-up in every inner subprocess and xdist worker: keep them out too.
    # So is anyio's plugin (its import loads trio, a third of an inner pytest's start-up);
    # the one inner run that needs it asks for it with "-p anyio".
    # An inner run is a user's run, also when the outer one is an xdist worker: syrupy
    # and others read these variables to act as a worker (syrupy then reports nothing).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(
        "PYTEST_ADDOPTS",
        "-o asyncio_default_fixture_loop_scope=function"
        " -p no:benchmark -p no:hypothesispytest -p no:recording -p no:anyio",
    )


def scripted_proxy_conftest(module: str, factory: str) -> str:
    """An inner run's ``conftest.py`` that records from a scripted model on loopback.

    ``module.factory()`` makes a ``ScriptedModel``; it is served for the whole run and
    reached through the fixture's recording proxy (the built-in OpenAI-compatible
    adapter pointed at it), as a live provider would be.
    """
    return f"""
from {module} import {factory}

from pytest_dsh_replay._recording.live_openai import OpenAICompatibleModel

SERVER = {factory}().serve(idle_timeout=600)


def pytest_dsh_replay_live_model(config, scenario_path):
    return OpenAICompatibleModel(
        base_url=SERVER.base_url + "/v1", api_key="sk-local-0000000000000000"
    )


def pytest_unconfigure(config):
    SERVER.stop()
"""


def imported_before_inner_runs(*names: str, reason: str | None = None) -> Any:
    """A module-scoped autouse fixture that imports ``names`` (or skips the module's tests).

    For a test module whose inner runs use heavy SDKs: imported before any test's pytester
    takes its snapshot of ``sys.modules``, they outlive the inner runs, as a module-level
    ``pytest.importorskip`` would keep them, but when a test of the module first runs, not
    at collection: an xdist worker that runs none of the module's tests never imports them.
    Assign it to a module-level name.
    """

    @pytest.fixture(scope="module", autouse=True)
    def _sdks() -> None:
        for name in names:
            pytest.importorskip(name, reason=reason)

    return _sdks


ECHO_LIVE_CONFTEST = """
import pytest

class FakeLive:
    calls = 0

    def stream(self, request, **kwargs):
        FakeLive.calls += 1
        text = "live: " + request["messages"][-1]["content"]
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": text}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return FakeLive()
"""
"""An inner run's ``conftest.py`` whose live model answers ``live: <last user text>``
(``FakeLive.calls`` counts its calls).
"""


# One interpreter for several inner runs: pytest.main once per run, in the project's
# directory. Between runs, the files named are deleted and the modules imported from the
# project (its conftest, test modules, local modules) are dropped, so each run imports
# them afresh as a new process would; what came from elsewhere (the frameworks) stays
# imported, as it would stay in a user's long-lived process. After a run, the
# directories named in its "keep" are copied as they are then (files' times too).
# The cyclic collector runs less often (as in tests/conftest.py), and each run skips
# pytest's five full collections at its end, as pytester's in-process runs do: with a
# framework's thousands of pydantic models in the heap, they were a third of the child's
# CPU (about 1.5 s of the 5.5 s of docs/guide/openai-responses.md's two runs).
_CHILD = """
import gc
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from _pytest.unraisableexception import gc_collect_iterations_key

RUNS = json.loads(sys.argv[1])
HERE = os.path.realpath(os.getcwd()) + os.sep
gc.set_threshold(20_000, 20, 20)


class Outcomes:
    def __init__(self):
        self.counts = {}

    def pytest_configure(self, config):
        config.stash[gc_collect_iterations_key] = 0

    def pytest_terminal_summary(self, terminalreporter):
        for key, reports in terminalreporter.stats.items():
            if key:
                self.counts[key] = len(reports)


def project_modules():
    return [
        name
        for name, module in list(sys.modules.items())
        if os.path.realpath(getattr(module, "__file__", None) or "/").startswith(HERE)
    ]


results = []
for run in RUNS:
    for name in run["unlink"]:
        Path(name).unlink()
    for name in project_modules():
        del sys.modules[name]
    outcomes = Outcomes()
    code = pytest.main(run["args"], plugins=[outcomes])
    results.append({"ret": int(code), "outcomes": outcomes.counts})
    for name, copy in run["keep"].items():
        shutil.copytree(name, copy)
print("INNER RUNS: " + json.dumps(results))
"""


@dataclass(frozen=True)
class InnerRun:
    """One inner pytest run of :func:`runpytest_in_one_child`.

    Attributes:
        args: pytest's arguments.
        unlink: Files of the project to delete before the run (relative to its root).
        keep: Directories of the project to copy once the run ended, as they are then
            (with their files' modification times), to ``<name>.after-<n>`` (``n``: the
            run's place among the runs, from 0): what the run left, for the test to
            compare with what later runs leave.
    """

    args: tuple[str, ...] = ()
    unlink: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class InnerOutcome:
    """How one inner run of :func:`runpytest_in_one_child` ended."""

    ret: int
    outcomes: dict[str, int]


def runpytest_in_one_child(
    pytester: pytest.Pytester, *runs: InnerRun
) -> tuple[list[InnerOutcome], pytest.RunResult]:
    """Run ``runs`` one after the other in one subprocess of their own.

    For projects whose framework keeps process-wide state or imports lazily (which an
    in-process run would leave behind in, or take away from, the outer process): one
    interpreter start and one import of the framework for all the runs instead of one
    per run. Returns each run's exit code and outcome counts, and the subprocess's
    result (its output, for a failure's message).
    """
    spec = [
        {
            "args": [f"--basetemp={pytester.path / f'basetemp-{n}'}", *r.args],
            "unlink": list(r.unlink),
            "keep": {name: f"{name}.after-{n}" for name in r.keep},
        }
        for n, r in enumerate(runs)
    ]
    result = pytester.run(sys.executable, "-c", _CHILD, json.dumps(spec))
    line = next(
        (text for text in reversed(result.outlines) if text.startswith("INNER RUNS: ")), None
    )
    assert line is not None, result.stdout.str() + result.stderr.str()
    ran = json.loads(line.removeprefix("INNER RUNS: "))
    return [InnerOutcome(r["ret"], r["outcomes"]) for r in ran], result
