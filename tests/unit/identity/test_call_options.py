"""CallOptions and ReplayOptions: immutable by convention, values as a frozen dataclass's.

They are slotted classes with a plain ``__init__`` (a frozen dataclass's per-field
``object.__setattr__`` cost the model endpoint 5 % of a replayed call, benchmarks/README.md,
issue 42): every field is ``Final``, so mypy refuses an assignment outside ``__init__``,
and ``__slots__`` refuses a new attribute.
"""

from __future__ import annotations

import threading

import pytest

from pytest_dsh_replay._identity.options import (
    NO_OPTIONS,
    NO_REPLAY,
    CallOptions,
    ReplayOptions,
)

_CLASSES = (CallOptions, ReplayOptions)


@pytest.mark.parametrize("cls", _CLASSES)
def test_every_field_is_final_and_a_slot(cls: type[CallOptions | ReplayOptions]) -> None:
    annotations = {
        name: text for name, text in cls.__annotations__.items() if not name.startswith("_")
    }
    assert sorted(annotations) == sorted(cls.__slots__)
    not_final = [name for name, text in annotations.items() if not text.startswith("Final[")]
    assert not_final == []


@pytest.mark.parametrize("cls", _CLASSES)
def test_init_sets_every_field_and_nothing_else_can_be_added(
    cls: type[CallOptions | ReplayOptions],
) -> None:
    value = cls()
    for name in cls.__slots__:
        getattr(value, name)  # set by __init__: no AttributeError
    assert not hasattr(value, "__dict__")
    with pytest.raises(AttributeError):
        setattr(value, "not_an_option", 1)  # noqa: B010


def test_values_compare_hash_and_show_by_their_fields() -> None:
    def told(_: str) -> None:
        pass

    one = CallOptions("s", "p", 2, replay=ReplayOptions(True, told))
    same = CallOptions("s", "p", 2, replay=ReplayOptions(True, told))
    assert one == same
    assert hash(one) == hash(same)
    assert one != CallOptions("s", "p", 3, replay=ReplayOptions(True, told))
    assert one != CallOptions("s", "p", 2)
    assert CallOptions() == NO_OPTIONS
    assert ReplayOptions() == NO_REPLAY
    assert CallOptions() != ReplayOptions()
    assert "session_id='s'" in repr(one)
    assert "by_content=True" in repr(one)
    assert repr(NO_REPLAY).startswith("ReplayOptions(")


def test_with_lineage_keeps_self_or_copies_with_the_new_lineage() -> None:
    cancel = threading.Event()
    options = CallOptions("c", "p", 0, "/w", 2, 3, cancel, True, extra=(("t", 1),))
    assert options.with_lineage("p", 0) is options
    moved = options.with_lineage("q", 5)
    assert moved == CallOptions("c", "q", 5, "/w", 2, 3, cancel, True, extra=(("t", 1),))
    assert (options.parent_session_id, options.seed_length) == ("p", 0)


def test_with_cancel_copies_with_only_the_cancel_changed() -> None:
    first, second = threading.Event(), threading.Event()
    replay = ReplayOptions(cancel_waits_only=True)
    options = CallOptions("c", "p", 1, "/w", 2, 3, first, True, None, replay, (("t", 1),))
    changed = options.with_cancel(second)
    assert changed.cancel is second
    assert options.cancel is first
    assert changed == CallOptions("c", "p", 1, "/w", 2, 3, second, True, None, replay, (("t", 1),))
