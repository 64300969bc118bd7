"""Follow a Kubernetes pod's container through the API server: its log (resumed by time after a cut), each
restart and each new pod of a selector as a new stream, and how each instance ended (OOMKilled, exit code).

A stream is one container instance (a pod's uid and the container's id). Its chunks carry a cursor (the time
of their last line and how many lines at that time were delivered): the API resumes a log only by whole
seconds (`sinceTime`), so a resume asks from the cursor's second and drops the lines up to the cursor. A cursor
of the container's previous instance (restarted while the daemon was down) resumes in that instance's log
(`previous=true`), its end said, before the current instance is read as a new stream (`KeepsPrevious`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.to_thread

from watchdog.backoff import FULL_JITTER, backoff
from watchdog.exceptions import ConnectionLost, UsageError
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
from watchdog.follow.sources.kubeapi import KubeAPI, PodGone
from watchdog.follow.sources.kubeconfig import ClusterAccess, load_access
from watchdog.follow.sources.podref import PodRef, parse_pod_path
from watchdog.follow.sources.podstate import (
    ContainerEnd,
    LogCursor,
    PodView,
    choose_pod,
    floor_rfc3339,
    split_log_line,
)

if TYPE_CHECKING:
    from watchdog.follow.sources.sshpool import SSHPool
    from watchdog.follow.sources.target import Target

__all__ = ["PodSource", "source"]

RETRY_FIRST = 0.1
RETRY_CAP = 5.0
# A log that ends while its container still runs (the API server or a proxy closed it, or the kubelet has not
# yet reported the container's end) is opened again after this pause, doubled per such end in a row up to
# REOPEN_CAP: an end is said within about a second of the kubelet's report.
REOPEN_FIRST = 0.2

REOPEN_CAP = 1.0
# The end of an instance whose pod was deleted: said by no `Ended`
_GONE = ContainerEnd("", "deleted", None)


@dataclass
class _Position:
    """Where the current stream was read to: byte offset, and time and count of lines at it (the cursor)."""

    stream: int
    offset: int = 0
    nanos: int | None = None
    count: int = 0

    def cursor(self) -> str:
        return str(LogCursor(self.stream, self.nanos or 0, self.count))


class _Skip:
    """Drops the lines a resumed log repeats: those before the cursor's time, and the first `count` at it."""

    def __init__(self, nanos: int | None, count: int) -> None:
        self.nanos = nanos
        self.count = count
        self.at = 0

    def keep(self, nanos: int) -> bool:
        if self.nanos is None:
            return True
        if nanos < self.nanos:
            return False
        if nanos == self.nanos:
            self.at += 1
            if self.at <= self.count:
                return False
        self.nanos = None  # past the cursor: everything after is new
        return True


