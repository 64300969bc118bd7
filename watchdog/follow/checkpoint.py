"""Checkpoints: a follower's analysis of its log's first bytes, kept so that a restarted daemon resumes there.

A checkpoint is a blob the store keeps as is::

    b"WDCK" | format (1 byte) | header length (4 bytes, big-endian) | header (JSON) | head | before | record

The header says where the file is read to (offset; device and inode; `head` and `before`, the SHA-256 digests of
its first 4 KB and of the 4 KB before the offset: `watchdog.follow.sources.identity`), the follower's clock then
(its times go on from there), the settings id (target, engine, user profiles, crash grace, stall_after) and
`base` (the launch's incarnations before the file's first one). The record is the analyzer's
(`watchdog.core.resume`), JSON, zlib-compressed, its texts masked where one may hold a credential. A checkpoint
of other settings, of another file (or this one truncated or rewritten), or whose record does not load
(damaged, of a newer version) is ignored with the reason logged, and the log read from its start: its launches
numbered as before when it is the same file, after the last one stored when it is another (`Restored`). A
record of an older version is migrated: an upgrade resumes where the build before it stopped. Format 3 held a
pickle: its header is read, its state never. docs/operations.md says the rest ("resuming after a restart").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from watchdog.core.analyzer import Analyzer
from watchdog.core.recordtext import RecordText
from watchdog.core.resume import masked, record_values, restore, to_record
from watchdog.exceptions import WatchdogError
from watchdog.follow.sources.base import KeepsPrevious, Streamed
from watchdog.follow.sources.identity import FileIdentity, FileWindows, Identifiable
from watchdog.profiles.loader import catalogue
from watchdog.store import MAX_CHECKPOINT_BYTES

if TYPE_CHECKING:
    from watchdog.follow.sources import Source
    from watchdog.follow.spec import LaunchSpec

log = structlog.get_logger("watchdog.checkpoint")

FORMAT = 4  # the blob layout; the record's schema has its own version (`watchdog.core.resume.VERSION`)
_PICKLED = 3  # the format before: its header is read (the file, its numbering), its pickle never
MAGIC = b"WDCK"
CHECKPOINT_INTERVAL = 10.0  # seconds between saves of a launch whose log went quiet (`save_due`)
TRANSITION_INTERVAL = 5.0  # ... but a transition is saved within this many seconds
# seconds between saves of a launch whose log keeps growing: each save encodes the record (0.3-1.4 ms), and
# a log that never pauses would pay it every few seconds; after a `kill -9` the bytes since are read again
# (a verdict is still announced once), which is a minute and a half of the log at most (`GROWING_SPREAD`)
GROWING_INTERVAL = 60.0
# ... times 1 to 1 + this, by launch (a hash of its name): launches started together (a daemon's start, a fleet's
# relaunch) do not all encode their record in the same moment a minute later (200 saves at once held the event
# loop ~0.4 s: daemon_bench.py's 60 s window on the quiet machine)
GROWING_SPREAD = 0.5
IDENTIFY_RETRY = 60.0  # seconds before a file that could not be identified is tried again
FINAL_SAVE_TIMEOUT = 5.0  # seconds the last save of a stopping follower may take

_PREFIX = struct.Struct(">4sBI")  # magic, format, header length
_MAX_RECORD = 64 << 20  # bytes a record may inflate to: a damaged blob is refused, never a memory bomb


class Checkpoints(Protocol):
    """Where checkpoints are kept, one per launch (`watchdog.store.StateStore`)."""

    async def load_checkpoint(self, launch: str) -> bytes | None:
        """The launch's checkpoint, None if it has none."""
        ...

    async def save_checkpoint(self, launch: str, offset: int, blob: bytes) -> None:
        """Keep `blob` (the state at byte `offset`) as the launch's checkpoint, replacing the one before."""
        ...


