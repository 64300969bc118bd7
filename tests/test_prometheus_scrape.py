"""A real Prometheus scrapes the daemon's /metrics, and PromQL answers with the launches' verdicts."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import TaskStatus
from conftest import require_binary
from prom_servers import open_binary

from watchdog.daemon.http import serve_http
from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
JOB = "watchdog"
DEADLINE = 30.0  # the whole test: daemon verdicts, Prometheus start-up, first scrapes (it takes ~6 s)
QUERY_DEADLINE = 15.0  # Prometheus applies its scrape targets ~5 s after start, then scrapes every second
POLL = 0.1  # seconds between two questions to Prometheus' HTTP API


@pytest.fixture
def prometheus() -> str:
    """The `prometheus` binary (skips without it, fails when CI asked for it)."""
    return require_binary("prometheus", "prometheus", "WATCHDOG_REQUIRE_PROMTOOL")


async def _serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
    await serve_http(("127.0.0.1", 0), daemon.statuses, daemon.stats, task_status=task_status)


def _states(statuses: list[dict[str, Any]]) -> dict[str, str]:
    return {s["name"]: s["state"] for s in statuses}


def _config(target_port: int) -> str:
    # JSON is YAML: no YAML library needed to write prometheus.yml
    return json.dumps(
        {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": JOB, "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}
            ],
        }
    )


@asynccontextmanager
async def _open_prometheus(binary: str, tmp_path: Path, target_port: int) -> AsyncIterator[httpx.AsyncClient]:
    """A Prometheus on 127.0.0.1 scraping `target_port` every second: an HTTP client for its API, once ready."""
    config = tmp_path / "prometheus.yml"
    config.write_text(_config(target_port))
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb{attempt}'}",
        "--log.level=warn",
    ]
    async with open_binary(argv, tmp_path, "prometheus") as client:
        yield client


async def _query(client: httpx.AsyncClient, promql: str) -> list[dict[str, Any]]:
    """The instant vector `promql` evaluates to, once it is not empty (asked again until then)."""
    body: dict[str, Any] = {}
    with anyio.move_on_after(QUERY_DEADLINE):
        while True:
            body = (await client.get("/api/v1/query", params={"query": promql})).json()
            assert body["status"] == "success", body
            result: list[dict[str, Any]] = body["data"]["result"]
            if result:
                return result
            await anyio.sleep(POLL)
    targets = (await client.get("/api/v1/targets")).json()["data"]["activeTargets"]
    seen = [(t["health"], t["lastError"]) for t in targets]
    pytest.fail(
        f"no result for {promql} in {QUERY_DEADLINE}s: last answer {body}; targets (health, error) {seen}"
    )


async def test_prometheus_scrapes_the_launch_states(tmp_path: Path, prometheus: str) -> None:
    """A real Prometheus scraping the daemon answers PromQL with the crash's state and the ready launch's time
    to ready."""
    paths = {"crash": tmp_path / "crash.log", "ready": tmp_path / "ready.log"}
    alerts = ConsoleAlerts(out=io.StringIO())
    plans = {
        name: LaunchPlan(LaunchSpec(name=name, target=parse_target(str(path))), alerts=(alerts,))
        for name, path in paths.items()
    }
    daemon = Daemon(plans, serve=_serve, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            await anyio.Path(paths["crash"]).write_bytes(CRASH.read_bytes())
            await anyio.Path(paths["ready"]).write_bytes(READY.read_bytes())
            statuses = await daemon.wait_until(lambda s: _states(s) == {"crash": "crashed", "ready": "ready"})
            assert daemon.port is not None
            async with _open_prometheus(prometheus, tmp_path, daemon.port) as client:
                crashed = await _query(client, 'watchdog_launch_state{launch="crash",state="crashed"} == 1')
                to_ready = await _query(client, 'watchdog_time_to_ready_seconds{launch="ready"}')
                up = await _query(client, f'up{{job="{JOB}"}}')
            tg.cancel_scope.cancel()

    assert [r["metric"]["engine"] for r in crashed] == ["vllm"]
    assert crashed[0]["metric"]["job"] == JOB
    assert float(crashed[0]["value"][1]) == 1.0
    ready = {s["name"]: s for s in statuses}["ready"]
    assert [float(r["value"][1]) for r in to_ready] == [ready["time_to_ready_seconds"]]
    assert [r["value"][1] for r in up] == ["1"]
