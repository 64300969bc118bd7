"""`watchdog start NAME` / `watchdog stop NAME`: ask the running daemon to start or stop a launch's command.

A client of the daemon's HTTP API (`POST /launches/NAME/start|stop`, a JSON body): the daemon is found as
`watchdog probe` finds it (`--url`, `$WATCHDOG_URL`, its config's public_url or listen address), its TLS
certificate and basic auth in its config (`--config`), or `--user` with `$WATCHDOG_PASSWORD`. Exit codes: 0 done; 64 the daemon refused (no such launch, no command, already running or not
running, the command could not start); 69 the daemon cannot be reached, refused the credentials, or cannot reach
the launch's host.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdog.cli.options import duration, health_url
from watchdog.exceptions import UsageError
from watchdog.vocabulary import EXIT_UNREACHABLE, EXIT_USAGE

if TYPE_CHECKING:
    import ssl

__all__ = ["PASSWORD_VARIABLE", "add_arguments", "run_control"]

PASSWORD_VARIABLE = "WATCHDOG_PASSWORD"  # noqa: S105 - a variable's name, not a secret; the basic-auth password of --user (never on the command line)
DEFAULT_TIMEOUT = 120.0  # seconds: a stop waits out the launch's stop_grace on the daemon's side
_UNREACHABLE = frozenset({401, 502})  # credentials refused; the launch's host cannot be reached


def add_arguments(p: argparse.ArgumentParser, *, start: bool) -> None:
    """The arguments of `watchdog start` (`start`) or `watchdog stop`."""
    p.add_argument("name", metavar="NAME", help="the launch ([launches.NAME] in the daemon's config)")
    if start:
        p.add_argument(
            "--replace",
            action="store_true",
            help="stop its run first if it still runs (else that is refused)",
        )
    p.add_argument(
        "--url",
        type=health_url,
        help="the daemon's address, e.g. http://127.0.0.1:9469 (default: $WATCHDOG_URL, else --config's "
        "public_url or listen, else the default listen address)",
    )
    p.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the daemon's config: its listen address, TLS and basic auth",
    )
    p.add_argument("--user", help=f"basic-auth user (its password in ${PASSWORD_VARIABLE})")
    p.add_argument(
        "--timeout",
        type=duration,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"how long to wait for the daemon's answer (default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument("--json", action="store_true", help="print the daemon's answer as JSON")


def _where(args: argparse.Namespace) -> tuple[str, str | None, ssl.SSLContext | None]:
    """The daemon's base URL (as `watchdog probe` finds it: --url, $WATCHDOG_URL, the config's public_url or
    listen), its `Authorization` header (None: none) and the TLS context to reach it."""
    import base64  # noqa: PLC0415 - the parser imports this module: `watchdog --version` stays fast
    import ssl  # noqa: PLC0415

    from watchdog.cli.probe import URL_VARIABLE, daemon_url  # noqa: PLC0415

    auth: tuple[str, str] | None = None
    context: ssl.SSLContext | None = None
    config = None
    if args.config is not None:
        from watchdog.config.loading import load_config  # noqa: PLC0415

        config = load_config(args.config)
        daemon = config.daemon
        if daemon.tls_cert:
            # its own certificate is trusted (a self-signed one included), whatever name it was made for
            context = ssl.create_default_context(cafile=daemon.tls_cert)
            context.check_hostname = False
        if daemon.basic_auth_user and daemon.basic_auth_password:
            auth = (daemon.basic_auth_user, daemon.basic_auth_password.get_secret_value())
    url = args.url or os.environ.get(URL_VARIABLE, "").strip() or daemon_url(config)
    if args.user is not None:
        auth = (args.user, os.environ.get(PASSWORD_VARIABLE, ""))
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"the daemon's address {url!r}: give http://HOST:PORT or https://HOST:PORT")
    header = None
    if auth is not None:
        header = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    return url.rstrip("/"), header, context


def run_control(args: argparse.Namespace, action: str) -> int:
    """`watchdog start` (`action` "start") or `watchdog stop`: returns the exit code."""
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415
    from urllib.parse import quote  # noqa: PLC0415

    base, auth, context = _where(args)
    body = {"replace": True} if getattr(args, "replace", False) else {}
    request = urllib.request.Request(  # noqa: S310 - an http(s) URL, checked above
        f"{base}/launches/{quote(args.name, safe='')}/{action}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **({"Authorization": auth} if auth else {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=args.timeout, context=context) as response:  # noqa: S310
            status, answer = response.status, _json(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            status, answer = exc.code, _json(exc.read())
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"watchdog: cannot reach the daemon at {base}: {reason}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print(json.dumps(answer, ensure_ascii=False))
    if status == 200:
        if not args.json:
            print(_said(args.name, answer))
        return 0
    error = answer.get("error") or f"HTTP {status}"
    if status == 401:
        error = "the daemon refused the credentials (--config, or --user with $" + PASSWORD_VARIABLE + ")"
    print(f"watchdog: {action} {args.name}: {error}", file=sys.stderr)
    return EXIT_UNREACHABLE if status in _UNREACHABLE or status >= 500 else EXIT_USAGE


def _json(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _said(name: str, answer: dict[str, Any]) -> str:
    """What a person reads of a done start or stop (of a process group, or of a container)."""
    lines = []
    if replaced := answer.get("replaced"):
        lines.append(f"{name}: replaced {_ended(replaced)}")
    if started := answer.get("started"):
        if "container" in started:
            lines.append(f"{name}: started container {started['container']} ({started['id']})")
        else:
            lines.append(
                f"{name}: started pid {started['pid']} (its own process group); pid in {started['pid_file']}"
            )
    if stopped := answer.get("stopped"):
        lines.append(f"{name}: stopped {_ended(stopped)}")
    return "\n".join(lines)


def _ended(ended: dict[str, Any]) -> str:
    if "container" in ended:
        code = "" if ended["exit_code"] is None else f", exit code {ended['exit_code']}"
        return f"container {ended['container']} ({ended['command']}{code})"
    count = len(ended["pids"])
    plural = "es" if count != 1 else ""
    return f"process group {ended['pgid']} ({count} process{plural}, {ended['signal'] or 'already gone'})"
