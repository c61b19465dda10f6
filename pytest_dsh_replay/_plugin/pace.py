"""The pace a test replays at: its marker's ``pace=``, else ``--dsh-pace`` (pytest-free).

A pace is the factor recorded chunk gaps are scaled by when they are served (``0``, the
default: as fast as possible; [docs/scenarios.md#pacing](../scenarios.md#pacing)).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import DshReplayError
from .._replay.pace import check_pace

if TYPE_CHECKING:
    from .collected import CollectedTest
    from .suite import SuiteState

__all__ = ["PaceError", "parse_pace_option", "replay_pace"]


class PaceError(DshReplayError, ValueError):
    """A pace (``--dsh-pace`` or the marker's ``pace=``) that is not a factor >= 0.

    The message names where the value comes from and quotes it.
    """


def parse_pace_option(text: str) -> float:
    """``--dsh-pace``'s value: a finite decimal number >= 0 (``1``, ``0.5``, ``2e-1``).

    Raises:
        PaceError: Anything else; the message quotes the value.
    """
    try:
        # float() also reads "1_0" as 10: a digit separator is no decimal number
        value = -1.0 if "_" in text else float(text.strip())
    except ValueError:
        value = -1.0  # refused below, with the value as given
    try:
        return check_pace(value)
    except ValueError:
        raise PaceError(
            f"--dsh-pace={text}: the pace must be a finite number >= 0 (the factor recorded "
            "chunk gaps are scaled by: 1 as recorded, 0.5 twice as fast, 0 as fast as "
            "possible)"
        ) from None


def replay_pace(test: CollectedTest, state: SuiteState) -> float:
    """The pace the test replays at: its ``dsh_scenario`` marker's ``pace=``, else the run's.

    Raises:
        PaceError: The marker's ``pace`` is not a finite number >= 0 (``bool`` and
            strings are refused); the message starts with the test's node id.
    """
    if "pace" not in test.scenario_kwargs:
        return state.pace
    value = test.scenario_kwargs["pace"]
    try:
        return check_pace(value)
    except ValueError:
        raise PaceError(
            f"{test.nodeid}: @pytest.mark.dsh_scenario(pace={value!r}): the pace must be a "
            "finite number >= 0 (the factor recorded chunk gaps are scaled by: 1 as "
            "recorded, 0.5 twice as fast, 0 as fast as possible)"
        ) from None
