"""The daemon: many launches at once over real files and a real HTTP server, alerts once, reload, the demo."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus
from conftest import unavailable
from daemon_process import DaemonProcess
from http_client import Client, get
from prometheus_client.parser import text_string_to_metric_families

from watchdog.daemon.http import serve_http
from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.store import open_store

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0
LONG_DEADLINE = 90.0  # a test that waits on retries and reconnections (slow on a loaded machine)


def _plan(name: str, path: Path, alerts: ConsoleAlerts) -> LaunchPlan:
    return LaunchPlan(LaunchSpec(name=name, target=parse_target(str(path))), alerts=(alerts,))


async def _serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
    await serve_http(("127.0.0.1", 0), daemon.statuses, daemon.stats, task_status=task_status)


def _states(statuses: list[dict[str, Any]]) -> dict[str, str]:
    return {s["name"]: s["state"] for s in statuses}


async def test_launches_get_their_verdicts_served_and_alerted_once(tmp_path: Path) -> None:
    """Two launches written while followed: each gets its verdict on /status and /metrics, and the crash
    is alerted exactly once, with its root cause."""
    out = io.StringIO()
    alerts = ConsoleAlerts(out=out)
    paths = {"crash": tmp_path / "crash.log", "ready": tmp_path / "ready.log"}
    daemon = Daemon(
        {name: _plan(name, path, alerts) for name, path in paths.items()}, serve=_serve, handle_signals=False
    )
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            assert daemon.started.is_set()
            paths["crash"].write_bytes(CRASH.read_bytes())
            paths["ready"].write_bytes(READY.read_bytes())
            await daemon.wait_until(lambda s: _states(s) == {"crash": "crashed", "ready": "ready"})
            await daemon.wait_until(lambda s: daemon.alerts_sent["console"] == 2)  # the crash and ready
            async with Client(f"http://127.0.0.1:{daemon.port}") as client:
                status = (await client.get("/status")).json()
                metrics = (await client.get("/metrics")).text
            tg.cancel_scope.cancel()
    by_name = {s["name"]: s for s in status}
    assert by_name["crash"]["phase"] == "capturing_graphs"
    assert "CUDA" in by_name["crash"]["error"]["summary"]
    assert 'watchdog_launch_state{engine="vllm",host="",launch="crash",state="crashed"} 1.0' in metrics
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("crash:")]
    assert len(lines) == 1
    assert "crashed during capturing_graphs" in lines[0]
    assert daemon.crashes[("crash", "", by_name["crash"]["error"]["category"])] == 1


async def test_reload_starts_added_stops_removed_and_leaves_unchanged_alone(tmp_path: Path) -> None:
    """SIGHUP's reload: an added launch starts, a removed one stops, an unchanged one keeps its follower."""
    alerts = ConsoleAlerts(out=io.StringIO())
    keep, drop, add = (_plan(n, tmp_path / f"{n}.log", alerts) for n in ("keep", "drop", "add"))

    async def reload() -> dict[str, LaunchPlan]:
        return {"keep": keep, "add": add}

    daemon = Daemon({"keep": keep, "drop": drop}, reload=reload, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            before = daemon._running["keep"].follower
            await daemon.reload()
            assert sorted(s["name"] for s in daemon.status_json()) == ["add", "keep"]
            assert daemon._running["keep"].follower is before
            (tmp_path / "add.log").write_bytes(READY.read_bytes())
            await daemon.wait_until(lambda s: _states(s).get("add") == "ready")
            tg.cancel_scope.cancel()


def test_demo_ends_with_three_verdicts() -> None:
    """`watchdog demo` replays its three bundled launches and ends by itself: ready, crashed, stalled."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "status page http://127.0.0.1:" in proc.stdout
    assert "qwen-vllm-capture: crashed during capturing_graphs" in proc.stdout
    assert "llama-8b-sglang: ready" in proc.stdout
    assert "glm5-ascend-tp16: stalled in loading_weights" in proc.stdout
    assert "3 launches: 1 crashed, 1 ready, 1 stalled" in proc.stdout


class _Daemon(DaemonProcess):
    """`watchdog run` in a subprocess, its JSON log lines read as they come."""

    def __init__(self, config: Path, *args: str) -> None:
        super().__init__(config, *args, deadline=DEADLINE)


def _config(tmp_path: Path, sshd: Any, launches: str, event_loop: str = "asyncio") -> Path:
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f"""
[daemon]
listen = "127.0.0.1:0"
state_dir = "{tmp_path / "state"}"
log_format = "json"
event_loop = "{event_loop}"

[hosts.gpu1]
address = "127.0.0.1"
port = {sshd.port}
user = "{sshd.user}"
identity = "{sshd.client_key}"
known_hosts = "{sshd.known_hosts}"

[notifiers.console]
kind = "console"
{launches}
"""
    )
    return config


@pytest.mark.sshd
@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_run_follows_local_and_ssh_launches_reloads_and_stops(
    tmp_path: Path, sshd: Any, event_loop: str
) -> None:
    """`watchdog run`: a local and an SSH launch get their verdicts (served on /status); SIGHUP adds a
    launch without touching the others; SIGTERM exits 0. On either event loop `[daemon] event_loop` names."""
    import signal  # noqa: PLC0415

    if event_loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        unavailable("uvloop is not installed (the `fast` and `test` extras)", "WATCHDOG_REQUIRE_UVLOOP")

    local, remote, added = tmp_path / "local.log", tmp_path / "remote.log", tmp_path / "added.log"
    launches = f"""
[launches.local]
log = "{local}"
notify = ["console"]

[launches.remote]
host = "gpu1"
log = "{remote}"
notify = ["console"]
"""
    config = _config(tmp_path, sshd, launches, event_loop)
    daemon = _Daemon(config)
    try:
        assert daemon.wait(event="event loop")["loop"] == event_loop  # the loop that runs, asked inside it
        url = daemon.wait(event="http_listening")["url"]
        local.write_bytes(CRASH.read_bytes())
        remote.write_bytes(READY.read_bytes())
        daemon.wait(event="transition", launch="local", state="crashed")
        daemon.wait(event="transition", launch="remote", state="ready")
        status = {s["name"]: s for s in get(url + "status").json()}
        assert (status["local"]["state"], status["remote"]["state"]) == ("crashed", "ready")
        assert status["remote"]["host"] == "gpu1"
        config.write_text(config.read_text() + f'\n[launches.added]\nlog = "{added}"\nnotify = ["console"]\n')
        mark = len(daemon.seen)
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait(event="reloaded", launches=3)
        added.write_bytes(READY.read_bytes())
        daemon.wait(event="transition", launch="added", state="ready")
        # the unchanged launches were not restarted (a restart reads the log again from its first line)
        restarted = [
            e
            for e in daemon.seen[mark:]
            if e.get("event") == "transition" and e["launch"] in ("local", "remote")
        ]
        assert restarted == []
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(timeout=DEADLINE) == 0
        assert daemon.proc.stdout is not None
        out = daemon.proc.stdout.read()
        assert "local: crashed during capturing_graphs" in out
    finally:
        daemon.close()


@pytest.mark.sshd
def test_kill_9_and_restart_loses_no_verdict_and_repeats_none(tmp_path: Path, sshd: Any) -> None:
    """kill -9 mid-launch, then restart on the same state: a crash announced before is not announced again,
    a launch that became ready while the daemon was down and one that crashed then are each announced once."""
    import signal  # noqa: PLC0415

    logs = {name: tmp_path / f"{name}.log" for name in ("early", "slow", "down")}
    launches = "".join(
        f'\n[launches.{n}]\nlog = "{path}"\nnotify = ["console"]\n' for n, path in logs.items()
    )
    config = _config(tmp_path, sshd, launches)
    ready_lines = READY.read_bytes().splitlines(keepends=True)
    logs["early"].write_bytes(CRASH.read_bytes())
    logs["slow"].write_bytes(b"".join(ready_lines[:5]))  # loading weights
    first = _Daemon(config)
    try:
        first.wait(event="announced", launch="early", state="crashed")
        # delivery is at least once: killed between the console's line and its delivery being noted, the
        # restarted daemon would say it again; here it is noted before the kill
        first.wait(event="alert delivered", key="early/1/crashed")
        first.wait(event="transition", launch="slow", state="loading_weights")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=DEADLINE)
        assert first.proc.stdout is not None
        before = first.proc.stdout.read()
    finally:
        first.close()
    logs["slow"].write_bytes(READY.read_bytes())  # became ready while the daemon was down
    logs["down"].write_bytes(CRASH.read_bytes())  # and this one crashed
    second = _Daemon(config)
    try:
        second.wait(event="already announced", launch="early", state="crashed")
        second.wait(event="announced", launch="slow", state="ready")
        second.wait(event="announced", launch="down", state="crashed")
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=DEADLINE) == 0
        assert second.proc.stdout is not None
        after = second.proc.stdout.read()
    finally:
        second.close()
    assert before.count("early: crashed") == 1
    assert "early:" not in after
    assert after.count("slow: ready") == 1
    assert after.count("down: crashed") == 1


class _Hook:
    """A real HTTP receiver in a thread (for the subprocess tests): 503 until `up`, then 200; records keys."""

    def __init__(self) -> None:
        import http.server  # noqa: PLC0415
        import json  # noqa: PLC0415
        import threading  # noqa: PLC0415

        self.up = False
        self.refused = 0
        self.delivered: list[str] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if hook.up:
                    hook.delivered.append(json.loads(body)["dedup_key"])
                else:
                    hook.refused += 1
                self.send_response(200 if hook.up else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/secret-token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.sshd
def test_an_alert_pending_when_the_daemon_is_killed_is_delivered_after_restart(
    tmp_path: Path, sshd: Any
) -> None:
    """The webhook answers 503 while the daemon runs; kill -9; it comes back: the crash arrives once, after
    the restart, from the outbox (not announced again)."""
    import signal  # noqa: PLC0415

    hook = _Hook()
    log = tmp_path / "crash.log"
    launches = f'\n[launches.early]\nlog = "{log}"\nnotify = ["hook"]\n'
    launches += f'\n[notifiers.hook]\nkind = "webhook"\nurl = "{hook.url}"\n'
    config = _config(tmp_path, sshd, launches)
    log.write_bytes(CRASH.read_bytes())
    try:
        first = _Daemon(config)
        try:
            first.wait(event="announced", launch="early", state="crashed")
            first.wait(event="alert not delivered yet; trying again", notifier="hook")
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(timeout=DEADLINE)
        finally:
            first.close()
        assert hook.refused > 0
        assert hook.delivered == []
        hook.up = True
        second = _Daemon(config)
        try:
            second.wait(event="already announced", launch="early", state="crashed")
            second.wait(event="alert delivered", notifier="hook", key="early/1/crashed")
            second.proc.send_signal(signal.SIGTERM)
            assert second.proc.wait(timeout=DEADLINE) == 0
            logged = "".join(str(e) for e in second.seen)
        finally:
            second.close()
    finally:
        hook.close()
    assert hook.delivered == ["early/1/crashed"]
    assert "secret-token" not in logged


def test_run_on_a_taken_port_is_a_configuration_error(tmp_path: Path) -> None:
    """The listen address is taken: exit 78 with one line naming daemon.listen, no traceback."""
    import socket  # noqa: PLC0415

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "watchdog.toml"
        config.write_text(f'[daemon]\nlisten = "127.0.0.1:{port}"\nstate_dir = "{tmp_path / "state"}"\n')
        proc = subprocess.run(
            [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
    assert proc.returncode == 78
    assert "configuration error: daemon: listen: cannot listen on" in proc.stderr
    assert "Traceback" not in proc.stderr


async def test_an_unreachable_host_does_not_disturb_the_other_launches(tmp_path: Path) -> None:
    """A launch whose host refuses connections says so in its status and, past its grace, in an alert; a
    local launch beside it still gets its verdict."""
    from watchdog.follow.sources import SSHOptions  # noqa: PLC0415

    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    out = io.StringIO()
    alerts = ConsoleAlerts(out=out)
    unreachable = LaunchPlan(
        LaunchSpec(name="far", target=parse_target("ssh://nobody@127.0.0.1:1/srv/server.log")),
        host="far",
        ssh=SSHOptions(known_hosts=str(known_hosts), config=None, use_agent=False, connect_timeout=2.0),
        alerts=(alerts,),
    )
    local = tmp_path / "near.log"
    daemon = Daemon(
        {"far": unreachable, "near": _plan("near", local, alerts)},
        handle_signals=False,
        unreachable_after=0.5,
    )
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            local.write_bytes(READY.read_bytes())
            statuses = await daemon.wait_until(
                lambda s: _states(s).get("near") == "ready" and bool(_by_name(s)["far"].get("note"))
            )
            await daemon.wait_until(
                lambda _: daemon.alerts_sent["console"] == 2
            )  # near's ready, far's outage
            tg.cancel_scope.cancel()
    said = out.getvalue().splitlines()
    outage = [line for line in said if "far" in line]
    assert len(outage) == 1
    assert outage[0].startswith("host:far: host unreachable: cannot connect to nobody@127.0.0.1 port 1")
    assert outage[0].endswith("; not followed: far")
    far = _by_name(statuses)["far"]
    assert far["state"] in ("pending", "starting")
    # never connected: its follower's restarts are no reconnections
    assert daemon.stats().ssh_reconnects["far"] == 0
    assert daemon.stats().ssh_connected["far"] is False
    assert "127.0.0.1" in far["note"] or "refused" in far["note"].lower()


async def test_a_new_start_resolves_the_crash_and_is_said(tmp_path: Path) -> None:
    """A crashed launch's log replaced by a new start: the crash is resolved, the new start said, once each."""
    out = io.StringIO()
    log = tmp_path / "qwen.log"
    daemon = Daemon({"qwen": _plan("qwen", log, ConsoleAlerts(out=out))}, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(CRASH.read_bytes())
            await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 1)
            fresh = tmp_path / "fresh.log"
            fresh.write_bytes(READY.read_bytes())
            fresh.replace(log)
            await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 4)  # resolved, replaced, ready
            tg.cancel_scope.cancel()
    said = out.getvalue().splitlines()
    assert said[0].startswith("qwen: crashed during capturing_graphs")
    assert said[1:3] == [
        "qwen: crashed resolved: a new start (#2) began",
        "qwen: launch replaced (#2): launch started",
    ]
    assert said[3].startswith("qwen: ready")


