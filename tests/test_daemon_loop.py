"""The daemon never blocks its event loop: asyncio debug mode, under load, reports no slow callback."""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import time
import urllib.request
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskStatus

from watchdog.daemon.collector import (
    FULL_PAUSE,
    SWEEP_MAX,
    SWEEP_MIN,
    TRIM_MAX,
    TRIM_MIN,
    freeze_after_full_collections,
    freeze_survivors,
    next_full_threshold,
    next_sweep_in,
    next_trim_in,
    sweep,
    trim_heap,
)
from watchdog.daemon.http import serve_http
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus" / "sglang"
# a whole SGLang launch, from its arguments to "The server is fired up and ready to roll!"
STARTUP = (CORPUS / "ready-llama31-8b-single-gpu-docs-v041.log").read_bytes().splitlines(keepends=True)
# what a serving SGLang logs: prefill, decode and access-log lines (the tail of another real launch)
SERVING = [
    line
    for line in (CORPUS / "ready-qwen25-vl-multimodal-then-traffic-notebook-docs.log")
    .read_bytes()
    .splitlines(keepends=True)
    if b"Decode batch" in line or b"Prefill batch" in line or b'"POST ' in line
]
# a post-ready scheduler crash: "Scheduler hit an exception" and an uncaught traceback (a certain crash)
CRASH = b"".join(
    (CORPUS / "postready-scheduler-valueerror-lmcache-tp2-pr869.log")
    .read_bytes()
    .splitlines(keepends=True)[1:]
)

LAUNCHES = 40
SLOW = 0.05  # seconds: the slow_callback_duration
ROUND = 0.1  # seconds between the writer's bursts (pacing the load, not waiting for an outcome)
SERVING_ROUNDS = 40  # bursts of serving lines after each launch's startup
DEADLINE = 60.0


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """The asyncio backend in debug mode (slow callbacks are logged; thread-unsafe loop calls raise)."""
    return ("asyncio", {"debug": True})


def _waited_for_a_cpu(stat: int) -> float:
    """Seconds this thread has waited, runnable, for a CPU (the second field of Linux's schedstat, in ns)."""
    return int(os.pread(stat, 64, 0).split()[1]) / 1e9


class _SlowCallbacks:
    """The loop's callbacks that held it `SLOW` seconds or more of their own: the wall time of each, less the
    time the loop's thread waited for a CPU meanwhile (another process's, on a loaded machine: no block of
    the daemon's). A callback that computes or blocks in a call (a sleep, blocking I/O) is counted whole."""

    def __init__(self, stat: int) -> None:
        self.found: list[str] = []
        self._stat = stat

    def run(self, handle: asyncio.Handle, run: Callable[[asyncio.Handle], None]) -> None:
        started, waited = time.monotonic(), _waited_for_a_cpu(self._stat)
        try:
            run(handle)
        finally:
            wall = time.monotonic() - started
            if wall >= SLOW:
                preempted = _waited_for_a_cpu(self._stat) - waited
                if wall - preempted >= SLOW:
                    # a task's step names its task (and so what it was doing): a handle of Task.__step does not
                    task = getattr(getattr(handle, "_callback", None), "__self__", None)
                    self.found.append(
                        f"Executing {handle!r} took {wall - preempted:.3f} seconds"
                        f" (and {preempted:.3f} s waiting for a CPU); task {task!r}"
                    )


@contextmanager
def _watch_slow_callbacks() -> Iterator[_SlowCallbacks]:
    """Times each callback of this thread's loop (asyncio's debug mode times wall time alone: on a loaded
    machine it reports callbacks that were only preempted)."""
    asyncio.get_running_loop()  # the loop's thread
    stat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    watch = _SlowCallbacks(stat)
    run = asyncio.Handle._run

    def timed(handle: asyncio.Handle) -> None:
        watch.run(handle, run)

    asyncio.Handle._run = timed  # type: ignore[method-assign]
    try:
        yield watch
    finally:
        asyncio.Handle._run = run  # type: ignore[method-assign]
        os.close(stat)


async def _serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
    await serve_http(("127.0.0.1", 0), daemon.statuses, daemon.stats, task_status=task_status)


def _script(i: int) -> list[bytes]:
    """Launch i's log as bursts: its startup, serving lines, then (every 4th launch) the crash."""
    bursts: list[bytes] = []
    lines = STARTUP + [SERVING[(i + k) % len(SERVING)] for k in range(SERVING_ROUNDS * 3)]
    pos = 0
    while pos < len(lines):
        size = 1 + (i + len(bursts)) % 7  # 1 to 7 lines a burst; every launch on its own rhythm
        bursts.append(b"".join(lines[pos : pos + size]))
        pos += size
    if i % 4 == 0:
        bursts.append(CRASH)
    return bursts


def _write_round(paths: list[Path], scripts: list[list[bytes]], n: int) -> None:
    # in a worker thread, like the daemon's own file I/O: the writer must not be what blocks the loop
    for path, script in zip(paths, scripts, strict=True):
        if n < len(script):
            with path.open("ab") as file:
                file.write(script[n])


