"""Which tests' ``dsh_transcript`` files would be one (pytest-free)."""

from __future__ import annotations

from pathlib import Path

from pytest_dsh_replay._plugin.collected import CollectedTest
from pytest_dsh_replay._plugin.layout import transcript_collisions


def _test(name: str, *, module: str = "test_m.py", fixtures: tuple[str, ...] = ()) -> CollectedTest:
    return CollectedTest(
        nodeid=f"{module}::{name}",
        path=Path("/p") / module,
        relpath=Path(module),
        name=name,
        fixturenames=("dsh_replay", "dsh_transcript", *fixtures),
    )


def test_ids_that_differ_only_in_dropped_characters_collide_once_per_later_test() -> None:
    tests = [_test("t[a/b]"), _test("t[ab]"), _test("t[a:b]"), _test("t[c]")]
    found = transcript_collisions(tests)
    assert [pair for _, pair in found] == [(0, 1), (0, 2)]
    assert found[0][0].startswith("test_m.py::t[a/b] and test_m.py::t[ab] would share one")


def test_other_modules_classes_and_tests_without_the_fixture_do_not_collide() -> None:
    other = CollectedTest(
        nodeid="test_m.py::t[ab]", path=Path("/p/test_m.py"), relpath=None, name="t[ab]"
    )
    tests = [_test("t[a/b]"), _test("t[ab]", module="test_n.py"), other, _test("C::t[ab]")]
    assert transcript_collisions(tests) == []
