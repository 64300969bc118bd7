"""Tests for the Kubernetes pod source (watchdog.follow.sources.k8s and its kubeconfig, API and pod-state
modules), against a stand-in API server on 127.0.0.1 serving recorded pod objects (tests/k8s_server.py): no
cluster runs here."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from k8s_server import TOKEN, FakeCluster, RunningCluster, fixture_pod, rfc3339nano, running_cluster

from watchdog.core.analyzer import Analyzer
from watchdog.core.verdict import build_verdict
from watchdog.exceptions import AuthError, UsageError
from watchdog.follow.follower import LaunchFollower
from watchdog.follow.replay import replay_path
from watchdog.follow.sources import open_source, parse_target
from watchdog.follow.sources.base import (
    CaughtUp,
    Chunk,
    Connected,
    Disconnected,
    Ended,
    FileMissing,
    FileRestarted,
    SourceItem,
)
from watchdog.follow.sources.k8s import PodSource
from watchdog.follow.sources.kubeconfig import load_access
from watchdog.follow.sources.podref import PodRef, parse_pod_path, split_pod_target
from watchdog.follow.sources.podstate import (
    LogCursor,
    PodView,
    choose_pod,
    floor_rfc3339,
    parse_quantity,
    parse_timestamp,
    split_log_line,
)
from watchdog.follow.spec import LaunchSpec
from watchdog.profiles.loader import load_engine

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
DEADLINE = 10.0


@pytest.fixture
def anyio_backend() -> str:
    """The pod source runs on asyncio (aiohttp)."""
    return "asyncio"


# -- pure parts -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        pytest.param(b"1970-01-01T00:00:00Z", 0, id="epoch"),
        pytest.param(b"2023-05-06T21:03:58.123456789Z", 1683407038_123456789, id="nanoseconds"),
        pytest.param(b"2023-05-06T21:03:58.1Z", 1683407038_100000000, id="trimmed-fraction"),
        pytest.param(b"2023-05-06T23:03:58+02:00", 1683407038_000000000, id="offset"),
        pytest.param(b"2024-02-29T00:00:00Z", 1709164800_000000000, id="leap-day"),
        pytest.param(b"not a time", None, id="text"),
        pytest.param(b"2023-13-06T21:03:58Z", None, id="month-13"),
    ],
)
def test_timestamps_parse_to_exact_nanoseconds(text: bytes, nanos: int | None) -> None:
    """A log line's RFC 3339 time parses to integer nanoseconds (no microsecond rounding), or to None."""
    assert parse_timestamp(text) == nanos


def test_floor_rfc3339_is_the_whole_second_of_a_time() -> None:
    """`sinceTime` is the cursor's time rounded down to its second, in RFC 3339 UTC."""
    for nanos in (0, 1683407038_999999999, 1709164800_000000001, 4102444799_5):
        text = floor_rfc3339(nanos)
        assert parse_timestamp(text.encode()) == nanos // 10**9 * 10**9
    assert floor_rfc3339(1683407038_999999999) == "2023-05-06T21:03:58Z"


def test_a_timestamped_line_splits_into_its_time_and_text() -> None:
    """`TIME SP text` gives the time and the text with its newline; a line without a time is kept whole."""
    assert split_log_line(b"2026-01-02T03:04:05.5Z INFO ready\n") == (1767323045_500000000, b"INFO ready\n")
    assert split_log_line(b"2026-01-02T03:04:05Z \n") == (1767323045_000000000, b"\n")
    assert split_log_line(b"plain line\n") == (None, b"plain line\n")


@pytest.mark.parametrize(
    ("text", "size"),
    [
        pytest.param("100Mi", 100 * 2**20, id="Mi"),
        pytest.param("1Gi", 2**30, id="Gi"),
        pytest.param("0.5Gi", 2**29, id="fraction"),
        pytest.param("128M", 128 * 10**6, id="M"),
        pytest.param("129e6", 129 * 10**6, id="exponent"),
        pytest.param("1073741824", 2**30, id="bytes"),
        pytest.param("500k", 500_000, id="k"),
        pytest.param("lots", None, id="words"),
    ],
)
def test_memory_quantities_parse_to_bytes(text: str, size: int | None) -> None:
    """A resource quantity (binary, decimal, exponent suffixes) is its bytes."""
    assert parse_quantity(text) == size


