"""The session store: sessions, their append-only logs, and where they persist.

[`SessionStore`][pytest_dsh_replay.SessionStore] and [`Session`][pytest_dsh_replay.Session],
the rules a log obeys (`log_rules`), atomic replacement of files and directories (`atomic`), and the
backends (`backends`): memory, the harness's JSONL layout, its SQLite store.
"""
