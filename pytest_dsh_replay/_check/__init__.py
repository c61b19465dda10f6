"""Checks: normalized logs, redaction, the replayed-log check and transcripts."""
