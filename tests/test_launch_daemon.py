"""Launch mode in the daemon: `command = [...]` started and stopped by `watchdog start|stop` and by
`POST /launches/NAME/start|stop` behind the daemon's auth; a stop is `stopped`; kill_on_crash over SSH."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import standin_server as standin
from daemon_process import DaemonProcess
from sshd_server import SSHDServer
from standin_server import alive_in_session, end_sessions

READY, CRASH = Path(standin.READY), Path(standin.CRASH)

DEADLINE = 30.0
USER, PASSWORD = "ops", "s3cret-i29"
TOKEN = "probe-token-i29-0123456789"  # the readiness probe's: it opens /launches/NAME/ready, never start|stop


def _toml_list(words: list[str]) -> str:
    return json.dumps(words)  # a JSON array of strings is a TOML array of basic strings


def _server(case: Path, *extra: str, then: str = "hang") -> list[str]:
    return standin.command(str(case), *extra, then=then)


def _config(tmp_path: Path, launches: str, *, sshd: SSHDServer | None = None, auth: bool = True) -> Path:
    """The daemon's config: on a free loopback port, with basic auth (`auth`), the host gpu1 (`sshd`)."""
    config = tmp_path / "watchdog.toml"
    daemon = f'basic_auth_user = "{USER}"\nbasic_auth_password = "{PASSWORD}"\nprobe_token = "{TOKEN}"\n'
    daemon = daemon if auth else ""
    host = ""
    if sshd is not None:
        host = (
            f'[hosts.gpu1]\naddress = "127.0.0.1"\nport = {sshd.port}\nuser = "{sshd.user}"\n'
            f'identity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
        )
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\nlog_format = "json"\n{daemon}\n'
        f"{host}{launches}"
    )
    return config


@pytest.fixture
def daemon_groups() -> Iterator[list[int]]:
    """Process groups the daemon started for a test: whatever is left of them is killed after it."""
    started: list[int] = []
    yield started
    end_sessions(started)


def _wait_after(daemon: DaemonProcess, mark: int, **want: Any) -> dict[str, Any]:
    """The first log event with these fields after the first `mark` events seen (within the deadline)."""
    import queue  # noqa: PLC0415
    import time  # noqa: PLC0415

    end = time.monotonic() + DEADLINE
    while True:
        for event in daemon.seen[mark:]:
            if all(event.get(k) == v for k, v in want.items()):
                return event
        try:
            daemon.seen.append(daemon.events.get(timeout=max(0.0, end - time.monotonic())))
        except queue.Empty:
            raise AssertionError(f"no event {want} after #{mark}; seen: {daemon.seen[-15:]}") from None


def _post(url: str, body: bytes = b"{}", headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        with exc:  # its connection closed with it
            text = exc.read()
        try:
            return exc.code, json.loads(text)
        except ValueError:
            return exc.code, {"text": text.decode(errors="replace")}


def _auth() -> dict[str, str]:
    import base64  # noqa: PLC0415

    return {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}


def _cli(*argv: str, password: str = PASSWORD) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), "WATCHDOG_PASSWORD": password}
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=DEADLINE * 2,
        check=False,
    )


