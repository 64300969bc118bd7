"""Formats: the records of CRI, Docker json-file and journald JSON logs turned into plain log lines (pure).

Platforms store a program's output as records: Kubernetes' CRI runtimes (containerd, CRI-O) as
``TIME STREAM TAG content`` lines, Docker's json-file driver and ``journalctl -o json`` as one JSON object a
line. A long line comes as several records: CRI ``P`` (partial) records ended by an ``F`` one, Docker records
whose "log" has no newline (it cuts lines at 16 KB), journald entries marked ``_LINE_BREAK=line-max`` (it
cuts them at 48 KB). `Unwrapper` tells a log's format from its first record and turns the `Framer`'s blocks
of records into blocks of log lines, each ``TIME content`` as a transport's timestamps read (the envelope
peels the time, the durations use it), a line of several records at the offset of its first. A CRI block
with no partial record and a plain log's blocks pass untouched (the envelope peels a CRI prefix itself).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

from watchdog.core.framing import DEFAULT_MAX_LINE, Block

__all__ = ["FORMATS", "Unwrapper", "sniff"]

FORMATS = ("plain", "cri", "docker", "journald")

# kubelet's parseCRILog (pkg/kubelet/kuberuntime/logs/logs.go): RFC 3339 time, stream, tags split by ":" (the
# first is P or F), one space, the content; containerd writes the time in UTC ("Z"), CRI-O with an offset
_CRI = re.compile(
    rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (?P<stream>stdout|stderr) (?P<tag>[FP])(?::\S*)?(?: |$)"
)
_CRI_PARTIAL = re.compile(rb"^\S+ (?:stdout|stderr) P[: \n]", re.MULTILINE)
_EPOCH = datetime(1970, 1, 1)

# one line in the making: the offset of its first record, and the line so far (its time in front, no newline)
Pending = dict[str, tuple[int, bytes]]


def sniff(record: bytes) -> str:
    """The format of a log whose first record (one line, no newline) is `record`: one of `FORMATS`."""
    if _CRI.match(record):
        return "cri"
    if record.startswith(b"{"):
        try:
            obj = json.loads(record)
        except ValueError:
            return "plain"
        if isinstance(obj, dict):
            if isinstance(obj.get("log"), str):
                return "docker"
            if "MESSAGE" in obj and "__REALTIME_TIMESTAMP" in obj:
                return "journald"
    return "plain"


class Unwrapper:
    """Turns blocks of a format's records into blocks of log lines; see the module docstring."""

    __slots__ = ("format", "max_line", "pending")

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line  # a line of many records is kept to this length, as the Framer keeps one
        self.format: str | None = None  # one of FORMATS; None until the first record came
        self.pending: Pending = {}  # the lines begun and not ended, by stream

    def feed(self, blocks: list[Block]) -> list[Block]:
        """The log lines of the next blocks of records (a line not ended yet is held back)."""
        fmt = self.format
        if fmt == "plain" or not blocks:
            return blocks
        if fmt is None:
            first = blocks[0].data
            fmt = self.format = sniff(first[: first.find(b"\n")])
            if fmt == "plain":
                return blocks
        out: list[Block] = []
        for block in blocks:
            if fmt == "cri" and not self.pending and _CRI_PARTIAL.search(block.data) is None:
                out.append(block)  # whole records only: the envelope peels their prefixes
                continue
            lines: list[tuple[int, bytes]] = []
            offset = block.offset
            for raw in block.data.split(b"\n")[:-1]:  # every record of a block ends with a newline
                if fmt == "cri":
                    self._cri(offset, raw, lines)
                else:
                    self._json(offset, raw, lines, fmt == "docker")
                offset += len(raw) + 1
            if lines:
                out.append(_block(lines))
        return out

    def passes(self, data: bytes) -> bool:
        """Whether `feed` returns a block of `data` (complete lines) untouched: a plain log's, or a CRI log's of
        whole records with no line begun before it. False while the format is not known yet."""
        fmt = self.format
        return fmt == "plain" or (fmt == "cri" and not self.pending and _CRI_PARTIAL.search(data) is None)

    def flush(self) -> list[Block]:
        """End of the log: the lines begun and not ended, as they are."""
        lines = sorted(self.pending.values())
        self.pending = {}
        return [_block(lines)] if lines else []

    def _cri(self, offset: int, raw: bytes, lines: list[tuple[int, bytes]]) -> None:
        m = _CRI.match(raw)
        if m is None:
            lines.append((offset, raw))  # no record: the line as it is
            return
        end = m.end()
        self._part(m["stream"].decode(), offset, raw[:end], raw[end:], m["tag"] == b"F", lines)

    def _json(self, offset: int, raw: bytes, lines: list[tuple[int, bytes]], docker: bool) -> None:
        try:
            key, stamp, text, ended = _docker(json.loads(raw)) if docker else _journald(json.loads(raw))
        except (ValueError, TypeError):  # not JSON, or not this format's object: the line as it is
            lines.append((offset, raw))
            return
        parts = text.split(b"\n")  # a journald message may hold several lines
        for i, part in enumerate(parts, 1):
            self._part(key, offset, stamp, part, ended or i < len(parts), lines)

    def _part(
        self, key: str, offset: int, head: bytes, part: bytes, ended: bool, lines: list[tuple[int, bytes]]
    ) -> None:
        # `part` of the line that stream `key` writes: it begins one (after `head`, its time) or goes on one
        begun = self.pending.pop(key, None)
        if begun is None:
            start, line = offset, head + part
        else:
            start, line = begun[0], begun[1] + part if len(begun[1]) < self.max_line else begun[1]
        if ended:
            lines.append((start, line[: self.max_line]))
        else:
            self.pending[key] = (start, line)


def _docker(obj: object) -> tuple[str, bytes, bytes, bool]:
    # {"log": "text\n", "stream": "stderr", "time": "2026-12-04T08:54:17.831019227Z"}; no newline: continued
    if not isinstance(obj, dict) or not isinstance(obj.get("log"), str):
        raise TypeError("not a json-file record")
    text = obj["log"].encode("utf-8", "surrogatepass")
    ended = text.endswith(b"\n")
    time = obj.get("time")
    stamp = f"{time} ".encode() if isinstance(time, str) and time else b""
    return str(obj.get("stream", "")), stamp, text[:-1] if ended else text, ended


def _journald(obj: object) -> tuple[str, bytes, bytes, bool]:
    # journalctl -o json: MESSAGE a text, or its bytes as numbers when it is no valid UTF-8 (or holds control
    # characters), or null when longer than 4 KB without --all; __REALTIME_TIMESTAMP in microseconds
    if not isinstance(obj, dict) or "MESSAGE" not in obj:
        raise TypeError("not a journald entry")
    message = obj["MESSAGE"]
    if isinstance(message, str):
        text = message.encode("utf-8", "surrogatepass")
    elif isinstance(message, list):
        text = bytes(message)  # a number outside 0-255, or not a number: ValueError, TypeError
    elif message is None:
        text = b""
    else:
        raise TypeError("MESSAGE is no text")
    micros = obj.get("__REALTIME_TIMESTAMP")
    stamp = b""
    if isinstance(micros, str) and micros.isdigit():
        stamp = (_EPOCH + timedelta(microseconds=int(micros))).isoformat().encode() + b"Z "
    key = str(obj.get("_STREAM_ID") or obj.get("_PID") or "")
    return key, stamp, text, obj.get("_LINE_BREAK") != "line-max"


def _block(lines: list[tuple[int, bytes]]) -> Block:
    return Block(lines[0][0], b"".join(line + b"\n" for _, line in lines), starts=tuple(o for o, _ in lines))
