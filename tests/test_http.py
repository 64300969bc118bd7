"""The HTTP server: /healthz, /status, /metrics (promtool-clean), the status page, basic auth and TLS."""

from __future__ import annotations

import base64
import datetime as dt
import functools
import html.parser
import json
import os
import re
import shutil
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from http_client import Client, get
from http_receiver import self_signed
from prometheus_client.parser import text_string_to_metric_families
from snapshots import status_from_json
from structlog.testing import capture_logs

from watchdog.core.lifecycle import State
from watchdog.core.redaction import redact_text
from watchdog.core.verdict import Status, Verdict
from watchdog.daemon.http import (
    DEFAULT_LISTEN,
    allowed_host_names,
    host_allowed,
    serve_http,
    server_tls,
)
from watchdog.daemon.metrics import GIB, DaemonStats
from watchdog.exceptions import ConfigError
from watchdog.follow.follower import Concluded, LaunchFollower, LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.vocabulary import version

pytestmark = pytest.mark.anyio

EXAMPLE_LOG = Path(__file__).parent.parent / "watchdog" / "examples" / "sglang-ep8-oom.log"
DEADLINE = 20.0
# a log line is untrusted: it may try to close the script element or inject markup
EVIL = "<img src=x onerror=\"document.title='pwned'\"></pre></script><script>document.title='pwned2'</script>"


def _ago(seconds: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)).isoformat(timespec="seconds")


def three_launches() -> list[dict[str, Any]]:
    """Snapshots as `Daemon.statuses()` gives them: ready, crashed (traceback, hint), capturing graphs."""
    ready = {
        "name": "kimi-ep",
        "host": "gpu1",
        "since": _ago(400),
        "labels": {"team": "infra"},
        "engine": "sglang",
        "state": "ready",
        "phase": "ready",
        "error": None,
        "timeline": [
            {"state": "starting", "line": 1, "at": "2025-07-02T07:31:02", "duration_seconds": 12.0},
            {"state": "loading_weights", "line": 40, "at": "2025-07-02T07:31:14", "duration_seconds": 194.0},
            {
                "state": "allocating_kv_cache",
                "line": 120,
                "at": "2025-07-02T07:34:28",
                "duration_seconds": 21.5,
            },
            {"state": "capturing_graphs", "line": 130, "at": "2025-07-02T07:34:49", "duration_seconds": 95.0},
            {"state": "ready", "line": 180, "at": "2025-07-02T07:36:24"},
        ],
        "entered": [0.0, 12.0, 206.0, 227.5, 322.5],
        "progress": {"weights": {"done": 64, "total": 64}, "graphs": {"done": 35, "total": 35}},
        "facts": {"avail_mem_after_weights_gb": 16.3, "kv_cache_tokens": 812345},
        "lines_read": 180,
        "bytes_read": 15000,
        "incarnation": 1,
        "incarnations": 1,
        "target": "ssh://gpu1/data/logs/kimi.log",
        "elapsed_seconds": 400.0,
        "last_line": "The server is fired up and ready to roll!",
        "time_to_ready_seconds": 322.5,
    }
    crashed = {
        "name": "qwen-vllm",
        "host": "gpu2",
        "since": _ago(170),
        "labels": {},
        "engine": "vllm",
        "state": "crashed",
        "phase": "allocating_kv_cache",
        "error": {
            "category": "oom",
            "summary": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "exception": "torch.OutOfMemoryError",
            "hint": "lower --gpu-memory-utilization or --max-model-len",
            "ranks": ["TP0", "TP1"],
            "line": 812,
            "traceback": [
                "Traceback (most recent call last):",
                '  File "/opt/vllm/worker.py", line 10, in determine_num_available_blocks',
                "    self.model_runner.profile_run()",
                EVIL,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            ],
        },
        "timeline": [
            {"state": "starting", "line": 1, "at": "2025-07-02T08:00:00", "duration_seconds": 30.0},
            {"state": "loading_weights", "line": 50, "at": "2025-07-02T08:00:30", "duration_seconds": 120.0},
            {
                "state": "allocating_kv_cache",
                "line": 700,
                "at": "2025-07-02T08:02:30",
                "duration_seconds": 15.0,
            },
            {"state": "crashed", "line": 812, "at": "2025-07-02T08:02:45"},
        ],
        "entered": [0.0, 30.0, 150.0, 165.0],
        "progress": {"weights": {"done": 8, "total": 8}},
        "facts": {"avail_mem_after_weights_gb": 3.1},
        "lines_read": 900,
        "bytes_read": 80000,
        "incarnation": 2,
        "incarnations": 2,
        "target": "/data/logs/qwen.log",
        "elapsed_seconds": 170.0,
        "last_line": EVIL,
    }
    capturing = {
        "name": "llama-70b",
        "host": "",
        "since": _ago(140),
        "labels": {},
        "engine": "sglang",
        "state": "capturing_graphs",
        "phase": "capturing_graphs",
        "error": None,
        "timeline": [
            {"state": "starting", "line": 1, "at": None, "duration_seconds": 5.0},
            {"state": "loading_weights", "line": 20, "at": None, "duration_seconds": 60.0},
            {"state": "allocating_kv_cache", "line": 60, "at": None, "duration_seconds": 15.0},
            {"state": "capturing_graphs", "line": 70, "at": None},
        ],
        "entered": [0.0, 5.0, 65.0, 80.0],
        "progress": {"weights": {"done": 30, "total": 30}, "graphs": {"done": 12, "total": 35}},
        "facts": {"kv_cache_tokens": 400000},
        "lines_read": 75,
        "bytes_read": 6000,
        "incarnation": 1,
        "incarnations": 1,
        "target": "/tmp/llama.log",
        "elapsed_seconds": 140.0,
        "last_line": "Capturing batches (bs=64 avail_mem=20.1 GB): 34%| 12/35",
    }
    return [ready, crashed, capturing]


