"""`watchdog launch`: starts a stand-in server detached (here and over real OpenSSH), follows it from where its
run begins in the log, ends its whole process group on a crash, replaces an earlier run, passes every argument
verbatim, and says plainly when the command cannot start."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import standin_server as standin
from sshd_server import SSHDServer
from standin_server import alive_in_session, end_sessions

from watchdog.cli.app import build_parser
from watchdog.cli.launch import launch, parse_host, prepare
from watchdog.exceptions import StartFailed, UsageError
from watchdog.follow.launching import LaunchCommand, kill_group, start
from watchdog.follow.sources.commands import LocalRunner

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
READY, CRASH = Path(standin.READY), Path(standin.CRASH)
DEADLINE = 30


def _server(case: Path, *extra: str, then: str = "hang") -> list[str]:
    return standin.command(str(case), *extra, then=then)


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups a test started: whatever is left of them is killed after it."""
    started: list[int] = []
    yield started
    end_sessions(started)


def _ssh(sshd: SSHDServer) -> list[str]:
    return [
        f"ssh://{sshd.user}@{sshd.host}:{sshd.port}",
        "--identity",
        str(sshd.client_key),
        "--known-hosts",
        str(sshd.known_hosts),
    ]


async def _launch(
    target: list[str], log: Path, command: list[str], *options: str
) -> tuple[int, dict[str, Any]]:
    """Run `watchdog launch TARGET --log LOG --json OPTIONS -- COMMAND` in this process: its exit code and JSON."""
    args = build_parser().parse_args(
        ["launch", *target, "--log", str(log), "--engine", "llamacpp", "--json", *options, "--", *command]
    )
    prepare(args)
    out = io.StringIO()
    with anyio.fail_after(DEADLINE):
        code = await launch(args, out=out)
    return code, json.loads(out.getvalue())


def _read(path: Path) -> bytes:
    return path.read_bytes()  # a small file, read while nothing else runs


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=DEADLINE,
        check=False,
    )


async def test_local_launch_follows_only_its_own_run(tmp_path: Path, groups: list[int]) -> None:
    """A local launch starts the server in its own session with stdin from /dev/null, records its pid, and
    reads the log from where this run begins: an older run's crash in the same log is not its verdict."""
    log = tmp_path / "server.log"
    old = _read(Path(f"{CRASH}.log"))
    _write(log, old)  # the run before crashed, in this log
    report = tmp_path / "report.json"
    code, v = await _launch(["local"], log, _server(READY, "--report", str(report)))
    groups.append(v["started"]["pid"])
    assert (code, v["state"], v["error"]) == (0, "ready", None)
    pid = v["started"]["pid"]
    assert v["started"] == {"pid": pid, "pgid": pid, "pid_file": f"{log}.pid", "log_offset": len(old)}
    assert _read(Path(f"{log}.pid")).strip() == str(pid).encode()
    seen = json.loads(_read(report))
    assert (seen["pid"], seen["pgid"], seen["sid"], seen["stdin"]) == (pid, pid, pid, "/dev/null")
    assert _read(log).startswith(old)  # appended to, never truncated


async def test_a_run_still_going_is_refused_then_replaced(tmp_path: Path, groups: list[int]) -> None:
    """A second launch on a log whose recorded run still runs is refused; with --replace that run's group is
    ended first (SIGTERM, then SIGKILL for one that ignores SIGTERM) and said."""
    log = tmp_path / "server.log"
    code, first = await _launch(["local"], log, _server(READY, "--ignore-term", "--children", "1"))
    old = first["started"]["pid"]
    groups.append(old)
    assert code == 0
    with pytest.raises(StartFailed, match=rf"pid {old}.*still runs.*--replace"):
        await _launch(["local"], log, _server(READY))
    code, second = await _launch(["local"], log, _server(READY), "--replace", "--stop-grace", "0.5")
    groups.append(second["started"]["pid"])
    assert code == 0
    assert second["replaced"]["pgid"] == old
    assert second["replaced"]["signal"] == "SIGKILL"
    assert len(second["replaced"]["pids"]) == 2
    assert alive_in_session(old) == []


