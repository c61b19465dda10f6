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
[docs/limits.md](../limits.md) says what each bounds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for type checkers; the names are imported on first use (below)
    from ._endpoint.endpoint import StreamingModel as StreamingModel
    from ._endpoint.server import IDLE_TIMEOUT_S as IDLE_TIMEOUT_S
    from ._endpoint.server import MAX_BODY_BYTES as MAX_BODY_BYTES
    from ._endpoint.server import MAX_CONNECTIONS as MAX_CONNECTIONS
    from ._endpoint.server import REQUEST_TIMEOUT_S as REQUEST_TIMEOUT_S
    from ._errors import DshReplayError as DshReplayError
    from ._errors import EndpointError as EndpointError
    from ._errors import FaultError as FaultError
    from ._errors import ForkErrorCode as ForkErrorCode
    from ._errors import LogMismatchError as LogMismatchError
    from ._errors import OverrideError as OverrideError
    from ._errors import PictureError as PictureError
    from ._errors import PlaceholderError as PlaceholderError
    from ._errors import RecordingError as RecordingError
    from ._errors import RecordingExpiredWarning as RecordingExpiredWarning
    from ._errors import ReplayBindingError as ReplayBindingError
    from ._errors import ReplayCancelledError as ReplayCancelledError
    from ._errors import ReplayConsumptionError as ReplayConsumptionError
    from ._errors import ReplayedModelError as ReplayedModelError
    from ._errors import ReplayExhaustedError as ReplayExhaustedError
    from ._errors import ReplayOrderError as ReplayOrderError
    from ._errors import ScenarioError as ScenarioError
    from ._errors import SchemaVersionError as SchemaVersionError
    from ._errors import ScriptedModelError as ScriptedModelError
    from ._errors import ScriptError as ScriptError
    from ._errors import SessionForkError as SessionForkError
    from ._errors import SessionLogError as SessionLogError
    from ._errors import SessionStoreError as SessionStoreError
    from ._errors import UnknownSessionError as UnknownSessionError
    from ._errors import UnknownWireError as UnknownWireError
    from ._errors import UnservedRouteError as UnservedRouteError
    from ._fixture.dsh_replay import DshReplay as DshReplay
    from ._fixture.dsh_replay import Mode as Mode
    from ._fixture.usage import UsageTotals as UsageTotals
    from ._format.chunk_rows import PackedRow as PackedRow
    from ._format.chunk_rows import decode_storage_record as decode_storage_record
    from ._format.chunk_rows import pack_chunk_runs as pack_chunk_runs
    from ._format.events import Event as Event
    from ._format.events import JSONObject as JSONObject
    from ._format.events import SessionHeader as SessionHeader
    from ._format.events import SessionLike as SessionLike
    from ._format.events import SessionLog as SessionLog
    from ._format.events import StreamChunk as StreamChunk
    from ._format.json_values import MAX_NESTING as MAX_NESTING
    from ._format.json_values import MAX_SAFE_INTEGER as MAX_SAFE_INTEGER
    from ._format.jsonl import MAX_LINE_BYTES as MAX_LINE_BYTES
    from ._format.jsonl import dump_session_log as dump_session_log
    from ._format.jsonl import parse_session_header as parse_session_header
    from ._format.jsonl import parse_session_log as parse_session_log
    from ._format.jsonl import read_session_log as read_session_log
    from ._format.redact import Redactor as Redactor
    from ._format.zstd import MAX_DECOMPRESSED_BYTES as MAX_DECOMPRESSED_BYTES
    from ._identity.faults import Fault as Fault
    from ._identity.faults import FaultKind as FaultKind
    from ._identity.lineage import Lineage as Lineage
    from ._identity.options import CallOptions as CallOptions
    from ._identity.options import Relaying as Relaying
    from ._identity.options import ReplayOptions as ReplayOptions
    from ._identity.options import Request as Request
    from ._identity.options import Waitable as Waitable
    from ._recording.proxy import UPSTREAM_IDLE_TIMEOUT_S as UPSTREAM_IDLE_TIMEOUT_S
    from ._recording.recorder import RECORDED_CHUNK_NESTING as RECORDED_CHUNK_NESTING
    from ._recording.recorder import RecordingModel as RecordingModel
    from ._replay.model import ReplayBinding as ReplayBinding
    from ._replay.model import ReplayModel as ReplayModel
    from ._replay.order import LiveLogs as LiveLogs
    from ._replay.placeholders import PATTERN_TIMEOUT_S as PATTERN_TIMEOUT_S
    from ._scripted.model import Answer as Answer
    from ._scripted.model import Chunks as Chunks
    from ._scripted.model import Hang as Hang
    from ._scripted.model import ProviderFailure as ProviderFailure
    from ._scripted.model import Reply as Reply
    from ._scripted.model import Respond as Respond
    from ._scripted.model import Rule as Rule
    from ._scripted.model import ScriptedModel as ScriptedModel
    from ._scripted.model import ScriptedRequest as ScriptedRequest
    from ._scripted.model import ToolCall as ToolCall
    from ._scripted.server import ReceivedRequest as ReceivedRequest
    from ._scripted.server import ScriptedServer as ScriptedServer
    from ._scripts.builder import derive_replay_script as derive_replay_script
    from ._scripts.entries import MAX_CHUNK_NESTING as MAX_CHUNK_NESTING
    from ._scripts.entries import ChunksEntry as ChunksEntry
    from ._scripts.entries import HangEntry as HangEntry
    from ._scripts.entries import ReplayEntry as ReplayEntry
    from ._scripts.entries import ThrowEntry as ThrowEntry
    from ._scripts.loading import load_scenario as load_scenario
    from ._scripts.scenario import Scenario as Scenario
    from ._scripts.scenario import SessionScript as SessionScript
    from ._scripts.scenario import write_scenario as write_scenario
    from ._store.backends.base import MemoryBackend as MemoryBackend
    from ._store.backends.base import SessionBackend as SessionBackend
    from ._store.backends.base import StoredLog as StoredLog
    from ._store.backends.jsonl import JsonlBackend as JsonlBackend
    from ._store.backends.sqlite import SqliteBackend as SqliteBackend
    from ._store.log_rules import completed_turn_prefix as completed_turn_prefix
    from ._store.log_rules import interrupted_turn_closers as interrupted_turn_closers
    from ._store.session import ChunkRun as ChunkRun
    from ._store.session import ChunkSource as ChunkSource
    from ._store.session import Session as Session
    from ._store.session import SessionOwner as SessionOwner
    from ._store.store import SessionStore as SessionStore

