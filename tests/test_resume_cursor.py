"""A daemon restarted in the middle of a journald or Kubernetes pod log resumes by the source's cursor: every line
read once, the launch's incarnation unchanged, a new stream (a restarted container) a new incarnation."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from daemon_process import DaemonProcess
from http_client import get
from journald_server import unique_identifier, write_all
from k8s_server import RunningCluster, fixture_pod, running_cluster

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0
STOPS = ["SIGTERM", "SIGKILL"]


def _lines(path: Path, tmp_path: Path) -> tuple[list[bytes], Path]:
    """The log's lines as journald keeps them (each ends in a newline, without the spaces before it), and a file
    of them for `watchdog replay`."""
    lines = [line.rstrip() + b"\n" for line in path.read_bytes().splitlines()]
    kept = tmp_path / path.name
    kept.write_bytes(b"".join(lines))
    return lines, kept


def _config(tmp_path: Path, launch: str) -> Path:
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\nlog_format = "json"\n\n'
        f"[launches.L]\n{launch}"
    )
    return config


def _status(url: str) -> dict[str, Any]:
    status: dict[str, Any] = get(url + "status", timeout=DEADLINE).json()[0]
    return status


def _until(what: str, check: Callable[[], Any]) -> Any:
    """`check()`'s first true value, asked again until the deadline."""
    end = time.monotonic() + DEADLINE
    while not (got := check()):
        if time.monotonic() > end:
            raise AssertionError(f"not within {DEADLINE}s: {what}")
        time.sleep(0.02)  # a poll's pace, not a wait for something to happen
    return got


def _read_to(url: str, lines: int) -> dict[str, Any]:
    """The daemon's /status once its launch has read `lines` lines."""
    return _until(f"{lines} lines read", lambda: (s := _status(url))["lines_read"] == lines and s)  # type: ignore[no-any-return]


def _checkpointed(state: Path) -> int | None:
    """The offset of launch L's checkpoint in the state file (None: none yet)."""
    db = state / "watchdog.sqlite3"
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT read_offset FROM checkpoints WHERE launch = 'L'").fetchone()
    except sqlite3.OperationalError:  # the schema is not there yet
        return None
    finally:
        conn.close()
    return None if row is None else int(row[0])


def _stop(daemon: DaemonProcess, how: str) -> None:
    """SIGTERM (its last checkpoint saved) or SIGKILL (what was not checkpointed is lost)."""
    if how == "SIGTERM":
        daemon.stop()
    else:
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait(timeout=DEADLINE)
    daemon.close()


def _replayed(path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "replay", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    ).stdout
    replayed: dict[str, Any] = json.loads(out)
    return replayed


def _key(v: dict[str, Any]) -> tuple[Any, ...]:
    e = v.get("error") or {}
    return (v["state"], v["phase"], e.get("category"), e.get("summary"), v["lines_read"], v["bytes_read"])


def _resumed(daemon: DaemonProcess) -> list[int]:
    return [e["offset"] for e in daemon.seen if e.get("event") == "resuming from checkpoint"]


IGNORED = "checkpoint ignored; reading the log from its start"


def _ignored(daemon: DaemonProcess) -> list[str]:
    return [e["reason"] for e in daemon.seen if e.get("event") == IGNORED]


def _run_in_three_parts(
    tmp_path: Path, launch: str, how: str, write: Callable[[list[bytes]], None], lines: list[bytes]
) -> tuple[DaemonProcess, DaemonProcess, dict[str, Any], tuple[int, int]]:
    """A daemon reads the log's first part (checkpointed) and second part, is stopped `how`, the third part is
    written, and a daemon on the same state reads on until the launch's verdict: both daemons, the second's
    /status, and the offsets of the first and second parts' ends."""
    # the second part ends with line 43, which begins the graph capture
    first, second = lines[:20], lines[20:43]
    ends = (len(b"".join(first)), len(b"".join(first + second)))
    config = _config(tmp_path, launch)
    write(first)
    before = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = before.wait(event="http_listening")["url"]
        _read_to(url, len(first))
        _until("the first part checkpointed", lambda: _checkpointed(tmp_path / "state") == ends[0])
        write(second)
        _read_to(url, len(first) + len(second))
    finally:
        _stop(before, how)
    write(lines[43:])
    after = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = after.wait(event="http_listening")["url"]
        after.wait(event="announced", launch="L")
        status = _read_to(url, len(lines))
        after.stop()
    finally:
        after.close()
    return before, after, status, ends


def _each_line_once(
    after: DaemonProcess, status: dict[str, Any], ends: tuple[int, int], how: str, log: Path
) -> None:
    """The restarted daemon resumed at a checkpoint (with SIGKILL perhaps the first part's, the second read
    again), its verdict, lines and bytes those of the whole log's replay, its launch the first incarnation."""
    assert not _ignored(after)
    resumed = _resumed(after)
    assert resumed in ([ends[1]], [ends[0]] if how == "SIGKILL" else [ends[1]]), resumed
    assert _key(status) == _key(_replayed(log))
    assert (status["incarnation"], status["incarnations"]) == (1, 1)


