"""A stand-in Kubernetes API server on 127.0.0.1 for the pod source's tests: the endpoints the source calls (a
pod, a namespace's pods and their watch, a container's log) over TLS with a bearer token, serving recorded pod
objects (tests/fixtures/k8s/) whose state the test changes: a container that logs, ends, restarts; new pods."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from http_receiver import self_signed

FIXTURES = Path(__file__).parent / "fixtures" / "k8s"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.k8s-test-token-never-shown"

Pod = dict[str, Any]


def fixture_pod(name: str) -> Pod:
    """A recorded pod object of tests/fixtures/k8s (its README says where each came from)."""
    pod: Pod = json.loads((FIXTURES / name).read_text())
    return pod


def rfc3339nano(nanos: int) -> str:
    """`nanos` since the epoch as Go's RFC3339Nano writes it (trailing zeros of the fraction dropped)."""
    seconds, frac = divmod(nanos, 1_000_000_000)
    text = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{frac:09d}".rstrip("0")
    return f"{text}{'.' + fraction if fraction else ''}Z"


@dataclass
class Instance:
    """One run of a container: its id and its log as (time in ns, line with its newline)."""

    container_id: str
    lines: list[tuple[int, bytes]] = field(default_factory=list)
    ended: bool = False


@dataclass
class Served:
    """A pod the server knows: its object and each instance of each container (the last is current)."""

    pod: Pod
    instances: dict[str, list[Instance]] = field(default_factory=dict)
    # containers in CrashLoopBackOff: their last run ended, and no new one has started
    backing_off: set[str] = field(default_factory=set)


