"""Replay scripts: what each recorded session replays, and scenarios of sessions.

Entries (:mod:`.entries`), the one script builder for formats 0 to 4 (:mod:`.builder`),
override sidecars (:mod:`.override`), scenarios and their writing (:mod:`.scenario`), and
where scenarios are loaded from (:mod:`.loading`).
"""
