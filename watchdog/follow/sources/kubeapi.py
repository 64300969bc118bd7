"""The few Kubernetes API requests a pod's follower makes (a pod, a selector's pods and their watch, a
container's log), over aiohttp, with the API's errors translated into watchdog's."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio.to_thread

from watchdog.exceptions import AuthError, ConnectionLost, TargetError
from watchdog.follow.sources.kubeconfig import ClusterAccess
from watchdog.httpclient import error_reason, tls_problem

__all__ = ["CONNECT_TIMEOUT", "KubeAPI", "PodGone"]

Json = Mapping[str, Any]

CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 30.0  # a pod's GET or a list; a log or a watch stays open as long as it flows
# The longest line kept whole: a longer one is cut there (the framing cuts it again at its own bound).
MAX_LINE = 1 << 20
# How long a watch asks the server to stay open: it then ends and is opened again, as client-go does.
WATCH_SECONDS = 300


class PodGone(Exception):
    """The pod (or its container's previous instance) is not there: HTTP 404, or 400 for a previous log."""


def _status_message(body: bytes) -> str:
    """The `message` of a Status object the API answers an error with (never a header: no token)."""
    try:
        status = json.loads(body)
    except ValueError:
        return body[:200].decode(errors="replace").strip()
    return str(status.get("message") or status.get("reason") or "") if isinstance(status, Mapping) else ""


class KubeAPI:
    """A session with one API server (`async with` it): its requests share one connection pool and one TLS
    context, and carry the bearer token, which no message, log or repr shows."""

    def __init__(self, access: ClusterAccess) -> None:
        self.access = access
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeAPI:
        built = await anyio.to_thread.run_sync(self.access.tls_context)
        context: ssl.SSLContext | bool = built if built is not None else False
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def server(self) -> str:
        """The API server's URL, as messages name it."""
        return self.access.server

    def _headers(self) -> dict[str, str]:
        token = self.access.bearer()
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    @asynccontextmanager
    async def _request(
        self, path: str, params: Mapping[str, str], *, stream: bool = False
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The response to GET `path`; an error status raised as watchdog's error, a 404 as `PodGone`."""
        assert self._session is not None, "use KubeAPI in `async with`"
        timeout = aiohttp.ClientTimeout(
            total=None if stream else REQUEST_TIMEOUT, sock_connect=CONNECT_TIMEOUT
        )
        try:
            async with self._session.get(
                self.server + path, params=params, headers=self._headers(), timeout=timeout
            ) as response:
                if response.status >= 400:
                    await self._raise(response)
                yield response
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise self._lost(exc) from exc

    def _lost(self, exc: BaseException) -> TargetError:
        """The error a failed request is: a TLS problem is not retried, a lost connection is."""
        if (tls := tls_problem(exc)) is not None:
            return TargetError(
                f"{self.server}: TLS problem: {tls} (the kubeconfig's certificate-authority?)",
                host=self.server,
                reason=f"TLS problem: {tls}",
            )
        if isinstance(exc, TimeoutError):
            return ConnectionLost(host=self.server, reason="the API server did not answer in time")
        return ConnectionLost(host=self.server, reason=error_reason(exc))

    async def _raise(self, response: aiohttp.ClientResponse) -> None:
        message = _status_message(await response.read())
        status = f"HTTP {response.status} {response.reason or ''}".strip()
        what = f"{status}: {message}" if message else status
        if response.status == 404:
            raise PodGone(what)
        if response.status in (401, 403):
            hint = (
                "its token or certificate"
                if response.status == 401
                else "its RBAC (deploy/k8s-pods/rbac.yaml)"
            )
            raise AuthError(
                f"the API server {self.server} ({self.access.where}) refused the request: {what}; check {hint}",
                host=self.server,
                reason=what,
            )
        if response.status >= 500 or response.status == 429:
            raise ConnectionLost(host=self.server, reason=f"the API server answered {what}")
        raise TargetError(f"the API server {self.server} answered {what}", host=self.server, reason=what)

    async def get_pod(self, namespace: str, name: str) -> Json:
        """The Pod object `namespace/name`.

        Raises:
            PodGone: there is no such pod.
        """
        async with self._request(f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}", {}) as response:
            pod: Json = await response.json(content_type=None)
            return pod

    async def list_pods(self, namespace: str, selector: str) -> list[Json]:
        """The pods of `namespace` that the label selector `selector` matches."""
        path = f"/api/v1/namespaces/{quote(namespace)}/pods"
        async with self._request(path, {"labelSelector": selector}) as response:
            body = await response.json(content_type=None)
        items = body.get("items") if isinstance(body, Mapping) else None
        return [item for item in items or [] if isinstance(item, Mapping)]

    def open_watch(
        self, namespace: str, *, selector: str | None = None, name: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[tuple[str, Json]]]:
        """The watch of `namespace`'s pods that `selector` matches (or the pod `name`): (type, pod) for each
        event, first an ADDED for each pod there is, then each change, until the server ends the watch."""
        params = {"watch": "true", "timeoutSeconds": str(WATCH_SECONDS), "allowWatchBookmarks": "false"}
        if selector is not None:
            params["labelSelector"] = selector
        if name is not None:
            params["fieldSelector"] = f"metadata.name={name}"
        return self._events(f"/api/v1/namespaces/{quote(namespace)}/pods", params)

    @asynccontextmanager
    async def _events(
        self, path: str, params: Mapping[str, str]
    ) -> AsyncIterator[AsyncIterator[tuple[str, Json]]]:
        async with self._request(path, params, stream=True) as response:

            async def events() -> AsyncIterator[tuple[str, Json]]:
                async for lines in self._lines(response):
                    for line in lines:
                        try:
                            event = json.loads(line)
                        except ValueError:
                            continue  # a line cut by a dropped connection: the watch is opened again
                        obj = event.get("object") if isinstance(event, Mapping) else None
                        if isinstance(obj, Mapping):
                            yield str(event.get("type")), obj

            yield events()

    def open_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        since: str | None = None,
        follow: bool = True,
        previous: bool = False,
    ) -> AbstractAsyncContextManager[AsyncIterator[list[bytes]]]:
        """The container's log with each line's time (`timestamps=true`), in batches of whole lines as they
        come; at the end, a last line without its newline if the log ended inside one.

        Raises:
            PodGone: no such pod, or (`previous`) no previous instance of the container.
        """
        params = {"timestamps": "true", "container": container}
        if follow:
            params["follow"] = "true"
        if previous:
            params["previous"] = "true"
        if since is not None:
            params["sinceTime"] = since
        return self._log(f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}/log", params, previous)

    @asynccontextmanager
    async def _log(
        self, path: str, params: Mapping[str, str], previous: bool
    ) -> AsyncIterator[AsyncIterator[list[bytes]]]:
        try:
            async with self._request(path, params, stream=True) as response:
                yield self._lines(response, keep_tail=True)
        except TargetError as exc:
            # the API answers 400 for the previous log of a container that has none
            if previous and "HTTP 400" in str(exc.reason):
                raise PodGone(str(exc.reason)) from exc
            raise

    async def _lines(
        self, response: aiohttp.ClientResponse, *, keep_tail: bool = False
    ) -> AsyncIterator[list[bytes]]:
        """Whole lines of a streamed body, a batch per read; a dropped stream raised as `ConnectionLost`."""
        rest = b""
        skipping = False  # within the part of an over-long line past MAX_LINE: dropped to its newline
        try:
            async for data in response.content.iter_any():
                lines = (rest + data).split(b"\n")
                rest = lines.pop()
                if skipping and lines:
                    lines.pop(0)
                    skipping = False
                if skipping:
                    rest = b""
                elif len(rest) > MAX_LINE:
                    lines.append(rest[:MAX_LINE])
                    rest, skipping = b"", True
                if lines:
                    yield [line + b"\n" for line in lines]
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise self._lost(exc) from exc
        if rest and keep_tail:
            yield [rest]
