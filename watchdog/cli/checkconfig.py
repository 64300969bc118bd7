"""`watchdog check-config FILE` and `watchdog config-schema`: validate and explain a config, print its schema."""

from __future__ import annotations

import json
import os
import posixpath
import sys
from collections.abc import Sized
from pathlib import Path

from watchdog.config.convert import redacted
from watchdog.config.environment import ENVIRONMENT_SOURCE, set_by_environment
from watchdog.config.loading import load_config
from watchdog.config.models import Config
from watchdog.config.reference import config_json_schema, config_reference_markdown
from watchdog.exceptions import ConfigError
from watchdog.vocabulary import EXIT_CONFIG, EXIT_UNREACHABLE


def check_config_main(path: Path | str | None) -> int:
    """`watchdog check-config [FILE]`: validate, print the resolved config (redacted) as JSON.

    The environment's `LLW_` variables override the file's keys (without a file, they are the config);
    standard error names each key they set, and the summary counts them.

    Returns:
        0 valid (warnings, such as files missing here, on stderr); 78 invalid; 69 valid, but the daemon
        would never follow a host whose key is not in its known_hosts file.
    """
    try:
        config = load_config(None if path is None else Path(path))
    except ConfigError as exc:
        print(f"watchdog: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if path is None:
        path = ENVIRONMENT_SOURCE
    print(json.dumps(redacted(config), indent=2))
    from_environment = set_by_environment(config)
    for key, variable in from_environment.items():
        print(f"watchdog: {key}: set by the environment ({variable})", file=sys.stderr)
    refused, unreadable = host_key_problems(config)
    warnings = config_warnings(config) + unreadable
    for warning in warnings:
        print(f"watchdog: warning: {path}: {warning}", file=sys.stderr)
    for problem in refused.values():
        print(f"watchdog: {path}: {problem}", file=sys.stderr)
    said = f" (with {_count(warnings, 'warning')}: read them above)" if warnings else ""
    overridden = f", {_count(from_environment, 'key')} from the environment" if from_environment else ""
    counts = (
        f"{_count(config.launches, 'launch')}, {_count(config.hosts, 'host')}, "
        f"{_count(config.notifiers, 'notifier')}{overridden}{said}"
    )
    if refused:
        names = ", ".join(refused)
        print(
            f"watchdog: {path}: valid, but the daemon would refuse {_count(refused, 'host')} ({names}): "
            f"{'its key is' if len(refused) == 1 else 'their keys are'} not in the known_hosts file (read "
            f"above); {counts}",
            file=sys.stderr,
        )
        return EXIT_UNREACHABLE
    print(f"watchdog: {path}: valid: {counts}", file=sys.stderr)
    return 0


def _count(items: Sized, word: str) -> str:
    suffix = "es" if word.endswith("h") else "s"
    return f"{len(items)} {word}{'' if len(items) == 1 else suffix}"


def config_warnings(config: Config) -> list[str]:
    """What looks wrong but may be right: unused entries, files missing on this machine."""
    warnings: list[str] = []
    used_hosts: set[str | None] = set(_launch_hosts(config))
    used_hosts |= {host.jump_host for host in config.hosts.values()}
    used_notifiers = {name for launch in config.launches.values() for name in launch.notify}
    warnings += [f"hosts.{name}: no launch uses this host" for name in config.hosts if name not in used_hosts]
    warnings += [
        f"notifiers.{name}: no launch notifies it" for name in config.notifiers if name not in used_notifiers
    ]
    if not config.launches:
        warnings.append("no [launches.NAME] table: the daemon will follow nothing")
    files = [("daemon.tls_cert", config.daemon.tls_cert), ("daemon.tls_key", config.daemon.tls_key)]
    for name, host in config.hosts.items():
        files.append((f"hosts.{name}.identity", host.identity))
        if not host.accept_new_host_key:
            files.append((f"hosts.{name}.known_hosts", host.known_hosts))
    for key, value in files:
        if value is not None and not os.access(os.path.expanduser(value), os.R_OK):
            warnings.append(f"{key}: {value} cannot be read here")
    for name, launch in config.launches.items():
        sources = [(f"launches.{name}", launch.host, launch.log)]
        sources += [(f"launches.{name}.nodes[{i}]", n.host, n.log) for i, n in enumerate(launch.nodes)]
        for where, on_host, log in sources:
            if on_host is None and log is not None and not os.path.isdir(posixpath.dirname(log)):
                warnings.append(f"{where}.log: directory {posixpath.dirname(log)} does not exist (yet)")
    return warnings


def _launch_hosts(config: Config) -> set[str]:
    # the hosts the launches (and their nodes) read from
    hosts = {launch.host for launch in config.launches.values() if launch.host is not None}
    return hosts | {n.host for launch in config.launches.values() for n in launch.nodes if n.host is not None}


def host_key_problems(config: Config) -> tuple[dict[str, str], list[str]]:
    """The hosts the daemon would refuse, each with what to do, and warnings about unreadable known_hosts
    files. Refused: a host a launch uses (or jumps through), not accepting a new key, whose known_hosts file,
    readable here, has no key for its address and port (an ~/.ssh/config alias is looked up as written)."""
    used = _launch_hosts(config)
    jumps = {config.hosts[name].jump_host for name in used if name in config.hosts}
    used |= {name for name in jumps if name is not None}
    refused: dict[str, str] = {}
    warnings: list[str] = []
    for name, host in config.hosts.items():
        known_hosts = host.known_hosts
        if name not in used or host.accept_new_host_key or known_hosts is None:
            continue
        path = os.path.expanduser(known_hosts)
        if not os.access(path, os.R_OK):
            continue  # warned of as a file that cannot be read here
        import asyncssh  # noqa: PLC0415 - only for a config with hosts

        address, port = host.address or name, host.port or 22
        try:
            keys = asyncssh.read_known_hosts(path).match(address, "", port)[0]
        except (OSError, ValueError) as exc:
            warnings.append(
                f"hosts.{name}.known_hosts: {known_hosts} cannot be read as a known_hosts file: {exc}"
            )
            continue
        if keys:
            continue
        flag = "" if port == 22 else f"-p {port} "
        refused[name] = (
            f"hosts.{name}.known_hosts: {known_hosts} has no key for host {name} ({address}:{port}): the "
            "daemon would refuse the host. Check its fingerprint with the host's owner, then record it with "
            f"`ssh-keyscan {flag}{address} >> {known_hosts}`, or set hosts.{name}.accept_new_host_key = true"
        )
    return refused, warnings


def config_schema_main(*, markdown: bool = False) -> int:
    """`watchdog config-schema [--markdown]`: print the config file's JSON Schema (or the key tables); 0."""
    print(config_reference_markdown() if markdown else json.dumps(config_json_schema(), indent=2))
    return 0
