"""The session store: sessions, their append-only logs, and where they persist.

:class:`~.store.SessionStore` and :class:`~.session.Session`, the rules a log obeys
(:mod:`.log_rules`), atomic replacement of files and directories (:mod:`.atomic`), and the
backends (:mod:`.backends`): memory, the harness's JSONL layout, its SQLite store.
"""
