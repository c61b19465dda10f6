"""End-to-end tests: the real dsh runtime, and recordings made in subprocesses."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support.inner_runs import _http_libraries_outlive_inner_runs, _quiet_third_party_config

__all__ = [
    "_http_libraries_outlive_inner_runs",
    "_node_compile_cache",
    "_quiet_third_party_config",
]


@pytest.fixture(scope="session", autouse=True)
def _node_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One V8 compile cache for every dsh runtime this session (or xdist worker) starts.

    The runtime is a Node single executable: with ``NODE_COMPILE_CACHE`` it keeps the
    code it compiled at start in that directory, and later starts read it back (about
    0.1 s of its ~1.3 s of CPU per start). The directory is under the session's basetemp
    (per xdist worker), shared by the runtimes of inner pytest runs, which inherit the
    variable; ``DSH_HOME`` and everything else stay per test (``RuntimeDriver``).
    """
    previous = os.environ.get("NODE_COMPILE_CACHE")
    os.environ["NODE_COMPILE_CACHE"] = str(tmp_path_factory.mktemp("node-compile-cache"))
    yield
    if previous is None:
        del os.environ["NODE_COMPILE_CACHE"]
    else:
        os.environ["NODE_COMPILE_CACHE"] = previous