_MODULE_OF: dict[str, str] = {
    "StreamingModel": "_endpoint.endpoint",
    "IDLE_TIMEOUT_S": "_endpoint.server",
    "MAX_BODY_BYTES": "_endpoint.server",
    "MAX_CONNECTIONS": "_endpoint.server",
    "REQUEST_TIMEOUT_S": "_endpoint.server",
    "DshReplayError": "_errors",
    "EndpointError": "_errors",
    "Fault": "_identity.faults",
    "FaultKind": "_identity.faults",
    "FaultError": "_errors",
    "LogMismatchError": "_errors",
    "OverrideError": "_errors",
    "PictureError": "_errors",
    "PlaceholderError": "_errors",
    "RecordingError": "_errors",
    "UnknownSessionError": "_errors",
    "UsageTotals": "_fixture.usage",
    "RecordingExpiredWarning": "_errors",
    "ReplayBindingError": "_errors",
    "ReplayCancelledError": "_errors",
    "ReplayConsumptionError": "_errors",
    "ReplayedModelError": "_errors",
    "ReplayExhaustedError": "_errors",
    "ReplayOrderError": "_errors",
    "ScenarioError": "_errors",
    "SchemaVersionError": "_errors",
    "ScriptedModelError": "_errors",
    "ScriptError": "_errors",
    "SessionForkError": "_errors",
    "SessionLogError": "_errors",
    "SessionStoreError": "_errors",
    "UnknownWireError": "_errors",
    "UnservedRouteError": "_errors",
    "ForkErrorCode": "_errors",
    "DshReplay": "_fixture.dsh_replay",
    "Mode": "_fixture.dsh_replay",
    "decode_storage_record": "_format.chunk_rows",
    "pack_chunk_runs": "_format.chunk_rows",
    "PackedRow": "_format.chunk_rows",
    "Event": "_format.events",
    "SessionHeader": "_format.events",
    "StreamChunk": "_format.events",
    "JSONObject": "_format.events",
    "SessionLike": "_format.events",
    "SessionLog": "_format.events",
    "MAX_NESTING": "_format.json_values",
    "MAX_SAFE_INTEGER": "_format.json_values",
    "MAX_LINE_BYTES": "_format.jsonl",
    "dump_session_log": "_format.jsonl",
    "parse_session_header": "_format.jsonl",
    "parse_session_log": "_format.jsonl",
    "read_session_log": "_format.jsonl",
    "Redactor": "_format.redact",
    "MAX_DECOMPRESSED_BYTES": "_format.zstd",
    "Lineage": "_identity.lineage",
    "CallOptions": "_identity.options",
    "Relaying": "_identity.options",
    "ReplayOptions": "_identity.options",
    "Request": "_identity.options",
    "Waitable": "_identity.options",
    "UPSTREAM_IDLE_TIMEOUT_S": "_recording.proxy",
    "RECORDED_CHUNK_NESTING": "_recording.recorder",
    "RecordingModel": "_recording.recorder",
    "ReplayBinding": "_replay.model",
    "ReplayModel": "_replay.model",
    "LiveLogs": "_replay.order",
    "PATTERN_TIMEOUT_S": "_replay.placeholders",
    "Answer": "_scripted.model",
    "Chunks": "_scripted.model",
    "Hang": "_scripted.model",
    "ProviderFailure": "_scripted.model",
    "Rule": "_scripted.model",
    "ScriptedModel": "_scripted.model",
    "ScriptedRequest": "_scripted.model",
    "ToolCall": "_scripted.model",
    "Reply": "_scripted.model",
    "Respond": "_scripted.model",
    "ReceivedRequest": "_scripted.server",
    "ScriptedServer": "_scripted.server",
    "derive_replay_script": "_scripts.builder",
    "MAX_CHUNK_NESTING": "_scripts.entries",
    "ChunksEntry": "_scripts.entries",
    "HangEntry": "_scripts.entries",
    "ReplayEntry": "_scripts.entries",
    "ThrowEntry": "_scripts.entries",
    "load_scenario": "_scripts.loading",
    "Scenario": "_scripts.scenario",
    "SessionScript": "_scripts.scenario",
    "write_scenario": "_scripts.scenario",
    "MemoryBackend": "_store.backends.base",
    "SessionBackend": "_store.backends.base",
    "StoredLog": "_store.backends.base",
    "JsonlBackend": "_store.backends.jsonl",
    "SqliteBackend": "_store.backends.sqlite",
    "completed_turn_prefix": "_store.log_rules",
    "interrupted_turn_closers": "_store.log_rules",
    "ChunkRun": "_store.session",
    "ChunkSource": "_store.session",
    "Session": "_store.session",
    "SessionOwner": "_store.session",
    "SessionStore": "_store.store",
}
"""The public names and the module each lives in: the one list of them.

``__all__`` is derived from it; the imports above (what type checkers read) and the API
reference (docs/api/*.md) are checked against it by tests/unit/test_public_names.py.
"""

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> object:
    if name == "syrupy_ext":  # the snapshot extensions' module, named as the docs write it
        return importlib.import_module(f".{name}", __name__)  # (it imports syrupy)
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
