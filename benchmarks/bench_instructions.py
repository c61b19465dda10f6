"""CPU instructions per unit of work, counted by valgrind's callgrind: an A/B on a noisy machine.

Timings on a shared machine move by 10 to 40 % between runs; instruction counts do not
(the same code, inputs and interpreter give the same count, whatever else runs). Each
workload runs twice in a fresh interpreter under ``valgrind --tool=callgrind``, once with
``small`` units of work and once with ``large``; the difference divided by
``large - small`` is what one unit costs, so start-up and warm-up cancel out:

- ``load``: loading every scenario of the corpus (one pass);
- ``replay``: replaying every call of the corpus through ``ReplayModel.stream``, a new
  model per scenario (one pass), and ``areplay`` the same through ``astream``;
- ``endpoint``: one 50-chunk streamed call of the ``openai`` SDK through
  ``DshReplay.openai_client()`` (needs ``openai``);
- ``replay_test``: one replaying test as the plugin runs it (``profile_test.py``'s loop:
  open through the run's scenario cache, one 50-chunk call, the end-of-test check,
  close), each test its own scenario; ``replay_test_shared`` the same, every test
  replaying one scenario;
- ``first_chunk``: a fresh interpreter importing the package, loading a one-call scenario
  and reading its first chunk, over one that only imports ``orjson`` (the floor);
- ``chat`` / ``chat_floor``: ``bench_endpoint.py``'s ``endpoint`` and ``floor`` sides,
  one 50-chunk streamed chat completion of the ``openai`` SDK through
  ``DshReplay.openai_client()`` (each call a new recorded entry), and the SDK parsing the
  same frames from prebuilt ``httpx.MockTransport`` responses (needs ``openai``);
- ``responses`` / ``responses_floor``: ``bench_responses.py``'s two sides, one 50-chunk
  OpenAI Responses call of the ``openai`` SDK through ``DshReplay.openai_client()``
  (each call a new recorded entry), and the SDK parsing the same event bytes from
  prebuilt ``httpx.MockTransport`` responses (needs ``openai``);
- ``ollama_call`` / ``ollama_call_floor``, ``bedrock_call`` / ``bedrock_call_floor``:
  ``bench_wire_floor.py``'s two sides of that wire, one 50-chunk
  ``chat(stream=True)`` of the ``ollama`` client through ``DshReplay.client("ollama")``
  (each call a new recorded entry), and the client parsing the same NDJSON lines from
  prebuilt ``httpx.MockTransport`` responses (needs ``ollama``); both sides collect and
  freeze the heap after the warm-up call, so a collection in the window scans only what
  the calls made;
- ``endpoint_again``: the same 50-chunk streamed call answered by a new test's model
  endpoint each time (``Endpoint.handle``, no SDK), the scenario loaded once: what a
  suite of tests replaying one scenario over HTTP costs per test in the endpoint;
- ``test_again``: a replaying test's in-process work (``DshReplay.open`` through the
  plugin's kind of ``ScenarioCache``, the call through ``model.stream``, ``finish``,
  ``close``), every test the same scenario;
- ``pytest_test`` / ``pytest_same``: one replaying test in a ``pytest`` run
  (``bench_suite.py``'s ``test_replay``, 20 and 120 tests, a unit is a test), each test
  its own scenario / every test the same scenario;
- ``pytest_sdk`` / ``pytest_sdk_floor`` / ``pytest_cassetter``: one test of
  ``bench_suite.py``'s ``sdk``, ``sdk_floor`` and ``cassetter`` suites in a ``pytest`` run
  (2 and 12 tests; a unit is a test): a 50-chunk chat call of the ``openai`` SDK through
  ``dsh_replay.openai_client()``, from prebuilt bytes, and under cassetter (issue 45;
  ``pytest_cassetter`` runs in ``--cassetter-python``'s interpreter).

Compare two trees by pointing ``PYTHONPATH`` at each::

    PYTHONPATH=. python3 benchmarks/bench_instructions.py
    PYTHONPATH=/path/to/other/checkout python3 benchmarks/bench_instructions.py

Prints one JSON line. Needs ``valgrind`` on the PATH; takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "corpus" / "dsh-harness"

_SCENARIOS = """
import os, sys
from pytest_dsh_replay import DshReplayError, load_scenario
ROOT = sys.argv[1]
DIRS = [os.path.join(ROOT, d) for d in sorted(os.listdir(ROOT))]
DIRS = [d for d in DIRS if os.path.isdir(d)]
"""

# The corpus loaded once, for the replay workloads, and the request every call sends.
_LOADED = (
    _SCENARIOS
    + """