def test_a_recorded_oom_killed_pod_reads_as_its_last_end_and_limit() -> None:
    """The docs' memory-demo-2 pod: the previous instance was OOMKilled (137) and the limit is 100Mi."""
    view = PodView.parse(fixture_pod("pod-memory-demo-2.json"))
    assert view.container == "memory-demo-2-ctr"
    assert view.memory_limit == 100 * 2**20
    assert view.last_ended is not None
    assert (view.last_ended.reason, view.last_ended.exit_code, view.last_ended.oom_killed) == (
        "OOMKilled",
        137,
        True,
    )
    assert view.stream is None  # waiting in CrashLoopBackOff: no instance to read


def test_a_recorded_restarted_pod_has_a_new_instance_and_the_old_ones_end() -> None:
    """The kubeshark worker: running with a new container id, restarted once, its old instance OOMKilled."""
    view = PodView.parse(fixture_pod("pod-kubeshark-worker-restarted.json"))
    assert view.running
    assert view.restart_count == 1
    assert view.stream is not None
    assert view.last_ended is not None
    assert view.last_ended.container_id != view.container_id
    assert view.last_ended.describe(view.container) == (
        "container kubeshark-worker terminated: OOMKilled (exit code 137)"
    )
    assert view.memory_limit == 2**30


def test_an_exit_137_said_as_error_is_not_an_oom_kill() -> None:
    """kubernetes#19825's memtest: reason Error with 137 is an exit code, not an OOM kill."""
    view = PodView.parse(fixture_pod("pod-memtest-error.json"))
    assert view.ended is not None
    assert not view.ended.oom_killed
    assert view.ended.exit_code == 137
    assert not view.restarting(view.ended)  # restartPolicy Never


def test_a_selector_follows_the_newest_started_pod() -> None:
    """Of a selector's pods, the newest whose container started, not one being deleted."""
    old = fixture_pod("pod-kubeshark-worker-restarted.json")
    new = json.loads(json.dumps(old))
    new["metadata"].update(name="kubeshark-worker-new", uid="u2", creationTimestamp="2023-05-07T00:00:00Z")
    deleting = json.loads(json.dumps(new))
    deleting["metadata"].update(name="kubeshark-worker-going", uid="u3", creationTimestamp="2023-05-08T00:00:00Z",
                                deletionTimestamp="2023-05-08T00:01:00Z")  # fmt: skip
    chosen = choose_pod([old, new, deleting], None)
    assert chosen is not None
    assert chosen.name == "kubeshark-worker-new"
    assert choose_pod([], None) is None


@pytest.mark.parametrize(
    ("path", "ref"),
    [
        pytest.param("ml/vllm-0", PodRef("ml", pod="vllm-0"), id="pod"),
        pytest.param("ml/vllm-0/server", PodRef("ml", pod="vllm-0", container="server"), id="container"),
        pytest.param("ml?selector=app%3Dvllm", PodRef("ml", selector="app=vllm"), id="selector"),
        pytest.param(
            "ml?selector=app.kubernetes.io/name=vllm,tier!=canary&container=server",
            PodRef("ml", selector="app.kubernetes.io/name=vllm,tier!=canary", container="server"),
            id="selector-container",
        ),
        pytest.param("ml/p?kubeconfig=/etc/kc", PodRef("ml", pod="p", kubeconfig="/etc/kc"), id="kubeconfig"),
    ],
)
def test_pod_paths_parse_and_print_back(path: str, ref: PodRef) -> None:
    """A k8s target's path is a pod or a selector of a namespace; `PodRef.path` writes it back."""
    assert parse_pod_path(path) == ref
    assert parse_pod_path(ref.path) == ref


@pytest.mark.parametrize(
    "path", ["ml", "ml/a/b/c", "ML/pod", "ml/p?selector=a=b", "ml?color=red", "ml?selector="]
)
def test_bad_pod_paths_are_usage_errors(path: str) -> None:
    """A path that is neither form is refused with the forms it takes."""
    with pytest.raises(UsageError, match="NAMESPACE"):
        parse_pod_path(path)