def _stats() -> DaemonStats:
    return DaemonStats(
        crashes={("qwen-vllm", "gpu2", "oom"): 2},
        ssh_connected={"gpu1": True, "gpu2": False},
        ssh_reconnects={"gpu2": 3},
        alerts_sent={"team": 4},
        alerts_failed={"team": 1},
        outbox_depth=5,
        last_log_activity={"kimi-ep": 1751441784.5},
    )


@asynccontextmanager
async def serving(
    statuses: Callable[[], list[dict[str, Any]]] = three_launches,
    stats: Callable[[], DaemonStats] = _stats,
    **kw: Any,
) -> AsyncIterator[str]:
    """A real server on 127.0.0.1, a free port; yields its base URL. `statuses` gives them as JSON."""

    def typed() -> list[Status]:
        return [s if isinstance(s, Status) else status_from_json(s) for s in statuses()]

    async with anyio.create_task_group() as tg:
        port = await tg.start(functools.partial(serve_http, ("127.0.0.1", 0), typed, stats, **kw))
        scheme = "https" if kw.get("tls") else "http"
        yield f"{scheme}://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _sample(families: dict[str, Any], name: str, **labels: str) -> float:
    for family in families.values():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no sample {name}{labels}")


async def _promtool(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        reason = "promtool is not installed (Debian package `prometheus`)"
        if os.environ.get("WATCHDOG_REQUIRE_PROMTOOL") == "1":
            pytest.fail(f"WATCHDOG_REQUIRE_PROMTOOL=1 but {reason}")
        pytest.skip(reason)
    with anyio.fail_after(DEADLINE):
        result = await anyio.run_process([promtool, "check", "metrics"], input=text.encode(), check=False)
    problems = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, problems
    assert problems.strip() == "", problems


# -- the endpoints ---------------------------------------------------------------------------------------


async def test_healthz_answers_ok() -> None:
    """/healthz answers 200 "ok"."""
    async with serving() as url, Client() as client:
        r = await client.get(f"{url}/healthz")
    assert r.status_code == 200
    assert r.text.strip() == "ok"


async def test_status_lists_every_launch_with_its_verdict() -> None:
    """/status is a JSON list, one entry per launch, with name, host, since, incarnation and the traceback."""
    async with serving() as url, Client() as client:
        r = await client.get(f"{url}/status")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert [s["name"] for s in body] == ["kimi-ep", "qwen-vllm", "llama-70b"]
    assert [s["host"] for s in body] == ["gpu1", "gpu2", ""]
    assert all(s["since"] and s["incarnation"] for s in body)
    crashed = body[1]
    assert crashed["error"]["category"] == "oom"
    assert crashed["error"]["hint"] == "lower --gpu-memory-utilization or --max-model-len"
    assert crashed["error"]["traceback"][0] == "Traceback (most recent call last):"
    assert crashed["error"]["traceback"][3] == EVIL  # JSON is data: kept verbatim, escaped by the page


async def test_status_fills_in_missing_fields() -> None:
    """A launch with no follower yet still has the verdict object's keys (pending) and name, host, since,
    labels, eta_seconds and incarnation_since in /status."""
    pending = [{"name": "new", "state": "pending", "phase": "pending"}]
    async with serving(lambda: pending) as url, Client() as client:
        body = (await client.get(f"{url}/status")).json()
    assert body == [
        {
            "engine": None,
            "state": "pending",
            "phase": "pending",
            "error": None,
            "timeline": [],
            "progress": {},
            "facts": {},
            "lines_read": 0,
            "bytes_read": 0,
            "incarnation": 1,
            "incarnations": 1,
            "name": "new",
            "host": "",
            "since": None,
            "labels": {},
            "eta_seconds": None,
            "incarnation_since": None,
        }
    ]


@pytest.mark.parametrize(
    ("line", "secret", "kept"),
    [
        pytest.param(
            "server_args=ServerArgs(api_key='s3cr3t-k3y', port=30000)",
            "s3cr3t-k3y",
            "port=30000",
            id="sglang-args",
        ),
        pytest.param(
            "non-default args: {'api_key': 'abcd1234', 'model': 'x'}",
            "abcd1234",
            "'model': 'x'",
            id="vllm-args",
        ),
        pytest.param(
            "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345 python -m x",
            "hf_abcdefghij",
            "python -m x",
            id="hf-token",
        ),
        pytest.param(
            "launch --api-key sk-live-123456 --port 8000", "sk-live-123456", "--port 8000", id="cli-flag"
        ),
        pytest.param("GET https://bob:hunter2@example.org/x", "hunter2", "example.org/x", id="url-userinfo"),
        pytest.param(
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc",
            "eyJhbGciOiJIUzI1NiJ9",
            "Authorization",
            id="bearer",
        ),
        pytest.param(
            "password: None, api_key=None", None, "password: None, api_key=None", id="none-is-no-secret"
        ),
    ],
)
def test_redact_text_hides_credentials_in_log_text(line: str, secret: str | None, kept: str) -> None:
    """Credentials that engines print with their arguments are redacted; the rest of the line stays."""
    out = redact_text(line)
    assert secret is None or secret not in out
    assert kept in out


def test_redact_text_keeps_token_counts() -> None:
    """Words that merely contain "token" (KV-cache sizes) are not mistaken for secrets."""
    line = "max_total_num_tokens=812345, #tokens: 4096, chunked_prefill_size=8192"
    assert redact_text(line) == line
    # SGLang's batch lines count tokens under `#token`, `#new-token`, `#cached-token`: counts, not credentials
    for line in (
        "Decode batch. #running-req: 1, #token: 75, token usage: 0.00, gen throughput (token/s): 12.01",
        "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00",
    ):
        assert redact_text(line) == line
    # a key with dashes before it is still one: `--token=...`, `--api-key=...`
    assert (
        redact_text("serve --token=abc123 --api-key=def456")
        == "serve --token=<redacted> --api-key=<redacted>"
    )


async def test_status_never_carries_a_secret_from_log_text() -> None:
    """A credential in a log line, a traceback or a fact does not reach /status or the page."""
    status = three_launches()[1]
    status["last_line"] = "server_args=ServerArgs(api_key='TOPSECRET1', hf_token='TOPSECRET2')"
    status["error"]["traceback"].append("requests.get('https://u:TOPSECRET3@hub.example/model')")
    status["facts"]["cmd"] = "--api-key TOPSECRET4"
    async with serving(lambda: [status]) as url, Client() as client:
        texts = [(await client.get(f"{url}/{path}")).text for path in ("status", "", "metrics")]
    for text in texts:
        assert "TOPSECRET" not in text
    assert "<redacted>" in texts[0]


async def test_unknown_path_is_404() -> None:
    """A path the server does not have answers 404."""
    async with serving() as url, Client() as client:
        assert (await client.get(f"{url}/nope")).status_code == 404


# -- metrics ---------------------------------------------------------------------------------------------


async def test_metrics_has_the_families_of_the_design() -> None:
    """/metrics holds every family of DESIGN.md with values taken from the snapshots and counters."""
    async with serving() as url, Client() as client:
        r = await client.get(f"{url}/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    f = _families(r.text)
    ready = {"launch": "kimi-ep", "host": "gpu1"}
    assert _sample(f, "watchdog_launch_state", **ready, engine="sglang", state="ready") == 1
    states = [s for s in f["watchdog_launch_state"].samples if s.labels["launch"] == "kimi-ep"]
    assert len(states) == len(State)
    assert sum(s.value for s in states) == 1
    assert _sample(f, "watchdog_phase_seconds", **ready, phase="loading_weights") == 194.0
    assert _sample(f, "watchdog_time_to_ready_seconds", **ready) == 322.5
    assert _sample(f, "watchdog_crashes_total", launch="qwen-vllm", host="gpu2", category="oom") == 2
    assert _sample(f, "watchdog_progress_ratio", launch="llama-70b", host="", kind="graphs") == pytest.approx(
        12 / 35
    )
    assert _sample(f, "watchdog_avail_mem_after_weights_bytes", **ready) == pytest.approx(16.3 * GIB)
    assert _sample(f, "watchdog_kv_cache_tokens", **ready) == 812345
    assert _sample(f, "watchdog_log_lines_total", **ready) == 180
    assert _sample(f, "watchdog_log_bytes_total", **ready) == 15000
    assert _sample(f, "watchdog_last_log_activity_timestamp_seconds", **ready) == 1751441784.5
    assert _sample(f, "watchdog_ssh_connected", host="gpu1") == 1
    assert _sample(f, "watchdog_ssh_connected", host="gpu2") == 0
    assert _sample(f, "watchdog_ssh_reconnects_total", host="gpu2") == 3
    assert _sample(f, "watchdog_alerts_sent_total", notifier="team") == 4
    assert _sample(f, "watchdog_alerts_failed_total", notifier="team") == 1
    assert _sample(f, "watchdog_outbox_depth") == 5
    assert _sample(f, "watchdog_build_info", version=version()) == 1


async def test_metrics_are_built_at_scrape_time() -> None:
    """A launch removed from the snapshots is gone from the next scrape; one added appears."""
    current = three_launches()
    async with serving(lambda: current) as url, Client() as client:
        first = _families((await client.get(f"{url}/metrics")).text)
        current = current[:1]
        second = _families((await client.get(f"{url}/metrics")).text)
    launches = [{s.labels["launch"] for s in f["watchdog_launch_state"].samples} for f in (first, second)]
    assert launches == [{"kimi-ep", "qwen-vllm", "llama-70b"}, {"kimi-ep"}]


async def test_metrics_pass_promtool() -> None:
    """`promtool check metrics` finds nothing to complain about in /metrics."""
    async with serving() as url, Client() as client:
        text = (await client.get(f"{url}/metrics")).text
    await _promtool(text)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            three_launches()[0],
            {
                "starting": 12.0,
                "loading_weights": 194.0,
                "allocating_kv_cache": 21.5,
                "capturing_graphs": 95.0,
            },
            id="log-time-ready-not-a-phase",
        ),
        pytest.param(
            three_launches()[1],
            {"starting": 30.0, "loading_weights": 120.0, "allocating_kv_cache": 15.0},
            id="crash-not-a-phase",
        ),
        pytest.param(
            three_launches()[2],
            {"starting": 5.0, "loading_weights": 60.0, "allocating_kv_cache": 15.0, "capturing_graphs": 60.0},
            id="follower-clock-current-phase-to-now",
        ),
        pytest.param(
            {
                "timeline": [
                    {"state": "starting"},
                    {"state": "loading_weights"},
                    {"state": "stalled"},
                    {"state": "loading_weights"},
                ],
                "entered": [0.0, 10.0, 70.0, 100.0],
                "elapsed_seconds": 130.0,
                "state": "loading_weights",
            },
            {"starting": 0.0, "loading_weights": 30.0},
            id="stall-counts-for-its-phase",
        ),
        pytest.param({"state": "pending"}, {}, id="no-timeline"),
    ],
)
def test_phase_seconds(status: dict[str, Any], expected: dict[str, float]) -> None:
    """Time per startup phase is the core's duration of each entry (none: unknown, not counted), the
    current one up to now on the follower's clock."""
    typed = status_from_json(status)
    got = typed.verdict.phase_seconds(typed.elapsed)
    assert {state.value: seconds for state, seconds in got.items()} == pytest.approx(expected)


