"""The daemon against a real Alertmanager (Debian's prometheus-alertmanager) on loopback.

A crash appears in Alertmanager's /api/v2/alerts with the documented labels; a new start resolves it;
two daemons (an HA pair) saying the same crash make one alert in one group. Without the binary these tests
skip, unless WATCHDOG_REQUIRE_ALERTMANAGER=1 (CI), where they fail.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from conftest import require_binary
from http_client import Client
from prom_servers import POLL, open_binary

from watchdog.alerts.senders import ServiceNotifier
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.vocabulary import runbook_url

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
async def alertmanager(tmp_path: Path) -> AsyncIterator[Client]:
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


def _plans(path: Path, am: Client, **options: str) -> dict[str, LaunchPlan]:
    notifier = ServiceNotifier(
        name="am", kind="alertmanager", urls=(am.base_url,), timeout=5.0, options=options
    )
    spec = LaunchSpec(name="qwen", target=parse_target(str(path)))
    return {"qwen": LaunchPlan(spec, host="", labels={"team": "inference"}, alerts=(notifier,))}


async def _watchdog_alerts(am: Client) -> list[dict[str, Any]]:
    alerts = (await am.get("/api/v2/alerts")).json()
    return [a for a in alerts if a["labels"].get("alertname", "").startswith("Watchdog")]


async def _groups(am: Client) -> list[dict[str, Any]]:
    return [g for g in (await am.get("/api/v2/alerts/groups")).json() if g["alerts"]]


async def _none_firing(am: Client) -> bool:
    return not await _watchdog_alerts(am)


async def test_a_crash_fires_in_alertmanager_and_a_new_start_resolves_it(
    tmp_path: Path, alertmanager: Client
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
        # the same runbook section as the Prometheus rule's alert of that name
        assert alerts[0]["annotations"]["runbook_url"] == runbook_url("WatchdogLaunchCrashed")
        assert runbook_url("WatchdogLaunchCrashed").endswith("/docs/runbooks.md#watchdoglaunchcrashed")
        assert "\n## WatchdogLaunchCrashed\n" in RUNBOOKS.read_text()
        assert alerts[0]["status"]["state"] == "active"
        # a new start: the log replaced by another file
        fresh = tmp_path / "fresh.log"
        fresh.write_bytes(READY.read_bytes())
        fresh.replace(log)
        await _until(lambda: _none_firing(alertmanager))
        tg.cancel_scope.cancel()


async def test_the_notifiers_runbook_url_option_points_the_alert_at_a_teams_own_runbooks(
    tmp_path: Path, alertmanager: Client
) -> None:
    """With the alertmanager notifier's `runbook_url` set, the alert Alertmanager holds points at the
    alert's section of that address instead of the project's docs/runbooks.md."""
    log = tmp_path / "qwen.log"
    base = "https://wiki.example/llm/runbooks"
    daemon = Daemon(_plans(log, alertmanager, runbook_url=base), handle_signals=False)
    async with anyio.create_task_group() as tg:
        await tg.start(daemon.run)
        log.write_bytes(CRASH.read_bytes())
        (alert,) = await _until(lambda: _watchdog_alerts(alertmanager))
        tg.cancel_scope.cancel()
    assert alert["annotations"]["runbook_url"] == f"{base}#watchdoglaunchcrashed"


async def test_an_ha_pair_saying_one_crash_makes_one_alert_group(
    tmp_path: Path, alertmanager: Client
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


ALERTMANAGER_YML = Path(__file__).parent.parent / "deploy" / "alertmanager" / "alertmanager.yml"
RUNBOOKS = Path(__file__).parent.parent / "docs" / "runbooks.md"
CRAFTED = (
    "@channel @here @everyone <!channel> <!here> <@U123> <https://evil.example|Open the status page> "
    "[Fix: run this](https://evil.example/fix.sh) & more"
)
# What Slack (or Discord) would act on: a mention, <!...>/<@...>, a link in Slack's or Markdown's form.
_ACTIVE = re.compile(r"@(?:channel|here|everyone)\b|<[!@#]|<https?:|\]\(")


def _crafted_crash() -> bytes:
    """SGLang loading its weights, then its scheduler dying with a crash line full of mentions and links."""
    lines = READY.read_bytes().splitlines(keepends=True)
    crash = (
        "[2025-01-23 19:35:21 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/srt/managers/scheduler.py", line 1200, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args)\n"
        f"RuntimeError: Not enough memory. {CRAFTED}\n"
    )
    return b"".join(lines[:12]) + crash.encode()


def _shipped_templates() -> list[tuple[str, str]]:
    """(receiver/field, template text) of each text the shipped config's chat receivers render."""
    config = yaml.safe_load(ALERTMANAGER_YML.read_text())
    out = []
    for receiver in config["receivers"]:
        for key, fields in (
            ("slack_configs", ("title", "text", "title_link")),
            ("discord_configs", ("title", "message")),
        ):
            for item in receiver.get(key, ()):
                out.extend((f"{receiver['name']}/{field}", item[field]) for field in fields)
    return out


