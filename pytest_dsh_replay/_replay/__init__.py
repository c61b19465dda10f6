"""Replay: the fake streaming model and how it serves recorded calls to live sessions.

[`ReplayModel`][pytest_dsh_replay.ReplayModel], how a live session finds its recording (`binding`,
`matching`), one replayed call (`call`), the recorded order of concurrent
sessions' calls (`order`), and ``{{fromRequest:...}}`` placeholders
(`placeholders`, `jsregex`).
"""
