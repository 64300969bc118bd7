"""The daemon: follows many launches at once, keeps following after each verdict, and serves what it sees.

One `Daemon` runs one `LaunchFollower` per planned launch, each in its own cancel scope (one launch's failure
never disturbs another: a follower that fails is started again after a pause), one SSH pool per host shared
by that host's launches, the HTTP server (/metrics, /status, /healthz, the status page) and, under systemd,
the notify protocol (READY=1 once the port is bound and the launches started, WATCHDOG=1 from the event loop,
STATUS=, STOPPING=1). SIGHUP reloads the plan (added launches start, removed ones stop, changed ones restart,
unchanged ones are not touched); SIGTERM or SIGINT stops gracefully, a second one at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from watchdog.exceptions import DeliveryError, WatchdogError, first_watchdog_error
from watchdog.expectations import eta_to_ready, learned_deadlines, typical_durations
from watchdog.launch import Concluded, LaunchFollower, LaunchSpec, SourceNoted, Transitioned
from watchdog.lifecycle import State
from watchdog.metrics import DaemonStats
from watchdog.probes.gpusampler import HostGpuSampler
from watchdog.profile import preload_profiles
from watchdog.render import format_duration
from watchdog.sdnotify import Notifier as SystemdNotifier
from watchdog.sdnotify import watchdog_interval
from watchdog.sources import SSHOptions, SSHPool

if TYPE_CHECKING:
    from watchdog.store import StateStore

__all__ = ["ConsoleAlerts", "Daemon", "LaunchPlan", "WebhookAlerts"]

log = structlog.get_logger("watchdog.daemon")

RESTART_PAUSE = 5.0  # seconds before a follower that failed is started again
_EXIT_AT_ONCE = 130  # as after Ctrl-C
HISTORY_SAMPLES = 50  # past incarnations a launch's expectations are learned from
_ALERT_STATES = frozenset({State.CRASHED, State.STALLED, State.READY})


class Alerts(Protocol):
    """Somewhere a verdict is said: the console, a webhook (issue 9 adds the chat services)."""

    name: str

    async def send(self, status: dict[str, Any]) -> None:
        """Say this launch's verdict (a status snapshot: name, host, state, phase, error, ...)."""


@dataclass
class ConsoleAlerts:
    """Verdicts as one line each on a text stream."""

    name: str = "console"
    out: TextIO = field(default_factory=lambda: sys.stdout)

    async def send(self, status: dict[str, Any]) -> None:
        """Print the verdict."""
        self.out.write(alert_line(status) + "\n")
        self.out.flush()


@dataclass
class WebhookAlerts:
    """Verdicts as the JSON verdict object posted to a URL (retried; the URL never appears in messages)."""

    name: str
    url: str

    async def send(self, status: dict[str, Any]) -> None:
        """Post the verdict."""
        from watchdog.notify import post_json  # noqa: PLC0415 - httpx only when a webhook is configured

        await post_json(self.url, status)


def alert_line(status: dict[str, Any]) -> str:
    """One line an operator reads: who, what, why and what to do."""
    where = f"{status['name']}" + (f" on {status['host']}" if status.get("host") else "")
    state, phase = status["state"], status["phase"]
    progress = ", ".join(
        f"{name} {bar['done']}/{bar['total']}"
        for name, bar in (status.get("progress") or {}).items()
        if isinstance(bar, dict) and bar.get("total")
    )
    if state == State.CRASHED.value:
        err = status.get("error") or {}
        ranks = err.get("ranks") or []
        if ranks and all(_RANK.match(r) for r in ranks):
            on = f" on ranks {', '.join(ranks)}"
        else:
            on = f" in {', '.join(ranks)}" if ranks else ""
        line = f"{where}: crashed during {phase}{on}: {err.get('summary', '')}"
        return line + (f"; hint: {err['hint']}" if err.get("hint") else "")
    if state == State.STALLED.value:
        return f"{where}: stalled in {phase}" + (f" at {progress}" if progress else "") + ": no progress"
    if state == State.READY.value:
        took = status.get("time_to_ready_seconds")
        return f"{where}: ready" + (f" after {format_duration(float(took))}" if took is not None else "")
    return f"{where}: {state} (phase {phase})"


_RANK = re.compile(r"^(?:(?:[A-Z]{2,4}\d+ ?)+|rank\d+)$")


