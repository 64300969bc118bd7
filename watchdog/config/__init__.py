"""The configuration file: its models (and their JSON Schema), loading with secrets, and the reference.

`import watchdog.config` is what `watchdog check-config` needs: it imports no SSH, HTTP or daemon code.
"""

from __future__ import annotations

from watchdog.config.convert import redacted, ssh_options
from watchdog.config.loading import load_config, parse_config
from watchdog.config.models import (
    ALERT_KINDS,
    DEFAULT_MAX_CHANNELS,
    NOTIFIER_KINDS,
    Config,
    DaemonConfig,
    Deadlines,
    HostConfig,
    LaunchConfig,
    NodeConfig,
    NotifierConfig,
    launch_spec,
    node_specs,
)
from watchdog.config.reference import config_json_schema, config_reference_markdown
from watchdog.vocabulary import DEFAULT_LISTEN, DEFAULT_LOG_FORMAT, DEFAULT_STATE_DIR, parse_duration

__all__ = [
    "ALERT_KINDS",
    "DEFAULT_LISTEN",
    "DEFAULT_LOG_FORMAT",
    "DEFAULT_MAX_CHANNELS",
    "DEFAULT_STATE_DIR",
    "NOTIFIER_KINDS",
    "Config",
    "DaemonConfig",
    "Deadlines",
    "HostConfig",
    "LaunchConfig",
    "NodeConfig",
    "NotifierConfig",
    "config_json_schema",
    "config_reference_markdown",
    "launch_spec",
    "load_config",
    "node_specs",
    "parse_config",
    "parse_duration",
    "redacted",
    "ssh_options",
]