@pytest.fixture
async def started_as_a_daemon_should_start() -> AsyncIterator[None]:
    """What `watchdog run` does for its process before the daemon starts (watchdog/service.py): a full
    (generation 2) garbage collection would walk every object the imports made (aiohttp, asyncssh, pydantic,
    ...: about 75,000, 20 ms on this machine; 140,000 and 100 ms with 200 launches) inside whichever callback
    allocates, so they are frozen (`gc.freeze()`) and a collection walks only what the daemon made since.
    (The bundled profiles, the test's other finding, the daemon now loads in a worker thread itself.)"""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=DEADLINE) as response:
        return response.status, response.read()


def _want(i: int) -> str:
    return "crashed" if i % 4 == 0 else "ready"


@pytest.mark.usefixtures("started_as_a_daemon_should_start")
async def test_no_slow_callback_under_load(tmp_path: Path) -> None:
    """40 launches whose logs grow in bursts (10 of them crashing) and a scraped HTTP server (on asyncio's
    debug mode): no callback holds the loop 50 ms or more of its own."""
    paths = [tmp_path / f"launch-{i:02d}.log" for i in range(LAUNCHES)]
    for path in paths[::2]:
        path.touch()  # the others do not exist yet: the daemon waits for them
    plans = {
        path.stem: LaunchPlan(LaunchSpec(name=path.stem, target=parse_target(str(path)))) for path in paths
    }
    scripts = [_script(i) for i in range(LAUNCHES)]
    scraped: list[tuple[str, int, int]] = []
    with _watch_slow_callbacks() as slow, anyio.fail_after(DEADLINE):
        daemon = Daemon(plans, serve=_serve, handle_signals=False)
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            base = f"http://127.0.0.1:{daemon.port}"

            async def scrape() -> None:
                for page in ("/status", "/metrics", "/", "/status", "/metrics"):
                    status, body = await anyio.to_thread.run_sync(_get, base + page)
                    scraped.append((page, status, len(body)))

            async with anyio.create_task_group() as load:
                load.start_soon(scrape)
                for n in range(max(len(s) for s in scripts)):
                    await anyio.to_thread.run_sync(_write_round, paths, scripts, n)
                    await anyio.sleep(ROUND)
            want = {path.stem: _want(i) for i, path in enumerate(paths)}
            statuses = await daemon.wait_until(lambda s: {x["name"]: x["state"] for x in s} == want)
            status, body = await anyio.to_thread.run_sync(_get, base + "/status")
            tg.cancel_scope.cancel()
    assert slow.found == []
    assert [(page, code) for page, code, _ in scraped] == [
        ("/status", 200),
        ("/metrics", 200),
        ("/", 200),
        ("/status", 200),
        ("/metrics", 200),
    ]
    assert status == 200
    assert body.count(b'"name"') == LAUNCHES
    crashed = [s for s in statuses if s["state"] == "crashed"]
    assert len(crashed) == LAUNCHES // 4
    assert all(s["error"]["summary"].startswith("ValueError: Failed to allocate") for s in crashed)


async def test_a_blocking_callback_is_caught() -> None:
    """The detector itself works: a step that holds the loop for 80 ms is reported."""
    with _watch_slow_callbacks() as slow:
        await anyio.lowlevel.checkpoint()
        time.sleep(0.08)  # noqa: ASYNC251 - blocks the loop on purpose
        await anyio.lowlevel.checkpoint()
    assert len(slow.found) == 1
    assert "took 0.0" in slow.found[0] or "took 0.1" in slow.found[0]


def _frozen(obj: object) -> bool:
    """Whether the collector tracks `obj` but no generation holds it: `gc.freeze()` moved it out of them."""
    return gc.is_tracked(obj) and not any(obj is o for g in range(3) for o in gc.get_objects(g))


@pytest.mark.parametrize("freeze", [True, False])
async def test_what_the_start_made_is_frozen(tmp_path: Path, freeze: bool) -> None:
    """With `freeze` (as `watchdog run` asks), once every launch has read its log as it was, what the start made
    (each launch's follower, its analyzer) is left out of later garbage collections; without it, not."""
    paths = [tmp_path / f"launch-{i}.log" for i in range(3)]
    for path in paths:
        path.write_bytes(b"".join(STARTUP))
    plans = {p.stem: LaunchPlan(LaunchSpec(name=p.stem, target=parse_target(str(p)))) for p in paths}
    daemon = Daemon(plans, handle_signals=False, freeze=freeze)
    try:
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                followers = [run.follower for run in daemon._running.values()]
                frozen = [_frozen(f) for f in followers] + [_frozen(f.analyzer) for f in followers]  # type: ignore[union-attr]
                later: list[object] = [[]]  # tracked (a dict of atomic values would not be)
                made_later = _frozen(later)
                gc.collect()
                survived = _frozen(later)  # what lives through a full collection is frozen as it ends
                tg.cancel_scope.cancel()
        after: list[object] = [[]]
        gc.collect()
        after_the_daemon = _frozen(after)
    finally:
        gc.unfreeze()  # the rest of the test process is collected as before
    assert len(followers) == 3
    assert frozen == [freeze] * 6
    assert not made_later
    assert survived is freeze
    assert not after_the_daemon  # its hook left with it