@dataclass(frozen=True)
class Checkpoint:
    """A follower's state at a byte offset of its log's current file."""

    identity: FileIdentity  # the file, and its bytes around `identity.offset`
    elapsed: float  # the follower's clock (seconds since it started) when taken
    analyzer: Analyzer
    # the launch's incarnations before this file's first one (its earlier logs': a log truncated, replaced or
    # rotated numbers its launches on): a file read again from its start numbers them as it did the first time
    base: int = 0
    # a cursor source's cursor at `offset` (`Chunk.cursor`): where it resumes; its `identity` names the stream
    cursor: str | None = None

    @property
    def offset(self) -> int:
        """Where reading resumes."""
        return self.identity.offset


@dataclass(frozen=True)
class Restored:
    """What `Checkpointer.restore` found: a checkpoint to resume from (None: read the log from its start), and
    the launch's incarnations before the file's first one (None: not known; the file is another than the one
    the checkpoint was taken of, so its launches come after the last one stored)."""

    checkpoint: Checkpoint | None
    base: int | None


class _Rejected(Exception):
    """Internal: this checkpoint is not to be used (the message says why)."""


def settings_id(spec: LaunchSpec) -> str:
    """The launch settings an analysis depends on: a checkpoint taken under others is not used."""
    settings = [str(spec.target), spec.engine, repr(spec.profiles), spec.crash_grace, spec.stall_after]
    return hashlib.sha256(json.dumps(settings, default=str).encode()).hexdigest()[:32]


def encode(
    checkpoint: Checkpoint,
    *,
    settings: str,
    max_bytes: int = MAX_CHECKPOINT_BYTES,
    writer: RecordText | None = None,
) -> bytes | None:
    """The checkpoint as bytes for the store; None when it would be larger than `max_bytes`. `writer`: the
    launch's, which keeps the text of its record's parts that cannot change from one save to the next (default:
    a new one, which keeps nothing)."""
    ident = checkpoint.identity
    header = {
        "settings": settings,
        "offset": ident.offset,
        "elapsed": checkpoint.elapsed,
        "device": ident.device,
        "inode": ident.inode,
        "size": ident.size,
        "head": _DIGEST_SIZE,
        "before": _DIGEST_SIZE,
        "base": checkpoint.base,
    }
    if checkpoint.cursor is not None:
        header["cursor"] = checkpoint.cursor
    text = json.dumps(header, separators=(",", ":")).encode()
    head, before = _digest(ident.head), _digest(ident.before)
    fixed = _PREFIX.size + len(text) + len(head) + len(before)
    if fixed > max_bytes:
        return None
    state, secret = (writer or RecordText()).dumps(record_values(checkpoint.analyzer))
    if secret:  # rarely: every text of the record masked
        state = _dumps(masked(to_record(checkpoint.analyzer)))
    compressed = zlib.compress(state.encode("utf-8", "surrogatepass"), 1)
    if fixed + len(compressed) > max_bytes:
        return None
    return b"".join((_PREFIX.pack(MAGIC, FORMAT, len(text)), text, head, before, compressed))


def _dumps(record: object) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


_DIGEST_SIZE = hashlib.sha256().digest_size


def _digest(window: bytes) -> bytes:
    # A window of the log as a checkpoint keeps it: its SHA-256, not its bytes (the log's first 4 KB are the
    # launch's banner, arguments and credentials included); the file is compared with it here, not on its host.
    return hashlib.sha256(window).digest()


