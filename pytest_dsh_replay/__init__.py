"""pytest-dsh-replay: replay recorded multi-agent LLM sessions deterministically in tests.

The package is layered (DESIGN section 1): this namespace re-exports the pure core,
which imports neither pytest nor syrupy. The pytest layer lives in ``plugin.py`` and
``hookspecs.py``, the syrupy extensions in ``syrupy_ext.py``; pytest loads the plugin
through the ``pytest11`` entry point, so importing this package never does.

Names are imported on first use (PEP 562), so ``import pytest_dsh_replay`` (and loading
the pytest plugin, which lives inside the package) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .chunk_rows import decode_storage_record, pack_chunk_runs
    from .errors import (
        DshReplayError,
        LogMismatchError,
        OverrideError,
        PlaceholderError,
        RecordingError,
        ReplayBindingError,
        ReplayCancelledError,
        ReplayConsumptionError,
        ReplayedModelError,
        ReplayExhaustedError,
        ScenarioError,
        SchemaVersionError,
        ScriptError,
        SessionForkError,
        SessionLogError,
        SessionStoreError,
    )
    from .events import Event, SessionHeader, StreamChunk
    from .jsonl import dump_session_log, parse_session_header, parse_session_log, read_session_log
    from .model import ReplayBinding, ReplayModel
    from .recorder import RecordingModel
    from .scenario import Scenario, SessionScript, load_scenario, write_scenario
    from .script import (
        ChunksEntry,
        HangEntry,
        ReplayEntry,
        ThrowEntry,
        derive_replay_script,
    )
    from .sqlite import SqliteBackend, load_store_scenario
    from .store import (
        JsonlBackend,
        MemoryBackend,
        Session,
        SessionBackend,
        SessionStore,
        StoredLog,
        completed_turn_prefix,
        interrupted_turn_closers,
    )

__all__ = [
    "ChunksEntry",
    "DshReplayError",
    "Event",
    "HangEntry",
    "JsonlBackend",
    "LogMismatchError",
    "MemoryBackend",
    "OverrideError",
    "PlaceholderError",
    "RecordingError",
    "RecordingModel",
    "ReplayBinding",
    "ReplayBindingError",
    "ReplayCancelledError",
    "ReplayConsumptionError",
    "ReplayEntry",
    "ReplayExhaustedError",
    "ReplayModel",
    "ReplayedModelError",
    "Scenario",
    "ScenarioError",
    "SchemaVersionError",
    "ScriptError",
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
    "completed_turn_prefix",
    "decode_storage_record",
    "derive_replay_script",
    "dump_session_log",
    "interrupted_turn_closers",
    "load_scenario",
    "load_store_scenario",
    "pack_chunk_runs",
    "parse_session_header",
    "parse_session_log",
    "read_session_log",
    "write_scenario",
]

_MODULE_OF: dict[str, str] = {
    "ChunksEntry": "script",
    "DshReplayError": "errors",
    "Event": "events",
    "HangEntry": "script",
    "JsonlBackend": "store",
    "LogMismatchError": "errors",
    "MemoryBackend": "store",
    "OverrideError": "errors",
    "PlaceholderError": "errors",
    "RecordingError": "errors",
    "RecordingModel": "recorder",
    "ReplayBinding": "model",
    "ReplayBindingError": "errors",
    "ReplayCancelledError": "errors",
    "ReplayConsumptionError": "errors",
    "ReplayEntry": "script",
    "ReplayExhaustedError": "errors",
    "ReplayModel": "model",
    "ReplayedModelError": "errors",
    "Scenario": "scenario",
    "ScenarioError": "errors",
    "SchemaVersionError": "errors",
    "ScriptError": "errors",
    "Session": "store",
    "SessionBackend": "store",
    "SessionForkError": "errors",
    "SessionHeader": "events",
    "SessionLogError": "errors",
    "SessionScript": "scenario",
    "SessionStore": "store",
    "SessionStoreError": "errors",
    "SqliteBackend": "sqlite",
    "StoredLog": "store",
    "StreamChunk": "events",
    "ThrowEntry": "script",
    "completed_turn_prefix": "store",
    "decode_storage_record": "chunk_rows",
    "derive_replay_script": "script",
    "dump_session_log": "jsonl",
    "interrupted_turn_closers": "store",
    "load_scenario": "scenario",
    "load_store_scenario": "sqlite",
    "pack_chunk_runs": "chunk_rows",
    "parse_session_header": "jsonl",
    "parse_session_log": "jsonl",
    "read_session_log": "jsonl",
    "write_scenario": "scenario",
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
