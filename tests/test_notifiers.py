"""Tests for the notifier kinds: each service's message, received by a real HTTP server on loopback."""

from __future__ import annotations

import email.header
import html
import html.parser
import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_receiver import SECRET_PATH, Answer, Got, Receiver
from snapshots import status_from_json

from watchdog.alerts import compose
from watchdog.alerts.compose import COLOUR, traceback_tail
from watchdog.alerts.delivery import TransientDeliveryError, open_client, send
from watchdog.alerts.notifiers import KINDS, Alert, AlertKind, build_message
from watchdog.alerts.notifiers.webhook import check_template
from watchdog.exceptions import DeliveryError
from watchdog.follow.follower import LaunchFollower, LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.follow.testing import ManualClock, ScriptedSource
from watchdog.vocabulary import Category, format_duration

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
ROUTING_KEY = "R0UT1NGKEYsecret0123456789abcdef"
OPTIONS: dict[str, dict[str, Any]] = {
    "telegram": {"chat_id": -100123},
    "pagerduty": {"routing_key": ROUTING_KEY},
    "ntfy": {"token": "tk_ntfysecret"},
}
# Where each kind's request goes, after the configured URL's path.
PATHS = {"telegram": "/sendMessage", "pagerduty": "/v2/enqueue", "alertmanager": "/api/v2/alerts"}
NOW = datetime(2025, 7, 2, 7, 42, 0, tzinfo=UTC)


def _status(**over: Any) -> dict[str, Any]:
    """A daemon status snapshot of an SGLang crash in graph capture on two ranks."""
    status: dict[str, Any] = {
        "engine": "sglang",
        "state": "crashed",
        "phase": "capturing_graphs",
        "error": {
            "category": "oom",
            "summary": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "exception": "torch.OutOfMemoryError",
            "hint": "lower --mem-fraction-static or --cuda-graph-max-bs",
            "ranks": ["TP0", "TP1"],
            "line": 812,
            "traceback": [
                "Traceback (most recent call last):",
                '  File "/sgl/model_runner.py", line 1200, in init_cuda_graphs',
                "    self.cuda_graph_runner = CudaGraphRunner(self)",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB <@U123> & __init__",
            ],
        },
        "timeline": [
            {"state": "starting", "line": 1, "at": None, "reason": "launch started"},
            {"state": "loading_weights", "line": 40, "at": None},
            {"state": "capturing_graphs", "line": 700, "at": None},
            {"state": "crashed", "line": 812, "at": None, "reason": "torch.OutOfMemoryError"},
        ],
        "progress": {"weights": {"done": 64, "total": 64}, "graphs": {"done": 12, "total": 35}},
        "facts": {"avail_mem_after_weights_gb": 16.3, "kv_cache_tokens": 812345},
        "lines_read": 812,
        "bytes_read": 99000,
        "incarnation": 2,
        "incarnations": 2,
        "name": "kimi-ep",
        "target": "/data/logs/ep.log",
        "elapsed_seconds": 432.0,
        "entered": [0.0, 30.0, 400.0, 431.5],
        "last_line": "Capturing batches (bs=96 avail_mem=1.2 GB)",
        "host": "gpu1",
        "since": "2025-07-02T07:35:00Z",
        "labels": {"team": "infra"},
    }
    status.update(over)
    return status


def _alert(kind: AlertKind = AlertKind.CRASHED, **status: Any) -> Alert:
    return Alert.from_status(
        kind, status_from_json(_status(**status)), link="http://127.0.0.1:9469/#kimi-ep", now=NOW
    )


def test_an_alert_keeps_its_category_typed_and_says_it_as_before() -> None:
    """An alert's category is a `Category`, from the status and back from the outbox; its dict keeps the string
    ("" for an alert without one)."""
    crashed, stalled = _alert(), _alert(AlertKind.STALLED, error=None)
    assert crashed.category is Category.OOM
    assert Alert.from_dict(crashed.to_dict()).category is Category.OOM
    assert (json.loads(json.dumps(crashed.to_dict()))["category"], stalled.to_dict()["category"]) == (
        "oom",
        "",
    )
    assert Alert.from_dict(stalled.to_dict()).category is None


def _huge(alert: Alert) -> Alert:
    """The same alert with a 10 kB summary and hint, a 3000-line traceback with a 10 kB line, 60 facts."""
    lines = [
        f'  File "/very/long/path/module_{i}.py", line {i}, in f{i} & <x> ' + "y" * 150 for i in range(3000)
    ]
    lines.append("RuntimeError: " + "z" * 10_000)
    return replace(
        alert,
        summary="RuntimeError: " + "&<>" * 3400,
        hint="h" * 10_000,
        detail="d" * 10_000,
        last_line="l" * 10_000,
        traceback=tuple(lines),
        facts=tuple((f"fact_{i}", "v" * 500) for i in range(60)),
        ranks=tuple(f"TP{i}" for i in range(64)),
    )