def _by_name(statuses: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in statuses}


def test_two_shards_over_one_config_follow_each_launch_exactly_once(tmp_path: Path) -> None:
    """`watchdog run --shard 0/2` and `--shard 1/2` on the same config: each launch is on one /status only."""
    import signal  # noqa: PLC0415

    from watchdog.config.loading import load_config  # noqa: PLC0415
    from watchdog.config.shard import parse_shard  # noqa: PLC0415
    from watchdog.daemon.service import plans_from  # noqa: PLC0415

    names = [f"launch-{n}" for n in range(12)]
    text = '[notifiers.console]\nkind = "console"\n'
    for name in names:
        text += f'\n[launches.{name}]\nlog = "{tmp_path / name}.log"\nnotify = ["console"]\n'
    owned: dict[str, set[str]] = {}
    for index in (0, 1):
        config = tmp_path / f"shard{index}.toml"
        state = tmp_path / f"state{index}"
        config.write_text(f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{state}"\n{text}')
        assert set(plans_from(load_config(config), parse_shard(f"{index}/2"))) < set(names)
        daemon = _Daemon(config, "--shard", f"{index}/2")
        try:
            url = daemon.wait(event="http_listening")["url"]
            owned[str(index)] = {s["name"] for s in get(url + "status").json()}
            daemon.proc.send_signal(signal.SIGTERM)
            assert daemon.proc.wait(timeout=DEADLINE) == 0
        finally:
            daemon.close()
    assert owned["0"].isdisjoint(owned["1"])
    assert owned["0"] | owned["1"] == set(names)
    assert owned["0"]
    assert owned["1"]


def test_a_bad_shard_is_a_usage_error(tmp_path: Path) -> None:
    """`--shard 2/2` is refused before anything starts, exit 64, saying what is allowed."""
    config = tmp_path / "c.toml"
    config.write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "run", "--config", str(config), "--shard", "2/2"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert proc.returncode == 64
    assert "INDEX from 0 to COUNT-1" in proc.stderr or "1/2" in proc.stderr


async def test_a_launch_that_stalls_again_is_said_again(tmp_path: Path) -> None:
    """Stalled, progress again (resolved), stalled again: the second stall is its own alert."""
    out = io.StringIO()
    log = tmp_path / "slow.log"
    lines = READY.read_bytes().splitlines(keepends=True)
    spec = LaunchSpec(name="slow", target=parse_target(str(log)), stall_after=0.5)
    daemon = Daemon({"slow": LaunchPlan(spec, alerts=(ConsoleAlerts(out=out),))}, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(b"".join(lines[:6]))  # loading weights, shard 1 of 4
            await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 1)
            with log.open("ab") as f:
                f.write(lines[6])  # shard 2 of 4: progress again
            await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 3)  # resolved, stalled again
            tg.cancel_scope.cancel()
    said = out.getvalue().splitlines()
    assert said[0].startswith("slow: stalled in loading_weights")
    assert said[1] == "slow: stalled resolved: progress again: loading_weights"
    assert said[2].startswith("slow: stalled in loading_weights")