from pytest_dsh_replay import HangEntry, ReplayModel, ReplayedModelError
LOADED = []
for d in DIRS:
    try:
        LOADED.append(load_scenario(d))
    except DshReplayError:
        pass
REQUEST = {"messages": [{"role": "user", "content": "hi"}]}
"""
)

# One replaying test as the plugin runs it (benchmarks/profile_test.py's loop): open the
# scenario through the run's cache, read its one 50-chunk call, finish (the log check)
# and close; each test its own scenario, or every test the same one.
_REPLAY_TEST = """
import itertools, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bench_suite import REQUEST, write_scenarios
from pytest_dsh_replay import DshReplay
from pytest_dsh_replay._format.redact import recording_redactor
from pytest_dsh_replay._scripts.loading import ScenarioCache
ROOT = Path(tempfile.mkdtemp())
write_scenarios(ROOT, 64, 50)
SCENARIOS = (ROOT / f"s{n:05d}" for n in itertools.count())
CACHE = ScenarioCache()
REDACTOR = recording_redactor()
WORK = itertools.count()
def one_test(path):
    replay = DshReplay.open(path, cache=CACHE, workdir=ROOT / f"w{next(WORK)}", redactor=REDACTOR)
    for _chunk in replay.model.stream(REQUEST):
        pass
    replay.finish()
    replay.close()
"""

WORKLOADS = {
    "load": _SCENARIOS
    + """
def unit():
    for d in DIRS:
        try:
            load_scenario(d)
        except DshReplayError:
            pass
""",
    "replay": _LOADED
    + """
def unit():
    for scenario in LOADED:
        model = ReplayModel(scenario)
        for script in scenario.scripts:
            for entry in script.entries:
                stream = model.stream(REQUEST, session_id=script.file)
                if isinstance(entry, HangEntry) or entry.has_placeholders:
                    continue
                try:
                    for _ in stream:
                        pass
                except ReplayedModelError:
                    pass
""",
    "areplay": _LOADED
    + """
import asyncio
async def apass():
    for scenario in LOADED:
        model = ReplayModel(scenario)
        for script in scenario.scripts:
            for entry in script.entries:
                stream = model.astream(REQUEST, session_id=script.file)
                if isinstance(entry, HangEntry) or entry.has_placeholders:
                    continue
                try:
                    async for _ in stream:
                        pass
                except ReplayedModelError:
                    pass
def unit():
    asyncio.run(apass())
""",
    "endpoint": """
import sys, tempfile
from pathlib import Path
from pytest_dsh_replay import DshReplay, SessionHeader, write_scenario
class Log:
    def __init__(self, header, events):
        self.header, self.events = header, events
def chunks(n):
    deltas = [f"word{n}-{k} " for k in range(46)]
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        *({"type": "text-delta", "index": 0, "text": d} for d in deltas),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(deltas)}},
        {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 46}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
TMP = Path(tempfile.mkdtemp())
CALLS = 200
events = [
    {"type": "assistant/chunk", "data": {"turn": n + 1, "step": 1, "chunk": c}}
    for n in range(CALLS) for c in chunks(n)
]
write_scenario(TMP / "s", [Log(SessionHeader(id="s", created_at=1), events)])
REPLAY = DshReplay.open(TMP / "s", workdir=TMP / "w", compare_logs=False)
CLIENT = REPLAY.openai_client(max_retries=0)
def unit():
    stream = CLIENT.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True}, extra_headers={"x-dsh-session-id": "s"},
    )
    for _ in stream:
        pass
""",
    "replay_test": _REPLAY_TEST
    + """
def unit():
    one_test(next(SCENARIOS))
""",
    "replay_test_shared": _REPLAY_TEST
    + """
def unit():
    one_test(ROOT / "s00000")
