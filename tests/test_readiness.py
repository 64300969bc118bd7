"""Readiness per launch: GET /launches/NAME/ready on a real daemon over loopback, its probe token, and
`watchdog probe` run as a real subprocess, through whole launches written while they are followed."""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from anyio.abc import TaskStatus
from daemon_process import DaemonProcess
from http_client import Client, get
from http_receiver import self_signed

from watchdog.cli.app import build_parser
from watchdog.cli.probe import daemon_url, describe
from watchdog.config.convert import redacted
from watchdog.config.loading import load_config
from watchdog.config.models import Config
from watchdog.core.readiness import readiness_of
from watchdog.core.verdict import Status, Verdict
from watchdog.daemon.http import serve_http, server_tls
from watchdog.daemon.supervisor import ConsoleAlerts, Daemon, LaunchPlan
from watchdog.exceptions import ConfigError
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
DEADLINE = 30.0
TOKEN = "probe-7f3a9c1d2e4b5a6978"
USER, PASSWORD = "admin", "s3cret:pw"


def _basic(user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _lines(path: Path, start: int, end: int | None = None) -> bytes:
    """Lines start..end (1-based, end included; None: to the last) of a log, as written."""
    return b"".join(path.read_bytes().splitlines(keepends=True)[start - 1 : end])


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as file:
        file.write(data)


async def _probe(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`watchdog probe ARGS...` as a real subprocess (awaited: the daemon in this process keeps answering)."""
    result = await anyio.run_process(
        [sys.executable, "-m", "watchdog.cli", "probe", *args],
        check=False,
        env={**os.environ, **(env or {})},
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


@asynccontextmanager
async def _daemon(
    launches: dict[str, Path], *, stall_after: float | None = None, **http: Any
) -> AsyncIterator[tuple[Daemon, str]]:
    """A real daemon following `launches` (name -> log) with its HTTP server on a free loopback port."""
    alerts = ConsoleAlerts(out=io.StringIO())

    def plan(name: str, path: Path) -> LaunchPlan:
        spec = LaunchSpec(name=name, target=parse_target(str(path)), stall_after=stall_after)
        return LaunchPlan(spec, alerts=(alerts,))

    async def serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
        await serve_http(
            ("127.0.0.1", 0),
            daemon.statuses,
            daemon.stats,
            status_of=daemon.status,
            task_status=task_status,
            **http,
        )

    daemon = Daemon({n: plan(n, p) for n, p in launches.items()}, serve=serve, handle_signals=False)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            scheme = "https" if http.get("tls") else "http"
            yield daemon, f"{scheme}://127.0.0.1:{daemon.port}"
            tg.cancel_scope.cancel()


def _state_of(name: str, state: str) -> Any:
    return lambda statuses: any(s["name"] == name and s["state"] == state for s in statuses)


# -- through whole launches ------------------------------------------------------------------------------


async def test_a_launch_is_503_while_loading_200_at_ready_and_another_500_after_its_crash(
    tmp_path: Path,
) -> None:
    """Followed live: 503 with the phase and progress while weights load, 200 within 1 s of the ready line;
    the crashing launch 503 while capturing graphs, then 500 with its category and summary; `watchdog probe`
    exits 3, 0 and 1 with a line that says so."""
    ready, crash = tmp_path / "ready.log", tmp_path / "crash.log"
    async with _daemon({"llama": ready, "qwen": crash}) as (daemon, url), Client(url) as client:
        pending = await client.get("/launches/llama/ready")
        assert pending.status_code == 503
        assert pending.json()["state"] == "pending"

        ready.write_bytes(_lines(READY, 1, 7))  # weights: 2 of 4 shards
        await daemon.wait_until(_state_of("llama", "loading_weights"))
        loading = await client.get("/launches/llama/ready")
        assert loading.status_code == 503
        body = loading.json()
        assert (body["name"], body["ready"], body["state"], body["phase"]) == (
            "llama",
            False,
            "loading_weights",
            "loading_weights",
        )
        assert body["progress"]["weights"] == {"done": 2, "total": 4}
        assert body["incarnation"] == 1
        assert body["elapsed_seconds"] >= 0
        assert "eta_seconds" in body
        code, out, _ = await _probe("llama", "--url", url)
        assert code == 3
        assert out.startswith("llama: loading_weights (weights 2/4)")

        _append(ready, _lines(READY, 8, 26))
        await daemon.wait_until(_state_of("llama", "capturing_graphs"))
        assert (await client.get("/launches/llama/ready")).status_code == 503
        written = time.monotonic()
        _append(ready, _lines(READY, 27))  # "The server is fired up and ready to roll!"
        # probes one after another, as a script's `until` runs them, with no wait of our own: the first that
        # exits 0 began within a second of the ready line
        began = written
        code, out, _ = await _probe("llama", "--url", url)
        while code == 3:
            began = time.monotonic()
            code, out, _ = await _probe("llama", "--url", url)
        assert (code, out.split(",")[0]) == (0, "llama: ready")
        assert began - written < 1.0
        at_ready = await client.get("/launches/llama/ready")
        assert at_ready.status_code == 200
        assert at_ready.json()["ready"] is True

        crash.write_bytes(_lines(CRASH, 1, 50))
        await daemon.wait_until(_state_of("qwen", "capturing_graphs"))
        assert (await client.get("/launches/qwen/ready")).status_code == 503
        _append(crash, _lines(CRASH, 51))
        await daemon.wait_until(_state_of("qwen", "crashed"))
        crashed = await client.get("/launches/qwen/ready")
        code, out, _ = await _probe("qwen", "--url", url)
    assert crashed.status_code == 500
    body = crashed.json()
    assert (body["state"], body["phase"], body["category"]) == ("crashed", "capturing_graphs", "cuda")
    assert "CUDA error: operation not permitted" in body["summary"]
    assert code == 1
    assert out.startswith("qwen: crashed in capturing_graphs")
    assert ": cuda: torch.AcceleratorError: CUDA error" in out


async def test_a_stalled_launch_is_500_and_the_probe_exits_2(tmp_path: Path) -> None:
    """A launch that makes no progress for its stall_after is 500 with the reason, and the probe exits 2."""
    log = tmp_path / "stall.log"
    async with _daemon({"glm": log}, stall_after=0.5) as (daemon, url), Client(url) as client:
        log.write_bytes(_lines(READY, 1, 7))
        await daemon.wait_until(_state_of("glm", "stalled"))
        r = await client.get("/launches/glm/ready")
        code, out, _ = await _probe("glm", "--url", url, "--json")
    assert r.status_code == 500
    assert (r.json()["state"], r.json()["phase"]) == ("stalled", "loading_weights")
    assert r.json()["reason"]
    assert code == 2
    assert json.loads(out) == r.json() | {"elapsed_seconds": json.loads(out)["elapsed_seconds"]}


async def test_unknown_launch_is_404_naming_it_and_the_probe_exits_64(tmp_path: Path) -> None:
    """A name the daemon does not follow is 404 with the name in the body; `probe` says so and exits 64."""
    async with _daemon({"llama": tmp_path / "a.log"}) as (_, url), Client(url) as client:
        r = await client.get("/launches/nope/ready")
        code, out, err = await _probe("nope", "--url", url)
    assert r.status_code == 404
    assert r.json()["name"] == "nope"
    assert "nope" in r.json()["error"]
    assert (code, out) == (64, "")
    assert "follows no launch named 'nope'" in err


async def test_head_answers_the_status_without_a_body_and_nothing_is_cached(tmp_path: Path) -> None:
    """HEAD gives the same status as GET and no body; every answer says Cache-Control: no-store."""
    async with _daemon({"llama": tmp_path / "a.log"}) as (_, url), Client(url) as client:
        head = await client.request("HEAD", "/launches/llama/ready")
        got = await client.get("/launches/llama/ready")
        missing = await client.request("HEAD", "/launches/nope/ready")
    assert (head.status_code, head.content) == (503, b"")
    assert head.headers["Cache-Control"] == got.headers["Cache-Control"] == "no-store"
    assert got.headers["Content-Type"].startswith("application/json")
    assert missing.status_code == 404


# -- auth ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers", "code"),
    [
        pytest.param("/launches/llama/ready", {}, 401, id="ready-no-credentials"),
        pytest.param("/launches/llama/ready", _bearer(), 503, id="ready-token"),
        pytest.param("/launches/llama/ready", _basic(), 503, id="ready-basic"),
        pytest.param("/launches/llama/ready", _bearer("probe-wrong-0000000000"), 401, id="ready-wrong-token"),
        pytest.param("/launches/llama/ready", {"Authorization": "Bearer"}, 401, id="ready-empty-token"),
        pytest.param("/launches/nope/ready", _bearer(), 404, id="unknown-launch-token"),
        pytest.param("/status", _bearer(), 401, id="status-token-refused"),
        pytest.param("/metrics", _bearer(), 401, id="metrics-token-refused"),
        pytest.param("/", _bearer(), 401, id="page-token-refused"),
        pytest.param("/launches/llama", _bearer(), 401, id="other-launch-path-token-refused"),
        pytest.param("/status", _basic(), 200, id="status-basic"),
        pytest.param("/healthz", {}, 200, id="healthz-open"),
    ],
)
async def test_basic_auth_with_a_probe_token(
    tmp_path: Path, path: str, headers: dict[str, str], code: int
) -> None:
    """With basic auth on, /launches/NAME/ready takes basic auth or the probe token; the token opens no other
    path; without credentials it is 401."""
    async with (
        _daemon({"llama": tmp_path / "a.log"}, basic_auth=(USER, PASSWORD), probe_token=TOKEN) as (_, url),
        Client(url) as client,
    ):
        r = await client.get(path, headers=headers)
    assert r.status_code == code
    if code == 401:
        assert "llama" not in r.text
        scheme = "Bearer" if path.endswith("/ready") and headers else "Basic"
        assert r.headers["WWW-Authenticate"].startswith(scheme)


async def test_the_probe_uses_its_token_from_a_file_or_the_environment(tmp_path: Path) -> None:
    """`probe` sends the token of --token-file or $WATCHDOG_PROBE_TOKEN; without one, under basic auth, it
    is refused: exit 69, saying to give the token."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    async with _daemon({"llama": tmp_path / "a.log"}, basic_auth=(USER, PASSWORD), probe_token=TOKEN) as (
        _,
        url,
    ):
        by_file = await _probe("llama", "--url", url, "--token-file", str(token_file))
        by_env = await _probe("llama", "--url", url, env={"WATCHDOG_PROBE_TOKEN": TOKEN})
        without = await _probe("llama", "--url", url, env={"WATCHDOG_PROBE_TOKEN": ""})
        quiet = await _probe("llama", "--url", url, "--quiet", env={"WATCHDOG_PROBE_TOKEN": TOKEN})
    assert by_file[0] == by_env[0] == quiet[0] == 3
    assert quiet[1:] == ("", "")
    assert by_file[1].startswith("llama: pending")
    assert without[0] == 69
    assert "refused the credentials (HTTP 401)" in without[2]
    assert TOKEN not in "".join(by_file[1:] + by_env[1:] + without[1:])


async def test_a_valid_token_passes_the_host_check_and_a_wrong_one_is_refused(tmp_path: Path) -> None:
    """Without basic auth, the ready path is open to a Host for this server (as /status is); a foreign Host
    (a Service's DNS name) is 421 unless the request carries the right probe token, and a wrong token is 401."""
    foreign = {"Host": "watchdog.monitoring.svc:9469"}
    async with (
        _daemon({"llama": tmp_path / "a.log"}, probe_token=TOKEN) as (_, url),
        Client(url) as client,
    ):
        plain = await client.get("/launches/llama/ready")
        refused = await client.get("/launches/llama/ready", headers=foreign)
        with_token = await client.get("/launches/llama/ready", headers={**foreign, **_bearer()})
        wrong = await client.get("/launches/llama/ready", headers=_bearer("probe-wrong-0000000000"))
        status = await client.get("/status", headers={**foreign, **_bearer()})
    assert (plain.status_code, refused.status_code, with_token.status_code) == (503, 421, 503)
    assert wrong.status_code == 401
    assert status.status_code == 421  # the token opens the ready path only


# -- no daemon -------------------------------------------------------------------------------------------


async def test_the_probe_exits_69_when_no_daemon_listens() -> None:
    """A port nothing listens on is exit 69 with one line that names the address and why."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    code, out, err = await _probe("llama", "--url", f"http://127.0.0.1:{port}", "--timeout", "5s")
    assert (code, out) == (69, "")
    assert err.strip() == f"watchdog: cannot reach the daemon at http://127.0.0.1:{port}: Connection refused"


async def test_the_probe_exits_69_when_the_daemon_does_not_answer_in_time() -> None:
    """A port that accepts and never answers is exit 69 after --timeout, not a hang."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        started = time.monotonic()
        code, _, err = await _probe("llama", "--url", f"http://127.0.0.1:{port}", "--timeout", "0.5s")
    assert code == 69
    assert "no answer within 0.5s" in err
    assert time.monotonic() - started < DEADLINE


async def test_the_probe_checks_the_daemons_certificate(tmp_path: Path) -> None:
    """Over HTTPS the probe verifies the daemon's certificate: an untrusted one is exit 69 (a TLS problem);
    trusted through SSL_CERT_FILE, it is answered."""
    cert, key = self_signed(tmp_path)
    tls = await server_tls(str(cert), str(key))
    async with _daemon({"llama": tmp_path / "a.log"}, tls=tls) as (_, url):
        untrusted = await _probe("llama", "--url", url, env={"SSL_CERT_FILE": os.devnull})
        trusted = await _probe("llama", "--url", url, env={"SSL_CERT_FILE": str(cert)})
    assert untrusted[0] == 69
    assert "TLS problem: certificate verify failed" in untrusted[2]
    assert trusted[0] == 3


async def test_the_probe_says_when_the_server_is_not_a_watchdog_daemon(tmp_path: Path) -> None:
    """A server without the endpoint (its 404 is not the daemon's) is exit 69, not 'no such launch'."""
    async with _daemon({"llama": tmp_path / "a.log"}) as (_, url):
        code, _, err = await _probe("llama", "--url", url + "/elsewhere")
    assert code == 69
    assert "has no /launches/NAME/ready" in err


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        pytest.param(["--url", "ftp://x"], {}, "--url", id="bad-url"),
        pytest.param(["--timeout", "0"], {}, "--timeout", id="bad-timeout"),
        pytest.param(["--token-file", "/nonexistent/token"], {}, "--token-file", id="missing-token-file"),
        pytest.param([], {"WATCHDOG_URL": "not a url"}, "$WATCHDOG_URL", id="bad-url-variable"),
        pytest.param(["--json", "--quiet"], {}, "not allowed with", id="json-and-quiet"),
    ],
)
async def test_the_probe_refuses_bad_input_with_64(
    args: list[str], env: dict[str, str], message: str
) -> None:
    """Bad options are exit 64 with a message, before any request."""
    code, out, err = await _probe("llama", *args, env=env)
    assert (code, out) == (64, "")
    assert message in err


