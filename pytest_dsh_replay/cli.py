"""The ``dsh-replay`` command.

Subcommands::

    dsh-replay scripts PATH [--json]   the replay scripts of a scenario or a single log
    dsh-replay check PATH...           validate scenarios (for CI); one line per problem
    dsh-replay show PATH               a readable summary of a scenario
    dsh-replay show --html OUT PATH    a picture of it: one self-contained HTML page
    dsh-replay fmt [--check] PATH...   rewrite logs into the committed form

Exit status: 0 success, 1 invalid input (one message on stderr, no traceback), 2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import orjson

from ._check.normalize import canonical_log, in_committed_form
from ._errors import DshReplayError, SessionLogError
from ._format.events import Event
from ._format.json_values import describe_json
from ._format.jsonl import (
    iter_log_lines,
    parse_session_header,
    parse_session_log,
    plain_reads,
    read_log_bytes,
)
from ._format.log_names import entry_log_name, parse_log_name
from ._format.redact import Redactor, delta_runs, stream_runs_of
from ._format.text import join_blocks, visible
from ._format.zstd import is_zstd_log
from ._scripts.entries import ChunksEntry, HangEntry, ReplayEntry, ThrowEntry
from ._scripts.loading import is_sqlite_store, iter_scenario_dirs, load_scenario
from ._scripts.scenario import PRIMARY_LOG, Scenario, SessionScript, load_session_script
from ._store.atomic import LEFTOVER, Leftover, find_leftovers, recover, write_file_atomic

__all__ = ["main"]


def _write_json(value: object, out: TextIO) -> None:
    out.flush()
    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
    except orjson.JSONEncodeError:
        # A chunk may nest up to the limit (docs/limits.md#nesting); inside the printed
        # scripts it sits a few levels deeper than orjson's own 254-level limit.
        import json

        data = json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:
        out.write(data.decode("utf-8"))


def _single_file_json(script: SessionScript) -> dict[str, object]:
    return {
        "header": {
            "id": script.recorded_id,
            "createdAt": script.created_at,
            "seedLength": script.seed_length,  # a v3+ log counts it at its marker
        },
        "eventCount": script.event_count,
        "entries": [e.to_json() for e in script.entries],
    }


def _is_single_log(path: Path) -> bool:
    return path.is_file() and ".jsonl" in path.name


def _cmd_scripts(args: argparse.Namespace, out: TextIO) -> int:
    path: Path = args.path
    if args.session is None and _is_single_log(path):
        script = load_session_script(path, primary=True)
        if args.json:
            _write_json(_single_file_json(script), out)
        else:
            _print_scripts([script], out)
        return 0
    scenario = load_scenario(path, args.session)
    if args.json:
        _write_json(scenario.to_json(), out)
    else:
        _print_scripts(list(scenario.scripts), out)
    return 0


def _finish_kind(entry: ReplayEntry) -> str:
    if isinstance(entry, HangEntry):
        return "hang"
    if isinstance(entry, ThrowEntry):
        return f"throw {entry.code}"
    chunks = entry.chunks
    if chunks and chunks[-1].get("type") == "finish":
        reason = chunks[-1].get("reason")
        if isinstance(reason, dict):
            kind = str(reason.get("kind"))
            failure = reason.get("failure")
            if isinstance(failure, dict) and "code" in failure:
                kind += f" {failure['code']}"
            return kind
    return "?"


_PREVIEW_REDACTOR = Redactor()


def _preview(entry: ReplayEntry, width: int = 60) -> str:
    if isinstance(entry, HangEntry):
        return "(hangs until cancelled)"
    blocks: dict[object, list[str]] = {}  # each text block's deltas, by block index
    tools: list[str] = []
    for chunk in entry.chunks:
        kind = chunk.get("type")
        if kind == "text-delta" and isinstance(chunk.get("text"), str):
            blocks.setdefault(chunk.get("index"), []).append(chunk["text"])
        elif kind == "block-end":
            block = chunk.get("block")
            if isinstance(block, dict) and block.get("type") == "tool-call":
                tools.append(str(block.get("name")))
            elif isinstance(block, dict) and block.get("type") == "text":
                blocks.setdefault(chunk.get("index"), [str(block.get("text", ""))])
    # Text blocks visibly apart (docs/limits.md#block-separator); no ESC reaches the terminal;
    # nothing that looks like a secret is shown (docs/checks.md#redaction), as on the page.
    text = _PREVIEW_REDACTOR.redact_text(join_blocks("".join(d) for d in blocks.values()))
    joined = visible(" ".join(text.split()))
    if len(joined) > width:
        joined = joined[: width - 1] + "…"
    parts = [f'"{joined}"'] if joined else []
    if tools:
        parts.append("tools: " + visible(", ".join(tools)))
    return "  ".join(parts) or "(no text)"


def _print_scripts(scripts: Sequence[SessionScript], out: TextIO) -> None:
    for script in scripts:
        parent = script.parent_session
        role = "primary"
        if parent is not None:
            fork = bool(script.seed_length) or script.header.seeded
            role = f"child of {parent}, {'fork' if fork else 'spawn'}"
        if len(scripts) == 1 and parent is not None:
            role += ", shown unsliced"
        seed = f", seedLength {script.seed_length}" if script.seed_length else ""
        role = visible(role)  # ids from the logs: no escape sequence reaches the terminal
        out.write(
            f"{script.file}: session {visible(script.recorded_id) or '(no id)'} ({role}{seed}), "
            f"{len(script.entries)} call(s), {script.event_count} event(s)\n"
        )
        for n, entry in enumerate(script.entries, start=1):
            size = entry.chunk_count if isinstance(entry, ChunksEntry | ThrowEntry) else 2
            out.write(
                f"  call #{n}: {entry.kind}, {size} chunk(s), {_finish_kind(entry)}  "
                f"{_preview(entry)}\n"
            )


def _cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    path: Path = args.path
    scenario = (
        Scenario(path=path, scripts=(load_session_script(path, primary=True),))
        if args.session is None and _is_single_log(path)
        else load_scenario(path, args.session)
    )
    if args.html is not None:
        from ._report.pages import show_html

        picture = show_html(scenario, args.html)
        out.write(
            f"wrote {args.html}: {len(picture.sessions)} session(s), "
            f"{picture.call_count} model call(s)\n"
        )
        return 0
    out.write(
        f"scenario {scenario.path}: {len(scenario.scripts)} session(s), "
        f"{scenario.call_count} model call(s)\n"
    )
    _print_scripts(list(scenario.scripts), out)
    return 0


def _check_targets(paths: Sequence[Path], unreadable: list[str] | None = None) -> list[Path]:
    """The scenarios to check or format; what only interrupted writes left is no scenario.

    A directory without a primary log is searched for scenario directories and SQLite
    session stores (in one walk); one that
    holds none but the hidden leftovers of an interrupted write (a snapshot root after a
    crash mid-swap) gives no target, as does a missing path whose previous recording was
    moved aside, or a leftover itself: `_leftovers` reports those. A target named twice
    (``ROOT ROOT/a``, ``a a/session.jsonl``) is checked once. A directory the search
    cannot read is a line in ``unreadable``: its scenarios were not checked.
    """
    targets: list[Path] = []

    def cannot_read(error: OSError) -> None:
        if unreadable is not None:
            unreadable.append(
                f"{error.filename}: cannot be read ({error.strerror or error}): the "
                "scenarios in it were not checked"
            )

    for path in paths:
        if LEFTOVER.fullmatch(path.name) is not None:
            continue
        if not os.path.lexists(path) and find_leftovers(path.parent, path.name):
            continue
        if path.is_dir() and not any(
            (path / name).exists() for name in (PRIMARY_LOG, PRIMARY_LOG + ".zst")
        ):
            found = sorted(iter_scenario_dirs(path, files=is_sqlite_store, onerror=cannot_read))
            if found or not find_leftovers(path):
                targets.extend(found if found else [path])
        else:
            targets.append(path)
    return _once(targets)


def _once(targets: list[Path]) -> list[Path]:
    """``targets`` without repeats: a path met before, or a log of a directory met.

    A file in such a directory by another name (no log name) is checked on its own.
    """
    kept: dict[Path, Path] = {}  # resolved -> as given, the first of each
    for target in targets:
        kept.setdefault(target.resolve(), target)
    dirs = {key for key, target in kept.items() if target.is_dir()}
    return [
        target
        for key, target in kept.items()
        if key in dirs or key.parent not in dirs or entry_log_name(target.name) is None
    ]


def _log_files(target: Path) -> list[Path]:
    """The session logs of a target: the file itself, or a directory's logs.

    A directory's are picked by the loader's naming rules
    ([docs/scenarios.md#naming](../scenarios.md#naming)): a
    backup beside them (``session.jsonl.bak``) is no log, and ``fmt`` never rewrites it.
    """
    if target.is_file():
        return [target] if ".jsonl" in target.name else []
    return sorted(p for p in target.iterdir() if entry_log_name(p.name) is not None)


def _header_ids(target: Path) -> tuple[str, str | None]:
    """``(id, parentSession)`` of a target that does not load, from its primary's header.

    ``("", None)`` when that line cannot be read either; so a broken log still counts
    with its scenario (`_scenario_count`).
    """
    if target.is_file():
        newest = target
    else:
        try:
            files = _log_files(target)
        except OSError:  # missing or unreadable: the load's error already says so
            return "", None
        named = ((parse_log_name(p.name), p) for p in files)
        primaries = [(n.version or 0, p) for n, p in named if n is not None and n.child is None]
        if not primaries:
            return "", None
        _, newest = max(primaries)
    try:
        header = parse_session_header(read_log_bytes(newest).split(b"\n", 1)[0])
    except (DshReplayError, OSError):
        return "", None
    return header.id, header.parent_session


def _canonical(path: Path, data: bytes) -> bytes:
    """The log at ``path`` in the committed form; an error names the file.

    Raises:
        SessionLogError: The log does not parse, or the writer cannot write a record of
            it (one nested deeper than the serializer's 254 levels), naming ``path``.
    """
    try:
        return canonical_log(data, source=str(path))
    except SessionLogError as error:
        raise error.at(path=str(path), line=None) from None


def _log_problems(path: Path, redactor: Redactor, *, strict_form: bool) -> list[str]:
    """Secret problems of one log (and, when ``strict_form``, its form), one line each."""
    problems: list[str] = []
    data = read_log_bytes(path)
    if (
        strict_form
        and not _compressed(path)
        and not in_committed_form(data, _canonical(path, data))
    ):
        problems.append(
            f"{path}: not in the committed form (projected envelopes, packed chunk rows); "
            f"canonicalize it with: dsh-replay fmt {path}"
        )
    for index, (lineno, value) in enumerate(iter_log_lines(data, source=str(path))):
        if strict_form and index == 0:  # the header
            problems.extend(_header_id_problems(path, lineno, value))
        for json_path, rule in redactor.find(value):
            problems.append(
                f"{path}:{lineno}: {json_path} looks like a secret ({rule}); remove it and "
                "re-record, or redact it with the pytest_dsh_replay_redact hook"
            )
    problems.extend(_split_secrets(str(path), parse_session_log(data, source=str(path)), redactor))
    return problems


def _compressed(path: Path) -> bool:
    """Whether the log at ``path`` is zstd (its name or its first bytes say so)."""
    with open(path, "rb") as f:
        return is_zstd_log(path.name, f.read(4))


def _header_id_problems(path: Path, lineno: int, header: object) -> list[str]:
    """``--strict-form``: the header names its session, as every recording this plugin writes.

    Reading accepts a header without a (non-empty string) ``id``, as the dsh harness's
    reader does ([docs/format.md#lenient-reading](../format.md#lenient-reading)); the
    committed form does not (see [docs/cli.md#check-command](../cli.md#check-command)).

    Returns:
        No line, or one (``<path>:<line>: the header has no session id: ...``): the id
        is missing, empty or not a string.
    """
    if not isinstance(header, dict) or "id" not in header:
        found = "none"
    elif header["id"] == "":
        found = "an empty string"
    elif not isinstance(header["id"], str):
        found = describe_json(header["id"])
    else:
        return []
    problem = SessionLogError(
        "the header has no session id: expected a non-empty string for its id, found "
        f"{found}; every recording this plugin writes has one, so this log was damaged or "
        "edited by hand: restore it, or re-record its scenario",
        path=str(path),
        line=lineno,
    )
    return [str(problem)]


def _leftovers(paths: Sequence[Path]) -> list[Leftover]:
    """The leftovers of interrupted writes under (or beside) ``paths``, sorted by path."""
    found: dict[Path, Leftover] = {}
    for path in paths:
        if LEFTOVER.fullmatch(path.name) is not None:
            path = path.parent  # a leftover named on the command line: look beside it
        for leftover in find_leftovers(path.parent, path.name):
            found.setdefault(leftover.path, leftover)
        if not path.is_dir():
            continue
        for dirpath, dirnames, _ in os.walk(path):
            for leftover in find_leftovers(dirpath):
                found.setdefault(leftover.path, leftover)
            dirnames[:] = sorted(n for n in dirnames if LEFTOVER.fullmatch(n) is None)
    return [found[p] for p in sorted(found)]


def _split_secrets(where: str, events: Sequence[Event], redactor: Redactor) -> list[str]:
    """One line per streamed text whose deltas hold a secret only when joined."""
    problems: list[str] = []
    for run in delta_runs(events):
        pieces = [events[i]["data"]["chunk"][name] for i, name in run]
        if any(True for piece in pieces for _ in redactor.find(piece)):
            continue  # a piece holds the secret: reported with its own line
        for _, rule in redactor.find("".join(pieces)):
            first, last = events[run[0][0]].get("seq"), events[run[-1][0]].get("seq")
            problems.append(
                f"{where}: the deltas of events seq {first}-{last} join into a secret ({rule}); "
                "remove it and re-record"
            )
    for i, k, name in stream_runs_of(events):  # the runs of embedded streams (format 2-5)
        pieces = events[i]["data"]["stream"][k][name]
        if any(True for piece in pieces for _ in redactor.find(piece)):
            continue
        for _, rule in redactor.find("".join(pieces)):
            problems.append(
                f"{where}: the {name} of stream record {k} of event seq {events[i].get('seq')} "
                f"join into a secret ({rule}); remove it and re-record"
            )
    return problems


def _store_secrets(path: Path, redactor: Redactor) -> list[str]:
    """One line per string in a SQLite store's headers or events that looks secret."""
    from ._store.backends.sqlite import SqliteBackend

    problems: list[str] = []
    with SqliteBackend(path, read_only=True) as store:
        logs = list(store.logs())
    for header, events in logs:
        where = f"{path}#{header.id}"
        for json_path, rule in redactor.find(header.to_json()):
            problems.append(f"{where}: header {json_path} looks like a secret ({rule})")
        for event in events:
            for json_path, rule in redactor.find(event):
                problems.append(
                    f"{where}: event seq {event.get('seq')} {json_path} looks like a secret "
                    f"({rule})"
                )
        problems.extend(_split_secrets(where, events, redactor))
    return problems


def _stale_locks(paths: Sequence[Path]) -> list[str]:
    """One line per recording lock file under (or beside) ``paths`` that no process holds."""
    from ._store.lock import stale_lock

    found: set[Path] = set()
    for path in paths:
        found.add(path.parent / f".{path.name}.lock")
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = [n for n in dirnames if LEFTOVER.fullmatch(n) is None]
                found.update(Path(dirpath) / n for n in filenames if _is_lock_name(n))
    return [
        f"{lock}: the lock file of a recording a killed run left behind (no process holds "
        f"it); the next pytest run that uses {lock.with_name(lock.name[1:-5])} removes it, "
        "or delete it"
        for lock in sorted(found)
        if stale_lock(lock)
    ]


def _is_lock_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(".lock") and len(name) > 6


def _cmd_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    problems: list[str] = [leftover.describe() for leftover in _leftovers(args.paths)]
    problems.extend(_stale_locks(args.paths))
    targets = _check_targets(args.paths, problems)
    redactor = Redactor()
    primaries: list[tuple[str, str | None]] = []  # each loaded target's (id, parent)
    loaded_all: list[Scenario] = []
    for target in targets:
        try:
            with plain_reads():  # every payload at the load, in log order
                loaded = load_scenario(target)
        except DshReplayError as error:
            problems.append(str(error))
            primaries.append(_header_ids(target))
            continue
        loaded_all.append(loaded)
        first = loaded.scripts[0]
        primaries.append((first.recorded_id, first.parent_session))
        if is_sqlite_store(target):
            problems.extend(_store_secrets(target, redactor))
            continue
        for log in _log_files(target):
            try:
                problems.extend(_log_problems(log, redactor, strict_form=args.strict_form))
            except DshReplayError as error:
                problems.append(str(error))
            except OSError as error:  # the load read it a moment ago
                problems.append(f"{log}: {error.strerror or error}")
    problems.extend(_incomplete(loaded_all, {sid for sid, _ in primaries if sid}))
    for problem in problems:
        err.write(f"{problem}\n")
    count = _scenario_count(primaries)
    if problems:
        err.write(f"{len(problems)} problem(s) in {count} scenario(s)\n")
        return 1
    out.write(f"ok: {count} scenario(s)\n")
    return 0


def _incomplete(scenarios: Sequence[Scenario], known: set[str]) -> list[str]:
    """One line per child a checked log names that no checked log is (a lost file).

    Children found in another checked target (a runtime sessions root's other session
    directories; ``known``: the ids of the targets' primaries, one that did not load
    included, as its header says) are not missing.
    """
    from ._replay.binding import missing_children

    everyone = known | {s.recorded_id for scenario in scenarios for s in scenario.scripts}
    return [
        f"{scenario.path / file if scenario.path.is_dir() else scenario.path}: names child "
        f"session {child!r}, of which the scenario has no log: the recording is incomplete; "
        "restore the missing file (from version control) or re-record the scenario"
        for scenario in scenarios
        for file, child in missing_children(scenario, everyone)
    ]


def _scenario_count(primaries: Sequence[tuple[str, str | None]]) -> int:
    """How many scenarios the checked targets are: a runtime child counts with its parent.

    Under the dsh runtime's sessions root every session has a directory of its own, so
    each is a target; a target whose log names another target's session as its parent
    is part of that session's scenario, not a scenario of its own.
    """
    ids = {sid for sid, _ in primaries if sid}
    return sum(1 for _, parent in primaries if parent is None or parent not in ids)


def _fmt_leftovers(paths: Sequence[Path], out: TextIO, err: TextIO, *, check: bool) -> int:
    """Report (``check``) or recover the leftovers of interrupted writes.

    Returns:
        How many leftovers are there (``check``), or are still there after recovery (it
        could not put them back or remove them: each is reported with its OS error).
    """
    leftovers = _leftovers(paths)
    if check:
        for leftover in leftovers:
            err.write(f"{leftover.describe()}\n")
        return len(leftovers)
    stuck = 0
    for target in dict.fromkeys(leftover.target for leftover in leftovers):
        recovery = recover(target)
        for leftover in recovery.restored:
            out.write(f"put back {target} from {leftover.path.name}\n")
        for leftover in recovery.removed:
            out.write(f"removed {leftover.path}\n")
        for left in recovery.stuck:
            err.write(f"dsh-replay: {left.describe()}\n")
        stuck += len(recovery.stuck)
    return stuck


def _cmd_fmt(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    left = _fmt_leftovers(args.paths, out, err, check=args.check)
    changed = 0
    files: list[Path] = []
    unreadable: list[str] = []
    for target in _check_targets(args.paths, unreadable):
        files.extend(_log_files(target))
    for line in unreadable:
        err.write(f"dsh-replay: {line}\n")
    for path in files:
        data = path.read_bytes()
        if is_zstd_log(path.name, data):
            err.write(f"dsh-replay: {path}: skipped, fmt rewrites plain .jsonl logs only\n")
            continue
        canonical = _canonical(path, data)
        if in_committed_form(data, canonical):  # (a CRLF checkout's is: git's to undo)
            continue
        if args.check:
            err.write(f"{path}: would be rewritten\n")
        else:
            write_file_atomic(path, canonical)
            out.write(f"rewrote {path}\n")
        changed += 1
    if args.check and (changed or left):
        err.write(
            f"{changed} of {len(files)} log(s) are not in the committed form"
            + (f"; {left} leftover(s) of interrupted writes\n" if left else "\n")
        )
        return 1
    out.write(
        f"{changed} of {len(files)} log(s) {'need rewriting' if args.check else 'were rewritten'}\n"
    )
    if left:
        err.write(f"{left} leftover(s) of interrupted writes could not be recovered or removed\n")
        return 1
    return 1 if unreadable else 0


_SESSION_HELP = (
    "PATH is the dsh runtime's sessions root ($DSH_HOME/sessions): replay session ID "
    "as the primary and its descendants as children"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-replay",
        description="Inspect and validate recorded dsh scenarios (session logs).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    scripts = sub.add_parser(
        "scripts",
        help="print the replay scripts of a scenario or a single log",
        description="Print the replay scripts (one entry per model call) of a scenario "
        "directory, a SQLite store, a runtime sessions root (with --session), or a single "
        "log (unsliced).",
    )
    scripts.add_argument("path", type=Path, metavar="PATH")
    scripts.add_argument("--session", metavar="ID", help=_SESSION_HELP)
    scripts.add_argument(
        "--json",
        action="store_true",
        help="print JSON: Scenario.to_json() for a scenario, "
        '{"header", "eventCount", "entries"} for a single log',
    )
    check = sub.add_parser(
        "check",
        help="validate scenarios (exit 1 with one line per problem)",
        description="Validate scenarios for CI: every scenario loads (naming, contiguous "
        "children, logs, sidecars) and no string looks like a secret. Logs may be in "
        "the full form (every event with seq/time, as the harness writes them) or the "
        "committed form. A directory without session.jsonl is searched for scenario "
        "directories.",
    )
    check.add_argument("paths", type=Path, nargs="+", metavar="PATH")
    check.add_argument(
        "--strict-form",
        action="store_true",
        help="also require every plain log to be in the committed form that recording "
        "writes (projected envelopes, packed chunk rows; dsh-replay fmt rewrites them)",
    )
    show = sub.add_parser(
        "show",
        help="summarize a scenario: sessions, seed lengths, calls, previews (--html: a page)",
        description="Summarize a scenario: sessions, seed lengths, calls, chunk counts "
        "and a text preview of each call; with --html, write a picture of it as one "
        "self-contained HTML page.",
    )
    show.add_argument("path", type=Path, metavar="PATH")
    show.add_argument("--session", metavar="ID", help=_SESSION_HELP)
    show.add_argument(
        "--html",
        type=Path,
        metavar="OUT",
        help="write a picture of the scenario to OUT (one self-contained HTML page: the "
        "session tree, every call's request and streamed answer, the time line) instead",
    )
    fmt = sub.add_parser(
        "fmt",
        help="rewrite logs into the committed form (projected envelopes, packed rows)",
        description="Rewrite session logs into the canonical committed form: the header "
        "line as found, every event with delta runs packed and seq/time removed. Event "
        "payloads are unchanged; running it twice changes nothing. The hidden leftovers of "
        "an interrupted write (.<name>.tmp-* and .<name>.old-*, as a killed fmt or "
        "recording leaves them) are removed first, a recording moved aside put back.",
    )
    fmt.add_argument("paths", type=Path, nargs="+", metavar="PATH")
    fmt.add_argument(
        "--check",
        action="store_true",
        help="only report logs that would change and leftovers of interrupted writes (exit 1)",
    )
    return parser


def _any_encoding(stream: TextIO) -> TextIO:
    """``stream``, writing what its encoding lacks as escapes.

    An ASCII or legacy console would fail on the previews' control pictures, or on a
    log's text, with a bare ``UnicodeEncodeError``.
    """
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and (getattr(stream, "encoding", "") or "").lower() not in (
        "utf-8",
        "utf8",
    ):
        reconfigure(errors="backslashreplace")
    return stream


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the ``dsh-replay`` command.

    Args:
        argv: The arguments after the program name (default: ``sys.argv[1:]``).
        stdout: Where results go (default: ``sys.stdout``).
        stderr: Where problems go (default: ``sys.stderr``).

    Returns:
        The exit status: 0 success, 1 invalid input, 2 usage error.
    """
    out = stdout if stdout is not None else _any_encoding(sys.stdout)
    err = stderr if stderr is not None else _any_encoding(sys.stderr)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        return _run(args, out, err)
    except BrokenPipeError:  # `dsh-replay ... | head`: a check cut short has not passed
        return 1 if args.command in ("check", "fmt") else 0


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The parsed command; its problems as one line each on ``err``."""
    try:
        if args.command == "scripts":
            return _cmd_scripts(args, out)
        if args.command == "show":
            return _cmd_show(args, out)
        if args.command == "fmt":
            return _cmd_fmt(args, out, err)
        return _cmd_check(args, out, err)
    except DshReplayError as error:
        err.write(f"dsh-replay: {error}\n")
        return 1
    except BrokenPipeError:
        raise
    except OSError as error:  # unreadable input, a read-only or full disk
        where = f"{error.filename}: " if error.filename is not None else ""
        err.write(f"dsh-replay: {where}{error.strerror or error}\n")
        return 1