async def test_the_shipped_chat_templates_render_a_crafted_crash_line_inert(
    tmp_path: Path, alertmanager: Client
) -> None:
    """A crash line holding <!channel>, @channel, <@U123>, a Slack link and a Markdown link, sent by the daemon
    to a real Alertmanager, is rendered by the shipped config's Slack and Discord templates (`amtool template
    render`) as text that mentions and links nobody (`<`, `>`, `&` escaped for Slack), yet still says it."""
    amtool = require_binary("amtool", "prometheus-alertmanager", "WATCHDOG_REQUIRE_ALERTMANAGER")
    log = tmp_path / "kimi.log"
    async with anyio.create_task_group() as tg:
        daemon = Daemon(_plans(log, alertmanager), handle_signals=False)
        await tg.start(daemon.run)
        log.write_bytes(_crafted_crash())
        (alert,) = await _until(lambda: _watchdog_alerts(alertmanager))
        tg.cancel_scope.cancel()
    assert CRAFTED in alert["annotations"]["summary"]  # Alertmanager holds the log text as it was
    item = {
        key: alert.get(key, "") for key in ("labels", "annotations", "startsAt", "endsAt", "generatorURL")
    }
    data = {
        "receiver": "slack-critical",
        "status": "firing",
        "alerts": [{**item, "status": "firing", "fingerprint": alert["fingerprint"]}],
        "groupLabels": {k: alert["labels"][k] for k in ("alertname", "launch")},
        "commonLabels": alert["labels"],
        "commonAnnotations": alert["annotations"],
        "externalURL": alertmanager.base_url,
    }
    (tmp_path / "data.json").write_text(json.dumps(data))
    (tmp_path / "none.tmpl").write_text("")
    templates = _shipped_templates()
    assert {name for name, _ in templates} >= {
        "slack-critical/title",
        "slack-critical/text",
        "slack-critical/title_link",
        "discord-warnings/message",
    }
    runbook = alert["annotations"]["runbook_url"]
    assert runbook == runbook_url("WatchdogLaunchCrashed")
    for name, text in templates:
        result = await anyio.run_process(
            [
                amtool,
                "template",
                "render",
                f"--template.glob={tmp_path / 'none.tmpl'}",
                f"--template.data={tmp_path / 'data.json'}",
                f"--template.text={text}",
            ],
            check=False,
        )
        assert result.returncode == 0, (name, result.stderr)
        rendered = result.stdout.decode()
        assert [m.group(0) for m in _ACTIVE.finditer(rendered)] == [], name
        if name.endswith("/title_link"):  # the title links to the alert's runbook, as Alertmanager got it
            assert rendered.strip() == runbook
            continue
        if name.endswith("/message"):
            assert rendered.rstrip().endswith(f"Runbook: {runbook}"), name
        said = html.unescape(rendered.replace("\u200b", ""))
        assert "<!channel> <!here> <@U123>" in said, name
        assert "@channel @here @everyone" in said, name
        if name.startswith("slack"):
            assert "&lt;!channel&gt;" in rendered, name
            assert "&amp; more" in rendered, name