def _all_kinds_alerts() -> list[Any]:
    base = _alert()
    cases = [pytest.param(base, id="crashed")]
    stalled = _alert(
        AlertKind.STALLED,
        state="stalled",
        error=None,
        timeline=[
            *_status()["timeline"][:3],
            {"state": "stalled", "line": None, "reason": "no progress for 300s"},
        ],
    )
    cases += [
        pytest.param(stalled, id="stalled"),
        pytest.param(
            _alert(AlertKind.READY, state="ready", error=None, time_to_ready_seconds=432.0), id="ready"
        ),
        pytest.param(base.resolution(NOW + timedelta(minutes=3)), id="resolved"),
        pytest.param(_alert(AlertKind.UNREACHABLE, detail="gpu1: Connection refused"), id="unreachable"),
        pytest.param(_alert(AlertKind.REPLACED, detail="the log was truncated"), id="replaced"),
        pytest.param(_huge(base), id="crashed-huge"),
        pytest.param(_huge(stalled), id="stalled-huge"),
    ]
    return cases


# -- what each service receives ------------------------------------------------------------------------


def _check_slack(got: Got, alert: Alert) -> None:
    body = got.json()
    blocks = body["blocks"]
    assert body["text"]
    assert len(body["text"]) <= 3000
    assert 0 < len(blocks) <= 50
    assert blocks[0]["type"] == "header"
    assert blocks[0]["text"]["type"] == "plain_text"
    assert len(blocks[0]["text"]["text"]) <= 150
    for block in blocks:
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
        if "fields" in block:
            assert len(block["fields"]) <= 10
            assert all(len(f["text"]) <= 2000 for f in block["fields"])
    if alert.kind is AlertKind.CRASHED:
        code = next(b["text"]["text"] for b in blocks if "```" in b.get("text", {}).get("text", ""))
        assert "<@U123>" not in json.dumps(body)  # no mention smuggled in by a log line
        if len(alert.traceback) > 100:
            assert "... (cut, " in code


def _check_discord(got: Got, alert: Alert) -> None:
    body = got.json()
    assert body["allowed_mentions"] == {"parse": []}
    (embed,) = body["embeds"]
    assert 0 < len(embed["title"]) <= 256
    assert len(embed["description"]) <= 4096
    assert len(embed["fields"]) <= 25
    assert all(len(f["name"]) <= 256 and 0 < len(f["value"]) <= 1024 for f in embed["fields"])
    total = len(embed["title"]) + len(embed["description"]) + len(embed["footer"]["text"])
    total += sum(len(f["name"]) + len(f["value"]) for f in embed["fields"])
    assert total <= 6000
    assert embed["color"] == COLOUR[alert.kind]
    if alert.kind is AlertKind.CRASHED and len(alert.traceback) > 100:
        assert "... (cut, " in embed["description"]


def _check_teams(got: Got, alert: Alert) -> None:
    body = got.json()
    assert len(got.body) <= 28_000
    assert body["type"] == "message"
    (attachment,) = body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard"
    assert card["version"] in {"1.4", "1.5"}
    assert card["body"]
    assert card["actions"][0]["type"] == "Action.OpenUrl"


def _check_mattermost(got: Got, alert: Alert) -> None:
    body = got.json()
    (attachment,) = body["attachments"]
    assert body["text"]
    assert attachment["title"]
    assert attachment["color"] == f"#{COLOUR[alert.kind]:06X}"
    size = len(body["text"]) + len(attachment["text"]) + len(attachment["title"])
    size += sum(len(f["title"]) + len(f["value"]) for f in attachment["fields"])
    assert size <= 16_383


def _check_google_chat(got: Got, alert: Alert) -> None:
    body = got.json()
    assert len(got.body) <= 32_000
    assert len(body["text"]) <= 4096
    (card,) = body["cardsV2"]
    assert card["cardId"]
    assert card["card"]["header"]["title"]
    assert all(section["widgets"] for section in card["card"]["sections"])