async def test_real_follower_snapshot_is_served(tmp_path: Path) -> None:
    """The snapshot of a real follower that saw a crash is served as /status and as promtool-clean metrics."""
    log = tmp_path / "server.log"
    log.write_bytes(EXAMPLE_LOG.read_bytes())
    follower = LaunchFollower(LaunchSpec(name="ep8", target=parse_target(str(log))))
    crashes: dict[tuple[str, str, str], int] = {}

    def statuses() -> list[Status]:
        return [replace(follower.status(), since=time.time() - 1)]

    with follower.updates:  # closed after the follower stops, so it never writes to a closed stream
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            with anyio.fail_after(DEADLINE):
                async for update in follower.updates:
                    if isinstance(update, Concluded):
                        category = update.verdict.to_json()["error"]["category"]
                        crashes[("ep8", "", category)] = 1
                        break
            async with (
                serving(statuses, lambda: DaemonStats(crashes=crashes)) as url,
                Client() as client,
            ):
                status = (await client.get(f"{url}/status")).json()
                text = (await client.get(f"{url}/metrics")).text
                page = (await client.get(f"{url}/")).text
            tg.cancel_scope.cancel()
    assert status[0]["state"] == "crashed"
    assert status[0]["error"]["category"] == "oom"
    assert status[0]["error"]["traceback"]
    f = _families(text)
    assert _sample(f, "watchdog_launch_state", launch="ep8", state="crashed") == 1
    assert _sample(f, "watchdog_crashes_total", launch="ep8", category="oom") == 1
    assert _sample(f, "watchdog_progress_ratio", launch="ep8", kind="weights") == 1
    assert _sample(f, "watchdog_phase_seconds", launch="ep8", phase="loading_weights") > 0
    assert "ep8" in page
    await _promtool(text)


