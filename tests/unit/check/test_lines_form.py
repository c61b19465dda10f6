"""The recording's form made from the lines its load parsed (docs/checks.md#by-reference).

The log check by reference reads the recorded side from the lines the scenario's load
kept, a packed row's texts straight into its run, no event built: on every corpus
scenario that loads (CI requires the corpus), that form is the form of the log's events
as `read_session_log` builds them, and every run noted as an entry's own (what a replay
of the entry is taken as, by identity) is exactly the events a replay of that entry logs
with the recorded turn and step.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus

from pytest_dsh_replay import DshReplayError, read_session_log
from pytest_dsh_replay._check.log_check import lines_forms, log_forms
from pytest_dsh_replay._scripts.loading import ScenarioCache


@pytest.mark.parametrize("path", corpus_params(corpus_scenarios()))
def test_the_form_from_the_kept_lines_is_the_form_of_the_events(path: Path | None) -> None:
    if path is None:
        require_corpus()
    assert path is not None
    cache = ScenarioCache()
    try:
        scenario = cache.load(path, keep_logs=True)
    except DshReplayError as error:
        pytest.skip(f"the scenario does not load: {error}")
    scripts = [s for s in scenario.scripts if s.path is not None]
    kept = [cache.kept_lines(s.path) for s in scripts if s.path is not None]
    if not all(kept):
        # Only a log without events keeps no lines: the check then reads it whole.
        for script, lines in zip(scripts, kept, strict=True):
            assert script.path is not None
            assert lines is not None or not read_session_log(script.path).events, script.path
        return
    headers = [s.header for s in scripts]
    made = lines_forms(
        [(k.header, k.lines, k.source, s.entries) for k, s in zip(kept, scripts, strict=True) if k],
        headers,
    )
    logs = [read_session_log(s.path) for s in scripts if s.path is not None]
    expected = log_forms([(log.header, log.events) for log in logs], headers)
    assert made is not None
    assert made[0] == expected
    for entry, turn, step, item in made[1].values():
        data = [{"turn": turn, "step": step, "chunk": chunk} for chunk in entry.chunks]
        assert item == b"R" + orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
