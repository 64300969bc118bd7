"""The deploy kit (deploy/): Prometheus rules and their unit tests, the Grafana dashboard against a real
Prometheus scraping `watchdog demo`, Alertmanager's routes and inhibition in a real Alertmanager, and the
cross-references of the compose and Kubernetes files.

promtool, prometheus, amtool and prometheus-alertmanager are the Debian packages; without them these tests
skip with a reason, unless WATCHDOG_REQUIRE_PROMTOOL=1 (promtool, prometheus) or
WATCHDOG_REQUIRE_ALERTMANAGER=1 (amtool, prometheus-alertmanager), as CI sets, which makes them fail.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
import yaml
from conftest import require_binary
from http_client import Client
from prom_servers import open_binary as _open_binary
from prom_servers import stop as _stop

from watchdog.cli.demo import DEMO_LAUNCHES
from watchdog.config.loading import load_config
from watchdog.config.shard import parse_shard
from watchdog.core.lifecycle import State

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parent.parent
DEPLOY = ROOT / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
PROMETHEUS_YML = PROMETHEUS_DIR / "prometheus.yml"
RULES = sorted((PROMETHEUS_DIR / "rules").glob("*.yml"))
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "watchdog.json"
GRAFANA_PROVISIONING = DEPLOY / "grafana" / "provisioning"
ALERTMANAGER_YML = DEPLOY / "alertmanager" / "alertmanager.yml"
COMPOSE_DIR = DEPLOY / "compose"
COMPOSE = COMPOSE_DIR / "docker-compose.yml"
K8S = DEPLOY / "k8s"
DOCKERFILE = ROOT / "Dockerfile"

JOB = "watchdog"  # the scrape job the alerts and the dashboard expect
IMAGE_UID = 10001  # the Dockerfile's watchdog user
DEADLINE = 45.0  # demo verdicts and Prometheus' first scrapes and rule evaluations (about 10 s)
POLL = 0.1  # seconds between two questions to an HTTP API

# Grafana's variables in the dashboard's queries, as Grafana would fill them with "All" selected.
GRAFANA_VARIABLES = {
    "job": ".+",
    "alertmanager_job": ".+",
    "launch": ".*",
    "host": ".*",
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "10m",
}
_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
# The panels that must show the demo's data (the others may be empty: no SSH, no Alertmanager scraped).
CORE_PANELS = ("Launch state", "Time to ready", "Phase durations", "Startup progress")
STATE_CODES = {state: code for code, state in enumerate(State, start=1)}  # as the recording rule numbers them


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """One event loop for the module, so that one Prometheus serves every test of it."""
    return "asyncio"


def _promtool() -> str:
    return require_binary("promtool", "prometheus", "WATCHDOG_REQUIRE_PROMTOOL")


def _amtool() -> str:
    return require_binary("amtool", "prometheus-alertmanager", "WATCHDOG_REQUIRE_ALERTMANAGER")


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


# --- Prometheus: config, rules, rule unit tests ---------------------------------------------------------------


def test_promtool_checks_the_config_and_its_rules() -> None:
    """`promtool check config` accepts prometheus.yml and finds every rule file of rules/ through it."""
    result = _run([_promtool(), "check", "config", str(PROMETHEUS_DIR / "prometheus.yml")])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULES)} rule files found" in result.stdout


@pytest.mark.parametrize("rules", RULES, ids=[p.name for p in RULES])
def test_promtool_checks_the_rules(rules: Path) -> None:
    """`promtool check rules` accepts each rule file."""
    result = _run([_promtool(), "check", "rules", str(rules)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_rule_unit_tests_pass() -> None:
    """`promtool test rules` passes every unit test file of deploy/prometheus/tests/."""
    assert RULE_TESTS, "no rule unit tests in deploy/prometheus/tests/"
    result = _run([_promtool(), "test", "rules", *map(str, RULE_TESTS)])
    assert result.returncode == 0, result.stdout + result.stderr


def _rules() -> list[dict[str, Any]]:
    return [rule for path in RULES for group in _yaml(path)["groups"] for rule in group["rules"]]


def test_every_alert_has_a_unit_test_that_sees_it_fire() -> None:
    """Each alerting rule appears in a promtool alert_rule_test that expects it to fire at some time."""
    alerts = {rule["alert"] for rule in _rules() if "alert" in rule}
    fired = {
        case["alertname"]
        for path in RULE_TESTS
        for test in _yaml(path)["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts == {
        "WatchdogLaunchCrashed",
        "WatchdogLaunchStalled",
        "WatchdogLaunchSlowerThanUsual",
        "WatchdogDown",
        "WatchdogSSHHostUnreachable",
        "WatchdogAlertsFailing",
        "WatchdogOutboxBacklog",
        "WatchdogFileDescriptorsNearLimit",
    }
    assert alerts <= fired, f"never seen firing in a unit test: {sorted(alerts - fired)}"


def test_alerts_carry_a_severity_alertmanager_routes() -> None:
    """Every alert has a severity label of critical or warning and a summary and description annotation."""
    for rule in _rules():
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
            assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), rule["alert"]


# --- Grafana: the dashboard's structure -------------------------------------------------------------------------


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # a collapsed row holds its panels


def _queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel target."""
    return [
        (panel["title"], target["expr"])
        for panel in _panels(_dashboard()["panels"])
        for target in panel.get("targets", [])
    ]