class FakeCluster:
    """The API server's state and its handlers; tests change the state with the methods below."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], Served] = {}
        self.changed = asyncio.Condition()
        self.watchers: list[asyncio.Queue[tuple[str, Pod] | None]] = []
        self.log_requests: dict[int, web.Request] = {}
        self.hung_up: set[int] = set()  # log streams to end cleanly at their next wake, sending nothing more
        self.requests: list[str] = []  # path?query of each request, in order
        self.auth_headers: list[str] = []
        self.clock = 1_780_000_000_000_000_000  # 2026-05-28T...Z, in ns
        self.serial = 0

    # -- the test's side ------------------------------------------------------------------------------------------

    def _next_id(self) -> str:
        self.serial += 1
        return f"containerd://{self.serial:064x}"

    def add_pod(self, pod: Pod, *, running: bool = True) -> Served:
        """Serve `pod` (a copy); with `running`, its containers get a fresh running instance each."""
        pod = copy.deepcopy(pod)
        meta = pod["metadata"]
        served = Served(pod)
        statuses = []
        for spec in pod["spec"]["containers"]:
            status = next(
                (s for s in pod.get("status", {}).get("containerStatuses", []) if s["name"] == spec["name"]),
                {"name": spec["name"], "restartCount": 0, "lastState": {}},
            )
            if running:
                cid = self._next_id()
                status.update(containerID=cid, state={"running": {"startedAt": self._stamp()}}, ready=True)
                served.instances[spec["name"]] = [Instance(cid)]
            statuses.append(status)
        pod.setdefault("status", {})["containerStatuses"] = statuses
        if running:
            pod["status"]["phase"] = "Running"
        self.pods[(meta["namespace"], meta["name"])] = served
        self._notify("ADDED", pod)
        return served

    def _stamp(self) -> str:
        return rfc3339nano(self.clock).split(".")[0].rstrip("Z") + "Z"

    def _status(self, served: Served, container: str) -> dict[str, Any]:
        return next(s for s in served.pod["status"]["containerStatuses"] if s["name"] == container)

    def _served(self, namespace: str, name: str) -> Served:
        return self.pods[(namespace, name)]

    async def log(self, namespace: str, name: str, lines: Iterable[bytes], *, container: str | None = None,
                  step: int = 1_000, same_time: int = 1) -> None:  # fmt: skip
        """The container writes `lines` (each ending in a newline): `same_time` lines in a row share a time,
        the times `step` ns apart."""
        served = self._served(namespace, name)
        container = container or served.pod["spec"]["containers"][0]["name"]
        instance = served.instances[container][-1]
        for i, line in enumerate(lines):
            if i % same_time == 0:
                self.clock += step
            instance.lines.append((self.clock, line))
        async with self.changed:
            self.changed.notify_all()

    async def terminate(self, namespace: str, name: str, *, reason: str, exit_code: int,
                        container: str | None = None, phase: str | None = None) -> None:  # fmt: skip
        """The container's current instance ends (`state.terminated`): its log's followers are let go."""
        served = self._served(namespace, name)
        container = container or served.pod["spec"]["containers"][0]["name"]
        status = self._status(served, container)
        status["state"] = {"terminated": {
            "containerID": status["containerID"], "exitCode": exit_code, "reason": reason,
            "startedAt": self._stamp(), "finishedAt": self._stamp()}}  # fmt: skip
        status["ready"] = False
        if phase:
            served.pod["status"]["phase"] = phase
        served.instances[container][-1].ended = True
        async with self.changed:
            self.changed.notify_all()
        self._notify("MODIFIED", served.pod)

    async def back_off(self, namespace: str, name: str, *, container: str | None = None) -> None:
        """The kubelet waits to start the ended container again (CrashLoopBackOff): `state.waiting`, the ended
        instance in `lastState` (its id still `containerID`, as the recorded pod-memory-demo-2 shows)."""
        served = self._served(namespace, name)
        container = container or served.pod["spec"]["containers"][0]["name"]
        status = self._status(served, container)
        status["lastState"] = {"terminated": status["state"]["terminated"]}
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
        served.backing_off.add(container)
        self._notify("MODIFIED", served.pod)

    async def restart(self, namespace: str, name: str, *, container: str | None = None) -> None:
        """The kubelet starts the ended container again: a new instance, `restartCount` + 1, `lastState`."""
        served = self._served(namespace, name)
        container = container or served.pod["spec"]["containers"][0]["name"]
        status = self._status(served, container)
        if container in served.backing_off:
            served.backing_off.discard(container)  # lastState is already the ended instance
        else:
            status["lastState"] = {"terminated": status["state"]["terminated"]}
        cid = self._next_id()
        status.update(containerID=cid, state={"running": {"startedAt": self._stamp()}}, ready=True)
        status["restartCount"] += 1
        served.pod["status"]["phase"] = "Running"
        served.instances[container].append(Instance(cid))
        self._notify("MODIFIED", served.pod)

    async def delete(self, namespace: str, name: str) -> None:
        """The pod is gone."""
        served = self.pods.pop((namespace, name))
        for instances in served.instances.values():
            instances[-1].ended = True
        async with self.changed:
            self.changed.notify_all()
        self._notify("DELETED", served.pod)

    def cut(self) -> int:
        """Drop every open log stream mid-transfer (as a dropped connection would): how many were open."""
        cut = 0
        for request in list(self.log_requests.values()):
            transport = request.transport
            if transport is not None:
                transport.abort()
                cut += 1
        return cut

    def hang_up(self) -> int:
        """Make every open log stream end cleanly at its next wake, what the container wrote since left unsent (a
        stream the API server or the kubelet ends just as its container does): how many were open."""
        self.hung_up.update(self.log_requests)
        return len(self.log_requests)

    def _notify(self, kind: str, pod: Pod) -> None:
        for queue in self.watchers:
            queue.put_nowait((kind, copy.deepcopy(pod)))

    # -- the API's side -------------------------------------------------------------------------------------------

    @web.middleware
    async def auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append(request.path_qs)
        header = request.headers.get("Authorization", "")
        self.auth_headers.append(header)
        if header != f"Bearer {TOKEN}":
            return _status(401, "Unauthorized", "Unauthorized")
        return await handler(request)  # type: ignore[no-any-return]

    async def get_pod(self, request: web.Request) -> web.Response:
        key = (request.match_info["ns"], request.match_info["name"])
        if key not in self.pods:
            return _status(404, "NotFound", f'pods "{key[1]}" not found')
        return web.json_response(self.pods[key].pod)

    async def list_pods(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["ns"]
        match = _matcher(request.query.get("labelSelector"), request.query.get("fieldSelector"))
        pods = [s.pod for (ns, _), s in self.pods.items() if ns == namespace and match(s.pod)]
        if request.query.get("watch") not in ("true", "1"):
            return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        queue: asyncio.Queue[tuple[str, Pod] | None] = asyncio.Queue()
        self.watchers.append(queue)
        try:
            for pod in pods:
                await response.write(json.dumps({"type": "ADDED", "object": pod}).encode() + b"\n")
            timeout = float(request.query.get("timeoutSeconds", "300"))
            with suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    while (event := await queue.get()) is not None:
                        kind, pod = event
                        if pod["metadata"]["namespace"] == namespace and match(pod):
                            await response.write(json.dumps({"type": kind, "object": pod}).encode() + b"\n")
        finally:
            self.watchers.remove(queue)
        await response.write_eof()
        return response

    async def get_log(self, request: web.Request) -> web.StreamResponse:
        key = (request.match_info["ns"], request.match_info["name"])
        if key not in self.pods:
            return _status(404, "NotFound", f'pods "{key[1]}" not found')
        served = self.pods[key]
        query = request.query
        container = query.get("container") or served.pod["spec"]["containers"][0]["name"]
        if container not in served.instances:
            return _status(400, "BadRequest", f"container {container} is not valid for pod {key[1]}")
        instances = served.instances[container]
        if query.get("previous") == "true":
            # backing off, the last run is the previous one
            previous = -1 if container in served.backing_off else -2
            if len(instances) < -previous:
                return _status(400, "BadRequest", f'previous terminated container "{container}" not found')
            instance = instances[previous]
        else:
            instance = instances[-1]
        since = 0
        if "sinceTime" in query:  # the API keeps whole seconds of it
            parsed = dt.datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00"))
            since = int(parsed.timestamp()) * 1_000_000_000
        follow = query.get("follow") == "true"
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        self.log_requests[id(request)] = request
        try:
            sent = 0
            while id(request) not in self.hung_up:
                batch = [(t, line) for t, line in instance.lines[sent:] if t >= since]
                sent = len(instance.lines)
                if batch:
                    await response.write(b"".join(rfc3339nano(t).encode() + b" " + line for t, line in batch))
                if not follow or instance.ended or key not in self.pods:
                    break
                async with self.changed:
                    await self.changed.wait_for(
                        lambda n=sent: len(instance.lines) > n or instance.ended or key not in self.pods
                    )
            await response.write_eof()
        finally:
            self.log_requests.pop(id(request), None)
            self.hung_up.discard(id(request))
        return response


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}  # fmt: skip
    return web.json_response(body, status=code)


def _matcher(labels: str | None, fields: str | None) -> Any:
    wanted = dict(part.split("=", 1) for part in labels.split(",")) if labels else {}
    name = fields.split("=", 1)[1] if fields and fields.startswith("metadata.name=") else None

    def match(pod: Pod) -> bool:
        have = pod["metadata"].get("labels") or {}
        if name is not None and pod["metadata"]["name"] != name:
            return False
        return all(have.get(k) == v for k, v in wanted.items())

    return match


@dataclass
class RunningCluster:
    """A served fake cluster: its state, its URL and a kubeconfig file that points at it."""

    cluster: FakeCluster
    server: str
    kubeconfig: Path
    ca: Path


@asynccontextmanager
async def running_cluster(directory: Path, *, context: str = "kind-test") -> AsyncIterator[RunningCluster]:
    """A FakeCluster served over TLS on 127.0.0.1 until the block ends, and a kubeconfig for it in `directory`
    (context `context`, the CA as certificate-authority-data, the bearer token)."""
    cert, key = self_signed(directory)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    cluster = FakeCluster()
    app = web.Application(middlewares=[cluster.auth])
    app.router.add_get("/api/v1/namespaces/{ns}/pods", cluster.list_pods)
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}", cluster.get_pod)
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}/log", cluster.get_log)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    server = f"https://127.0.0.1:{runner.addresses[0][1]}"
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "test", "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(cert.read_bytes()).decode()}}],
        "users": [{"name": "watcher", "user": {"token": TOKEN}}],
        "contexts": [{"name": context, "context": {"cluster": "test", "user": "watcher", "namespace": "default"}}],
    }))  # fmt: skip
    try:
        yield RunningCluster(cluster, server, kubeconfig, cert)
    finally:
        for queue in cluster.watchers:
            queue.put_nowait(None)
        cluster.cut()
        await runner.cleanup()