class _TelegramHTML(html.parser.HTMLParser):
    """Checks Telegram's HTML: only its tags, each closed."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag in {"b", "i", "pre", "code", "a"}, tag
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open.pop() == tag

    def handle_data(self, data: str) -> None:
        self.text += data


def _check_telegram(got: Got, alert: Alert) -> None:
    body = got.json()
    assert got.path.endswith("/sendMessage")
    assert body["chat_id"] == -100123
    assert body["parse_mode"] == "HTML"
    assert 0 < len(body["text"]) <= 4096
    parser = _TelegramHTML()
    parser.feed(body["text"])
    parser.close()
    assert parser.open == []
    if alert.kind is AlertKind.CRASHED:
        # what a person reads (the zero-width space that makes `@U123` no mention is not seen)
        assert "<@U123> & __init__" in parser.text.replace("\u200b", "") or len(alert.traceback) > 100


def _check_ntfy(got: Got, alert: Alert) -> None:
    assert got.headers["Content-Type"].startswith("text/plain")
    assert got.headers["Title"]
    assert got.headers["Priority"]
    assert got.headers["Tags"]
    assert got.headers["Click"] == alert.link
    assert got.headers["Authorization"] == "Bearer tk_ntfysecret"
    assert 0 < len(got.body) <= 4096


def _check_pagerduty(got: Got, alert: Alert) -> None:
    body = got.json()
    assert got.path.endswith("/v2/enqueue")
    assert body["routing_key"] == ROUTING_KEY
    assert body["dedup_key"] == alert.incident_key
    if alert.kind is AlertKind.RESOLVED:
        assert body["event_action"] == "resolve"
        return
    payload = body["payload"]
    assert body["event_action"] == "trigger"
    assert 0 < len(payload["summary"]) <= 1024
    assert payload["severity"] in {"critical", "error", "warning", "info"}
    assert payload["source"] == "gpu1"
    assert payload["component"] == "kimi-ep"
    assert payload["custom_details"]["phase"] == alert.phase


def _check_webhook(got: Got, alert: Alert) -> None:
    body = got.json()
    assert body["kind"] == alert.kind.value
    assert body["dedup_key"] == alert.dedup_key
    assert body["launch"] == "kimi-ep"
    assert body["text"]


def _check_alertmanager(got: Got, alert: Alert) -> None:
    (item,) = got.json()
    assert got.path.endswith("/api/v2/alerts")
    labels = item["labels"]
    assert labels["alertname"].startswith("Watchdog")
    assert labels["launch"] == "kimi-ep"
    assert labels["host"] == "gpu1"
    assert labels["engine"] == "sglang"
    assert labels["severity"] == alert.severity
    assert labels["team"] == "infra"
    assert set(item["annotations"]) >= {"summary", "description"}
    assert item["startsAt"]
    assert item["generatorURL"] == alert.link
    assert ("endsAt" in item) == (alert.kind is AlertKind.RESOLVED)


CHECKS = {
    "slack": _check_slack,
    "discord": _check_discord,
    "teams": _check_teams,
    "mattermost": _check_mattermost,
    "google_chat": _check_google_chat,
    "telegram": _check_telegram,
    "ntfy": _check_ntfy,
    "pagerduty": _check_pagerduty,
    "webhook": _check_webhook,
    "alertmanager": _check_alertmanager,
}
# Kinds that take only problems and their resolutions.
INCIDENT_ONLY = {"pagerduty", "alertmanager"}


def test_every_kind_has_a_contract_check() -> None:
    """Each registered notifier kind is covered by the receiver tests below."""
    assert set(CHECKS) == set(KINDS)


@pytest.mark.parametrize("alert", _all_kinds_alerts())
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_service_receives_its_documented_message(receiver: Receiver, kind: str, alert: Alert) -> None:
    """A real receiver gets, for each alert kind, a message that meets the service's contract and limits,
    and never the URL's secret; PagerDuty and Alertmanager get nothing for news (ready, replaced)."""
    async with open_client() as client:
        sent = await send(kind, receiver.url(), alert, client=client, options=OPTIONS.get(kind), backoff=0.01)
    if kind in INCIDENT_ONLY and alert.kind in {AlertKind.READY, AlertKind.REPLACED}:
        assert sent is False
        assert receiver.got == []
        return
    assert sent is True
    (got,) = receiver.got
    assert got.method == "POST"
    assert got.path == SECRET_PATH + PATHS.get(kind, "")
    assert b"XyZsecretToken123" not in got.body
    CHECKS[kind](got, alert)


async def test_resolution_ends_the_alert_its_problem_opened(receiver: Receiver) -> None:
    """Alertmanager gets the same labels and startsAt for the crash and its resolution, which adds endsAt;
    PagerDuty's resolve carries the trigger's dedup_key."""
    crash = _alert()
    end = crash.resolution(NOW + timedelta(minutes=5))
    async with open_client() as client:
        for kind in ("alertmanager", "pagerduty"):
            for alert in (crash, end):
                await send(kind, receiver.url(), alert, client=client, options=OPTIONS.get(kind))
    (fired,), (resolved,) = receiver.got[0].json(), receiver.got[1].json()
    assert fired["labels"] == resolved["labels"]
    assert fired["startsAt"] == resolved["startsAt"]
    assert "endsAt" not in fired
    assert resolved["endsAt"] == "2025-07-02T07:47:00.000Z"
    trigger, resolve = receiver.got[2].json(), receiver.got[3].json()
    assert trigger["dedup_key"] == resolve["dedup_key"] == "kimi-ep/2/crashed"
    assert resolve["event_action"] == "resolve"


async def test_non_ascii_title_goes_to_ntfy_as_an_encoded_word(receiver: Receiver) -> None:
    """A launch name outside ASCII reaches ntfy's Title header as an RFC 2047 word that decodes back."""
    alert = replace(_alert(), launch="模型-ep")
    async with open_client() as client:
        await send("ntfy", receiver.url(), alert, client=client)
    title = receiver.got[0].headers["Title"]
    decoded = "".join(
        part.decode(enc or "ascii") if isinstance(part, bytes) else part
        for part, enc in email.header.decode_header(title)
    )
    assert decoded == alert.title


