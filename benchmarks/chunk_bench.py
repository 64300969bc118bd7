"""The daemon's CPU per chunk it follows, in process: an SSH read's callback, the follower, the analyzer, the tasks.

A daemon reads a live log one write at a time, most of them one line: what each read costs around the analyzer is
the cost. Here, `--launches` followers (`LaunchFollower`, a checkpoint store in memory, as the daemon makes them)
each read one launch's log through the SSH source's real per-packet path, without a connection: stdout bytes go to
a `CommandOutput` (`data_received`, one host's packets between `begin_read` and `end_read`, `--hosts` hosts), whose
`drive` is the SSH follower's `_drive`, which delivers them and hands the chunk to the follower's `push`, which
feeds the analyzer. What needs the follower's task (a transition to publish, a crash's settle, a checkpoint to
save, the clock's ticks) runs in the event loop after each 100 ms tick, on a virtual clock.

The writes are daemon_bench's (its writer's own code, as `analyzer_bench.py` makes them: an SGLang startup in each
log, read whole first; then ~10 lines/s of serving lines, a crash after 2 to 20 s of it, the startup again),
each write split into its lines, one chunk each (`--whole-writes`: a write a chunk). Timed with
`time.process_time`: the reads' callbacks (`callback`, all layers) and the event loop's passes between them
(`tasks`); one untimed round first, then `--rounds` rounds, each made of fresh followers. A second run of each
round has the layers timed apart (the follower's `push` and `Analyzer.feed` wrapped; their timers' own cost lands
in the outer layers): `source` is the callback outside `push`, `follower` is `push` outside `Analyzer.feed`.

The updates published (each launch's transitions and verdicts) are hashed: two trees must print the same digest.
The tree measured is the one `watchdog` is imported from (PYTHONPATH): run this script with PYTHONPATH at either
tree to compare them.

    PYTHONPATH=. python benchmarks/chunk_bench.py [--launches 200] [--hosts 20] [--seconds 30] [--rounds 5]
        [--seed 1] [--whole-writes] [--profile FILE]
    PYTHONPATH=. python benchmarks/chunk_bench.py --memory [--launches 200] [--seconds 60]: instead of the CPU, the
        memory (tracemalloc) the followers hold at a round's end, each with its analyzer and checkpoint writer
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import hashlib
import heapq
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio

from watchdog.core.analyzer import Analyzer
from watchdog.follow.follower import Concluded, LaunchFollower, SourceNoted, Transitioned
from watchdog.follow.sources import SourceItem, parse_target
from watchdog.follow.sources import ssh as ssh_source
from watchdog.follow.sources.channel import CommandOutput, begin_read, end_read
from watchdog.follow.spec import LaunchSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import analyzer_bench
import daemon_bench

Write = tuple[int, float, bytes]  # launch, time (s), bytes


def writes(launches: int, seconds: float, seed: int) -> tuple[list[bytes], list[Write]]:
    """Each launch's first content (a startup), and the writes daemon_bench's writer makes in `seconds`, in order,
    on a virtual clock (`analyzer_bench.writes`)."""
    return analyzer_bench.writes(launches, seconds, seed)


class _Clock:
    """Virtual time: `now` is what the bench sets; a sleeper wakes when the bench runs what is due (`due`)."""

    def __init__(self) -> None:
        self.t = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[object]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float, wake: asyncio.Future[object] | None = None) -> None:
        future = wake if wake is not None else asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.t + seconds, next(self._order), future))
        await future

    def due(self) -> None:
        sleepers = self._sleepers
        while sleepers and sleepers[0][0] <= self.t:
            future = heapq.heappop(sleepers)[2]
            if not future.done():
                future.set_result(None)


class _Store:
    """Checkpoints kept in memory (`watchdog.follow.checkpoint.Checkpoints`)."""

    def __init__(self) -> None:
        self.saved: dict[str, bytes] = {}

    async def load_checkpoint(self, launch: str) -> bytes | None:
        return None

    async def save_checkpoint(self, launch: str, offset: int, blob: bytes) -> None:
        self.saved[launch] = blob


class _Reader:
    """The SSH follow's items as `_Follower.items` gives them in its streaming loop (`Merges`, `Pushes`): the
    first content in one chunk, then each packet `session.receive` returns, delivered."""

    def __init__(self, follow: Any, session: CommandOutput, first: bytes) -> None:
        self._follow = follow
        self._session = session
        self._first: bytes | None = first

    @property
    def merge(self) -> bool:
        return bool(self._follow.merge)

    @merge.setter
    def merge(self, merge: bool) -> None:
        self._follow.merge = merge

    @property
    def push(self) -> Callable[[SourceItem], object] | None:
        push: Callable[[SourceItem], object] | None = self._follow.push
        return push

    @push.setter
    def push(self, push: Callable[[SourceItem], object] | None) -> None:
        self._follow.push = push

    def __aiter__(self) -> _Reader:
        return self

    async def __anext__(self) -> SourceItem:
        follow = self._follow
        if self._first is not None:
            first, self._first = self._first, None
            follow._deliver(first)
        while True:
            if follow.out:
                item: SourceItem = follow.out.popleft()
                return item
            if follow.failed is not None:
                error, follow.failed = follow.failed, None
                raise error
            kind, data, _ = await self._session.receive()
            if kind == "out":
                follow._deliver(data)


class _Source:
    def __init__(self, reader: _Reader) -> None:
        self._reader = reader

    def open_follow(self, offset: int = 0, cursor: str | None = None) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[_Reader]:
        yield self._reader


class _Layers:
    """The follower's `push` and `Analyzer.feed` wrapped with timers (the split by layer)."""

    def __init__(self) -> None:
        self.push = self.feed = 0.0
        self._feed = Analyzer.feed

    def wrap_push(self, push: Callable[[SourceItem], object]) -> Callable[[SourceItem], object]:
        clock = time.process_time

        def timed(item: SourceItem) -> object:
            began = clock()
            try:
                return push(item)
            finally:
                self.push += clock() - began

        return timed

    def __enter__(self) -> _Layers:
        feed, clock = self._feed, time.process_time

        def timed(analyzer: Analyzer, data: bytes, now: float) -> Any:
            began = clock()
            try:
                return feed(analyzer, data, now)
            finally:
                self.feed += clock() - began

        Analyzer.feed = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Analyzer.feed = self._feed  # type: ignore[method-assign]