# -- the page --------------------------------------------------------------------------------------------


class _Scripts(html.parser.HTMLParser):
    """The script elements of a document, with their attributes and text."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.tags: list[str] = []
        self._in: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "script":
            self._in = dict(attrs)
            self.scripts.append((self._in, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


async def test_page_escapes_log_text() -> None:
    """A log line with markup cannot close the page's script element or add an element of its own."""
    async with serving() as url, Client() as client:
        r = await client.get(f"{url}/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "</script><script>document.title" not in page
    assert "<img src=x" not in page
    parser = _Scripts()
    parser.feed(page)
    assert "img" not in parser.tags
    assert len(parser.scripts) == 2  # the data and the code, nothing injected
    (data_attrs, data), (code_attrs, _) = parser.scripts
    assert data_attrs.get("type") == "application/json"
    assert json.loads(data)[1]["error"]["traceback"][3] == EVIL  # the text is intact, only inert
    nonce = code_attrs["nonce"]
    assert nonce
    csp = r.headers["content-security-policy"]
    assert f"script-src 'nonce-{nonce}'" in csp
    assert "connect-src 'self'" in csp


async def test_page_is_self_contained() -> None:
    """The page loads nothing from elsewhere: no external script, style, font or image."""
    async with serving() as url, Client() as client:
        page = (await client.get(f"{url}/")).text
    for needle in ('src="http', 'href="http', "@import", "url(http", "//cdn"):
        assert needle not in page


# -- auth and TLS ----------------------------------------------------------------------------------------


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        pytest.param({}, 401, id="no-credentials"),
        pytest.param(_basic("admin", "wrong"), 401, id="wrong-password"),
        pytest.param(_basic("root", "s3cret:pw"), 401, id="wrong-user"),
        pytest.param(_basic("admin", ""), 401, id="empty-password"),
        pytest.param({"Authorization": "Basic !!notbase64"}, 401, id="malformed"),
        pytest.param({"Authorization": "Bearer s3cret:pw"}, 401, id="other-scheme"),
        pytest.param(_basic("admin", "s3cret:pw"), 200, id="right"),
    ],
)
@pytest.mark.parametrize("path", ["/", "/status", "/metrics"])
async def test_basic_auth(headers: dict[str, str], code: int, path: str) -> None:
    """With basic auth every path but /healthz needs the right user and password (a colon in it is fine)."""
    async with serving(basic_auth=("admin", "s3cret:pw")) as url, Client() as client:
        r = await client.get(f"{url}{path}", headers=headers)
    assert r.status_code == code
    if code == 401:
        assert r.headers["www-authenticate"].startswith("Basic realm=")
        assert "kimi-ep" not in r.text