def _substitute(expr: str) -> str:
    """The query as Prometheus gets it from Grafana with every variable at "All"."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in GRAFANA_VARIABLES, f"unknown Grafana variable ${name} in {expr}"
        return GRAFANA_VARIABLES[name]

    return _VARIABLE.sub(value, expr)


def test_dashboard_panels_are_well_formed() -> None:
    """Panel ids are unique, panels fit the 24-column grid, and every query panel uses the datasource variable."""
    dashboard = _dashboard()
    panels = list(_panels(dashboard["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
    titles = {p["title"] for p in panels}
    assert set(CORE_PANELS) <= titles
    assert {p["type"] for p in panels if p["title"] == "Launch state"} == {"state-timeline"}


def test_dashboard_variables_are_defined_and_the_datasource_is_provisioned() -> None:
    """Every variable a query uses is a dashboard variable or a Grafana built-in, and the datasource variable
    defaults to the provisioned Prometheus' uid."""
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    used = {m.group(1) or m.group(2) for _, expr in _queries() for m in _VARIABLE.finditer(expr)}
    builtins = {name for name in GRAFANA_VARIABLES if name.startswith("__")}
    assert used - builtins <= set(variables)
    assert set(GRAFANA_VARIABLES) - builtins == set(variables) - {"datasource"}
    (source,) = _yaml(GRAFANA_PROVISIONING / "datasources" / "prometheus.yml")["datasources"]
    assert source["type"] == "prometheus"
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["current"]["value"] == source["uid"]


def test_every_dashboard_query_takes_its_job_from_a_variable() -> None:
    """No query names a job: each series of the daemon (watchdog_*, process_*, up) is selected by
    `job=~"$job"`, Alertmanager's by `job=~"$alertmanager_job"`, so the dashboard works under any job name
    (the rules take theirs from `print-rules --selector`). Recorded series carry no job (the rules select)."""
    series = re.compile(r"(?<![\w:])((?:watchdog|process|alertmanager)_\w+|up)\b(?![\w:(])(\{[^}]*\})?")
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    exprs = [expr for _, expr in _queries()]
    exprs += [variables[name]["definition"] for name in ("launch", "host")]
    checked = 0
    for expr in exprs:
        assert not re.search(r"\bjob\s*=~?\s*\"[^$]", expr), expr
        for match in series.finditer(expr):
            want = "$alertmanager_job" if match.group(1).startswith("alertmanager_") else "$job"
            assert match.group(2), (expr, match.group(0))
            assert f'job=~"{want}"' in match.group(2), (expr, match.group(0))
            checked += 1
    assert checked >= 40
    assert any(m.group(1).startswith("process_") for e in exprs for m in series.finditer(e))


def test_state_timeline_maps_every_state() -> None:
    """The state timeline's value mappings name every state at the code the recording rule gives it."""
    (panel,) = [p for p in _panels(_dashboard()["panels"]) if p["title"] == "Launch state"]
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    assert {int(code): m["text"] for code, m in mapping["options"].items()} == {
        code: state.value for state, code in STATE_CODES.items()
    }
    rule = next(r for r in _rules() if r.get("record") == "launch:watchdog_launch_state:code")
    for state, code in STATE_CODES.items():
        assert f'state="{state.value}"}} * {code}' in rule["expr"]
        assert f'state="{state.value}"}} * {code}' in panel["targets"][0]["expr"]


# --- a real Prometheus with the deploy config and rules, scraping `watchdog demo` ---------------------------------


async def _wait_for_file_line(path: Path, prefix: str, process: Any) -> str:
    """The first line of `path` that starts with `prefix`, once the process has written it."""
    file = anyio.Path(path)
    while True:
        text = await file.read_text(errors="replace")
        for line in text.splitlines():
            if line.startswith(prefix):
                return line
        assert process.returncode is None, f"exited with {process.returncode}: {text[-2000:]}"
        await anyio.sleep(POLL)


