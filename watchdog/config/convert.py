"""Using a loaded config: a launch's `LaunchSpec`, a host's `SSHOptions`, and the redacted view of /status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHOptions

from watchdog.config.models import SECRET_SHOWN, Config, launch_spec, node_specs

# -- using the config ------------------------------------------------------------------------------------


def ssh_options(config: Config, host: str) -> SSHOptions:
    """The SSH options of one configured host (for its own `SSHPool`).

    Args:
        config: a validated config.
        host: a key of `config.hosts`.

    Returns:
        Its known_hosts, identity and host-key policy; ~/.ssh/config and the agent as usual. The jump host
        stay on `config.hosts[host]`.
    """
    entry = config.hosts[host]
    from watchdog.follow.sources.sshpool import SSHOptions  # noqa: PLC0415 - asyncssh only when used

    return SSHOptions(
        known_hosts=entry.known_hosts,
        identity=entry.identity,
        accept_new_host_key=entry.accept_new_host_key,
        max_channels=entry.max_channels,
        stat_interval=entry.stat_interval,
        multiplex=entry.ssh_multiplex == "auto",
    )


def redacted(config: Config) -> dict[str, Any]:
    """The resolved config as plain data, every secret replaced: for `check-config` and logs.

    A secret shows as `**********`, followed by where it came from (`(env:NAME)`, `(file:/path)`); each
    launch gains `target`, where its log is read from; durations are in seconds.
    """
    data: dict[str, Any] = config.model_dump(mode="json")
    for loc, reference in config._secret_sources.items():
        *parents, last = loc
        container: Any = data
        for part in parents:
            container = container[part]
        container[last] = f"{SECRET_SHOWN} ({reference})"
    for name, launch in data["launches"].items():
        launch["target"] = str(launch_spec(config, name).target)
        # a multi-node launch: each node's resolved name and where its log is read from
        serving = config.launches[name].serving_node()
        for index, (node, (node_name, _host, spec)) in enumerate(
            zip(launch["nodes"], node_specs(config, name), strict=True)
        ):
            node.update(name=node_name, serve=index == serving, target=str(spec.target))
    return data
