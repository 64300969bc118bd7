"""The test process's child processes: which exist, and ending them (used by conftest.py).

A test that starts a program (`watchdog run`, `watchdog watch`, sshd, Prometheus, Chromium) and is then
interrupted (its per-test timeout, Ctrl-C) must not hang waiting for it nor leave it running: the children
it started are ended (SIGTERM, then SIGKILL after a deadline) and reaped, so that whatever the test awaits
(a pipe's end, `await process.wait()`, `Popen.wait()`) returns at once. And since a program inherits an
ignored SIGINT (a shell starts a background job so), the test process takes SIGINT back first: a child that
a test stops with Ctrl-C's signal gets it.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import suppress


def descendants(pid: int | None = None) -> set[int]:
    """Every live process under `pid` (default: this one), children of any of its threads included."""
    found: set[int] = set()
    todo = [os.getpid() if pid is None else pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as file:
                    children = {int(child) for child in file.read().split()}
            except OSError:
                continue
            for child in children - found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, dead and not reaped yet, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            state = file.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in {"Z", "X"}


def end(pids: set[int], deadline: float = 3.0) -> None:
    """SIGTERM each of `pids`, then SIGKILL those still running after `deadline` seconds. Their owners (a
    `Popen`, an anyio `Process`) reap them, and see them exited."""
    pids = pids - {os.getpid()}
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    end_at = time.monotonic() + deadline
    while any(_alive(pid) for pid in pids) and time.monotonic() < end_at:
        time.sleep(0.02)
    for pid in pids:
        if _alive(pid):
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
