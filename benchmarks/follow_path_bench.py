"""The per-read CPU around the analyzer: the local source on inotify, and the follower outside `Analyzer.feed`.

    python benchmarks/follow_path_bench.py source [--files 200] [--seconds 8]
    python benchmarks/follow_path_bench.py follower [--reads 20000]

`source`: N files, each followed by a `LocalSource` (inotify) whose chunks are taken and dropped; a writer
process appends one SGLang decode line (or, one time in twenty, twelve) to 60 % of them every 100 ms, each line
stamped with the time it was written. Prints the process's CPU (the inotify thread included) per chunk and the
append-to-chunk latency. `follower`: a `LaunchFollower` fed N reads of a serving line by a source that
never waits; prints the CPU per read and the part of it outside `Analyzer.feed`.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from watchdog.core.analyzer import Analyzer
from watchdog.follow.follower import LaunchFollower, LaunchSpec
from watchdog.follow.sources import CaughtUp, Chunk, Merges, SourceItem, parse_target
from watchdog.follow.sources.local import LocalSource

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "corpus" / "sglang"
LINE = (
    b"[2025-01-01 00:00:00 TP0] Decode batch. #running-req: 1, #token: 100, token usage: 0.00, "
    b"gen throughput (token/s): 50.00, #queue-req: 0\n"
)
WRITER = """
import os, random, sys, time
paths, seconds, line = sys.argv[1:-1], float(sys.argv[-1]), {line!r}
fds = [os.open(p, os.O_WRONLY | os.O_APPEND) for p in paths]
end, rnd = time.monotonic() + seconds, random.Random(1)
while time.monotonic() < end:
    began = time.monotonic()
    for fd in fds:
        r = rnd.random()
        stamped = b"%.6f " % time.time() + line
        if r < 0.6:
            os.write(fd, stamped * (12 if r < 0.05 else 1))
    time.sleep(max(0.0, 0.1 - (time.monotonic() - began)))
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _make_logs(files: int) -> list[str]:
    folder = tempfile.mkdtemp(prefix="follow-path-bench-")
    paths = [os.path.join(folder, f"l{i}.log") for i in range(files)]
    for path in paths:
        Path(path).touch()
    return paths


def _start_writer(paths: list[str], seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WRITER.format(line=LINE), *paths, str(seconds)])


async def _source(files: int, seconds: float) -> None:
    paths = _make_logs(files)
    chunks, latencies, measuring = [0], [], [False]
    ready = anyio.Event()
    following = [0]

    async def follow(path: str) -> None:
        async with LocalSource(path).open_follow(0) as items:
            if isinstance(items, Merges):
                items.merge = True  # as the follower takes them: a read's CaughtUp with its last chunk
            first = True
            async for item in items:
                if first:
                    first, following[0] = False, following[0] + 1
                    if following[0] == files:
                        ready.set()
                if isinstance(item, Chunk):
                    chunks[0] += 1
                    if measuring[0]:
                        latencies.append(time.time() - float(item.data[:17]))

    async with anyio.create_task_group() as tg:
        for path in paths:
            tg.start_soon(follow, path)
        await ready.wait()
        writer = _start_writer(paths, seconds + 1)
        await anyio.sleep(1.0)
        cpu, read, measuring[0] = _cpu(), chunks[0], True
        began = time.monotonic()
        await anyio.sleep(seconds)
        cpu, read, wall = _cpu() - cpu, chunks[0] - read, time.monotonic() - began
        tg.cancel_scope.cancel()
    writer.wait()
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
    print(
        f"{100 * cpu / wall:.1f} % of a core; {read} chunks; {1e6 * cpu / max(1, read):.1f} us CPU per chunk"
    )
    print(f"append-to-chunk latency p50 {1e3 * p50:.1f} ms, p99 {1e3 * p99:.1f} ms")


class _Reads:
    """The items of `_Instant`: as a file's source gives them, a read's CaughtUp with its chunk where the consumer
    sets `merge` (`Merges`), else after it."""

    def __init__(self, reads: list[bytes]) -> None:
        self.merge = False
        self._reads = iter(reads)
        self._pos = 0
        self._then: CaughtUp | None = None

    def __aiter__(self) -> _Reads:
        return self

    async def __anext__(self) -> SourceItem:
        then = self._then
        if then is not None:
            self._then = None
            return then
        data = next(self._reads, None)
        if data is None:
            raise StopAsyncIteration
        pos = self._pos
        self._pos += len(data)
        if self.merge:
            return Chunk(pos, data, caught_up=True)
        self._then = CaughtUp(self._pos)
        return Chunk(pos, data)


class _Instant:
    """A source that gives a startup, then `reads` serving lines, each a read (its chunk and CaughtUp), never
    waiting."""

    def __init__(self, reads: int) -> None:
        self.reads = reads

    def open_follow(self, offset: int = 0, cursor: str | None = None) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[AsyncIterator[SourceItem]]:
        startup = (CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes()
        served = (CORPUS / "ready-qwen25-vl-multimodal-then-traffic-notebook-docs.log").read_bytes()
        serving = [
            line for line in served.splitlines(True) if b"Decode batch" in line or b"Prefill batch" in line
        ]

        yield _Reads([startup] + [serving[i % len(serving)] for i in range(self.reads)])


async def _follower(reads: int) -> None:
    in_feed = [0.0]
    feed = Analyzer.feed

    def timed(self: Analyzer, data: bytes, now: float) -> Any:
        began = time.process_time()
        try:
            return feed(self, data, now)
        finally:
            in_feed[0] += time.process_time() - began

    Analyzer.feed = timed  # type: ignore[method-assign]
    follower = LaunchFollower(LaunchSpec(name="t", target=parse_target("/x.log")), source=_Instant(reads))

    async def drain() -> None:
        async for _ in follower.updates:
            pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        began = time.process_time()
        await follower.run()
        total = time.process_time() - began
        tg.cancel_scope.cancel()
    rest = total - in_feed[0]
    print(f"per read: {1e6 * total / reads:.1f} us, outside Analyzer.feed {1e6 * rest / reads:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["source", "follower"])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--reads", type=int, default=20000)
    args = parser.parse_args()
    if args.part == "source":
        anyio.run(_source, args.files, args.seconds)
    else:
        anyio.run(_follower, args.reads)


if __name__ == "__main__":
    main()
