"""A running daemon whose wall clock is stepped (libfaketime): its alerts are neither held nor hurried."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import unavailable
from daemon_process import DaemonProcess
from sshd_server import SSHDUnavailable, start_sshd, stop_sshd
from test_remember import CRASH, DEADLINE, Hook, _config

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
REQUIRED = os.environ.get("WATCHDOG_REQUIRE_FAKETIME") == "1"

pytestmark = pytest.mark.skipif(
    not LIBFAKETIME.exists() and not REQUIRED, reason="libfaketime is not installed (Debian package faketime)"
)


GRACE = 6.0  # the host-outage test's unreachable_after


def _fake_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file whose offset the daemon's wall clock (and only it) follows from now: '+0' at first."""
    assert LIBFAKETIME.exists(), "WATCHDOG_REQUIRE_FAKETIME=1 but libfaketime is not installed"
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    monkeypatch.setenv("LD_PRELOAD", str(LIBFAKETIME))
    monkeypatch.setenv("FAKETIME_TIMESTAMP_FILE", str(offset))
    monkeypatch.setenv("FAKETIME_NO_CACHE", "1")
    monkeypatch.setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1")
    return offset


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
    offset = _fake_time(tmp_path, monkeypatch)
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


@pytest.mark.sshd
@pytest.mark.parametrize("step", ["+3600", "-3600"])
def test_a_hosts_outage_is_alerted_after_its_grace_whatever_the_wall_clock_does(
    tmp_path: Path, hook: Hook, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host's sshd goes away and the daemon's wall clock steps (an hour forward, an hour back) during the
    outage: the unreachable alert comes once the grace has passed (not at the next check after a forward
    step, nor an hour late after a backward one)."""
    try:
        server = start_sshd(tmp_path / "sshd")  # before LD_PRELOAD: only the daemon's clock is stepped
    except SSHDUnavailable as exc:
        unavailable(str(exc))
    offset = _fake_time(tmp_path, monkeypatch)
    log = tmp_path / "remote.log"
    log.write_bytes(b"")
    config = _config(tmp_path, hook, {})
    config.write_text(
        config.read_text().replace("[daemon]\n", f'[daemon]\nunreachable_after = "{GRACE:g}s"\n')
        + f"""
[hosts.gpu1]
address = "{server.host}"
port = {server.port}
user = "{server.user}"
identity = "{server.client_key}"
known_hosts = "{server.known_hosts}"

[launches.far]
host = "gpu1"
log = "{log}"
notify = ["hook"]
"""
    )
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        daemon.wait(event="source", launch="far", kind="connected")
        began = time.monotonic()  # the outage begins after this (the test's clock is not faked)
        stop_sshd(server)
        daemon.wait(event="source", launch="far", kind="disconnected")  # the daemon counts the outage now
        offset.write_text(f"{step}\n")
        daemon.wait(event="host unreachable", host="gpu1", deadline=GRACE + 15.0)
        took = time.monotonic() - began
        daemon.wait(event="alert delivered", notifier="hook")
        daemon.stop()
    finally:
        daemon.close()
        stop_sshd(server)
    assert GRACE <= took < GRACE + 10.0, took
    assert [body["kind"] for body in hook.bodies] == ["unreachable"]
