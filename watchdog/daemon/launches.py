"""A launch as the daemon runs it: its plan (`LaunchPlan`, from the config) and what its run holds (`Running`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from watchdog.alerts.senders import Notifier
from watchdog.core.compare import Baseline
from watchdog.core.expectations import LEARN_FACTOR
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.launching import ContainerCommand, LaunchCommand
from watchdog.follow.nodes import Follower
from watchdog.vocabulary import DEFAULT_STOP_GRACE

if TYPE_CHECKING:
    from watchdog.daemon.effects import Effects
    from watchdog.follow.sources import SSHOptions
    from watchdog.store import IncarnationRecord

__all__ = ["Follower", "LaunchControl", "LaunchPlan", "NodePlan", "Running"]


@dataclass(frozen=True)
class NodePlan:
    """One node of a multi-node launch as the daemon runs it: its spec (named LAUNCH@NODE, the key of its
    checkpoint), its configured host and how to reach it, and whether its engine serves."""

    name: str
    spec: LaunchSpec
    host: str = ""  # the configured host's name; "" for this machine
    ssh: SSHOptions | None = None
    serve: bool = False


@dataclass(frozen=True)
class LaunchPlan:
    """One launch as the daemon runs it: its spec, where it is, and who hears of its verdicts."""

    spec: LaunchSpec
    host: str = ""  # the configured host's name; "" for a file on this machine
    ssh: SSHOptions | None = None  # how to reach the host (one pool per host name)
    labels: Mapping[str, str] = field(default_factory=dict)
    alerts: tuple[Notifier, ...] = ()  # who hears of its alerts (each says the kinds in its `on`)
    learned_factor: float | None = LEARN_FACTOR  # phases past this x their usual p95 are stalled; None: off
    # a multi-node launch's nodes (then `spec`, `host` and `ssh` are its serving node's); empty: one source
    nodes: tuple[NodePlan, ...] = ()
    control: LaunchControl | None = None  # launch mode: the command the daemon starts and stops (None: none)


@dataclass(frozen=True)
class LaunchControl:
    """Launch mode in the daemon: the command `watchdog start` starts (its log and pid file are the launch's),
    whether a crash verdict ends its process group, the grace from SIGTERM to SIGKILL, and whether the daemon
    starts it when it starts."""

    command: LaunchCommand | ContainerCommand
    kill_on_crash: bool = False
    stop_grace: float = DEFAULT_STOP_GRACE
    on_boot: bool = False


@dataclass
class Running:
    """A planned launch the daemon runs: its follower (the current one), what was said of it, its backoff."""

    plan: LaunchPlan
    scope: anyio.CancelScope
    follower: Follower | None = None
    since: float = 0.0  # Unix time its follow began (again: a new follower)
    announced: set[tuple[int, str]] = field(default_factory=set)
    typical: dict[str, float] = field(default_factory=dict)  # usual phase durations, from the history
    failures: int = 0
    streak: int = 0  # failures in a row, since its follower last got to read its log: its backoff
    said: str = ""  # the failure last logged (a streak logs its reason once, not at each try)
    note: str = ""
    incarnation: int = 0  # the newest incarnation seen (or stored, at the start)
    began: bool = True  # ... and it began (it is not a log that never came: a relaunch is numbered after it)
    effects: Effects | None = None  # the launch's queue of slow work (store, alerts), done in order
    history: list[IncarnationRecord] | None = None  # its past incarnations, when loaded with the others'
    earlier: tuple[Baseline, ...] = ()  # what the store keeps of them: a relaunch is compared with the last
    started_pid: int | None = None  # launch mode: the pid of the run this daemon started last
    started_container: str | None = None  # ... or the id of the container it started last
    control_lock: anyio.Lock = field(default_factory=anyio.Lock)  # one start or stop at a time