async def test_healthz_needs_no_credentials() -> None:
    """/healthz stays open under basic auth, for container health checks that carry no credentials."""
    async with serving(basic_auth=("admin", "pw")) as url, Client() as client:
        assert (await client.get(f"{url}/healthz")).status_code == 200


async def test_tls(tmp_path: Path) -> None:
    """With a TLS context the server speaks HTTPS (verified against its certificate) and refuses plain HTTP."""
    cert, key = self_signed(tmp_path)
    tls = await server_tls(str(cert), str(key))
    trust = ssl.create_default_context(cafile=str(cert))
    async with serving(tls=tls, basic_auth=("admin", "pw")) as url:
        async with Client(ssl=trust) as client:
            r = await client.get(f"{url}/status", headers=_basic("admin", "pw"))
            assert r.status_code == 200
            assert r.json()[0]["name"] == "kimi-ep"
        async with Client() as plain:
            with pytest.raises(aiohttp.ClientError):
                await plain.get(url.replace("https://", "http://") + "/healthz")


async def test_server_tls_rejects_a_bad_certificate(tmp_path: Path) -> None:
    """A certificate file that is not one is a ConfigError naming the file, not an SSL traceback."""
    bad = tmp_path / "cert.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"daemon: tls: cannot load the certificate .*cert\.pem"):
        await server_tls(str(bad))


