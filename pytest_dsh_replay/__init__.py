"""pytest-dsh-replay: replay recorded multi-agent LLM sessions deterministically in tests.

The package is layered: this namespace re-exports the pure core,
which imports neither pytest nor syrupy. The pytest layer lives in ``plugin.py`` and
``hookspecs.py``, the syrupy extensions in ``syrupy_ext.py``; pytest loads the plugin
through the ``pytest11`` entry point, so importing this package never does.

Names are imported on first use (PEP 562), so ``import pytest_dsh_replay`` (and loading
the pytest plugin, which lives inside the package) stays cheap. The limits on recorded
input are exported too (``MAX_LINE_BYTES``, ``MAX_DECOMPRESSED_BYTES``, ``MAX_NESTING``,
``MAX_CHUNK_NESTING``, ``PATTERN_TIMEOUT_S``, ``MAX_SAFE_INTEGER``), those of the HTTP
endpoint (``MAX_CONNECTIONS``, ``MAX_BODY_BYTES``, ``REQUEST_TIMEOUT_S``,
``IDLE_TIMEOUT_S``) and those of recording (``UPSTREAM_IDLE_TIMEOUT_S``,
``RECORDED_CHUNK_NESTING``);
docs/limits.md says what each bounds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._endpoint.server import (
        IDLE_TIMEOUT_S,
        MAX_BODY_BYTES,
        MAX_CONNECTIONS,
        REQUEST_TIMEOUT_S,
    )
    from ._errors import (
        DshReplayError,
        EndpointError,
        LogMismatchError,
        OverrideError,
        PlaceholderError,
        RecordingError,
        ReplayBindingError,
        ReplayCancelledError,
        ReplayConsumptionError,
        ReplayedModelError,
        ReplayExhaustedError,
        ReplayOrderError,
        ScenarioError,
        SchemaVersionError,
        ScriptedModelError,
        ScriptError,
        SessionForkError,
        SessionLogError,
        SessionStoreError,
        UnservedRouteError,
    )
    from ._fixture.dsh_replay import DshReplay
    from ._format.chunk_rows import decode_storage_record, pack_chunk_runs
    from ._format.events import Event, SessionHeader, StreamChunk
    from ._format.json_values import MAX_NESTING, MAX_SAFE_INTEGER
    from ._format.jsonl import (
        MAX_LINE_BYTES,
        dump_session_log,
        parse_session_header,
        parse_session_log,
        read_session_log,
    )
    from ._format.redact import Redactor
    from ._format.zstd import MAX_DECOMPRESSED_BYTES
    from ._recording.proxy import UPSTREAM_IDLE_TIMEOUT_S
    from ._recording.recorder import RECORDED_CHUNK_NESTING, RecordingModel
    from ._replay.model import ReplayBinding, ReplayModel
    from ._replay.placeholders import PATTERN_TIMEOUT_S
    from ._scripted.model import (
        Answer,
        Chunks,
        Hang,
        ProviderFailure,
        Rule,
        ScriptedModel,
        ScriptedRequest,
        ToolCall,
    )
    from ._scripted.server import ReceivedRequest, ScriptedServer
    from ._scripts.builder import derive_replay_script
    from ._scripts.entries import MAX_CHUNK_NESTING, ChunksEntry, HangEntry, ReplayEntry, ThrowEntry
    from ._scripts.loading import load_scenario
    from ._scripts.scenario import Scenario, SessionScript, write_scenario
    from ._store.backends.base import MemoryBackend, SessionBackend, StoredLog
    from ._store.backends.jsonl import JsonlBackend
    from ._store.backends.sqlite import SqliteBackend
    from ._store.log_rules import completed_turn_prefix, interrupted_turn_closers
    from ._store.session import ChunkRun, ChunkSource, Session
    from ._store.store import SessionStore

# In plain sorted order (the constants among the classes), as test_layering checks.
__all__ = [  # noqa: RUF022
    "Answer",
    "ChunkRun",
    "ChunkSource",
    "Chunks",
    "ChunksEntry",
    "DshReplay",
    "DshReplayError",
    "EndpointError",
    "Event",
    "Hang",
    "HangEntry",
    "IDLE_TIMEOUT_S",
    "JsonlBackend",
    "LogMismatchError",
    "MAX_BODY_BYTES",
    "MAX_CHUNK_NESTING",
    "MAX_CONNECTIONS",
    "MAX_DECOMPRESSED_BYTES",
    "MAX_LINE_BYTES",
    "MAX_NESTING",
    "MAX_SAFE_INTEGER",
    "MemoryBackend",
    "OverrideError",
    "PATTERN_TIMEOUT_S",
    "PlaceholderError",
    "ProviderFailure",
    "RECORDED_CHUNK_NESTING",
    "REQUEST_TIMEOUT_S",
    "ReceivedRequest",
    "RecordingError",
    "RecordingModel",
    "Redactor",
    "ReplayBinding",
    "ReplayBindingError",
    "ReplayCancelledError",
    "ReplayConsumptionError",
    "ReplayEntry",
    "ReplayExhaustedError",
    "ReplayModel",
    "ReplayOrderError",
    "ReplayedModelError",
    "Rule",
    "Scenario",
    "ScenarioError",
    "SchemaVersionError",
    "ScriptError",
    "ScriptedModel",
    "ScriptedModelError",
    "ScriptedRequest",
    "ScriptedServer",
    "Session",
    "SessionBackend",
    "SessionForkError",
    "SessionHeader",
    "SessionLogError",
    "SessionScript",
    "SessionStore",
    "SessionStoreError",
    "SqliteBackend",
    "StoredLog",
    "StreamChunk",
    "ThrowEntry",
    "ToolCall",
    "UPSTREAM_IDLE_TIMEOUT_S",
    "UnservedRouteError",
    "completed_turn_prefix",
    "decode_storage_record",
    "derive_replay_script",
    "dump_session_log",
    "interrupted_turn_closers",
    "load_scenario",
    "pack_chunk_runs",
    "parse_session_header",
    "parse_session_log",
    "read_session_log",
    "write_scenario",
]

_MODULE_OF: dict[str, str] = {
    "ChunkRun": "_store.session",
    "ChunkSource": "_store.session",
    "ChunksEntry": "_scripts.entries",
    "DshReplay": "_fixture.dsh_replay",
    "DshReplayError": "_errors",
    "EndpointError": "_errors",
    "Event": "_format.events",
    "IDLE_TIMEOUT_S": "_endpoint.server",
    "MAX_BODY_BYTES": "_endpoint.server",
    "REQUEST_TIMEOUT_S": "_endpoint.server",
    "HangEntry": "_scripts.entries",
    "JsonlBackend": "_store.backends.jsonl",
    "LogMismatchError": "_errors",
    "MAX_CHUNK_NESTING": "_scripts.entries",
    "MAX_CONNECTIONS": "_endpoint.server",
    "MAX_DECOMPRESSED_BYTES": "_format.zstd",
    "MAX_LINE_BYTES": "_format.jsonl",
    "MAX_NESTING": "_format.json_values",
    "MAX_SAFE_INTEGER": "_format.json_values",
    "MemoryBackend": "_store.backends.base",
    "OverrideError": "_errors",
    "PATTERN_TIMEOUT_S": "_replay.placeholders",
    "PlaceholderError": "_errors",
    "RecordingError": "_errors",
    "RecordingModel": "_recording.recorder",
    "RECORDED_CHUNK_NESTING": "_recording.recorder",
    "UPSTREAM_IDLE_TIMEOUT_S": "_recording.proxy",
    "Redactor": "_format.redact",
    "ReplayBinding": "_replay.model",
    "ReplayBindingError": "_errors",
    "ReplayCancelledError": "_errors",
    "ReplayConsumptionError": "_errors",
    "ReplayEntry": "_scripts.entries",
    "ReplayExhaustedError": "_errors",
    "ReplayModel": "_replay.model",
    "ReplayOrderError": "_errors",
    "UnservedRouteError": "_errors",
    "ReplayedModelError": "_errors",
    "Scenario": "_scripts.scenario",
    "ScenarioError": "_errors",
    "SchemaVersionError": "_errors",
    "ScriptError": "_errors",
    "Session": "_store.session",
    "SessionBackend": "_store.backends.base",
    "SessionForkError": "_errors",
    "SessionHeader": "_format.events",
    "SessionLogError": "_errors",
    "SessionScript": "_scripts.scenario",
    "SessionStore": "_store.store",
    "SessionStoreError": "_errors",
    "SqliteBackend": "_store.backends.sqlite",
    "StoredLog": "_store.backends.base",
    "StreamChunk": "_format.events",
    "ThrowEntry": "_scripts.entries",
    "completed_turn_prefix": "_store.log_rules",
    "decode_storage_record": "_format.chunk_rows",
    "derive_replay_script": "_scripts.builder",
    "dump_session_log": "_format.jsonl",
    "interrupted_turn_closers": "_store.log_rules",
    "load_scenario": "_scripts.loading",
    "pack_chunk_runs": "_format.chunk_rows",
    "parse_session_header": "_format.jsonl",
    "parse_session_log": "_format.jsonl",
    "read_session_log": "_format.jsonl",
    "write_scenario": "_scripts.scenario",
    "Answer": "_scripted.model",
    "Chunks": "_scripted.model",
    "Hang": "_scripted.model",
    "ProviderFailure": "_scripted.model",
    "Rule": "_scripted.model",
    "ScriptedModel": "_scripted.model",
    "ScriptedRequest": "_scripted.model",
    "ToolCall": "_scripted.model",
    "ReceivedRequest": "_scripted.server",
    "ScriptedServer": "_scripted.server",
    "ScriptedModelError": "_errors",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