@dataclass(frozen=True)
class _Parsed:
    """A checkpoint's header and windows, read; its record not read yet."""

    identity: FileIdentity
    elapsed: float
    state: bytes
    base: int
    settings: str
    format: int
    cursor: str | None = None

    def check(self, settings: str) -> None:
        """Raise `_Rejected` unless it was taken under these settings, in this format."""
        if self.format != FORMAT:
            raise _Rejected(f"format {self.format} (a pickle, never read), this build reads {FORMAT}")
        if self.settings != settings:
            raise _Rejected(
                "taken under other settings (target, engine, profiles, crash grace or stall_after)"
            )

    def load(self, analyzer: Analyzer) -> Checkpoint:
        """The checkpoint, its record put into `analyzer` (new, of the launch's settings: see `restore`)."""
        inflate = zlib.decompressobj()
        text = inflate.decompress(self.state, _MAX_RECORD)
        if inflate.unconsumed_tail or not inflate.eof:
            raise _Rejected("the record is cut short or too large")
        record = json.loads(text.decode("utf-8", "surrogatepass"))
        if type(record) is not dict:
            raise _Rejected("the record is not an object")
        restore(analyzer, record)
        return Checkpoint(self.identity, self.elapsed, analyzer, self.base, self.cursor)


def _parse_header(blob: bytes) -> _Parsed:
    if len(blob) < _PREFIX.size:
        raise _Rejected("too short to be a checkpoint")
    magic, fmt, length = _PREFIX.unpack_from(blob)
    if magic != MAGIC:
        raise _Rejected("not a checkpoint")
    if fmt not in (FORMAT, _PICKLED):
        raise _Rejected(f"format {fmt}, this build reads {FORMAT}")
    start = _PREFIX.size
    try:
        header = json.loads(blob[start : start + length])
        offset, elapsed = int(header["offset"]), float(header["elapsed"])
        device, inode, size = int(header["device"]), int(header["inode"]), int(header["size"])
        head_len, before_len = int(header["head"]), int(header["before"])
        settings = str(header["settings"])
        base = int(header.get("base", 0))  # format 3 before issue 26: its files were numbered from 1
        cursor = header.get("cursor")  # a cursor source's (issue 28); none for a file
        if cursor is not None and type(cursor) is not str:
            raise TypeError("cursor is not a string")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _Rejected(f"unreadable header: {exc}") from exc
    if offset < 0 or not math.isfinite(elapsed) or elapsed < 0 or min(head_len, before_len, base) < 0:
        raise _Rejected("header out of range")
    pos = start + length
    head, before = blob[pos : pos + head_len], blob[pos + head_len : pos + head_len + before_len]
    state = blob[pos + head_len + before_len :]
    if len(head) != head_len or len(before) != before_len or not state:
        raise _Rejected("cut short")
    if head_len != _DIGEST_SIZE or before_len != _DIGEST_SIZE:
        raise _Rejected("header out of range")
    identity = FileIdentity(device, inode, size, offset, head, before)
    return _Parsed(identity, elapsed, state, base, settings, fmt, cursor)


def decode(blob: bytes, *, settings: str, analyzer: Analyzer | None = None) -> Checkpoint:
    """Read a checkpoint taken under these settings into `analyzer` (new, of those settings; default: one with
    none), its file not checked here (its identity's `head` and `before` are the windows' digests).

    Raises:
        ValueError: it is not one (another format or settings, damaged, or a record that does not load).
    """
    try:
        parsed = _parse_header(blob)
        parsed.check(settings)
        return parsed.load(Analyzer(catalogue()) if analyzer is None else analyzer)
    except _Rejected as exc:
        raise ValueError(str(exc)) from exc
    except Exception as exc:  # whatever a damaged record raises
        raise ValueError(f"the record does not load: {exc!r}") from exc


