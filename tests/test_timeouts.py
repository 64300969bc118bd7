"""The suite's per-test timeout (pyproject's `timeout`, tests/conftest.py): a test that hangs on a child
process fails within seconds of its timeout, ends that child, and the tests after it run; and a run started
with SIGINT ignored (a background job of a shell) still stops a child with Ctrl-C's signal."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
RUN_DEADLINE = 90.0  # the inner run's deadline: its hangs end after 2 s each, far within it

HANGING = """
import signal
import subprocess
import sys

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_async_waits_for_a_child_that_never_ends():
    async with await anyio.open_process(["sleep", "{mark}1"]):
        await anyio.sleep_forever()


@pytest.mark.anyio
async def test_async_after_it():
    await anyio.lowlevel.checkpoint()


def test_sync_waits_for_a_child_that_never_ends():
    with subprocess.Popen(["sleep", "{mark}2"]) as child:
        child.wait()


def test_sync_after_it():
    pass


def test_sync_runs_an_event_loop_of_its_own_that_never_ends():
    anyio.run(anyio.sleep_forever)


def test_sync_after_its_loop():
    pass


@pytest.mark.timeout(30)
@pytest.mark.anyio
async def test_ctrl_c_stops_a_child():
    code = "import time\\ntry:\\n    print('ready', flush=True)\\n    time.sleep(1000)\\nexcept KeyboardInterrupt:\\n    raise SystemExit(130)"
    argv = [sys.executable, "-c", code, "{mark}3"]
    async with await anyio.open_process(argv, stdout=subprocess.PIPE) as child:
        with anyio.fail_after(20):
            lines = BufferedByteReceiveStream(child.stdout)
            assert await lines.receive_until(b"\\n", 100) == b"ready"  # its SIGINT handler is in place
            child.send_signal(signal.SIGINT)
            assert await child.wait() == 130
"""


def _sleepers(mark: str) -> list[int]:
    """The processes left of the inner run (their command lines carry `mark`)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if mark.encode() in cmdline and b"pytest" not in cmdline:
                found.append(int(pid))
    return found


def test_a_test_hanging_on_its_child_fails_at_its_timeout_and_ends_the_child(tmp_path: Path) -> None:
    """Run under SIGINT ignored with a 2 s timeout: each hanging test (sync, async, sync with an event loop of
    its own) fails with the timeout, the test after each passes, the child stopped by SIGINT is, and no child is
    left running."""
    mark = f"1000.{random.randrange(10**8):08d}"
    (tmp_path / "test_hanging.py").write_text(HANGING.replace("{mark}", mark))
    argv = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "conftest",
        "-o", "timeout=2", "-o", "timeout_method=signal", "-o", "addopts=", "--rootdir", str(tmp_path),
        str(tmp_path / "test_hanging.py"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        ["bash", "-c", 'trap "" INT; exec "$@"', "bash", *argv],  # SIGINT ignored, as in a background job
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE,
        check=False,
    )
    out = run.stdout + run.stderr
    assert "3 failed, 4 passed" in out, out
    assert "FAILED test_hanging.py::test_async_waits_for_a_child_that_never_ends" in out
    assert "the test ran past its timeout of 2.0 s" in out
    assert "FAILED test_hanging.py::test_sync_waits_for_a_child_that_never_ends" in out
    # a sync test's own event loop is no async test's: its failure raised, the run goes on (no hard stop)
    assert "FAILED test_hanging.py::test_sync_runs_an_event_loop_of_its_own_that_never_ends" in out
    # pytest-timeout's own words: "Timeout (>2.0s) from pytest-timeout." (2.4), "Timeout >2.0s" (2.3, the floor)
    assert re.search(r"Timeout \(?>2\.0s", out), out
    assert _sleepers(mark) == []
    assert run.returncode == 1