""",
}

# A one-call, 50-chunk scenario as --dsh-record writes it, the request an SDK sends.
_ONE_CALL = """
import sys, tempfile
from pathlib import Path
from pytest_dsh_replay import DshReplay, write_scenario
from pytest_dsh_replay._scripts.loading import ScenarioCache
DELTAS = [f"word-{k} " for k in range(46)]
CHUNKS = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    *({"type": "text-delta", "index": 0, "text": d} for d in DELTAS),
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(DELTAS)}},
    {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 46}},
    {"type": "finish", "reason": {"kind": "stop"}},
]
TMP = Path(tempfile.mkdtemp())
from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore
class Scripted:
    def stream(self, request, **kwargs):
        yield from (dict(c) for c in CHUNKS)
STORE = SessionStore(MemoryBackend())
RECORDER = RecordingModel(Scripted(), STORE)
for _ in RECORDER.stream({"messages": [{"role": "user", "content": "hi"}]}, session_id="s"):
    pass
RECORDER.close_open_calls()
write_scenario(TMP / "s", STORE.sessions())
try:
    CACHE = ScenarioCache(recheck=False)  # the plugin's
except TypeError:
    CACHE = ScenarioCache()  # older code: it had one kind
"""

# bench_responses.py's and bench_endpoint.py's sides: one 50-chunk Responses (or chat
# completions) call of the openai SDK through DshReplay.openai_client() (each call a new
# recorded entry), and the SDK's floor (the same bytes from prebuilt httpx MockTransport
# responses).
_RESPONSES = """
import sys
sys.path.insert(0, sys.argv[1])
import tempfile
from pathlib import Path
from bench_endpoint import call_chunks, floor_client, make_scenario
from bench_responses import event_bytes, read_call
from pytest_dsh_replay._fixture.dsh_replay import DshReplay
TMP = Path(tempfile.mkdtemp())
CALLS = 200
"""

WORKLOADS["responses"] = (
    _RESPONSES
    + """
REPLAY = DshReplay.open(make_scenario(TMP, CALLS), workdir=TMP, compare_logs=False)
CLIENT = REPLAY.openai_client(max_retries=0)
read_call(CLIENT)  # warm-up: the SDK's first parse of each event type
def unit():
    read_call(CLIENT)
"""
)

WORKLOADS["responses_floor"] = (
    _RESPONSES
    + """
CLIENT, _close = floor_client([event_bytes(call_chunks(n), n + 1) for n in range(CALLS)])
read_call(CLIENT)
def unit():
    read_call(CLIENT)
"""
)

WORKLOADS["chat"] = (
    _RESPONSES
    + """
from bench_endpoint import read_call as read_chat
REPLAY = DshReplay.open(make_scenario(TMP, CALLS), workdir=TMP, compare_logs=False)
CLIENT = REPLAY.openai_client(max_retries=0)
read_chat(CLIENT)  # warm-up: the SDK's first parse
def unit():
    read_chat(CLIENT)
"""
)

WORKLOADS["chat_floor"] = (
    _RESPONSES
    + """
from bench_endpoint import read_call as read_chat, sse_bytes
CLIENT, _close = floor_client(
    [sse_bytes(call_chunks(n), f"chatcmpl-dsh-replay-{n + 1}") for n in range(CALLS)]
)
read_chat(CLIENT)
def unit():
    read_chat(CLIENT)
"""
)


def _wire_call(wire: str, side: str) -> str:
    """``bench_wire_floor.py``'s ``side`` (``endpoint`` or ``floor``) of ``wire``: one call."""
    opened = (
        "SIDE.floor([SIDE.encoded(call_chunks(n)) for n in range(CALLS)])"
        if side == "floor"
        else "_endpoint_client(SIDE, make_scenario(TMP, CALLS), TMP)"
    )
    return f"""
import sys, tempfile
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from bench_endpoint import call_chunks, make_scenario
from bench_wire_floor import SIDES, _endpoint_client
TMP = Path(tempfile.mkdtemp())
CALLS = 200
SIDE = SIDES[{wire!r}]
CLIENT, _close = {opened}
SIDE.read_call(CLIENT)  # warm-up: the client's first parse
# Both sides start the window from a collected heap, what the set-up built (the client,
# the scenario) frozen: a collection in the window scans what the calls made, so where
# one falls moves the figure little.
import gc
gc.collect()
gc.freeze()
def unit():
    SIDE.read_call(CLIENT)
"""


