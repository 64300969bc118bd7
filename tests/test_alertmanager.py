"""The daemon against a real Alertmanager (Debian's prometheus-alertmanager) on loopback.

A crash appears in Alertmanager's /api/v2/alerts with the documented labels; a new start resolves it;
two daemons (an HA pair) saying the same crash make one alert in one group. Without the binary these tests
skip, unless WATCHDOG_REQUIRE_ALERTMANAGER=1 (CI), where they fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import require_binary
from prom_servers import POLL, open_binary

from watchdog.alerts.senders import ServiceNotifier
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target

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
async def alertmanager(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A real Alertmanager on a free loopback port (clustering off): a client for its API, once ready."""
    binary = require_binary(
        "prometheus-alertmanager", "prometheus-alertmanager", "WATCHDOG_REQUIRE_ALERTMANAGER"
    )
    (tmp_path / "am.yml").write_text(AM_CONFIG)
    argv = [
        binary,
        f"--config.file={tmp_path / 'am.yml'}",
        f"--storage.path={tmp_path / 'am-data{attempt}'}",
        "--cluster.listen-address=",
    ]
    async with open_binary(argv, tmp_path, "alertmanager") as client:
        yield client


async def _until(condition: Callable[[], Awaitable[Any]]) -> Any:
    """Ask Alertmanager (another process: nothing to wait on but its answers) every POLL until DEADLINE."""
    with anyio.fail_after(DEADLINE):
        while True:
            value = await condition()
            if value:
                return value
            await anyio.sleep(POLL)


def _plans(path: Path, am: httpx.AsyncClient) -> dict[str, LaunchPlan]:
    notifier = ServiceNotifier(name="am", kind="alertmanager", urls=(str(am.base_url),), timeout=5.0)
    spec = LaunchSpec(name="qwen", target=parse_target(str(path)))
    return {"qwen": LaunchPlan(spec, host="", labels={"team": "inference"}, alerts=(notifier,))}


async def _watchdog_alerts(am: httpx.AsyncClient) -> list[dict[str, Any]]:
    alerts = (await am.get("/api/v2/alerts")).json()
    return [a for a in alerts if a["labels"].get("alertname", "").startswith("Watchdog")]


async def _groups(am: httpx.AsyncClient) -> list[dict[str, Any]]:
    return [g for g in (await am.get("/api/v2/alerts/groups")).json() if g["alerts"]]


async def _none_firing(am: httpx.AsyncClient) -> bool:
    return not await _watchdog_alerts(am)


async def test_a_crash_fires_in_alertmanager_and_a_new_start_resolves_it(
    tmp_path: Path, alertmanager: httpx.AsyncClient
) -> None:
    """The crash is an active alert with the documented labels; replacing the log with a new start ends it."""
    log = tmp_path / "qwen.log"
    daemon = Daemon(
        _plans(log, alertmanager), handle_signals=False, public_url="http://watchdog.example:9469"
    )
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run)
        log.write_bytes(CRASH.read_bytes())
        alerts = await _until(lambda: _watchdog_alerts(alertmanager))
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
        await _until(lambda: _none_firing(alertmanager))
        tg.cancel_scope.cancel()


async def test_an_ha_pair_saying_one_crash_makes_one_alert_group(
    tmp_path: Path, alertmanager: httpx.AsyncClient
) -> None:
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
        groups = await _until(lambda: _groups(alertmanager))
        tg.cancel_scope.cancel()
    assert len(groups) == 1
    assert len(groups[0]["alerts"]) == 1
    assert groups[0]["labels"] == {"alertname": "WatchdogLaunchCrashed", "launch": "qwen"}