# -- the generic webhook's template ---------------------------------------------------------------------


async def test_webhook_template_table_keeps_json_whatever_the_values(receiver: Receiver) -> None:
    """A table template fills its string leaves; quotes and newlines in the values cannot break the JSON."""
    template = {
        "msg": "{emoji} {title}",
        "cause": "{summary}",
        "tb": "{traceback_end}",
        "n": 3,
        "gb": "{fact_avail_mem_after_weights_gb}",
    }
    alert = replace(_alert(), summary='bad "quote"\nand newline')
    async with open_client() as client:
        await send("webhook", receiver.url(), alert, client=client, options={"template": template})
    body = receiver.got[0].json()
    assert body["cause"] == 'bad "quote"\nand newline'
    assert body["n"] == 3
    assert body["gb"] == "16.3"
    assert body["msg"].endswith("kimi-ep on gpu1 crashed in capturing_graphs (oom)")


async def test_webhook_string_template_escapes_values_for_json(receiver: Receiver) -> None:
    """A JSON string template gets JSON-escaped values, so the body parses."""
    alert = replace(_alert(), summary='x"y\\z')
    template = '{{"text": "{summary}", "launch": "{launch:>10}"}}'
    async with open_client() as client:
        await send("webhook", receiver.url(), alert, client=client, options={"template": template})
    assert receiver.got[0].json() == {"text": 'x"y\\z', "launch": "   kimi-ep"}


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("{launch.__class__}", id="attribute"),
        pytest.param("{labels[0]}", id="index"),
        pytest.param("{0}", id="positional"),
        pytest.param("{secret_key}", id="unknown"),
        pytest.param("{summary:>999999999}", id="huge-width"),
        pytest.param("{summary!a}", id="conversion"),
    ],
)
async def test_webhook_template_refuses_to_reach_beyond_its_fields(receiver: Receiver, template: str) -> None:
    """A template that would look up attributes, indexes, unknown names or allocate a huge width is
    refused before anything is sent, and check_template says so at config time."""
    async with open_client() as client:
        with pytest.raises(DeliveryError, match="template"):
            await send("webhook", receiver.url(), _alert(), client=client, options={"template": template})
    assert receiver.got == []
    with pytest.raises(ValueError, match="template"):
        check_template(template)


# -- faults -----------------------------------------------------------------------------------------------


async def test_a_500_is_retried_and_the_alert_delivered_once(receiver: Receiver) -> None:
    """500 then 200: two requests, one delivery, no error."""
    receiver.script = [Answer(500, body="oops"), Answer(200)]
    async with open_client() as client:
        assert await send("slack", receiver.url(), _alert(), client=client, backoff=0.01)
    assert len(receiver.got) == 2
    assert receiver.got[0].body == receiver.got[1].body


async def test_429_retry_after_is_waited(receiver: Receiver) -> None:
    """A 429 with Retry-After: 1 is retried after that second, not after the (tiny) backoff."""
    receiver.script = [Answer(429, headers={"Retry-After": "1"}), Answer(200)]
    async with open_client() as client:
        start = anyio.current_time()
        assert await send("discord", receiver.url(), _alert(), client=client, backoff=0.01)
        waited = anyio.current_time() - start
    assert len(receiver.got) == 2
    assert waited >= 0.95  # a lower bound only: a loaded machine may take longer, never less


async def test_429_retry_after_in_a_json_body_is_waited(receiver: Receiver) -> None:
    """Telegram's `parameters.retry_after` (no header) sets the pause as well."""
    answer = json.dumps({"ok": False, "error_code": 429, "parameters": {"retry_after": 0.3}})
    receiver.script = [Answer(429, body=answer), Answer(200)]
    async with open_client() as client:
        start = anyio.current_time()
        await send(
            "telegram", receiver.url(), _alert(), client=client, options=OPTIONS["telegram"], backoff=0.001
        )
        waited = anyio.current_time() - start
    assert len(receiver.got) == 2
    assert waited >= 0.29


async def test_a_retry_after_longer_than_the_cap_is_left_to_the_outbox(receiver: Receiver) -> None:
    """A 429 asking for an hour is not waited here: a transient error that carries the pause, at once."""
    receiver.script = [Answer(429, headers={"Retry-After": "3600"})]
    async with open_client() as client:
        with pytest.raises(TransientDeliveryError) as info:
            await send("slack", receiver.url(), _alert(), client=client, max_retry_after=5)
    assert info.value.retry_after == 3600
    assert len(receiver.got) == 1


async def test_a_timeout_is_retried(receiver: Receiver) -> None:
    """A receiver that does not answer within the per-request timeout is tried again; the second answers."""
    receiver.script = [Answer(hang=True), Answer(200)]
    async with open_client() as client:
        assert await send("mattermost", receiver.url(), _alert(), client=client, timeout=0.3, backoff=0.01)
    assert len(receiver.got) == 2


