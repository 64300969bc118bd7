"""`watchdog watch`: follows a live log (locally and over real OpenSSH) and returns at the verdict."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from sshd_server import SSHDServer, assert_no_reader_left, readers_of

from watchdog.cli.app import build_parser
from watchdog.cli.watch import watch

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
STORIES = Path(__file__).parent / "fixtures" / "stories"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["watch", *argv])


async def _run(*argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with anyio.fail_after(20):
        code = await watch(_args(*argv, "--json"), out=out)
    return code, json.loads(out.getvalue())


async def test_ready_log_already_written(tmp_path: Path) -> None:
    """A log that is already complete is read from its start: ready, exit 0."""
    log = tmp_path / "server.log"
    shutil.copy(READY, log)
    code, v = await _run(str(log))
    assert (code, v["state"], v["engine"]) == (0, "ready", "sglang")


async def test_crash_arrives_while_following(tmp_path: Path) -> None:
    """Lines appended after the watcher started are followed; a fatal line ends it with exit 1."""
    log = tmp_path / "server.log"
    text = (STORIES / "ep8-oom-logging-noise.log").read_bytes()
    half = text.index(b"Load weight end")
    log.write_bytes(text[:half])
    result: dict[str, Any] = {}

    async def watcher() -> None:
        result["code"], result["v"] = await _run(str(log))

    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher)
        with log.open("ab") as f:
            f.write(text[half:])
    assert result["code"] == 1
    assert result["v"]["error"]["category"] == "oom"
    assert result["v"]["error"]["ranks"] == ["TP1", "TP3", "TP5", "TP6"]


async def test_stall_when_no_progress(tmp_path: Path) -> None:
    """A launch stuck in a phase with no progress for --stall-after seconds is stalled, exit 2."""
    log = tmp_path / "server.log"
    log.write_text("[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n")
    code, v = await _run(str(log), "--engine", "sglang", "--stall-after", "0.5")
    assert (code, v["state"], v["phase"]) == (2, "stalled", "loading_weights")


async def test_timeout_is_exit_2(tmp_path: Path) -> None:
    """--timeout ends a watch that has no verdict with exit 2 and `timed_out`."""
    log = tmp_path / "server.log"
    log.write_text("booting\n")
    code, v = await _run(str(log), "--timeout", "0.5")
    assert (code, v["timed_out"]) == (2, True)


async def test_process_gone_without_traceback_is_killed(tmp_path: Path) -> None:
    """--pid: the process dying with no traceback in the log is crashed, category killed, with context."""
    log = tmp_path / "server.log"
    log.write_text("[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n")
    proc = subprocess.Popen(["sleep", "1000"])  # noqa: ASYNC220 - a real process to watch die
    result: dict[str, Any] = {}

    async def watcher() -> None:
        result["code"], result["v"] = await _run(str(log), "--pid", str(proc.pid))

    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher)
        proc.kill()
        proc.wait()
    assert result["code"] == 1
    err = result["v"]["error"]
    assert err["category"] == "killed"
    assert err["context"][-1].endswith("Load weight begin. avail mem=78.81 GB")


@pytest.mark.sshd
async def test_ready_over_ssh(sshd: SSHDServer, tmp_path: Path) -> None:
    """The same verdict over a real OpenSSH connection, host key checked against known_hosts."""
    log = tmp_path / "remote.log"
    shutil.copy(READY, log)
    target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{log}"
    code, v = await _run(target, "--identity", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts))
    assert (code, v["state"], v["bytes_read"]) == (0, "ready", log.stat().st_size)


@pytest.mark.sshd
async def test_unknown_host_key_is_refused(
    sshd: SSHDServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown host key is refused with exit 69 from the command line; the message names the known_hosts
    file and how to record the key, `--accept-new-host-key` among them."""
    from watchdog.cli.app import main  # noqa: PLC0415

    empty = tmp_path / "known_hosts"
    empty.write_text("")
    target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{READY}"
    code = await anyio.to_thread.run_sync(
        lambda: main(
            [
                "watch",
                target,
                "--identity",
                str(sshd.client_key),
                "--known-hosts",
                str(empty),
                "--timeout",
                "10",
            ]
        )
    )
    assert code == 69
    said = capsys.readouterr().err
    assert "--accept-new-host-key" in said
    assert str(empty) in said


