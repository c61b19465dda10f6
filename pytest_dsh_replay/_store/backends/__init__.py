"""Where a session store keeps its logs: one module per backend behind one protocol.

`base` holds [`SessionBackend`][pytest_dsh_replay.SessionBackend] (what the store needs) and
the memory backend; `jsonl` and `sqlite` are the dsh harness's two on-disk layouts.
"""
