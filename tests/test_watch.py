"""`watchdog watch`: follows a live log (locally and over real OpenSSH) and returns at the verdict."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from sshd_server import SSHDServer, assert_no_reader_left

from watchdog.cli import build_parser
from watchdog.watch import watch

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
async def test_unknown_host_key_is_refused(sshd: SSHDServer, tmp_path: Path) -> None:
    """An unknown host key is refused with exit 69 from the command line."""
    from watchdog.cli import main  # noqa: PLC0415

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
