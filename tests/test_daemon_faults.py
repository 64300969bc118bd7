"""The daemon under faults: a follower's failure classified by the exception tree, one outage per host, a
refusing host backed off, reloads in order, removed notifiers stopped, a locked state file, secrets redacted."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import sqlite3
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus
from http_client import Client
from http_receiver import Answer, Receiver, running_receiver
from sshd_server import SSHDServer, _write_key

from watchdog.alerts.notifiers import AlertKind
from watchdog.alerts.senders import ConsoleAlerts, ServiceNotifier
from watchdog.daemon import supervisor
from watchdog.daemon.http import serve_http
from watchdog.daemon.outages import RESTART_PAUSE, Host
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import SSHOptions, parse_target
from watchdog.follow.testing import ManualClock
from watchdog.store import StateStore, open_store
from watchdog.vocabulary import DEFAULT_DELIVERY_ATTEMPTS

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0
EVERY_KIND = frozenset(AlertKind)


def _hook(receiver: Receiver, name: str = "hook") -> ServiceNotifier:
    return ServiceNotifier(name=name, kind="webhook", urls=(receiver.url(),), on=EVERY_KIND, timeout=2.0)


def _local(name: str, path: Path, *alerts: Any) -> LaunchPlan:
    return LaunchPlan(LaunchSpec(name=name, target=parse_target(str(path))), alerts=tuple(alerts))


def _remote(name: str, sshd: SSHDServer, path: Path, options: SSHOptions, *alerts: Any) -> LaunchPlan:
    target = parse_target(f"ssh://{sshd.user}@127.0.0.1:{sshd.port}{path}")
    return LaunchPlan(LaunchSpec(name=name, target=target), host="gpu1", ssh=options, alerts=tuple(alerts))


def _options(sshd: SSHDServer, identity: Path) -> SSHOptions:
    return SSHOptions(known_hosts=str(sshd.known_hosts), identity=str(identity), config=None, use_agent=False)


def _states(statuses: list[dict[str, Any]]) -> dict[str, str]:
    return {s["name"]: s["state"] for s in statuses}


def _by_name(statuses: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in statuses}


async def _serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
    await serve_http(("127.0.0.1", 0), daemon.statuses, daemon.stats, task_status=task_status)


@pytest.mark.sshd
async def test_a_refused_key_is_one_outage_for_the_host_backed_off_and_resolved_by_a_reload(
    tmp_path: Path, sshd: SSHDServer
) -> None:
    """Five launches on a host that refuses our key: one `unreachable` alert for the host naming the five,
    one attempt per host per backoff (not one per launch every 5 s); a reload with the right key connects
    at once, and the outage gets one resolution."""
    wrong = tmp_path / "wrong_key"
    _write_key(wrong)
    names = [f"l{i}" for i in range(5)]
    for name in names:
        (tmp_path / f"{name}.log").write_bytes(b"")
    async with running_receiver() as receiver:
        hook = _hook(receiver)

        def plans(identity: Path) -> dict[str, LaunchPlan]:
            opts = _options(sshd, identity)
            return {n: _remote(n, sshd, tmp_path / f"{n}.log", opts, hook) for n in names}

        async def reload() -> dict[str, LaunchPlan]:
            return plans(sshd.client_key)

        clock = ManualClock(time.time())
        daemon = Daemon(plans(wrong), reload=reload, handle_signals=False, unreachable_after=0.5, clock=clock)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                runs = list(daemon._running.values())
                # each launch tried once at the start; then one attempt for the whole host per backoff
                await daemon.wait_until(lambda _: sum(run.failures for run in runs) >= 5)
                await clock.advance(RESTART_PAUSE)  # the outage said past its grace; the backoff's attempt
                await receiver.wait_for(1)
                await daemon.wait_until(lambda _: sum(run.failures for run in runs) >= 6)
                assert sorted(run.failures for run in runs) == [1, 1, 1, 1, 2]
                assert [g.json()["launch"] for g in receiver.delivered()] == ["host:gpu1"]
                assert all(s["note"].startswith("refused: ") for s in daemon.status_json())
                assert daemon._outages.host("gpu1").pause == 10.0
                await daemon.reload()  # the right key now: tried at once, not after the backoff
                got = await receiver.wait_for(2)
                assert not any("refused" in s.get("note", "") for s in daemon.status_json())
                tg.cancel_scope.cancel()
    outage, resolution = (g.json() for g in got)
    assert [outage["kind"], resolution["kind"]] == ["unreachable", "resolved"]
    assert outage["launch"] == resolution["launch"] == "host:gpu1"
    assert outage["host"] == "gpu1"
    assert "authentication" in outage["detail"]
    assert all(name in outage["detail"] for name in names)
    assert len(receiver.delivered()) == 2


@pytest.mark.sshd
async def test_a_remote_path_that_is_a_directory_is_the_launch_s_note_not_an_outage(
    tmp_path: Path, sshd: SSHDServer, ssh_options: SSHOptions
) -> None:
    """A remote log path that is a directory: the launch says so; the host answers, so no `unreachable`
    alert (the launch beside it on the same host gets its verdict)."""
    folder = tmp_path / "a-directory"
    folder.mkdir()
    fine = tmp_path / "fine.log"
    fine.write_bytes(READY.read_bytes())
    async with running_receiver() as receiver:
        hook = _hook(receiver)
        plans = {
            "dir": _remote("dir", sshd, folder, ssh_options, hook),
            "fine": _remote("fine", sshd, fine, ssh_options, hook),
        }
        clock = ManualClock(time.time())
        daemon = Daemon(plans, handle_signals=False, unreachable_after=0.2, clock=clock)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                statuses = await daemon.wait_until(
                    lambda s: (
                        "not a readable regular file" in _by_name(s)["dir"].get("note", "")
                        and _states(s)["fine"] == "ready"
                        and daemon._running["dir"].failures >= 1
                    )
                )
                # fine's ready confirmed, and dir's restart pause: past the grace and several checks of the
                # hosts, an outage would be said by now
                await clock.advance(RESTART_PAUSE)
                await receiver.wait_for(1)  # fine's ready
                await daemon.wait_until(lambda _: daemon._running["dir"].failures >= 2)
                tg.cancel_scope.cancel()
    kinds = [g.json()["kind"] for g in receiver.delivered()]
    assert kinds == ["ready"]
    assert "not a readable regular file" in _by_name(statuses)["dir"]["note"]


class _RaisingStore(StateStore):
    """A real state file whose history query raises what the test gives (a full disk, a bug)."""

    error: BaseException = sqlite3.OperationalError("database or disk is full")

    async def history(self, launch: str | None = None, limit: int = 50) -> list[Any]:
        raise self.error


@pytest.mark.sshd
@pytest.mark.parametrize(
    ("error", "note", "event"),
    [
        pytest.param(
            sqlite3.OperationalError("database or disk is full"),
            "state file problem: database or disk is full",
            "state file problem",
            id="full-disk",
        ),
        pytest.param(KeyError("phase"), "internal error: 'phase'", "internal error", id="bug"),
    ],
)
async def test_a_store_error_or_a_bug_is_no_outage(
    tmp_path: Path,
    sshd: SSHDServer,
    ssh_options: SSHOptions,
    error: BaseException,
    note: str,
    event: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A follower that fails on the state file (a full disk) or on a bug, for a launch on a host that
    answers: the launch's note says which, the daemon logs an error (a bug with its traceback), and the
    host is not said to be unreachable."""
    log = tmp_path / "server.log"
    log.write_bytes(READY.read_bytes())
    async with running_receiver() as receiver:
        store = await _RaisingStore.open(tmp_path / "state")
        try:
            store.error = error
            plans = {"l": _remote("l", sshd, log, ssh_options, _hook(receiver))}
            clock = ManualClock(time.time())
            daemon = Daemon(plans, store=store, handle_signals=False, unreachable_after=0.1, clock=clock)
            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as tg:
                    await tg.start(daemon.run)
                    await daemon.wait_until(lambda _: daemon._running["l"].failures >= 1)
                    await clock.advance(RESTART_PAUSE)  # past the grace and several checks of the hosts
                    statuses = await daemon.wait_until(lambda _: daemon._running["l"].failures >= 2)
                    assert statuses[0]["note"].startswith(note)
                    tg.cancel_scope.cancel()
        finally:
            await store.close()
    said = capsys.readouterr().out
    assert event in said
    assert "host unreachable" not in said
    assert receiver.got == []
    if event == "internal error":
        assert "Traceback" in said
        assert "KeyError" in said


