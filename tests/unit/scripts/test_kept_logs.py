"""The recorded logs a load keeps for the log check are the logs as read from the files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.corpus_support import HARNESS, corpus_scenarios, require_corpus

from pytest_dsh_replay import DshReplayError
from pytest_dsh_replay._format.jsonl import read_session_log
from pytest_dsh_replay._scripts.loading import ScenarioCache

SAMPLES = HARNESS.parent.parent / "runtime-samples"


def _logs(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.startswith("session") and ".jsonl" in p.name)


def test_every_corpus_log_kept_at_load_equals_the_log_read_again() -> None:
    require_corpus()
    compared = 0
    for d in corpus_scenarios():
        cache = ScenarioCache()
        try:
            cache.load(d, keep_logs=True)
        except DshReplayError:
            continue  # refused at load: the check never runs on it
        for log in _logs(d):
            kept = cache.recorded_log(log)
            assert kept == read_session_log(log), log
            compared += 1
    assert compared >= 140


def test_runtime_logs_kept_at_load_equal_the_logs_read_again(tmp_path: Path) -> None:
    require_corpus(SAMPLES)
    d = tmp_path / "scenario"
    d.mkdir()
    shutil.copy(SAMPLES / "t5-primary.session.v4.jsonl", d / "session.v4.jsonl")
    shutil.copy(SAMPLES / "t5-fork-child.session.v4.jsonl", d / "session.1.v4.jsonl")
    shutil.copy(SAMPLES / "t5-spawn-child.session.v4.jsonl", d / "session.2.v4.jsonl")
    cache = ScenarioCache()
    try:
        cache.load(d, keep_logs=True)
    except DshReplayError as err:
        pytest.skip(f"these samples do not form one scenario: {err}")
    for log in _logs(d):
        assert cache.recorded_log(log) == read_session_log(log)


def test_a_log_changed_after_the_load_is_read_again(tmp_path: Path) -> None:
    require_corpus()
    source = next(d for d in corpus_scenarios() if (d / "session.jsonl").exists())
    d = tmp_path / "s"
    shutil.copytree(source, d)
    cache = ScenarioCache()
    cache.load(d, keep_logs=True)
    log = d / "session.jsonl"
    header_line, *rest = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(header_line + rest[0])  # a shorter log: another size
    assert cache.recorded_log(log) == read_session_log(log)
    assert len(cache.recorded_log(log)[1]) <= 1 + len(rest[0].splitlines())


def _scenario_dir(tmp_path: Path) -> Path:
    d = tmp_path / "s"
    shutil.copytree(corpus_scenarios()[0], d)
    return d


def test_a_load_after_the_listing_lists_the_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's leftovers scan is the cache's own listing (docs/recording.md)."""
    require_corpus()
    d = _scenario_dir(tmp_path)
    listed: list[str] = []
    scandir = os.scandir

    def counted(path: Any) -> Any:
        listed.append(str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counted)
    cache = ScenarioCache(recheck=False)
    names = cache.listing(d)
    assert names is not None
    assert sorted(names) == sorted(p.name for p in d.iterdir())
    cache.load(d, keep_logs=True)
    assert listed.count(str(d)) == 1


def test_a_directory_changed_after_the_listing_is_listed_again_by_the_load(
    tmp_path: Path,
) -> None:
    require_corpus()
    d = _scenario_dir(tmp_path)
    cache = ScenarioCache(recheck=False)
    assert cache.listing(d) is not None
    (d / "replay.override.json").write_text('{"patches": []}')  # a new entry
    first = cache.load(d)
    assert cache.load(d) is first  # its stamp is the directory as it is now: kept
    assert cache.listing(tmp_path / "missing") is None
