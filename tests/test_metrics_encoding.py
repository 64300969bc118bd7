"""/metrics's own writer of our families (`metrics.exposition`): byte for byte what prometheus_client's encoders
write, in every format and escaping they negotiate, for a running daemon's real families and for any labels and
values."""

from __future__ import annotations

import dataclasses
import gzip
import time
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskStatus
from http_client import Client
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from watchdog.daemon.http import serve_http
from watchdog.daemon.metrics import DaemonStats, Family, Kind, exposition, registry_for, write_families
from watchdog.daemon.supervisor import Daemon, LaunchPlan
from watchdog.follow.follower import LaunchSpec
from watchdog.follow.sources import parse_target
from watchdog.follow.testing import ManualClock
from watchdog.vocabulary import Category

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
DEADLINE = 60.0
LAUNCHES = 48
# Accept headers as scrapers send them: none, Prometheus 2 and 3 (OpenMetrics first), and the other escapings
ACCEPTS = {
    "none": "",
    "prometheus-2": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "prometheus-3": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,"
    "text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
    "text-1.0.0-utf8": "text/plain;version=1.0.0;escaping=allow-utf-8",
    "text-1.0.0-dots": "text/plain;version=1.0.0;escaping=dots",
    "text-1.0.0-values": "text/plain;version=1.0.0;escaping=values",
    "openmetrics-dots": "application/openmetrics-text;version=1.0.0;escaping=dots",
    "openmetrics-2.0.0-values": "application/openmetrics-text;version=2.0.0;escaping=values",
}
# label values that need escaping (backslash, newline, double quote) or are not ASCII, and label names
NASTY = ['quo"te', "back\\slash", "new\nline", "uni\u00e9\u4e2d\U0001f600", 'all\\"\n\\n', "", " "]


def _ours(body: bytes) -> bytes:
    # our families: all of the body before the process's own (their values change from one scrape to the next)
    return body[: body.index(b"# HELP process_")]


def _theirs(body: bytes) -> list[str]:
    # the process's own families without their values: their lines, each sample's up to its value
    return [line.rpartition(" ")[0] if line[:1] != "#" else line for line in body.decode().split("\n")]


def _plans() -> dict[str, LaunchPlan]:
    logs = sorted(CORPUS.glob("*/*.log"))
    step = len(logs) // LAUNCHES
    plans = {}
    for i in range(LAUNCHES):
        name = f"launch-{i}"
        labels = {"team": NASTY[i % len(NASTY)], f"l{i % 3}": NASTY[(i + 1) % len(NASTY)]}
        if i % 5 == 0:
            labels = {}
        plans[name] = LaunchPlan(
            LaunchSpec(name=name, target=parse_target(str(logs[i * step]))), labels=labels
        )
    return plans


async def _serve(daemon: Daemon, *, task_status: TaskStatus[int]) -> None:
    await serve_http(("127.0.0.1", 0), daemon.statuses, daemon.stats, task_status=task_status)


