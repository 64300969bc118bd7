"""`watchdog run --config FILE`: the config file turned into launch plans, run by the daemon until stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import TaskStatus

from watchdog.alerts.notifiers import AlertKind
from watchdog.alerts.senders import AppriseNotifier, ConsoleAlerts, Notifier, ServiceNotifier
from watchdog.daemon.arenas import use_one_arena
from watchdog.daemon.collector import freeze_survivors
from watchdog.daemon.launches import LaunchControl, NodePlan
from watchdog.daemon.logs import configure_logging
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.launching import ContainerCommand, LaunchCommand
from watchdog.follow.sources.kinds import FILE

if TYPE_CHECKING:
    from watchdog.config.models import Config, LaunchConfig
    from watchdog.config.shard import Shard
    from watchdog.follow.sources.target import Target

__all__ = ["configure_logging", "control_from", "notifier_from", "plans_from", "run_daemon"]


def plans_from(config: Config, shard: Shard | None = None) -> dict[str, LaunchPlan]:
    """Each configured launch as the daemon runs it: its spec, host, SSH options, labels and notifiers;
    with a `shard` (else the config's `daemon.shard`), only the launches it owns."""
    from watchdog.config.convert import ssh_options  # noqa: PLC0415
    from watchdog.config.models import node_specs  # noqa: PLC0415

    notifiers = {name: notifier_from(name, config) for name in config.notifiers}
    plans = {}
    for name, launch in config.launches.items():
        if shard is not None and not shard.owns(name):
            continue
        serving = launch.serving_node()
        nodes = tuple(
            NodePlan(
                node_name,
                spec,
                host=host,
                ssh=ssh_options(config, host) if host else None,
                serve=index == serving,
            )
            for index, (node_name, host, spec) in enumerate(node_specs(config, name))
        )
        host = nodes[serving].host if nodes else launch.host or ""
        spec = config.launch_spec(name)
        plans[name] = LaunchPlan(
            spec=spec,
            host=host,
            ssh=ssh_options(config, host) if host else None,
            labels=dict(launch.labels),
            alerts=tuple(notifiers[n] for n in launch.notify),
            learned_factor=launch.learned_factor if launch.learn_deadlines else None,
            nodes=nodes,
            control=control_from(launch, spec.target),
        )
    return plans


def control_from(launch: LaunchConfig, target: Target) -> LaunchControl | None:
    """Launch mode's part of a configured launch (None without a `command`); `target` its spec's (a log's path
    as its host takes it, or a container and its runtime)."""
    if launch.command is None:
        return None
    env = tuple(launch.env.items())
    command: LaunchCommand | ContainerCommand
    if target.kind == FILE:
        command = LaunchCommand(launch.command, target.path, cwd=launch.cwd, env=env)
    else:
        command = ContainerCommand(target.kind, target.path, launch.command, env=env, cwd=launch.cwd)
    return LaunchControl(
        command,
        kill_on_crash=launch.kill_on_crash,
        stop_grace=launch.stop_grace,
        on_boot=launch.start == "on_boot",
    )


# Services that open an incident with a problem and close it with its resolution: they always get both.
_INCIDENT_KINDS = frozenset({"pagerduty", "alertmanager"})


def notifier_from(name: str, config: Config) -> Notifier:
    """The configured notifier `name`, ready to send (its URLs and secret options in clear)."""
    entry = config.notifiers[name]
    on = frozenset(AlertKind(kind) for kind in entry.alert_kinds())
    common: dict[str, Any] = {
        "name": name,
        "rate_limit": entry.rate_limit,
        "remind_every": entry.remind_every,
    }
    if entry.kind == "console":
        return ConsoleAlerts(on=on, **common)
    common.update(urls=entry.secret_urls(), timeout=entry.timeout)
    if entry.kind == "apprise":
        return AppriseNotifier(on=on, **common)
    if entry.kind in _INCIDENT_KINDS:
        on |= {AlertKind.RESOLVED}
    return ServiceNotifier(kind=entry.kind, options=entry.options(), on=on, **common)


def run_daemon(path: Path | None, shard: Shard | None = None) -> int:
    """Load the config (exit 78 if it is wrong), then run the daemon until SIGTERM/SIGINT (exit 0); with a
    `shard` (it overrides the config's `daemon.shard`), only the launches that shard owns. The config is the
    file at `path` with the environment's `LLW_` variables over it (without a file, those alone); a reload
    reads both again."""
    from watchdog.config.loading import load_config  # noqa: PLC0415

    config = load_config(path)
    use_one_arena()  # before any thread starts
    configure_logging(config.daemon.log_format)
    from watchdog.config.environment import set_by_environment  # noqa: PLC0415

    if environment := set_by_environment(config):
        # which keys the file does not decide: a reload (SIGHUP) reads the file again, but this process's
        # environment cannot change, so these stay as they are
        structlog.get_logger("watchdog.daemon").info("config from the environment", keys=environment)
    # What the imports made lives as long as the process: frozen, a full garbage collection walks only what
    # the daemon makes after (unfrozen, one walks ~75,000 import-time objects inside some callback: 20-100 ms
    # of the event loop). What the launches' start makes is frozen too, once it is done (`Daemon(freeze=)`).
    freeze_survivors()
    # uvloop where the config asks for it (checked installed as the config loaded); anyio runs either alike
    uvloop = config.daemon.event_loop == "uvloop"
    return anyio.run(_run, path, config, shard, backend_options={"use_uvloop": uvloop})


def _shard(config: Config, override: Shard | None) -> Shard | None:
    from watchdog.config.shard import parse_shard  # noqa: PLC0415

    if override is not None:
        return override
    return parse_shard(config.daemon.shard) if config.daemon.shard else None


async def _run(path: Path | None, config: Config, shard: Shard | None) -> int:
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
            probe_token=d.probe_token.get_secret_value() if d.probe_token else None,
            status_of=daemon.status,
            control=daemon.control,
            task_status=task_status,
        )

    async def reload() -> dict[str, LaunchPlan]:
        fresh = await anyio.to_thread.run_sync(load_config, path)
        return plans_from(fresh, _shard(fresh, shard))

    from watchdog.store import lock_state_dir, open_store, refuse_legacy_state  # noqa: PLC0415

    # An upgrade from before the rename, its state still in the old default directory: refused (exit 78), before
    # the lock makes anything there (StateStore.open refuses it too: for `silence`, `history`).
    await anyio.to_thread.run_sync(refuse_legacy_state, d.state_dir)
    # One daemon per state directory (two would fight over the file's lock and interleave their alerts): a
    # second one refuses to start (exit 78), naming the first's pid. Held until the process ends.
    with await anyio.to_thread.run_sync(lock_state_dir, d.state_dir):
        async with open_store(d.state_dir) as store:
            # the loop it runs on, asked from inside it (after what refuses to start: a config error stays the
            # first thing a refused start prints)
            loop = type(asyncio.get_running_loop()).__module__.partition(".")[0]
            structlog.get_logger("watchdog.daemon").info("event loop", loop=loop)
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
                freeze=True,
            )
            await daemon.run()
    return 0