@asynccontextmanager
async def _open_demo(tmp: Path) -> AsyncIterator[int]:
    """`watchdog demo --forever` on a free loopback port (its own choice): the port, once it is serving."""
    out = tmp / "demo.out"
    with out.open("wb") as log:
        process = await anyio.open_process(
            [sys.executable, "-m", "watchdog.cli", "demo", "--forever", "--listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        with anyio.fail_after(DEADLINE):
            line = await _wait_for_file_line(out, "watchdog demo: status page http://", process)
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", line).group(1))  # type: ignore[union-attr]
        yield port
    finally:
        await _stop(process)


def _prometheus_config(
    tmp: Path, target_port: int, *, job_name: str = JOB, rules_base: Path = PROMETHEUS_DIR
) -> Path:
    """deploy/prometheus/prometheus.yml with its rules (`rules/*.yml` under `rules_base`), made fast (1 s)
    and pointed at the demo, as job `job_name`."""
    config = _yaml(PROMETHEUS_YML)
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == JOB]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{target_port}"]}]
    job["job_name"] = job_name
    config["scrape_configs"] = [job]
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    config["rule_files"] = [str(rules_base / pattern) for pattern in config["rule_files"]]
    config.pop("alerting")
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


async def _instant(client: Client, promql: str) -> list[dict[str, Any]]:
    response = await client.get("/api/v1/query", params={"query": promql})
    body = response.json()
    assert response.status_code == 200, f"{promql}: {body}"
    assert body["status"] == "success", f"{promql}: {body}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def _eventually(
    client: Client, promql: str, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The query's result once `done` holds for it, else the last one after DEADLINE (for the assertion).

    Asked again because a scrape that times out on a busy machine makes every series stale until the next
    one: the answer is then empty for a second.
    """
    result: list[dict[str, Any]] = []
    with anyio.move_on_after(DEADLINE):
        while True:
            result = await _instant(client, promql)
            if done(result):
                break
            await anyio.sleep(POLL)
    return result


def _by_launch(result: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"]["launch"]: float(r["value"][1]) for r in result}


@pytest.fixture(scope="module")
async def demo_prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """A real Prometheus with the deploy config and rules scraping `watchdog demo`, once every demo launch's
    verdict is in it (through the recording rule, so the rules are evaluated too)."""
    binary = require_binary("prometheus", "prometheus", "WATCHDOG_REQUIRE_PROMTOOL")
    tmp = tmp_path_factory.mktemp("prometheus")
    want = {d.name: float(STATE_CODES[d.expect]) for d in DEMO_LAUNCHES}
    async with _open_demo(tmp) as port:
        argv = [
            binary,
            f"--config.file={_prometheus_config(tmp, port)}",
            f"--storage.tsdb.path={tmp / 'tsdb{attempt}'}",
            "--log.level=warn",
        ]
        async with _open_binary(argv, tmp, "prometheus") as client:
            got: dict[str, float] = {}
            with anyio.move_on_after(DEADLINE):
                while got != want:
                    got = _by_launch(await _instant(client, "launch:watchdog_launch_state:code"))
                    if got != want:
                        await anyio.sleep(POLL)
            assert got == want, f"the demo's verdicts never reached Prometheus' recording rule: {got}"
            yield client


@pytest.mark.parametrize(
    ("title", "expr"), _queries(), ids=[f"{t}:{i}" for i, (t, _) in enumerate(_queries())]
)
async def test_every_dashboard_query_is_valid_promql(demo_prometheus: Client, title: str, expr: str) -> None:
    """Each panel query, with Grafana's variables filled in, is accepted by a real Prometheus' query API."""
    await _instant(demo_prometheus, _substitute(expr))


@pytest.mark.parametrize("title", CORE_PANELS)
async def test_core_panels_show_the_demo(demo_prometheus: Client, title: str) -> None:
    """The core panels' queries return data for the demo's launches."""
    exprs = [expr for panel_title, expr in _queries() if panel_title == title]
    assert exprs
    for expr in exprs:
        result = await _eventually(demo_prometheus, _substitute(expr), bool)
        assert result, f"{title}: no data for {expr}"


async def test_dashboard_shows_the_demo_verdicts(demo_prometheus: Client) -> None:
    """The state timeline gives each demo launch its verdict's code, time to ready is the ready launch's 38 s,
    and the stalled launch's weights progress is 14 of 99 shards."""
    queries = dict(_queries())
    want = {d.name: float(STATE_CODES[d.expect]) for d in DEMO_LAUNCHES}
    states = _by_launch(
        await _eventually(
            demo_prometheus, _substitute(queries["Launch state"]), lambda r: _by_launch(r) == want
        )
    )
    assert states == want
    ready = _by_launch(await _eventually(demo_prometheus, _substitute(queries["Time to ready"]), bool))
    assert ready == {"llama-8b-sglang": 38.0}
    progress = await _eventually(demo_prometheus, _substitute(queries["Startup progress"]), bool)
    weights = {
        r["metric"]["launch"]: float(r["value"][1]) for r in progress if r["metric"]["kind"] == "weights"
    }
    assert weights["glm5-ascend-tp16"] == pytest.approx(14 / 99)


async def test_dashboard_variables_list_the_demo_launches(demo_prometheus: Client) -> None:
    """The `launch` variable's label_values() query lists the three demo launches, `job` lists "watchdog"."""
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    values = {}
    for name in ("job", "launch"):
        match = re.fullmatch(r"label_values\((.+), (\w+)\)", variables[name]["definition"])
        assert match, variables[name]["definition"]
        selector, label = _substitute(match.group(1)), match.group(2)
        result = await _eventually(demo_prometheus, f"count by ({label}) ({selector})", bool)
        values[name] = {r["metric"][label] for r in result}
    assert values == {"job": {JOB}, "launch": {d.name for d in DEMO_LAUNCHES}}


async def test_prometheus_fires_the_demo_alerts(demo_prometheus: Client) -> None:
    """The alert rules, evaluated by a real Prometheus on the daemon's real metrics, fire for the crashed and
    the stalled demo launch, and only for them."""
    crashed = next(d.name for d in DEMO_LAUNCHES if d.expect is State.CRASHED)
    stalled = next(d.name for d in DEMO_LAUNCHES if d.expect is State.STALLED)
    want = {("WatchdogLaunchCrashed", crashed), ("WatchdogLaunchStalled", stalled)}
    firing: set[tuple[str, str | None]] = set()
    # the alert group is evaluated apart from the recording group the fixture waited on: ask until it caught up
    with anyio.move_on_after(DEADLINE):
        while firing != want:
            body = (await demo_prometheus.get("/api/v1/alerts")).json()
            firing = {
                (a["labels"]["alertname"], a["labels"].get("launch"))
                for a in body["data"]["alerts"]
                if a["state"] == "firing"
            }
            if firing != want:
                await anyio.sleep(POLL)
    assert firing == want


async def _alerts_until(
    client: Client, done: Callable[[set[tuple[str, str, str | None]]], bool]
) -> set[tuple[str, str, str | None]]:
    """(alertname, state, launch) of every pending or firing alert, once `done` holds (else after DEADLINE)."""
    alerts: set[tuple[str, str, str | None]] = set()
    with anyio.move_on_after(DEADLINE):
        while True:
            body = (await client.get("/api/v1/alerts")).json()
            alerts = {
                (a["labels"]["alertname"], a["state"], a["labels"].get("launch"))
                for a in body["data"]["alerts"]
            }
            if done(alerts):
                break
            await anyio.sleep(POLL)
    return alerts


async def test_another_job_name_fires_the_alerts_with_rules_rendered_for_it(tmp_path: Path) -> None:
    """A real Prometheus scraping `watchdog demo` as job "llm-watchdog", with the rules of `print-rules
    --selector 'job="llm-watchdog"'`: the crashed and the stalled launch fire their alerts, WatchdogDown is not
    even pending (its `up` is found), and the dashboard's state timeline with $job = llm-watchdog shows every
    demo launch."""
    from watchdog.daemon.promrules import rule_files  # noqa: PLC0415

    binary = require_binary("prometheus", "prometheus", "WATCHDOG_REQUIRE_PROMTOOL")
    job = "llm-watchdog"
    (tmp_path / "rules").mkdir()
    for name, text in rule_files(f'job="{job}"').items():
        (tmp_path / "rules" / name).write_text(text)
    crashed = next(d.name for d in DEMO_LAUNCHES if d.expect is State.CRASHED)
    stalled = next(d.name for d in DEMO_LAUNCHES if d.expect is State.STALLED)
    want = {("WatchdogLaunchCrashed", "firing", crashed), ("WatchdogLaunchStalled", "firing", stalled)}
    async with _open_demo(tmp_path) as port:
        argv = [
            binary,
            f"--config.file={_prometheus_config(tmp_path, port, job_name=job, rules_base=tmp_path)}",
            f"--storage.tsdb.path={tmp_path / 'tsdb{attempt}'}",
            "--log.level=warn",
        ]
        async with _open_binary(argv, tmp_path, "prometheus") as client:
            alerts = await _alerts_until(client, lambda alerts: alerts == want)
            timeline = dict(_queries())["Launch state"].replace("$job", job)
            states = _by_launch(
                await _eventually(client, _substitute(timeline), lambda r: len(r) == len(DEMO_LAUNCHES))
            )
    assert alerts == want
    assert set(states) == {d.name for d in DEMO_LAUNCHES}


# --- Alertmanager ---------------------------------------------------------------------------------------------


def test_amtool_checks_the_alertmanager_config() -> None:
    """`amtool check-config` accepts alertmanager.yml with its routes, inhibit rules and receivers."""
    result = _run([_amtool(), "check-config", str(ALERTMANAGER_YML)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert " - 2 inhibit rules" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        pytest.param(
            "alertname=WatchdogLaunchCrashed severity=critical launch=a host=gpu1",
            "slack-critical",
            id="crash",
        ),
        pytest.param(
            "alertname=WatchdogLaunchStalled severity=warning launch=a host=gpu1",
            "discord-warnings",
            id="stall",
        ),
        pytest.param(
            "alertname=WatchdogLaunchSlowerThanUsual severity=warning launch=a", "discord-warnings", id="slow"
        ),
        pytest.param(
            "alertname=WatchdogSSHHostUnreachable severity=warning host=gpu1", "slack-critical", id="host"
        ),
        pytest.param(
            "alertname=WatchdogHostUnreachable severity=error launch=a host=gpu1",
            "slack-critical",
            id="daemon-host",
        ),
        pytest.param("alertname=WatchdogDown severity=critical instance=w0", "slack-critical", id="down"),
        pytest.param(
            "alertname=WatchdogAlertsFailing severity=warning notifier=x", "slack-critical", id="failing"
        ),
    ],
)
def test_amtool_routes_each_alert(labels: str, receiver: str) -> None:
    """`amtool config routes test` sends each alert to its receiver: crashes and the platform to Slack, launch
    warnings to Discord."""
    result = _run(
        [
            _amtool(),
            "config",
            "routes",
            "test",
            f"--config.file={ALERTMANAGER_YML}",
            f"--verify.receivers={receiver}",
            *labels.split(),
        ]
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _alertmanager_config(tmp: Path) -> Path:
    """alertmanager.yml with its webhook URLs (secret files, placeholders) pointed at a closed loopback port."""
    config = _yaml(ALERTMANAGER_YML)
    nowhere = "http://127.0.0.1:9/"  # the discard port: nothing is delivered (group_wait is 30 s anyway)
    for receiver in config["receivers"]:
        for slack in receiver.get("slack_configs", []):
            url_file = tmp / "slack_url"
            url_file.write_text(nowhere + "slack\n")
            assert slack["api_url_file"].startswith("/etc/alertmanager/secrets/")
            slack["api_url_file"] = str(url_file)
        for discord in receiver.get("discord_configs", []):
            discord["webhook_url"] = nowhere + "discord"
    path = tmp / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("source", ["WatchdogSSHHostUnreachable", "WatchdogHostUnreachable"])
async def test_alertmanager_inhibits_stalls_on_an_unreachable_host(tmp_path: Path, source: str) -> None:
    """In a real Alertmanager with alertmanager.yml, an unreachable host (Prometheus' alert or the daemon's)
    mutes the stall and slow alerts of the launches on that host, and nothing else."""
    binary = require_binary(
        "prometheus-alertmanager", "prometheus-alertmanager", "WATCHDOG_REQUIRE_ALERTMANAGER"
    )
    argv = [
        binary,
        f"--config.file={_alertmanager_config(tmp_path)}",
        f"--storage.path={tmp_path / 'data{attempt}'}",
        "--cluster.listen-address=",  # no gossip port: a single instance, loopback only
        "--log.level=warn",
    ]
    now = datetime.now(UTC).isoformat()
    alerts = {
        "host": {"alertname": source, "host": "gpu1", "severity": "warning"},
        "stall-gpu1": {
            "alertname": "WatchdogLaunchStalled",
            "launch": "a",
            "host": "gpu1",
            "severity": "warning",
        },
        "slow-gpu1": {
            "alertname": "WatchdogLaunchSlowerThanUsual",
            "launch": "b",
            "host": "gpu1",
            "severity": "warning",
        },
        "stall-gpu2": {
            "alertname": "WatchdogLaunchStalled",
            "launch": "c",
            "host": "gpu2",
            "severity": "warning",
        },
        "crash-gpu1": {
            "alertname": "WatchdogLaunchCrashed",
            "launch": "d",
            "host": "gpu1",
            "severity": "critical",
        },
    }
    async with _open_binary(argv, tmp_path, "alertmanager") as client:
        posted = await client.post(
            "/api/v2/alerts", json=[{"labels": a, "startsAt": now} for a in alerts.values()]
        )
        assert posted.status_code == 200, posted.text
        want = {
            "host": "active",
            "stall-gpu1": "suppressed",
            "slow-gpu1": "suppressed",
            "stall-gpu2": "active",
            "crash-gpu1": "active",
        }
        seen: dict[str, dict[str, Any]] = {}
        states: dict[str, str] = {}
        # the inhibitor takes in a new source alert on its own goroutine: ask until the states settle
        with anyio.move_on_after(DEADLINE):
            while states != want:
                listed = (await client.get("/api/v2/alerts")).json()
                seen = {
                    key: a
                    for a in listed
                    for key, labels in alerts.items()
                    if labels.items() <= a["labels"].items()
                }
                states = {key: a["status"]["state"] for key, a in seen.items()}
                if states != want:
                    await anyio.sleep(POLL)

    assert states == want
    assert seen["stall-gpu1"]["status"]["inhibitedBy"] == [seen["host"]["fingerprint"]]
    receivers = {key: [r["name"] for r in a["receivers"]] for key, a in seen.items()}
    assert receivers["crash-gpu1"] == ["slack-critical"]
    assert receivers["stall-gpu2"] == ["discord-warnings"]


# --- compose ------------------------------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = _yaml(COMPOSE)
    return data


def _binds(service: str) -> dict[str, Path]:
    """A service's bind mounts: container path -> the file or folder on the machine (relative to the compose file)."""
    out = {}
    for volume in _compose()["services"][service].get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            out[target] = (COMPOSE_DIR / source).resolve()
    return out


def test_compose_mounts_exist() -> None:
    """Every bind mount of every compose service points at a file or folder of the repository that exists."""
    services = _compose()["services"]
    assert set(services) == {"watchdog", "prometheus", "alertmanager", "grafana"}
    for name in services:
        for target, source in _binds(name).items():
            assert source.exists(), f"{name}: {source} (mounted at {target}) does not exist"
            assert ROOT in source.parents, f"{name}: {source} is outside the repository"


def test_compose_builds_the_top_level_dockerfile_and_runs_its_config() -> None:
    """The watchdog service is built from the top-level Dockerfile, runs the config it mounts, and that config
    loads with the watchdog's own loader and listens where Prometheus scrapes it."""
    watchdog = _compose()["services"]["watchdog"]
    context = (COMPOSE_DIR / watchdog["build"]["context"]).resolve()
    assert context / watchdog["build"]["dockerfile"] == DOCKERFILE.resolve()
    command = re.sub(r"\$\{WATCHDOG_COMMAND:-(.*)\}", r"\1", watchdog["command"]).split()
    assert command[:2] == ["run", "--config"]
    binds = _binds("watchdog")
    config = load_config(binds[command[2]])
    assert binds["/etc/llm-launch-watchdog/config.toml"] == (COMPOSE_DIR / "config.toml").resolve()
    ssh = PurePosixPath(next(t for t, s in binds.items() if s == (COMPOSE_DIR / "ssh").resolve()))
    for host in config.hosts.values():
        for path in (host.identity, host.known_hosts):
            assert path is not None
            assert ssh in PurePosixPath(path).parents, path
    (job,) = [j for j in _yaml(PROMETHEUS_YML)["scrape_configs"] if j["job_name"] == JOB]
    assert job["static_configs"][0]["targets"] == [f"watchdog:{config.daemon.listen_port}"]
    assert f"127.0.0.1:{config.daemon.listen_port}:{config.daemon.listen_port}" in watchdog["ports"]
    notifiers = {n.kind: n for n in config.notifiers.values()}
    assert "alertmanager" in notifiers
    (alertmanagers,) = _yaml(PROMETHEUS_YML)["alerting"]["alertmanagers"]
    assert alertmanagers["static_configs"][0]["targets"] == ["alertmanager:9093"]


def test_compose_mounts_are_where_the_programs_read_them() -> None:
    """Prometheus finds its rules through rule_files, Alertmanager its config and secrets, Grafana its
    provisioning and the dashboard folder the provider names."""
    prometheus = _binds("prometheus")
    assert prometheus["/etc/prometheus/prometheus.yml"] == PROMETHEUS_YML.resolve()
    for pattern in _yaml(PROMETHEUS_YML)["rule_files"]:
        folder = str(PurePosixPath("/etc/prometheus") / pattern).rsplit("/", 1)[0]
        assert prometheus[folder] == (PROMETHEUS_DIR / pattern).parent.resolve()
    alertmanager = _binds("alertmanager")
    assert alertmanager["/etc/alertmanager/alertmanager.yml"] == ALERTMANAGER_YML.resolve()
    url_files = [
        slack["api_url_file"]
        for receiver in _yaml(ALERTMANAGER_YML)["receivers"]
        for slack in receiver.get("slack_configs", [])
    ]
    assert url_files
    for url_file in url_files:
        assert alertmanager[str(PurePosixPath(url_file).parent)] == (COMPOSE_DIR / "secrets").resolve()
    grafana = _binds("grafana")
    assert (
        grafana["/etc/grafana/provisioning/datasources"] == (GRAFANA_PROVISIONING / "datasources").resolve()
    )
    assert grafana["/etc/grafana/provisioning/dashboards"] == (GRAFANA_PROVISIONING / "dashboards").resolve()
    (provider,) = _yaml(GRAFANA_PROVISIONING / "dashboards" / "watchdog.yml")["providers"]
    assert grafana[provider["options"]["path"]] == DASHBOARD.parent.resolve()
    (source,) = _yaml(GRAFANA_PROVISIONING / "datasources" / "prometheus.yml")["datasources"]
    assert source["url"] == "http://prometheus:9090"
    home = _compose()["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD.name}"


# --- Kubernetes -------------------------------------------------------------------------------------------------


def _k8s() -> dict[str, dict[str, Any]]:
    """Every object of deploy/k8s/*.yaml by kind (one of each)."""
    objects: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["kind"] not in objects, f"two {doc['kind']} objects"
            objects[doc["kind"]] = doc
    return objects


def test_k8s_kustomization_lists_every_manifest() -> None:
    """kustomization.yaml lists exactly the other manifests of deploy/k8s/."""
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(_k8s()["Kustomization"]["resources"]) == manifests


def test_k8s_statefulset_mounts_the_configmap_and_secret_it_names() -> None:
    """The StatefulSet mounts the ConfigMap and the Secret by their names, its --config is a key of the
    ConfigMap at its mount path, and the config's SSH key paths are keys of the Secret at its mount path."""
    objects = _k8s()
    pod = objects["StatefulSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    claims = {c["metadata"]["name"] for c in objects["StatefulSet"]["spec"]["volumeClaimTemplates"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert set(mounts) == set(volumes) | claims
    config_map, secret = objects["ConfigMap"], objects["Secret"]
    (config_volume,) = [n for n, v in volumes.items() if "configMap" in v]
    (ssh_volume,) = [n for n, v in volumes.items() if "secret" in v]
    assert volumes[config_volume]["configMap"]["name"] == config_map["metadata"]["name"]
    assert volumes[ssh_volume]["secret"]["secretName"] == secret["metadata"]["name"]
    assert volumes[ssh_volume]["secret"]["defaultMode"] == 0o440

    args = container["args"]
    config_path = PurePosixPath(args[args.index("--config") + 1])
    assert str(config_path.parent) == mounts[config_volume]
    assert config_path.name in config_map["data"]
    assert mounts["state"] == "/var/lib/llm-launch-watchdog"

    config = tomllib.loads(config_map["data"][config_path.name])
    assert config["daemon"]["state_dir"] == mounts["state"]
    for host in config["hosts"].values():
        for key in ("identity", "known_hosts"):
            path = PurePosixPath(host[key])
            assert str(path.parent) == mounts[ssh_volume], path
            assert path.name in secret["stringData"], path


def test_k8s_configmap_config_loads(tmp_path: Path) -> None:
    """The ConfigMap's config.toml is a valid watchdog config (the watchdog's own loader)."""
    path = tmp_path / "config.toml"
    path.write_text(_k8s()["ConfigMap"]["data"]["config.toml"])
    config = load_config(path)
    assert config.launches
    assert not config.daemon.listen_is_loopback
    assert config.daemon.insecure_public


def test_k8s_ports_and_selectors_agree() -> None:
    """The config's listen port is the container's named port, which the Service, the probes, the
    ServiceMonitor and the NetworkPolicy use; the selectors match the pod's labels."""
    objects = _k8s()
    statefulset, service, monitor, policy = (
        objects["StatefulSet"],
        objects["Service"],
        objects["ServiceMonitor"],
        objects["NetworkPolicy"],
    )
    template = statefulset["spec"]["template"]
    (container,) = template["spec"]["containers"]
    (port,) = container["ports"]
    listen = tomllib.loads(objects["ConfigMap"]["data"]["config.toml"])["daemon"]["listen"]
    assert port["containerPort"] == int(listen.rsplit(":", 1)[1])
    labels = template["metadata"]["labels"]
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"] == JOB
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == port["name"]
    assert service_port["port"] == port["containerPort"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service_port["name"]
    assert endpoint["path"] == "/metrics"
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == [port["name"]]


def test_k8s_shard_comes_from_the_ordinal() -> None:
    """--shard is $(WATCHDOG_SHARD_INDEX)/$(WATCHDOG_SHARDS): the index from the pod-index label, the count
    equal to the replicas, and every ordinal gives a shard spec that parses."""
    statefulset = _k8s()["StatefulSet"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["WATCHDOG_SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    replicas = statefulset["spec"]["replicas"]
    assert int(env["WATCHDOG_SHARDS"]["value"]) == replicas
    args = container["args"]
    spec = args[args.index("--shard") + 1]
    assert spec == "$(WATCHDOG_SHARD_INDEX)/$(WATCHDOG_SHARDS)"
    shards = []
    for ordinal in range(replicas):
        values = {"WATCHDOG_SHARD_INDEX": str(ordinal), "WATCHDOG_SHARDS": env["WATCHDOG_SHARDS"]["value"]}
        expanded = spec
        for name, value in values.items():
            expanded = expanded.replace(f"$({name})", value)  # as Kubernetes expands $(VAR) in args
        shards.append(parse_shard(expanded))
    assert [(s.index, s.count) for s in shards] == [(i, replicas) for i in range(replicas)]


def test_k8s_pod_runs_as_the_image_user_without_privileges() -> None:
    """The pod runs as the image's uid 10001 with fsGroup 10001 (the keys' group), no privilege escalation,
    no capabilities and a read-only root filesystem."""
    spec = _k8s()["StatefulSet"]["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsUser"] == IMAGE_UID
    assert spec["securityContext"]["fsGroup"] == IMAGE_UID
    assert f"--uid {IMAGE_UID}" in DOCKERFILE.read_text()
    (container,) = spec["containers"]
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]


# --- Kubernetes: a server's startupProbe that asks watchdog (deploy/k8s-probe) -------------------------------

K8S_PROBE = DEPLOY / "k8s-probe"


def _probe_kit() -> dict[str, list[dict[str, Any]]]:
    """Every object of deploy/k8s-probe/*.yaml, by kind."""
    objects: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(K8S_PROBE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            objects.setdefault(doc["kind"], []).append(doc)
    return objects


def startup_probe_command() -> list[str]:
    """The exec command of deploy/k8s-probe's vLLM startupProbe."""
    (deployment,) = _probe_kit()["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command: list[str] = container["startupProbe"]["exec"]["command"]
    return command


def test_k8s_probe_asks_the_daemon_of_deploy_k8s_with_the_token_it_mounts() -> None:
    """The vLLM Deployment's startupProbe is `watchdog probe NAME --url ... --token-file F` as the parser takes
    it: NAME is the launch the header's config names, the URL a pod of deploy/k8s's StatefulSet by its Service
    on the daemon's port, F the token file of the mounted Secret that probe-token-secret.yaml makes in the
    server's namespace (and the daemon's); the package it runs is the one the init container copies."""
    from watchdog.cli.app import build_parser  # noqa: PLC0415

    kit, daemon = _probe_kit(), _k8s()
    (deployment,) = kit["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = startup_probe_command()
    assert command[:2] == ["env", "PYTHONPATH=/opt/watchdog-probe"]
    assert command[2:5] == ["python3", "-m", "watchdog.cli"]
    args = build_parser().parse_args(command[5:])
    assert args.command == "probe"
    header = K8S_PROBE.joinpath("vllm-deployment.yaml").read_text()
    assert re.search(rf"^#\s+\[launches\.{re.escape(args.name)}\]$", header, re.MULTILINE)
    selector = re.search(r'^#\s+selector = "(.*)"$', header, re.MULTILINE)
    assert selector is not None
    labels = dict(pair.split("=") for pair in selector.group(1).split(","))
    assert labels.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    namespace = re.search(r'^#\s+namespace = "(.*)"$', header, re.MULTILINE)
    assert namespace is not None
    assert namespace.group(1) == deployment["metadata"]["namespace"]

    url = urlsplit(args.url)
    statefulset, service = daemon["StatefulSet"], daemon["Service"]
    pod_name, service_name, daemon_namespace = (url.hostname or "").split(".")[:3]
    assert pod_name.rsplit("-", 1)[0] == statefulset["metadata"]["name"]
    assert service_name == service["metadata"]["name"]
    assert daemon_namespace == daemon["Namespace"]["metadata"]["name"]
    assert url.port == service["spec"]["ports"][0]["port"]

    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    token_file = PurePosixPath(str(args.token_file))
    (token_volume,) = [n for n, p in mounts.items() if p == str(token_file.parent)]
    secret_name = volumes[token_volume]["secret"]["secretName"]
    secrets = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in kit["Secret"]}
    assert token_file.name in secrets[(deployment["metadata"]["namespace"], secret_name)]["stringData"]
    assert (daemon_namespace, secret_name) in secrets
    (init,) = pod["initContainers"]
    assert init["image"] == statefulset["spec"]["template"]["spec"]["containers"][0]["image"]
    copied = {m["mountPath"] for m in init["volumeMounts"]}
    assert command[1].removeprefix("PYTHONPATH=") in copied
    assert f'"{command[1].removeprefix("PYTHONPATH=")}/watchdog"' in init["command"][-1]


def test_k8s_probe_pods_may_reach_the_daemons_port() -> None:
    """The probe kit's NetworkPolicy selects the daemon's pods and admits the server's pods (by the label their
    template carries, from their namespace) on the daemon's named port."""
    kit, daemon = _probe_kit(), _k8s()
    (policy,) = kit["NetworkPolicy"]
    (deployment,) = kit["Deployment"]
    template = daemon["StatefulSet"]["spec"]["template"]
    assert policy["metadata"]["namespace"] == daemon["Namespace"]["metadata"]["name"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    namespace = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
    assert namespace == deployment["metadata"]["namespace"]
    server_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert peer["podSelector"]["matchLabels"].items() <= server_labels.items()
    assert [p["port"] for p in rule["ports"]] == [template["spec"]["containers"][0]["ports"][0]["name"]]
