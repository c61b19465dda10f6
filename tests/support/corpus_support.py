"""Where the shared conformance corpus is, and what to do when it is missing.

The corpus lives beside the clone (``../shared/corpus``) and is read in place, never
copied into the repository. ``DSH_CORPUS_DIR`` points elsewhere. When the corpus is
missing, tests that need it skip with a reason, except under CI (``CI`` set), where a
missing corpus is a failure: CI must not pass by skipping the conformance suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.paths import REPO

CORPUS = Path(os.environ.get("DSH_CORPUS_DIR", REPO.parent / "shared" / "corpus"))
HARNESS = CORPUS / "dsh-harness"
SQLITE = CORPUS / "dsh-sqlite"
SAMPLES = CORPUS.parent / "runtime-samples"
"""Real session logs (format 4) and request/response pairs of the dsh runtime."""


def corpus_scenarios() -> list[Path]:
    """Every scenario directory of the dsh-harness corpus, sorted; [] when absent."""
    if not HARNESS.is_dir():
        return []
    return sorted(p for p in HARNESS.iterdir() if (p / "session.jsonl").is_file())


def scenario(name: str) -> Path:
    """The corpus scenario whose folder name ends with ``__<name>``."""
    matches = [p for p in corpus_scenarios() if p.name.endswith("__" + name)]
    if len(matches) != 1:
        require_corpus(HARNESS)
        raise LookupError(f"no unique corpus scenario named {name!r}: {matches}")
    return matches[0]


def in_ci() -> bool:
    """Whether ``CI`` is set to something other than an empty or false value."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def require_corpus(path: Path = HARNESS) -> None:
    """Skip (or, under CI, fail) the calling test when ``path`` does not exist."""
    if path.exists():
        return
    message = (
        f"the dsh conformance corpus is missing at {path} "
        "(expected ../shared/corpus beside the clone, or set DSH_CORPUS_DIR)"
    )
    if in_ci():
        pytest.fail(message + "; CI requires it", pytrace=False)
    pytest.skip(message)


def corpus_params(paths: list[Path]) -> list[object]:
    """Parametrize over ``paths``; one placeholder param that skips/fails when empty."""
    if paths:
        return [pytest.param(p, id=p.name) for p in paths]
    return [pytest.param(None, id="corpus-missing")]


def corpus_listing() -> frozenset[str]:
    """Every entry under the shared corpus and the runtime samples, as paths from them.

    The corpus is read in place by every run on this machine: a test writes only into
    its own temporary directory. A session-scoped guard (``tests/conftest.py``) compares
    this listing before and after the run.
    """
    found: set[str] = set()
    for base in (CORPUS, SAMPLES):
        for dirpath, dirnames, filenames in os.walk(base):
            for name in (*dirnames, *filenames):
                found.add(os.path.relpath(os.path.join(dirpath, name), CORPUS.parent))
    return frozenset(found)


def corpus_changes(before: frozenset[str], after: frozenset[str]) -> str | None:
    """What a run left in or took from the corpus (:func:`corpus_listing`), or ``None``."""
    if before == after:
        return None
    lines = [f"  new: {path}" for path in sorted(after - before)]
    lines += [f"  gone: {path}" for path in sorted(before - after)]
    return (
        f"the tests changed the shared corpus under {CORPUS.parent}; tests write only into "
        "their temporary directories (a replay model's ready files too: pass "
        "workdir=tmp_path):\n" + "\n".join(lines)
    )