# -- journald ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", STOPS)
def test_a_daemon_restarted_mid_journal_reads_each_entry_once(
    tmp_path: Path, journald: None, how: str
) -> None:
    """A crash log written to journald (`systemd-cat -t`) in three parts, the daemon stopped after the second: the
    restarted daemon resumes by the journal's cursor and its analysis has seen every line exactly once."""
    identifier = unique_identifier("resume")
    lines, log = _lines(CRASH, tmp_path)
    _, after, status, ends = _run_in_three_parts(
        tmp_path,
        f'unit = "identifier={identifier}"\n',
        how,
        lambda part: write_all(identifier, b"".join(part)),
        lines,
    )
    _each_line_once(after, status, ends, how, log)


# -- Kubernetes ----------------------------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    """The stand-in API server runs on asyncio (aiohttp)."""
    return "asyncio"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[RunningCluster]:
    """A stand-in Kubernetes API server over TLS with a kubeconfig for it."""
    async with running_cluster(tmp_path) as running:
        yield running


def _pod() -> dict[str, Any]:
    pod = fixture_pod("pod-kubeshark-worker-restarted.json")
    pod["metadata"].update(name="vllm-0", namespace="ml", uid="uid-vllm-0", labels={"app": "vllm"})
    pod["status"]["containerStatuses"][0].update(restartCount=0, lastState={})
    return pod


def _pod_launch(api: RunningCluster) -> str:
    return f'pod = "ml/vllm-0"\nkubeconfig = "{api.kubeconfig}"\n'


def _writer(api: RunningCluster, portal: anyio.from_thread.BlockingPortal) -> Callable[[list[bytes]], None]:
    """The pod's container writes lines (from the test's thread), four to a nanosecond, a part's first ones at
    the time of the part before's last line (a cursor counts the lines at its time)."""

    async def log(part: list[bytes]) -> None:
        await api.cluster.log("ml", "vllm-0", part[:2], step=0, same_time=2)
        await api.cluster.log("ml", "vllm-0", part[2:], same_time=4)

    def write(part: list[bytes]) -> None:
        portal.call(log, part)

    return write


@pytest.mark.anyio
@pytest.mark.parametrize("how", STOPS)
async def test_a_daemon_restarted_mid_pod_log_reads_each_line_once(
    api: RunningCluster, tmp_path: Path, how: str
) -> None:
    """A crash log a pod writes in three parts (lines sharing times), the daemon stopped after the second: the
    restarted daemon resumes by the log's time cursor and its analysis has seen every line exactly once."""
    api.cluster.add_pod(_pod())
    lines, log = _lines(CRASH, tmp_path)
    async with anyio.from_thread.BlockingPortal() as portal:
        _, after, status, ends = await anyio.to_thread.run_sync(
            _run_in_three_parts, tmp_path, _pod_launch(api), how, _writer(api, portal), lines
        )
    _each_line_once(after, status, ends, how, log)


def _history(state: Path) -> list[tuple[int, str]]:
    out = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "history", "L", "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=DEADLINE,
    ).stdout
    return sorted((r["incarnation"], r["state"]) for r in json.loads(out))


@pytest.mark.anyio
@pytest.mark.parametrize("how", STOPS)
async def test_a_pod_restarted_while_the_daemon_is_down_is_the_next_incarnation(
    api: RunningCluster, tmp_path: Path, how: str
) -> None:
    """The daemon reads a pod's log to mid-start and stops; the container crashes, its last words unread, and the
    kubelet starts it again (restartCount 1), the new instance becoming ready: the restarted daemon reads the
    dead instance's rest (its crash, #1's verdict) and the new instance as incarnation #2, from its first line."""
    api.cluster.add_pod(_pod())
    crash, _ = _lines(CRASH, tmp_path)
    ready, ready_log = _lines(READY, tmp_path)
    config = _config(tmp_path, _pod_launch(api))
    await api.cluster.log("ml", "vllm-0", crash[:43], same_time=4)

    def first() -> None:
        daemon = DaemonProcess(config, deadline=DEADLINE)
        try:
            url = daemon.wait(event="http_listening")["url"]
            _read_to(url, 43)
            _until("a checkpoint", lambda: _checkpointed(tmp_path / "state"))
        finally:
            _stop(daemon, how)

    await anyio.to_thread.run_sync(first)
    await api.cluster.log("ml", "vllm-0", crash[43:], same_time=4)
    await api.cluster.terminate("ml", "vllm-0", reason="Error", exit_code=1)
    await api.cluster.restart("ml", "vllm-0")
    await api.cluster.log("ml", "vllm-0", ready, same_time=4)

    def second() -> tuple[DaemonProcess, dict[str, Any]]:
        daemon = DaemonProcess(config, deadline=DEADLINE)
        try:
            url = daemon.wait(event="http_listening")["url"]
            daemon.wait(event="announced", launch="L", state="ready")
            status = _read_to(url, len(crash) + len(ready))  # the dead instance's lines too, each once
            daemon.stop()
        finally:
            daemon.close()
        return daemon, status

    after, status = await anyio.to_thread.run_sync(second)
    assert _resumed(after), _ignored(after)
    replayed = _replayed(ready_log)
    assert _key(status)[:4] == _key(replayed)[:4]
    assert status["bytes_read"] == len(b"".join(crash + ready))
    assert (status["incarnation"], status["incarnations"]) == (2, 2)
    assert await anyio.to_thread.run_sync(_history, tmp_path / "state") == [(1, "crashed"), (2, "ready")]