async def _settle(loop: asyncio.AbstractEventLoop) -> None:
    # let every task run until all wait (on the virtual clock or a packet)
    ready = loop._ready  # type: ignore[attr-defined]
    for _ in range(10_000):
        await asyncio.sleep(0)
        if not ready:
            return


async def _round(
    first: list[bytes],
    ticks: list[list[list[tuple[int, bytes]]]],
    hosts: int,
    layers: _Layers | None,
    held: list[int] | None = None,
) -> tuple[float, float, int, str]:
    """One round on fresh followers: (CPU s of the callbacks, CPU s of the passes between, chunks, digest).
    `held`: tracemalloc's count of the bytes alive at the round's end (every follower still running, after a
    full collection) is appended to it."""
    loop = asyncio.get_running_loop()
    clock = _Clock()
    store = _Store()
    launches = len(first)
    sessions: list[CommandOutput] = []
    followers: list[LaunchFollower] = []
    digest = hashlib.sha256()
    for i in range(launches):
        src = SimpleNamespace(stream=True, host=f"h{i % hosts}", poll_interval=1.0)
        follow = ssh_source._Follower(src, 0)  # type: ignore[arg-type]
        follow.file = (1, i)
        session = CommandOutput()
        sessions.append(session)
        spec = LaunchSpec(name=f"l{i}", target=parse_target(f"h{i % hosts}:/logs/l{i}.log"))
        reader = _Reader(follow, session, first[i])
        follower = LaunchFollower(spec, source=_Source(reader), clock=clock, checkpoints=store)
        followers.append(follower)
        session.drive = follow._drive

    seen: list[list[tuple[Any, ...]]] = [[] for _ in range(launches)]

    def take(index: int, update: Any) -> None:
        if isinstance(update, Transitioned):
            t = update.transition
            seen[index].append(("t", t.state.value, t.incarnation, t.line))
        elif isinstance(update, Concluded):
            seen[index].append(("c", update.state.value, update.verdict.incarnation))
        elif isinstance(update, SourceNoted):
            seen[index].append(("n", update.kind))

    async def drain(index: int, follower: LaunchFollower) -> None:
        with follower.updates:  # closed when cancelled, as the daemon's `_consume` closed it
            async for update in follower.updates:
                take(index, update)

    async with anyio.create_task_group() as tg:
        for i, follower in enumerate(followers):
            listens = hasattr(follower, "listen")  # the daemon's way since i31-cpu6: a plain call, no task
            if listens:
                follower.listen(functools.partial(take, i))
            tg.start_soon(follower.run)
            if not listens:  # a tree before it: a task reads the stream, as the daemon's `_consume` did
                tg.start_soon(drain, i, follower)
        await _settle(loop)
        if layers is not None:
            for session in sessions:
                drive = session.drive
                assert drive is not None
                follow = drive.__self__  # type: ignore[attr-defined]
                follow.push = layers.wrap_push(follow.push)
        callback = between = 0.0
        chunks = 0
        cpu = time.process_time
        for k, reads in enumerate(ticks):
            clock.t = round(k * daemon_bench.TICK, 6)
            began = cpu()
            clock.due()
            await _settle(loop)
            between += cpu() - began
            for read in reads:
                # one connection read of each host: a packet of each of its launches
                began = cpu()
                for packets in read:
                    if packets:
                        began_read = begin_read()
                        for i, data in packets:
                            sessions[i].data_received(data, None)
                        if began_read:
                            end_read()
                callback += cpu() - began
                chunks += sum(len(packets) for packets in read)
                began = cpu()
                await _settle(loop)
                between += cpu() - began
        clock.t += 30.0  # the rest: every crash's report, every save
        for _ in range(200):
            clock.due()
            await _settle(loop)
            clock.t += 0.25
        if held is not None:
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0])
        tg.cancel_scope.cancel()
    for i in range(launches):
        digest.update(repr(seen[i]).encode())
    COUNTS.clear()
    for updates in seen:
        for u in updates:
            key = f"{u[0]}:{u[1]}"
            COUNTS[key] = COUNTS.get(key, 0) + 1
    return callback, between, chunks, digest.hexdigest()[:16]


