"""Replay: the fake streaming model and how it serves recorded calls to live sessions.

:class:`~.model.ReplayModel`, how a live session finds its recording (:mod:`.binding`,
:mod:`.matching`), one replayed call (:mod:`.call`), the recorded order of concurrent
sessions' calls (:mod:`.order`), and ``{{fromRequest:...}}`` placeholders
(:mod:`.placeholders`, :mod:`.jsregex`).
"""