async def test_stop_ends_with_sigterm_when_it_is_enough(tmp_path: Path, groups: list[int]) -> None:
    """Ending a group whose processes honour SIGTERM needs no SIGKILL, and the result says so."""
    runner = LocalRunner()
    report = tmp_path / "report.json"
    command = LaunchCommand(
        tuple(_server(READY, "--children", "2", "--report", str(report))), str(tmp_path / "x.log")
    )
    started = await start(runner, command)
    groups.append(started.pid)
    with anyio.fail_after(DEADLINE):
        while not report.exists():  # noqa: ASYNC110 - its workers are started: no event says so
            await anyio.sleep(0.02)
        killed = await kill_group(runner, started.pid, grace=20)
    assert (killed.signal, len(killed.pids)) == ("SIGTERM", 3)
    assert alive_in_session(started.pid) == []
    again = await kill_group(runner, started.pid, grace=1)
    assert (again.signal, again.pids) == (None, ())


async def test_a_process_gone_after_pgrep_listed_it_is_no_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process of the group that `pgrep` lists and that has ended by the time the kill script reads its /proc
    entry (a zombie the init reaped between the two) is not found running: nothing to stop, the launch is not
    running (a second `stop` once said "stopped process group", exit 0, on a loaded CI runner)."""
    async with await anyio.open_process(["true"]) as process:
        await process.wait()  # reaped: its pid names no process
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "pgrep").write_text(f"#!/bin/sh\necho {process.pid}\n")
    (stub / "pgrep").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub}:{os.environ['PATH']}")
    with anyio.fail_after(DEADLINE):
        killed = await kill_group(LocalRunner(), process.pid, grace=0)
    assert (killed.signal, killed.pids) == (None, ())


@pytest.mark.sshd
async def test_kill_on_crash_over_ssh_leaves_no_process(
    sshd: SSHDServer, tmp_path: Path, groups: list[int]
) -> None:
    """Over SSH, a crash verdict with --kill-on-crash ends the server and its workers (one ignoring SIGTERM)
    before the command returns, and names what it killed."""
    log = tmp_path / "server.log"
    command = _server(CRASH, "--children", "2", "--ignore-term")
    code, v = await _launch(_ssh(sshd), log, command, "--kill-on-crash", "--stop-grace", "0.5")
    pgid = v["started"]["pid"]
    groups.append(pgid)
    assert (code, v["state"], v["error"]["category"]) == (1, "crashed", "oom")
    assert v["killed"]["pgid"] == pgid
    assert v["killed"]["signal"] == "SIGKILL"
    assert len(v["killed"]["pids"]) == 3
    assert alive_in_session(pgid) == []


@pytest.mark.sshd
async def test_crash_without_kill_on_crash_leaves_it_running(
    sshd: SSHDServer, tmp_path: Path, groups: list[int]
) -> None:
    """Without --kill-on-crash the crashed server's group is left as it is (no `killed` in the JSON)."""
    log = tmp_path / "server.log"
    code, v = await _launch(_ssh(sshd), log, _server(CRASH))
    groups.append(v["started"]["pid"])
    assert (code, v["state"], "killed" in v) == (1, "crashed", False)
    assert alive_in_session(v["started"]["pid"]) != []


@pytest.mark.sshd
async def test_arguments_environment_and_directory_arrive_verbatim(
    sshd: SSHDServer, tmp_path: Path, groups: list[int]
) -> None:
    """Every argument, environment value and the working directory reach the server on the host exactly as given:
    spaces, quotes, `$`, `;`, backticks and newlines are never read by a shell."""
    log = tmp_path / "server.log"
    report = tmp_path / "report.json"
    workdir = tmp_path / "a dir; $(echo x)"
    workdir.mkdir()
    odd = [
        "two words",
        "it's",
        'say "hi"',
        "$HOME",
        "${PATH}",
        "a;b",
        "`id`",
        "$(id)",
        "line\nbreak",
        "*",
        "",
    ]
    command = [*_server(READY, "--report", str(report)), *odd]
    env = ["--env", "STANDIN_A=x y $HOME `id`", "--env", "STANDIN_B='\";"]
    code, v = await _launch(_ssh(sshd), log, command, "--cwd", str(workdir), *env)
    groups.append(v["started"]["pid"])
    assert code == 0
    seen = json.loads(_read(report))
    assert seen["argv"][-len(odd) :] == odd
    assert seen["env"] == {"STANDIN_A": "x y $HOME `id`", "STANDIN_B": "'\";"}
    assert seen["cwd"] == str(workdir)