for _wire in ("ollama", "bedrock"):
    WORKLOADS[f"{_wire}_call"] = _wire_call(_wire, "endpoint")
    WORKLOADS[f"{_wire}_call_floor"] = _wire_call(_wire, "floor")


WORKLOADS["endpoint_again"] = (
    _ONE_CALL
    + """
import orjson
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._replay.model import ReplayModel
SCENARIO = CACHE.load(TMP / "s")
BODY = orjson.dumps({
    "model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
    "stream_options": {"include_usage": True},
})
HEADERS = {"x-dsh-session-id": "s", "content-type": "application/json"}
def unit():
    endpoint = Endpoint.replaying(ReplayModel(SCENARIO))
    response = endpoint.handle("POST", "/v1/chat/completions", HEADERS, BODY)
    assert response.status == 200
    b"".join(response.body)
"""
)

WORKLOADS["test_again"] = (
    _ONE_CALL
    + """
from pytest_dsh_replay._format.redact import recording_redactor
REDACTOR = recording_redactor()
REQUEST = {"messages": [{"role": "user", "content": "hi"}]}
N = [0]
def unit():
    N[0] += 1
    replay = DshReplay.open(TMP / "s", cache=CACHE, workdir=TMP / str(N[0]), redactor=REDACTOR)
    for _ in replay.model.stream(REQUEST):
        pass
    replay.finish()
    replay.close()
"""
)

# bench_suite.py's replay module; "same": every test replays the first scenario.
_PYTEST_SAME = """
REQUEST = {"messages": [{"role": "user", "content": "hi"}]}

@pytest.mark.parametrize(
    "n", [pytest.param(n, marks=pytest.mark.dsh_scenario("s00000")) for n in range(N)]
)
def test_replay(n, dsh_replay):
    for _chunk in dsh_replay.model.stream(REQUEST):
        pass
"""


def _pytest_project(root: Path, name: str, tests: int, python: str) -> tuple[Path, list[str]]:
    """The project of the ``pytest_*`` workload ``name`` for ``tests`` tests: its
    directory and the options its run takes."""
    sys.path.insert(0, str(HERE))
    import bench_suite

    project = root / name
    (project / "dsh_snapshots").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    if name in ("pytest_test", "pytest_same"):
        same = name == "pytest_same"
        module = bench_suite.HEADER + (_PYTEST_SAME if same else bench_suite.MODULES["replay"])
        (project / "test_replay.py").write_text(module)
        bench_suite.write_scenarios(project / "dsh_snapshots", 1 if same else tests, 50)
        return project, ["test_replay.py"]
    suite = name.removeprefix("pytest_")
    (project / f"test_{suite}.py").write_text(bench_suite.HEADER + bench_suite.MODULES[suite])
    if suite == "sdk":
        scratch = project / "scratch"
        scratch.mkdir()
        bench_suite.write_sdk_scenarios(project, scratch, tests, 50)
        shutil.rmtree(scratch)
        return project, ["test_sdk.py"]
    if suite == "sdk_floor":
        (project / "bench_body.py").write_text(f"BODY = {bench_suite._sse_body(50)!r}\n")
        return project, ["-p", "no:dsh_replay", "test_sdk_floor.py"]
    bench_suite.write_cassetter_cassettes(project, python, tests, 50)
    no = ["-p", "no:recording", "-p", "no:dsh_replay", "--record-mode=none"]
    return project, [*no, "test_cassetter.py"]


def pytest_instructions(root: Path, name: str, small: int, large: int, python: str) -> int:
    """Instructions per test of ``bench_suite.py``'s tests of the workload ``name`` (a
    ``pytest`` run of ``small`` and of ``large`` tests, in the interpreter ``python``)."""
    project, options = _pytest_project(root, name, large, python)
    counts = []
    for tests in (small, large):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env["DSH_BENCH_TESTS"] = str(tests)
        with tempfile.TemporaryDirectory() as out:
            done = subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={out}/callgrind.out",
                    python,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "no:xdist",
                    "-p",
                    "no:randomly",
                    f"--basetemp={out}/base",
                    *options,
                ],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        found = _collected(done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"bench_instructions: pytest failed:\n{done.stdout[-2000:]}")
        counts.append(found)
    return (counts[1] - counts[0]) // (large - small)


