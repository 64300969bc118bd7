"""The prefilter's compiled Hyperscan databases kept in files between replays (`watchdog.core.prefilter`'s store),
and in the daemon's memory (`MemoryDatabases`).

A replay compiles five or six databases at its start (milliseconds each: a tenth of the start); kept in the
user's cache folder, the next replay of the same profiles loads them instead. A file holds its key (everything
the database was made from) and a checksum: a file of another key, or one damaged, is a miss. Every failure to
read or write (no home folder, a read-only one, a full disk) is a miss too: the database is compiled, as without a
store.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from pathlib import Path

__all__ = ["MAX_FILES", "DiskDatabases", "MemoryDatabases", "cache_folder", "keep_prefilter_databases"]

# databases kept at most (every bundled engine's are 43, 10 MB): the least recently used go first (profiles of
# other versions, other engines, a user's old rules)
MAX_FILES = 128
_MAGIC = b"watchdog hyperscan database 1\n"


def cache_folder() -> Path | None:
    """Where the databases are kept: `$XDG_CACHE_HOME/watchdog/hyperscan`, else `~/.cache/watchdog/hyperscan`;
    None with neither (no home folder)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG spec says to ignore it
        home = os.environ.get("HOME", "")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "watchdog" / "hyperscan"


class DiskDatabases:
    """Databases kept as files in `folder` (made on the first save, for this user alone)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def load(self, key: bytes) -> bytes | None:
        """The database saved under `key`, or None (none, another key's, damaged, unreadable). One found is
        marked used now (its file's time), so that the bound keeps the ones in use (`_trim`)."""
        path = self.folder / _name(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        head = len(_MAGIC)
        if not raw.startswith(_MAGIC):
            return None
        size_end = raw.find(b"\n", head)
        if size_end < 0 or not raw[head:size_end].isdigit():
            return None
        key_end = size_end + 1 + int(raw[head:size_end])
        crc_end = key_end + 9
        if raw[size_end + 1 : key_end] != key or raw[key_end + 8 : crc_end] != b"\n":
            return None
        database = raw[crc_end:]
        if raw[key_end : key_end + 8] != b"%08x" % zlib.crc32(database, zlib.crc32(key)):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return database

    def save(self, key: bytes, database: bytes) -> None:
        """Keep `database` under `key`: written whole to a file of its own, then renamed into place (a reader
        sees the old file or the new one, never half of one)."""
        name = _name(key)
        crc = b"%08x" % zlib.crc32(database, zlib.crc32(key))
        data = b"".join((_MAGIC, b"%d\n" % len(key), key, crc, b"\n", database))
        temporary = self.folder / f".{name}.{os.getpid()}"
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary.write_bytes(data)
            os.replace(temporary, self.folder / name)
            self._trim()
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)

    def _trim(self) -> None:
        # the files least recently saved or used beyond MAX_FILES go: profiles change with versions, and each change
        # is a new key (a test run's many profiles of its own pushed out the bundled engines' with oldest-first:
        # every daemon it started then compiled all of them again, seconds of CPU on a loaded runner)
        files = [p for p in self.folder.iterdir() if p.suffix == ".hsdb"]
        if len(files) <= MAX_FILES:
            return
        files.sort(key=lambda p: p.stat().st_mtime)
        for path in files[: len(files) - MAX_FILES]:
            path.unlink(missing_ok=True)


class MemoryDatabases:
    """Databases kept in this process's memory, compressed (every bundled engine's, 43 databases: 1.5 MB, 10 MB
    as Hyperscan serializes them), over another store (`DiskDatabases`) or none. The daemon makes every
    engine's ahead, off its event loop (`watchdog.daemon.ahead`); a launch's analyzer then loads the ones of its
    engine in 0.2 ms each where it would compile them in 10 to 130 ms. `load` and `save` may be called from any
    thread (one dictionary's `get` and item assignment)."""

    def __init__(self, under: DiskDatabases | None = None) -> None:
        self.under = under
        self._kept: dict[bytes, bytes] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def load(self, key: bytes) -> bytes | None:
        """The database saved under `key`, from memory, else from the store under it (then kept in memory)."""
        kept = self._kept.get(key)
        if kept is not None:
            return zlib.decompress(kept)
        database = None if self.under is None else self.under.load(key)
        if database is not None:
            self._kept[key] = zlib.compress(database, 1)
        return database

    def save(self, key: bytes, database: bytes) -> None:
        """Keep `database` under `key`, in memory and in the store under it."""
        self._kept[key] = zlib.compress(database, 1)
        if self.under is not None:
            self.under.save(key, database)


def _name(key: bytes) -> str:
    # two independent checksums and the length name the file; the key inside it decides (a clash is a miss)
    return f"{len(key):x}-{zlib.crc32(key):08x}{zlib.adler32(key):08x}.hsdb"


def keep_prefilter_databases() -> None:
    """Have the prefilter keep its compiled databases in the user's cache folder (none without a home folder): a
    command started often (`replay`, `watch`) then loads the ones the run before compiled, a tenth to a third of
    its start."""
    from watchdog.core.prefilter import keep_databases  # noqa: PLC0415

    if (folder := cache_folder()) is not None:
        keep_databases(DiskDatabases(folder))
