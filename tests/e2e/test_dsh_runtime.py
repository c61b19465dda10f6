"""The real dsh runtime, recorded and replayed through the plugin (the ``e2e`` extra).

Each test starts the runtime (``runtime_agent.RuntimeDriver``) against
``dsh_replay.base_url``, with ``DSH_HOME``, the working directory and the sessions root
in its temporary directory, and hands the runtime's own logs to the fixture
(``dsh_replay.use_sessions``). In the normal run the scenarios in ``example_snapshots/``
replay with no other server: the runtime's requests bind by its session header, its
children by their parent, seed and first message; the recorded order of calls across
sessions is kept; and the logs the runtime writes must show the model what the
recording shows it. The transcripts are under syrupy.

Re-record them (a scripted server on 127.0.0.1 plays the model, see ``tests/conftest.py``)::

    python3 -m pytest tests/e2e/test_dsh_runtime.py --dsh-record --snapshot-update
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from support.runtime_agent import (
    PRIMARY_ID,
    ROUTES,
    SCENARIOS,
    RuntimeDriver,
    runtime_missing,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(runtime_missing() is not None, reason=str(runtime_missing())),
]

CHILDREN: dict[str, list[str]] = {  # the children each scenario's primary starts
    "runtime-spawn": ["spawn"],
    "runtime-fork": ["fork"],
    "runtime-mixed": ["spawn", "fork"],
    "runtime-retry": ["spawn"],
    "runtime-openai": ["spawn", "fork"],
    "runtime-parallel": ["spawn", "spawn", "fork"],
    "runtime-parallel-openai": ["spawn", "spawn", "fork"],
}


def examples(**marker: Any) -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.dsh_scenario(name, **marker), id=name)
        for name in SCENARIOS
    ]


def drive(dsh_replay: Any, workdir: Path, name: str) -> RuntimeDriver:
    """Run one scenario's prompts in the runtime; it is stopped when this returns."""
    route = ROUTES.get(name, "messages")
    with RuntimeDriver(dsh_replay.base_url, workdir, route=route) as runtime:
        dsh_replay.use_sessions(runtime.root, PRIMARY_ID)
        assert runtime.run(SCENARIOS[name]) == ["OK remembered", "DELEGATED"]
    return runtime


def kinds(dsh_replay: Any) -> list[str]:
    """The runtime's children in this run, as the recording orders them."""
    return [
        "fork" if log.header.seeded else "spawn"
        for log in dsh_replay.redacted_sessions()
        if log.header.parent_session is not None
    ]


@pytest.mark.parametrize("name", examples())
def test_runtime_example(name: str, dsh_replay: Any, tmp_path: Path, dsh_transcript: Any) -> None:
    machine_tmp = set(Path(tempfile.gettempdir()).iterdir())
    runtime = drive(dsh_replay, tmp_path, name)
    # Its temporary files (a spill directory, a native loader's copy) went to the test's
    # directory (RuntimeDriver's TMPDIR), not to the machine's /tmp.
    new = {p.name for p in set(Path(tempfile.gettempdir()).iterdir()) - machine_tmp}
    assert not {n for n in new if n.startswith(("dsh-", "node-addon-"))}
    assert any((tmp_path / "tmp").iterdir())
    # The runtime copied its native modules into the one directory of this worker
    # (tests/e2e/conftest.py), not into the test's home (pytester's HOME): 81 MB a run.
    assert not (Path(os.environ["HOME"]) / ".cache" / "pkg").exists()
    assert (Path(os.environ["PKG_NATIVE_CACHE_PATH"]) / "pkg").is_dir()
    assert sorted(kinds(dsh_replay)) == sorted(CHILDREN[name])
    assert len(runtime.children) == len(CHILDREN[name])
    if dsh_replay.mode == "replay":
        # Children come under fresh ids, in any order: each binds to the recorded child
        # of its kind (parent, seed, first message), never to "the next file".
        scripts = {s.file: s for s in dsh_replay.scenario.scripts}
        bindings = dsh_replay.model.bindings
        if name in ROUTES:  # no session identity on the wire: the endpoint names them
            assert sorted(b.file for b in bindings.values()) == sorted(scripts)
            assert not set(bindings) & {PRIMARY_ID, *runtime.children}
        for live in set(runtime.children) & set(bindings):
            recorded = scripts[bindings[live].file]
            assert recorded.recorded_id != live
            assert recorded.parent_session == PRIMARY_ID
        if name == "runtime-retry":
            check_retries(dsh_replay)
    assert dsh_replay.transcript() == dsh_transcript


def check_retries(dsh_replay: Any) -> None:
    """The runtime's retries of a recorded 429 and 500 replayed the same way."""
    # Failed attempts are calls of their own: the primary's 429 before its warm-up
    # answer, the child's 500 before its answer.
    primary, child = dsh_replay.scenario.scripts
    statuses = [
        [e.chunks[-1]["reason"].get("failure", {}).get("status") for e in s.entries]
        for s in (primary, child)
    ]
    assert statuses[0][:2] == [429, None]
    assert statuses[1] == [500, None]
    # The runtime got the same failures again, and retried each once.
    for log, status in zip(dsh_replay.redacted_sessions(), (429, 500), strict=True):
        attempts = [e for e in log.events if e["type"] == "assistant/attempt"]
        retries = [e for e in log.events if e["type"] == "llm/retry"]
        failed = [a["data"]["stream"][-1]["chunk"]["reason"]["failure"] for a in attempts]
        assert [f["status"] for f in failed] == [status]
        assert [r["data"]["failure"]["status"] for r in retries] == [status]
