"""End-to-end tests: the real dsh runtime, and recordings made in subprocesses."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support.inner_runs import _http_libraries_outlive_inner_runs, _quiet_third_party_config

__all__ = [
    "_http_libraries_outlive_inner_runs",
    "_quiet_third_party_config",
    "_shared_runtime_caches",
]


@pytest.fixture(scope="session", autouse=True)
def _shared_runtime_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One V8 compile cache and one native-module copy for every dsh runtime started here.

    The runtime is a Node single executable. With ``NODE_COMPILE_CACHE`` it keeps the
    code it compiled at start in that directory, and later starts read it back (about
    0.1 s of its ~1.3 s of CPU per start). At every start it also copies the packages of
    its native modules (~3,700 files, 81 MB) out of the executable into
    ``$PKG_NATIVE_CACHE_PATH/pkg/<hash>`` (``~/.cache`` when unset) and leaves a copy
    already there in place. pytester points ``HOME`` at each test's own directory, so
    without the variable every runtime run wrote its own 81 MB, and pytest's clean-up
    of old basetemps deleted them again. Both directories are under the session's
    basetemp (per xdist worker: no two workers write one file), shared by the runtimes
    of inner pytest runs, which inherit the variables; ``DSH_HOME`` and everything else
    stay per test (``RuntimeDriver``).
    """
    shared = {
        "NODE_COMPILE_CACHE": tmp_path_factory.mktemp("node-compile-cache"),
        "PKG_NATIVE_CACHE_PATH": tmp_path_factory.mktemp("node-native-modules"),
    }
    previous = {name: os.environ.get(name) for name in shared}
    os.environ.update({name: str(path) for name, path in shared.items()})
    yield
    for name, value in previous.items():
        if value is None:
            del os.environ[name]
        else:
            os.environ[name] = value
