"""What a test gets from the ``dsh_replay`` fixture, without pytest.

[`DshReplay`][pytest_dsh_replay.DshReplay] (open, record, checks, save) and the dsh
runtime's own logs as a recording (`runtime_logs`).
"""