# -- binding ---------------------------------------------------------------------------------------------


def test_binds_loopback_by_default() -> None:
    """The default listen address is 127.0.0.1, the design's port."""
    assert DEFAULT_LISTEN == ("127.0.0.1", 9469)


async def test_port_in_use_is_a_config_error() -> None:
    """A listen address that is taken is a ConfigError naming daemon.listen and the address."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"daemon: listen: cannot listen on 127\.0\.0\.1:{port}"):
            await serve_http(("127.0.0.1", port), lambda: [], _stats)


async def test_cancel_closes_the_port() -> None:
    """Cancelling the server task closes its listening socket."""
    async with serving() as url:
        port = int(url.rsplit(":", 1)[1])
        async with Client() as client:
            assert (await client.get(f"{url}/healthz")).status_code == 200
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


# -- Host names (DNS rebinding) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("127.0.0.1:{port}", id="loopback-address"),
        pytest.param("localhost:{port}", id="localhost"),
        pytest.param("LocalHost.", id="localhost-no-port-dot"),
        pytest.param("[::1]:{port}", id="ipv6-loopback"),
        pytest.param("10.42.7.19:9469", id="pod-address"),  # a Kubernetes probe sends the pod's IP
        pytest.param("watchdog.example.org", id="public-url-host"),
        pytest.param("Watchdog.Example.org:443", id="public-url-host-port"),
        pytest.param("watchdog:9469", id="compose-service-name"),  # deploy/prometheus/prometheus.yml
        pytest.param("status.localhost:{port}", id="dot-localhost"),
    ],
)
async def test_host_for_this_server_is_answered(host: str) -> None:
    """Without auth, /status answers a Host that is an IP address, localhost, the public_url's host, or a name
    that public DNS cannot hold (no dot, *.localhost)."""
    async with (
        serving(public_url="https://watchdog.example.org/watch") as url,
        Client() as client,
    ):
        port = url.rsplit(":", 1)[1]
        r = await client.get(f"{url}/status", headers={"Host": host.format(port=port)})
    assert r.status_code == 200
    assert r.json()[0]["name"] == "kimi-ep"


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("rebind.attacker.example:{port}", id="rebinding-name"),
        pytest.param("127.0.0.1.nip.io:{port}", id="name-resolving-to-loopback"),
        pytest.param("localhost.attacker.example", id="localhost-prefix"),
        pytest.param("watchdog.example.org.attacker.example", id="public-host-prefix"),
        pytest.param("localhost:80x", id="bad-port"),
        pytest.param("[::1", id="bad-brackets"),
        pytest.param("", id="empty"),
    ],
)
@pytest.mark.parametrize("path", ["/status", "/", "/metrics"])
async def test_host_of_a_rebinding_page_is_refused(host: str, path: str) -> None:
    """Without auth, a Host that names no address of this server is answered 421 and nothing of /status."""
    async with (
        serving(public_url="https://watchdog.example.org/watch") as url,
        Client() as client,
    ):
        port = url.rsplit(":", 1)[1]
        r = await client.get(f"{url}{path}", headers={"Host": host.format(port=port)})
    assert r.status_code == 421
    assert "kimi-ep" not in r.text
    assert "watchdog_launch_state" not in r.text


async def test_healthz_and_authenticated_requests_answer_any_host() -> None:
    """/healthz (it tells nothing) answers any Host; with basic auth every path does (a rebinding page has
    no credentials for its own origin), and without credentials it is still 401."""
    evil = {"Host": "rebind.attacker.example"}
    async with serving() as url, Client() as client:
        assert (await client.get(f"{url}/healthz", headers=evil)).status_code == 200
    async with serving(basic_auth=("admin", "pw")) as url, Client() as client:
        assert (
            await client.get(f"{url}/status", headers={**evil, **_basic("admin", "pw")})
        ).status_code == 200
        assert (await client.get(f"{url}/status", headers=evil)).status_code == 401


async def test_refused_hosts_are_logged_once_per_interval() -> None:
    """Fifty requests with a foreign Host make one log line, not fifty."""
    with capture_logs() as logs:
        async with serving() as url, Client() as client:
            for _ in range(50):
                r = await client.get(f"{url}/status", headers={"Host": "rebind.attacker.example"})
                assert r.status_code == 421
    said = [e for e in logs if e["event"] == "http_host_refused"]
    assert len(said) == 1
    assert said[0]["host"] == "rebind.attacker.example"


def test_allowed_host_names() -> None:
    """The allowed names: localhost, a listen host that is a name, and public_url's host."""
    assert allowed_host_names("127.0.0.1") == {"localhost", "127.0.0.1"}
    assert allowed_host_names("0.0.0.0", "http://Mon.Example:9469/") == {
        "localhost",
        "0.0.0.0",
        "mon.example",
    }
    assert host_allowed("mon.example:9469", allowed_host_names("0.0.0.0", "http://mon.example"))
    assert not host_allowed("other.example", allowed_host_names("0.0.0.0", "http://mon.example"))
    assert host_allowed(None, allowed_host_names("127.0.0.1"))


