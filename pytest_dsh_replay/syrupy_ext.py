"""syrupy extensions for dsh session trees (the only module that imports syrupy).

- :class:`DshTranscriptExtension` stores a readable Markdown transcript per snapshot
  (``__snapshots__/<test module>/<test name>.md``).
- :class:`DshLogExtension` stores the normalized raw events instead (``.jsonl``), for
  those who prefer to review events.

Both accept a transcript/str, a ``dsh_replay`` fixture value, a session store, or a
list of sessions, and normalize ids, times and the working directory::

    from pytest_dsh_replay.syrupy_ext import DshTranscriptExtension

    def test_agent(dsh_replay, snapshot):
        run_agent(dsh_replay.model, dsh_replay.sessions)
        assert dsh_replay.transcript() == snapshot(extension_class=DshTranscriptExtension)

The ``dsh_snapshot`` fixture is ``snapshot`` with :class:`DshTranscriptExtension` set.
"""

from __future__ import annotations

from typing import Any

try:
    from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
except ImportError as err:  # pragma: no cover - syrupy is a dependency; guard for odd installs
    raise ImportError(
        "pytest-dsh-replay's snapshot extensions need syrupy; install it with: "
        "pip install 'pytest-dsh-replay[snapshot]'"
    ) from err

from ._transcript import render_transcript, sessions_as_jsonl

__all__ = ["DshLogExtension", "DshTranscriptExtension"]


def _sessions(data: Any) -> list[Any]:
    """The sessions held by a fixture value, a store, or a list of sessions."""
    store = getattr(data, "sessions", data)
    found = store.sessions() if callable(getattr(store, "sessions", None)) else store
    try:
        return list(found)
    except TypeError:
        raise TypeError(
            f"cannot snapshot a {type(data).__name__}: pass a transcript string, the "
            "dsh_replay fixture value, a SessionStore or a list of sessions"
        ) from None


class DshTranscriptExtension(SingleFileSnapshotExtension):
    """A session tree as a Markdown transcript, one ``.md`` file per snapshot."""

    _write_mode = WriteMode.TEXT
    file_extension = "md"

    def serialize(self, data: Any, **kwargs: Any) -> str:
        """Render ``data`` (see the module docstring) as a transcript."""
        if isinstance(data, str):
            return data
        transcript = getattr(data, "transcript", None)
        if callable(transcript):  # the dsh_replay fixture value: redacted, cwd tokenized
            return str(transcript())
        return render_transcript(_sessions(data))


class DshLogExtension(SingleFileSnapshotExtension):
    """A session tree as normalized JSON lines, one ``.jsonl`` file per snapshot."""

    _write_mode = WriteMode.TEXT
    file_extension = "jsonl"

    def serialize(self, data: Any, **kwargs: Any) -> str:
        """Render ``data`` (see the module docstring) as normalized events."""
        if isinstance(data, str):
            return data
        return sessions_as_jsonl(_sessions(data))