@pytest.mark.parametrize("delay", [None, 0.7, 1.0])
def test_a_sighup_while_run_is_starting_is_a_reload_not_death(tmp_path: Path, delay: float | None) -> None:
    """SIGHUP sent to `watchdog run` `delay` seconds after it was spawned (before its config is read and its
    event loop runs, ~1.5 s; it is held from ~0.1 s, and not sent before), or (None) the moment the process
    catches SIGHUP: it stays up, answers /healthz, and reloads once it runs."""
    import signal  # noqa: PLC0415
    import time  # noqa: PLC0415

    config = tmp_path / "watchdog.toml"
    config.write_text(
        f"""
[daemon]
listen = "127.0.0.1:0"
state_dir = "{tmp_path / "state"}"
log_format = "json"

[notifiers.console]
kind = "console"

[launches.local]
log = "{tmp_path / "local.log"}"
notify = ["console"]
"""
    )
    spawned = time.monotonic()
    daemon = _Daemon(config)
    try:
        # Not before it catches SIGHUP: Python's own start comes first (past 0.7 s on a loaded machine), when
        # a SIGHUP is death, or nothing at all where it is ignored (a run under nohup: the child inherits it).
        _wait_catching(daemon.proc.pid, signal.SIGHUP)
        if delay is not None:
            time.sleep(max(0.0, spawned + delay - time.monotonic()))  # the moment under test, not a wait
        daemon.proc.send_signal(signal.SIGHUP)
        url = daemon.wait(event="http_listening")["url"]
        daemon.wait(event="reloaded", launches=1)
        assert get(url + "healthz").status_code == 200
        assert daemon.proc.poll() is None
    finally:
        daemon.close()


