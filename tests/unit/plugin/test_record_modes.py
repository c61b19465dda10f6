"""The record modes: one table, and layers that ask the mode, never compare its value."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.collected import collected
from support.paths import EXAMPLES, REPO

from pytest_dsh_replay._format.redact import recording_redactor
from pytest_dsh_replay._plugin import runs
from pytest_dsh_replay._plugin.modes import RECORD_MODES, RecordMode, RecordModeError, RecordModes
from pytest_dsh_replay._plugin.scenarios import records
from pytest_dsh_replay._plugin.suite import SuiteState

if TYPE_CHECKING:
    from pytest_dsh_replay._plugin.suite import Redaction

NODE = "tests/test_m.py::test_x"

# Test-only modes under new values: nothing outside the table may know them.
EVERY = RecordMode("every", "records every scenario", replays_recorded=False, records_missing=True)
NONE = RecordMode("none", "records nothing", replays_recorded=True, records_missing=False)
FILL = RecordMode("fill", "records the new ones", replays_recorded=True, records_missing=True)
EXTENDED = RecordModes((EVERY, NONE, FILL))


def test_the_table_holds_all_missing_and_new_and_all_is_the_default() -> None:
    assert RECORD_MODES.values == ("all", "missing", "new")
    assert RECORD_MODES.default.value == "all"
    every, missing, new = RECORD_MODES.modes
    assert (every.replays_recorded, every.records_missing) == (False, True)
    assert (missing.replays_recorded, missing.records_missing) == (True, True)
    assert (new.replays_recorded, new.records_missing, new.appends_new) == (True, True, True)
    assert RECORD_MODES.to_record(exists=False) is missing
    assert RECORD_MODES.to_record(exists=True) is every


@pytest.mark.parametrize(
    ("exists", "expired", "records", "appends"),
    [(False, False, True, False), (True, False, False, True), (True, True, False, True)],
)
def test_new_appends_to_a_recording_and_records_a_missing_one(
    exists: bool, expired: bool, records: bool, appends: bool
) -> None:
    new = RECORD_MODES.parse("new")
    assert new.records(exists=exists, expired=expired) is records
    assert new.appends(exists=exists, expired=expired) is appends
    for other in (RECORD_MODES.parse("all"), RECORD_MODES.parse("missing")):
        assert other.appends(exists=exists, expired=expired) is False


def test_an_extra_mode_is_parsed_helped_and_refused_from_the_table() -> None:
    assert EXTENDED.parse("none") is NONE
    assert EXTENDED.metavar == "every|none|fill"
    assert EXTENDED.help == (
        "record scenarios against the live model instead of replaying them: every (the "
        "default when no value is given) records every scenario, none records nothing, "
        "fill records the new ones."
    )
    with pytest.raises(RecordModeError) as caught:
        EXTENDED.parse("tests/test_a.py")
    assert str(caught.value) == (
        "--dsh-record accepts every or none or fill (a bare --dsh-record means every), "
        "got 'tests/test_a.py'; it looks like a test path: write --dsh-record=every "
        "tests/test_a.py"
    )


@pytest.mark.parametrize(
    ("mode", "exists", "expected"),
    [
        (EVERY, True, True),
        (EVERY, False, True),
        (NONE, True, False),
        (NONE, False, False),
        (FILL, True, False),
        (FILL, False, True),
    ],
)
def test_whether_a_test_records_is_the_modes_answer(
    tmp_path: Path, mode: RecordMode, exists: bool, expected: bool
) -> None:
    path = tmp_path / "scenario"
    if exists:
        path.mkdir()
    state = SuiteState(record=mode, ini_root=tmp_path, modes=EXTENDED)
    assert records(collected(tmp_path, NODE, "scenario"), state, path) is expected


def test_the_hints_name_the_modes_the_table_picks(tmp_path: Path) -> None:
    state = SuiteState(record=None, ini_root=tmp_path / "snaps", modes=EXTENDED)
    with pytest.raises(runs.ScenarioUnavailable) as caught:
        runs.start(
            collected(tmp_path, NODE, "absent"),
            state,
            layout_problem=None,
            workbase=lambda: tmp_path / "work",
            redaction=_no_redaction,
            live=lambda path: None,
            recorders=(),
        )
    assert f"  record it: pytest --dsh-record=fill {NODE}" in str(caught.value).splitlines()
    state = SuiteState(record=None, ini_root=EXAMPLES, modes=EXTENDED)
    replay = runs.start(
        collected(tmp_path, NODE, "tool-call"),
        state,
        layout_problem=None,
        workbase=lambda: tmp_path / "work",
        redaction=_no_redaction,
        live=lambda path: None,
        recorders=(),
    )
    problem = runs.check_replayed(collected(tmp_path, NODE, "tool-call"), state, replay, [])
    assert problem is not None
    assert problem.endswith(f"re-record: pytest --dsh-record=every {NODE})")


def _no_redaction() -> Redaction:
    def ignore(value: object) -> None:
        pass

    return recording_redactor(), ignore, ignore


def test_the_recording_page_lists_every_mode_of_the_table() -> None:
    page = (REPO / "docs" / "recording.md").read_text(encoding="utf-8")
    section = page.split("{#record-mode}", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    listed = [re.findall(r"`--dsh-record=(\w+)`", row)[0] for row in rows]
    assert listed == list(RECORD_MODES.values)
    assert f"`--dsh-record={RECORD_MODES.default.value}` (or `--dsh-record` alone" in section
