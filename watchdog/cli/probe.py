"""`watchdog probe NAME`: ask the daemon whether a launch is ready, and exit as an exec probe or a script's
`until` needs: 0 ready, 1 crashed, 2 stalled, 3 not ready yet, 69 no daemon (docs/readiness.md).

It asks the daemon's /launches/NAME/ready with the standard library's HTTP client only: a Kubernetes exec
probe starts it every few seconds, so it imports neither aiohttp nor the config's models unless `--config`
is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from watchdog.cli.options import duration, health_url
from watchdog.cli.render import write_out
from watchdog.exceptions import TargetError, UsageError
from watchdog.vocabulary import (
    DEFAULT_LISTEN,
    EXIT_USAGE,
    State,
    check_http_url,
    file_kind,
    format_duration,
    version,
)

if TYPE_CHECKING:
    from watchdog.config.models import Config

__all__ = [
    "DEFAULT_TIMEOUT",
    "TOKEN_VARIABLE",
    "URL_VARIABLE",
    "Answer",
    "add_arguments",
    "ask",
    "daemon_url",
    "run_probe",
]

DEFAULT_TIMEOUT = 5.0  # seconds for the connection and for each read (a Kubernetes exec probe's own is 1s)
URL_VARIABLE = "WATCHDOG_URL"  # the daemon's address, when --url is not given
TOKEN_VARIABLE = "WATCHDOG_PROBE_TOKEN"  # noqa: S105 - a variable's name: the probe token, when --token-file is not given
MAX_ANSWER = 64 * 1024  # bytes of an answer read at most: the endpoint's body is a few hundred
_BIND_ALL = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 - a listen address on every interface
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO must not hang the probe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `watchdog probe`, for the command line's subparser."""
    parser.add_argument("name", metavar="NAME", help="the launch, as named in the daemon's config")
    parser.add_argument(
        "--url",
        type=health_url,
        metavar="URL",
        help=f"the daemon's address, e.g. http://watchdog.monitoring:9469 (default: ${URL_VARIABLE}, else "
        f"--config's daemon.public_url or listen, else http://{DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="the daemon's config: its address and probe_token"
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help=f"a file holding the daemon's probe_token (default: ${TOKEN_VARIABLE}, else --config's)",
    )
    parser.add_argument(
        "--timeout",
        type=duration,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"give up on the daemon after S for the connection or a read (default {DEFAULT_TIMEOUT:g}s): "
        "exit 69",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the daemon's answer (one JSON object)")
    out.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    parser.set_defaults(handler=run_probe)


@dataclass(frozen=True)
class Answer:
    """What the daemon answered: the HTTP status and the JSON body (None: the body was not JSON)."""

    status: int
    body: dict[str, Any] | None


def run_probe(args: argparse.Namespace) -> int:
    """Run `watchdog probe` with parsed arguments; the exit code (docs/readiness.md).

    Raises:
        UsageError: no name, or an unreadable --token-file (64).
        ConfigError: the --config file is invalid (78).
        TargetError: the daemon cannot be reached, refuses the credentials, or is not a watchdog daemon (69).
    """
    name = args.name.strip()
    if not name:
        raise UsageError("give the launch's NAME, as in the daemon's config")
    config = _load(args.config) if args.config is not None else None
    url = args.url or _url_from_environment() or daemon_url(config)
    token = _token(args.token_file, config)
    answer = ask(url, name, token=token, timeout=args.timeout)
    body = answer.body
    if answer.status == 404 and body is not None and "error" in body:
        # the daemon's own 404: it follows no launch of that name (the command line is wrong, not the daemon)
        print(f"watchdog: the daemon at {url} follows no launch named {name!r}", file=sys.stderr)
        return EXIT_USAGE
    state = _state(body) if answer.status in (200, 500, 503) and body is not None else None
    if state is None:
        raise TargetError(_unexpected(url, answer), host=urlsplit(url).hostname)
    assert body is not None
    if args.json:
        write_out(json.dumps(body, ensure_ascii=False))
    elif not args.quiet:
        write_out(describe(body))
    from watchdog.core.verdict import exit_code  # noqa: PLC0415 - the core only once there is an answer

    return exit_code(state)


def daemon_url(config: Config | None = None) -> str:
    """The daemon's address: the config's `public_url`, else its `listen` (a bind-all address asked on
    loopback; https when it has a certificate); without a config, the default listen address over http."""
    if config is None:
        return f"http://{DEFAULT_LISTEN}"
    daemon = config.daemon
    if daemon.public_url:
        return daemon.public_url
    host = _BIND_ALL.get(daemon.listen_host, daemon.listen_host)
    scheme = "https" if daemon.tls_cert else "http"
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{daemon.listen_port}"


def ask(url: str, name: str, *, token: str | None, timeout: float) -> Answer:
    """GET `url`/launches/NAME/ready (with `Authorization: Bearer token` when one is given).

    Raises:
        TargetError: no answer: refused, timed out, a TLS problem, or not HTTP.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    path = f"{parts.path.rstrip('/')}/launches/{quote(name, safe='')}/ready"
    headers = {"Accept": "application/json", "User-Agent": f"watchdog-probe/{version()}"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    import http.client  # noqa: PLC0415 - not for the other commands' start (`watchdog replay`)
    import ssl  # noqa: PLC0415

    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        # the system's certificate authorities, or those SSL_CERT_FILE / SSL_CERT_DIR name
        conn = http.client.HTTPSConnection(
            host, parts.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        raw = response.read(MAX_ANSWER)
    except ssl.SSLCertVerificationError as exc:
        raise _unreachable(url, f"TLS problem: certificate verify failed: {exc.verify_message}") from exc
    except ssl.SSLError as exc:
        raise _unreachable(url, f"TLS problem: {exc.reason or exc}") from exc
    except TimeoutError as exc:
        raise _unreachable(url, f"no answer within {timeout:g}s") from exc
    except OSError as exc:
        raise _unreachable(url, exc.strerror or str(exc) or type(exc).__name__) from exc
    except http.client.HTTPException as exc:
        raise _unreachable(url, f"not an HTTP answer ({type(exc).__name__})") from exc
    finally:
        conn.close()
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    return Answer(response.status, body if isinstance(body, dict) else None)


def describe(body: dict[str, Any]) -> str:
    """One line for people: the launch, its state (and phase), its progress, how long, and why it failed.

    `kimi-ep: loading_weights (weights 12/64), 1m02s since start, ready in about 5m10s`;
    `qwen: crashed in allocating_kv_cache, 3m40s since start: oom: torch.OutOfMemoryError: ...`.
    """
    state, phase = body.get("state"), body.get("phase")
    ready = state == State.READY.value
    head = f"{body.get('name', '?')}: {state}"
    if not ready and phase not in (None, state, State.PENDING.value):
        head += f" in {phase}"
    bars = body.get("progress")
    bars = bars if isinstance(bars, dict) else {}
    shown = [f"{bar} {p.get('done')}/{p.get('total')}" for bar, p in bars.items() if isinstance(p, dict)]
    if shown and not ready:
        head += f" ({', '.join(shown)})"
    parts = [head]
    elapsed, eta = body.get("elapsed_seconds"), body.get("eta_seconds")
    if isinstance(elapsed, int | float):
        parts.append(f"{format_duration(elapsed)} since start")
    if isinstance(eta, int | float) and not ready:
        parts.append(f"ready in about {format_duration(eta)}")
    line = ", ".join(parts)
    if state == State.CRASHED.value:
        line += f": {body.get('category')}: {body.get('summary')}"
    elif state == State.STALLED.value and body.get("reason"):
        line += f": {body['reason']}"
    return line


def _url_from_environment() -> str | None:
    url = os.environ.get(URL_VARIABLE, "").strip()
    if not url:
        return None
    try:
        return check_http_url(url, secret=False)
    except ValueError as exc:
        raise UsageError(f"${URL_VARIABLE}: {exc}") from None


def _state(body: dict[str, Any]) -> State | None:
    try:
        return State(body.get("state"))
    except ValueError:
        return None


def _unreachable(url: str, reason: str) -> TargetError:
    return TargetError(f"cannot reach the daemon at {url}: {reason}", host=urlsplit(url).hostname)


def _unexpected(url: str, answer: Answer) -> str:
    if answer.status in (401, 403):
        return (
            f"the daemon at {url} refused the credentials (HTTP {answer.status}): give its probe_token "
            f"with --token-file or ${TOKEN_VARIABLE}"
        )
    if answer.status == 421:
        return f"the daemon at {url} does not answer for that host name (HTTP 421): set its daemon.public_url"
    if answer.status == 404:
        return f"{url} has no /launches/NAME/ready: is it a watchdog daemon of this version?"
    return f"the server at {url} answered HTTP {answer.status}, not a readiness answer"


def _token(path: Path | None, config: Config | None) -> str | None:
    if path is not None:
        return _read_token(path)
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if token:
        return token
    secret = config.daemon.probe_token if config is not None else None
    return secret.get_secret_value() if secret is not None else None


def _read_token(path: Path) -> str:
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise UsageError(f"--token-file {path}: cannot read: {exc.strerror or exc}", file=str(path)) from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        raw = b"" if kind is not None else os.read(fd, MAX_ANSWER)
    except OSError as exc:
        raise UsageError(f"--token-file {path}: cannot read: {exc.strerror or exc}", file=str(path)) from None
    finally:
        os.close(fd)
    token = raw.decode("utf-8", errors="replace").strip()
    if kind is not None or not token:
        what = kind or "empty"
        raise UsageError(f"--token-file {path}: {what}, not a file holding the token", file=str(path))
    return token


def _load(path: Path) -> Config:
    from watchdog.config.loading import load_config  # noqa: PLC0415 - pydantic only when a config is given

    return load_config(path)
