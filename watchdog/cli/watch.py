"""`watchdog watch`: one launch follower, its updates sent to the command's sinks, until the first verdict.

The sinks each consume the follower's updates and know nothing of each other: plain timestamped lines (or
the live view on a terminal), the `--events` file, and `--notify` webhooks, which leave the moment the
verdict is reported, in tasks of their own, so a slow receiver never delays the verdict or the exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from watchdog.cli.liveview import ProgressLines, where
from watchdog.cli.render import render_verdict, write_out
from watchdog.clock import MonotonicClock
from watchdog.core.compare import Baseline
from watchdog.core.verdict import Status, Verdict, exit_code
from watchdog.exceptions import DeliveryError, first_watchdog_error
from watchdog.follow.databases import keep_prefilter_databases
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec, SourceNoted, Transitioned, Update
from watchdog.follow.replay import earlier_launch
from watchdog.follow.sources import parse_target
from watchdog.profiles.loader import load_profile_file
from watchdog.vocabulary import EXIT_INTERRUPTED, EXIT_STALLED, State

if TYPE_CHECKING:
    from anyio.abc import TaskStatus
    from rich.live import Live

    from watchdog.follow.nodes import Follower

__all__ = ["REFRESH_PER_SECOND", "OnVerdict", "follow", "open_pool", "run_watch", "spec_from_args", "watch"]

REFRESH_PER_SECOND = 8  # live view redraws


def spec_from_args(args: argparse.Namespace) -> LaunchSpec:
    """The launch the command line describes (options were validated by `watchdog.cli.options`)."""
    return LaunchSpec(
        name=args.target,
        target=parse_target(args.target),
        engine=None if args.engine == "auto" else args.engine,
        profiles=tuple(load_profile_file(p) for p in args.profile),
        pid=args.pid,
        process=args.process,
        health_url=args.health,
        gpu=args.gpu,
        gpu_interval=args.gpu_interval,
        stall_after=args.stall_after,
        timeout=args.timeout,
    )


def run_watch(
    args: argparse.Namespace, main: Callable[[argparse.Namespace], Awaitable[int]] | None = None
) -> int:
    """The `watch` command (or another that follows a launch: `main`, default `watch`): returns the exit code."""
    from watchdog.daemon.logs import configure_logging_on_import  # noqa: PLC0415

    # what the follower's parts log (an SSH connection made again, a warning) goes to standard error, warnings
    # and up: standard output is the command's own (its lines, the live view, `--json`). Configured when
    # structlog is imported: a local file's follower logs nothing, and saves its import (test_watch_startup.py)
    configure_logging_on_import("console", level="WARNING", cache=False)
    keep_prefilter_databases()
    try:
        return anyio.run(main or watch, args, backend="asyncio")
    except BaseExceptionGroup as group:  # a task group's failure: surface our own error for the exit code
        ours = first_watchdog_error(group)
        if ours is not None:
            raise ours from None
        raise


class _Lines:
    """Sink: timestamped lines for each transition and source note, and a progress line every 30 s in a long
    phase (plain output), or above the live view (terminal)."""

    def __init__(
        self, out: TextIO, live: Live | None, enabled: bool, missing: Callable[[], bool] = lambda: False
    ) -> None:
        self.missing = missing  # whether the launch's log does not exist (yet)
        self.out = out
        self.live = live
        self.enabled = enabled
        self.progress = ProgressLines()

    def update(self, update: Update, now: float) -> None:
        if isinstance(update, Transitioned):
            t = update.transition
            if t.previous is State.PENDING and t.state is State.STALLED and t.line is None and self.missing():
                self.say(f"pending: {t.reason} (its log does not exist: a wrong path, or no launch yet)", now)
            else:
                self.say(f"{t.previous.value} -> {t.state.value} ({t.reason})", now)
        elif isinstance(update, SourceNoted):
            self.say(f"{update.kind}: {update.detail}", now)

    def tick(self, status: Status, now: float) -> None:
        if self.live is None:
            line = self.progress.line(status, now)
            if line is not None:
                self.say(line, now)

    def say(self, text: str, now: float) -> None:
        if not self.enabled:
            return
        self.progress.touch(now)
        line = f"{time.strftime('%H:%M:%S')} {text}"
        if self.live is not None:
            self.live.console.print(line, highlight=False)
        else:
            write_out(line, self.out)


class _EventsFile:
    """Sink: `--events FILE`, one JSON line per transition and source note."""

    def __init__(self, path: Any) -> None:
        self.file = path.open("a", encoding="utf-8")

    def update(self, update: Update) -> None:
        record: dict[str, Any]
        if isinstance(update, Transitioned):
            t = update.transition
            record = {
                "state": t.state.value,
                "previous": t.previous.value,
                "line": t.line,
                "at": t.at,
                "reason": t.reason,
            }
        elif isinstance(update, SourceNoted):
            record = {"event": update.kind, "detail": update.detail}
        else:
            return
        self.file.write(json.dumps({"time": round(time.time(), 3), **record}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def _earlier(args: argparse.Namespace, spec: LaunchSpec) -> Baseline | None:
    # `--compare-with FILE`: the launch before, read whole (the verdict says what changed since it)
    path = getattr(args, "compare_with", None)
    if path is None:
        return None
    return earlier_launch(path, spec.engine, spec.profiles)


async def watch(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Follow the launch `args` describe until a verdict; print it (text or JSON); return the exit code."""
    spec = spec_from_args(args)
    targets = [args.target, *getattr(args, "nodes", ())]
    remote = not all(parse_target(t).host is None for t in targets)
    async with open_pool(args, remote) as pool:
        return await follow(args, spec, pool, out, label=" ".join(targets))


