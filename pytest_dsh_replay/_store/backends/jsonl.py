"""Sessions as JSONL files in the dsh harness's on-disk layout.

Each session lives at ``<root>/<project_key(cwd)>/<encode_segment(id)>/session.jsonl``
(``session.jsonl.zstd`` compressed): `project_key` and `encode_segment` name
the directories the way the harness (and the dsh runtime) does.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Final, Literal

import orjson

from ..._errors import SessionLogError, SessionStoreError
from ..._format.chunk_rows import pack_chunk_runs
from ..._format.events import Event, JSONObject, SessionHeader
from ..._format.jsonl import MAX_LINE_BYTES, fsync_dir
from ..._format.zstd import compress_frame
from ..atomic import hidden_sibling
from ..log_rules import check_record_size, check_session_id, quote, scan_committed, scan_zstd
from .base import StoredLog

__all__ = ["JsonlBackend", "decode_segment", "encode_segment", "project_key", "session_dir_name"]


def _zstd_module() -> ModuleType:
    try:
        import zstandard
    except ImportError:
        raise SessionStoreError(
            "JSONL compression 'zstd' needs the zstandard package, which is not installed; "
            "install it with: pip install 'pytest-dsh-replay[zstd]'"
        ) from None
    return zstandard


_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS: Final = frozenset("/\\:")
_NO_CWD: Final = "_no-cwd"
_LOG_NAMES: Final[dict[str, str]] = {"none": "session.jsonl", "zstd": "session.jsonl.zstd"}
_NAME_MAX: Final = 255
"""The longest file name, in bytes, of the usual file systems (ext4, APFS, NTFS ...)."""


def _code_units(text: str) -> Iterator[str]:
    """Yield ``text`` one UTF-16 code unit at a time (astral characters as two)."""
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            yield chr(0xD800 + (cp >> 10))
            yield chr(0xDC00 + (cp & 0x3FF))
        else:
            yield ch


def _escape(unit: str) -> str:
    return unit if unit in _SAFE else f"~{ord(unit):04X}"


def project_key(cwd: str | None) -> str:
    r"""The project directory name of a session's ``cwd``.

    See [docs/format.md#jsonl-store](../format.md#jsonl-store); the dsh harness's ``projectKey``.

    Runs of ``/``, ``\`` and ``:`` become one ``-``; ``[A-Za-z0-9._-]`` stay; every other
    UTF-16 code unit (``~`` included) becomes ``~`` plus 4 uppercase hex digits; leading
    ``-`` are stripped (``root`` when nothing is left); the slug is cut to 251 characters
    and wrapped as ``--<slug>--``. No ``cwd`` gives ``_no-cwd``. The mapping is lossy.

    Example: ``/home/me/my proj`` -> ``--home-me-my~0020proj--``.
    """
    if cwd is None:
        return _NO_CWD
    parts: list[str] = []
    in_separator = False
    for unit in _code_units(cwd):
        if unit in _SEPARATORS:
            if not in_separator:
                parts.append("-")
            in_separator = True
            continue
        in_separator = False
        parts.append(_escape(unit))
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:251]}--"


def encode_segment(session_id: str) -> str:
    """The session directory name of an id; injective.

    See [docs/format.md#jsonl-store](../format.md#jsonl-store); the dsh harness's ``encodeSegment``.

    ``[A-Za-z0-9._-]`` stay, every other UTF-16 code unit becomes ``~XXXX``; ``.`` and
    ``..`` become ``~002E`` and ``~002E~002E``.

    Raises:
        SessionStoreError: The id is not a string, or empty.
    """
    check_session_id(session_id)
    if session_id in (".", ".."):
        return "~002E" * len(session_id)
    return "".join(_escape(u) for u in _code_units(session_id))


def session_dir_name(session_id: str) -> str:
    """The session directory name of an id a JSONL store can hold (`encode_segment`).

    See [docs/format.md#jsonl-store](../format.md#jsonl-store): the name must fit the file
    system's limit of 255 bytes, checked here rather than met as an ``OSError`` later.

    Raises:
        SessionStoreError: The id is not a non-empty string, or its directory name is
            longer than 255 bytes (the message names the id and the limit).
    """
    name = encode_segment(session_id)
    size = len(name.encode("utf-8"))
    if size > _NAME_MAX:
        raise SessionStoreError(
            f"session id {quote(session_id)} is too long for a JSONL store: its directory "
            f"name would be {size} bytes, and a file system allows at most {_NAME_MAX} "
            "(each character outside [A-Za-z0-9._-] takes 5 bytes, 10 beyond U+FFFF); "
            "use a shorter id"
        )
    return name


def decode_segment(name: str) -> str | None:
    """Invert `encode_segment`; ``None`` when ``name`` is not an encoded id."""
    units: list[int] = []
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "~":
            digits = name[i + 1 : i + 5]
            if len(digits) != 4 or not all(c in "0123456789ABCDEF" for c in digits):
                return None
            units.append(int(digits, 16))
            i += 5
        elif ch in _SAFE:
            units.append(ord(ch))
            i += 1
        else:
            return None
    raw = b"".join(u.to_bytes(2, "little") for u in units)
    text = raw.decode("utf-16-le", "surrogatepass")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text if encode_segment(text) == name else None


class JsonlBackend:
    """Sessions as JSONL files in the dsh harness's layout.

    Each session lives at ``<root>/<project_key(cwd)>/<encode_segment(id)>/session.jsonl``
    (or ``session.jsonl.zstd``); a session's directory name is at most 255 bytes
    (`session_dir_name`). Nothing exists on disk before a session's first write;
    that write (header plus first batch) goes to a temporary file that is then published
    with a hard link, which never overwrites. Later batches are appended and fsynced,
    delta runs of each batch packed into chunk rows. In zstd mode the header is one
    frame and every batch one more (content checksums on).

    Args:
        root: The directory holding the project directories (created on first write).
        compression: ``"none"`` (plain ``session.jsonl``, what snapshot runs use) or
            ``"zstd"`` (needs the ``zstandard`` package: ``pytest-dsh-replay[zstd]``).
            One root holds one encoding: a log of the other kind is refused.
        pack_chunks: Pack delta runs of 3 or more per batch, as the harness
            does by default.
        durable: Flush every write to the disk (``fsync``) before it returns. ``False``
            skips that, for throwaway stores such as a test's temporary directory; writes
            stay atomic either way.

    Raises:
        SessionStoreError: An unknown compression, or zstd without ``zstandard``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        compression: Literal["none", "zstd"] = "none",
        pack_chunks: bool = True,
        durable: bool = True,
    ):
        if compression not in _LOG_NAMES:
            raise SessionStoreError(
                f'unknown compression {compression!r}: expected "none" or "zstd"'
            )
        self.root = Path(root)
        self.compression: Literal["none", "zstd"] = compression
        self.pack_chunks = pack_chunks
        self.durable = durable
        self._zstd = _zstd_module() if compression == "zstd" else None
        self._lock = threading.Lock()
        self._paths: dict[str, Path] = {}

    # -- layout --------------------------------------------------------------------------

    @property
    def log_name(self) -> str:
        """``session.jsonl`` or ``session.jsonl.zstd``."""
        return _LOG_NAMES[self.compression]

    def path_for(self, header: SessionHeader) -> Path:
        """Where a session with this header is stored.

        Raises:
            SessionStoreError: The id is too long for a directory name (`session_dir_name`).
        """
        return self.root / project_key(header.cwd) / session_dir_name(header.id) / self.log_name

    def _project_dirs(self) -> list[Path]:
        try:
            entries = sorted(self.root.iterdir())
        except FileNotFoundError:
            return []
        except OSError as err:
            raise SessionStoreError(f"cannot list JSONL store {self.root}: {err}") from None
        dirs = []
        for p in entries:
            if p.name.startswith(".") or not p.is_dir():
                continue
            for q in p.iterdir():
                if q.is_file() and q.name.endswith((".jsonl", ".jsonl.zstd")):
                    raise SessionStoreError(
                        f"JSONL store {self.root}: {q} uses the unsupported flat-file layout "
                        "(a log directly in a project directory); expected "
                        "<project>/<session>/session.jsonl"
                    )
            dirs.append(p)
        return dirs

    def _log_in(self, session_dir: Path) -> Path | None:
        other = "zstd" if self.compression == "none" else "none"
        foreign = session_dir / _LOG_NAMES[other]
        if foreign.exists():
            raise SessionStoreError(
                f"{foreign} uses {_LOG_NAMES[other].removeprefix('session')}, but this backend is "
                f'configured for compression "{self.compression}"; open the root with '
                f'JsonlBackend(root, compression="{other}")'
            )
        path = session_dir / self.log_name
        return path if path.exists() else None

    def locate(self, session_id: str) -> Path | None:
        """The log file of a stored session, or ``None``.

        Raises:
            SessionStoreError: The id is not one a JSONL store can hold
                (`session_dir_name`), appears in several project directories, or its log
                uses the other compression; or the file system refused a look-up.
        """
        check_session_id(session_id)  # before the cache: an id may be unhashable
        with self._lock:
            cached = self._paths.get(session_id)
        if cached is not None and cached.exists():
            return cached
        segment = session_dir_name(session_id)
        found: list[Path] = []
        for project in self._project_dirs():
            session_dir = project / segment
            try:
                log = self._log_in(session_dir) if session_dir.is_dir() else None
            except OSError as err:
                raise SessionStoreError(
                    f"cannot look up session {quote(session_id)} in {session_dir}: {err}"
                ) from None
            if log is not None:
                found.append(log)
        if len(found) > 1:
            raise SessionStoreError(
                f"duplicate JSONL session id {quote(session_id)} appears in multiple project "
                f"directories: {', '.join(str(p) for p in found)}"
            )
        if not found:
            return None
        with self._lock:
            self._paths[session_id] = found[0]
        return found[0]

    # -- the protocol ----------------------------------------------------------------------

    def describe(self) -> str:
        """``JSONL store at <root>``."""
        return f"JSONL store at {self.root}"

    def exists(self, session_id: str) -> bool:
        """Whether ``session_id`` has a log under the root.

        Raises:
            SessionStoreError: As `locate`: an id too long for a directory name is
                refused here, before anything is written.
        """
        return self.locate(session_id) is not None

    def session_ids(self) -> list[str]:
        """Every stored session id, sorted."""
        ids: list[str] = []
        for project in self._project_dirs():
            for d in sorted(project.iterdir()):
                sid = decode_segment(d.name) if d.is_dir() else None
                if sid is not None and self._log_in(d) is not None:
                    ids.append(sid)
        return sorted(ids)

    def _encode(self, records: Iterable[JSONObject]) -> bytes:
        lines = []
        for record in records:
            line = orjson.dumps(record)
            if len(line) > MAX_LINE_BYTES:
                check_record_size(len(line), record)  # a line reading would refuse
            lines.append(line + b"\n")
        return b"".join(lines)

    def _frame(self, plaintext: bytes) -> bytes:
        if self._zstd is None:
            return plaintext
        return compress_frame(self._zstd, plaintext)

    def _batch(self, events: Sequence[Event]) -> bytes:
        records = pack_chunk_runs(events) if self.pack_chunks else list(events)
        return self._encode(records)

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Write a batch; the first write publishes header and batch atomically.

        Raises:
            SessionStoreError: The session exists already (``create``) or not at all,
                or the file cannot be written (nothing is left half-published).
        """
        if create:
            self._materialize(header, events)
            return
        path = self.locate(header.id)
        if path is None:
            raise SessionStoreError(
                f"session {quote(header.id)} has no log in {self.describe()}; it was never "
                "written or was removed"
            )
        if not events:
            return
        blob = self._frame(self._batch(events))
        try:
            with open(path, "ab") as f:
                f.write(blob)
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
        except OSError as err:
            raise SessionStoreError(f"cannot append to session log {path}: {err}") from None

    def _materialize(self, header: SessionHeader, events: Sequence[Event]) -> None:
        if self.exists(header.id):
            raise SessionStoreError(
                f"session {quote(header.id)} already exists in {self.describe()}"
            )
        final = self.path_for(header)
        head = orjson.dumps(header.to_json()) + b"\n"
        body = self._batch(events) if events else b""
        blob = self._frame(head) + (self._frame(body) if body else b"")
        tmp = hidden_sibling(final, "tmp")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "xb") as f:
                f.write(blob)
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError:
                raise SessionStoreError(
                    f"session {quote(header.id)} already exists: {final} was written meanwhile"
                ) from None
            except OSError:  # no hard links here: publish by an exclusive rename
                if final.exists():
                    raise SessionStoreError(
                        f"session {quote(header.id)} already exists: {final}"
                    ) from None
                os.replace(tmp, final)
            if self.durable:
                fsync_dir(final.parent)
        except OSError as err:
            raise SessionStoreError(f"cannot write session log {final}: {err}") from None
        finally:
            with contextlib.suppress(OSError):  # never there when its directory is not
                tmp.unlink(missing_ok=True)
        with self._lock:
            self._paths[header.id] = final

    def read(self, session_id: str) -> StoredLog | None:
        """Read a session's committed prefix, repairing a torn tail on disk.

        A plain log is truncated to its last complete accepted record. In zstd mode a
        torn last frame is cut off and the complete records it still held are appended
        again as a new frame.

        Raises:
            SessionLogError: The header is missing, invalid, foreign, or names another
                session or project; or committed data is damaged (file and line named).
            SessionStoreError: As `locate`, or the torn tail cannot be cut off.
        """
        path = self.locate(session_id)
        if path is None:
            return None
        source = str(path)
        try:
            data = path.read_bytes()
        except OSError as err:
            raise SessionLogError(f"cannot read session log: {err}", path=source) from None
        recovered: list[Event] = []
        if self.compression == "zstd":
            scan, cut, recovered = scan_zstd(data, source)
        else:
            scan = scan_committed(data, source)
            cut = scan.committed if scan.committed < len(data) else None
        header = scan.log.header
        if header.id != session_id:
            raise SessionLogError(
                f"corrupt session log: requested id {quote(session_id)} does not match header "
                f"id {quote(header.id)}",
                path=source,
                line=1,
            )
        expected = project_key(header.cwd)
        if path.parent.parent.name != expected:
            raise SessionLogError(
                f"corrupt session log: header id {quote(header.id)} and cwd identify "
                f"{quote(str(self.root / expected / encode_segment(header.id)))}, not this file",
                path=source,
                line=1,
            )
        if cut is not None:
            try:
                os.truncate(path, cut)
                if recovered:
                    with open(path, "ab") as f:
                        f.write(self._frame(self._batch(recovered)))
                        f.flush()
                        if self.durable:
                            os.fsync(f.fileno())
            except OSError as err:
                raise SessionStoreError(
                    f"cannot repair the torn tail of session log {path}: {err}"
                ) from None
        return StoredLog(*scan.log, source, repaired=cut is not None)

    def close(self) -> None:
        """Nothing to release: every write opens and closes its file."""
