"""Recording: logging each model call into its session, and the live models.

[`RecordingModel`][pytest_dsh_replay.RecordingModel] and the conversation it logs (`conversation`),
the built-in OpenAI-compatible live model (`live_openai`) and the recording proxy
that forwards HTTP calls to the live provider (`proxy`).
"""