@pytest.mark.parametrize(
    ("text", "context", "path"),
    [
        pytest.param("ml/vllm-0", None, "ml/vllm-0", id="ns-pod"),
        pytest.param("ml/vllm-0/server", None, "ml/vllm-0/server", id="three-parts-are-a-container"),
        pytest.param("prod/ml/vllm-0/server", "prod", "ml/vllm-0/server", id="context"),
        pytest.param("prod/ml/vllm-0/", "prod", "ml/vllm-0", id="context-first-container"),
        pytest.param(
            "arn:aws:eks:eu-west-1:123456789012:cluster/gpu/ml/vllm-0/server",
            "arn:aws:eks:eu-west-1:123456789012:cluster/gpu", "ml/vllm-0/server", id="eks-arn-context",
        ),
        pytest.param("prod/ml?selector=app%3Dvllm", None, None, id="selector-with-a-slash-context"),
    ],
)  # fmt: skip
def test_k8s_targets_split_into_context_and_path(text: str, context: str | None, path: str | None) -> None:
    """Three parts are NAMESPACE/POD/CONTAINER; a context is everything before the last three parts."""
    if path is None:
        with pytest.raises(UsageError):
            split_pod_target(text)
        return
    assert split_pod_target(text) == (context, path)


def test_a_cursor_writes_and_reads_back() -> None:
    """A cursor is its stream, time and count; another source's cursor is not one."""
    cursor = LogCursor(0xABC, 1683407038_123456789, 3)
    assert LogCursor.parse(str(cursor)) == cursor
    assert LogCursor.parse("s=abc;i=12") is None


# -- credentials ------------------------------------------------------------------------------------------------


def _kubeconfig(path: Path, user: dict[str, Any], **cluster: Any) -> Path:
    path.write_text(yaml.safe_dump({
        "current-context": "c", "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443", **cluster}}],
        "users": [{"name": "u", "user": user}], "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))  # fmt: skip
    return path


def test_an_exec_plugin_is_refused_with_what_to_do_instead(tmp_path: Path) -> None:
    """A user that logs in through an exec plugin (EKS, GKE) is a usage error that says to use a token."""
    config = _kubeconfig(
        tmp_path / "kc", {"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}}
    )
    with pytest.raises(UsageError, match=r"exec plugin.*token"):
        load_access(kubeconfig=str(config))


def test_a_kubeconfig_reads_its_files_relative_to_itself_and_hides_the_token(tmp_path: Path) -> None:
    """certificate-authority is relative to the kubeconfig's folder; the token is in no repr."""
    (tmp_path / "ca.pem").write_bytes(b"PEM")
    config = _kubeconfig(tmp_path / "kc", {"token": TOKEN}, **{"certificate-authority": "ca.pem"})
    access = load_access(kubeconfig=str(config), environ={})
    assert (access.server, access.ca, access.bearer(), access.where) == (
        "https://10.0.0.1:6443",
        b"PEM",
        TOKEN,
        "context c",
    )
    assert TOKEN not in repr(access)


def test_in_cluster_reads_the_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no kubeconfig, the pod's service account: its token file (read at each request), CA, namespace."""
    (tmp_path / "token").write_text("t1\n")
    (tmp_path / "ca.crt").write_bytes(b"CA")
    (tmp_path / "namespace").write_text("ml")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    access = load_access(environ=env, service_account=tmp_path)
    assert (access.server, access.ca, access.namespace, access.bearer()) == (
        "https://[fd00::1]:443",
        b"CA",
        "ml",
        "t1",
    )
    (tmp_path / "token").write_text("t2")  # the kubelet rotated it
    assert access.bearer() == "t2"
    with pytest.raises(UsageError, match="not in a cluster"):
        load_access(environ={})


# -- against the stand-in API server ----------------------------------------------------------------------------


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[RunningCluster]:
    """A stand-in API server over TLS with a kubeconfig for it."""
    async with running_cluster(tmp_path) as running:
        yield running


def _source(api: RunningCluster, ref: PodRef) -> PodSource:
    return PodSource(PodRef(**{**ref.__dict__, "kubeconfig": str(api.kubeconfig)}), retry_first=0.01)


async def _until(items: AsyncIterator[SourceItem], done: Any, into: list[SourceItem]) -> None:
    """Collect items into `into` until `done(item)` holds for one (within the deadline)."""
    with anyio.fail_after(DEADLINE):
        async for item in items:
            into.append(item)
            if done(item):
                return
    raise AssertionError(f"the source ended: {into}")


def _data(items: list[SourceItem]) -> bytes:
    return b"".join(i.data for i in items if isinstance(i, Chunk))


def _pod(name: str = "vllm-0", namespace: str = "ml", labels: dict[str, str] | None = None) -> dict[str, Any]:
    pod = fixture_pod("pod-kubeshark-worker-restarted.json")
    pod["metadata"].update(
        name=name, namespace=namespace, uid=f"uid-{name}", labels=labels or {"app": "vllm"}
    )
    pod["status"]["containerStatuses"][0].update(restartCount=0, lastState={})
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "100Mi"
    return pod


@asynccontextmanager
async def _follow(source: PodSource, offset: int = 0, cursor: str | None = None) -> AsyncIterator[Any]:
    async with source.open_follow(offset, cursor) as items:
        yield items


async def test_a_corpus_log_served_as_a_pods_log_gives_the_files_verdict(api: RunningCluster) -> None:
    """A recorded crash served as a pod's log (timestamps and all) is read to the same bytes and verdict."""
    path = CORPUS / "vllm" / "captured-vllm-bad-dtype-cpu.log"
    lines = path.read_bytes().splitlines(keepends=True)
    api.cluster.add_pod(_pod())
    await api.cluster.log("ml", "vllm-0", lines, same_time=3)
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp) and i.offset == path.stat().st_size, got)
    assert _data(got) == path.read_bytes()
    chunks = [i for i in got if isinstance(i, Chunk)]
    assert all(c.data.endswith(b"\n") and c.cursor and c.file == chunks[0].file for c in chunks)
    analyzer = Analyzer(load_engine(None))
    for chunk in chunks:
        analyzer.feed(chunk.data, 0.0)
    analyzer.finish(0.0)
    _, expected = replay_path(path)
    got_verdict = build_verdict(analyzer)
    assert (got_verdict.state, got_verdict.error) == (expected.state, expected.error)