def _wait_catching(pid: int, signum: int) -> None:
    """Return the moment process `pid` catches `signum` (its SigCgt mask in /proc), within the deadline."""
    import time  # noqa: PLC0415

    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) & (1 << (signum - 1)):
                return
        time.sleep(0.001)  # a poll of the kernel's view: there is no event to wait on
    raise AssertionError(f"process {pid} did not catch signal {signum} within {DEADLINE}s")


# -- /metrics of a running daemon -------------------------------------------------------------------------


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of family `name` on a /metrics page: (labels, value)."""
    return [
        (dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


async def _scrape(daemon: Daemon) -> str:
    async with Client(f"http://127.0.0.1:{daemon.port}") as client:
        return (await client.get("/metrics")).text


async def test_last_log_activity_is_when_the_log_last_grew(tmp_path: Path) -> None:
    """/metrics of a running daemon has, per launch, the Unix time its log last grew: none before the log
    has bytes, the time of the first read, then a later one after the log grows again."""
    import time  # noqa: PLC0415

    log = tmp_path / "slow.log"
    lines = READY.read_bytes().splitlines(keepends=True)
    daemon = Daemon(
        {"slow": _plan("slow", log, ConsoleAlerts(out=io.StringIO()))}, serve=_serve, handle_signals=False
    )
    name = "watchdog_last_log_activity_timestamp_seconds"
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            before_log = _samples(await _scrape(daemon), name)
            written = time.time()
            log.write_bytes(b"".join(lines[:3]))  # loading the weights
            await daemon.wait_until(lambda s: _states(s)["slow"] == "loading_weights")
            first = _samples(await _scrape(daemon), name)
            grown = time.time()
            with log.open("ab") as f:
                f.write(b"".join(lines[3:12]))  # the weights loaded
            await daemon.wait_until(lambda s: _states(s)["slow"] == "allocating_kv_cache")
            second = _samples(await _scrape(daemon), name)
            read = time.time()
            tg.cancel_scope.cancel()
    assert before_log == []
    assert [labels for labels, _ in first] == [{"launch": "slow", "host": ""}]
    assert written <= first[0][1] <= grown
    assert grown <= second[0][1] <= read


@pytest.mark.sshd
async def test_ssh_reconnects_count_connections_made_again_not_follower_restarts(
    tmp_path: Path, sshd: Any
) -> None:
    """`watchdog_ssh_reconnects_total` on a running daemon's /metrics: 0 while the connection to a host
    holds, 1 once it is cut and made again (the launch goes on being followed), and 0 for a host never
    reached, whose follower failed and is restarted (a restart is no reconnection)."""
    from watchdog.follow.sources import SSHOptions  # noqa: PLC0415

    options = SSHOptions(
        known_hosts=str(sshd.known_hosts),
        identity=str(sshd.client_key),
        config=None,
        use_agent=False,
        connect_timeout=10.0,
    )
    log = tmp_path / "remote.log"
    lines = READY.read_bytes().splitlines(keepends=True)
    alerts = ConsoleAlerts(out=io.StringIO())
    remote = parse_target(f"ssh://{sshd.user}@127.0.0.1:{sshd.port}{log}")
    far = parse_target("ssh://nobody@127.0.0.1:1/srv/server.log")
    plans = {
        "remote": LaunchPlan(
            LaunchSpec(name="remote", target=remote), host="gpu1", ssh=options, alerts=(alerts,)
        ),
        "far": LaunchPlan(LaunchSpec(name="far", target=far), host="far", ssh=options, alerts=(alerts,)),
    }
    daemon = Daemon(plans, serve=_serve, handle_signals=False)
    name = "watchdog_ssh_reconnects_total"
    with anyio.fail_after(LONG_DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(b"".join(lines[:10]))
            await daemon.wait_until(
                lambda s: (
                    _by_name(s)["remote"].get("lines_read") == 10
                    and "follower failed" in _by_name(s)["far"].get("note", "")
                )
            )
            held = {labels["host"]: value for labels, value in _samples(await _scrape(daemon), name)}
            assert sshd.kill_sessions(), "an SSH session to cut"
            await daemon.wait_until(lambda _: daemon.stats().ssh_reconnects.get("gpu1") == 1)
            with log.open("ab") as f:
                f.write(b"".join(lines[10:]))
            await daemon.wait_until(lambda s: _states(s)["remote"] == "ready")
            after = {labels["host"]: value for labels, value in _samples(await _scrape(daemon), name)}
            connected = {
                labels["host"]: value
                for labels, value in _samples(await _scrape(daemon), "watchdog_ssh_connected")
            }
            tg.cancel_scope.cancel()
    assert held == {"gpu1": 0.0, "far": 0.0}
    assert after == {"gpu1": 1.0, "far": 0.0}
    assert connected == {"gpu1": 1.0, "far": 0.0}


async def test_launch_labels_are_on_the_launch_info_series(tmp_path: Path) -> None:
    """A launch's configured labels reach /metrics of a running daemon on `watchdog_launch_info` (one label set
    for all launches: a label a launch does not have is empty), and on no other series."""
    alerts = ConsoleAlerts(out=io.StringIO())
    plans = {
        "a": LaunchPlan(
            LaunchSpec(name="a", target=parse_target(str(tmp_path / "a.log"))),
            labels={"team": "infra", "model": "kimi"},
            alerts=(alerts,),
        ),
        "b": LaunchPlan(
            LaunchSpec(name="b", target=parse_target(str(tmp_path / "b.log"))),
            labels={"zone": "eu"},
            alerts=(alerts,),
        ),
        "c": _plan("c", tmp_path / "c.log", alerts),
    }
    daemon = Daemon(plans, serve=_serve, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            text = await _scrape(daemon)
            tg.cancel_scope.cancel()
    info = sorted(_samples(text, "watchdog_launch_info"), key=lambda sample: sample[0]["launch"])
    assert info == [
        ({"launch": "a", "host": "", "model": "kimi", "team": "infra", "zone": ""}, 1.0),
        ({"launch": "b", "host": "", "model": "", "team": "", "zone": "eu"}, 1.0),
        ({"launch": "c", "host": "", "model": "", "team": "", "zone": ""}, 1.0),
    ]
    others = {
        label
        for family in text_string_to_metric_families(text)
        if family.name != "watchdog_launch_info"
        for sample in family.samples
        for label in sample.labels
    }
    assert others.isdisjoint({"team", "model", "zone"})


async def test_outbox_depth_counts_the_alert_being_attempted(tmp_path: Path, receiver: Any) -> None:
    """A crash alert to a webhook that answers 500 every time is not delivered: every scrape of /metrics,
    while it is attempted (the retries of one delivery) and while it waits for the next, says a depth of 1
    at least."""
    from http_receiver import Answer  # noqa: PLC0415

    from watchdog.alerts.senders import ServiceNotifier  # noqa: PLC0415

    receiver.script.extend(Answer(500, body="down") for _ in range(1000))
    hook = ServiceNotifier(name="hook", kind="webhook", urls=(receiver.url(),), timeout=5.0)
    log = tmp_path / "crash.log"
    daemon = Daemon(
        {"crash": LaunchPlan(LaunchSpec(name="crash", target=parse_target(str(log))), alerts=(hook,))},
        serve=_serve,
        handle_signals=False,
    )
    depths: list[float] = []
    with anyio.fail_after(LONG_DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(CRASH.read_bytes())
            await daemon.wait_until(lambda s: _states(s)["crash"] == "crashed")
            while not receiver.got:  # the first attempt is answered: the alert is in the outbox
                await receiver.changed.wait()
            # from the first attempt until the outbox has taken the alert back and tried it again: one
            # delivery's attempts (4, a few seconds) and the outbox's pause before the next. A scrape after
            # each answer (the delivery waits to try again: the alert is being attempted), and every 0.1 s.
            while len(receiver.got) < 5:
                answered = receiver.changed
                with anyio.move_on_after(0.1):
                    await answered.wait()
                depths.extend(value for _, value in _samples(await _scrape(daemon), "watchdog_outbox_depth"))
            tg.cancel_scope.cancel()
    assert len(depths) >= 5
    assert min(depths) >= 1, f"{depths.count(0.0)} of {len(depths)} scrapes said 0"


def _contract_tables() -> tuple[set[str], dict[str, tuple[str, set[str], bool]]]:
    """docs/contracts.md, "Metrics": the label names of its labels table, and its metrics table as
    name -> (type, labels, whether the launches' own labels are added)."""
    text = (Path(__file__).parent.parent / "docs" / "contracts.md").read_text()
    section = text.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    labels: set[str] = set()
    metrics: dict[str, tuple[str, set[str], bool]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and re.fullmatch(r"`\w+`(?:, `\w+`)*", cells[0]):
            labels.update(re.findall(r"`(\w+)`", cells[0]))
        elif len(cells) == 4 and re.fullmatch(r"`(?:watchdog|process|python)_\w+`", cells[0]):
            names = set(re.findall(r"`(\w+)`", cells[2]))
            metrics[cells[0].strip("`")] = (cells[1], names, "your labels" in cells[2])
    return labels, metrics


@pytest.mark.sshd
async def test_the_metrics_of_docs_contracts_are_what_a_running_daemon_serves(
    tmp_path: Path, sshd: Any
) -> None:
    """docs/contracts.md's metrics table and a running daemon's /metrics (launches in every state) agree both
    ways: the same families, each with its type, and each sample with the documented labels (plus the
    launches' own on `watchdog_launch_info`); every label served is in the doc's labels table, and back."""
    from metrics_scene import LABELS, running_scene  # noqa: PLC0415

    async with running_scene(tmp_path, sshd) as scene:
        text = await _scrape(scene.daemon)
    label_table, documented = _contract_tables()
    assert len(documented) >= 24
    served_types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))
    assert set(documented) - set(served_types) == set(), "documented, not served"
    assert set(served_types) - set(documented) == set(), "served, not documented"
    assert {name: kind for name, (kind, _, _) in documented.items()} == served_types
    own = {name for labels in LABELS.values() for name in labels}
    served_labels: dict[str, set[frozenset[str]]] = {name: set() for name in served_types}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            served_labels[sample.name].add(frozenset(sample.labels))
    for name, (_, labels, plus_own) in documented.items():
        want = frozenset(labels | own) if plus_own else frozenset(labels)
        assert served_labels[name] == {want}, f"{name}: served {served_labels[name]}, documented {set(want)}"
    used = {label for sets in served_labels.values() for labels in sets for label in labels} - own
    assert used == label_table


