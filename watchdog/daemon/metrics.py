"""Prometheus metrics, built at scrape time from the launches' status snapshots and the daemon's counters
(docs/contracts.md, "Metrics": so they never disagree with /status; labels bounded), and their exposition.

Our families are written by `exposition`, not sample by sample by prometheus_client: its encoders make a
`Sample` and a dict per sample and check and escape every label name of every sample (40 ms of CPU a scrape of
200 launches, half of it theirs). What they write for a family is taken from their own output for one sample
(`_layout`: the header lines and the sample line's format), so the text stays theirs in every format and
escaping they negotiate; only the label values (one escaping pass, remembered per scrape) and the numbers
(`floatToGoString`) are written here, as they write them. The process's own families stay theirs.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString as _float_to_go

from watchdog.core.facts import number
from watchdog.core.lifecycle import REQUEST_ERRORS
from watchdog.core.verdict import Status
from watchdog.vocabulary import Category, State, version

GIB = 1 << 30  # the engines' "GB" of free memory are GiB (SGLang and vLLM divide by 1 << 30)
_ENGINE_UNKNOWN = "unknown"  # the engine label of a launch whose engine is not detected yet
_LAUNCH_LABELS = ("launch", "host")
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Statuses = Callable[[], list[Status]]
# prometheus_client's encoder, as `choose_encoder` picks it for the Accept header
Encoder = Callable[[Collector], bytes]
Kind = Literal["gauge", "counter"]

_written: Callable[[float], str] = _float_to_go  # a value as prometheus_client writes it (untyped there)


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


class Family:
    """One of our metric families: its samples as their label values (in `labels`' order) and value, what a
    prometheus_client family holds without a `Sample` and a dict per sample. `metric()` is that family."""

    __slots__ = ("documentation", "kind", "labels", "name", "samples")

    def __init__(self, kind: Kind, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        self.kind = kind
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.samples: list[tuple[Sequence[str], float]] = []

    def add_metric(self, values: Sequence[str], value: float) -> None:
        """A sample: its label values, one per label, in `labels`' order."""
        if len(values) != len(self.labels):  # prometheus_client would drop the labels past the shorter one
            raise ValueError(f"{self.name}: {len(values)} label values for the labels {self.labels}")
        self.samples.append((values, value))

    def metric(self) -> Metric:
        """The same family as prometheus_client's."""
        family = CounterMetricFamily if self.kind == "counter" else GaugeMetricFamily
        made = family(self.name, self.documentation, labels=self.labels)
        for values, value in self.samples:
            made.add_metric(values, value)
        return made


class _Families(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self._metrics


_PLACE = "\x00{}\x00"  # a label value of the probe sample: no encoder escapes it, no name holds it


def _layout(encode: Encoder, family: Family, trailer: bytes) -> tuple[str, str] | None:
    """What `encode` writes for `family`: its header (the `# HELP`, `# TYPE`... lines) and its sample line as a
    `str.format` string of the escaped label values in `labels`' order and the value as `floatToGoString` writes
    it; taken from `encode`'s own output for one sample whose label values are placeholders. None when that
    output does not read as expected (another version of prometheus_client): then it writes everything.
    `trailer`: what `encode` ends every exposition with (OpenMetrics' "# EOF")."""
    probe = Family(family.kind, family.name, family.documentation, family.labels)
    probe.add_metric([_PLACE.format(i) for i in range(len(family.labels))], 0.0)
    text = encode(_Families([probe.metric()]))
    if not text.endswith(trailer):
        return None
    head, _, line = text[: len(text) - len(trailer)].decode().removesuffix("\n").rpartition("\n")
    if not head or not line.endswith(" 0.0") or not all(h.startswith("#") for h in head.split("\n")):
        return None
    line = line.removesuffix(" 0.0").replace("{", "{{").replace("}", "}}")
    for i in range(len(family.labels)):
        if line.count(_PLACE.format(i)) != 1:
            return None
        line = line.replace(_PLACE.format(i), f"{{{i}}}")
    return head + "\n", f"{line} {{{len(family.labels)}}}\n"


class _Escaped(dict[str, str]):
    # label values escaped as both formats escape them (backslash, newline, double quote), once a scrape each
    def __missing__(self, value: str) -> str:
        escaped = self[value] = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
        return escaped


class _Numbers(dict[float, str]):
    # floatToGoString of each value, once a scrape each (1 and 0 are most of the samples); a 0 is found by its
    # sign alone (0.0 and -0.0 are one key, written apart), `_ZEROS`
    def __missing__(self, value: float) -> str:
        written = self[value] = _written(value)
        return written


_ZEROS = {1.0: _written(0.0), -1.0: _written(-0.0)}  # by math.copysign(1.0, zero)


def write_families(encode: Encoder, ours: Iterable[Family]) -> bytes | None:
    """`ours` as `encode` (`choose_encoder`'s) writes them, but its trailer (OpenMetrics' "# EOF"); None when
    its output for them cannot be read as `_layout` expects."""
    out: list[str] = []
    escaped, numbers = _Escaped(), _Numbers()
    values = escaped.__getitem__
    trailer = encode(_Families([]))
    for family in ours:
        layout = _layout(encode, family, trailer)
        if layout is None:
            return None
        head, line = layout
        out.append(head)
        sample = line.format
        for labels, value in family.samples:
            number = numbers[value] if value else _ZEROS[math.copysign(1.0, value)]
            out.append(sample(*map(values, labels), number))
    return "".join(out).encode()


def exposition(encode: Encoder, statuses: list[Status], stats: DaemonStats) -> bytes:
    """The /metrics body `encode` (`choose_encoder`'s) writes for `registry_for(statuses, stats)`: our
    families by `write_families` (see the module's docstring), then the process's own by `encode`."""
    ours = write_families(encode, families(statuses, stats))
    if ours is None:
        return encode(registry_for(lambda: statuses, lambda: stats))
    return ours + encode(_own_registry())


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
        return [family.metric() for family in families(self._statuses(), self._stats())]


@functools.cache
def _own_collectors() -> tuple[Collector, ...]:
    """The daemon process's own families, made once and shared by every scrape's registry: `process_*`
    (resident memory, open and maximum descriptors, start time, CPU seconds; read from /proc at each scrape)
    and `python_info` (the interpreter's version, fixed)."""
    return (ProcessCollector(registry=None), PlatformCollector(registry=None))


@functools.cache
def _own_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    for collector in _own_collectors():
        registry.register(collector)
    return registry


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


def families(statuses: list[Status], stats: DaemonStats) -> list[Family]:
    """Every metric family of DESIGN.md from one set of snapshots and counters (pure)."""
    launch_labels = list(_LAUNCH_LABELS)
    extra = extra_label_names(statuses)
    info = Family(
        "gauge",
        "watchdog_launch_info",
        "Always 1, one series per launch: its own labels (from its config), to join on launch and host.",
        labels=[*launch_labels, *extra],
    )
    state = Family(
        "gauge",
        "watchdog_launch_state",
        "Current state of each launch: 1 for the state it is in, 0 for the others.",
        labels=[*launch_labels, "engine", "state"],
    )
    phase = Family(
        "gauge",
        "watchdog_phase_seconds",
        "Seconds the launch's current incarnation spent in each startup phase (the current one up to now).",
        labels=[*launch_labels, "phase"],
    )
    to_ready = Family(
        "gauge",
        "watchdog_time_to_ready_seconds",
        "Seconds from the start of the launch to ready (present once it is ready).",
        labels=launch_labels,
    )
    progress = Family(
        "gauge",
        "watchdog_progress_ratio",
        "Progress of a startup step (weights, graphs, ...) from 0 to 1.",
        labels=[*launch_labels, "kind"],
    )
    avail = Family(
        "gauge",
        "watchdog_avail_mem_after_weights_bytes",
        "GPU memory the engine reported available after loading the weights.",
        labels=launch_labels,
    )
    kv_tokens = Family(
        "gauge",
        "watchdog_kv_cache_tokens",
        "Tokens the KV cache holds, as the engine reported it.",
        labels=launch_labels,
    )
    request_errors = Family(
        "counter",
        "watchdog_request_errors",
        "Errors after ready that the server served on (one request's each, not a crash), in the current "
        "incarnation.",
        labels=launch_labels,
    )
    lines = Family("counter", "watchdog_log_lines", "Log lines read.", labels=launch_labels)
    log_bytes = Family("counter", "watchdog_log_bytes", "Log bytes read.", labels=launch_labels)
    activity = Family(
        "gauge",
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

    crashes = Family(
        "counter",
        "watchdog_crashes",
        "Crash verdicts seen, by root-cause category.",
        labels=["launch", "host", "category"],
    )
    for (launch, host, category), n in sorted(stats.crashes.items()):
        crashes.add_metric([launch, host, category], float(n))
    connected = Family(
        "gauge", "watchdog_ssh_connected", "1 while the SSH connection to the host is up.", labels=["host"]
    )
    for host, up in sorted(stats.ssh_connected.items()):
        connected.add_metric([host], 1.0 if up else 0.0)
    reconnects = Family(
        "counter",
        "watchdog_ssh_reconnects",
        "SSH connections to the host made again after one was lost.",
        labels=["host"],
    )
    for host, n in sorted(stats.ssh_reconnects.items()):
        reconnects.add_metric([host], float(n))
    sent = Family("counter", "watchdog_alerts_sent", "Alerts delivered.", labels=["notifier"])
    for notifier, n in sorted(stats.alerts_sent.items()):
        sent.add_metric([notifier], float(n))
    failed = Family(
        "counter",
        "watchdog_alerts_failed",
        "Alert deliveries given up after their retries.",
        labels=["notifier"],
    )
    for notifier, n in sorted(stats.alerts_failed.items()):
        failed.add_metric([notifier], float(n))
    outbox = Family("gauge", "watchdog_outbox_depth", "Alerts waiting to be delivered.")
    outbox.add_metric([], float(stats.outbox_depth))
    build = Family("gauge", "watchdog_build_info", "The running watchdog's version.", labels=["version"])
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