async def test_an_oom_killed_container_with_no_last_words_ends_naming_the_limit(api: RunningCluster) -> None:
    """The kubelet's OOMKilled (exit 137, restartPolicy Never) is an `Ended` with the 100Mi limit, after the log."""
    pod = _pod()
    pod["spec"]["restartPolicy"] = "Never"
    api.cluster.add_pod(pod)
    await api.cluster.log("ml", "vllm-0", [b"INFO loading weights\n"])
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp), got)
        await api.cluster.terminate("ml", "vllm-0", reason="OOMKilled", exit_code=137, phase="Failed")
        await _until(items, lambda i: isinstance(i, Ended), got)
    ended = got[-1]
    assert ended == Ended(
        "container kubeshark-worker terminated: OOMKilled (exit code 137)",
        exit_code=137, oom_killed=True, memory_limit=100 * 2**20,
    )  # fmt: skip
    assert isinstance(got[-2], CaughtUp)
    assert _data(got) == b"INFO loading weights\n"


async def test_a_stream_that_ends_as_its_container_does_leaves_no_line_unread(api: RunningCluster) -> None:
    """A log stream that ends cleanly just as its container ends, before it sent the container's last lines:
    the rest is read from the cursor (the instance's own log, not followed) before the end is said."""
    pod = _pod()
    pod["spec"]["restartPolicy"] = "Never"
    api.cluster.add_pod(pod)
    batch = [f"line {i}\n".encode() for i in range(400)]
    await api.cluster.log("ml", "vllm-0", batch[:200], same_time=3)
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp) and i.offset == len(b"".join(batch[:200])), got)
        assert api.cluster.hang_up() == 1
        await api.cluster.log("ml", "vllm-0", batch[200:], same_time=3)
        await api.cluster.terminate("ml", "vllm-0", reason="Error", exit_code=1, phase="Failed")
        await _until(items, lambda i: isinstance(i, Ended), got)
    assert _data(got).splitlines(keepends=True) == batch
    assert isinstance(got[-2], CaughtUp)
    assert not any(isinstance(i, Disconnected) for i in got)  # a clean end, not a cut
    assert (
        sum("follow=true" not in r for r in api.cluster.requests if "/log" in r) == 1
    )  # the rest, read once