async def test_two_quick_reloads_apply_in_order_without_duplicate_followers(tmp_path: Path) -> None:
    """Two SIGHUPs back to back with a config read that yields: the reloads run one after the other, the
    newest config wins, and each launch has one follower task."""
    alerts = ConsoleAlerts(out=io.StringIO())
    keep = _local("keep", tmp_path / "keep.log", alerts)
    version = {"now": 0}
    inside = {"now": 0, "most": 0}
    asked_twice = anyio.Event()

    async def reload() -> dict[str, LaunchPlan]:
        wanted = version["now"]
        inside["now"] += 1
        inside["most"] = max(inside["most"], inside["now"])
        if wanted == 1:  # the first config read is slow: the second SIGHUP comes, and its reload may run
            await asked_twice.wait()
            await anyio.wait_all_tasks_blocked()
        inside["now"] -= 1
        name = f"v{wanted}"
        return {"keep": keep, name: _local(name, tmp_path / f"{name}.log", alerts)}

    daemon = Daemon({"keep": keep}, reload=reload, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            before = daemon._running["keep"].follower
            async with anyio.create_task_group() as hups:
                version["now"] = 1
                hups.start_soon(daemon.reload)
                await anyio.wait_all_tasks_blocked()
                version["now"] = 2
                hups.start_soon(daemon.reload)
                asked_twice.set()
            assert sorted(daemon._running) == ["keep", "v2"]
            assert daemon._running["keep"].follower is before
            await anyio.wait_all_tasks_blocked()
            launches = [t for t in asyncio.all_tasks() if t.get_name().endswith("Daemon._launch")]
            assert len(launches) == 2, [t.get_name() for t in asyncio.all_tasks()]
            tg.cancel_scope.cancel()
    assert inside["most"] == 1


async def test_a_notifier_removed_by_a_reload_stops_delivering(tmp_path: Path) -> None:
    """A webhook that failed a crash alert (queued for a retry) and is then removed from the config: the
    retry never reaches it, its queue is dropped, and the console notifier still hears what follows."""
    log = tmp_path / "qwen.log"
    console_out = tmp_path / "console.txt"
    async with running_receiver() as receiver:
        receiver.script = [Answer(status=503)] * DEFAULT_DELIVERY_ATTEMPTS  # one delivery's own retries
        with console_out.open("w") as out:
            console = ConsoleAlerts(out=out)
            hook = _hook(receiver)

            async def reload() -> dict[str, LaunchPlan]:
                return {"qwen": _local("qwen", log, console)}

            daemon = Daemon({"qwen": _local("qwen", log, hook, console)}, reload=reload, handle_signals=False)
            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as tg:
                    await tg.start(daemon.run)
                    log.write_bytes(CRASH.read_bytes())
                    alerting = daemon._alerting
                    assert alerting is not None
                    # refused (503): queued again for a retry in ~2 s
                    await daemon.wait_until(
                        lambda _: len(receiver.got) == DEFAULT_DELIVERY_ATTEMPTS and alerting.depth() == 1
                    )
                    await daemon.reload()
                    assert alerting.depth() == 0
                    # a retry would come within 2.5 s (RETRY_BASE_SECONDS and its jitter): wait past it
                    with anyio.move_on_after(4.0):
                        await receiver.wait_until(lambda _: len(receiver.got) > DEFAULT_DELIVERY_ATTEMPTS)
                    tg.cancel_scope.cancel()
    assert [g.status for g in receiver.got] == [503] * DEFAULT_DELIVERY_ATTEMPTS
    assert "qwen: crashed" in console_out.read_text()


async def test_a_locked_state_file_does_not_hold_up_the_reading(tmp_path: Path) -> None:
    """Another process holds the state file's write lock (BEGIN EXCLUSIVE): the launch is still read, its
    crash then a new start seen on /status at once; the alerts go out once the lock is freed."""
    log = tmp_path / "qwen.log"
    console_out = tmp_path / "console.txt"
    async with open_store(tmp_path / "state") as store:
        with console_out.open("w") as out:
            daemon = Daemon(
                {"qwen": _local("qwen", log, ConsoleAlerts(out=out))},
                store=store,
                serve=_serve,
                handle_signals=False,
            )
            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as tg:
                    await tg.start(daemon.run)
                    locker = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
                    locker.execute("BEGIN EXCLUSIVE")
                    try:
                        log.write_bytes(CRASH.read_bytes())
                        await daemon.wait_until(lambda s: s[0]["state"] == "crashed")
                        run = daemon._running["qwen"]
                        # the verdict (to be stored: the write waits for the lock) reached the daemon
                        await daemon.wait_until(lambda _: run.follower is not None and run.follower.concluded)
                        with log.open("ab") as f:  # a new start, in the same file, that crashes again
                            f.write(CRASH.read_bytes())
                        with anyio.fail_after(5.0):  # well under the store's busy timeout (10 s)
                            await daemon.wait_until(lambda s: s[0].get("incarnation") == 2)
                            async with Client() as client:
                                status = (await client.get(f"http://127.0.0.1:{daemon.port}/status")).json()
                        assert status[0]["incarnation"] == 2
                    finally:
                        locker.rollback()
                        locker.close()
                    # the first crash, its end by the new start, the new start, its crash
                    await daemon.wait_until(lambda _: daemon.alerts_sent["console"] >= 4)
                    tg.cancel_scope.cancel()
    said = console_out.read_text()
    assert said.count("qwen: crashed during") == 2  # each incarnation's crash, once
    assert said.count("qwen: crashed resolved") == 1
    assert daemon._running["qwen"].failures == 0


SECRETS = ("sk-abc123def456ghi789jkl012", "hf_AbCdEfGhIjKlMnOpQrStUvWx", "hunter2hunter2")


async def test_secrets_in_a_crash_reach_no_sink(tmp_path: Path) -> None:
    """A crash whose root-cause line carries `--api-key sk-...`, `HF_TOKEN=hf_...` and `password=...`: the
    webhook's payload, the state file's bytes and /status hold none of them (redacted once, at the source)."""
    leak = f" (launched with --api-key {SECRETS[0]} HF_TOKEN={SECRETS[1]} password={SECRETS[2]})"
    crash = b"".join(
        line.rstrip(b"\n") + leak.encode() + b"\n" if b"CUDA error: operation not permitted" in line else line
        for line in CRASH.read_bytes().splitlines(keepends=True)
    )
    log = tmp_path / "qwen.log"
    state = tmp_path / "state"
    async with running_receiver() as receiver:
        async with open_store(state) as store:
            daemon = Daemon(
                {"qwen": _local("qwen", log, _hook(receiver))},
                store=store,
                serve=_serve,
                handle_signals=False,
            )
            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as tg:
                    await tg.start(daemon.run)
                    log.write_bytes(crash)
                    got = await receiver.wait_for(1)
                    async with Client() as client:
                        status = (await client.get(f"http://127.0.0.1:{daemon.port}/status")).text
                    tg.cancel_scope.cancel()
        with sqlite3.connect(state / "watchdog.sqlite3") as conn:
            stored = "\n".join(conn.iterdump()).encode()  # every row: verdicts, transitions, outbox
            (checkpoints,) = conn.execute("SELECT count(*) FROM checkpoints").fetchone()
    # ... and the state file's bytes as they are on disk (the follower's checkpoint, pages freed, the log ahead)
    on_disk = b"".join(
        path.read_bytes() for path in state.iterdir() if path.name.startswith("watchdog.sqlite3")
    )
    payload = got[0].body.decode()
    assert "CUDA error" in payload
    assert "<redacted>" in payload
    assert b"CUDA error" in stored
    assert checkpoints == 1  # the follower's analysis was saved, lines and all
    for secret in SECRETS:
        assert secret not in payload
        assert secret.encode() not in stored
        assert secret.encode() not in on_disk
        assert secret not in status


class _CountingStore(StateStore):
    """A real state file that counts its history queries."""

    asked: list[str | None]

    async def history(self, launch: str | None = None, limit: int = 50) -> list[Any]:
        self.asked.append(launch)
        return await super().history(launch, limit)


async def test_a_cold_start_asks_the_history_of_every_launch_at_once(tmp_path: Path) -> None:
    """Twenty launches starting together: their past incarnations come in one query (not one per launch),
    and each still learns from its own past (a launch's usual phase lengths)."""
    store = await _CountingStore.open(tmp_path / "state")
    store.asked = []
    try:
        ready = tmp_path / "l7.log"
        ready.write_bytes(READY.read_bytes() * 3)  # three starts, each ready
        plans = {f"l{i}": _local(f"l{i}", tmp_path / f"l{i}.log") for i in range(20)}
        first = Daemon({"l7": plans["l7"]}, store=store, handle_signals=False)
        with anyio.fail_after(DEADLINE):  # l7 has a past: three ready starts
            async with anyio.create_task_group() as tg:
                await tg.start(first.run)
                await first.wait_until(lambda s: s[0]["state"] == "ready" and s[0]["incarnation"] == 3)
                await store.flush()
                tg.cancel_scope.cancel()
        store.asked.clear()
        daemon = Daemon(plans, store=store, handle_signals=False)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                assert store.asked == [None]
                assert daemon._running["l7"].typical
                assert not daemon._running["l3"].typical
                tg.cancel_scope.cancel()
    finally:
        await store.close()


def _hold_reload_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a reload's build (a user profile's tables, in a thread) last until a host refuses a launch again,
    or a second: a launch of the old plans that could take the reload's fresh turn meanwhile does."""
    refused_again = threading.Event()
    refused = Host.refused

    def noted(host: Host, error: str, *, tried: bool) -> None:
        refused(host, error, tried=tried)
        refused_again.set()

    def held_build(paths: object) -> None:
        refused_again.clear()
        refused_again.wait(timeout=1.0)

    monkeypatch.setattr(Host, "refused", noted)
    monkeypatch.setattr(supervisor, "make_ahead", held_build)