async def test_the_deploy_kits_startup_probe_runs_as_written_on_the_standard_library(tmp_path: Path) -> None:
    """deploy/k8s-probe's startupProbe, run as written against a real daemon, on the package its init container
    copies and a Python without site-packages: exit 3 while the launch loads, 0 once it is ready."""
    (deployment,) = yaml.safe_load_all((ROOT / "deploy" / "k8s-probe" / "vllm-deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    (container,) = pod["containers"]
    copy = init["command"][-1].replace("/opt/watchdog-probe", str(tmp_path / "opt"))
    await anyio.run_process([sys.executable, "-c", copy])  # from this tree (first on PYTHONPATH)
    command = container["startupProbe"]["exec"]["command"]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    log = tmp_path / "vllm.log"
    name = command[command.index("probe") + 1]
    async with _daemon({name: log}, probe_token=TOKEN) as (daemon, url):
        # the option values of this test's daemon and token file; this Python, without site-packages
        here = {"--url": url, "--token-file": str(token_file)}
        argv = [here.get(before, word) for before, word in zip(["", *command], command, strict=False)]
        argv[argv.index("env") + 1] = f"PYTHONPATH={tmp_path / 'opt'}"
        python = argv.index("python3")
        argv[python : python + 1] = [sys.executable, "-S"]
        log.write_bytes(_lines(READY, 1, 7))
        await daemon.wait_until(_state_of(name, "loading_weights"))
        loading = await anyio.run_process(argv, check=False, env={"PATH": os.environ.get("PATH", "")})
        _append(log, _lines(READY, 8))
        await daemon.wait_until(_state_of(name, "ready"))
        ready = await anyio.run_process(argv, check=False, env={"PATH": os.environ.get("PATH", "")})
    assert (loading.returncode, ready.returncode) == (3, 0), loading.stderr + ready.stderr
    assert (tmp_path / "opt" / "watchdog" / "cli" / "probe.py").is_file()


# -- the config, and the real `watchdog run` -------------------------------------------------------------


def _config(tmp_path: Path, daemon: str, launches: str = "") -> Path:
    config = tmp_path / "watchdog.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n{daemon}\n{launches}')
    return config


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("short", id="too-short"),
        pytest.param("has spaces in it, sixteen+", id="spaces"),
        pytest.param("ünïcödé-token-000000", id="not-ascii"),
    ],
)
def test_a_bad_probe_token_is_a_config_error_that_names_the_key(tmp_path: Path, token: str) -> None:
    """A probe token that is not 16 or more token characters is exit 78's error: the file, daemon.probe_token
    and what is allowed, never the value."""
    config = _config(tmp_path, f'probe_token = "{token}"')
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    message = str(caught.value)
    assert str(config) in message
    assert "daemon.probe_token" in message
    assert "at least 16 characters" in message
    assert token not in message


