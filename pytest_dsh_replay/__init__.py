"""pytest-dsh-replay: replay recorded multi-agent LLM sessions deterministically in tests.

The package is layered (DESIGN section 1): this namespace re-exports the pure core,
which imports neither pytest nor syrupy. The pytest layer lives in ``plugin.py`` and
``hookspecs.py``, the syrupy extensions in ``syrupy_ext.py``; pytest loads the plugin
through the ``pytest11`` entry point, so importing this package never does.
"""

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
