"""Counts (and thread CPU) of the daemon's calls, for `benchmarks/daemon_counts.py`: imported by the interpreter at
its start when this folder is on PYTHONPATH; does something only in `python -m watchdog.cli run ...` with
`COUNT_OUT` set, where it wraps the functions named below and appends their totals to `COUNT_OUT.<pid>` once a
second (one JSON object a line: wall time, calls, thread CPU in ns of the calls that are not coroutines)."""

from __future__ import annotations

import collections
import functools
import importlib
import json
import os
import sys
import threading
import time
from typing import Any

OUT = os.environ.get("COUNT_OUT")
CALLS: collections.Counter[str] = collections.Counter()
NS: collections.Counter[str] = collections.Counter()
_now = time.thread_time_ns


def _wrap(owner: Any, name: str, key: str | None = None) -> None:
    f = getattr(owner, name)
    k = key or f"{getattr(owner, '__name__', owner)}.{name}"
    if (
        getattr(f, "__code__", None) is not None and f.__code__.co_flags & 0x80
    ):  # a coroutine function: counted

        @functools.wraps(f)
        async def counted(*a: Any, **kw: Any) -> Any:
            CALLS[k] += 1
            return await f(*a, **kw)

        setattr(owner, name, counted)
        return

    @functools.wraps(f)
    def timed(*a: Any, **kw: Any) -> Any:
        CALLS[k] += 1
        t0 = _now()
        try:
            return f(*a, **kw)
        finally:
            NS[k] += _now() - t0

    setattr(owner, name, timed)


def _methods(cls: type) -> list[str]:
    return [m for m, v in vars(cls).items() if callable(v) and not m.startswith("__")]


def _ssh() -> None:
    """The SSH path's calls: asyncssh's packets, the multiplexer's reads, the source's pushes and identities."""
    get = importlib.import_module
    connection, channel = get("asyncssh.connection"), get("asyncssh.channel")
    ssh, chan = get("watchdog.follow.sources.ssh"), get("watchdog.follow.sources.channel")
    mux, slices = get("watchdog.follow.sources.mux"), get("watchdog.follow.sources.readslices")
    for n in ("_recv_packet", "send_packet"):
        _wrap(connection.SSHConnection, n, "asyncssh " + n)
    _wrap(channel.SSHChannel, "_process_data", "asyncssh SSHChannel._process_data")
    _wrap(channel.SSHChannel, "_process_window_adjust", "asyncssh SSHChannel._process_window_adjust")
    _wrap(mux.Multiplexer, "data_received")
    _wrap(mux.Multiplexer, "send")
    _wrap(chan.CommandOutput, "release")
    for n in ("_drive", "_deliver", "_check_fingerprint"):
        _wrap(ssh._Follower, n)
    _wrap(ssh.SSHSource, "identify")
    _wrap(slices, "begin_read", "readslices.begin_read")


def _setup() -> None:
    # imported here, in the daemon only (not in the bench and its writer, which see this folder too)
    get = importlib.import_module
    asyncio, anyio_asyncio = get("asyncio"), get("anyio._backends._asyncio")
    alerting, announce = get("watchdog.alerts.alerting"), get("watchdog.daemon.announce")
    supervisor, checkpoint = get("watchdog.daemon.supervisor"), get("watchdog.follow.checkpoint")
    follower, inotify = get("watchdog.follow.follower"), get("watchdog.follow.sources.inotify")
    local, state = get("watchdog.follow.sources.local"), get("watchdog.store.state")
    Analyzer, Verdict = get("watchdog.core.analyzer").Analyzer, get("watchdog.core.verdict").Verdict

    _wrap(follower, "build_verdict", "build_verdict")
    for n in (
        "status",
        "state",
        "timing",
        "_push",
        "_item",
        "_publish",
        "_conclude",
        "_settle",
        "_reschedule",
    ):
        _wrap(follower.LaunchFollower, n)
    for n in ("redacted", "with_facts"):
        _wrap(Verdict, n)
    tick = Analyzer.tick

    def ticked(self: Any, now: float) -> Any:
        due = self.next_due()  # why the clock task ran it: something due, or not (a checkpoint's look)
        CALLS["Analyzer.tick, nothing due" if due is None or due > now + 1e-6 else "Analyzer.tick, due"] += 1
        return tick(self, now)

    Analyzer.tick = ticked
    for n in ("feed", "tick", "report_open_tracebacks", "next_due"):
        _wrap(Analyzer, n)
    _wrap(checkpoint, "encode", "checkpoint.encode")
    for n in ("fed", "save_due", "_save"):
        _wrap(checkpoint.Checkpointer, n)
    for n in _methods(state.StateStore):
        _wrap(state.StateStore, n)
    for n in _methods(announce.Announcer):
        _wrap(announce.Announcer, n)
    for n in _methods(alerting.Alerting):
        _wrap(alerting.Alerting, n)
    _wrap(supervisor, "_snapshot")
    _wrap(supervisor, "_verdict_snapshot")
    for n in ("_drive", "__anext__"):
        _wrap(local._Follow, n)
    _wrap(local.LocalSource, "_poll_at_end")
    for n in ("wait_for", "rearm", "_woken"):
        _wrap(inotify.Watcher, n)
    _wrap(inotify, "_set_all", "inotify._set_all")
    try:
        _ssh()
    except Exception as exc:  # a tree without one of them: the rest is counted all the same
        sys.stderr.write(f"counts: the SSH path not counted: {exc!r}\n")
    for n in ("call_at", "_run_once"):
        _wrap(asyncio.base_events.BaseEventLoop, n, "loop." + n)
    _wrap(anyio_asyncio.TaskGroup, "start_soon", "anyio start_soon")
    run = asyncio.events.Handle._run

    def dispatched(self: Any) -> None:  # each callback of the loop, by what it calls
        k = "callback " + getattr(self._callback, "__qualname__", type(self._callback).__name__)[:60]
        CALLS[k] += 1
        t0 = _now()
        try:
            run(self)
        finally:
            NS[k] += _now() - t0

    asyncio.events.Handle._run = dispatched

    def dump() -> None:
        while True:
            time.sleep(1.0)
            with open(f"{OUT}.{os.getpid()}", "a") as file:
                file.write(json.dumps({"t": time.time(), "calls": dict(CALLS), "ns": dict(NS)}) + "\n")

    threading.Thread(target=dump, name="counts", daemon=True).start()


if OUT and sys.argv[:1] == ["-m"] and "run" in sys.argv:
    try:
        _setup()
    except Exception as exc:  # a tree without one of the names: said, and the daemon runs uncounted
        sys.stderr.write(f"counts: not set up: {exc!r}\n")