def test_a_cycle_that_dies_while_frozen_waits_for_the_sweep() -> None:
    """Objects that lived through a full collection are frozen as it ends; if they become a cycle's garbage later,
    full collections leave them (they walk only what was made since) until `sweep` collects everything."""
    freed: list[str] = []

    class Node:
        peer: object

    stop = freeze_after_full_collections()
    try:
        a, b = Node(), Node()
        a.peer, b.peer = b, a
        weakref.finalize(a, freed.append, "a")
        gc.collect()
        assert _frozen(a)
        del a, b
        gc.collect()
        assert freed == []
        collected, cost = sweep()
        assert freed == ["a"]
        assert collected >= 2
        assert cost > 0
    finally:
        stop()
        gc.unfreeze()


def test_a_full_collection_that_takes_long_brings_the_next_one_sooner() -> None:
    """Generation 2's threshold follows what each full collection cost: halved while one takes more than the pause
    (each walks what generation 2 took in since the one before, so the next walks about half as much), one more at
    a time while they take under a quarter of it, never below 1 nor above what it was."""
    assert next_full_threshold(10, 0.05, FULL_PAUSE, 10) == 5
    assert next_full_threshold(5, 0.05, FULL_PAUSE, 10) == 2
    assert next_full_threshold(1, 0.5, FULL_PAUSE, 10) == 1
    assert next_full_threshold(2, FULL_PAUSE / 2, FULL_PAUSE, 10) == 2  # near the pause: kept
    assert next_full_threshold(2, 0.0001, FULL_PAUSE, 10) == 3
    assert next_full_threshold(10, 0.0001, FULL_PAUSE, 10) == 10


@contextmanager
def _thresholds(*values: int) -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*values)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()  # the rest of the test process is collected as before


def test_full_collections_over_the_pause_lower_the_threshold_until_stopped() -> None:
    """Each full collection that took more than the pause (none is under 0 s) halves generation 2's threshold, as
    the daemon's collector hook sees it end; the hook's end gives the threshold back."""
    with _thresholds(700, 10, 8):
        stop = freeze_after_full_collections(pause=0.0)
        try:
            gc.collect()
            assert gc.get_threshold() == (700, 10, 4)
            gc.collect()
            gc.collect()
            gc.collect()
            assert gc.get_threshold() == (700, 10, 1)
        finally:
            stop()
        assert gc.get_threshold() == (700, 10, 8)


def test_after_the_start_is_frozen_full_collections_come_at_their_threshold() -> None:
    """Once what the start made is frozen, the next full collection comes after `threshold2` younger ones, not
    after a quarter of everything the start made has moved into generation 2 (CPython's `long_lived_total` is
    what the last full collection kept): its walk is what came since, not a relaunch wave's worth."""
    full: list[int] = []

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(1)

    with _thresholds(700, 10, 10):
        started = [[i] for i in range(300_000)]  # what a start made: lives on
        freeze_survivors()
        gc.callbacks.append(counted)
        try:
            for _ in range(150_000):  # garbage in cycles: a few survive each young collection, not a quarter
                cycle: list[object] = []
                cycle.append(cycle)
            del cycle
        finally:
            gc.callbacks.remove(counted)
        assert len(started) == 300_000
    assert full, "no full collection after 150,000 young objects"


def test_sweeps_take_a_thousandth_of_a_core_within_a_minute_and_ten() -> None:
    """The next sweep comes a thousand times its cost later: a cheap one (few launches) after a minute, so what
    died frozen does not pile up; a dear one (thousands of launches) no more often than every 10 minutes' bound
    allows, and never later than that."""
    assert next_sweep_in(0.001) == SWEEP_MIN == 60.0
    assert next_sweep_in(0.2) == 200.0
    assert next_sweep_in(5.0) == SWEEP_MAX == 600.0


def _rss_mb() -> float:
    with open("/proc/self/status") as file:
        return next(int(line.split()[1]) for line in file if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_a_heap_trim_gives_the_free_pages_back() -> None:
    """What a crash loop's transient allocations leave free in the C heap stays in the RSS (the allocator keeps it,
    the heap's top pinned by what still lives) until a trim gives its pages back."""
    # 40 MB of the C heap (a block over 512 bytes is malloc's), what lives on spread over it
    blocks = [b"%05d" % i * 400 for i in range(20_000)]
    kept = blocks[::50]
    del blocks
    before = _rss_mb()
    cost = trim_heap()
    after = _rss_mb()
    assert cost is not None
    assert cost >= 0.0
    assert before - after > 20, (before, after)
    assert all(len(b) == 2000 for b in kept)


def test_heap_trims_come_every_5_s_to_a_minute() -> None:
    """The next trim comes a thousand times its cost later: every 5 s while it is cheap, never later than a minute."""
    assert next_trim_in(0.0001) == TRIM_MIN == 5.0
    assert next_trim_in(0.02) == 20.0
    assert next_trim_in(1.0) == TRIM_MAX == 60.0
