"""The docstrings users read: every public name's, its members', the pytest-layer modules'."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator

import pytest_dsh_replay

# The modules documented beside __all__: the plugin, the hooks, the syrupy extensions and
# the command.
PUBLIC_MODULES = ("plugin", "hookspecs", "syrupy_ext", "cli")


def _members(owner: str, cls: type) -> Iterator[tuple[str, str]]:
    """A class's public methods and properties, with their docstrings."""
    for attr, member in vars(cls).items():
        if not attr.startswith("_"):
            member = getattr(member, "fget", None) or getattr(member, "__func__", member)
            yield f"{owner}.{attr}", getattr(member, "__doc__", None) or ""


def public_docstrings() -> Iterator[tuple[str, str]]:
    """(dotted name, docstring) of every public name, its members and the public modules."""
    for name in pytest_dsh_replay.__all__:
        obj = getattr(pytest_dsh_replay, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield name, obj.__doc__ or ""
            if inspect.isclass(obj):
                yield from _members(name, obj)
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(f"pytest_dsh_replay.{module_name}")
        yield module_name, module.__doc__ or ""
        for attr, member in vars(module).items():
            defined_here = getattr(member, "__module__", None) == module.__name__
            if defined_here and (inspect.isfunction(member) or inspect.isclass(member)):
                yield f"{module_name}.{attr}", member.__doc__ or ""
                if inspect.isclass(member):
                    yield from _members(f"{module_name}.{attr}", member)
