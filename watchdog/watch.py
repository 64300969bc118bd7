"""`watchdog watch`: follow one live launch (a local file or a file over SSH) until there is a verdict."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

import anyio

from watchdog.analyzer import Analyzer
from watchdog.events import HealthChecked, ProcessExited
from watchdog.exceptions import DeliveryError, UsageError, WatchdogError
from watchdog.lifecycle import State, Transition
from watchdog.probes.health import HealthProbe
from watchdog.probes.process import LocalProcessProbe, ProcessProbe, SSHProcessProbe
from watchdog.render import render_verdict
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
from watchdog.verdict import EXIT_CODES, to_json

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
    events_file = args.events.open("a", encoding="utf-8") if args.events else None
    live = not args.json
    timed_out = False
    start = time.monotonic()

    def now() -> float:
        return time.monotonic() - start

    def report(transitions: list[Transition]) -> None:
        for t in transitions:
            record = {
                "state": t.state.value,
                "previous": t.previous.value,
                "line": t.line,
                "at": t.at,
                "reason": t.reason,
            }
            if events_file is not None:
                events_file.write(json.dumps(record) + "\n")
                events_file.flush()
            if live:
                print(
                    f"{time.strftime('%H:%M:%S')} {t.previous.value} -> {t.state.value} ({t.reason})",
                    file=out,
                    flush=True,
                )

    def note(kind: str, detail: str) -> None:
        if events_file is not None:
            events_file.write(json.dumps({"event": kind, "detail": detail}) + "\n")
            events_file.flush()
        if live:
            print(f"{time.strftime('%H:%M:%S')} {kind}: {detail}", file=out, flush=True)

    async with SSHPool(options) as pool, anyio.create_task_group() as tg:
        source = source_for(target, pool)

        async def follow() -> None:
            async with source.open_follow(0) as items:
                async for item in items:
                    if isinstance(item, Chunk):
                        report(analyzer.feed(item.data, now()))
                    elif isinstance(item, FileRestarted):
                        note("file", f"{item.reason}: reading the new file from its start")
                        report(analyzer.restart(now()))
                    elif isinstance(item, Connected | Disconnected | FileMissing):
                        note(type(item).__name__.lower(), str(item))
                    if analyzer.state in _VERDICTS:
                        tg.cancel_scope.cancel()
                        return

        async def clock() -> None:
            while True:
                await anyio.sleep(TICK)
                report(analyzer.tick(now()))
                if analyzer.state in _VERDICTS:
                    tg.cancel_scope.cancel()
                    return

        async def process(probe: ProcessProbe) -> None:
            while True:
                if not await probe.alive():
                    # let the last lines (a traceback being written) arrive before the verdict
                    await anyio.sleep(TICK * 2)
                    report(analyzer.probe(ProcessExited("no such process"), now()))
                    tg.cancel_scope.cancel()
                    return
                await anyio.sleep(PROBE_INTERVAL)

        async def health(probe: HealthProbe) -> None:
            async with probe:
                while True:
                    report(analyzer.probe(HealthChecked(await probe.check()), now()))
                    if analyzer.state in _VERDICTS:
                        tg.cancel_scope.cancel()
                        return
                    await anyio.sleep(PROBE_INTERVAL)

        async def deadline(seconds: float) -> None:
            nonlocal timed_out
            await anyio.sleep(seconds)
            timed_out = True
            tg.cancel_scope.cancel()

        tg.start_soon(follow)
        tg.start_soon(clock)
        if args.pid is not None or args.process:
            probe: ProcessProbe
            if target.host is None:
                probe = LocalProcessProbe(pid=args.pid, pattern=args.process)
            else:
                probe = SSHProcessProbe(
                    pool, target.host, port=target.port, user=target.user, pid=args.pid, pattern=args.process
                )
            tg.start_soon(process, probe)
        if args.health:
            tg.start_soon(
                health,
                HealthProbe(
                    args.health,
                    pool=pool if target.host else None,
                    host=target.host,
                    port=target.port,
                    user=target.user,
                ),
            )
        if args.timeout:
            tg.start_soon(deadline, args.timeout)

    verdict = _verdict(analyzer, timed_out)
    if events_file is not None:
        events_file.close()
    for url in args.notify:
        try:
            from watchdog.notify import post_json  # noqa: PLC0415 - only when asked to notify

            await post_json(url, verdict)
        except DeliveryError as exc:
            print(f"watchdog: notification failed: {exc}", file=sys.stderr)
    if args.json:
        print(json.dumps(verdict, ensure_ascii=False), file=out)
    else:
        print(render_verdict(verdict, source=args.target), file=out)
    if timed_out:
        return 2
    return EXIT_CODES.get(analyzer.state, 3)


def _verdict(analyzer: Analyzer, timed_out: bool) -> dict[str, Any]:
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
    if v["error"] is not None and not v["error"]["traceback"]:
        v["error"]["context"] = analyzer.tail()
    return v
