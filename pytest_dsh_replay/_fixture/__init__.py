"""What a test gets from the ``dsh_replay`` fixture, without pytest.

:class:`~.dsh_replay.DshReplay` (open, record, checks, save) and the dsh runtime's own logs
as a recording (:mod:`.runtime_logs`).
"""