async def test_an_oom_killed_pod_followed_from_its_target_is_crashed_killed_naming_the_limit(
    api: RunningCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`k8s://ml/vllm-0` through the registry and the follower: an OOMKilled pod with no last words is crashed /
    killed, the 100Mi limit in the hint, within 2 s of the kubelet says so."""
    monkeypatch.setenv("KUBECONFIG", str(api.kubeconfig))
    pod = _pod()
    pod["spec"]["restartPolicy"] = "Never"
    api.cluster.add_pod(pod)
    lines = b"INFO 12-02 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\nLoading weights took 3.2 seconds\n"
    await api.cluster.log("ml", "vllm-0", lines.splitlines(keepends=True))
    target = parse_target("k8s://kind-test/ml/vllm-0/kubeshark-worker")
    follower = LaunchFollower(LaunchSpec(name="vllm", target=target), source=open_source(target))
    with follower.updates:
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            with anyio.fail_after(DEADLINE):
                async for _ in follower.updates:  # until the log so far is read
                    if follower.analyzer.lines_read >= 2:
                        break
            await api.cluster.terminate("ml", "vllm-0", reason="OOMKilled", exit_code=137, phase="Failed")
            with anyio.fail_after(2.0):
                async for _ in follower.updates:
                    if follower.concluded is not None:
                        break
            tg.cancel_scope.cancel()
    assert follower.concluded is not None
    verdict = follower.concluded.verdict
    assert verdict.state.value == "crashed"
    assert verdict.error is not None
    assert verdict.error.category == "killed"
    assert "100 MiB (104857600 bytes" in (verdict.error.hint or "")


async def test_a_restart_is_a_new_stream_after_the_old_ones_end(api: RunningCluster) -> None:
    """restartCount grows: the old instance's `Ended` (restarting), `FileRestarted("restarted")`, the new log at 0."""
    api.cluster.add_pod(_pod())
    await api.cluster.log("ml", "vllm-0", [b"first run\n"])
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp), got)
        await api.cluster.terminate("ml", "vllm-0", reason="Error", exit_code=1)
        await _until(items, lambda i: isinstance(i, Ended), got)
        await api.cluster.restart("ml", "vllm-0")
        await api.cluster.log("ml", "vllm-0", [b"second run\n"])
        await _until(items, lambda i: isinstance(i, Chunk) and i.data == b"second run\n", got)
    ended = next(i for i in got if isinstance(i, Ended))
    assert (ended.exit_code, ended.oom_killed) == (1, False)
    restart = got.index(FileRestarted("restarted"))
    first, second = (i for i in got if isinstance(i, Chunk))
    assert got.index(ended) < restart < got.index(second)
    assert (second.offset, first.file != second.file) == (0, True)


async def test_a_restart_seen_late_reads_the_dead_containers_tail(api: RunningCluster) -> None:
    """A log cut before its container died: the rest comes from `previous=true`, then `Ended`, then the new run."""
    api.cluster.add_pod(_pod())
    await api.cluster.log("ml", "vllm-0", [b"one\n"])
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp), got)
        api.cluster.pods[("ml", "vllm-0")].instances["kubeshark-worker"][-1].lines.append(
            (api.cluster.clock + 5, b"RuntimeError: CUDA out of memory\n"))  # fmt: skip
        await api.cluster.terminate("ml", "vllm-0", reason="OOMKilled", exit_code=137)
        await api.cluster.restart("ml", "vllm-0")  # before the source looks: the end is in lastState
        await _until(items, lambda i: isinstance(i, FileRestarted), got)
    assert _data(got) == b"one\nRuntimeError: CUDA out of memory\n"
    ended = next(i for i in got if isinstance(i, Ended))
    assert ended.oom_killed
    assert got.index(ended) < got.index(FileRestarted("restarted"))


