"""A real Prometheus scrapes the daemon's /metrics, and PromQL answers with the launches' verdicts."""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from anyio.abc import TaskStatus
from conftest import require_binary
from http_client import Client
from metrics_scene import running_scene
from prom_servers import open_binary
from sshd_server import SSHDServer

from watchdog.daemon.http import serve_http
from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "watchdog.json"
RULES = ROOT / "deploy" / "prometheus" / "rules"
CORPUS = Path(__file__).parent / "fixtures" / "corpus"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
JOB = "watchdog"
DEADLINE = 30.0  # the whole test: daemon verdicts, Prometheus start-up, first scrapes (it takes ~6 s)
QUERY_DEADLINE = 30.0  # Prometheus applies its scrape targets ~5 s after start, then scrapes every second
POLL = 0.1  # seconds between two questions to Prometheus' HTTP API
DASHBOARD_DEADLINE = 60.0  # from the first scrape until every dashboard query has answered with data
DASHBOARD_SCRAPE = "2s"  # the scrape interval and timeout there (a loaded machine answers a scrape slowly)
# What Grafana puts in for the dashboard's variables: "All" of each (their allValue), and windows of a few
# scrape intervals (Grafana's $__rate_interval is at least 4 of them; a 1 s scrape here)
VARIABLES = {
    "job": ".+",
    "alertmanager_job": ".+",
    "launch": ".*",
    "host": ".*",
    "__rate_interval": "20s",
    "__interval": DASHBOARD_SCRAPE,
    "__range": "1h",
}
AM_CONFIG = """\
route:
  receiver: "null"
receivers:
  - name: "null"
"""


@pytest.fixture
def prometheus() -> str:
    """The `prometheus` binary (skips without it, fails when CI asked for it)."""
    return require_binary("prometheus", "prometheus", "WATCHDOG_REQUIRE_PROMTOOL")


async def _serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
    await serve_http(("127.0.0.1", 0), daemon.statuses, daemon.stats, task_status=task_status)


def _states(statuses: list[dict[str, Any]]) -> dict[str, str]:
    return {s["name"]: s["state"] for s in statuses}


def _config(
    target_port: int, *, alertmanager: int | None = None, rules: bool = False, scrape: str = "1s"
) -> str:
    # JSON is YAML: no YAML library needed to write prometheus.yml
    jobs = [{"job_name": JOB, "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}]
    if alertmanager is not None:  # the job name the dashboard's Alertmanager panel reads
        jobs.append(
            {"job_name": "alertmanager", "static_configs": [{"targets": [f"127.0.0.1:{alertmanager}"]}]}
        )
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape, "scrape_timeout": scrape, "evaluation_interval": "1s"},
        "scrape_configs": jobs,
    }
    if rules:
        config["rule_files"] = [str(path) for path in sorted(RULES.glob("*.yml"))]
    return json.dumps(config)


@asynccontextmanager
async def _open_prometheus(
    binary: str,
    tmp_path: Path,
    target_port: int,
    *,
    alertmanager: int | None = None,
    rules: bool = False,
    scrape: str = "1s",
) -> AsyncIterator[Client]:
    """A Prometheus on 127.0.0.1 scraping `target_port` (and an Alertmanager's port, as job `alertmanager`)
    every `scrape`, with the shipped rules if asked: an HTTP client for its API, once ready."""
    config = tmp_path / "prometheus.yml"
    config.write_text(_config(target_port, alertmanager=alertmanager, rules=rules, scrape=scrape))
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb{attempt}'}",
        "--log.level=warn",
    ]
    async with open_binary(argv, tmp_path, "prometheus") as client:
        yield client


async def _query(client: Client, promql: str) -> list[dict[str, Any]]:
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