def open_pool(args: argparse.Namespace, remote: bool) -> contextlib.AbstractAsyncContextManager[Any]:
    """The SSH pool of the command's `--identity`, `--known-hosts` and `--accept-new-host-key` (None when no
    target is remote), closed when the block is left."""
    if not remote:
        return contextlib.nullcontext(None)
    from watchdog.follow.sources.sshpool import SSHOptions, SSHPool  # noqa: PLC0415 - asyncssh only when remote

    options = SSHOptions(
        known_hosts=str(args.known_hosts) if args.known_hosts else None,
        accept_new_host_key=args.accept_new_host_key,
        identity=str(args.identity) if args.identity else None,
    )
    return SSHPool(options)


# what a front end does at the verdict before it is printed (`watchdog launch --kill-on-crash`): it returns the
# JSON keys and the lines it adds to the output
OnVerdict = Callable[[Concluded], Awaitable[tuple[dict[str, Any], list[str]]]]


async def follow(
    args: argparse.Namespace,
    spec: LaunchSpec,
    pool: Any,
    out: TextIO = sys.stdout,
    *,
    label: str,
    offset: int = 0,
    on_verdict: OnVerdict | None = None,
) -> int:
    """Follow `spec` (over `pool` when remote; the nodes of `args` too) until a verdict, with the sinks `args`
    asks for; print the verdict (text or JSON) named `label`; return the exit code.

    Args:
        offset: where in the log to start reading (`watchdog launch`: the log's size before its start).
        on_verdict: called at the verdict, before it is printed: the JSON keys and text lines it adds.
    """
    source = label
    terminal = not args.json and out.isatty()
    events = _EventsFile(args.events) if args.events else None
    verdict: Concluded | None = None
    interrupted = False
    earlier = _earlier(args, spec)
    follower = _follower(args, spec, pool, earlier, offset=offset)
    live: Live | None = None
    if terminal:
        # rich only on a terminal (its import is a tenth of a second of `--json`'s time to a verdict)
        from rich.console import Console  # noqa: PLC0415
        from rich.live import Live  # noqa: PLC0415

        from watchdog.cli.liveview import LiveView  # noqa: PLC0415

        view = LiveView(source, follower.status, follower.now)
        # drawn from the event loop (not rich's thread): status() is read where the follower changes it,
        # and a line printed above the view never races a redraw
        live = Live(view, console=Console(file=out), auto_refresh=False, transient=True)
    lines = _Lines(
        out,
        live,
        enabled=not args.json,
        missing=lambda: follower.status().verdict.missing_log is not None,
    )
    try:
        async with anyio.create_task_group() as notices:
            if args.notify:
                # import and build TLS now, so that the verdict's notification leaves without that delay
                from watchdog.httpclient import tls_context  # noqa: PLC0415

                notices.start_soon(anyio.to_thread.run_sync, tls_context)
            if live is not None:
                live.start()
            async with anyio.create_task_group() as tg:

                async def interrupt(*, task_status: TaskStatus[None]) -> None:
                    # Ctrl-C: the follow ends here, and where the launch was is said (asyncio would turn
                    # SIGINT into a cancellation that says nothing)
                    nonlocal interrupted
                    with anyio.open_signal_receiver(signal.SIGINT) as signals:
                        task_status.started()
                        async for _ in signals:
                            interrupted = True
                            tg.cancel_scope.cancel()
                            return

                if threading.current_thread() is threading.main_thread():  # signals reach only that one
                    await tg.start(interrupt)
                tg.start_soon(follower.run)
                tg.start_soon(_progress, follower, lines)
                if live is not None:
                    tg.start_soon(_redraw, live)
                with follower.updates:
                    async for update in follower.updates:
                        now = follower.now()
                        lines.update(update, now)
                        if events is not None:
                            events.update(update)
                        if isinstance(update, Concluded):
                            verdict = update
                            for url in args.notify:
                                notices.start_soon(_notify, url, update.verdict)
                            break
                tg.cancel_scope.cancel()
            if live is not None:
                live.stop()
                live = None
    finally:
        if live is not None:
            live.stop()
        if events is not None:
            events.close()
    if interrupted:
        status = follower.status()
        if args.json:  # the verdict object as it stands, for a script
            stood = replace(status.verdict, interrupted=True).to_json()
            stood["elapsed_seconds"] = round(follower.now(), 3)
            write_out(json.dumps(stood, ensure_ascii=False), out)
        print(f"watchdog: interrupted: {where(status, follower.now())} ({source})", file=sys.stderr)
        return EXIT_INTERRUPTED
    added: dict[str, Any] = {}
    said: list[str] = []
    if verdict is not None and on_verdict is not None:
        added, said = await on_verdict(verdict)
    # the source ended (it does not, for a file) without a verdict: where it stands
    result = follower.status().verdict if verdict is None else verdict.verdict
    if args.json:
        write_out(json.dumps({**result.to_json(), **added}, ensure_ascii=False), out)
    else:
        write_out("\n".join([render_verdict(result, source=source), *said]), out)
    if verdict is not None and verdict.timed_out:
        return EXIT_STALLED
    # the state judged: a log that never came is `pending` in the verdict, and stalled (2) past stall_after
    return exit_code(verdict.state if verdict is not None else result.state, result.phase)