# -- connections: cap, idle close, descriptors ------------------------------------------------------------


async def _eof(stream: anyio.abc.SocketStream) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while True:
        try:
            received += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
            return received


async def test_connections_over_the_cap_leave_status_answering() -> None:
    """40 idle connections against a cap of 8: the idlest are closed to make room, /status answers on a
    fresh connection at once, and the log has one line about it, not one per connection."""
    held: list[anyio.abc.SocketStream] = []
    with capture_logs() as logs:
        async with serving(max_connections=8, idle_timeout=60) as url:
            port = int(url.rsplit(":", 1)[1])
            held.extend([await anyio.connect_tcp("127.0.0.1", port) for _ in range(40)])
            with anyio.fail_after(5):
                async with Client() as client:
                    r = await client.get(f"{url}/status")
            assert r.status_code == 200
            with anyio.fail_after(5):
                first = await _eof(held[0])  # the idlest: closed without a word
            assert first == b""
            closed = 0
            for stream in held:
                with anyio.move_on_after(0.2):
                    await _eof(stream)
                    closed += 1
            for stream in held:
                await stream.aclose()
    assert closed >= 40 - 8
    said = [e for e in logs if e["event"] == "http_connections_over_limit"]
    assert len(said) == 1, said
    assert said[0]["closed_idle"] >= 1


