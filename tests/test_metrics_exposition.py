"""A running `watchdog run`'s /metrics: the process's own families (read from /proc of the daemon, not of the
test), and the negotiation of the format (OpenMetrics or text 0.0.4) and of gzip, as real clients ask."""

from __future__ import annotations

import gzip
import os
import platform
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import http_client
import pytest
from daemon_process import DaemonProcess
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

DEADLINE = 30.0
# What Prometheus 2.x sends when it scrapes (scrape/scrape.go, acceptHeader): OpenMetrics first.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
PLAIN = {"Accept-Encoding": "identity"}  # what a client asks for when it cannot unzip
MAX_FDS = 1234  # the daemon's soft RLIMIT_NOFILE, set from here: unlike the test process's own limit


class Running:
    """A `watchdog run` subprocess serving on a free loopback port, with one launch."""

    def __init__(self, tmp: Path) -> None:
        config = tmp / "watchdog.toml"
        log = tmp / "a.log"
        log.write_text("")
        config.write_text(
            f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp / "state"}"\n\n[launches.a]\nlog = "{log}"\n'
        )
        self.started = time.time()
        self.daemon = DaemonProcess(config, deadline=DEADLINE)
        self.url = self.daemon.wait(event="http_listening")["url"] + "metrics"
        self.listening = time.time()
        self.pid = self.daemon.proc.pid
        _soft, hard = resource.prlimit(self.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(self.pid, resource.RLIMIT_NOFILE, (MAX_FDS, hard))

    def get(self, **headers: str) -> http_client.Answer:
        """GET /metrics with these headers: the body as it came on the wire (not decoded)."""
        return http_client.get(self.url, headers=headers, timeout=DEADLINE)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    daemon = Running(tmp_path_factory.mktemp("exposition"))
    try:
        yield daemon
        daemon.daemon.stop()
    finally:
        daemon.daemon.close()


def _values(text: str) -> dict[str, float]:
    """Each sample of a text-format page (no labels) by name."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def _proc_status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_metrics_carry_the_daemons_own_process_families(running: Running) -> None:
    """/metrics has the process collector's families, measured on the daemon's process: its descriptor
    limit (set from here on the daemon only), its open descriptors and resident memory as /proc says them,
    its start time, CPU seconds, and `python_info` of the interpreter that runs it."""
    before = len(os.listdir(f"/proc/{running.pid}/fd"))
    r = running.get(**PLAIN)
    assert r.status_code == 200
    values = _values(r.text)
    # counted around the scrape: a follower's file or connection may open or close in between
    fds = (before, len(os.listdir(f"/proc/{running.pid}/fd")))
    rss = _proc_status(running.pid, "VmRSS") * 1024
    assert values["process_max_fds"] == MAX_FDS
    assert min(fds) - 8 <= values["process_open_fds"] <= max(fds) + 8, (values["process_open_fds"], fds)
    assert 0.5 * rss <= values["process_resident_memory_bytes"] <= 2 * rss
    assert running.started - 1 <= values["process_start_time_seconds"] <= running.listening
    assert values["process_cpu_seconds_total"] > 0
    assert values["process_virtual_memory_bytes"] >= values["process_resident_memory_bytes"]
    (info,) = [
        s for f in text_string_to_metric_families(r.text) for s in f.samples if s.name == "python_info"
    ]
    assert info.labels["version"] == platform.python_version()


def test_metrics_are_text_0_0_4_unless_openmetrics_is_asked_for(running: Running) -> None:
    """A client with no Accept (or `*/*`, or text/plain) gets text 0.0.4, which every Prometheus parses,
    never gzipped unasked, with `Vary` naming what the answer depends on."""
    for headers in ({}, {"Accept": "*/*"}, {"Accept": "text/plain"}):
        r = running.get(**PLAIN, **headers)
        assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8", headers
        assert "content-encoding" not in r.headers
        assert r.headers["vary"] == "Accept, Accept-Encoding"
        assert not r.content.rstrip().endswith(b"# EOF")


@pytest.mark.parametrize(
    "accept",
    ["application/openmetrics-text; version=1.0.0", PROMETHEUS_ACCEPT],
    ids=["openmetrics-1.0.0", "prometheus-2-scrape"],
)
def test_metrics_are_openmetrics_when_asked_for(running: Running, accept: str) -> None:
    """Asked for OpenMetrics (as Prometheus asks first), /metrics answers in it: its Content-Type, the final
    `# EOF`, and the same families and samples as the text format, parsed by the OpenMetrics parser."""
    om = running.get(Accept=accept, **PLAIN)
    text = running.get(**PLAIN)
    assert om.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0; charset=utf-8")
    body = om.text
    assert body.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(body)}
    plain = {f.name: f for f in text_string_to_metric_families(text.text)}
    assert set(families) == set(plain)
    assert len(families) >= 24  # 17 of the watchdog, 7 of the process
    assert families["watchdog_launch_state"].type == "gauge"
    assert families["watchdog_log_lines"].type == "counter"
    assert {s.name for s in families["watchdog_log_lines"].samples} == {"watchdog_log_lines_total"}
    assert {(s.name, tuple(sorted(s.labels.items()))) for s in families["watchdog_launch_state"].samples} == {
        (s.name, tuple(sorted(s.labels.items()))) for s in plain["watchdog_launch_state"].samples
    }


@pytest.mark.parametrize("accept", [None, "application/openmetrics-text; version=1.0.0"])
def test_metrics_are_gzipped_when_the_client_accepts_it(running: Running, accept: str | None) -> None:
    """`Accept-Encoding: gzip` (as Prometheus sends it) gets a gzipped body, `Content-Encoding: gzip`, which
    decompresses to the page of the same format with the same families as the uncompressed one."""
    extra = {"Accept": accept} if accept else {}
    zipped = running.get(**{"Accept-Encoding": "gzip"}, **extra)
    plain = running.get(**PLAIN, **extra)
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["content-type"] == plain.headers["content-type"]
    assert zipped.headers["vary"] == "Accept, Accept-Encoding"
    raw: bytes = zipped.content
    assert raw[:2] == b"\x1f\x8b"
    body = gzip.decompress(raw).decode()
    parse = openmetrics_families if accept else text_string_to_metric_families
    names = {f.name for f in parse(body)}
    assert names == {f.name for f in parse(plain.text)}
    assert "watchdog_launch_state" in names
    assert "process_open_fds" in names
    assert len(raw) < len(plain.content)