@pytest.mark.sshd
def test_start_and_stop_through_the_cli_and_http(
    tmp_path: Path, sshd: SSHDServer, daemon_groups: list[int]
) -> None:
    """`watchdog start NAME` starts the configured command (the daemon follows it to ready); a second start is
    refused while it runs; `watchdog stop NAME` ends its group (SIGKILL for one that ignores SIGTERM) and the
    verdict is `stopped`; the HTTP API refuses requests without credentials (the probe token is none), GET, a
    form post, and another origin."""
    log = tmp_path / "server.log"
    launches = f"""
[launches.served]
log = "{log}"
engine = "llamacpp"
command = {_toml_list(_server(READY, "--ignore-term", "--children", "1"))}
stop_grace = "1s"
"""
    daemon = DaemonProcess(_config(tmp_path, launches, sshd=sshd), deadline=DEADLINE)
    try:
        url = daemon.wait(event="http_listening")["url"]
        start = f"{url}launches/served/start"
        assert _post(start, headers={"Content-Type": "application/json"})[0] == 401
        bearer = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        assert _post(start, headers=bearer)[0] == 401  # the probe token opens only the readiness path
        with pytest.raises(urllib.error.HTTPError) as got:
            urllib.request.urlopen(urllib.request.Request(start, headers=_auth()), timeout=DEADLINE)
        with got.value:
            assert got.value.code == 405  # POST only
        assert (
            _post(start, b"replace=1", {**_auth(), "Content-Type": "application/x-www-form-urlencoded"})[0]
            == 415
        )
        json_auth = {**_auth(), "Content-Type": "application/json"}
        assert _post(start, headers={**json_auth, "Origin": "http://evil.example"})[0] == 403
        assert _post(f"{url}launches/nothing/start", headers=json_auth) == (
            404,
            {"launch": "nothing", "error": "no launch 'nothing'"},
        )
        assert not log.exists()  # nothing was started by any of these

        done = _cli("start", "served", "--url", url, "--user", USER, "--json")
        assert done.returncode == 0, done.stderr
        started = json.loads(done.stdout)["started"]
        daemon_groups.append(started["pid"])
        assert started["pid_file"] == f"{log}.pid"
        daemon.wait(event="transition", launch="served", state="ready")

        again = _cli("start", "served", "--url", url, "--user", USER)
        assert again.returncode == 64
        assert f"is running (pid {started['pid']})" in again.stderr
        replaced = _cli("start", "served", "--replace", "--url", url, "--user", USER, "--json")
        assert replaced.returncode == 0, replaced.stderr
        answer = json.loads(replaced.stdout)
        daemon_groups.append(answer["started"]["pid"])
        assert (answer["replaced"]["pgid"], answer["replaced"]["signal"]) == (started["pid"], "SIGKILL")
        assert alive_in_session(started["pid"]) == []
        daemon.wait(event="transition", launch="served", state="stopped")  # the replaced run's verdict
        mark = next(i for i, e in enumerate(daemon.seen) if e.get("state") == "stopped")
        started = answer["started"]
        _wait_after(daemon, mark, event="transition", launch="served", state="ready")  # the new run's
        refused = _cli("stop", "served", "--url", url, "--user", USER, password="wrong")
        assert refused.returncode == 69
        assert "refused the credentials" in refused.stderr

        stopped = _cli("stop", "served", "--url", url, "--user", USER)
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped process group {started['pid']} (2 processes, SIGKILL)" in stopped.stdout
        _wait_after(daemon, mark + 1, event="transition", launch="served", state="stopped")
        assert alive_in_session(started["pid"]) == []
        assert _cli("stop", "served", "--url", url, "--user", USER).returncode == 64  # not running now
    finally:
        daemon.close()


@pytest.mark.sshd
def test_kill_on_crash_over_ssh_in_the_daemon(
    tmp_path: Path, sshd: SSHDServer, daemon_groups: list[int]
) -> None:
    """A launch on an SSH host started through the API whose run crashes is ended whole (its workers too) when
    kill_on_crash is set, and the daemon says what it killed."""
    log = tmp_path / "server.log"
    launches = f"""
[launches.crashy]
host = "gpu1"
log = "{log}"
engine = "llamacpp"
command = {_toml_list(_server(CRASH, "--children", "2", "--ignore-term"))}
cwd = "{tmp_path}"
env = {{ STANDIN_MODE = "crash test" }}
kill_on_crash = true
stop_grace = "1s"
"""
    daemon = DaemonProcess(_config(tmp_path, launches, sshd=sshd), deadline=DEADLINE)
    try:
        url = daemon.wait(event="http_listening")["url"]
        status, body = _post(
            f"{url}launches/crashy/start", headers={**_auth(), "Content-Type": "application/json"}
        )
        assert status == 200, body
        pgid = body["started"]["pid"]
        daemon_groups.append(pgid)
        daemon.wait(event="transition", launch="crashy", state="crashed")
        killed = daemon.wait(event="killed on crash", launch="crashy")
        assert (killed["pgid"], killed["signal"], len(killed["pids"])) == (pgid, "SIGKILL", 3)
        assert alive_in_session(pgid) == []
        request = urllib.request.Request(f"{url}status", headers=_auth())
        with urllib.request.urlopen(request, timeout=DEADLINE) as response:
            status = json.loads(response.read())[0]
        assert status["note"] == f"killed on crash: ended process group {pgid} (3 processes, SIGKILL)"
    finally:
        daemon.close()