async def test_a_running_daemons_metrics_are_written_as_prometheus_client_writes_them() -> None:
    """A daemon following 48 corpus logs (crashed, ready, starting; labels with quotes, backslashes, newlines,
    non-ASCII and empty values; the clock held still): each /metrics it serves, in every format and escaping,
    plain and gzipped, is prometheus_client's encoding of the same families, byte for byte; and so is the
    writer's for those launches on other hosts, with crashes counted by category."""
    plans = _plans()
    daemon = Daemon(plans, serve=_serve, handle_signals=False, clock=ManualClock(time.time()))
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            await tg.start(daemon.run)
            await daemon.wait_until(lambda s: len(s) == LAUNCHES and all(x["lines_read"] > 0 for x in s))
            await daemon.wait_until(
                lambda s: all(
                    x["bytes_read"] == Path(plans[x["name"]].spec.target.path).stat().st_size for x in s
                )
            )
            bodies = {}
            async with Client(f"http://127.0.0.1:{daemon.port}", raw=True) as client:
                for name, accept in ACCEPTS.items():
                    for encoding in ("identity", "gzip"):
                        r = await client.get(
                            "/metrics", headers={"Accept": accept, "Accept-Encoding": encoding}
                        )
                        assert r.status_code == 200
                        body = r.content
                        if encoding == "gzip":
                            assert r.headers["content-encoding"] == "gzip"
                            body = gzip.decompress(body)
                        bodies[name, encoding] = body
            statuses, stats = daemon.statuses(), daemon.stats()
            tg.cancel_scope.cancel()
    states = {s.verdict.state.value for s in statuses}
    assert {"crashed", "ready"} <= states, states
    assert len({len(s.labels) for s in statuses}) > 1
    for (name, _encoding), body in bodies.items():
        encode = choose_encoder(ACCEPTS[name])[0]
        expected = encode(registry_for(lambda: statuses, lambda: stats))
        assert _ours(body) == _ours(expected), name
        assert _theirs(body[len(_ours(body)) :]) == _theirs(expected[len(_ours(expected)) :]), name
    # the same launches on other hosts (the names need escaping too), crashes counted by category
    hosts = [dataclasses.replace(s, host=NASTY[i % len(NASTY)]) for i, s in enumerate(statuses)]
    counted = DaemonStats(
        crashes={(s.name, s.host, Category.OOM): i for i, s in enumerate(hosts)},
        ssh_connected={h: bool(i % 2) for i, h in enumerate(NASTY)},
        ssh_reconnects=dict.fromkeys(NASTY, 3),
        alerts_sent={"a\\b": 1},
        last_log_activity={s.name: 1.7e9 + i / 7 for i, s in enumerate(hosts)},
    )
    for accept in ACCEPTS.values():
        encode = choose_encoder(accept)[0]
        expected = encode(registry_for(lambda: hosts, lambda: counted))
        assert _ours(exposition(encode, hosts, counted)) == _ours(expected), accept


class _FixedRegistry(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> list[Metric]:
        return self._metrics


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 0, 1, 1e6, 1234567.0, 1e22, -1e-300, 5e-324, 12345678901234567890]),
)
label_values = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(NASTY)


@given(
    samples=st.lists(st.tuples(label_values, label_values, values), max_size=8),
    kind=st.sampled_from(["gauge", "counter"]),
    accept=st.sampled_from(sorted(ACCEPTS.values())),
)
def test_any_labels_and_values_are_written_as_prometheus_client_writes_them(
    samples: list[tuple[str, str, float]], kind: Kind, accept: str
) -> None:
    """Any label values (any Unicode, quotes, backslashes, newlines) and any values (0 and -0, NaN, the
    infinities, the huge and the tiny, integers) of a family with labels and of one without: written as
    prometheus_client writes them, in every format and escaping it negotiates."""
    encode = choose_encoder(accept)[0]
    labelled = Family(kind, "watchdog_x", 'doc "with" \\ and\nnewline', labels=("zeta", "alpha"))
    bare = Family(kind, "watchdog_y", "no labels")
    for a, b, value in samples:
        labelled.add_metric([a, b], value)
    for _, _, value in samples[:1]:
        bare.add_metric([], value)
    ours = [labelled, bare]
    trailer = encode(_FixedRegistry([]))
    expected = encode(_FixedRegistry([f.metric() for f in ours]))
    assert write_families(encode, ours) == expected[: len(expected) - len(trailer)]


def test_a_family_given_too_few_label_values_is_refused() -> None:
    """A sample with fewer label values than its family has labels is an error (prometheus_client would drop
    the labels past the last value: another series), not a sample."""
    family = Family("gauge", "watchdog_x", "doc", labels=("launch", "host"))
    with pytest.raises(ValueError, match="1 label values"):
        family.add_metric(["a"], 1.0)
