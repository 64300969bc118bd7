"""Probes beside the log: is the process alive, what does the health endpoint answer."""

from __future__ import annotations

from watchdog.follow.probes.health import HealthProbe, parse_health_url
from watchdog.follow.probes.process import (
    LocalProcessProbe,
    ProcessProbe,
    SSHProcessProbe,
    wait_until_gone,
)

__all__ = [
    "HealthProbe",
    "LocalProcessProbe",
    "ProcessProbe",
    "SSHProcessProbe",
    "parse_health_url",
    "wait_until_gone",
]