_BAD = [
    pytest.param('unit = "u.service"\ncommand = ["x"]', "launches.a.command", "log file", id="unit"),
    pytest.param(
        'command = ["x"]\nnodes = [{ log = "/a.log" }, { log = "/b.log" }]',
        "launches.a.command",
        "nodes",
        id="nodes",
    ),
    pytest.param('log = "/x.log"\ncommand = []', "launches.a.command", "is empty", id="empty"),
    pytest.param('log = "/x.log"\ncommand = ["-x"]', "launches.a.command[0]", "not a command", id="dash"),
    pytest.param('log = "/x.log"\ncommand = [1]', "launches.a.command[0]", "string", id="not-a-string"),
    pytest.param('log = "/x.log"\ncwd = "/tmp"', "launches.a.cwd", "command = [...]", id="cwd-alone"),
    pytest.param(
        'log = "/x.log"\nkill_on_crash = true', "launches.a.kill_on_crash", "command", id="kill-alone"
    ),
    pytest.param('log = "/x.log"\nstart = "on_boot"', "launches.a.start", "command", id="start-alone"),
    pytest.param(
        'log = "/x.log"\ncommand = ["x"]\nstart = "always"', "launches.a.start", "manual", id="start"
    ),
    pytest.param(
        'log = "/x.log"\ncommand = ["x"]\nenv = { "1A" = "b" }', "launches.a.env", "variable", id="env"
    ),
    pytest.param(
        'log = "/x.log"\ncommand = ["x"]\nprocess = "x"', "launches.a.process", "LOG.pid", id="process"
    ),
    pytest.param(
        'log = "/x.log"\ncommand = ["x"]\npid_file = "/p"', "launches.a.pid_file", "LOG.pid", id="pid"
    ),
    pytest.param(
        'log = "/x.log"\ncommand = ["x"]\nstop_grace = "-1s"', "launches.a.stop_grace", "", id="grace"
    ),
]