COUNTS: dict[str, int] = {}  # the last round's updates, by kind and state (t: transition, c: verdict)


Plan = list[list[list[list[tuple[int, bytes]]]]]  # by tick, by connection read, by host: (launch, bytes)


def plan(load: list[Write], hosts: int, one_line: bool) -> Plan:
    """The writes by tick (100 ms), each tick's in connection reads: a host's read holds one packet of each of its
    launches that wrote (their first lines, with `one_line`; then their second ones in the next read, ...)."""
    ticks: dict[float, list[list[bytes]]] = {}
    for i, at, data in load:
        per_launch = ticks.setdefault(at, [])
        per_launch.append([i] + (data.splitlines(keepends=True) if one_line else [data]))  # type: ignore[list-item]
    out: Plan = []
    last = max(ticks) if ticks else 0.0
    for k in range(round(last / daemon_bench.TICK) + 1):
        wrote = ticks.get(round(k * daemon_bench.TICK, 6), [])
        reads: list[list[list[tuple[int, bytes]]]] = []
        for j in range(max((len(w) - 1 for w in wrote), default=0)):
            read: list[list[tuple[int, bytes]]] = [[] for _ in range(hosts)]
            for w in wrote:
                i = w[0]
                if j + 1 < len(w):
                    read[i % hosts].append((i, w[j + 1]))  # type: ignore[index, arg-type]
            reads.append(read)
        out.append(reads)
    return out


async def _rounds(first: list[bytes], ticks: Plan, hosts: int, rounds: int) -> list[tuple[float, ...]]:
    await _round(
        first, ticks, hosts, None
    )  # untimed: rules compiled, databases made (a daemon's first minute)
    out = []
    for _ in range(rounds):
        callback, between, chunks, digest = await _round(first, ticks, hosts, None)
        layers = _Layers()
        with layers:
            callback2, _, _, digest2 = await _round(first, ticks, hosts, layers)
        assert digest2 == digest, "the timed layers changed what the followers published"
        out.append((callback, between, chunks, digest, callback2, layers.push, layers.feed))
    return out


async def _memory(first: list[bytes], ticks: Plan, hosts: int) -> int:
    # `--memory`: an untimed round first (rules compiled, databases made: not the followers'), then one traced:
    # what is alive at its end less what was before it began
    await _round(first, ticks, hosts, None)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held: list[int] = []
    await _round(first, ticks, hosts, None, held)
    tracemalloc.stop()
    return held[0] - before


async def _serve(first: list[bytes], ticks: Plan, hosts: int) -> None:
    # `--worker`: a round (plain, then with the layers timed) for each line read, its figures a JSON line each
    await _round(first, ticks, hosts, None)  # untimed, as in `_rounds`
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        callback, between, chunks, digest = await _round(first, ticks, hosts, None)
        layers = _Layers()
        with layers:
            callback2, _, _, _ = await _round(first, ticks, hosts, layers)
        row = [callback, between, chunks, digest, callback2, layers.push, layers.feed]
        print(json.dumps(row), flush=True)


