"""syrupy extensions for dsh session trees (the only module that imports syrupy).

- [`DshTranscriptExtension`][pytest_dsh_replay.syrupy_ext.DshTranscriptExtension] stores a
readable Markdown transcript per snapshot
  (``__snapshots__/<test module>/<test name>.md``).
- [`DshLogExtension`][pytest_dsh_replay.syrupy_ext.DshLogExtension] stores the normalized
raw events instead (``.jsonl``), for
  those who prefer to review events.

[`DshTranscriptExtension`][pytest_dsh_replay.syrupy_ext.DshTranscriptExtension] accepts a
transcript string, the ``dsh_replay`` fixture value, a session store
(``dsh_replay.sessions``) or a list of sessions;
[`DshLogExtension`][pytest_dsh_replay.syrupy_ext.DshLogExtension] accepts the same but a
string (a transcript is Markdown, not events). Anything else raises `TypeError` saying what
is accepted. Ids, times and the working directory are normalized::

    from pytest_dsh_replay.syrupy_ext import DshTranscriptExtension

    def test_agent(dsh_replay, snapshot):
        run_agent(dsh_replay.model, dsh_replay.sessions)
        assert dsh_replay.transcript() == snapshot(extension_class=DshTranscriptExtension)

The ``dsh_transcript`` fixture is ``snapshot`` with
[`DshTranscriptExtension`][pytest_dsh_replay.syrupy_ext.DshTranscriptExtension] set.
"""

from __future__ import annotations

from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from ._check.transcript import render_transcript, sessions_as_jsonl

__all__ = ["DshLogExtension", "DshTranscriptExtension"]


_ACCEPTED = (
    "the dsh_replay fixture value, a SessionStore (dsh_replay.sessions) or a list of sessions"
)


def _is_session(value: Any) -> bool:
    return hasattr(value, "header") and hasattr(value, "events")


def _sessions(data: Any, accepted: str) -> list[Any]:
    """The sessions held by a fixture value, a store, or a list of sessions.

    Raises:
        TypeError: ``data`` is none of these; the message says what is ``accepted``.
    """
    method = getattr(data, "sessions", None)
    if callable(method):  # a SessionStore
        return list(method())
    store = getattr(method, "sessions", None)
    if callable(store):  # the dsh_replay fixture value: its store
        return list(store())
    if isinstance(data, list | tuple) and all(_is_session(s) for s in data):
        return list(data)
    raise TypeError(f"cannot snapshot a {type(data).__name__}: {accepted}")


class DshTranscriptExtension(SingleFileSnapshotExtension):
    """A session tree as a Markdown transcript, one ``.md`` file per snapshot.

    ``--snapshot-update`` writes it when the session ends, not at the assertion: a test
    that fails afterwards (the replayed-log check, a recording not written) keeps the
    snapshot it had ([docs/checks.md#transcripts](../checks.md#transcripts)).
    """

    _write_mode = WriteMode.TEXT
    file_extension = "md"
    write_immediately = False

    def serialize(self, data: Any, **kwargs: Any) -> str:
        """Render ``data`` (see the module docstring) as a transcript."""
        if isinstance(data, str):
            return data
        transcript = getattr(data, "transcript", None)
        if callable(transcript):  # the dsh_replay fixture value: redacted, cwd tokenized
            return str(transcript())
        accepted = f"DshTranscriptExtension (.md) accepts a transcript string, {_ACCEPTED}"
        return render_transcript(_sessions(data, accepted))


class DshLogExtension(SingleFileSnapshotExtension):
    """A session tree as normalized JSON lines, one ``.jsonl`` file per snapshot.

    Written when the session ends, as
    [`DshTranscriptExtension`][pytest_dsh_replay.syrupy_ext.DshTranscriptExtension] is.
    """

    _write_mode = WriteMode.TEXT
    file_extension = "jsonl"
    write_immediately = False

    def serialize(self, data: Any, **kwargs: Any) -> str:
        """Render ``data`` (see the module docstring) as normalized events."""
        if isinstance(data, str | bytes):
            raise TypeError(
                "DshLogExtension stores session events as .jsonl, not text: pass "
                f"{_ACCEPTED}; for a Markdown transcript use dsh_transcript or "
                "DshTranscriptExtension"
            )
        snapshot = getattr(data, "events_snapshot", None)
        if callable(snapshot):  # the dsh_replay fixture value: its redaction hooks too
            return str(snapshot())
        return sessions_as_jsonl(_sessions(data, f"DshLogExtension (.jsonl) accepts {_ACCEPTED}"))
