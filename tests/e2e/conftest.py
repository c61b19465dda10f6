"""End-to-end tests: the real dsh runtime, and recordings made in subprocesses."""

from __future__ import annotations

from support.inner_runs import _http_libraries_outlive_inner_runs, _quiet_third_party_config

__all__ = ["_http_libraries_outlive_inner_runs", "_quiet_third_party_config"]