async def test_a_permanent_400_is_not_retried_and_names_only_the_host(receiver: Receiver) -> None:
    """A 400 ends the delivery after one request, with a DeliveryError that names scheme://host:port and
    none of the secrets, even when the receiver echoes them."""
    receiver.script = [Answer(400, body=f"invalid_payload for {SECRET_PATH} key {ROUTING_KEY}")]
    async with open_client() as client:
        with pytest.raises(DeliveryError) as info:
            await send("pagerduty", receiver.url(), _alert(), client=client, options=OPTIONS["pagerduty"])
    assert not isinstance(info.value, TransientDeliveryError)
    assert len(receiver.got) == 1
    message = str(info.value)
    assert f"http://127.0.0.1:{receiver.port}" in message
    assert "HTTP 400" in message
    for secret in ("XyZsecretToken123", "T0SECRET", ROUTING_KEY):
        assert secret not in message


async def test_a_receiver_that_stays_down_is_a_transient_error_without_the_url(receiver: Receiver) -> None:
    """Three 503s in three attempts: a TransientDeliveryError (for the outbox), no secret in it."""
    receiver.script = [Answer(503)] * 3
    async with open_client() as client:
        with pytest.raises(TransientDeliveryError, match=r"\(3 attempts\)") as info:
            await send("teams", receiver.url(), _alert(), client=client, attempts=3, backoff=0.01)
    assert len(receiver.got) == 3
    assert "XyZsecret" not in str(info.value)


async def test_a_refused_connection_names_only_the_host() -> None:
    """Nothing listening: a transient error naming scheme://host:port only."""
    with anyio.fail_after(10):
        async with open_client() as client:
            with pytest.raises(TransientDeliveryError) as info:
                await send(
                    "slack",
                    f"http://127.0.0.1:9{SECRET_PATH}",
                    _alert(),
                    client=client,
                    attempts=2,
                    backoff=0.01,
                )
    assert "http://127.0.0.1:9" in str(info.value)
    assert "XyZsecret" not in str(info.value)


async def test_missing_required_options_are_refused_without_a_request(receiver: Receiver) -> None:
    """Telegram without chat_id and PagerDuty without routing_key fail at once, naming the option."""
    async with open_client() as client:
        with pytest.raises(DeliveryError, match="chat_id"):
            await send("telegram", receiver.url(), _alert(), client=client)
        with pytest.raises(DeliveryError, match="routing_key"):
            await send("pagerduty", receiver.url(), _alert(), client=client)
        with pytest.raises(DeliveryError, match="unknown notifier kind"):
            await send("carrier_pigeon", receiver.url(), _alert(), client=client)
    assert receiver.got == []


# -- the alert itself ------------------------------------------------------------------------------------


def test_alert_from_a_status_snapshot() -> None:
    """The snapshot's clock gives time in phase (to the crash) and since start; the crash is dated back
    from `now` to when it happened; the dedup key is (launch, incarnation, kind)."""
    alert = _alert()
    assert alert.title == "kimi-ep on gpu1 crashed in capturing_graphs (oom)"
    assert alert.time_in_phase == pytest.approx(31.5)
    assert alert.time_since_start == pytest.approx(431.5)
    assert alert.started_at == NOW - timedelta(seconds=0.5)
    assert alert.ranks == ("TP0", "TP1")
    assert alert.category == "oom"
    assert ("avail_mem_after_weights_gb", 16.3) in alert.facts
    assert ("graphs", 12, 35) in alert.progress
    assert alert.dedup_key == "kimi-ep/2/crashed" == _alert().dedup_key
    assert alert.resolution(NOW).dedup_key == "kimi-ep/2/crashed/resolved"
    assert alert.resolution(NOW).incident_key == alert.incident_key == "kimi-ep/2/crashed"


def test_stalled_alert_says_what_stopped() -> None:
    """A stall without an error takes the stall's reason as its summary, and keeps the last line."""
    alert = _alert(
        AlertKind.STALLED,
        state="stalled",
        error=None,
        timeline=[
            *_status()["timeline"][:3],
            {"state": "stalled", "line": None, "reason": "no progress for 300s"},
        ],
    )
    assert alert.summary == "no progress for 300s"
    assert alert.last_line.startswith("Capturing batches")
    assert alert.severity == "warning"
    assert build_message("slack", alert) is not None


def test_ready_alert_compares_with_the_usual() -> None:
    """A ready alert says the time to ready against the launch's usual one."""
    alert = Alert.from_status(
        "ready",
        status_from_json(_status(state="ready", phase="ready", error=None, time_to_ready_seconds=432.0)),
        usual_seconds=300.0,
    )
    message = build_message("webhook", alert)
    assert message is not None
    assert "ready after 7m12s (usually 5m00s)" in message.json["text"]