@dataclass(frozen=True)
class LaunchPlan:
    """One launch as the daemon runs it: its spec, where it is, and who hears of its verdicts."""

    spec: LaunchSpec
    host: str = ""  # the configured host's name; "" for a file on this machine
    ssh: SSHOptions | None = None  # how to reach the host (one pool per host name)
    labels: Mapping[str, str] = field(default_factory=dict)
    alerts: tuple[Alerts, ...] = ()


@dataclass
class _Running:
    plan: LaunchPlan
    scope: anyio.CancelScope
    follower: LaunchFollower | None = None
    since: str = ""
    announced: set[tuple[int, str]] = field(default_factory=set)
    typical: dict[str, float] = field(default_factory=dict)  # usual phase durations, from the history
    failures: int = 0
    note: str = ""


class Daemon:
    """Runs the planned launches until cancelled or signalled; see the module docstring."""

    def __init__(
        self,
        plans: Mapping[str, LaunchPlan],
        *,
        reload: Callable[[], Awaitable[Mapping[str, LaunchPlan]]] | None = None,
        serve: Callable[..., Coroutine[Any, Any, None]] | None = None,
        store: StateStore | None = None,
        handle_signals: bool = True,
    ) -> None:
        """`plans` by launch name; `reload` gives the new plans on SIGHUP; `serve(daemon, task_status=)`
        runs the HTTP server (it calls `task_status.started(port)` once bound). With a `store`, transitions
        and verdicts are kept, and a verdict is announced once, across restarts: a restarted daemon reads each
        log again from its start and announces only what it had not announced (what happened while it was
        down included)."""
        self._plans = dict(plans)
        self._reload = reload
        self._serve = serve
        self._store = store
        self._handle_signals = handle_signals
        self._running: dict[str, _Running] = {}
        self._pools: dict[str, SSHPool] = {}
        self._samplers: dict[str, HostGpuSampler] = {}  # by host name ("" for this machine)
        self._systemd = SystemdNotifier()
        self._tg: TaskGroup | None = None
        self.crashes: Counter[tuple[str, str, str]] = Counter()  # (launch, host, category)
        self.alerts_sent: Counter[str] = Counter()
        self.alerts_failed: Counter[str] = Counter()
        self.started = anyio.Event()  # the port is bound and every launch has read its log as it was
        self.port: int | None = None  # the HTTP server's port, once bound
        self._changed = anyio.Event()  # set (and replaced) whenever a launch's status changed
        self.stopping = False

    # -- what the HTTP server and the metrics read -------------------------------------------------------

    def statuses(self) -> list[dict[str, Any]]:
        """A snapshot of every launch: its verdict object plus name, host, since, labels."""
        out = []
        for name, run in sorted(self._running.items()):
            if run.follower is None:
                status: dict[str, Any] = {"name": name, "state": State.PENDING.value, "phase": "pending"}
            else:
                status = run.follower.status()
                entered = status.get("entered") or [0.0]
                eta = eta_to_ready(status, run.typical, status["elapsed_seconds"] - entered[-1])
                status["eta_seconds"] = round(eta, 1) if eta is not None else None
            status.update(host=run.plan.host, since=run.since, labels=dict(run.plan.labels))
            if run.note:
                status["note"] = run.note
            out.append(status)
        return out

    def stats(self) -> DaemonStats:
        """The daemon's own counters, for /metrics."""
        return DaemonStats(
            crashes=dict(self.crashes),
            ssh_connected={host: pool.connected for host, pool in self._pools.items()},
            ssh_reconnects=self._restarts_by_host(),
            alerts_sent=dict(self.alerts_sent),
            alerts_failed=dict(self.alerts_failed),
        )

    def _restarts_by_host(self) -> dict[str, int]:
        # a remote follower fails when its host cannot be reached: each restart is a reconnection
        out: Counter[str] = Counter()
        for run in self._running.values():
            if run.plan.host:
                out[run.plan.host] += run.failures
        return dict(out)

    async def wait_until(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        """Wait until `predicate(self.statuses())` holds (checked after every change); return the statuses."""
        while True:
            changed = self._changed
            statuses = self.statuses()
            if predicate(statuses):
                return statuses
            await changed.wait()

    def _change(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def summary(self) -> str:
        """One line: how many launches are in which state (systemd's STATUS=)."""
        counts = Counter(s["state"] for s in self.statuses())
        parts = [f"{n} {state}" for state, n in sorted(counts.items())]
        return f"{len(self._running)} launches: " + (", ".join(parts) if parts else "none")

    # -- running ----------------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve and follow until cancelled (or SIGTERM/SIGINT when signals are handled)."""
        try:
            async with contextlib.AsyncExitStack() as stack, anyio.create_task_group() as tg:
                self._tg = tg
                stack.push_async_callback(self._close_pools)
                if self._handle_signals:
                    await tg.start(self._signals)
                # every bundled profile read and compiled (a TOML file and many regexes each) off the event
                # loop, before the followers need them for the first engine detection
                await anyio.to_thread.run_sync(preload_profiles)
                if self._serve is not None:
                    self.port = await tg.start(self._serve, self)
                await self._apply(self._plans)
                self.started.set()
                self._systemd.notify("READY=1", f"STATUS={self.summary()}")
                task_status.started()
                interval = watchdog_interval()
                if interval is not None:
                    tg.start_soon(self._keepalive, interval)
        finally:
            self._systemd.notify("STOPPING=1")
            self._systemd.close()

    async def stop(self) -> None:
        """Stop every launch and the server (graceful: followers and connections close)."""
        self.stopping = True
        self._systemd.notify("STOPPING=1")
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    async def reload(self) -> None:
        """Take the new plans: start added launches, stop removed ones, restart changed ones."""
        if self._reload is None:
            return
        try:
            plans = await self._reload()
        except WatchdogError as exc:
            log.error("reload refused; the running configuration stays", error=str(exc))
            return
        await self._apply(plans)
        log.info("reloaded", launches=len(plans))
        self._systemd.notify(f"STATUS={self.summary()}")

    async def _apply(self, plans: Mapping[str, LaunchPlan]) -> None:
        assert self._tg is not None
        for name in list(self._running):
            if name not in plans or plans[name] != self._running[name].plan:
                self._running.pop(name).scope.cancel()
        self._plans = dict(plans)
        starting = []
        for name, plan in plans.items():
            if name not in self._running:
                run = _Running(plan, anyio.CancelScope())
                self._running[name] = run
                starting.append(run)
        async with anyio.create_task_group() as first_reads:
            for run in starting:
                first_reads.start_soon(self._start_one, run)
        self._change()

    async def _start_one(self, run: _Running) -> None:
        # returns once the launch's follower has read the log as it was (or failed to start)
        assert self._tg is not None
        await self._tg.start(self._launch, run)  # `_launch` reports started even when its follower fails

    async def _launch(self, run: _Running, *, task_status: TaskStatus[None]) -> None:
        plan = run.plan
        started = False
        with run.scope:
            while True:
                try:
                    spec = await self._learned(run)
                    follower = LaunchFollower(spec, pool=self._pool(plan), gpu_sampler=self._sampler(plan))
                    run.follower = follower
                    run.since = _now_iso()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._consume, run, follower)
                        await tg.start(follower.run)
                        if not started:
                            started = True
                            task_status.started()
                    run.note = "the log's source ended; following it again"
                except Exception as exc:  # one launch's failure never disturbs another
                    run.failures += 1
                    run.note = f"follower failed: {_reason(exc)}; trying again in {RESTART_PAUSE:g}s"
                    log.warning("launch follower failed", launch=plan.spec.name, error=_reason(exc))
                if not started:
                    started = True
                    task_status.started()
                await anyio.sleep(RESTART_PAUSE)

    async def _learned(self, run: _Running) -> LaunchSpec:
        # the launch's own history: its usual phase lengths (for the ETA) and the deadlines they imply
        spec = run.plan.spec
        if self._store is None:
            return spec
        records = [
            {"state": r.state, "phase_durations": r.phase_durations}
            for r in await self._store.history(spec.name, limit=HISTORY_SAMPLES)
        ]
        run.typical = typical_durations(records)
        deadlines = learned_deadlines(records, dict(spec.deadlines))
        return dataclasses.replace(spec, deadlines=tuple(sorted(deadlines.items())))

    async def _consume(self, run: _Running, follower: LaunchFollower) -> None:
        name = run.plan.spec.name
        with follower.updates:
            async for update in follower.updates:
                self._change()
                if isinstance(update, Transitioned):
                    t = update.transition
                    run.note = ""  # the log is being read: what the source said before is over
                    log.info("transition", launch=name, state=t.state.value, line=t.line, reason=t.reason)
                    if self._store is not None:
                        status = {**follower.status(), "host": run.plan.host, "labels": dict(run.plan.labels)}
                        await self._store.record_transition(name, t.incarnation, status)
                elif isinstance(update, SourceNoted):
                    run.note = update.detail
                    log.info("source", launch=name, kind=update.kind, detail=update.detail)
                elif isinstance(update, Concluded):
                    await self._conclude(run, update)

    async def _conclude(self, run: _Running, update: Concluded) -> None:
        name, verdict = run.plan.spec.name, update.verdict
        incarnation = int(verdict.get("incarnation", 1))
        key = (incarnation, update.state.value)
        if key in run.announced:
            return
        run.announced.add(key)
        if update.state == State.CRASHED:
            category = (verdict.get("error") or {}).get("category") or "other"
            self.crashes[(name, run.plan.host, category)] += 1
        stored_key = None
        if self._store is not None:
            stored_key = await self._store.save_verdict(name, incarnation, verdict)
            if await self._store.was_announced(name, incarnation, stored_key):
                log.info("already announced", launch=name, state=update.state.value, incarnation=incarnation)
                return  # before a restart
        if update.state not in _ALERT_STATES:
            return
        status = {**verdict, "name": name, "host": run.plan.host, "since": run.since}
        assert self._tg is not None
        # a slow receiver never slows the follower
        self._tg.start_soon(self._announce, run, status, incarnation, stored_key)

    async def _announce(
        self, run: _Running, status: dict[str, Any], incarnation: int, stored_key: str | None
    ) -> None:
        async with anyio.create_task_group() as tg:
            for alerts in run.plan.alerts:
                tg.start_soon(self._send, alerts, status)
        if self._store is not None and stored_key is not None:
            await self._store.mark_announced(run.plan.spec.name, incarnation, stored_key)
        log.info("announced", launch=run.plan.spec.name, state=status["state"], incarnation=incarnation)
        self._change()

    async def _send(self, alerts: Alerts, status: dict[str, Any]) -> None:
        try:
            await alerts.send(status)
        except DeliveryError as exc:
            self.alerts_failed[alerts.name] += 1
            log.warning("alert not delivered", notifier=alerts.name, error=str(exc))
        else:
            self.alerts_sent[alerts.name] += 1
        self._change()

    def _pool(self, plan: LaunchPlan) -> SSHPool | None:
        if not plan.host:
            return None
        pool = self._pools.get(plan.host)
        if pool is None:
            pool = self._pools[plan.host] = SSHPool(plan.ssh)
        return pool

    def _sampler(self, plan: LaunchPlan) -> HostGpuSampler | None:
        # one per host, shared by its launches: each is charged with its own processes' GPU memory only
        if not plan.spec.gpu:
            return None
        sampler = self._samplers.get(plan.host)
        if sampler is None:
            target = plan.spec.target
            sampler = self._samplers[plan.host] = HostGpuSampler(
                pool=self._pool(plan),
                host=target.host,
                port=target.port,
                user=target.user,
                interval=plan.spec.gpu_interval,
            )
        return sampler

    async def _close_pools(self) -> None:
        with anyio.CancelScope(shield=True):
            for pool in self._pools.values():
                await pool.aclose()

    async def _keepalive(self, interval: float) -> None:
        while True:
            self._systemd.notify("WATCHDOG=1", f"STATUS={self.summary()}")
            await anyio.sleep(interval)

    async def _signals(self, *, task_status: TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM, signal.SIGINT) as received:
            task_status.started()
            async for signum in received:
                if signum == signal.SIGHUP:
                    assert self._tg is not None
                    self._tg.start_soon(self.reload)
                elif self.stopping:
                    log.warning("stopping at once", signal=signal.Signals(signum).name)
                    os._exit(_EXIT_AT_ONCE)  # the second SIGTERM/SIGINT: no more waiting on anything
                else:
                    log.info("stopping", signal=signal.Signals(signum).name)
                    await self.stop()


def _reason(exc: BaseException) -> str:
    # what went wrong, not "unhandled errors in a TaskGroup": our own error first, else the first leaf
    if isinstance(exc, BaseExceptionGroup):
        ours = first_watchdog_error(exc)
        if ours is not None:
            return str(ours)
        return _reason(exc.exceptions[0])
    return str(exc) or type(exc).__name__


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def monotonic() -> float:
    """Seconds on the monotonic clock."""
    return time.monotonic()
