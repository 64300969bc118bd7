"""Prefilter: the lines of a buffer that hold any of a set of literals or short patterns, found in one pass.

The analyzer reads in Python only the lines a rule (or the error and traceback assembly) can use; every other
line is counted and kept for the tail, never looked at. Finding those lines is one pass of Hyperscan over the
whole buffer (a few GB/s: grep's speed class), its matches mapped back to the lines that hold them; where
Hyperscan cannot be loaded, one Python regex of the same alternation does the same, slower (about 10 MB/s).
Both are exact in one direction: a line that holds a literal is always found; a line found may still match no
rule (the scanner decides). The literals are the profile's rules' (see `Analyzer`): nothing here is written
by hand for an engine.

Compiling a database takes milliseconds (a replay compiles five or six: a tenth of its start); a process that
starts often may hand `keep_databases` a store (`watchdog.follow.databases`: files in the user's cache), and each
database is then compiled once and loaded from the store after, by exactly what it is compiled from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property
from typing import Any, Protocol

__all__ = ["ENGINE", "Databases", "Literals", "Prefilter", "keep_databases"]

_hs: Any
try:
    import hyperscan as _hs
except ImportError:  # pragma: no cover - a platform without the wheel: the regex does the same, slower
    _hs = None

ENGINE = "hyperscan" if _hs is not None else "re"  # what finds the lines (the benchmarks print it)
_NOTHING = re.compile(b"(?!)")  # matches no line: no literals


class Databases(Protocol):
    """Where compiled Hyperscan databases are kept between processes, by a key that says exactly what each was
    compiled from (and with which Hyperscan). The store does the I/O; a failure of it is a miss, never an error."""

    def load(self, key: bytes) -> bytes | None:
        """The database kept under `key` (as `save` was given it), or None."""

    def save(self, key: bytes, database: bytes) -> None:
        """Keep `database` under `key`."""


_kept: Databases | None = None


def keep_databases(store: Databases | None) -> None:
    """Load the databases this process compiles from `store` where it has them, and keep the others there once
    compiled (None: compile each, keep none). A loaded database is used only after Hyperscan accepted it (its
    version, this CPU) and it scans as the one compiled would: the key is the whole of what it is made from."""
    global _kept  # noqa: PLW0603 - one setting of the process, as the CLI's replay makes it
    _kept = store


class Prefilter:
    """Finds the lines of a buffer that hold one of `literals` (bytes) or match one of `patterns` (byte regexes
    of the common subset of Python's and Hyperscan's syntax, no newline in a match).

    One thread at a time: a Hyperscan database scans with one scratch space (the analyzers of a daemon share the
    prefilters of their rule sets, all on the event loop's thread).
    """

    def __init__(
        self, literals: Iterable[bytes], patterns: Iterable[bytes] = (), *, engine: str = ENGINE
    ) -> None:
        self.literals = tuple(dict.fromkeys(literals))
        self.patterns = tuple(dict.fromkeys(patterns))
        expressions = [*map(_escape, self.literals), *self.patterns]
        self._expressions = expressions
        self._db: Any = None
        self._hyperscan = bool(expressions) and engine == "hyperscan" and _hs is not None
        # One-byte literals (a shell prompt's "$") are found by memchr (`bytes.find`), not by Hyperscan: among
        # multi-byte literals, one of one byte makes its literal matcher (FDR) look at every byte, about a third
        # slower over a whole log; memchr skips a megabyte without the byte in microseconds.
        self._bytes: tuple[bytes, ...] = ()
        # `found_in_line`'s: each one-byte literal (as its value: `int in bytes` is a memchr, where `bytes in
        # bytes` raises and clears a TypeError first) with its index; each expression of the database, its index
        self._byte_places: tuple[tuple[int, int], ...] = ()
        self._places: tuple[int, ...] = ()
        # ... and the ids of the database's matches in a line, which one handler made here appends to (a closure
        # made at each call, and the handler passed by keyword, cost a sixth of a line's call)
        self._hits: list[int] = []
        self._on_hit = _appender(self._hits)
        if self._hyperscan:
            self._bytes = tuple(x for x in self.literals if len(x) == 1 and x != b"\n")
            rest = [_escape(x) for x in self.literals if x not in self._bytes] + list(self.patterns)
            self._byte_places = tuple((x[0], i) for i, x in enumerate(self.literals) if x in self._bytes)
            self._places = tuple(i for i, x in enumerate(self.literals) if x not in self._bytes) + tuple(
                range(len(self.literals), len(self.literals) + len(self.patterns))
            )
            if rest:
                self._db = _database(rest)

    @cached_property
    def regex(self) -> re.Pattern[bytes]:
        """One Python regex of all the literals and patterns: what finds the lines without Hyperscan (compiled
        on first use: with Hyperscan, a big alternation that a replay's start would compile for nothing)."""
        return re.compile(b"|".join(self._expressions)) if self._expressions else _NOTHING

    def __reduce__(self) -> tuple[Any, ...]:
        # a pickled analyzer carries its prefilter as what it is made of: the database is made again
        return (_made, (self.literals, self.patterns, self.engine))

    @property
    def engine(self) -> str:
        """What finds the lines: "hyperscan" or "re"."""
        return "hyperscan" if self._hyperscan else "re"

    def lines(self, data: bytes, start: int = 0) -> list[int]:
        """The offsets in `data` of the starts of the lines from `start` on (a line start) that hold a match,
        in order, each once. A line ends at a newline or at the end of `data`."""
        if not self.literals and not self.patterns:
            return []
        out: list[int] = []
        end = -1  # the end of the last line found: a later match before it is in the same line
        if not self._hyperscan:
            search = self.regex.search
            pos = start
            while (m := search(data, pos)) is not None:
                begin = data.rfind(b"\n", start, m.start()) + 1 or start
                out.append(begin)
                end = data.find(b"\n", m.end())
                if end < 0:
                    break
                pos = end + 1
            return out
        ends: list[int] = []  # the ends of the matches, relative to `start`
        if self._db is not None:
            self._db.scan(
                data[start:] if start else data,
                match_event_handler=lambda _id, _from, to, _flags, _ctx: ends.append(to),
            )
        find, rfind = data.find, data.rfind
        for byte in self._bytes:  # each line that holds it once: the search goes on at the next line
            at = find(byte, start)
            while at >= 0:
                ends.append(at + 1 - start)
                after = find(b"\n", at)
                at = find(byte, after + 1) if after >= 0 else -1
        ends.sort()  # Hyperscan reports in the order of the matches' ends already: a check, nearly free
        for relative in ends:  # in the order of their ends
            to = relative + start
            if to <= end:
                continue  # another match in the line just found
            out.append(rfind(b"\n", start, to) + 1 or start)
            end = find(b"\n", to)
            if end < 0:
                break
        return out

    def found_in_line(self, line: bytes) -> list[int] | None:
        """What one line (`line`, no newline but maybe its last byte) holds, in the pass `lines` makes: the
        indexes of the literals it holds (in `literals`) and of the patterns it matches (`len(literals)` plus
        their index in `patterns`), in no order, one maybe more than once; empty exactly when `lines(line)` is.
        None without Hyperscan (the regex says that a line holds something, not what)."""
        if not self._hyperscan:
            return None
        found: list[int]
        if self._db is not None:
            hits = self._hits
            if hits:
                hits.clear()  # left by a scan that raised
            self._db.scan(line, self._on_hit)
            if hits:
                places = self._places
                found = [places[i] for i in hits]
                hits.clear()
            else:
                found = []
        else:
            found = []
        for byte, index in self._byte_places:
            if byte in line:
                found.append(index)
        return found


class Literals:
    """Which of a set of literals (non-empty strings) a text holds, in one pass of Hyperscan: a line read whole
    is matched with the few rules whose literal it holds, not with `in` for each of a profile's ~100.

    One thread at a time, as `Prefilter`. Where Hyperscan cannot be loaded, `found` is None: every literal may be
    there (the caller looks at each).
    """

    def __init__(self, literals: Iterable[str], *, engine: str = ENGINE) -> None:
        self.literals = tuple(dict.fromkeys(literals))
        self._db: Any = None
        self._hits: list[int] = []  # as `Prefilter`'s: what the one handler appends to
        self._on_hit = _appender(self._hits)
        if self.literals and engine == "hyperscan" and _hs is not None:
            # each match reported (`found` keeps one of each): HS_FLAG_SINGLEMATCH's compile kept ~14 MB more of
            # the process's memory for SGLang's rule sets
            self._db = _database([_escape(x.encode()) for x in self.literals])

    def __reduce__(self) -> tuple[Any, ...]:
        # as `Prefilter`'s: the database is made again
        return (_made_literals, (self.literals, self.engine))

    @property
    def engine(self) -> str:
        """What finds the literals: "hyperscan", or "re" (nothing: `found` is None)."""
        return "hyperscan" if self._db is not None else "re"

    def found(self, text: str) -> list[int] | None:
        """The indexes (in `literals`) of the literals `text` holds, in no order, each once; None without
        Hyperscan."""
        if self._db is None:
            return None
        hits = self._hits
        if hits:
            hits.clear()  # left by a scan that raised
        # UTF-8 keeps substrings: a literal is in the text exactly when its bytes are in the text's
        self._db.scan(text.encode("utf-8", "surrogatepass"), self._on_hit)
        if not hits:
            return []
        out = hits.copy() if len(hits) < 2 else list(dict.fromkeys(hits))
        hits.clear()
        return out


def _appender(hits: list[int]) -> Any:
    # a match handler for Hyperscan's `scan` that appends each match's id to `hits`
    append = hits.append

    def on_hit(id_: int, _from: int, _to: int, _flags: int, _context: object) -> None:
        append(id_)

    return on_hit


def _database(expressions: list[bytes]) -> Any:
    # A block-mode database of `expressions` (ids their places, no flags): from the store where it has it
    key = None
    if _kept is not None:
        key = _key(expressions)
        try:
            kept = _kept.load(key)
            if kept is not None:
                db = _hs.loadb(kept, _hs.HS_MODE_BLOCK)
                db.scratch = _hs.Scratch(db)
                return db
        except _hs.error:
            pass  # made by another Hyperscan, for another CPU: compiled again, and kept in its place
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(
        expressions=expressions,
        ids=list(range(len(expressions))),
        elements=len(expressions),
        flags=[0] * len(expressions),
    )
    if _kept is not None and key is not None:
        _kept.save(key, _hs.dumpb(db))
    return db


def _key(expressions: list[bytes]) -> bytes:
    # Everything a database is made from: the bindings' version (the library's own version and this CPU's
    # features are checked by Hyperscan as it loads one), the mode, and each expression, its length first
    head = b"hyperscan %s block ids=places flags=0\n" % str(getattr(_hs, "__version__", "")).encode()
    return head + b"".join(b"%d:%s\n" % (len(e), e) for e in expressions)


def _made(literals: tuple[bytes, ...], patterns: tuple[bytes, ...], engine: str) -> Prefilter:
    return Prefilter(literals, patterns, engine=engine)


def _made_literals(literals: tuple[str, ...], engine: str) -> Literals:
    return Literals(literals, engine=engine)


def _escape(literal: bytes) -> bytes:
    # each byte but ASCII letters and digits as \xHH: the same literal to Python's re and to Hyperscan
    return b"".join([_ESCAPED[c] for c in literal])


# each byte as `_escape` writes it (a table: a replay's start escapes some 700 literals)
_ESCAPED = [bytes((c,)) if c < 128 and chr(c).isalnum() else b"\\x%02x" % c for c in range(256)]
