"""Pictures of scenarios: a self-contained HTML page of a recording (and of a drifted replay)."""