@pytest.mark.parametrize(("text", "key", "fragment"), _BAD)
def test_launch_mode_keys_are_checked(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    """A launch mode key that is wrong, or given without the command it goes with, is a configuration error
    naming its key (exit 78 in `check-config`)."""
    from watchdog.config.loading import load_config  # noqa: PLC0415
    from watchdog.exceptions import ConfigError  # noqa: PLC0415

    path = tmp_path / "c.toml"
    path.write_text(f"[launches.a]\n{text}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == key
    assert fragment in str(caught.value)


def test_start_and_stop_over_http_need_basic_auth(tmp_path: Path) -> None:
    """A daemon without basic auth refuses start and stop over HTTP (403, saying what to set), whoever can
    reach its loopback port: nothing is started, no log or pid file is written."""
    log = tmp_path / "never.log"
    launches = f'[launches.a]\nlog = "{log}"\ncommand = ["sleep", "1000"]\n'
    daemon = DaemonProcess(_config(tmp_path, launches, auth=False), deadline=DEADLINE)
    try:
        url = daemon.wait(event="http_listening")["url"]
        for action in ("start", "stop"):
            status, body = _post(f"{url}launches/a/{action}", headers={"Content-Type": "application/json"})
            assert status == 403, body
            assert "basic_auth_user" in body["error"]
    finally:
        daemon.close()
    assert not log.exists()
    assert not Path(f"{log}.pid").exists()


def test_a_launch_with_a_command_follows_its_pid_file(tmp_path: Path) -> None:
    """A launch with a command gets its process evidence from the pid file launch mode writes beside its log,
    and its plan carries the command with its directory and environment."""
    from watchdog.config.loading import load_config  # noqa: PLC0415
    from watchdog.daemon.service import plans_from  # noqa: PLC0415

    path = tmp_path / "c.toml"
    path.write_text(
        '[hosts.gpu1]\n[launches.a]\nhost = "gpu1"\nlog = "~/logs/a.log"\n'
        'command = ["python3", "-m", "sglang.launch_server", "--port", "30000"]\ncwd = "/data"\n'
        'env = { CUDA_VISIBLE_DEVICES = "0,1" }\nkill_on_crash = true\nstop_grace = "10s"\nstart = "on_boot"\n',
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.launch_spec("a").pid_file == "logs/a.log.pid"
    control = plans_from(config)["a"].control
    assert control is not None
    assert control.command.argv == ("python3", "-m", "sglang.launch_server", "--port", "30000")
    assert (control.command.log, control.command.cwd, control.command.env) == (
        "logs/a.log",
        "/data",
        (("CUDA_VISIBLE_DEVICES", "0,1"),),
    )
    assert (control.kill_on_crash, control.stop_grace, control.on_boot) == (True, 10.0, True)


def test_a_container_launch_starts_stops_and_is_killed_on_crash(tmp_path: Path, docker: Any) -> None:
    """A container launch is started with the runtime's `run` (its options, image and command as configured),
    stopped with `stop -t GRACE` (the verdict: stopped), replaced by a new container (a new incarnation), and a
    crashed run is ended with `kill`: no container is left running."""
    from docker_daemon import IMAGE  # noqa: PLC0415

    share = tmp_path / "share"
    share.mkdir()
    (share / "ready.log").write_bytes(Path(f"{READY}.log").read_bytes())
    (share / "crash.log").write_bytes(Path(f"{CRASH}.log").read_bytes())
    run = ["-v", f"{share}:/c:ro", IMAGE, "sh", "-c", "cat /c/$CASE.log; exec sleep 1000"]
    launches = f"""
[launches.boxed]
container = "i29-boxed"
engine = "llamacpp"
command = {_toml_list(run)}
env = {{ CASE = "ready" }}
stop_grace = "1s"

[launches.boxed-crash]
container = "i29-boxed-crash"
engine = "llamacpp"
command = {_toml_list(run)}
env = {{ CASE = "crash" }}
kill_on_crash = true
"""
    config = _config(tmp_path, launches)
    daemon = DaemonProcess(config, deadline=DEADLINE, env=docker.env())
    try:
        url = daemon.wait(event="http_listening")["url"]
        headers = {"Content-Type": "application/json", **_auth()}
        status, body = _post(f"{url}launches/boxed/start", headers=headers)
        assert status == 200, body
        assert body["started"]["container"] == "i29-boxed"
        daemon.wait(event="transition", launch="boxed", state="ready")
        assert _post(f"{url}launches/boxed/start", headers=headers)[0] == 409  # it runs

        status, body = _post(f"{url}launches/boxed/start", b'{"replace": true}', headers)
        assert status == 200, body
        assert body["replaced"] == {"container": "i29-boxed", "command": "docker stop -t 1", "exit_code": 137}
        daemon.wait(event="transition", launch="boxed", state="stopped")
        mark = next(i for i, e in enumerate(daemon.seen) if e.get("state") == "stopped")
        _wait_after(
            daemon, mark, event="transition", launch="boxed", state="ready"
        )  # the new container's run

        status, body = _post(f"{url}launches/boxed/stop", headers=headers)
        assert status == 200, body
        _wait_after(daemon, mark + 1, event="transition", launch="boxed", state="stopped")
        assert docker.docker("inspect", "-f", "{{.State.Status}}", "i29-boxed").strip() == "exited"

        status, body = _post(f"{url}launches/boxed-crash/start", headers=headers)
        assert status == 200, body
        daemon.wait(event="transition", launch="boxed-crash", state="crashed")
        killed = daemon.wait(event="killed on crash", launch="boxed-crash")
        assert killed["container"] == "i29-boxed-crash"
        assert docker.docker("inspect", "-f", "{{.State.Status}}", "i29-boxed-crash").strip() == "exited"
    finally:
        daemon.close()


@pytest.mark.sshd
def test_on_boot_starts_it_when_the_daemon_starts(
    tmp_path: Path, sshd: SSHDServer, daemon_groups: list[int]
) -> None:
    """`start = "on_boot"`: the daemon starts the command itself when it starts (a `manual` one it leaves);
    `watchdog stop --config` finds the daemon and its credentials in its config."""
    booted, manual = tmp_path / "booted.log", tmp_path / "manual.log"
    launches = f"""
[launches.booted]
log = "{booted}"
engine = "llamacpp"
command = {_toml_list(_server(READY))}
start = "on_boot"

[launches.manual]
log = "{manual}"
engine = "llamacpp"
command = {_toml_list(_server(READY))}
"""
    config = _config(tmp_path, launches, sshd=sshd)
    with socket.socket() as probe:  # a port `watchdog stop --config` can read from the config
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config.write_text(config.read_text().replace('"127.0.0.1:0"', f'"127.0.0.1:{port}"'))
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        started = daemon.wait(event="launch started", launch="booted")
        daemon_groups.append(started["pid"])
        daemon.wait(event="transition", launch="booted", state="ready")
        assert not manual.exists()
        assert [e for e in daemon.seen if e.get("event") == "launch started"] == [started]
        # the daemon and its credentials found from its config
        stopped = _cli("stop", "booted", "--config", str(config), password="")
        assert stopped.returncode == 0, stopped.stderr
        daemon.wait(event="transition", launch="booted", state="stopped")
    finally:
        daemon.close()
