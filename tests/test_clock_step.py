"""A running daemon whose wall clock is stepped (libfaketime): its alerts are neither held nor hurried."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from daemon_process import DaemonProcess
from test_remember import CRASH, DEADLINE, Hook, _config

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
REQUIRED = os.environ.get("WATCHDOG_REQUIRE_FAKETIME") == "1"

pytestmark = pytest.mark.skipif(
    not LIBFAKETIME.exists() and not REQUIRED, reason="libfaketime is not installed (Debian package faketime)"
)


@pytest.fixture
def hook() -> Any:
    receiver = Hook()
    yield receiver
    receiver.close()


@pytest.mark.parametrize("step", ["-3600", "-300", "-90"])
def test_a_daemon_whose_clock_steps_back_still_alerts_at_once(
    tmp_path: Path, hook: Hook, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's wall clock steps back (90 s, 5 min, an hour: a clock corrected at boot, a VM restored from a
    snapshot) after a first crash alert: the next crash is alerted as soon as it happens, not once the clock
    has caught up again."""
    assert LIBFAKETIME.exists(), "WATCHDOG_REQUIRE_FAKETIME=1 but libfaketime is not installed"
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    monkeypatch.setenv("LD_PRELOAD", str(LIBFAKETIME))
    monkeypatch.setenv("FAKETIME_TIMESTAMP_FILE", str(offset))
    monkeypatch.setenv("FAKETIME_NO_CACHE", "1")
    monkeypatch.setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1")
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    config = _config(tmp_path, hook, {"first": first, "second": second})
    first.write_bytes(CRASH.read_bytes())
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        hook.wait_for("first/1/crashed")
        daemon.wait(event="alert delivered", key="first/1/crashed")
        offset.write_text(
            f"{step}\n"
        )  # the daemon's time() is now `step` seconds off; its monotonic time is not
        second.write_bytes(CRASH.read_bytes())
        hook.wait_for("second/1/crashed", deadline=15.0)
        daemon.stop()
    finally:
        daemon.close()
    assert hook.keys().count("second/1/crashed") == 1