@pytest.mark.sshd
@pytest.mark.parametrize("held_build", [False, True], ids=["reload", "reload-held"])
async def test_an_ssh_config_that_cannot_be_parsed_is_a_permanent_refusal_of_its_host(
    tmp_path: Path, sshd: SSHDServer, monkeypatch: pytest.MonkeyPatch, held_build: bool
) -> None:
    """An SSH config asyncssh cannot parse (an `SSHConfigError`, a `PermanentError`): the host's launches wait
    its backoff as for a refused key (one attempt per host per backoff), and the host's outage is said once,
    naming the config's problem; a reload with a config that parses connects at once and resolves it. The
    reload's fresh turn is the new plans': a launch of the old plans still waiting while the reload builds
    (`held_build`) does not take it with its old config, whose refusal would arm the backoff again for the new
    plans (a loaded CI run saw it)."""
    if held_build:
        _hold_reload_build(monkeypatch)
    bad = tmp_path / "ssh_config"
    bad.write_text("Host *\n    Port not-a-number\n")
    good = tmp_path / "ssh_config_ok"
    good.write_text("Host *\n    ServerAliveInterval 15\n")
    names = ["a", "b", "c"]
    for name in names:
        (tmp_path / f"{name}.log").write_bytes(b"")
    async with running_receiver() as receiver:
        hook = _hook(receiver)

        def plans(config: Path) -> dict[str, LaunchPlan]:
            opts = dataclasses.replace(_options(sshd, sshd.client_key), config=(str(config),))
            return {n: _remote(n, sshd, tmp_path / f"{n}.log", opts, hook) for n in names}

        async def reload() -> dict[str, LaunchPlan]:
            return plans(good)

        clock = ManualClock(time.time())
        daemon = Daemon(plans(bad), reload=reload, handle_signals=False, unreachable_after=0.3, clock=clock)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                runs = list(daemon._running.values())
                await daemon.wait_until(lambda _: sum(run.failures for run in runs) >= len(names))
                await clock.advance(RESTART_PAUSE)  # the outage said past its grace; the backoff's attempt
                await receiver.wait_for(1)
                await daemon.wait_until(lambda _: sum(run.failures for run in runs) >= len(names) + 1)
                # one attempt for the host per backoff
                assert sorted(run.failures for run in runs) == [1, 1, 2]
                assert all(s["note"].startswith("refused: ") for s in daemon.status_json())
                assert daemon._outages.host("gpu1").refusing
                await daemon.reload()
                got = await receiver.wait_for(2)  # no clock advanced: the new plans waited no backoff
                tg.cancel_scope.cancel()
    assert sum(run.failures for run in runs) == len(names) + 1  # no old launch tried in the reload
    outage, resolution = (g.json() for g in got)
    assert [outage["kind"], resolution["kind"]] == ["unreachable", "resolved"]
    assert outage["launch"] == "host:gpu1"
    assert "the SSH config" in outage["detail"]
    assert "Port" in outage["detail"]
    assert all(name in outage["detail"] for name in names)
    assert resolution["incident_key"] == outage["dedup_key"]


