"""A replay plan: what binding needs of one loaded scenario, computed once for every model.

Every [`ReplayModel`][pytest_dsh_replay.ReplayModel] over the same loaded
[`Scenario`][pytest_dsh_replay.Scenario] binds live sessions to the same scripts by the same
rules ([docs/scenarios.md#binding](../scenarios.md#binding)); what those rules read of the
scenario alone does not depend on a run. `plan_of` computes it at the first model over a
scenario and keeps it in the scenario's ``replay_plan`` slot (which the loader leaves
empty), so the next models over it (a suite of tests replaying one scenario, a pass over a
corpus) start from it.

The plan holds values derived from the scripts only, never a run's state: which scripts
are bound, cursors, claimed announcements and anything that depends on a model's
redaction stay in each model's `Binder` and `LiveSessions`. Its lazily filled parts (the
openers, the recorded tool calls) are pure functions of the scripts: whichever model fills
one first, every model reads the same value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._identity.answers import ToolCallMark, tool_call_marks
from .matching import FirstMessage

if TYPE_CHECKING:
    from .._scripts.scenario import Scenario, SessionScript

__all__ = ["ReplayPlan", "plan_of"]


class ReplayPlan:
    """What binding reads of one scenario's scripts, the same for every model (read only).

    Args:
        scripts: The scenario's scripts, primary first (replay order: the order sessions
            without a parent bind in).

    Attributes:
        scripts: The scripts, as a tuple.
        size: How many there are.
        children: Recorded parent id -> the indexes of its recorded children's scripts,
            in replay order (a primary is never a child).
        others: The indexes of every script but the primary's, in replay order (the
            candidates when a live parent's recording is unknown).
    """

    __slots__ = ("_calls", "_openers", "children", "others", "scripts", "size")

    def __init__(self, scripts: tuple[SessionScript, ...]):
        self.scripts = scripts
        self.size = len(scripts)
        children: dict[str, tuple[int, ...]] = {}
        others: list[int] = []
        for i, script in enumerate(scripts):
            if script.primary:
                continue
            others.append(i)
            parent = script.parent_session
            if parent:
                children[parent] = (*children.get(parent, ()), i)
        self.children = children
        self.others = tuple(others)
        self._openers: tuple[FirstMessage | None, ...] | None = None  # made on first use
        self._calls: dict[int, tuple[tuple[ToolCallMark, ...], ...]] = {}  # script -> calls'

    def opener(self, index: int) -> FirstMessage | None:
        """The compiled first own user message of script ``index`` (``None``: it has none).

        Compiled for every script at the first call (binding by content is rare, and
        then it compares many), then kept.
        """
        openers = self._openers
        if openers is None:
            scripts = self.scripts
            ids = [s.recorded_id for s in scripts if s.recorded_id]
            paths = {s.header.cwd for s in scripts if s.header.cwd} | {"{{cwd}}"}
            openers = self._openers = tuple(
                None if s.opening_text is None else FirstMessage(s.opening_text, ids, paths)
                for s in scripts
            )
        return openers[index]

    def tool_calls(self, index: int) -> tuple[tuple[ToolCallMark, ...], ...]:
        """The tool calls of each recorded call of script ``index`` (read once, then kept)."""
        found = self._calls.get(index)
        if found is None:
            found = self._calls[index] = tuple(
                tool_call_marks(entry.chunks) for entry in self.scripts[index].entries
            )
        return found


def plan_of(scenario: Scenario) -> ReplayPlan:
    """The replay plan of a loaded scenario: made at its first model, then kept beside it.

    Kept in the scenario's ``replay_plan`` slot; a scenario made by
    ``dataclasses.replace`` starts without one.
    """
    plan = scenario.replay_plan
    if not isinstance(plan, ReplayPlan):
        plan = ReplayPlan(tuple(scenario.scripts))
        object.__setattr__(scenario, "replay_plan", plan)  # frozen: a cache, not a field
    return plan