async def test_a_new_pod_of_the_selector_is_a_replacement(api: RunningCluster) -> None:
    """A Deployment's new pod (same labels) after the old one ended: `FileRestarted("replaced")`, its log at 0."""
    api.cluster.add_pod(_pod("vllm-abc"))
    await api.cluster.log("ml", "vllm-abc", [b"old pod\n"])
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", selector="app=vllm"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp), got)
        await api.cluster.terminate("ml", "vllm-abc", reason="Completed", exit_code=0)
        await _until(items, lambda i: isinstance(i, Ended), got)
        await api.cluster.delete("ml", "vllm-abc")
        new = _pod("vllm-def")
        new["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z"
        api.cluster.add_pod(new)
        api.cluster.add_pod(_pod("other", labels={"app": "db"}))
        await api.cluster.log("ml", "vllm-def", [b"new pod\n"])
        await _until(items, lambda i: isinstance(i, Chunk) and i.data == b"new pod\n", got)
    assert FileRestarted("replaced") in got
    assert [i.offset for i in got if isinstance(i, Chunk)] == [0, 0]


async def test_a_missing_pod_is_waited_for(api: RunningCluster) -> None:
    """A pod not there yet is `FileMissing`, then read from its start once it runs."""
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, FileMissing), got)
        api.cluster.add_pod(_pod())
        await api.cluster.log("ml", "vllm-0", [b"hello\n"])
        await _until(items, lambda i: isinstance(i, Chunk), got)
    assert got[0] == FileMissing("pod ml/vllm-0")
    assert _data(got) == b"hello\n"


async def test_a_deleted_pod_ends_its_stream_without_evidence(api: RunningCluster) -> None:
    """A pod deleted under its running container (a rollout, a scale-down) is no crash: no `Ended`, `FileMissing`."""
    api.cluster.add_pod(_pod())
    await api.cluster.log("ml", "vllm-0", [b"serving\n"])
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp), got)
        await api.cluster.delete("ml", "vllm-0")
        await _until(items, lambda i: isinstance(i, FileMissing), got)
    assert not any(isinstance(i, Ended) for i in got)


async def test_a_cut_mid_stream_resumes_without_losing_or_repeating_a_line(api: RunningCluster) -> None:
    """Lines four to a nanosecond: a cut resumes by `sinceTime` (whole seconds) and drops what it had seen."""
    api.cluster.add_pod(_pod())
    batch = [f"line {i}\n".encode() for i in range(400)]
    await api.cluster.log("ml", "vllm-0", batch[:200], same_time=4)
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp) and i.offset == len(b"".join(batch[:200])), got)
        assert api.cluster.cut() == 1
        await _until(items, lambda i: isinstance(i, Disconnected), got)
        await api.cluster.log("ml", "vllm-0", batch[200:], same_time=4)
        await _until(items, lambda i: isinstance(i, CaughtUp) and i.offset == len(b"".join(batch)), got)
    lines = _data(got).splitlines(keepends=True)
    assert len(lines) == 400
    assert lines == batch
    assert any(isinstance(i, Connected) for i in got)
    assert any("sinceTime=" in r for r in api.cluster.requests)
    offsets = [(i.offset, i.end) for i in got if isinstance(i, Chunk)]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(offsets))


async def test_a_new_follower_resumes_from_a_chunks_cursor(api: RunningCluster) -> None:
    """What a daemon restart does: a new source opened at a checkpoint's offset and cursor goes on exactly."""
    api.cluster.add_pod(_pod())
    lines = [f"line {i}\n".encode() for i in range(30)]
    await api.cluster.log("ml", "vllm-0", lines[:7], same_time=5)  # lines 5 and 6 share a time...
    first: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp) and i.offset == len(b"".join(lines[:7])), first)
    last = [i for i in first if isinstance(i, Chunk)][-1]
    source = _source(api, PodRef("ml", pod="vllm-0"))
    assert await source.stream_id() == last.file
    await api.cluster.log("ml", "vllm-0", lines[7:10], step=0, same_time=10)  # ...with 7 to 9, written later
    await api.cluster.log("ml", "vllm-0", lines[10:], same_time=5)
    again: list[SourceItem] = []
    async with _follow(source, last.end, last.cursor) as items:
        await _until(items, lambda i: isinstance(i, CaughtUp) and i.offset == len(b"".join(lines)), again)
    assert _data(first) + _data(again) == b"".join(lines)
    assert next(i for i in again if isinstance(i, Chunk)).offset == last.end


