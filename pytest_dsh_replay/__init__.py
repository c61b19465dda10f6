"""pytest-dsh-replay: replay recorded multi-agent LLM sessions deterministically in tests.

The package is layered: this namespace re-exports the pure core,
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
    from ._backend import MemoryBackend, SessionBackend, StoredLog
    from ._chunk_rows import decode_storage_record, pack_chunk_runs
    from ._entries import ChunksEntry, HangEntry, ReplayEntry, ThrowEntry
    from ._errors import (
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
        ReplayOrderError,
        ScenarioError,
        SchemaVersionError,
        ScriptError,
        SessionForkError,
        SessionLogError,
        SessionStoreError,
    )
    from ._events import Event, SessionHeader, StreamChunk
    from ._jsonl import dump_session_log, parse_session_header, parse_session_log, read_session_log
    from ._jsonl_backend import JsonlBackend
    from ._loading import load_scenario
    from ._log_rules import completed_turn_prefix, interrupted_turn_closers
    from ._model import ReplayBinding, ReplayModel
    from ._recorder import RecordingModel
    from ._runtime import DshReplay
    from ._scenario import Scenario, SessionScript, write_scenario
    from ._script import derive_replay_script
    from ._session import Session
    from ._sqlite import SqliteBackend
    from ._store import SessionStore

__all__ = [
    "ChunksEntry",
    "DshReplay",
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
    "ReplayOrderError",
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
    "pack_chunk_runs",
    "parse_session_header",
    "parse_session_log",
    "read_session_log",
    "write_scenario",
]

_MODULE_OF: dict[str, str] = {
    "ChunksEntry": "_entries",
    "DshReplay": "_runtime",
    "DshReplayError": "_errors",
    "Event": "_events",
    "HangEntry": "_entries",
    "JsonlBackend": "_jsonl_backend",
    "LogMismatchError": "_errors",
    "MemoryBackend": "_backend",
    "OverrideError": "_errors",
    "PlaceholderError": "_errors",
    "RecordingError": "_errors",
    "RecordingModel": "_recorder",
    "ReplayBinding": "_model",
    "ReplayBindingError": "_errors",
    "ReplayCancelledError": "_errors",
    "ReplayConsumptionError": "_errors",
    "ReplayEntry": "_entries",
    "ReplayExhaustedError": "_errors",
    "ReplayModel": "_model",
    "ReplayOrderError": "_errors",
    "ReplayedModelError": "_errors",
    "Scenario": "_scenario",
    "ScenarioError": "_errors",
    "SchemaVersionError": "_errors",
    "ScriptError": "_errors",
    "Session": "_session",
    "SessionBackend": "_backend",
    "SessionForkError": "_errors",
    "SessionHeader": "_events",
    "SessionLogError": "_errors",
    "SessionScript": "_scenario",
    "SessionStore": "_store",
    "SessionStoreError": "_errors",
    "SqliteBackend": "_sqlite",
    "StoredLog": "_backend",
    "StreamChunk": "_events",
    "ThrowEntry": "_entries",
    "completed_turn_prefix": "_log_rules",
    "decode_storage_record": "_chunk_rows",
    "derive_replay_script": "_script",
    "dump_session_log": "_jsonl",
    "interrupted_turn_closers": "_log_rules",
    "load_scenario": "_loading",
    "pack_chunk_runs": "_chunk_rows",
    "parse_session_header": "_jsonl",
    "parse_session_log": "_jsonl",
    "read_session_log": "_jsonl",
    "write_scenario": "_scenario",
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