async def test_a_black_holed_host_s_outage_counts_from_when_the_failed_attempt_began(
    tmp_path: Path, black_hole: int
) -> None:
    """A host whose SYNs are dropped is known to be down only when the connect timeout ends: its outage (the
    alert's `started_at`, the key's `@start`) counts from when that attempt began, a connect timeout earlier,
    so the alert comes `unreachable_after` past the start, not `connect_timeout + unreachable_after`."""
    timeout, grace = 3.0, 1.0
    (tmp_path / "known_hosts").write_text("")
    options = SSHOptions(
        known_hosts=str(tmp_path / "known_hosts"), config=None, use_agent=False, connect_timeout=timeout
    )
    target = parse_target(f"ssh://nobody@127.0.0.1:{black_hole}/srv/server.log")
    async with running_receiver() as receiver:
        plan = LaunchPlan(
            LaunchSpec(name="far", target=target), host="gpu1", ssh=options, alerts=(_hook(receiver),)
        )
        daemon = Daemon({"far": plan}, handle_signals=False, unreachable_after=grace)
        noted: list[float] = []

        async def note_failure() -> None:  # when the daemon hears that the first attempt failed
            await daemon.wait_until(lambda s: any("no TCP connection" in x.get("note", "") for x in s))
            noted.append(time.time())

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                began = time.time()
                tg.start_soon(note_failure)
                await tg.start(daemon.run)
                got = await receiver.wait_for(1)
                tg.cancel_scope.cancel()
    alert = got[0].json()
    assert alert["kind"] == "unreachable"
    started = datetime.fromisoformat(alert["started_at"]).timestamp()
    assert noted[0] - began >= timeout - 0.5  # the attempt took its timeout
    # the outage began when the attempt did, a connect timeout before its failure was heard of
    assert began - 0.5 <= started <= noted[0] - (timeout - 1.0)
    assert alert["dedup_key"] == f"host:gpu1/unreachable@{int(started)}"