async def test_a_cursor_of_a_gone_instance_starts_the_new_one_as_replaced(api: RunningCluster) -> None:
    """A checkpoint's cursor whose container instance is gone: `FileRestarted("replaced")`, the new log from 0."""
    api.cluster.add_pod(_pod())
    await api.cluster.log("ml", "vllm-0", [b"now\n"])
    stale = str(LogCursor(12345, 10**18, 1))
    got: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0")), 999, stale) as items:
        await _until(items, lambda i: isinstance(i, Chunk), got)
    assert got[0] == FileRestarted("replaced")
    assert got[1] == Chunk(0, b"now\n")


async def test_a_refused_token_is_an_auth_error_that_never_shows_it(
    api: RunningCluster, tmp_path: Path
) -> None:
    """A 401 ends the follow with `AuthError` naming the server; the token is in no message."""
    config = yaml.safe_load(api.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "wrong-" + TOKEN
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(yaml.safe_dump(config))
    source = PodSource(PodRef("ml", pod="vllm-0", kubeconfig=str(bad)))
    with pytest.raises(AuthError) as caught:
        await _drain(source)
    assert api.server in str(caught.value)
    assert "401" in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert TOKEN not in repr(caught.value.__dict__)
    assert api.cluster.auth_headers == [f"Bearer wrong-{TOKEN}"]


async def _drain(source: PodSource) -> None:
    async with source.open_follow() as items:
        async for _ in items:
            pass


def test_rfc3339nano_of_the_stand_in_is_what_the_parser_reads() -> None:
    """The stand-in writes times as Go's RFC3339Nano (trailing zeros dropped), which the source reads exactly."""
    for nanos in (1780000000_000000000, 1780000000_000001000, 1780000000_123456789):
        assert parse_timestamp(rfc3339nano(nanos).encode()) == nanos
    assert FakeCluster().clock > 0


@pytest.mark.parametrize("started", [True, False], ids=["restarted", "waiting-to-restart"])
async def test_a_cursor_of_the_previous_instance_reads_its_rest_and_end_first(
    api: RunningCluster, started: bool
) -> None:
    """A cursor taken before the container died (the daemon was down), the kubelet backing off or the container
    started again: `previous_stream_id` names the cursor's instance, and resuming there gives the dead instance's
    unread lines (some at the cursor's time), its `Ended`, then the new instance from 0."""
    api.cluster.add_pod(_pod())
    await api.cluster.log("ml", "vllm-0", [b"one\n", b"two\n"], step=0, same_time=2)
    first: list[SourceItem] = []
    async with _follow(_source(api, PodRef("ml", pod="vllm-0"))) as items:
        await _until(items, lambda i: isinstance(i, Chunk), first)
    (chunk,) = [i for i in first if isinstance(i, Chunk)]
    await api.cluster.log("ml", "vllm-0", [b"three\n"], step=0)  # at the cursor's time, after its lines
    await api.cluster.log("ml", "vllm-0", [b"RuntimeError: CUDA out of memory\n"])
    await api.cluster.terminate("ml", "vllm-0", reason="OOMKilled", exit_code=137)
    await api.cluster.back_off("ml", "vllm-0")
    source = _source(api, PodRef("ml", pod="vllm-0"))
    if started:
        await api.cluster.restart("ml", "vllm-0")
        await api.cluster.log("ml", "vllm-0", [b"second run\n"])
    assert await source.stream_id() not in (chunk.file,)  # a new instance, or none running
    assert await source.previous_stream_id() == chunk.file
    got: list[SourceItem] = []
    async with _follow(source, chunk.end, chunk.cursor) as items:
        await _until(items, lambda i: isinstance(i, Ended), got)
        if not started:
            await api.cluster.restart("ml", "vllm-0")
            await api.cluster.log("ml", "vllm-0", [b"second run\n"])
        await _until(items, lambda i: isinstance(i, Chunk) and i.data == b"second run\n", got)
    assert _data(got) == b"three\nRuntimeError: CUDA out of memory\nsecond run\n"
    ended = next(i for i in got if isinstance(i, Ended))
    assert (ended.oom_killed, ended.restarting) == (True, True)
    restart = got.index(FileRestarted("restarted"))
    chunks = [i for i in got if isinstance(i, Chunk)]
    assert [(c.offset, c.file) for c in chunks[:-1]] == [(chunk.end, chunk.file)] * (len(chunks) - 1)
    assert got.index(ended) < restart < got.index(chunks[-1])
    assert (chunks[-1].offset, chunks[-1].file != chunk.file) == (0, True)