@pytest.mark.sshd
async def test_crash_over_ssh_leaves_no_remote_tail(sshd: SSHDServer, tmp_path: Path) -> None:
    """A crash verdict over SSH; after it, no remote process follows the log any more."""
    log = tmp_path / "remote.log"
    shutil.copy(STORIES / "ep8-oom-logging-noise.log", log)
    target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{log}"
    code, v = await _run(target, "--identity", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts))
    assert (code, v["error"]["category"], v["error"]["ranks"]) == (1, "oom", ["TP1", "TP3", "TP5", "TP6"])
    await assert_no_reader_left(log)


@pytest.mark.sshd
async def test_stall_over_ssh(sshd: SSHDServer, tmp_path: Path) -> None:
    """A launch with no progress over SSH is stalled (exit 2) in the phase it stopped in."""
    log = tmp_path / "remote.log"
    log.write_text("[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n")
    target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{log}"
    code, v = await _run(
        target,
        "--identity",
        str(sshd.client_key),
        "--known-hosts",
        str(sshd.known_hosts),
        "--engine",
        "sglang",
        "--stall-after",
        "1",
    )
    assert (code, v["state"], v["phase"]) == (2, "stalled", "loading_weights")
    await assert_no_reader_left(log)


def _fake_nvidia_smi(bin_dir: Path, counter: Path, step_mib: int) -> None:
    """An `nvidia-smi` that prints the real H200 sample, its memory growing by `step_mib` per call."""
    sample = (Path(__file__).parent / "fixtures" / "gpu" / "query-40g.csv").read_text().strip()
    fields = sample.split(", ")
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}\n"
        f'echo "{", ".join(fields[:3])}, $(({fields[3]} + n * {step_mib})), {", ".join(fields[4:])}"\n'
    )
    script.chmod(0o755)


@pytest.mark.parametrize(
    ("step_mib", "stalled"),
    [pytest.param(1024, False, id="memory-growing"), pytest.param(0, True, id="memory-flat")],
)
async def test_gpu_memory_growth_is_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step_mib: int, stalled: bool
) -> None:
    """--gpu: a quiet phase that keeps filling GPU memory is not stalled; memory per GPU is a fact."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_nvidia_smi(bin_dir, tmp_path / "calls", step_mib)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    log = tmp_path / "server.log"
    log.write_text("[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n")
    code, v = await _run(
        str(log),
        "--engine",
        "sglang",
        "--gpu",
        "--gpu-interval",
        "0.2",
        "--stall-after",
        "1",
        "--timeout",
        "3",
    )
    assert (code, v["state"] == "stalled") == (2, stalled)
    assert v.get("timed_out", False) is not stalled
    assert v["facts"]["gpu_mem_total_bytes"] == {"0": 143771 * 2**20}
    assert v["facts"]["gpu_mem_used_bytes"]["0"] >= 38675 * 2**20


async def test_notify_posts_the_verdict(tmp_path: Path) -> None:
    """--notify POSTs the verdict JSON to a real HTTP receiver on loopback."""
    received: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        log = tmp_path / "server.log"
        shutil.copy(READY, log)
        url = f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token"
        code, v = await _run(str(log), "--notify", url)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert code == 0
    assert received == [v]


async def test_live_view_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal the live view draws, then the verdict is printed as text."""
    log = tmp_path / "server.log"
    shutil.copy(READY, log)
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", encoding="utf-8", closefd=False) as tty:
            with anyio.fail_after(20):
                code = await watch(_args(str(log)), out=tty)
        os.set_blocking(master, False)
        screen = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(master, 65536):
                screen += chunk
    finally:
        os.close(master)
        os.close(slave)
    assert code == 0
    assert b"sglang ready after 38s" in screen