class Checkpointer:
    """One follower's checkpoints: `restore` once at the start, `fed` / `restarted` / `transitioned` as it reads,
    `save_due` after each chunk and tick (a save in a task of the follower's, when one is due: once the log is
    quiet, at most every `CHECKPOINT_INTERVAL` seconds, `TRANSITION_INTERVAL` after a transition; while it keeps
    growing, every `growing_interval`; reading never waits for one) and `save_final` when it stops.

    Args:
        store: where checkpoints are kept.
        spec: the launch (its name keys the checkpoint; its settings must match).
        clock: the follower's clock, monotonic seconds.
    """

    def __init__(self, store: Checkpoints, spec: LaunchSpec, clock: Callable[[], float]) -> None:
        self._store = store
        self._launch = spec.name
        self._settings = settings_id(spec)
        self._clock = clock
        share = zlib.crc32(spec.name.encode("utf-8", "surrogateescape")) / 2**32
        self.growing_interval = GROWING_INTERVAL * (1.0 + GROWING_SPREAD * share)  # this launch's
        self._source: object | None = None
        self._windows = FileWindows()
        self._file: tuple[int, int] | None = None  # (device, inode) of the file being read, once known
        self._cursor: str | None = None  # a cursor source's, after the bytes fed
        self._generation = 0  # files read so far (a restart begins another)
        self._changes = 0  # bytes fed, transitions and restarts so far
        self._saved_changes = 0  # ... as of the last checkpoint saved
        self._transitioned = False  # a transition since the last save
        # The current file has no checkpoint of its first bytes yet: a file read from its offset 0 is saved as
        # soon as they are fed, before their transitions are stored (`save_now`): a daemon killed then must
        # find a checkpoint that tells this file from the one before, or it would number its launches again.
        self.fresh = False
        self._saved_at = clock()
        self._identify_after = -math.inf
        self._saving = anyio.Lock()
        self._busy = False  # a save started and not finished
        self._warned_size = False
        self._warned_save = False
        self.saves = 0  # checkpoints written
        self._writer = RecordText()  # the record's text, its parts that cannot change kept between saves
        # the launch's incarnations before the current file's (`Checkpoint.base`), which the follower sets
        self.base = 0

    @property
    def dirty(self) -> bool:
        """Whether something changed since the last checkpoint saved."""
        return self._changes != self._saved_changes

    async def restore(self, source: Source, analyzer: Analyzer) -> Restored:
        """The launch's checkpoint if it is valid for `source`'s file as it is now (else read from 0), its record
        put into `analyzer` (the follower's, new), and how the file's launches are numbered: as the first time
        when it is the file the checkpoint was taken of (read again from its start when its record cannot be
        read, say), after the launch's last stored one when it is another (truncated, replaced, rewritten,
        gone) or nothing tells (`Restored.base` None).

        Raises:
            WatchdogError: the source could not identify its file (e.g. `ConnectionLost`): the follower fails
                as its source would, and is started again.
        """
        self._source = source
        launch = self._launch
        try:
            blob = await self._store.load_checkpoint(launch)
        except Exception as exc:
            log.warning(
                "checkpoint not read; reading the log from its start", launch=launch, error=_said(exc)
            )
            return Restored(None, None)
        if blob is None:
            # none saved yet (a log that never appeared, a daemon killed in its first seconds): the same file
            # as far as anyone can tell, its launches numbered as they were
            return Restored(None, 0)
        base: int | None = None  # a file of its own, unless the checkpoint shows it is the same
        try:
            parsed = _parse_header(blob)
            windows = await self._windows_now(source, parsed)
            base = parsed.base  # the file it was taken of: read from here or again from its start
            parsed.check(self._settings)
        except _Rejected as exc:
            log.info("checkpoint ignored; reading the log from its start", launch=launch, reason=str(exc))
            return Restored(None, base)
        try:
            checkpoint = parsed.load(analyzer)
        except Exception as exc:  # a record that does not load, whatever it raises
            log.warning(
                "checkpoint ignored; reading the log from its start", launch=launch, reason=_said(exc)
            )
            return Restored(None, base)
        ident = checkpoint.identity
        self._windows = windows
        self._file = (ident.device, ident.inode)
        self._cursor = checkpoint.cursor
        self._saved_at = self._clock()
        log.info("resuming from checkpoint", launch=launch, offset=ident.offset)
        return Restored(checkpoint, checkpoint.base)

    async def _windows_now(self, source: object, parsed: _Parsed) -> FileWindows:
        # The windows of the file as it is now, if it is the one `parsed` was taken of (else `_Rejected`): its
        # bytes that match the checkpoint's digests; for a cursor source, its stream must be the same one.
        ident = parsed.identity
        if parsed.cursor is not None:
            if not isinstance(source, Streamed):
                raise _Rejected("a cursor checkpoint, and the source has no cursor")
            stream = (ident.device, ident.inode)
            if stream != await source.stream_id() and not await _previous_is(source, stream, parsed.cursor):
                raise _Rejected("another stream (the container or pod was re-created, or the unit restarted)")
            return FileWindows(ident.offset)
        if not isinstance(source, Identifiable):
            raise _Rejected("the source cannot identify its file")
        try:
            now = await source.identify(ident.offset)
        except WatchdogError:
            raise  # the host cannot be reached (or refuses us): the follower fails as its source would
        except Exception as exc:
            raise _Rejected(f"the log could not be identified: {exc!r}") from exc
        if now is None:
            raise _Rejected("the log is not there")
        # the checkpoint keeps its windows' digests: compared with those of the file's windows now
        reason = ident.mismatch(dataclasses.replace(now, head=_digest(now.head), before=_digest(now.before)))
        if reason is not None:
            raise _Rejected(reason)
        return FileWindows(ident.offset, now.head, now.before)

    def fed(self, data: bytes, file: tuple[int, int] | None = None, cursor: str | None = None) -> None:
        """The follower fed these bytes of the current file (the next ones) to its analyzer; `file`: that file's
        (device, inode) where the source knows it (`Chunk.file`): a save then asks the source nothing;
        `cursor`: a cursor source's, after these bytes (`Chunk.cursor`)."""
        self._windows.feed(data)
        if file is not None:
            self._file = file
        if cursor is not None:
            self._cursor = cursor
        self._changes += 1

    def restarted(self) -> None:
        """The source restarted: the next bytes are another file's, from its offset 0."""
        self._windows = FileWindows()
        self._file = None
        self._cursor = None
        self._generation += 1
        self._changes += 1
        self.fresh = True

    def transitioned(self) -> None:
        """The launch changed state: save soon."""
        self._changes += 1
        self._transitioned = True

    def save_due(
        self,
        analyzer: Analyzer,
        elapsed: Callable[[], float],
        start: Callable[..., object],
        *,
        quiet: bool = False,
    ) -> None:
        """If a save is due (changed, and `next_save(quiet)` reached), start one with `start(fn, *args)` (a task
        group's `start_soon`): the follower never waits for a save (the file's identification over SSH, the
        store's thread). `elapsed` is the follower's clock (its analyzer's times are on it); the record is taken
        when the save runs, one moment's. `quiet`: the log has not grown for a while (a tick's call); else it
        is growing (a chunk's), and saves wait `growing_interval`."""
        # (`dirty` and a growing log's `next_save`, inline: a live log's every chunk asks this)
        if self._busy or self._changes == self._saved_changes:
            return
        due = self.next_save() if quiet else self._saved_at + self.growing_interval
        if self._clock() >= due:
            self._busy = True
            start(self._save_soon, analyzer, elapsed)

    def next_save(self, *, quiet: bool = True) -> float:
        """When (on the clock given) a save of what changed becomes due: once the log is quiet (`quiet`), at
        `CHECKPOINT_INTERVAL` after the last save (`TRANSITION_INTERVAL` after a transition); while it grows,
        at its `growing_interval` (`GROWING_INTERVAL`, spread by launch)."""
        if not quiet:
            return self._saved_at + self.growing_interval
        return self._saved_at + (TRANSITION_INTERVAL if self._transitioned else CHECKPOINT_INTERVAL)

    async def _save_soon(self, analyzer: Analyzer, elapsed: Callable[[], float]) -> None:
        try:
            async with self._saving:
                await self._save(analyzer, elapsed, final=False)
        finally:
            self._busy = False

    async def save_now(self, analyzer: Analyzer, elapsed: Callable[[], float]) -> None:
        """Save at once (its file identified now): the follower read a file's first bytes (`fresh`), or a
        restart found the new file empty, so that the store never holds a file's first transitions without a
        checkpoint that tells which file they are of (a daemon killed then would number them again). The
        reading waits for it (at most `FRESH_SAVE_WAIT`), so it is tried once per file, not again per chunk."""
        self.fresh = False
        async with self._saving:
            await self._save(analyzer, elapsed, final=True)

    async def save_final(self, analyzer: Analyzer, elapsed: Callable[[], float]) -> None:
        """The follower stops: save what changed (within `FINAL_SAVE_TIMEOUT`, its file identified if need be)."""
        with anyio.move_on_after(FINAL_SAVE_TIMEOUT):
            async with self._saving:  # after a save under way (being cancelled with the follower)
                if self.dirty:
                    await self._save(analyzer, elapsed, final=True)

    async def _save(self, analyzer: Analyzer, elapsed: Callable[[], float], *, final: bool) -> None:
        try:
            if self._file is None and not await self._identify(retry=final):
                return
            assert self._file is not None
            windows = self._windows
            device, inode = self._file
            identity = FileIdentity(
                device, inode, windows.offset, windows.offset, windows.head, windows.before
            )
            # encoded here, on the event loop, so that the state, its offset and its time are one moment's
            changes = self._changes
            checkpoint = Checkpoint(identity, elapsed(), analyzer, self.base, self._cursor)
            blob = encode(checkpoint, settings=self._settings, writer=self._writer)
            self._saved_at = self._clock()
            if blob is None:
                self._saved_changes, self._transitioned = changes, False
                if not self._warned_size:
                    self._warned_size = True
                    log.warning(
                        "checkpoint too big; not saved (a restart reads from the last one saved, or the start)",
                        launch=self._launch,
                        max_bytes=MAX_CHECKPOINT_BYTES,
                    )
                return
            await self._store.save_checkpoint(self._launch, identity.offset, blob)
            self.saves += 1
            self._saved_changes = changes
            if changes == self._changes:
                self._transitioned = False
            if self._warned_size or self._warned_save:
                self._warned_size = self._warned_save = False  # a later failure is said again
                log.info("checkpoint saved again", launch=self._launch)
        except Exception as exc:  # a checkpoint not saved never disturbs the follower
            self._saved_at = self._clock()
            if not self._warned_save:  # said once, until one is saved again: it is tried at every interval
                self._warned_save = True
                log.warning(
                    "checkpoint not saved (a restart reads from the last one saved, or the start)",
                    launch=self._launch,
                    error=_said(exc),
                )

    async def _identify(self, *, retry: bool = False) -> bool:
        # Which file the bytes read so far are from: asked of the source once per file, and accepted only if
        # its bytes are the ones read (the path may already name a new file). `retry`: ask even if a recent
        # attempt failed (the follower stops: its last chance).
        source, now = self._source, self._clock()
        if (now < self._identify_after and not retry) or not isinstance(source, Identifiable):
            return False
        generation, windows = self._generation, self._windows
        seen = FileWindows(windows.offset, windows.head, windows.before)
        try:
            identity = await source.identify(seen.offset)
        except Exception as exc:
            log.info("log file not identified; no checkpoint yet", launch=self._launch, error=_said(exc))
            identity = None
        if identity is None or generation != self._generation or not seen.matches(identity):
            self._identify_after = now + IDENTIFY_RETRY
            return False
        self._file = (identity.device, identity.inode)
        return True


async def _previous_is(source: Streamed, stream: tuple[int, int], cursor: str) -> bool:
    # whether `stream` is the one before the source's current one, whose rest it can still read (a pod's container
    # or a container's run restarted while the daemon was down): its checkpoint resumes there, and the restart is
    # read as it happened. The cursor tells a source that knows the stream before only from it (a container's).
    return isinstance(source, KeepsPrevious) and await source.previous_stream_id(cursor) == stream


def _said(exc: BaseException) -> str:
    # an error in words for the log: its message with its kind (`OSError: [Errno 28] No space left on device`),
    # not its repr
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