@pytest.mark.sshd
async def test_relative_log_is_in_the_login_directory(
    sshd: SSHDServer, tmp_path: Path, groups: list[int]
) -> None:
    """Over SSH a relative --log is the login directory's, as a remote `watch` target's; --cwd does not move it."""
    name = f"i29-launch-{os.getpid()}-{tmp_path.name}.log"
    home = Path.home()
    try:
        code, v = await _launch(_ssh(sshd), Path(name), _server(READY), "--cwd", str(tmp_path))
        groups.append(v["started"]["pid"])
        assert code == 0
        assert (home / name).exists()
        assert v["started"]["pid_file"] == f"{name}.pid"
    finally:
        for path in (home / name, home / f"{name}.pid"):
            path.unlink(missing_ok=True)


def test_command_not_found_is_a_clear_usage_error(tmp_path: Path) -> None:
    """A command that does not exist on the host is one line naming it and the host, exit 64, no traceback."""
    done = _cli(
        "launch", "local", "--log", str(tmp_path / "x.log"), "--", "no-such-server-i29", "--port", "1"
    )
    assert done.returncode == 64
    assert (
        done.stderr.strip()
        == "watchdog: cannot start 'no-such-server-i29' on this machine: command not found"
    )
    assert not (tmp_path / "x.log.pid").exists()


@pytest.mark.sshd
def test_command_not_found_over_ssh(sshd: SSHDServer, tmp_path: Path) -> None:
    """Over SSH too: the command not found on the host is exit 64 with one line that names the host."""
    done = _cli("launch", *_ssh(sshd), "--log", str(tmp_path / "x.log"), "--", "no-such-server-i29")
    assert done.returncode == 64
    assert (
        done.stderr.strip()
        == f"watchdog: cannot start 'no-such-server-i29' on {sshd.host}: command not found"
    )


def test_a_directory_that_cannot_be_entered_is_said(tmp_path: Path) -> None:
    """A --cwd that does not exist is the start failing (exit 64), with the shell's own reason."""
    done = _cli(
        "launch", "local", "--log", str(tmp_path / "x.log"), "--cwd", str(tmp_path / "nope"), "--", "true"
    )
    assert done.returncode == 64
    assert "cannot start 'true' on this machine" in done.stderr
    assert "nope" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "host"),
    [
        pytest.param("local", None, id="local"),
        pytest.param("ssh://gpu1", ("gpu1", None, None), id="url"),
        pytest.param("ssh://root@gpu1:2222/", ("gpu1", "root", 2222), id="url-user-port"),
        pytest.param("root@gpu1:", ("gpu1", "root", None), id="scp"),
        pytest.param("gpu1:", ("gpu1", None, None), id="scp-host"),
        pytest.param("[::1]:", ("::1", None, None), id="scp-ipv6"),
    ],
)
def test_launch_target_names_a_host(text: str, host: tuple[str, str | None, int | None] | None) -> None:
    """A launch TARGET is `local`, `ssh://[user@]host[:port]` or `[user@]host:`."""
    assert parse_host(text) == host


@pytest.mark.parametrize(
    "text", ["gpu1", "/data/x.log", "ssh://gpu1/data/x.log", "gpu1:/data/x.log", "ssh://"]
)
def test_launch_target_that_is_not_a_host(text: str) -> None:
    """A path, or a bare word that could be one, is refused with the forms allowed."""
    with pytest.raises(UsageError, match="local"):
        parse_host(text)


def test_usage_errors_exit_64(tmp_path: Path) -> None:
    """No command, an --env that is not KEY=VALUE, and --pid (the launch knows its pid) are usage errors."""
    log = str(tmp_path / "x.log")
    for argv in (
        ["launch", "local", "--log", log],
        ["launch", "local", "--log", log, "--env", "1X=y", "--", "true"],
        ["launch", "local", "--log", log, "--pid", "4", "--", "true"],
        ["launch", "gpu1", "--log", log, "--", "true"],
    ):
        done = _cli(*argv)
        assert done.returncode == 64, argv
        assert "Traceback" not in done.stderr
