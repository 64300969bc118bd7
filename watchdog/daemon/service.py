"""`watchdog run --config FILE`: the config file turned into launch plans, run by the daemon until stopped."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, cast

import anyio
import structlog
from anyio.abc import TaskStatus

from watchdog.alerts.notifiers import AlertKind
from watchdog.alerts.senders import AppriseNotifier, ConsoleAlerts, Notifier, ServiceNotifier
from watchdog.daemon.supervisor import Daemon, LaunchPlan

if TYPE_CHECKING:
    from watchdog.config.models import Config
    from watchdog.config.shard import Shard

__all__ = ["configure_logging", "notifier_from", "plans_from", "run_daemon"]


def plans_from(config: Config, shard: Shard | None = None) -> dict[str, LaunchPlan]:
    """Each configured launch as the daemon runs it: its spec, host, SSH options, labels and notifiers;
    with a `shard` (else the config's `daemon.shard`), only the launches it owns."""
    from watchdog.config.convert import ssh_options  # noqa: PLC0415

    notifiers = {name: notifier_from(name, config) for name in config.notifiers}

    return {
        name: LaunchPlan(
            spec=config.launch_spec(name),
            host=launch.host or "",
            ssh=ssh_options(config, launch.host) if launch.host else None,
            labels=dict(launch.labels),
            alerts=tuple(notifiers[n] for n in launch.notify),
            learned_factor=launch.learned_factor if launch.learn_deadlines else None,
        )
        for name, launch in config.launches.items()
        if shard is None or shard.owns(name)
    }


# Services that open an incident with a problem and close it with its resolution: they always get both.
_INCIDENT_KINDS = frozenset({"pagerduty", "alertmanager"})


def notifier_from(name: str, config: Config) -> Notifier:
    """The configured notifier `name`, ready to send (its URLs and secret options in clear)."""
    entry = config.notifiers[name]
    on = frozenset(AlertKind(kind) for kind in entry.alert_kinds())
    if entry.kind == "console":
        return ConsoleAlerts(name=name, on=on, rate_limit=entry.rate_limit, remind_every=entry.remind_every)
    if entry.kind == "apprise":
        return AppriseNotifier(
            name=name,
            urls=entry.secret_urls(),
            on=on,
            rate_limit=entry.rate_limit,
            remind_every=entry.remind_every,
            timeout=entry.timeout,
        )
    if entry.kind in _INCIDENT_KINDS:
        on |= {AlertKind.RESOLVED}
    return ServiceNotifier(
        name=name,
        kind=entry.kind,
        urls=entry.secret_urls(),
        options=entry.options(),
        on=on,
        rate_limit=entry.rate_limit,
        remind_every=entry.remind_every,
        timeout=entry.timeout,
    )


# what other libraries (asyncssh, aiohttp, asyncio) log: their warnings and errors, as before they were routed
FOREIGN_LOG_LEVEL = "WARNING"


def configure_logging(
    log_format: str, stream: TextIO | None = None, *, level: str = "INFO", cache: bool = True
) -> None:
    """The daemon's log on standard error (or `stream`): one JSON object per line ("json", for journald and
    log shippers) or human-readable lines ("console").

    Everything comes out in that one format: structlog's events, and the standard `logging` records of the
    libraries (asyncssh, aiohttp, asyncio; warnings and up, with a `logger` field). An exception comes with
    its traceback (in JSON as the text of the `exception` field), never with its frames' local variables
    (they hold webhook URLs and tokens). Console colours only on a terminal, and never with `NO_COLOR` set
    (https://no-color.org). `level`: the least level of watchdog's own events that is written; `cache`: each
    logger keeps this configuration once used (the daemon's speed; a command run in-process by a test leaves
    no logger bound to it with `cache=False`). Without `stream`, standard error as it is at each write.
    """
    import logging  # noqa: PLC0415
    import os  # noqa: PLC0415

    out = stream if stream is not None else cast("TextIO", _Stderr())
    renderer_chain: list[structlog.typing.Processor]
    if log_format == "json":
        # format_exc_info: Python's own traceback text (no locals), in the `exception` field
        renderer_chain = [
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ]
    else:
        colors = not os.environ.get("NO_COLOR") and _isatty(out)
        renderer_chain = [
            structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=structlog.dev.plain_traceback)
        ]
    shared: list[structlog.typing.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, *renderer_chain],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=cache,
    )
    # the standard library's records, rendered by the same processors to the same stream
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer_chain],
        )
    )
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(FOREIGN_LOG_LEVEL)
    logging.captureWarnings(True)  # warnings.warn() too, as the `py.warnings` logger


class _Stderr:
    """`sys.stderr` as it is at each write, not as it was when logging was set up (a test runner swaps it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


def run_daemon(path: Path, shard: Shard | None = None) -> int:
    """Load the config (exit 78 if it is wrong), then run the daemon until SIGTERM/SIGINT (exit 0); with a
    `shard` (it overrides the config's `daemon.shard`), only the launches that shard owns."""
    from watchdog.config.loading import load_config  # noqa: PLC0415

    config = load_config(path)
    configure_logging(config.daemon.log_format)
    # What the imports made lives as long as the process: frozen, a full garbage collection walks only what
    # the daemon makes after (unfrozen, one walks ~75,000 import-time objects inside some callback: 20-100 ms
    # of the event loop).
    gc.collect()
    gc.freeze()
    return anyio.run(_run, path, config, shard)


def _shard(config: Config, override: Shard | None) -> Shard | None:
    from watchdog.config.shard import parse_shard  # noqa: PLC0415

    if override is not None:
        return override
    return parse_shard(config.daemon.shard) if config.daemon.shard else None


async def _run(path: Path, config: Config, shard: Shard | None) -> int:
    from watchdog.config.loading import load_config  # noqa: PLC0415
    from watchdog.daemon.http import serve_http, server_tls  # noqa: PLC0415 - aiohttp only for the daemon

    d = config.daemon
    tls = await server_tls(str(d.tls_cert), str(d.tls_key)) if d.tls_cert else None
    auth = (
        (d.basic_auth_user, d.basic_auth_password.get_secret_value())
        if d.basic_auth_user and d.basic_auth_password
        else None
    )

    async def serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
        await serve_http(
            (d.listen_host, d.listen_port),
            daemon.statuses,
            daemon.stats,
            tls=tls,
            basic_auth=auth,
            public_url=d.public_url,
            health=daemon.health,
            task_status=task_status,
        )

    async def reload() -> dict[str, LaunchPlan]:
        fresh = await anyio.to_thread.run_sync(load_config, path)
        return plans_from(fresh, _shard(fresh, shard))

    from watchdog.store import lock_state_dir, open_store  # noqa: PLC0415

    # One daemon per state directory (two would fight over the file's lock and interleave their alerts): a
    # second one refuses to start (exit 78), naming the first's pid. Held until the process ends.
    with await anyio.to_thread.run_sync(lock_state_dir, d.state_dir):
        async with open_store(d.state_dir) as store:
            mine = _shard(config, shard)
            if mine is not None:
                structlog.get_logger("watchdog.daemon").info("sharded", shard=str(mine))
            daemon = Daemon(
                plans_from(config, mine),
                reload=reload,
                serve=serve,
                store=store,
                public_url=d.public_url,
                listen_host=d.listen_host,
                unreachable_after=d.unreachable_after,
            )
            await daemon.run()
    return 0
