"""docs/architecture.md's "Adding a wire" example runs: its module and its table entry.

The example wire module is executed as ``_wire/gateway.py`` would be, entered in the
wires' table as the page says, and then served: the endpoint answers its route, the
endpoint's variables and the recording's redacted variables include its own.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

import orjson
import pytest

from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript
from pytest_dsh_replay._wire import table
from pytest_dsh_replay._wire.framing import SSEParser

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
TABLE = ROOT / "pytest_dsh_replay" / "_wire" / "table.py"


def _example() -> tuple[str, str]:
    """The example's two code blocks: the wire module and the table entry."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Adding a wire {#adding-a-wire}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python[^\n]*\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 2, "the example is a module and a table entry"
    return blocks[0], blocks[1].strip()


def _gateway() -> types.ModuleType:
    module_code, _ = _example()
    module = types.ModuleType("pytest_dsh_replay._wire.gateway")
    module.__package__ = "pytest_dsh_replay._wire"
    exec(compile(module_code, str(PAGE), "exec"), module.__dict__)  # the page's code
    return module


def test_the_table_entry_is_the_table_s_line_with_the_new_wire() -> None:
    _, entry = _example()
    source = TABLE.read_text(encoding="utf-8")
    found = re.search(r"^WIRES: Final\[tuple\[Wire, \.\.\.\]\] = \((.*?)\)$", source, re.S | re.M)
    assert found is not None, "the table is one WIRES tuple"
    table_wires = re.findall(r"\w+\.WIRE", found.group(1))
    assert entry.startswith("WIRES: Final[tuple[Wire, ...]] = (")
    page_wires = re.findall(r"\w+\.WIRE", entry)
    # the page's entry is the table's first wires (more may follow them) and the new one
    assert page_wires[-1] == "gateway.WIRE"
    assert table_wires[: len(page_wires) - 1] == page_wires[:-1]
    assert len(table_wires) >= len(page_wires) - 1


def test_the_example_wire_is_served_once_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = _gateway().WIRE
    monkeypatch.setattr(table, "WIRES", (*table.WIRES, wire))
    for route in wire.routes:
        monkeypatch.setitem(table.ROUTES, route, wire)
    script = SessionScript(
        file="session.jsonl",
        recorded_id="rec",
        created_at=0,
        seed_length=0,
        parent_session=None,
        primary=True,
        entries=(
            ChunksEntry(
                [
                    {"type": "text-delta", "index": 0, "text": "Paris"},
                    {"type": "finish", "reason": {"kind": "stop"}},
                ]
            ),
        ),
        first_user_text="capital?",
    )
    endpoint = Endpoint.replaying(ReplayModel(Scenario(Path("mem"), (script,))))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "capital?"}]}
    response = endpoint.handle("POST", "/gateway/v1/chat/completions", {}, orjson.dumps(body))
    assert response.status == 200
    events = SSEParser().feed(b"".join(response.body))
    assert events[-1] == (None, "[DONE]")
    texts = [orjson.loads(data)["choices"][0]["delta"].get("content") for _, data in events[:-1]]
    assert "Paris" in texts
    assert endpoint.errors == []
    env = table.endpoint_env("http://h", "k")
    assert env["GATEWAY_BASE_URL"] == "http://h/gateway/v1"
    assert table.wire_named("gateway") is wire


def test_the_example_s_record_variable_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = _gateway().WIRE
    monkeypatch.setattr(table, "WIRES", (*table.WIRES, wire))
    secret = "gateway-" + "token-0042"
    redactor = table.recording_redactor(
        {"DSH_RECORD_GATEWAY_BASE_URL": f"http://h/v1?access_token={secret}"}
    )
    assert secret not in redactor.redact_text(f"the token is {secret}")