@pytest.mark.parametrize(
    "sends",
    [
        pytest.param(b"", id="nothing"),
        pytest.param(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", id="slow-headers"),
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", id="keep-alive-after-a-request"),
    ],
)
async def test_idle_connections_are_closed_after_the_idle_timeout(sends: bytes) -> None:
    """A connection that sends nothing, headers that never end, or nothing after a response is closed by
    the server once idle for idle_timeout (and not much before)."""
    async with serving(idle_timeout=0.5) as url:
        port = int(url.rsplit(":", 1)[1])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            opened = anyio.current_time()
            if sends:
                await stream.send(sends)
            with anyio.fail_after(5):
                received = await _eof(stream)
            waited = anyio.current_time() - opened
    assert 0.4 <= waited < 5
    if b"healthz" in sends:
        assert received.startswith(b"HTTP/1.1 200 OK")
        assert received.endswith(b"ok\n")
    else:
        assert received == b""


class _Blocking:
    """A value whose JSON text (built in a worker thread) waits until released: a request kept in progress."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = threading.Semaphore(0)

    def __str__(self) -> str:
        self.waiting.release()
        self.release.wait(DEADLINE)
        return "released"


async def test_every_connection_busy_is_answered_503() -> None:
    """With every allowed connection in a request, a new one is answered 503 at once, and no request in
    progress is cut."""
    blocking = _Blocking()
    try:
        async with serving(
            lambda: [Status(Verdict.pending().with_facts({"slow": blocking}), name="x")],  # type: ignore[dict-item]
            max_connections=2,
            idle_timeout=60,
        ) as url:
            port = int(url.rsplit(":", 1)[1])
            busy = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(2)]
            for stream in busy:
                await stream.send(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            for _ in busy:
                with anyio.fail_after(5):
                    await anyio.to_thread.run_sync(blocking.waiting.acquire)
            async with await anyio.connect_tcp("127.0.0.1", port) as third:
                with anyio.fail_after(5):
                    refused = await _eof(third)
            assert refused.startswith(b"HTTP/1.1 503 Service Unavailable")
            blocking.release.set()
            for stream in busy:
                with anyio.fail_after(5):
                    answer = await _eof(stream)
                assert answer.startswith(b"HTTP/1.1 200 OK")
                # json writes `"slow": "released"`, orjson (the `fast` extra) `"slow":"released"`
                assert re.search(rb'"slow": ?"released"', answer)
                await stream.aclose()
    finally:
        blocking.release.set()


def test_malformed_requests_are_refused_with_one_line_not_a_traceback_each(tmp_path: Path) -> None:
    """Bytes that are not HTTP, a header over aiohttp's limit, a TLS hello on the plain port, a cut request and
    a request line with control characters, each on its own connection, to a running daemon: each is answered
    4xx or closed, /healthz still answers, and the daemon's log holds no traceback and one line per kind of
    refusal saying how many were refused."""
    import socket  # noqa: PLC0415
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).parent))
    from daemon_process import DaemonProcess  # noqa: PLC0415

    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nlog_format = "json"\nstate_dir = "{tmp_path}/state"\n'
    )
    daemon = DaemonProcess(config, deadline=20.0)
    try:
        url = daemon.wait(event="http_listening")["url"]
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        payloads = [
            b"GARBAGE\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n",
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
            b"POST /status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nab",
            b"GET /\x07\x9b HTTP/1.1\r\n\r\n",
        ] * 4
        for payload in payloads:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
                answer = sock.recv(64)
            assert answer == b"" or answer.split(b" ")[1].startswith(b"4"), answer
        assert get(url + "healthz").status_code == 200
        said = daemon.wait(event="http_requests_refused")
        daemon.stop()
    finally:
        daemon.close()
    log = "".join(daemon.text)
    assert "Traceback" not in log
    running = daemon.text[: next(i for i, line in enumerate(daemon.text) if '"stopping"' in line)]
    kinds = [json.loads(line)["kind"] for line in running if "http_requests_refused" in line]
    assert len(kinds) == len(set(kinds)), kinds  # within a minute: one line per kind, the rest counted
    assert said["refused"] >= 1


def test_every_refused_request_is_counted_in_the_log_by_the_time_the_daemon_stops(tmp_path: Path) -> None:
    """25 requests with a header over aiohttp's limit to a running daemon within a minute: its log says one
    line of them at once, and the 24 that followed in the line it says when it stops: the counts add up to
    25."""
    import socket  # noqa: PLC0415
    import sys  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).parent))
    from daemon_process import DaemonProcess  # noqa: PLC0415

    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nlog_format = "json"\nstate_dir = "{tmp_path}/state"\n'
    )
    daemon = DaemonProcess(config, deadline=20.0)
    try:
        url = daemon.wait(event="http_listening")["url"]
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        for _ in range(25):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
                sock.shutdown(socket.SHUT_WR)
                answer = sock.recv(64)
            assert answer == b"" or answer.split(b" ")[1].startswith(b"4"), answer
        assert get(url + "healthz").status_code == 200
        daemon.stop()
    finally:
        daemon.close()
    said = [json.loads(line) for line in daemon.text if "http_requests_refused" in line]
    assert sum(event["refused"] for event in said) == 25, said
    assert len(said) <= 2, said
    assert "Traceback" not in "".join(daemon.text)