class PodSource:
    """A pod's container (or a selector's newest pod's), followed through the API server.

    Items: chunks of whole lines with a cursor and the stream's id (`Chunk.file`); `CaughtUp` after each batch
    the API sent; `FileRestarted("restarted")` when the container was restarted, `("replaced")` for a new pod
    (or a cursor whose instance is gone); `Ended` once per instance, after its last chunk, with how it ended
    (OOMKilled with the memory limit, an exit code, whether the kubelet restarts it); `FileMissing` while there
    is no pod (or no started container) to read; `Disconnected`/`Connected` around a lost API server, retried
    with backoff. `AuthError` (401/403) and `UsageError` (a kubeconfig it cannot use) end the iteration.
    """

    def __init__(
        self, ref: PodRef, *, access: ClusterAccess | None = None, retry_first: float = RETRY_FIRST
    ) -> None:
        self.ref = ref
        self._access = access
        self.retry_first = retry_first

    async def _api(self) -> KubeAPI:
        if self._access is None:
            ref = self.ref
            self._access = await anyio.to_thread.run_sync(lambda: load_access(ref.context, ref.kubeconfig))
        return KubeAPI(self._access)

    async def _find(self, api: KubeAPI) -> PodView | None:
        """The pod and container to follow now; None when there is none."""
        try:
            if self.ref.pod is not None:
                return self._view(await api.get_pod(self.ref.namespace, self.ref.pod))
            assert self.ref.selector is not None
            return choose_pod(await api.list_pods(self.ref.namespace, self.ref.selector), self.ref.container)
        except PodGone:
            return None

    def _view(self, pod: object) -> PodView:
        try:
            return PodView.parse(pod, self.ref.container)  # type: ignore[arg-type]
        except ValueError as exc:
            raise UsageError(f"{self.ref}: {exc}") from exc

    async def stream_id(self) -> tuple[int, int] | None:
        """The id of the stream the source reads now (the current container instance); None: none yet."""
        async with await self._api() as api:
            view = await self._find(api)
        stream = view.stream if view is not None else None
        return None if stream is None else (0, stream)

    async def previous_stream_id(self, cursor: str | None = None) -> tuple[int, int] | None:
        """The id of the stream of the container's previous instance, whose log the API still keeps (the kubelet
        restarted it): a checkpoint of it resumes there (`KeepsPrevious`); None: there is none. The pod's status
        names that instance: `cursor` is not needed."""
        async with await self._api() as api:
            view = await self._find(api)
        stream = view.previous_stream if view is not None else None
        return None if stream is None else (0, stream)

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[SourceItem]]:
        """Follow from the start of the current stream, or just after `cursor` (numbered on from `offset`).

        Args:
            offset: the byte offset in its stream of what `cursor` names.
            cursor: a chunk's cursor from an earlier follow; None: from the stream's start.
        """
        return self._open(offset, cursor)

    @asynccontextmanager
    async def _open(self, offset: int, cursor: str | None) -> AsyncIterator[AsyncIterator[SourceItem]]:
        async with await self._api() as api, aclosing(self._items(api, offset, cursor)) as items:
            yield items

    async def _wait_change(self, api: KubeAPI, stream: int | None) -> None:
        """Until the pod to follow has a started container instance other than `stream`, or the watch ends."""
        ref = self.ref
        pods: dict[str, object] = {}
        async with api.open_watch(ref.namespace, selector=ref.selector, name=ref.pod) as events:
            async for kind, pod in events:
                uid = str((pod.get("metadata") or {}).get("uid"))
                if kind == "DELETED":
                    pods.pop(uid, None)
                elif kind in ("ADDED", "MODIFIED"):
                    pods[uid] = pod
                else:
                    continue
                if ref.pod is not None:
                    view = self._view(pod) if kind != "DELETED" else None
                else:
                    view = choose_pod(pods.values(), ref.container)  # type: ignore[arg-type]
                if view is not None and view.stream is not None and view.stream != stream:
                    return

    async def _items(self, api: KubeAPI, offset: int, cursor: str | None) -> AsyncGenerator[SourceItem]:
        resume = LogCursor.parse(cursor) if cursor else None
        pos: _Position | None = None
        uid: str | None = None
        ended: set[int] = set()
        failures = 0  # in a row, of the API
        reopens = 0  # ends in a row of a log whose container still runs
        missing = False
        down = False
        while True:
            try:
                view = await self._find(api)
                dead = _previous_end(view, resume) if pos is None else None
                if dead is not None and view is not None and resume is not None:
                    # ended since the cursor was taken (the daemon was down): the dead instance's rest and its
                    # end, then the new instance (once there is one) as a new stream
                    pos, uid = _Position(resume.stream, offset, resume.nanos, resume.count), view.uid
                    async for item in self._rest(api, view, pos, previous=True):
                        yield item
                    yield CaughtUp(pos.offset)
                    ended.add(pos.stream)
                    yield _ended(view, dead)
                    continue
                if view is None or view.stream is None:
                    # no pod, or none started yet; a container waiting to be started again is not missing
                    if not missing and (view is None or pos is None):
                        missing = True
                        yield FileMissing(str(self.ref))
                    await self._wait_change(api, pos.stream if pos else None)
                    continue
                missing = False
                if pos is None or view.stream != pos.stream:
                    if pos is None and resume is not None and resume.stream == view.stream:
                        pos = _Position(view.stream, offset, resume.nanos, resume.count)
                    else:
                        if pos is not None or resume is not None:
                            same_pod = pos is not None and uid == view.uid
                            yield FileRestarted("restarted" if same_pod else "replaced")
                        pos = _Position(view.stream)
                    uid = view.uid
                if pos.stream in ended:
                    await self._wait_change(api, pos.stream)
                    continue
                if down:
                    down = False
                    yield Connected(api.server)
                tail = b""
                async with api.open_log(
                    self.ref.namespace, view.name, view.container, since=_since(pos)
                ) as batches:
                    skip = _Skip(pos.nanos, pos.count)
                    async for lines in batches:
                        failures = 0
                        data, tail = _take(lines, pos, skip)
                        if data:
                            reopens = 0
                            yield Chunk(
                                pos.offset - len(data), data, file=(0, pos.stream), cursor=pos.cursor()
                            )
                            yield CaughtUp(pos.offset)
                # the log ended: the container's end, or only the request's
                end, log = await self._end_of(api, view)
                if end is None:
                    await anyio.sleep(
                        backoff(reopens, first=REOPEN_FIRST, cap=REOPEN_CAP, jitter=FULL_JITTER)
                    )
                    reopens += 1
                    continue
                if end is _GONE:  # deleted (a rollout, a scale-down): the platform stopped it, no evidence
                    ended.add(pos.stream)
                    yield CaughtUp(pos.offset)
                    continue
                # what the instance wrote after the cursor, read once more without following before its end is
                # said: the previous log's, where the log was cut before the container's end (it was restarted
                # since); else its own, as a stream may end (cleanly) just as its container does, before the last
                # of it was sent (docker's `logs` did, cut as its run ended: docker.py)
                if log is not None:
                    async for item in self._rest(api, view, pos, previous=log == "previous", tail=tail):
                        yield item
                elif tail:
                    data, _ = _take([tail + b"\n"], pos, _Skip(None, 0))
                    yield Chunk(pos.offset - len(data), data, file=(0, pos.stream), cursor=pos.cursor())
                yield CaughtUp(pos.offset)
                ended.add(pos.stream)
                yield _ended(view, end)
            except ConnectionLost as exc:
                if not down:
                    down = True
                    yield Disconnected(api.server, str(exc.reason or exc))
                await anyio.sleep(
                    backoff(failures, first=self.retry_first, cap=RETRY_CAP, jitter=FULL_JITTER)
                )
                failures += 1

    async def _end_of(
        self, api: KubeAPI, view: PodView
    ) -> tuple[ContainerEnd | None, Literal["current", "previous"] | None]:
        """How the instance `view` shows ended, after its log did: (its end, where its log is now: the
        container's "current" log, or its "previous" one (it was restarted since), None where neither is
        surely its own); (None, None) when it still runs."""
        try:
            now = self._view(await api.get_pod(self.ref.namespace, view.name))
        except PodGone:
            return _GONE, None
        if now.deleting:
            return _GONE, None
        if now.container_id == view.container_id and now.ended is not None:
            return now.ended, "current"
        if now.last_ended is not None and now.last_ended.container_id == view.container_id:
            return now.last_ended, "previous"
        if now.container_id == view.container_id and now.running:
            return None, None
        return ContainerEnd(view.container_id, "", None), None  # gone without a word of how

    async def _rest(
        self, api: KubeAPI, view: PodView, pos: _Position, *, previous: bool, tail: bytes = b""
    ) -> AsyncIterator[SourceItem]:
        """The rest of an ended container's log after `pos`: its instance's, or (`previous`) that of the one
        before (`previous=true`, the container restarted since). `tail`: the end of a line the stream had sent
        without its newline, delivered whole if the log can no longer be read (the pod gone)."""
        try:
            async with api.open_log(
                self.ref.namespace,
                view.name,
                view.container,
                since=_since(pos),
                follow=False,
                previous=previous,
            ) as batches:
                skip = _Skip(pos.nanos, pos.count)
                async for batch in batches:
                    # the dead container's last words may end mid-line: the line is whole now
                    whole = [line if line.endswith(b"\n") else line + b"\n" for line in batch]
                    data, _ = _take(whole, pos, skip)
                    if data:
                        tail = b""  # (sent again, with the rest)
                        yield Chunk(pos.offset - len(data), data, file=(0, pos.stream), cursor=pos.cursor())
        except PodGone:
            if tail:
                data, _ = _take([tail + b"\n"], pos, _Skip(None, 0))
                yield Chunk(pos.offset - len(data), data, file=(0, pos.stream), cursor=pos.cursor())