def test_check_config_exits_78_for_a_bad_probe_token_without_showing_it(tmp_path: Path) -> None:
    """`watchdog check-config` on a short probe token: exit 78, one line naming the file and the key."""
    config = _config(tmp_path, 'probe_token = "tiny-token"')
    result = subprocess.run(
        [sys.executable, "-m", "watchdog.cli", "check-config", str(config)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert result.returncode == 78
    assert f"{config}: daemon.probe_token: a probe token is at least 16 characters" in result.stderr
    assert "tiny-token" not in result.stdout + result.stderr


def test_the_probe_token_is_a_secret_read_from_the_environment_and_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """probe_token takes env:NAME like the other secrets; check-config shows it masked with its source."""
    monkeypatch.setenv("WATCHDOG_PROBE_TOKEN", TOKEN)
    config = _config(tmp_path, 'probe_token = "env:WATCHDOG_PROBE_TOKEN"')
    loaded = load_config(config)
    assert loaded.daemon.probe_token is not None
    assert loaded.daemon.probe_token.get_secret_value() == TOKEN
    shown = json.dumps(redacted(loaded))
    assert TOKEN not in shown
    assert "env:WATCHDOG_PROBE_TOKEN" in shown


def test_watchdog_run_serves_readiness_to_the_probe_and_never_shows_the_token(tmp_path: Path) -> None:
    """The real daemon: the probe with --config (its token) and --url is answered under basic auth; the
    token is in none of its log lines, /status and /metrics."""
    log = tmp_path / "llama.log"
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "password").write_text(PASSWORD)
    config = _config(
        tmp_path,
        f'listen = "127.0.0.1:0"\nlog_format = "json"\nbasic_auth_user = "{USER}"\n'
        f'basic_auth_password = "file:{tmp_path / "password"}"\nprobe_token = "file:{tmp_path / "token"}"',
        f'[launches.llama]\nlog = "{log}"\n',
    )
    daemon = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = daemon.wait(event="http_listening")["url"].rstrip("/")
        log.write_bytes(READY.read_bytes())
        daemon.wait(event="transition", launch="llama", state="ready")
        answer = subprocess.run(
            [sys.executable, "-m", "watchdog.cli", "probe", "llama", "--config", str(config), "--url", url],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        status = get(url + "/status", headers=_basic()).text
        metrics = get(url + "/metrics", headers=_basic()).text
        ready = get(url + "/launches/llama/ready", headers=_bearer())
    finally:
        daemon.close()
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.startswith("llama: ready")
    assert ready.status_code == 200
    assert TOKEN not in status + metrics + "".join(daemon.text)


# -- the answer itself (pure) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "http_status", "exit_code", "eta"),
    [
        pytest.param(State.PENDING, 503, 3, 30.0, id="pending"),
        pytest.param(State.STARTING, 503, 3, 30.0, id="starting"),
        pytest.param(State.LOADING_WEIGHTS, 503, 3, 30.0, id="loading"),
        pytest.param(State.ALLOCATING_KV_CACHE, 503, 3, 30.0, id="allocating"),
        pytest.param(State.CAPTURING_GRAPHS, 503, 3, 30.0, id="capturing"),
        pytest.param(State.READY, 200, 0, None, id="ready"),
        pytest.param(State.CRASHED, 500, 1, None, id="crashed"),
        pytest.param(State.STALLED, 500, 2, None, id="stalled"),
        pytest.param(State.STOPPED, 503, 3, None, id="stopped"),
    ],
)
def test_each_state_has_its_http_status_and_exit_code(
    state: State, http_status: int, exit_code: int, eta: float | None
) -> None:
    """200 only when ready, 500 for crashed and stalled, 503 for the rest (stopped included: not serving);
    the probe's exit is the `watch` code of the state; an ETA only while the launch is on its way."""
    answer = readiness_of(Status(Verdict(None, state, state), name="x", eta=30.0))
    assert (answer.http_status, answer.exit_code) == (http_status, exit_code)
    assert answer.to_json()["eta_seconds"] == eta


@pytest.mark.parametrize(
    ("body", "line"),
    [
        pytest.param(
            {"name": "k", "state": "loading_weights", "phase": "loading_weights",
             "progress": {"weights": {"done": 12, "total": 64}}, "elapsed_seconds": 62.0, "eta_seconds": 310.0},
            "k: loading_weights (weights 12/64), 1m02s since start, ready in about 5m10s",
            id="loading",
        ),
        pytest.param(
            {"name": "k", "state": "ready", "phase": "ready", "progress": {"weights": {"done": 4, "total": 4}},
             "elapsed_seconds": 432.0, "eta_seconds": None},
            "k: ready, 7m12s since start",
            id="ready",
        ),
        pytest.param(
            {"name": "q", "state": "crashed", "phase": "allocating_kv_cache", "progress": {},
             "elapsed_seconds": 5.0, "category": "oom", "summary": "RuntimeError: Not enough memory"},
            "q: crashed in allocating_kv_cache, 5.0s since start: oom: RuntimeError: Not enough memory",
            id="crashed",
        ),
        pytest.param(
            {"name": "g", "state": "stalled", "phase": "loading_weights", "progress": {},
             "elapsed_seconds": None, "reason": "no progress for 10m"},
            "g: stalled in loading_weights: no progress for 10m",
            id="stalled",
        ),
        pytest.param({"name": "p", "state": "pending", "phase": "pending"}, "p: pending", id="pending"),
    ],
)  # fmt: skip
def test_the_probe_line_says_state_phase_and_progress(body: dict[str, Any], line: str) -> None:
    """The probe's one line: state, the phase it is in or failed in, progress, time, and why it failed."""
    assert describe(body) == line


@pytest.mark.parametrize(
    ("daemon", "url"),
    [
        pytest.param(None, "http://127.0.0.1:9469", id="no-config"),
        pytest.param({}, "http://127.0.0.1:9469", id="default-listen"),
        pytest.param(
            {"listen": "0.0.0.0:9100", "insecure_public": True}, "http://127.0.0.1:9100", id="any-v4"
        ),
        pytest.param({"listen": "[::]:9100", "insecure_public": True}, "http://[::1]:9100", id="any-v6"),
        pytest.param({"listen": "[::1]:9100"}, "http://[::1]:9100", id="v6-loopback"),
        pytest.param(
            {"listen": "127.0.0.1:9443", "tls_cert": "/etc/c.pem", "tls_key": "/etc/k.pem"},
            "https://127.0.0.1:9443",
            id="tls",
        ),
        pytest.param(
            {"public_url": "https://w.example.org/watch/"}, "https://w.example.org/watch", id="public"
        ),
    ],
)
def test_the_probe_finds_the_daemon_from_its_config(daemon: dict[str, Any] | None, url: str) -> None:
    """Without --url, the daemon is its config's public_url, else its listen address (a bind-all address
    asked on loopback, https with a certificate), else 127.0.0.1:9469."""
    config = None if daemon is None else Config.model_validate({"daemon": daemon})
    assert daemon_url(config) == url


def test_the_probe_command_is_in_the_parser() -> None:
    """`watchdog probe NAME --url URL --token-file F --timeout S --json` parses (the deploy kit's command)."""
    args = build_parser().parse_args(
        ["probe", "kimi", "--url", "http://w:9469", "--token-file", "/t", "--timeout", "3s", "--json"]
    )
    assert (args.name, args.url, args.timeout, args.json) == ("kimi", "http://w:9469", 3.0, True)
