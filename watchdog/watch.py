"""`watchdog watch`: follow one live launch (a local file or a file over SSH) until there is a verdict."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

import anyio
from rich.console import Console
from rich.live import Live

from watchdog.analyzer import Analyzer
from watchdog.findings import HealthChecked, ProcessExited
from watchdog.exceptions import ConnectionLost, DeliveryError, UsageError, WatchdogError
from watchdog.exitcodes import EXIT_STALLED
from watchdog.gpu import MemoryTrend
from watchdog.lifecycle import State, Transition
from watchdog.liveview import LiveView
from watchdog.probes.gpu import GpuProbe
from watchdog.probes.health import HealthProbe
from watchdog.probes.process import LocalProcessProbe, ProcessProbe, SSHProcessProbe, wait_until_gone
from watchdog.render import render_verdict, write_out
from watchdog.sources import (
    Chunk,
    Connected,
    Disconnected,
    FileMissing,
    FileRestarted,
    SSHOptions,
    SSHPool,
    parse_target,
    source_for,
)
from watchdog.verdict import exit_code, to_json

__all__ = ["TICK", "run_watch", "watch"]

TICK = 0.25  # seconds between clock ticks (stall and pending-error checks)
PROBE_INTERVAL = 2.0  # seconds between process and health probes
_VERDICTS = frozenset({State.READY, State.CRASHED, State.STALLED, State.STOPPED})


def run_watch(args: argparse.Namespace) -> int:
    """The `watch` command: returns the exit code."""
    if args.pid is not None and args.process:
        raise UsageError("--pid and --process are exclusive: give one")
    try:
        return anyio.run(watch, args, backend="asyncio")
    except BaseExceptionGroup as group:  # a task group's failure: surface our own error for the exit code
        ours = _first_watchdog_error(group)
        if ours is not None:
            raise ours from None
        raise


def _first_watchdog_error(group: BaseExceptionGroup[BaseException]) -> WatchdogError | None:
    for exc in group.exceptions:
        if isinstance(exc, WatchdogError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_watchdog_error(exc)
            if found is not None:
                return found
    return None


class _Reporter:
    """Where transitions and source events go: the --events file, plain lines, or the live view."""

    def __init__(self, args: argparse.Namespace, out: TextIO, view: LiveView | None) -> None:
        self.events = args.events.open("a", encoding="utf-8") if args.events else None
        self.plain = not args.json and view is None
        self.out = out
        self.view = view
        self.live: Live | None = None

    def transitions(self, transitions: list[Transition]) -> None:
        for t in transitions:
            self._write(
                {
                    "state": t.state.value,
                    "previous": t.previous.value,
                    "line": t.line,
                    "at": t.at,
                    "reason": t.reason,
                }
            )
            self._say(f"{t.previous.value} -> {t.state.value} ({t.reason})")

    def note(self, kind: str, detail: str) -> None:
        self._write({"event": kind, "detail": detail})
        self._say(f"{kind}: {detail}")

    def _write(self, record: dict[str, Any]) -> None:
        if self.events is not None:
            self.events.write(json.dumps({"time": round(time.time(), 3), **record}) + "\n")
            self.events.flush()

    def _say(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        if self.live is not None:
            self.live.console.print(line, highlight=False)
        elif self.plain:
            write_out(line, self.out)

    def close(self) -> None:
        if self.events is not None:
            self.events.close()


async def watch(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Follow `args.target` until a verdict; print it (text or JSON); return the exit code."""
    target = parse_target(args.target)
    engine = None if args.engine == "auto" else args.engine
    analyzer = Analyzer(engine, profiles=args.profile, stall_after=args.stall_after)
    options = SSHOptions(
        known_hosts=str(args.known_hosts) if args.known_hosts else None,
        accept_new_host_key=args.accept_new_host_key,
        identity=str(args.identity) if args.identity else None,
    )
    view = LiveView(analyzer, args.target) if not args.json and out.isatty() else None
    reporter = _Reporter(args, out, view)
    trend = MemoryTrend()
    timed_out = False
    start = time.monotonic()

    def now() -> float:
        return time.monotonic() - start

    final: dict[str, Any] = {}

    async with SSHPool(options) as pool, anyio.create_task_group() as outer, anyio.create_task_group() as tg:
        source = source_for(target, pool)
        if args.notify:
            # import and build TLS now, so that the verdict's notification leaves without that delay
            from watchdog.notify import tls_context  # noqa: PLC0415

            outer.start_soon(anyio.to_thread.run_sync, tls_context)

        def conclude() -> None:
            # The verdict is taken once; notifications leave at once, while the followers shut down.
            if not final:
                final.update(_verdict(analyzer, timed_out, trend.facts()))
                for url in args.notify:
                    outer.start_soon(_notify, url, final)
            tg.cancel_scope.cancel()

        def settle(transitions: list[Transition]) -> None:
            reporter.transitions(transitions)
            if analyzer.state in _VERDICTS:
                conclude()

        async def follow() -> None:
            async with source.open_follow(0) as items:
                async for item in items:
                    if isinstance(item, Chunk):
                        settle(analyzer.feed(item.data, now()))
                    elif isinstance(item, FileRestarted):
                        reporter.note("file", f"{item.reason}: reading the new file from its start")
                        settle(analyzer.restart(now()))
                    elif isinstance(item, Connected | Disconnected | FileMissing):
                        reporter.note(type(item).__name__.lower(), str(item))

        async def clock() -> None:
            while True:
                await anyio.sleep(TICK)
                settle(analyzer.tick(now()))
                if reporter.live is not None and view is not None:
                    reporter.live.update(view.render(now()))

        async def process(probe: ProcessProbe) -> None:
            await wait_until_gone(probe, interval=PROBE_INTERVAL)
            # let the last lines (a traceback being written) arrive before the verdict
            await anyio.sleep(TICK * 2)
            settle(analyzer.probe(ProcessExited("no such process"), now()))

        async def health(probe: HealthProbe) -> None:
            async with probe:
                while True:
                    await anyio.sleep(PROBE_INTERVAL)
                    if not analyzer.lifecycle.wants_health():
                        continue
                    try:
                        status = await probe.check()
                    except ConnectionLost:
                        continue  # unknown, not unhealthy
                    settle(analyzer.probe(HealthChecked(status), now()))

        async def gpu(probe: GpuProbe) -> None:
            while probe.available:
                try:
                    samples = await probe.sample()
                except ConnectionLost:
                    samples = None
                if samples:
                    analyzer.lifecycle.memory_growing = trend.observe(now(), samples)
                    if view is not None:
                        view.gpu_memory = trend.facts().get("gpu_mem_used_bytes", {})
                await anyio.sleep(args.gpu_interval)

        async def deadline(seconds: float) -> None:
            nonlocal timed_out
            await anyio.sleep(seconds)
            timed_out = True
            conclude()

        with (
            Live(console=Console(file=out), auto_refresh=False, transient=True)
            if view is not None
            else _nothing() as live
        ):
            reporter.live = live
            tg.start_soon(follow)
            tg.start_soon(clock)
            pool_or_none = pool if target.host else None
            if args.pid is not None or args.process:
                probe: ProcessProbe
                if target.host is None:
                    probe = LocalProcessProbe(pid=args.pid, pattern=args.process)
                else:
                    probe = SSHProcessProbe(
                        pool,
                        target.host,
                        port=target.port,
                        user=target.user,
                        pid=args.pid,
                        pattern=args.process,
                    )
                tg.start_soon(process, probe)
            if args.health:
                tg.start_soon(
                    health,
                    HealthProbe(
                        args.health, pool=pool_or_none, host=target.host, port=target.port, user=target.user
                    ),
                )
            if args.gpu:
                tg.start_soon(
                    gpu, GpuProbe(pool=pool_or_none, host=target.host, port=target.port, user=target.user)
                )
            if args.timeout:
                tg.start_soon(deadline, args.timeout)
            await anyio.sleep_forever()
        reporter.live = None

    reporter.close()
    verdict = final or _verdict(analyzer, timed_out, trend.facts())
    if args.json:
        write_out(json.dumps(verdict, ensure_ascii=False), out)
    else:
        write_out(render_verdict(verdict, source=args.target), out)
    return EXIT_STALLED if timed_out else exit_code(analyzer.state)


async def _notify(url: str, verdict: dict[str, Any]) -> None:
    from watchdog.notify import post_json  # noqa: PLC0415 - only when asked to notify

    try:
        await post_json(url, verdict)
    except DeliveryError as exc:
        print(f"watchdog: notification failed: {exc}", file=sys.stderr)


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield None


def _verdict(analyzer: Analyzer, timed_out: bool, gpu_facts: dict[str, dict[str, int]]) -> dict[str, Any]:
    lc = analyzer.lifecycle
    extra: dict[str, Any] = {"timed_out": True} if timed_out else {}
    v = to_json(
        lc.current,
        engine=analyzer.engine,
        lines_read=analyzer.lines_read,
        bytes_read=analyzer.bytes_read,
        incarnations=len(lc.history) + 1,
        extra=extra,
    )
    v["facts"].update(gpu_facts)
    if v["error"] is not None and not v["error"]["traceback"]:
        v["error"]["context"] = analyzer.tail()
    return v