def _previous_end(view: PodView | None, resume: LogCursor | None) -> ContainerEnd | None:
    """How `view`'s previous instance ended, when `resume` is a cursor in it (its rest still to read)."""
    if view is None or resume is None or view.previous_stream != resume.stream:
        return None
    return view.last_ended


def _ended(view: PodView, end: ContainerEnd) -> Ended:
    """The `Ended` of an instance of `view`'s container that ended as `end` says."""
    return Ended(
        end.describe(view.container),
        exit_code=end.exit_code,
        oom_killed=end.oom_killed,
        memory_limit=view.memory_limit,
        restarting=view.restarting(end),
    )


def _since(pos: _Position) -> str | None:
    return floor_rfc3339(pos.nanos) if pos.nanos is not None else None


def _take(lines: list[bytes], pos: _Position, skip: _Skip) -> tuple[bytes, bytes]:
    """The bytes of `lines` (timestamps taken off) not yet delivered, advancing `pos`; and a last line without
    its newline (a log that ended inside a line), kept back."""
    tail = b""
    if lines and not lines[-1].endswith(b"\n"):
        tail = lines.pop()
    out = []
    for line in lines:
        nanos, text = split_log_line(line)
        if nanos is None:  # not the API's form: counted at the time of the line before
            nanos = pos.nanos or 0
        if not skip.keep(nanos):
            continue
        if nanos == pos.nanos:
            pos.count += 1
        else:
            pos.nanos, pos.count = nanos, 1
        out.append(text)
    data = b"".join(out)
    pos.offset += len(data)
    return data, tail


def source(target: Target, pool: SSHPool | None = None) -> PodSource:
    """The source of a `k8s://` target (no SSH: `pool` is not used)."""
    return PodSource(parse_pod_path(target.path, target.context))
