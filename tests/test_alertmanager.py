"""The daemon against a real Alertmanager (Debian's prometheus-alertmanager) on loopback.

A crash appears in Alertmanager's /api/v2/alerts with the documented labels; a new start resolves it;
two daemons (an HA pair) saying the same crash make one alert in one group. Without the binary these tests
skip, unless WATCHDOG_REQUIRE_ALERTMANAGER=1 (CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from watchdog.alerting import ServiceNotifier
from watchdog.daemon import Daemon, LaunchPlan
from watchdog.launch import LaunchSpec
from watchdog.sources import parse_target

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0
AM_CONFIG = """\
route:
  receiver: "null"
  group_by: ["alertname", "launch"]
  group_wait: 1s
receivers:
  - name: "null"
"""


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio."""
    return "asyncio"


def _binary() -> str:
    for name in ("prometheus-alertmanager", "alertmanager"):
        found = shutil.which(name)
        if found:
            return found
    message = "no Alertmanager binary (apt-get install prometheus-alertmanager)"
    if os.environ.get("WATCHDOG_REQUIRE_ALERTMANAGER") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    """A real Alertmanager on a free loopback port (clustering off); its base URL once it is ready."""
    binary = _binary()
    (tmp_path / "am.yml").write_text(AM_CONFIG)
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'am.yml'}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _poll(lambda: _get(url + "/-/ready") is not None, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def _get(url: str) -> Any:
    try:
        response = httpx.get(url, timeout=2.0)
    except httpx.HTTPError:
        return None
    return (
        response.json()
        if response.status_code == 200 and "json" in response.headers.get("content-type", "")
        else (True if response.status_code == 200 else None)
    )


def _poll(condition: Callable[[], bool], proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait for an external process's state, asking it every 0.1 s until DEADLINE."""
    end = time.monotonic() + DEADLINE
    while not condition():
        if proc is not None and proc.poll() is not None:
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"alertmanager exited {proc.returncode}: {stderr[-2000:]}")
        if time.monotonic() > end:
            pytest.fail("timed out waiting for Alertmanager")
        time.sleep(0.1)


async def _apoll(condition: Callable[[], Any]) -> Any:
    """`_poll` for async tests: the condition runs in a thread, so the daemon goes on meanwhile."""
    with anyio.fail_after(DEADLINE):
        while True:
            value = await anyio.to_thread.run_sync(condition)
            if value:
                return value
            await anyio.sleep(0.1)


def _plans(path: Path, am: str) -> dict[str, LaunchPlan]:
    notifier = ServiceNotifier(name="am", kind="alertmanager", urls=(am,), timeout=5.0)
    spec = LaunchSpec(name="qwen", target=parse_target(str(path)))
    return {"qwen": LaunchPlan(spec, host="", labels={"team": "inference"}, alerts=(notifier,))}


def _watchdog_alerts(am: str) -> list[dict[str, Any]]:
    alerts = _get(am + "/api/v2/alerts") or []
    return [a for a in alerts if a["labels"].get("alertname", "").startswith("Watchdog")]


async def test_a_crash_fires_in_alertmanager_and_a_new_start_resolves_it(
    tmp_path: Path, alertmanager: str
) -> None:
    """The crash is an active alert with the documented labels; replacing the log with a new start ends it."""
    log = tmp_path / "qwen.log"
    daemon = Daemon(
        _plans(log, alertmanager), handle_signals=False, public_url="http://watchdog.example:9469"
    )
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run)
        log.write_bytes(CRASH.read_bytes())
        alerts = await _apoll(lambda: _watchdog_alerts(alertmanager))
        assert len(alerts) == 1
        labels = alerts[0]["labels"]
        assert labels["alertname"] == "WatchdogLaunchCrashed"
        assert labels["launch"] == "qwen"
        assert labels["engine"] == "vllm"
        assert labels["severity"] == "critical"
        assert labels["category"] == "cuda"
        assert labels["team"] == "inference"
        assert "incarnation" not in labels
        assert "CUDA" in alerts[0]["annotations"]["summary"]
        assert alerts[0]["generatorURL"] == "http://watchdog.example:9469/#qwen"
        assert alerts[0]["status"]["state"] == "active"
        # a new start: the log replaced by another file
        fresh = tmp_path / "fresh.log"
        fresh.write_bytes(READY.read_bytes())
        fresh.replace(log)
        await _apoll(lambda: _get(alertmanager + "/-/ready") and not _watchdog_alerts(alertmanager))
        tg.cancel_scope.cancel()


async def test_an_ha_pair_saying_one_crash_makes_one_alert_group(tmp_path: Path, alertmanager: str) -> None:
    """Two daemons following the same launch both send its crash: Alertmanager holds one alert, one group."""
    log = tmp_path / "qwen.log"
    first = Daemon(_plans(log, alertmanager), handle_signals=False)
    second = Daemon(_plans(log, alertmanager), handle_signals=False)
    async with anyio.create_task_group() as tg:
        await tg.start(first.run)
        await tg.start(second.run)
        log.write_bytes(CRASH.read_bytes())
        await first.wait_until(lambda _: first.alerts_sent["am"] >= 1)
        await second.wait_until(lambda _: second.alerts_sent["am"] >= 1)
        groups = await _apoll(
            lambda: [g for g in _get(alertmanager + "/api/v2/alerts/groups") or [] if g["alerts"]]
        )
        tg.cancel_scope.cancel()
    assert len(groups) == 1
    assert len(groups[0]["alerts"]) == 1
    assert groups[0]["labels"] == {"alertname": "WatchdogLaunchCrashed", "launch": "qwen"}
