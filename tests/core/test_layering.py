"""The core is importable without pytest or syrupy, and the public API is what it says."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest_dsh_replay

CORE_MODULES = [
    "pytest_dsh_replay",
    "pytest_dsh_replay.errors",
    "pytest_dsh_replay.events",
    "pytest_dsh_replay.chunk_rows",
    "pytest_dsh_replay.jsonl",
    "pytest_dsh_replay.script",
    "pytest_dsh_replay.scenario",
    "pytest_dsh_replay.cli",
]


def test_core_imports_neither_pytest_nor_syrupy() -> None:
    code = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        import pytest_dsh_replay
        skip = {{"plugin", "hookspecs", "syrupy_ext", "__main__"}}
        names = [m.name for m in pkgutil.iter_modules(pytest_dsh_replay.__path__)]
        for name in names:
            if name not in skip:
                importlib.import_module("pytest_dsh_replay." + name)
        for name in {CORE_MODULES!r}:
            importlib.import_module(name)
        roots = ("pytest", "_pytest", "syrupy")
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in roots)
        print(",".join(leaked))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_all_lists_exactly_the_public_names() -> None:
    public = {n for n in dir(pytest_dsh_replay) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(pytest_dsh_replay, n)).__name__ == "module"}
    assert set(pytest_dsh_replay.__all__) == public - modules
    assert sorted(pytest_dsh_replay.__all__) == pytest_dsh_replay.__all__


def test_every_public_name_is_documented() -> None:
    for name in pytest_dsh_replay.__all__:
        obj = getattr(pytest_dsh_replay, name)
        if (callable(obj) and not name[0].isupper()) or isinstance(obj, type):
            assert obj.__doc__, name
