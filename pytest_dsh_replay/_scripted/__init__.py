"""The scripted live model: rules from a request to an answer, in process or over HTTP.

`model` holds the rules and answers and [`ScriptedModel`][pytest_dsh_replay.ScriptedModel], a live
model that yields dsh stream chunks; `server` serves it on 127.0.0.1 through the
model endpoint, on every wire the endpoint speaks
([docs/recording.md#scripted-model](../recording.md#scripted-model)).
"""
