"""The scripted live model: rules from a request to an answer, in process or over HTTP.

:mod:`.model` holds the rules and answers and :class:`~.model.ScriptedModel`, a live
model that yields dsh stream chunks; :mod:`.server` serves it on 127.0.0.1 through the
model endpoint, on every wire the endpoint speaks (docs/recording.md#scripted-model).
"""