async def test_status_says_when_the_current_incarnation_began_after_a_replaced_log(tmp_path: Path) -> None:
    """A followed log replaced by a new launch's: /status's `incarnation_since` (what the page shows as
    "incarnation began") is when the new incarnation began, after the replacement; `since` stays when the
    daemon began following the launch."""
    import time  # noqa: PLC0415
    from datetime import datetime  # noqa: PLC0415

    def at(iso: str) -> float:
        return datetime.fromisoformat(iso).timestamp()

    log = tmp_path / "qwen.log"
    daemon = Daemon(
        {"qwen": _plan("qwen", log, ConsoleAlerts(out=io.StringIO()))}, serve=_serve, handle_signals=False
    )
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(CRASH.read_bytes())
            await daemon.wait_until(lambda s: _states(s) == {"qwen": "crashed"})
            async with Client(f"http://127.0.0.1:{daemon.port}") as client:
                (first,) = (await client.get("/status")).json()
                replaced = time.time()
                fresh = tmp_path / "fresh.log"
                fresh.write_bytes(READY.read_bytes())
                fresh.replace(log)
                await daemon.wait_until(lambda s: s[0]["incarnation"] == 2 and s[0]["state"] == "ready")
                (second,) = (await client.get("/status")).json()
                seen = time.time()
            tg.cancel_scope.cancel()
    assert first["incarnation"] == 1
    assert at(first["incarnation_since"]) <= replaced
    assert second["incarnation"] == 2
    # the new incarnation's start: after the log was replaced (a clock's rounding of slack), before /status said it
    assert replaced - 0.1 <= at(second["incarnation_since"]) <= seen
    assert at(second["incarnation_since"]) > at(first["incarnation_since"])
    assert second["since"] == first["since"]  # followed since: unchanged by the new incarnation
    assert at(second["since"]) <= replaced