@pytest.mark.parametrize(
    ("lines", "limit", "expected"),
    [
        pytest.param(["a", "b", "c"], 100, "a\nb\nc", id="fits"),
        pytest.param(
            ["a" * 30, "b" * 10, "c" * 10],
            50,
            "... (cut, 1 more line)\n" + "b" * 10 + "\n" + "c" * 10,
            id="cut-one",
        ),
        pytest.param(
            ["x"] * 50 + ["Error: boom"], 40, "... (cut, 48 more lines)\nx\nx\nError: boom", id="cut-many"
        ),
        pytest.param(
            ["Error: " + "z" * 100], 20, "Error: " + "z" * 12 + "\N{HORIZONTAL ELLIPSIS}", id="one-long-line"
        ),
        pytest.param(
            ["x", "Error: " + "z" * 100],
            40,
            "... (cut, 1 more line)\nError: " + "z" * 9 + "\N{HORIZONTAL ELLIPSIS}",
            id="long-last-line",
        ),
    ],
)
def test_traceback_tail_keeps_the_end_and_says_it_cut(lines: list[str], limit: int, expected: str) -> None:
    """The end of a traceback is kept within the limit; dropped lines are counted in a note."""
    text = traceback_tail(lines, limit)
    assert text == expected
    assert len(text) <= limit


async def test_alert_from_a_real_followers_snapshot() -> None:
    """A LaunchFollower's own status(), after a crash 40 s into the launch, makes a crashed alert with the
    follower's phase, category and times."""
    data = (FIXTURES / "stories" / "ep8-oom-logging-noise.log").read_bytes()
    cut_at = data.index(b"Traceback")
    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(
        LaunchSpec(name="ep8", target=parse_target("/x.log"), engine="sglang"), source=source, clock=clock
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)

        async def drain() -> None:
            with follower.updates:
                async for _ in follower.updates:
                    pass

        tg.start_soon(drain)
        await source.append(data[:cut_at])
        await source.catch_up()
        await clock.advance(40.0)
        await source.append(data[cut_at:])
        await source.catch_up()
        await clock.advance(6.0)
        status = follower.status().to_json()
        tg.cancel_scope.cancel()
    status.update(host="gpu1", since="2025-07-02T07:35:00Z", labels={})
    alert = Alert.from_status("crashed", status_from_json(status), now=NOW)
    assert alert.launch == "ep8"
    assert alert.engine == "sglang"
    assert alert.category == "oom"
    assert alert.time_since_start is not None
    assert alert.time_since_start >= 40.0
    assert alert.time_in_phase is not None
    assert alert.time_in_phase <= alert.time_since_start
    assert alert.traceback


# -- log text is inert: no mention, link or markup from a log line reaches a chat ----------------------------

READY_LOG = FIXTURES / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
CRAFTED = (
    "@channel @here @all @everyone @kimi <!channel> <!here> <@U123> <@123456789> "
    "<https://evil.example|Open the status page> [Fix: run this](https://evil.example/fix.sh)"
)
# What a chat service would act on: a mention, Slack's and Discord's <!...>/<@...>/<#...>, a link in Markdown
# (`[text](url)`) or in Slack's form (`<https://...|text>`).
_ACTIVE = re.compile(r"@(?:channel|here|all|everyone|kimi)\b|<[!@#]|\]\s*\(|<https?:")
CHAT_KINDS = ["slack", "discord", "teams", "mattermost", "google_chat", "telegram", "ntfy"]


async def _followed(chunks: list[bytes], *, pause: float = 40.0, name: str = "kimi") -> dict[str, Any]:
    """The status a LaunchFollower gives after reading `chunks`, `pause` seconds apart, and the grace after."""
    clock, source = ManualClock(), ScriptedSource()
    follower = LaunchFollower(
        LaunchSpec(name=name, target=parse_target("/x.log"), engine="sglang"), source=source, clock=clock
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(follower.run)

        async def drain() -> None:
            with follower.updates:
                async for _ in follower.updates:
                    pass

        tg.start_soon(drain)
        for n, chunk in enumerate(chunks):
            if n:
                await clock.advance(pause)
            await source.append(chunk)
            await source.catch_up()
        await clock.advance(6.0)
        status = follower.status().to_json()
        tg.cancel_scope.cancel()
    status.update(host="gpu1", since="2025-01-23T19:34:55Z", labels={"team": "infra"})
    return status


def _crash_log(exception_line: str) -> list[bytes]:
    """SGLang loading its weights, then (40 s later) its scheduler dying with `exception_line`."""
    lines = READY_LOG.read_bytes().splitlines(keepends=True)
    crash = (
        "[2025-01-23 19:35:21 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/srt/managers/scheduler.py", line 1200, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args)\n"
        f"{exception_line}\n"
    )
    return [b"".join(lines[:12]), crash.encode()]


async def _crafted_alert() -> Alert:
    """A real follower's crash whose exception line (and one fact) carry every mention and link form."""
    status = await _followed(_crash_log(f"RuntimeError: Not enough memory. {CRAFTED}"))
    assert CRAFTED in status["error"]["summary"]
    status["facts"]["model"] = CRAFTED  # a fact may be text from the log
    return Alert.from_status("crashed", status_from_json(status), link="http://127.0.0.1:9469/#kimi", now=NOW)


