"""Recording: logging each model call into its session, and the live models.

:class:`~.recorder.RecordingModel` and the conversation it logs (:mod:`.conversation`),
the built-in OpenAI-compatible live model (:mod:`.live_openai`) and the recording proxy
that forwards HTTP calls to the live provider (:mod:`.proxy`).
"""