def _count_alerts_made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The kinds of the alerts made from a status (`Alert.from_status`) from now on, in order."""
    from watchdog.alerts.notifiers import Alert  # noqa: PLC0415

    made: list[Any] = []
    from_status = Alert.from_status.__func__

    def counted(cls: type[Alert], kind: Any, *args: Any, **kwargs: Any) -> Alert:
        made.append(kind)
        return from_status(cls, kind, *args, **kwargs)

    monkeypatch.setattr(Alert, "from_status", classmethod(counted))
    return made


async def test_a_relaunch_in_the_same_log_is_stored_with_its_own_timeline(tmp_path: Path) -> None:
    """A crash, then a new start in the same file that crashes again: the state file keeps each incarnation's
    own transitions (the new start's row holds none of the crashed one's, though /status reports that crash
    until the new start has a verdict)."""
    log = tmp_path / "qwen.log"
    first = CRASH.read_bytes()
    async with open_store(tmp_path / "state") as store:
        daemon = Daemon(
            {"qwen": _plan("qwen", log, ConsoleAlerts(out=io.StringIO()))}, store=store, handle_signals=False
        )
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                log.write_bytes(first)
                await daemon.wait_until(lambda _: daemon.crashes.total() == 1)
                with log.open("ab") as f:
                    f.write(first)
                await daemon.wait_until(lambda _: daemon.crashes.total() == 2)
                tg.cancel_scope.cancel()
        records = {r.incarnation: r for r in await store.history("qwen")}
    lines = first.count(b"\n")
    assert [t.state for t in records[2].transitions][-1] == "crashed"
    assert all(t.line is not None and t.line > lines for t in records[2].transitions)
    assert all(t.line is not None and t.line <= lines for t in records[1].transitions)


async def test_a_new_start_no_notifier_says_makes_no_alert_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash loop's relaunch, with no notifier that says a new start: nothing is said of it, and neither the
    alert that would say it nor the status it is made of is made (only the verdicts' alerts are)."""
    from watchdog.alerts.notifiers import AlertKind  # noqa: PLC0415

    made = _count_alerts_made(monkeypatch)
    out = io.StringIO()
    log = tmp_path / "qwen.log"
    alerts = ConsoleAlerts(out=out, on=frozenset({AlertKind.CRASHED}))
    daemon = Daemon({"qwen": _plan("qwen", log, alerts)}, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            log.write_bytes(CRASH.read_bytes())
            await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 1)
            with log.open("ab") as f:  # a new start in the same file, that crashes again
                f.write(CRASH.read_bytes())
            await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 2)
            tg.cancel_scope.cancel()
    said = out.getvalue().splitlines()
    assert len(said) == 2
    assert all(line.startswith("qwen: crashed") for line in said)
    assert made == [AlertKind.CRASHED, AlertKind.CRASHED]