def _follower(
    args: argparse.Namespace, spec: LaunchSpec, pool: Any, earlier: Baseline | None, *, offset: int = 0
) -> Follower:
    # one target: its follower; several: the nodes of one launch, each followed on its own (one clock), the
    # serving node's compared with the launch before (its arguments and phases are the launch's)
    numbered_after = earlier.incarnation if earlier else 0
    before = (earlier,) if earlier else ()
    if not getattr(args, "nodes", ()):
        return LaunchFollower(
            spec,
            pool=pool,
            numbered_after=numbered_after,
            earlier=before,
            offset=offset,
            command=getattr(args, "argv", ()),  # `watchdog launch`'s command line
        )
    from watchdog.cli.options import node_names  # noqa: PLC0415
    from watchdog.follow.nodes import Node, NodesFollower  # noqa: PLC0415

    targets = [args.target, *args.nodes]
    names = node_names(targets)
    serve = args.serve or names[0]
    clock = MonotonicClock()
    nodes = []
    for name, text in zip(names, targets, strict=True):
        target = parse_target(text)
        node_spec = replace(
            spec,
            name=f"{spec.name}@{name}",
            target=target,
            timeout=None,  # the launch's (`NodesFollower`)
            health_url=spec.health_url if name == serve else None,  # the serving node's endpoint
        )
        serves = name == serve
        follower = LaunchFollower(
            node_spec,
            pool=pool,
            clock=clock,
            numbered_after=numbered_after,
            earlier=before if serves else (),
        )
        nodes.append(Node(name, follower, host=target.host or "", serve=serves))
    return NodesFollower(spec.name, nodes, clock=clock, settle=spec.settle, timeout=spec.timeout)


async def _progress(follower: Follower, lines: _Lines) -> None:
    # plain output: where the launch is, now and then, so a CI log shows it
    while True:
        await anyio.sleep(1.0)
        lines.tick(follower.status(), follower.now())


async def _redraw(live: Live) -> None:
    while True:
        live.refresh()
        await anyio.sleep(1 / REFRESH_PER_SECOND)


async def _notify(url: str, verdict: Verdict) -> None:
    from watchdog.alerts.delivery import post_json  # noqa: PLC0415 - only when asked to notify

    try:
        await post_json(url, verdict.to_json())
    except DeliveryError as exc:
        print(f"watchdog: notification failed: {exc}", file=sys.stderr)
