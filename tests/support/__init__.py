"""Factories shared by the tests: events, calls, logs and scenario directories."""