def _against(argv: list[str], trees: list[str], rounds: int) -> list[list[tuple[Any, ...]]]:
    # a worker per tree (its `watchdog` on PYTHONPATH), their rounds interleaved: A B, B A, A B, ...
    script = str(Path(__file__).resolve())
    workers = []
    for tree in trees:
        env = dict(os.environ, PYTHONPATH=tree)
        workers.append(
            subprocess.Popen(
                [sys.executable, script, "--worker", *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                cwd=tree,
                text=True,
            )
        )
    out: list[list[tuple[Any, ...]]] = [[] for _ in trees]
    try:
        for k in range(rounds):
            order = range(len(trees)) if k % 2 == 0 else reversed(range(len(trees)))
            for w in order:
                stdin, stdout = workers[w].stdin, workers[w].stdout
                assert stdin is not None
                assert stdout is not None
                stdin.write("round\n")
                stdin.flush()
                out[w].append(tuple(json.loads(stdout.readline())))
    finally:
        for worker in workers:
            if worker.stdin is not None:
                worker.stdin.close()
            worker.wait()
    return out


def _timer_cost() -> tuple[float, float]:
    # (one `time.process_time()` call, one call through a `_Layers` wrapper less the call it wraps), in seconds:
    # what the layers' timers add, taken off the layers they land in
    clock, n = time.process_time, 20_000
    began = clock()
    for _ in range(n):
        clock()
    call = (clock() - began) / n

    def noop(item: SourceItem) -> object:
        return None

    wrapped = _Layers().wrap_push(noop)
    item: Any = None
    began = clock()
    for _ in range(n):
        noop(item)
    bare = clock() - began
    began = clock()
    for _ in range(n):
        wrapped(item)
    return call, max(0.0, (clock() - began - bare) / n)


def _report(name: str, results: list[tuple[Any, ...]], launches: int, hosts: int, seconds: float) -> None:
    chunks = results[0][2]
    digests = {r[3] for r in results}
    clock, wrapper = _timer_cost()

    def us(values: list[float], less: float = 0.0) -> str:
        return f"{statistics.median(values) * 1e6 / chunks - less * 1e6:.2f}"

    callback = [r[0] for r in results]
    print(
        f"{name}{chunks} chunks over {launches} launches, {hosts} hosts, {seconds:g} s: "
        f"callback {us(callback)} us a chunk (median of {len(results)}: "
        + ", ".join(f"{c:.3f}" for c in callback)
        + f" s), tasks between {us([r[1] for r in results])} us a chunk; digest {','.join(sorted(digests))}"
    )
    print(
        f"{name}by layer (us a chunk, timed apart, less the timers: {wrapper * 1e6:.2f} us a wrapped call, "
        f"{clock * 1e6:.2f} us a clock read inside): "
        f"source {us([r[4] - r[5] for r in results], wrapper)}, "
        f"follower {us([r[5] - r[6] for r in results], wrapper)}, "
        f"analyzer.feed {us([r[6] for r in results], clock)} "
        f"(callback with the timers {us([r[4] for r in results])})"
    )


def main(argv: list[str] | None = None) -> int:
    """Print the CPU per chunk (median of the rounds), by layer."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--whole-writes", action="store_true", help="a write a chunk, not a line a chunk")
    parser.add_argument("--profile", help="cProfile one more round into FILE (pstats)")
    parser.add_argument(
        "--against",
        metavar="TREE",
        help="also run TREE's watchdog (a worker process each, PYTHONPATH at each tree), rounds interleaved",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="instead: the memory the followers hold at a round's end (tracemalloc), per launch",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    raw = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(raw)
    first, load = writes(args.launches, args.seconds, args.seed)
    ticks = plan(load, args.hosts, not args.whole_writes)
    if args.worker:
        asyncio.run(_serve(first, ticks, args.hosts))
        return 0
    if args.memory:
        held = asyncio.run(_memory(first, ticks, args.hosts))
        incarnations = COUNTS.get("t:starting", 0)
        print(
            f"{args.launches} launches, {args.seconds:g} s, {incarnations} incarnations begun: the followers hold "
            f"{held / 1e6:.2f} MB at the round's end ({held / args.launches / 1e3:.1f} KB a launch); "
            f"tree {os.environ.get('PYTHONPATH') or Path.cwd()}"
        )
        return 0
    if args.against:
        passed = [a for a in raw if a not in ("--against", args.against)]
        here = os.environ.get("PYTHONPATH") or str(Path.cwd())
        mine, theirs = _against(passed, [here, args.against], args.rounds)
        _report(f"[{here}] ", mine, args.launches, args.hosts, args.seconds)
        _report(f"[{args.against}] ", theirs, args.launches, args.hosts, args.seconds)
        ratios = [a[0] / b[0] for a, b in zip(mine, theirs, strict=True)]
        print(
            f"callback, {here} / {args.against}: median {statistics.median(ratios):.3f} ("
            + ", ".join(f"{r:.3f}" for r in ratios)
            + f"); load average {os.getloadavg()[0]:.2f}"
        )
        return 0
    results = asyncio.run(_rounds(first, ticks, args.hosts, args.rounds))
    _report("", results, args.launches, args.hosts, args.seconds)
    print("updates of a round: " + ", ".join(f"{k} {v}" for k, v in sorted(COUNTS.items())))
    if args.profile:
        profiler = cProfile.Profile()

        async def profiled() -> None:
            profiler.enable()
            await _round(first, ticks, args.hosts, None)
            profiler.disable()

        asyncio.run(profiled())
        profiler.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