def _ssh_home(tmp_path: Path, sshd: SSHDServer, monkeypatch: pytest.MonkeyPatch, extra: str = "") -> None:
    """A HOME whose ~/.ssh/config names the test sshd by alias, and whose known_hosts trusts it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(sshd.known_hosts.read_text())
    (home / ".ssh" / "config").write_text(
        f"Host gpu-alias\n  HostName {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n{extra}"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.mark.sshd
async def test_ssh_config_alias_and_default_known_hosts(
    sshd: SSHDServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`alias:/path` is resolved through ~/.ssh/config (HostName, Port, User, IdentityFile); keys from ~/.ssh/known_hosts."""
    _ssh_home(tmp_path, sshd, monkeypatch)
    log = tmp_path / "remote.log"
    shutil.copy(READY, log)
    code, v = await _run(f"gpu-alias:{log}")
    assert (code, v["state"]) == (0, "ready")


@pytest.mark.sshd
async def test_ssh_config_proxyjump(
    sshd: SSHDServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host behind a ProxyJump (here the same sshd as its own jump host) is reached through it."""
    extra = (
        f"Host behind-jump\n  HostName {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  ProxyJump gpu-alias\n"
    )
    _ssh_home(tmp_path, sshd, monkeypatch, extra)
    log = tmp_path / "remote.log"
    shutil.copy(READY, log)
    code, v = await _run(f"behind-jump:{log}")
    assert (code, v["state"]) == (0, "ready")


@pytest.mark.sshd
@pytest.mark.parametrize(
    ("signal_number", "exit_code"),
    [pytest.param(2, 130, id="ctrl-c"), pytest.param(9, -9, id="sigkill")],
)
async def test_no_remote_tail_left_when_the_watcher_is_stopped(
    sshd: SSHDServer, tmp_path: Path, signal_number: int, exit_code: int
) -> None:
    """Ctrl-C or SIGKILL of `watchdog watch` leaves no process on the host following the log."""
    log = tmp_path / "remote.log"
    log.write_text("[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n")
    target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{log}"
    argv = ["watch", target, "--identity", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts)]
    async with await anyio.open_process(
        [sys.executable, "-m", "watchdog.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        seen = b""
        with anyio.fail_after(20):
            async for chunk in proc.stdout:  # the watcher says when the remote tail streams
                seen += chunk
                if b"loading_weights" in seen:
                    break
        assert readers_of(str(log)), "the remote follower should be running"
        proc.send_signal(signal_number)
        with anyio.fail_after(20):
            assert await proc.wait() == exit_code
    await assert_no_reader_left(log)


@pytest.mark.sshd
async def test_connection_cut_while_log_grows_loses_and_repeats_nothing(
    sshd: SSHDServer, tmp_path: Path
) -> None:
    """The SSH session is killed 3 times while the log grows at ~5k lines/s: every line is read exactly once."""
    log = tmp_path / "remote.log"
    log.write_text("[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n")
    target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{log}"
    total = 10_000
    result: dict[str, Any] = {}

    async def watcher() -> None:
        result["code"], result["v"] = await _run(
            target,
            "--engine",
            "sglang",
            "--identity",
            str(sshd.client_key),
            "--known-hosts",
            str(sshd.known_hosts),
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher)
        with log.open("a") as f:
            for i in range(total):
                f.write(f"[2025-01-23 19:35:16 TP0] loading step {i}\n")
                if i % 50 == 49:
                    f.flush()
                    await anyio.sleep(0.01)  # pace the writer at ~5k lines/s
                if i in (2_500, 5_000, 7_500):
                    assert sshd.kill_sessions(), "a session to cut"
            f.write("[2025-01-23 19:35:33] The server is fired up and ready to roll!\n")
    assert result["code"] == 0
    assert result["v"]["lines_read"] == total + 2
    assert result["v"]["bytes_read"] == log.stat().st_size


@pytest.mark.parametrize(
    ("engine", "state", "code"),
    [
        pytest.param("vllm", "ready", 0, id="silent-vllm-log-health-200-is-ready"),
        pytest.param("sglang", "timeout", 2, id="sglang-health-200-before-weights-is-not-ready"),
    ],
)
async def test_health_200_in_a_silent_log(tmp_path: Path, engine: str, state: str, code: int) -> None:
    """--health: a 200 confirms ready when the log says nothing (--log-level warning), except for SGLang."""

    class Healthy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        log = tmp_path / "server.log"
        log.write_text("WARNING 09-28 15:40:00 [config.py:1] a warning only\n")
        url = f"http://127.0.0.1:{server.server_address[1]}/health"
        code_got, v = await _run(str(log), "--engine", engine, "--health", url, "--timeout", "5")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert code_got == code
    assert (v["state"] if not v.get("timed_out") else "timeout") == state


@pytest.mark.sshd
async def test_ssh_agent_keys_are_used(
    sshd: SSHDServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no --identity, the key held by a running ssh-agent authenticates."""
    agent = shutil.which("ssh-agent")
    if agent is None:
        pytest.skip("ssh-agent is not installed")
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen([agent, "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)  # noqa: ASYNC220
    try:
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        with anyio.fail_after(10):
            while not sock.exists():  # noqa: ASYNC110 - the agent creates its socket when it is ready
                await anyio.sleep(0.01)
        added = await anyio.run_process(["ssh-add", str(sshd.client_key)], check=False)
        assert added.returncode == 0, added.stderr
        log = tmp_path / "remote.log"
        shutil.copy(READY, log)
        target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{log}"
        code, v = await _run(target, "--known-hosts", str(sshd.known_hosts))
    finally:
        proc.terminate()
        proc.wait()
    assert (code, v["state"]) == (0, "ready")


async def test_unreachable_host_is_exit_69(capsys: pytest.CaptureFixture[str]) -> None:
    """A host that refuses the connection is exit 69 with a message that names it."""
    from watchdog.cli.app import main  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        code = await anyio.to_thread.run_sync(lambda: main(["watch", f"ssh://root@127.0.0.1:{port}/x.log"]))
    assert code == 69
    assert f"127.0.0.1 port {port}" in capsys.readouterr().err


async def _read_until(stream: Any, seen: bytearray, needle: bytes) -> None:
    # what a subprocess prints, read until `needle` shows (a fail_after around it bounds the wait)
    while needle not in seen:
        seen += await stream.receive()


async def test_process_not_started_yet_is_waited_for_under_timeout(tmp_path: Path) -> None:
    """`timeout 30 watchdog watch --process PAT` with no server running yet says it waits (no instant kill);
    the `timeout` wrapper's own command line, which holds PAT, is not taken for the server, so the server
    started later and killed is a crash."""
    log = tmp_path / "server.log"
    log.write_text("INFO 12-02 03:00:00 [api_server.py:100] vLLM API server version 0.6.0\n")
    pattern = f"wdtest-server-{os.getpid()}-{threading.get_ident() % 10**6}"
    argv = ["timeout", "30", sys.executable, "-m", "watchdog.cli", "watch", str(log), "--process", pattern]
    seen = bytearray()
    async with await anyio.open_process(argv, stderr=subprocess.STDOUT) as watcher:
        assert watcher.stdout is not None
        with anyio.fail_after(20):
            await _read_until(watcher.stdout, seen, b"waiting for a process matching")
        assert watcher.returncode is None, seen.decode()
        # the server: a shell whose command line holds the pattern
        async with await anyio.open_process(["sh", "-c", "sleep 1000", pattern]) as server:
            with anyio.fail_after(20):
                await _read_until(watcher.stdout, seen, b"is running")
            server.kill()
            await server.wait()
            with anyio.fail_after(20):
                async for chunk in watcher.stdout:
                    seen += chunk
                code = await watcher.wait()
    assert code == 1, seen.decode()
    assert b"crashed" in seen


async def test_usage_error_then_exit_is_that_error_not_killed(tmp_path: Path) -> None:
    """--pid of an engine that printed one usage line (no rule knows it) and exited 1: crashed with that line
    as the error, not `killed` with the OOM-killer hint."""
    log = tmp_path / "server.log"
    script = f"echo 'Invalid value for --port: abc' >> {log}; exit 1"
    engine = subprocess.Popen(["sh", "-c", script])  # noqa: ASYNC220 - a real process that exits 1
    assert engine.wait() == 1
    code, v = await _run(str(log), "--pid", str(engine.pid))
    assert (code, v["state"]) == (1, "crashed")
    assert v["error"]["category"] != "killed"
    assert v["error"]["summary"] == "Invalid value for --port: abc"
    assert "OOM" not in v["error"]["hint"]


class _HungReads:
    """`os` as the local source sees it, but every `pread` blocks in a real read of a FIFO whose writer never
    writes, as a read on a hung NFS mount does (until `release`)."""

    def __init__(self, fifo: Path) -> None:
        self._real = os
        self._reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._writer = os.open(fifo, os.O_WRONLY)
        os.set_blocking(self._reader, True)
        self.hung = threading.Event()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        self.hung.set()
        os.read(self._reader, 1)  # blocks: the writer never writes (EOF once it is closed)
        return b""

    def release(self) -> None:
        with self._lock:
            if self._writer >= 0:
                os.close(self._writer)
                self._writer = -1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
async def test_timeout_returns_while_a_read_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`watch --timeout 1` on a log whose reads hang (a dead NFS server) still returns at its timeout, exit 2:
    the hung read is left to its thread."""
    from watchdog.follow.sources import local as local_module  # noqa: PLC0415

    log = tmp_path / "server.log"
    log.write_text("booting\n")
    fifo = tmp_path / "hang"
    os.mkfifo(fifo)
    hung = _HungReads(fifo)
    monkeypatch.setattr(local_module, "os", hung)
    monkeypatch.setattr(
        local_module, "_on_local_fs", lambda fd: False
    )  # a network file system: reads in threads
    # a bound, should the read not be left behind: it then returns after 10 s (and the test fails, not hangs)
    released = threading.Event()

    def release() -> None:
        released.set()
        hung.release()

    safety = threading.Timer(10, release)
    safety.start()
    try:
        out = io.StringIO()
        with anyio.fail_after(20):
            code = await watch(_args(str(log), "--timeout", "1", "--json"), out=out)
    finally:
        safety.cancel()
        hung.release()
    assert hung.hung.is_set(), "the read never started"
    assert (code, json.loads(out.getvalue())["timed_out"]) == (2, True)
    assert not released.is_set(), "watch --timeout 1 waited for the hung read"


_LOGS_WHILE_FOLLOWING = """
import sys

import structlog

from watchdog.cli.app import main
from watchdog.follow.follower import LaunchFollower

run = LaunchFollower.run


async def run_and_log(self, **kwargs):
    # what a part of the follower logs while it follows (the SSH pool's "connection made again", a warning)
    structlog.get_logger("watchdog.follow").info("SSH connection made again", host="gpu1")
    structlog.get_logger("watchdog.follow").warning("checkpoint not saved", error="disk full")
    return await run(self, **kwargs)


LaunchFollower.run = run_and_log
sys.exit(main(["watch", "--json", sys.argv[1]]))
"""


def test_what_the_follower_logs_never_reaches_watch_json_output(tmp_path: Path) -> None:
    """`watch --json`'s standard output is the verdict alone: an event the follower's parts log goes to
    standard error (warnings and up, no colour in a pipe), never into the JSON a script parses."""
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "vllm" / "captured-vllm-bad-dtype-cpu.log").read_bytes())
    script = tmp_path / "watch_logging.py"
    script.write_text(_LOGS_WHILE_FOLLOWING)
    done = subprocess.run(
        [sys.executable, str(script), str(log)], capture_output=True, text=True, timeout=120, check=False
    )
    verdict = json.loads(done.stdout)  # the whole of standard output is one JSON document
    assert verdict["state"] == "crashed"
    assert "checkpoint not saved" in done.stderr
    assert "connection made again" not in done.stderr + done.stdout  # info: below a command's level
    assert "\x1b[" not in done.stderr
