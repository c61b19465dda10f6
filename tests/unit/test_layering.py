"""The core is importable without pytest or syrupy, and the public API is what it says."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.paths import REPO
from support.public_docs import public_docstrings

import pytest_dsh_replay


def test_core_imports_neither_pytest_nor_syrupy() -> None:
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import pytest_dsh_replay
        skip = {"plugin", "hookspecs", "syrupy_ext", "__main__"}
        found = pkgutil.walk_packages(pytest_dsh_replay.__path__, "pytest_dsh_replay.")
        names = [m.name for m in found]
        assert any(name.count(".") > 1 for name in names), names  # the subpackages' modules
        for name in names:
            if name.split(".")[1] not in skip:
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
    assert sorted(pytest_dsh_replay.__all__) == pytest_dsh_replay.__all__
    for name in pytest_dsh_replay.__all__:
        home = importlib.import_module(f"pytest_dsh_replay.{pytest_dsh_replay._MODULE_OF[name]}")
        assert name in getattr(home, "__all__", ()), f"{name}: not public in its module"
        assert getattr(home, name) is getattr(pytest_dsh_replay, name), name
    with pytest.raises(AttributeError):
        pytest_dsh_replay.no_such_name  # noqa: B018


def test_every_public_name_is_documented() -> None:
    for name in pytest_dsh_replay.__all__:
        obj = getattr(pytest_dsh_replay, name)
        if (callable(obj) and not name[0].isupper()) or isinstance(obj, type):
            assert obj.__doc__, name


def test_importing_the_package_or_plugin_loads_no_core_module() -> None:
    code = (
        "import sys, pytest_dsh_replay, pytest_dsh_replay.plugin\n"
        "print(sorted(m for m in sys.modules if m.startswith('pytest_dsh_replay.')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "['pytest_dsh_replay.plugin']"


def test_the_layers_contract_holds() -> None:
    """pyproject's import-linter contract: every module sits in a layer, imports point down."""
    code = (
        "import sys\n"
        "from importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(no_cache=True, no_logo=True))\n"
    )
    root = REPO
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_replaying_a_call_imports_neither_regex_nor_asyncio_nor_sqlite(tmp_path: Path) -> None:
    """The cold path (load a small scenario, read its first chunk) stays lean.

    ``regex`` is needed only for a ``{{fromRequest:...}}`` placeholder, ``asyncio`` only
    for ``astream``, ``sqlite3`` only for a SQLite store; each costs milliseconds to
    import, which is most of a first chunk's time. Nor does it import what only other
    scenarios need: the override sidecar reader, the placeholder resolver, ``unicodedata``
    (to order children), the request view (read to bind children by content).
    """
    from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore, write_scenario

    class Scripted:
        def stream(self, request: object, **kwargs: object) -> object:
            yield {"type": "text-delta", "index": 0, "text": "hi"}
            yield {"type": "finish", "reason": {"kind": "stop"}}

    store = SessionStore(MemoryBackend())
    model = RecordingModel(Scripted(), store)
    list(model.stream({"messages": [{"role": "user", "content": "hi"}]}))
    model.close_open_calls()
    write_scenario(tmp_path / "s", store.sessions())
    code = textwrap.dedent(
        f"""
        import sys
        from pytest_dsh_replay import ReplayModel, load_scenario
        model = ReplayModel(load_scenario({str(tmp_path / "s")!r}))
        first = next(iter(model.stream({{"messages": [{{"role": "user", "content": "hi"}}]}})))
        assert first["type"] == "text-delta", first
        lazy = ("regex", "asyncio", "sqlite3", "unicodedata")
        lazy += ("pytest_dsh_replay._scripts.override", "pytest_dsh_replay._replay.placeholders")
        lazy += ("pytest_dsh_replay._wire",)  # the request view: only to bind by content
        print(sorted(m for m in lazy if m in sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_public_docstrings_cite_no_private_design_documents() -> None:
    """Users have no SPEC or DESIGN file: public help must stand on its own."""
    cited = [name for name, doc in public_docstrings() if re.search(r"\b(SPEC|DESIGN) \d", doc)]
    assert cited == []


def _modules(package: Path) -> set[str]:
    """A package's modules, dotted from the package (``backends.jsonl``)."""
    found = set()
    for path in package.rglob("*.py"):
        parts = [p for p in path.relative_to(package).with_suffix("").parts if p != "__init__"]
        if parts and (package / Path(*parts)).with_suffix(".py").is_file():
            found.add(".".join(parts))
    return found


def test_the_readme_module_map_matches_the_package_and_its_layers() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Module map", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ")]
    rows = [row for row in rows if "`" in row[2]]
    mapped = [re.findall(r"`([a-z_]+)`", row[2]) for row in rows]
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = config["tool"]["importlinter"]["contracts"]
    layers = [[m.strip() for m in layer.split("|")] for layer in contract["layers"]]
    assert mapped == layers  # one row per layer, top first, the same packages
    root = REPO / "pytest_dsh_replay"
    top = {p.stem for p in root.glob("*.py")} | {p.name for p in root.iterdir() if p.is_dir()}
    assert set().union(*map(set, mapped)) == top - {"__init__", "__pycache__"}
    for row, packages in zip(rows, mapped, strict=True):
        listed = set(re.findall(r"`([a-z_.]+)`", row[3]))
        inside = set().union(*(_modules(root / p) for p in packages if (root / p).is_dir()))
        assert listed == inside, packages  # the modules column names each module


def test_no_function_is_above_the_complexity_limit() -> None:
    """The project's McCabe limit (ruff's C901, ``max-complexity`` in pyproject.toml)."""
    pytest.importorskip("ruff")
    # --no-cache: a test writes nothing into the clone (ruff's cache is .ruff_cache/)
    command = [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "C901"]
    result = subprocess.run(
        [*command, "--output-format", "concise", "pytest_dsh_replay", "tests", "benchmarks"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