PYTEST_WORKLOADS = (
    "pytest_test",
    "pytest_same",
    "pytest_sdk",
    "pytest_sdk_floor",
    "pytest_cassetter",
)

_RUNNER = """
{code}
unit()  # warm: imports, caches, first bindings
for _ in range(int(sys.argv[-1])):
    unit()
"""

_FIRST_CHUNK = """
import sys
import pytest_dsh_replay
if sys.argv[-1] == "floor":
    import orjson
else:
    from pytest_dsh_replay import ReplayModel, load_scenario
    model = ReplayModel(load_scenario(sys.argv[1]))
    next(iter(model.stream({"messages": [{"role": "user", "content": "hi"}]})))
"""


def _collected(stderr: str) -> int | None:
    """The instructions of the process valgrind started (a forked child reports too)."""
    first = re.search(r"^==(\d+)==", stderr, re.MULTILINE)
    if first is None:
        return None
    found = re.search(rf"^=={first.group(1)}== Collected : (\d+)", stderr, re.MULTILINE)
    return None if found is None else int(found.group(1))


def instructions(script: Path, args: list[str]) -> int:
    """The instructions callgrind counts for one run of ``script``."""
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}/callgrind.out",
                sys.executable,
                str(script),
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
            # one string hashing on every run: set iteration and dict sizes repeat
            env={**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")},
        )
    found = _collected(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"bench_instructions: {script.name} failed:\n{done.stderr[-2000:]}")
    return found


def one_call_scenario(root: Path) -> Path:
    """A scenario with one recorded call, as ``--dsh-record`` writes it."""
    from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore, write_scenario

    class Scripted:
        def stream(self, request: object, **kwargs: object) -> object:
            yield {"type": "text-delta", "index": 0, "text": "hi"}
            yield {"type": "finish", "reason": {"kind": "stop"}}

    store = SessionStore(MemoryBackend())
    model = RecordingModel(Scripted(), store)
    list(model.stream({"messages": [{"role": "user", "content": "hi"}]}))
    model.close_open_calls()
    write_scenario(root / "one", store.sessions())
    return root / "one"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--small", type=int, default=1, help="units in the short run (1)")
    parser.add_argument("--large", type=int, default=4, help="units in the long run (4)")
    parser.add_argument(
        "--cassetter-python",
        metavar="PYTHON",
        help="for pytest_cassetter: the interpreter of a venv with cassetter (bench_suite.py)",
    )
    parser.add_argument(
        "--workloads",
        default="load,replay,areplay,endpoint,first_chunk,replay_test,replay_test_shared",
        help="which ones",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions: valgrind is not on the PATH")
    result: dict[str, object] = {"benchmark": "instructions"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in args.workloads.split(","):
            script = root / f"{name}.py"
            if name in PYTEST_WORKLOADS:
                python = args.cassetter_python if name == "pytest_cassetter" else sys.executable
                if python is None:
                    raise SystemExit("bench_instructions: give pytest_cassetter --cassetter-python")
                small, large = (20, 120) if name in ("pytest_test", "pytest_same") else (2, 12)
                per_test = pytest_instructions(root, name, small, large, python)
                result[name] = {"per_unit": per_test}
                continue
            if name == "first_chunk":
                script.write_text(textwrap.dedent(_FIRST_CHUNK))
                scenario = str(one_call_scenario(root))
                ours = instructions(script, [scenario, "first"])
                floor = instructions(script, [scenario, "floor"])
                result[name] = {"over_floor": ours - floor, "floor": floor}
                continue
            script.write_text(_RUNNER.format(code=WORKLOADS[name]))
            extra = [str(args.corpus)] if name in ("load", "replay", "areplay") else []
            if name.startswith(("replay_test", "responses", "chat", "ollama", "bedrock")):
                extra = [str(HERE)]
            small = instructions(script, [*extra, str(args.small)])
            large = instructions(script, [*extra, str(args.large)])
            result[name] = {"per_unit": (large - small) // (args.large - args.small)}
    result["pythonpath"] = os.environ.get("PYTHONPATH", "")
    result["python"] = platform.python_version()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
