"""Writing pictures: ``dsh-replay show --html`` and ``pytest --dsh-html=DIR``.

`scenario_picture` reads a loaded scenario's logs into a `Picture`; `write_page` writes
one page atomically; `test_page` and `write_test_page` make a replayed test's page (the
recording, the test's outcome and the log check's drift, if it found one) under the
directory ``--dsh-html`` names, and nowhere else
([docs/guide/picture.md](../guide/picture.md)).
"""

from __future__ import annotations

import hashlib
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .._errors import DshReplayError, PictureError, ScenarioError
from .._format.events import SessionLike
from .._format.jsonl import read_session_log
from .._scripts.loading import is_sqlite_store
from .._scripts.scenario import Scenario, is_scenario_entry
from .._store.atomic import write_file_atomic
from .html import PageStatus, render_page
from .picture import Picture, picture_of

if TYPE_CHECKING:
    from .._fixture.dsh_replay import DshReplay

__all__ = [
    "page_name",
    "prepare_directory",
    "scenario_picture",
    "show_html",
    "test_page",
    "write_page",
    "write_test_page",
]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_CHARS: Final = 120
"""How much of a node id a page's file name keeps (a digest of the whole id follows)."""


def _store_sessions(path: Path) -> dict[str, SessionLike]:
    from .._store.backends.sqlite import SqliteBackend  # only for a store

    with SqliteBackend(path, read_only=True) as store:
        return {log.header.id: log for log in store.logs()}


def scenario_picture(scenario: Scenario) -> Picture:
    """The picture of a loaded scenario, from its sessions' logs.

    Raises:
        SessionLogError: A log no longer reads (changed since the scenario was loaded).
        ScenarioError: A session of a store is no longer in it.
    """
    sessions: list[SessionLike] = []
    stores: dict[Path, dict[str, SessionLike]] = {}
    for script in scenario.scripts:
        path = script.path if script.path is not None else scenario.path
        if is_sqlite_store(path):
            if path not in stores:
                stores[path] = _store_sessions(path)
            found = stores[path].get(script.recorded_id)
            if found is None:
                raise ScenarioError(
                    f"session {script.recorded_id!r} is no longer in the store", path=str(path)
                )
            sessions.append(found)
        else:
            sessions.append(read_session_log(path))
    return picture_of(
        str(scenario.path), sessions, files=[script.file for script in scenario.scripts]
    )


def write_page(target: Path, text: str) -> None:
    """Write a page at ``target`` atomically (a file there is replaced as a whole).

    Raises:
        PictureError: ``target`` is a directory, or cannot be written (the reason named);
            a file that was there is left as it was.
    """
    if target.is_dir():
        raise PictureError(f"{target}: is a directory; name the page's file (OUT.html)")
    try:
        mode = target.lstat().st_mode
    except OSError:
        mode = None  # nothing there (or nothing readable): the write says why it fails
    if mode is not None and not stat.S_ISREG(mode):
        raise PictureError(
            f"{target}: is not a regular file (a symbolic link, a device or a FIFO), which "
            "a page written in its place would replace; name a file to write (OUT.html)"
        )
    try:
        write_file_atomic(target, text.encode("utf-8", "surrogatepass"))
    except OSError as err:
        raise PictureError(f"cannot write {target}: {err.strerror or err}") from None


def prepare_directory(directory: Path) -> Path:
    """Create the pages' directory (and its parents) when missing; return it absolute.

    Raises:
        PictureError: It cannot be created, or is not a directory.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PictureError(f"--dsh-html={directory}: not a directory") from None
    except OSError as err:
        raise PictureError(f"--dsh-html={directory}: {err.strerror or err}") from None
    return directory.absolute()


def page_name(nodeid: str) -> str:
    """The file name of a test's page: its node id made safe, then a digest of it.

    Only letters, digits, ``.``, ``_`` and ``-`` remain (no separator, never a hidden
    name), cut to 120 characters; the digest tells apart node ids that read alike then.
    """
    safe = _UNSAFE.sub("_", nodeid).strip("._-")[:_NAME_CHARS] or "test"
    digest = hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe}-{digest}.html"


def test_page(nodeid: str, replay: DshReplay, *, passed: bool) -> str | None:
    """A replayed test's page, or ``None`` when it has no recording to draw.

    Args:
        nodeid: The test's node id.
        replay: The test's replay (``"replay"`` mode).
        passed: Whether the test body passed.
    """
    scenario = replay.scenario
    if replay.mode != "replay" or scenario is None:
        return None
    drift = replay._drift
    if drift is not None:
        status = PageStatus(nodeid, "the replayed log differs from the recording", failed=True)
    elif passed:
        status = PageStatus(nodeid, "passed")
    else:
        status = PageStatus(nodeid, "failed", failed=True)
    return render_page(scenario_picture(scenario), status=status, drift=drift)


test_page.__test__ = False  # type: ignore[attr-defined]  # not a test for pytest to collect


def write_test_page(directory: Path, nodeid: str, replay: DshReplay, *, passed: bool) -> str:
    """Write a replayed test's page into ``directory`` (``--dsh-html``).

    Args:
        directory: The pages' directory (`prepare_directory` made it).
        nodeid: The test's node id; the page is ``directory / page_name(nodeid)``.
        replay: The test's replay.
        passed: Whether the test body passed.

    Returns:
        ``""`` when the page was written (or the test has no recording to draw), else
        the problem, in words, for a warning: the page could not be made or written.
    """
    try:
        page = test_page(nodeid, replay, passed=passed)
        if page is not None:
            write_page(directory / page_name(nodeid), page)
    except (DshReplayError, OSError) as err:  # a recording changed on disk since the load
        return f"dsh-replay: no page for {nodeid}: {err}"
    return ""


def show_html(scenario: Scenario, out: Path) -> Picture:
    """Write the picture of ``scenario`` to ``out`` (``dsh-replay show --html OUT``).

    Raises:
        PictureError: ``out`` cannot be written, or is the scenario itself, one of its
            files or a path inside it (the page would replace what it draws).
        SessionLogError: A log no longer reads.
    """
    _outside(scenario, out)
    picture = scenario_picture(scenario)
    write_page(out, render_page(picture))
    return picture


def _outside(scenario: Scenario, out: Path) -> None:
    """Refuse an ``out`` that is ``scenario``'s path, one of its logs, or inside it.

    A scenario given as one log has the logs and sidecars beside it too: a page written
    over ``session.1.jsonl`` beside a drawn ``session.jsonl`` would replace a log.
    """
    target = out.resolve()
    places = [scenario.path, *(s.path for s in scenario.scripts if s.path is not None)]
    for place in (Path(p).resolve() for p in places):
        beside = place.is_file() and target.parent == place.parent
        if target == place or target.is_relative_to(place):
            raise PictureError(
                f"{out}: is inside the scenario it draws ({place}); a page there would "
                "replace or mix with its files: write it elsewhere"
            )
        if beside and is_scenario_entry(target.name):
            raise PictureError(
                f"{out}: is a file of the scenario it draws (beside {place.name}); a page "
                "there would replace it: write it elsewhere"
            )
