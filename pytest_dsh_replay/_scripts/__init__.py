"""Replay scripts: what each recorded session replays, and scenarios of sessions.

Entries (`entries`), the one script builder for formats 0 to 5 (`builder`),
override sidecars (`override`), scenarios and their writing (`scenario`), and
where scenarios are loaded from (`loading`).
"""