async def test_prometheus_gets_openmetrics_gzipped_and_ingests_it(tmp_path: Path, prometheus: str) -> None:
    """A real Prometheus scraping the daemon (through a recording pass-through, which passes its request's
    Accept and Accept-Encoding and the daemon's answer untouched) asks for OpenMetrics and gzip, gets both,
    and stores the daemon's series from them."""
    from aiohttp import web  # noqa: PLC0415

    path = tmp_path / "crash.log"
    alerts = ConsoleAlerts(out=io.StringIO())
    plans = {"crash": LaunchPlan(LaunchSpec(name="crash", target=parse_target(str(path))), alerts=(alerts,))}
    daemon = Daemon(plans, serve=_serve, handle_signals=False)
    seen: list[tuple[dict[str, str], dict[str, str]]] = []  # (request headers, answer headers) per scrape

    async def forward(request: web.Request) -> web.Response:
        asked = {k: request.headers[k] for k in ("Accept", "Accept-Encoding") if k in request.headers}
        async with Client(f"http://127.0.0.1:{daemon.port}", raw=True) as client:
            answer = await client.get("/metrics", headers=asked)
        kept = {k: answer.headers[k] for k in ("Content-Type", "Content-Encoding") if k in answer.headers}
        seen.append((asked, kept))
        return web.Response(body=answer.content, headers=kept)

    app = web.Application()
    app.router.add_get("/metrics", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    proxy_port = sock.getsockname()[1]
    await web.SockSite(runner, sock).start()
    try:
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                await anyio.Path(path).write_bytes(CRASH.read_bytes())
                await daemon.wait_until(lambda s: _states(s) == {"crash": "crashed"})
                async with _open_prometheus(prometheus, tmp_path, proxy_port) as client:
                    crashed = await _query(
                        client, 'watchdog_launch_state{launch="crash",state="crashed"} == 1'
                    )
                    fds = await _query(client, f'process_open_fds{{job="{JOB}"}}')
                tg.cancel_scope.cancel()
    finally:
        await runner.cleanup()

    assert [r["metric"]["engine"] for r in crashed] == ["vllm"]
    assert float(fds[0]["value"][1]) > 0
    asked, answered = seen[0]
    assert asked["Accept"].startswith("application/openmetrics-text")
    assert "gzip" in asked["Accept-Encoding"]
    assert answered["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert answered["Content-Encoding"] == "gzip"


def _substitute(expr: str) -> str:
    """`expr` with the dashboard's variables ($name, ${name}) replaced as Grafana would."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in VARIABLES, f"the dashboard uses a variable the test does not know: ${name}"
        return VARIABLES[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def dashboard_queries() -> dict[str, str]:
    """Every query of the dashboard, variables substituted, by where it is: panel title and refId, or the
    template variable (its `label_values(metric, label)` asked as `count by (label) (metric)`)."""
    board = json.loads(DASHBOARD.read_text())
    out: dict[str, str] = {}

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    out[f"{panel['title']} ({target['refId']})"] = _substitute(target["expr"])
            walk(panel.get("panels", []))

    walk(board["panels"])
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        definition = variable["definition"]
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", definition)
        assert match, f"variable {variable['name']}: {definition}"
        out[f"variable ${variable['name']}"] = _substitute(f"count by ({match[2]}) ({match[1]})")
    return out


async def _unanswered(client: Client, queries: dict[str, str]) -> dict[str, str]:
    """The queries that still return no data after DASHBOARD_DEADLINE (each asked until it does)."""
    waiting = dict(queries)
    with anyio.move_on_after(DASHBOARD_DEADLINE):
        while waiting:
            for where, promql in list(waiting.items()):
                body = (await client.get("/api/v1/query", params={"query": promql})).json()
                assert body["status"] == "success", (where, promql, body)
                if body["data"]["result"]:
                    del waiting[where]
            await anyio.sleep(POLL * 5)
    return waiting


@pytest.fixture
def alertmanager_binary() -> str:
    """The `prometheus-alertmanager` binary (skips without it, fails when CI asked for it)."""
    return require_binary(
        "prometheus-alertmanager", "prometheus-alertmanager", "WATCHDOG_REQUIRE_ALERTMANAGER"
    )


@asynccontextmanager
async def _open_alertmanager(binary: str, tmp_path: Path) -> AsyncIterator[int]:
    """A real Alertmanager on loopback (no cluster): its port."""
    (tmp_path / "am.yml").write_text(AM_CONFIG)
    argv = [
        binary,
        f"--config.file={tmp_path / 'am.yml'}",
        f"--storage.path={tmp_path / 'am-data{attempt}'}",
        "--cluster.listen-address=",
    ]
    async with open_binary(argv, tmp_path, "alertmanager") as client:
        port = urlsplit(client.base_url).port
        assert port is not None
        yield port


def _metric_names(text: str) -> set[str]:
    """The family names declared on a /metrics page (its `# TYPE` lines)."""
    return set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))


def _rule_metric_names() -> dict[str, set[str]]:
    """The `watchdog_` metric names each rule file reads (not the names it records, `level:metric:ops`)."""
    out = {}
    for path in sorted(RULES.glob("*.yml")):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        out[path.name] = set(re.findall(r"(?<![:\w])watchdog_\w+\b(?!:)", text))
    return out


def _documented_join() -> str:
    """The PromQL example of docs/contracts.md that joins the launches' labels from `watchdog_launch_info`."""
    text = (ROOT / "docs" / "contracts.md").read_text()
    [line] = [ln for ln in text.splitlines() if "group_left" in ln and "watchdog_launch_info" in ln]
    return line.split("#", 1)[0].strip()


def _needs_more_than_the_daemon(promql: str) -> bool:
    """Whether a query reads a recorded series (`level:metric:operations`) or Alertmanager's own metrics."""
    return bool(re.search(r"[A-Za-z_]\w*:\w+:\w+", promql)) or "alertmanager_" in promql


@pytest.mark.sshd
@pytest.mark.parametrize(
    "kit",
    [
        pytest.param("shipped", id="with-the-rules-and-alertmanager-an-alert-refused"),
        pytest.param("bare", id="bare-prometheus-no-alert-failed"),
    ],
)
async def test_every_dashboard_query_returns_data(
    tmp_path: Path, prometheus: str, alertmanager_binary: str, sshd: SSHDServer, kit: str
) -> None:
    """With launches in every state (ready, crashed, stalled, loading, pending, remote and reconnected,
    unreachable), a real Prometheus with the shipped rules and an Alertmanager answers every query of the
    Grafana dashboard and of its variables with data; the rules evaluate without error and read only metrics
    the daemon serves. A bare Prometheus (no rules, no Alertmanager) with no alert ever refused answers all
    but the queries of recorded series and of Alertmanager."""
    queries = dashboard_queries()
    assert len(queries) >= 26
    shipped = kit == "shipped"
    if not shipped:
        queries = {w: q for w, q in queries.items() if not _needs_more_than_the_daemon(q)}
    async with (
        running_scene(tmp_path, sshd, refusing=shipped) as scene,
        contextlib.AsyncExitStack() as stack,
    ):
        am_port = (
            await stack.enter_async_context(_open_alertmanager(alertmanager_binary, tmp_path))
            if shipped
            else None
        )
        client = await stack.enter_async_context(
            _open_prometheus(
                prometheus, tmp_path, scene.port, alertmanager=am_port, rules=shipped, scrape=DASHBOARD_SCRAPE
            )
        )
        await _query(client, f'up{{job="{JOB}"}} == 1')
        empty = await _unanswered(client, queries)
        joined = await _query(client, _documented_join()) if shipped else []
        groups = (await client.get("/api/v1/rules")).json()["data"]["groups"]
        async with Client(f"http://127.0.0.1:{scene.port}") as daemon_client:
            served = _metric_names((await daemon_client.get("/metrics")).text)

    assert empty == {}, f"{len(empty)} of {len(queries)} dashboard queries return no data: {sorted(empty)}"
    if shipped:  # the join of docs/contracts.md gives the crashed launch its own label
        assert [(r["metric"]["launch"], r["metric"]["team"]) for r in joined] == [("crash", "inference")]
        bad = [(r["name"], r["lastError"]) for g in groups for r in g["rules"] if r["health"] != "ok"]
        assert {g["file"].rsplit("/", 1)[-1] for g in groups} == {p.name for p in RULES.glob("*.yml")}
        assert bad == []
    for file, names in _rule_metric_names().items():
        assert names <= served, f"{file} reads metrics the daemon does not serve: {sorted(names - served)}"