@pytest.mark.parametrize("stored", [True, False], ids=["store", "no-store"])
async def test_a_ready_verdict_no_notifier_says_makes_no_alert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: bool
) -> None:
    """A ready verdict, with a notifier that does not say ready (the default): nothing is said, the alert that
    would say it is not made, and the verdict is still noted as announced (with the store: once, with the
    verdict; a restarted daemon does not say it); a crash is said as ever."""
    from watchdog.alerts.alert import DEFAULT_ON  # noqa: PLC0415
    from watchdog.alerts.notifiers import AlertKind  # noqa: PLC0415

    made = _count_alerts_made(monkeypatch)
    out = io.StringIO()
    logs = {"ready": tmp_path / "ready.log", "crash": tmp_path / "crash.log"}
    alerts = ConsoleAlerts(out=out, on=frozenset(DEFAULT_ON))  # what a webhook says by default: not ready
    async with open_store(tmp_path / "state") as store:
        daemon = Daemon(
            {name: _plan(name, path, alerts) for name, path in logs.items()},
            store=store if stored else None,
            handle_signals=False,
        )
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                logs["ready"].write_bytes(READY.read_bytes())
                logs["crash"].write_bytes(CRASH.read_bytes())
                await daemon.wait_until(lambda s: _states(s) == {"crash": "crashed", "ready": "ready"})
                await daemon.wait_until(lambda _: daemon.alerts_sent["console"] == 1)
                # the ready verdict's announcement taken (`Announcer.conclude`, in the launch's own queue)
                await daemon.wait_until(lambda _: (1, "ready") in daemon._running["ready"].announced)
                tg.cancel_scope.cancel()
        records = {r.launch: r for r in await store.history()}
    assert out.getvalue().splitlines()[0].startswith("crash: crashed")
    assert len(out.getvalue().splitlines()) == 1
    assert made == [AlertKind.CRASHED]
    assert daemon.alerts_sent == {"console": 1}
    if stored:
        assert records["ready"].announced == ("ready",)
        assert records["ready"].verdict is not None
        assert records["ready"].verdict["state"] == "ready"