def _strings(node: object) -> list[str]:
    """Every string in a JSON document, keys left out."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return []


def _readable(text: str) -> str:
    """What a person reads of a message's text: no zero-width spaces, escapes or entities."""
    return html.unescape(text.replace("\u200b", "").replace("\\", ""))


@pytest.mark.parametrize("kind", CHAT_KINDS)
async def test_a_crafted_crash_line_notifies_nobody_and_links_nowhere(receiver: Receiver, kind: str) -> None:
    """A crash line and a fact holding @channel, @here, @all, @everyone, @user, <!channel>, <@U123>, a Slack
    link and a Markdown link reach a real receiver as text that mentions and links nobody, yet still says
    them."""
    alert = await _crafted_alert()
    async with open_client() as client:
        await send(kind, receiver.url(), alert, client=client, options=OPTIONS.get(kind), backoff=0.01)
    (got,) = receiver.got
    texts = [got.body.decode()] if kind == "ntfy" else _strings(got.json())
    active = [m.group(0) for text in texts for m in _ACTIVE.finditer(text)]
    assert active == []
    said = _readable("\n".join(texts))
    assert "@channel @here @all @everyone @kimi" in said
    assert "evil.example/fix.sh" in said
    if kind == "discord":
        assert got.json()["allowed_mentions"] == {"parse": []}


async def test_the_webhook_template_gets_inert_log_text(receiver: Receiver) -> None:
    """A webhook template (whose body usually goes on to a chat) fills in log text with no live mention."""
    alert = await _crafted_alert()
    options = {"template": {"text": "{summary}", "all": "{text}", "model": "{fact_model}"}}
    async with open_client() as client:
        await send("webhook", receiver.url(), alert, client=client, options=options, backoff=0.01)
    (got,) = receiver.got
    assert [m.group(0) for text in _strings(got.json()) for m in _ACTIVE.finditer(text)] == []


async def test_telegram_counts_utf16_and_cuts_an_emoji_traceback_to_fit(receiver: Receiver) -> None:
    """An emoji-heavy traceback (each emoji two UTF-16 units, as Telegram counts) is cut so that the text
    Telegram parses stays within 4096 units, keeping its end, instead of being refused."""
    alert = await _crafted_alert()
    frames = [f'  File "/m{i}.py", line {i}, in f  # ' + "\N{FIRE}" * 60 for i in range(200)]
    alert = replace(alert, traceback=(*frames, "RuntimeError: \N{FIRE} out of memory"))
    async with open_client() as client:
        await send(
            "telegram", receiver.url(), alert, client=client, options=OPTIONS["telegram"], backoff=0.01
        )
    (got,) = receiver.got
    text = got.json()["text"]
    parser = _TelegramHTML()
    parser.feed(text)
    parser.close()
    assert len(text.encode("utf-16-le")) // 2 <= 4096
    assert len(parser.text.encode("utf-16-le")) // 2 <= 4096
    assert "RuntimeError: \N{FIRE} out of memory" in parser.text
    assert "... (cut, " in parser.text


# -- what a daemon's alerts hold, against docs/notifiers.md --------------------------------------------------

DOC = Path(__file__).parent.parent / "docs" / "notifiers.md"
CRASH_LOG = (
    FIXTURES / "corpus" / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
)


def _documented_fields() -> dict[str, frozenset[AlertKind]]:
    """docs/notifiers.md's table of the alert's fields: name -> the kinds for which it is never empty."""
    section = DOC.read_text().split("### The alert's fields", 1)[1].split("\n#", 1)[0]
    out: dict[str, frozenset[AlertKind]] = {}
    for line in section.splitlines():
        row = re.match(r"\|\s*`(\w+)`\s*\|[^|]*\|\s*([^|]*?)\s*\|", line)
        if row is None:
            continue
        kinds = row.group(2)
        if kinds == "all":
            out[row.group(1)] = frozenset(AlertKind)
        elif kinds == "-":
            out[row.group(1)] = frozenset()
        else:
            out[row.group(1)] = frozenset(AlertKind(k.strip()) for k in kinds.split(","))
    return out


