"""Make sure a systemd-journald runs here (started by hand where systemd is not PID 1), and write into it."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

JOURNALD = "/lib/systemd/systemd-journald"
STDOUT_SOCKET = "/run/systemd/journal/stdout"
READY_TIMEOUT = 15.0
# Workers of one pytest-xdist run (and runs side by side) start one journald between them
LOCK = "/tmp/watchdog-tests-journald.lock"
# The journald this process started: held for the process's life, so that its handle is never collected while
# it runs (Popen's finalizer warns "still running", which pytest turns into an error in whichever test is next)
_STARTED: list[subprocess.Popen[bytes]] = []


class JournaldUnavailable(RuntimeError):
    """journald is not installed here, or could not be started."""


def journald_running() -> bool:
    """Whether a journald takes stdout streams (what `systemd-cat` connects to)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(STDOUT_SOCKET)
        except OSError:
            return False
    return True


def ensure_journald() -> bool:
    """Start journald unless one runs; True when this call started it.

    A journald started here is left running (detached, as a system's is): the workers of a test run share it,
    and a later run finds it. One that was running already is left alone.

    Raises:
        JournaldUnavailable: journald, journalctl or systemd-cat is missing, or journald did not come up.
    """
    for program in (JOURNALD, shutil.which("journalctl"), shutil.which("systemd-cat")):
        if program is None or not os.path.exists(program):
            raise JournaldUnavailable(
                "systemd-journald, journalctl or systemd-cat is missing (Debian: systemd)"
            )
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if journald_running():
            return False
        if os.geteuid() != 0:
            raise JournaldUnavailable("journald is not running, and only root can start it")
        machine_id = Path("/etc/machine-id")
        if not machine_id.exists() or not machine_id.read_text().strip():
            # journald names its files by the machine id; a fresh container may have none
            subprocess.run(["systemd-machine-id-setup"], check=True, capture_output=True)
        process = subprocess.Popen(
            [JOURNALD],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not a child of this worker's process group: it outlives the worker
        )
        _STARTED.append(process)
        deadline = time.monotonic() + READY_TIMEOUT
        while not journald_running():
            if process.poll() is not None:
                raise JournaldUnavailable(f"systemd-journald exited with status {process.returncode}")
            if time.monotonic() > deadline:
                raise JournaldUnavailable(
                    f"systemd-journald did not open {STDOUT_SOCKET} in {READY_TIMEOUT}s"
                )
            time.sleep(0.02)
        return True


def unique_identifier(name: str) -> str:
    """A syslog identifier no other test (nor an earlier run) writes."""
    return f"wdt-{name}-{os.getpid()}-{time.monotonic_ns()}"


def open_writer(identifier: str) -> subprocess.Popen[bytes]:
    """A `systemd-cat -t identifier` whose stdin lines become the identifier's entries."""
    return subprocess.Popen(["systemd-cat", "-t", identifier], stdin=subprocess.PIPE)


def entries(identifier: str) -> int:
    """How many entries the journal holds of `identifier` (what a reader would find now)."""
    out = subprocess.run(
        ["journalctl", "-q", "--no-pager", "-o", "json", f"SYSLOG_IDENTIFIER={identifier}"],
        capture_output=True,
        check=True,
    ).stdout
    return out.count(b"\n")


def write_all(identifier: str, data: bytes, within: float = 15.0) -> None:
    """Write `data` into the journal as `systemd-cat -t identifier` does, and wait until the journal holds its
    (non-empty) lines: `systemd-cat` ends when it has written them to journald's socket, and journald stores them a moment
    later (under load, after a reader started next could look)."""
    before = entries(identifier)
    subprocess.run(["systemd-cat", "-t", identifier], input=data, check=True)
    lines = sum(1 for line in data.split(b"\n") if line)  # journald keeps no entry of an empty line
    deadline = time.monotonic() + within
    while entries(identifier) < before + lines:
        if time.monotonic() > deadline:
            raise AssertionError(f"journald did not store {lines} lines of {identifier} in {within}s")
        time.sleep(0.02)