@pytest.mark.sshd
async def test_two_outages_of_one_host_each_have_their_key_and_their_resolution(
    tmp_path: Path, sshd: SSHDServer
) -> None:
    """A host down (our key refused), up (a reload with the right key), down again, up again: a webhook gets
    two outages with distinct dedup keys `host:gpu1/unreachable@<start>`, each resolution carrying its own
    outage's key; PagerDuty two incidents, each resolved by its trigger's dedup_key."""
    wrong = tmp_path / "wrong_key"
    _write_key(wrong)
    log = tmp_path / "l.log"
    log.write_bytes(b"")
    identity = {"key": wrong}
    async with running_receiver() as receiver:
        hook = ServiceNotifier(
            name="hook", kind="webhook", urls=(receiver.url("/hook"),), on=EVERY_KIND, timeout=2.0
        )
        pd = ServiceNotifier(
            name="pd",
            kind="pagerduty",
            urls=(receiver.url("/pd"),),
            options={"routing_key": "k"},
            timeout=2.0,
        )

        def plans() -> dict[str, LaunchPlan]:
            return {"l": _remote("l", sshd, log, _options(sshd, identity["key"]), hook, pd)}

        async def reload() -> dict[str, LaunchPlan]:
            return plans()

        def at(path: str) -> list[Any]:
            return [g.json() for g in receiver.delivered() if g.path.startswith(path)]

        # a grace of 1 s: the second outage begins at least a second after the first (its key's @start differs)
        clock = ManualClock(time.time())
        daemon = Daemon(plans(), reload=reload, handle_signals=False, unreachable_after=1.0, clock=clock)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                for n, key in enumerate([sshd.client_key, wrong, sshd.client_key, None], start=1):
                    if n % 2:  # refused: its outage is said past the grace and a check of the hosts
                        await daemon.wait_until(lambda _: daemon._running["l"].failures >= 1)
                        await clock.advance(2.0)
                    await receiver.wait_until(lambda _, n=n: len(at("/hook")) == n and len(at("/pd")) == n)
                    if key is not None:
                        identity["key"] = key
                        await daemon.reload()
                tg.cancel_scope.cancel()
    hooks = at("/hook")
    assert [h["kind"] for h in hooks] == ["unreachable", "resolved"] * 2
    first, second = hooks[0], hooks[2]
    for outage in (first, second):
        start = int(datetime.fromisoformat(outage["started_at"]).timestamp())
        assert outage["dedup_key"] == outage["incident_key"] == f"host:gpu1/unreachable@{start}"
    assert first["dedup_key"] != second["dedup_key"]
    for outage, resolution in zip(hooks[::2], hooks[1::2], strict=True):
        assert resolution["incident_key"] == outage["dedup_key"]
        assert resolution["dedup_key"] == f"{outage['dedup_key']}/resolved"
    events = at("/pd")
    assert [e["event_action"] for e in events] == ["trigger", "resolve"] * 2
    assert [e["dedup_key"] for e in events] == [first["dedup_key"]] * 2 + [second["dedup_key"]] * 2
