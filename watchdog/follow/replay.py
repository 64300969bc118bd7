"""`watchdog replay`: read a whole log (a file, or standard input: `-`) and give the verdict."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import Verdict, build_verdict
from watchdog.exceptions import UsageError
from watchdog.profiles.loader import Profile, load_engine
from watchdog.vocabulary import file_kind

if TYPE_CHECKING:
    from watchdog.core.compare import Baseline

__all__ = ["CHUNK", "earlier_launch", "replay_nodes", "replay_path"]

CHUNK = 1 << 20  # bytes read at a time: big enough for C-speed scanning, small enough for a flat RSS
_PROBE = 4096  # the bytes at a chunk's end read first, for its last newline (see `_whole_lines`)


def replay_path(
    path: Path,
    engine: str | None = None,
    profiles: Sequence[Path | Profile] = (),
    *,
    compare_with: Path | None = None,
    prefilter: bool = True,
) -> tuple[Analyzer, Verdict]:
    """Replay the log at `path` (`-`: standard input, to its end); return the analyzer and its verdict.

    `compare_with`: the log of the launch before (`--compare-with`): this log's launches are numbered after its
    last, and the verdict says what changed since that one (`Verdict.changes`). `prefilter`: False reads every
    line in Python (the same verdict, slower: what the tests hold the prefilter to).
    """
    earlier = earlier_launch(compare_with, engine, profiles) if compare_with is not None else None
    analyzer = Analyzer(load_engine(engine, profiles), prefilter=prefilter)
    if earlier is not None:
        analyzer.lifecycle.number_from(earlier.incarnation)
    try:
        if str(path) == "-":
            with os.fdopen(os.dup(sys.stdin.fileno()), "rb") as f:
                while chunk := f.read(CHUNK):
                    analyzer.feed(chunk, 0.0)
        else:
            with _open_log(path) as f:
                for chunk in _whole_lines(f.fileno()):
                    analyzer.feed(chunk, 0.0)
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file") from exc
    except PermissionError as exc:
        raise UsageError(f"{path}: permission denied") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    analyzer.finish(0.0)
    return analyzer, build_verdict(analyzer, earlier=() if earlier is None else (earlier,))


def earlier_launch(
    path: Path, engine: str | None = None, profiles: Sequence[Path | Profile] = ()
) -> Baseline:
    """What a later launch is compared with of the log at `path`: its last incarnation's verdict's baseline."""
    analyzer, _ = replay_path(path, engine, profiles)
    return build_verdict(analyzer, analyzer.lifecycle.current).baseline()


def replay_nodes(paths: Sequence[Path], engine: str | None = None, profiles: Sequence[Path] = ()) -> Verdict:
    """Replay the logs of a multi-node launch, one file per node (named by its file's stem, the first serving);
    return the launch's verdict (`watchdog.core.nodes.combine`: no arrival times, so a crash's first node is
    the earliest by the logs' own times, else the first in `paths`)."""
    from watchdog.core.nodes import NodeReport, combine  # noqa: PLC0415 - not for a replay of one log

    reports = []
    names: dict[str, int] = {}
    for index, path in enumerate(paths):
        _analyzer, verdict = replay_path(path, engine, profiles)
        stem = path.stem or f"node{index}"
        names[stem] = names.get(stem, 0) + 1
        name = stem if names[stem] == 1 else f"{stem}-{names[stem]}"  # two logs of one name: told apart
        reports.append(NodeReport(name, "", str(path), index == 0, verdict))
    return combine(reports)


def _whole_lines(fd: int) -> Iterator[bytes]:
    """The bytes of a regular file from its start, in chunks of about CHUNK that end at a newline where one is.

    A chunk that ends inside a line makes the framer join its tail to the next chunk: two more copies of each
    megabyte, and fresh memory for them (page faults), which cost as much as the scan. So each chunk ends after
    its last newline and the next read starts there. That newline is looked for first in the chunk's last page
    (`_PROBE`), and the chunk is read to it, into a buffer of its size: a read of the whole chunk cut there
    afterwards was a copy of each megabyte. Where that page holds no newline (a line longer), or the file ends
    within the chunk, the whole chunk is read and cut (the tail is read again: a line's worth of bytes).
    """
    offset = 0
    while True:
        probe = os.pread(fd, _PROBE, offset + CHUNK - _PROBE)
        last = probe.rfind(b"\n") + 1
        if len(probe) == _PROBE and last:
            chunk = os.pread(fd, CHUNK - _PROBE + last, offset)
            if chunk.endswith(b"\n"):  # else the file changed between the two reads: cut as below
                offset += len(chunk)
                yield chunk
                continue
        else:
            chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            return
        end = chunk.rfind(b"\n") + 1
        if 0 < end < len(chunk):
            chunk = chunk[:end]
        offset += len(chunk)
        yield chunk


def _open_log(path: Path) -> BinaryIO:
    """Open a regular file for reading; a FIFO, a device or a directory is refused before any read (the open
    does not block, and the type is checked on the descriptor: /dev/zero is not read forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise UsageError(f"cannot replay {path}: {kind}, not a regular log file")
        # O_NONBLOCK does nothing to a regular file's reads: no need to clear it.
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