async def _daemon_alerts(tmp_path: Path, receiver: Receiver) -> dict[AlertKind, dict[str, Any]]:
    """The first webhook body of each kind a running daemon sends: a crash, then a new start (resolved,
    replaced, ready), a stall, a host that cannot be reached."""
    from watchdog.alerts.senders import ServiceNotifier  # noqa: PLC0415
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415
    from watchdog.follow.sources import SSHOptions  # noqa: PLC0415

    hook = ServiceNotifier(
        name="hook", kind="webhook", urls=(receiver.url(),), on=frozenset(AlertKind), timeout=5.0
    )
    crash, slow = tmp_path / "crash.log", tmp_path / "slow.log"
    (tmp_path / "known_hosts").write_text("")
    plans = {
        "crash": LaunchPlan(LaunchSpec(name="crash", target=parse_target(str(crash))), alerts=(hook,)),
        "slow": LaunchPlan(
            LaunchSpec(name="slow", target=parse_target(str(slow)), stall_after=0.5),
            labels={"team": "infra"},
            alerts=(hook,),
        ),
        "far": LaunchPlan(
            LaunchSpec(name="far", target=parse_target("ssh://nobody@127.0.0.1:1/srv/server.log")),
            host="far",
            ssh=SSHOptions(
                known_hosts=str(tmp_path / "known_hosts"), config=None, use_agent=False, connect_timeout=2.0
            ),
            alerts=(hook,),
        ),
    }
    daemon = Daemon(
        plans, handle_signals=False, public_url="http://watchdog.example:9469", unreachable_after=0.5
    )

    def kinds(got: list[Got]) -> set[str]:
        return {g.json()["kind"] for g in got}

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            slow.write_bytes(b"".join(READY_LOG.read_bytes().splitlines(keepends=True)[:6]))
            crash.write_bytes(CRASH_LOG.read_bytes())
            await receiver.wait_until(lambda got: "crashed" in kinds(got))
            fresh = tmp_path / "fresh.log"
            fresh.write_bytes(READY_LOG.read_bytes())
            fresh.replace(crash)
            await receiver.wait_until(lambda got: kinds(got) >= {k.value for k in AlertKind}, deadline=40)
            tg.cancel_scope.cancel()
    out: dict[AlertKind, dict[str, Any]] = {}
    for got in receiver.delivered():
        body = got.json()
        out.setdefault(AlertKind(body["kind"]), body)
    return out


def _shown(message: Any) -> str:
    """What a person reads of a message: its strings (and headers), unescaped, without zero-width spaces."""
    texts = _strings(message.json) if message.json is not None else [message.text or ""]
    return _readable("\n".join([*texts, *message.headers.values()]))


async def test_every_alert_a_daemon_sends_has_the_fields_the_doc_lists(
    tmp_path: Path, receiver: Receiver
) -> None:
    """Each kind of alert a running daemon sends (crashed, stalled, ready, unreachable, resolved, replaced)
    has exactly the fields of docs/notifiers.md's table, none empty where the table says it is set; and every
    service shows what the doc says a person reads: time in phase and since start, a stall's last line, the
    time to ready, facts under their names as people write them, and no facts on an outage."""
    documented = _documented_fields()
    assert "time_in_phase_seconds" in documented
    payloads = await _daemon_alerts(tmp_path, receiver)
    assert set(payloads) == set(AlertKind)
    for kind, payload in payloads.items():
        assert set(payload) == set(documented), kind
        empty = [
            name
            for name, kinds in documented.items()
            if kind in kinds and payload[name] in (None, "", [], {})
        ]
        assert empty == [], kind
    for kind, payload in payloads.items():
        alert = Alert.from_dict(payload)
        for service in sorted(KINDS):
            message = build_message(service, alert, OPTIONS.get(service))
            if message is None:
                assert service in INCIDENT_ONLY
                continue
            shown = _shown(message)
            where = (service, kind.value)
            if service == "pagerduty":
                details = message.json.get("payload", {}).get("custom_details", {})
                if kind in {AlertKind.CRASHED, AlertKind.STALLED}:
                    assert details["time_in_phase_seconds"] == round(payload["time_in_phase_seconds"], 1), (
                        where
                    )
                continue
            if kind in {AlertKind.CRASHED, AlertKind.STALLED}:
                assert format_duration(payload["time_in_phase_seconds"]) in shown, where
                assert format_duration(payload["time_since_start_seconds"]) in shown, where
            if kind is AlertKind.STALLED:
                assert payload["last_line"].strip() in shown, where
                assert "Free memory before weights" in shown, where
                assert "78.81 GB" in shown, where
            if kind is AlertKind.READY:
                assert f"ready after {format_duration(payload['time_since_start_seconds'])}" in shown, where
            if kind is AlertKind.UNREACHABLE:
                assert payload["detail"] in shown, where
                assert "Free memory" not in shown, where
            assert "avail_mem" not in shown, where  # a fact's raw key is not what a person reads


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        pytest.param("avail_mem_after_weights_gb", 16.3, ("Free memory after weights", "16.3 GB"), id="gb"),
        pytest.param("kv_cache_tokens", 812345, ("KV cache tokens", "812,345"), id="count"),
        pytest.param("kv_cache_tokens", 812345.0, ("KV cache tokens", "812,345"), id="count-as-float"),
        pytest.param("weights_seconds", 87.2, ("Weights time", "1m27s"), id="seconds"),
        pytest.param("gpu_util_pct", 93.5, ("GPU util", "93.5%"), id="percent"),
        pytest.param("model", "Qwen/Qwen3-8B", ("Model", "Qwen/Qwen3-8B"), id="text"),
    ],
)
def test_a_fact_reads_as_people_write_it(name: str, value: Any, shown: tuple[str, str]) -> None:
    """A fact's raw key and number become a label and a value with its unit, as a person reads them."""
    assert compose.fact_field(name, value) == shown
