"""Prometheus metrics, built at scrape time from the launches' status snapshots and the daemon's counters
(docs/contracts.md, "Metrics": so they never disagree with /status; labels bounded)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from watchdog.core.facts import number
from watchdog.core.lifecycle import REQUEST_ERRORS
from watchdog.core.verdict import Status
from watchdog.vocabulary import Category, State, version

GIB = 1 << 30  # the engines' "GB" of free memory are GiB (SGLang and vLLM divide by 1 << 30)
_ENGINE_UNKNOWN = "unknown"  # the engine label of a launch whose engine is not detected yet
_LAUNCH_LABELS = ("launch", "host")
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Statuses = Callable[[], list[Status]]


@dataclass(frozen=True)
class DaemonStats:
    """The counters the daemon keeps itself (a snapshot: the daemon makes a new one per scrape)."""

    crashes: Mapping[tuple[str, str, Category], int] = field(default_factory=dict)  # (launch, host, category)
    ssh_connected: Mapping[str, bool] = field(default_factory=dict)  # host -> connected now
    ssh_reconnects: Mapping[str, int] = field(default_factory=dict)  # host -> reconnects since start
    alerts_sent: Mapping[str, int] = field(default_factory=dict)  # notifier -> alerts delivered
    alerts_failed: Mapping[str, int] = field(default_factory=dict)  # notifier -> deliveries given up
    outbox_depth: int = 0  # alerts waiting to be delivered
    last_log_activity: Mapping[str, float] = field(default_factory=dict)  # launch -> Unix time of last bytes
    version: str = field(default_factory=version)  # for `watchdog_build_info`


class StatusCollector(Collector):
    """A prometheus_client collector whose families are built from `statuses()` and `stats()` per scrape.

    Args:
        statuses: the launches' status snapshots (`Daemon.statuses`).
        stats: the daemon's counters.
    """

    def __init__(self, statuses: Statuses, stats: Callable[[], DaemonStats]) -> None:
        self._statuses = statuses
        self._stats = stats

    def collect(self) -> Iterable[Metric]:
        """The families of one scrape."""
        return families(self._statuses(), self._stats())


@functools.cache
def _own_collectors() -> tuple[Collector, ...]:
    """The daemon process's own families, made once and shared by every scrape's registry: `process_*`
    (resident memory, open and maximum descriptors, start time, CPU seconds; read from /proc at each scrape)
    and `python_info` (the interpreter's version, fixed)."""
    return (ProcessCollector(registry=None), PlatformCollector(registry=None))


def registry_for(statuses: Statuses, stats: Callable[[], DaemonStats]) -> CollectorRegistry:
    """A fresh registry holding a `StatusCollector` and the process's own collectors (`process_*`,
    `python_info`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(statuses, stats))
    for collector in _own_collectors():
        registry.register(collector)
    return registry


def extra_label_names(statuses: Iterable[Status]) -> list[str]:
    """The names of the launches' own labels, all launches together, sorted: `watchdog_launch_info`'s labels
    after launch and host (a family has one label set; a launch without one of them has it empty, which
    Prometheus stores as no label). A name that is not a label name or is launch or host is left out (the
    config refuses those already)."""
    names: set[str] = set()
    for status in statuses:
        names.update(name for name, _ in status.labels)
    return sorted(
        n for n in names if _LABEL_NAME.match(n) and not n.startswith("__") and n not in _LAUNCH_LABELS
    )


def families(statuses: list[Status], stats: DaemonStats) -> list[Metric]:
    """Every metric family of DESIGN.md from one set of snapshots and counters (pure)."""
    launch_labels = list(_LAUNCH_LABELS)
    extra = extra_label_names(statuses)
    info = GaugeMetricFamily(
        "watchdog_launch_info",
        "Always 1, one series per launch: its own labels (from its config), to join on launch and host.",
        labels=[*launch_labels, *extra],
    )
    state = GaugeMetricFamily(
        "watchdog_launch_state",
        "Current state of each launch: 1 for the state it is in, 0 for the others.",
        labels=[*launch_labels, "engine", "state"],
    )
    phase = GaugeMetricFamily(
        "watchdog_phase_seconds",
        "Seconds the launch's current incarnation spent in each startup phase (the current one up to now).",
        labels=[*launch_labels, "phase"],
    )
    to_ready = GaugeMetricFamily(
        "watchdog_time_to_ready_seconds",
        "Seconds from the start of the launch to ready (present once it is ready).",
        labels=launch_labels,
    )
    progress = GaugeMetricFamily(
        "watchdog_progress_ratio",
        "Progress of a startup step (weights, graphs, ...) from 0 to 1.",
        labels=[*launch_labels, "kind"],
    )
    avail = GaugeMetricFamily(
        "watchdog_avail_mem_after_weights_bytes",
        "GPU memory the engine reported available after loading the weights.",
        labels=launch_labels,
    )
    kv_tokens = GaugeMetricFamily(
        "watchdog_kv_cache_tokens",
        "Tokens the KV cache holds, as the engine reported it.",
        labels=launch_labels,
    )
    request_errors = CounterMetricFamily(
        "watchdog_request_errors",
        "Errors after ready that the server served on (one request's each, not a crash), in the current "
        "incarnation.",
        labels=launch_labels,
    )
    lines = CounterMetricFamily("watchdog_log_lines", "Log lines read.", labels=launch_labels)
    log_bytes = CounterMetricFamily("watchdog_log_bytes", "Log bytes read.", labels=launch_labels)
    activity = GaugeMetricFamily(
        "watchdog_last_log_activity_timestamp_seconds",
        "Unix time the launch's log last grew.",
        labels=launch_labels,
    )
    seen: set[tuple[str, str]] = set()
    for status in statuses:
        key = (status.name, status.host)
        if key in seen:  # a duplicate series would make the whole scrape invalid
            continue
        seen.add(key)
        labels = list(key)
        own = dict(status.labels)
        info.add_metric([*labels, *(own.get(name, "") for name in extra)], 1.0)
        v = status.verdict
        engine = v.engine or _ENGINE_UNKNOWN
        for s in State:
            state.add_metric([*labels, engine, s.value], 1.0 if s is v.state else 0.0)
        for name, seconds in v.phase_seconds(status.elapsed).items():
            phase.add_metric([*labels, name.value], seconds)
        if v.time_to_ready is not None:
            to_ready.add_metric(labels, v.time_to_ready)
        for bar in sorted(v.progress, key=lambda p: p.name):
            if bar.total > 0:
                progress.add_metric([*labels, bar.name], min(max(bar.done / bar.total, 0.0), 1.0))
        gb = number(v.fact("avail_mem_after_weights_gb"))
        if gb is not None:
            avail.add_metric(labels, gb * GIB)
        tokens = number(v.fact("kv_cache_tokens"))
        if tokens is not None:
            kv_tokens.add_metric(labels, tokens)
        # 0 from the start: a counter that appears only at its first error hides that first increase
        request_errors.add_metric(labels, number(v.fact(REQUEST_ERRORS)) or 0.0)
        lines.add_metric(labels, float(v.lines_read))
        log_bytes.add_metric(labels, float(v.bytes_read))
        last = number(stats.last_log_activity.get(key[0]))
        if last is not None:
            activity.add_metric(labels, last)

    crashes = CounterMetricFamily(
        "watchdog_crashes",
        "Crash verdicts seen, by root-cause category.",
        labels=["launch", "host", "category"],
    )
    for (launch, host, category), n in sorted(stats.crashes.items()):
        crashes.add_metric([launch, host, category], float(n))
    connected = GaugeMetricFamily(
        "watchdog_ssh_connected", "1 while the SSH connection to the host is up.", labels=["host"]
    )
    for host, up in sorted(stats.ssh_connected.items()):
        connected.add_metric([host], 1.0 if up else 0.0)
    reconnects = CounterMetricFamily(
        "watchdog_ssh_reconnects",
        "SSH connections to the host made again after one was lost.",
        labels=["host"],
    )
    for host, n in sorted(stats.ssh_reconnects.items()):
        reconnects.add_metric([host], float(n))
    sent = CounterMetricFamily("watchdog_alerts_sent", "Alerts delivered.", labels=["notifier"])
    for notifier, n in sorted(stats.alerts_sent.items()):
        sent.add_metric([notifier], float(n))
    failed = CounterMetricFamily(
        "watchdog_alerts_failed", "Alert deliveries given up after their retries.", labels=["notifier"]
    )
    for notifier, n in sorted(stats.alerts_failed.items()):
        failed.add_metric([notifier], float(n))
    outbox = GaugeMetricFamily("watchdog_outbox_depth", "Alerts waiting to be delivered.")
    outbox.add_metric([], float(stats.outbox_depth))
    build = GaugeMetricFamily("watchdog_build_info", "The running watchdog's version.", labels=["version"])
    build.add_metric([stats.version], 1.0)
    return [
        info,
        state,
        phase,
        to_ready,
        crashes,
        progress,
        avail,
        kv_tokens,
        request_errors,
        lines,
        log_bytes,
        activity,
        connected,
        reconnects,
        sent,
        failed,
        outbox,
        build,
    ]
