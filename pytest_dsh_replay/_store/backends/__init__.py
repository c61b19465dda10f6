"""Where a session store keeps its logs: one module per backend behind one protocol.

:mod:`.base` holds :class:`~.base.SessionBackend` (what the store needs) and the memory
backend; :mod:`.jsonl` and :mod:`.sqlite` are the dsh harness's two on-disk layouts.
"""
