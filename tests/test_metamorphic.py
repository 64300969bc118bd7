"""The verdict of a log does not depend on how it reached the tool (metamorphic tests over the whole corpus).

A log met in the field is the engine's output passed through a transport: Docker's or kubectl's timestamps,
journald's prefix, compose's service column, Windows line ends, a terminal capture's padding, a UTF-8 BOM,
a stray binary line at the head of a reused file, another process's record landing between the lines of a
traceback. None of that changes what happened, so none of it may change the verdict. Each transform below is
applied to every corpus log; the verdict (outcome, phase, category, and for the lossless transforms the
summary) must be the one of the original log.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from watchdog.follow.replay import replay_path

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
LOGS = sorted(CORPUS.glob("*/*.log"))
# each test replays every corpus log (830 and growing) once transformed: over a minute on a loaded 2-core machine
pytestmark = pytest.mark.timeout(300)


def _each_line(prefix: Callable[[int], bytes]) -> Callable[[bytes], bytes]:
    return lambda data: b"".join(prefix(i) + line for i, line in enumerate(data.splitlines(keepends=True)))


def _in_the_middle(record: bytes) -> Callable[[bytes], bytes]:
    def insert(data: bytes) -> bytes:
        lines = data.splitlines(keepends=True)
        middle = len(lines) // 2
        return b"".join([*lines[:middle], record, *lines[middle:]])

    return insert


# Transforms that keep every line's text: the whole verdict, summary included, stays.
LOSSLESS: dict[str, Callable[[bytes], bytes]] = {
    "crlf": lambda data: data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "docker-timestamps": _each_line(lambda i: b"2026-12-02T10:%02d:%02d.%09dZ " % (i // 60 % 60, i % 60, i)),
    "journald": _each_line(
        lambda i: b"Dec 02 10:%02d:%02d gpu-node-7 python3[4242]: " % (i // 60 % 60, i % 60)
    ),
    "compose": _each_line(lambda i: b"llm-1  | "),
    "kubectl-prefix": _each_line(lambda i: b"[pod/llm-0/server] "),
    "terminal-padding": lambda data: b"".join(
        line.rstrip(b"\r\n") + b"   \t\n" for line in data.splitlines(keepends=True)
    ),
    "utf8-bom": lambda data: b"\xef\xbb\xbf" + data,
    "binary-head": lambda data: b"\x80\x81\xfe junk from the file's last user \x00\x01\n" + data,
}

# Another process's record between two lines (in a short log, often inside a traceback): the outcome, phase
# and category stay (the record may cut an exception's message short, so the summary is not compared).
INTERLEAVED: dict[str, Callable[[bytes], bytes]] = {
    "c10-warning": _in_the_middle(
        b"[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 "
        b"(errno: 97 - Address family not supported by protocol).\n"
    ),
    "c10-warning-timed": _in_the_middle(
        b"[W1202 10:00:01.823833318 socket.cpp:460] [c10d] The client socket has failed to connect to "
        b"[localhost]:29500 (errno: 97 - Address family not supported by protocol).\n"
    ),
    "vllm-info": _in_the_middle(b"INFO 12-02 10:00:01 [loader.py:12] Still waiting for rank 3.\n"),
}


def _records(record: Callable[[int, bytes, bool], bytes]) -> Callable[[bytes], bytes]:
    # each line (split at newlines only, as a runtime splits a program's output: a "\r" stays in its line) as a
    # record of a format; `record(i, line, ended)` is given the line without its newline, ended False for a
    # last line that has none
    def transform(data: bytes) -> bytes:
        lines = data.split(b"\n")
        last = lines.pop()
        out = [record(i, line, True) for i, line in enumerate(lines)]
        if last:
            out.append(record(len(lines), last, False))
        return b"".join(out)

    return transform


def _stamp(i: int) -> str:
    return f"2026-12-04T08:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z"


def _cri(i: int, line: bytes, ended: bool) -> bytes:
    return f"{_stamp(i)} stderr F ".encode() + line + b"\n"


def _cri_split(i: int, line: bytes, ended: bool) -> bytes:
    # a line cut into P records at arbitrary bytes (inside a UTF-8 character too), then its F record
    cuts = (
        sorted(random.Random(i).sample(range(1, len(line)), min(3, len(line) - 1))) if len(line) > 1 else []
    )
    parts = [line[a:b] for a, b in itertools.pairwise([0, *cuts, len(line)])]
    head = [f"{_stamp(i)} stderr P ".encode() + part + b"\n" for part in parts[:-1]]
    return b"".join(head) + f"{_stamp(i)} stderr F ".encode() + parts[-1] + b"\n"


def _docker(i: int, line: bytes, ended: bool, size: int = 16 * 1024) -> bytes:
    # Docker's json-file: at most `size` bytes of a line a record (its last record ends with "\n"); Go's
    # encoder writes bad UTF-8 as U+FFFD, as the log's reader would read it
    text = line.decode("utf-8", "replace") + ("\n" if ended else "")
    parts, part = [], ""
    for char in text:
        if len((part + char).encode()) > size:
            parts.append(part)
            part = ""
        part += char
    parts.append(part)
    stamp = _stamp(i)
    return b"".join(
        json.dumps({"log": p, "stream": "stderr", "time": stamp}, ensure_ascii=False).encode() + b"\n"
        for p in parts
    )


def _journald(i: int, line: bytes, ended: bool) -> bytes:
    # journalctl -o json: MESSAGE as its bytes (numbers) where it is no valid UTF-8 or holds a control
    # character, as journalctl writes it (and every 7th line besides); a line over 48 KB cut as journald cuts it
    entries, parts = [], [line[at : at + 48 * 1024] for at in range(0, len(line), 48 * 1024)] or [b""]
    for n, part in enumerate(parts, 1):
        try:
            text = part.decode()
            message: object = list(part) if i % 7 == 0 or any(c < " " and c != "\t" for c in text) else text
        except UnicodeDecodeError:
            message = list(part)
        entry = {
            "__REALTIME_TIMESTAMP": str(1796374457000000 + i * 1000),
            "MESSAGE": message,
            "SYSLOG_IDENTIFIER": "python3",
            "_PID": "4242",
            "_TRANSPORT": "stdout",
        }
        if n < len(parts):
            entry["_LINE_BREAK"] = "line-max"
        elif not ended:
            entry["_LINE_BREAK"] = "eof"
        entries.append(json.dumps(entry).encode() + b"\n")
    return b"".join(entries)


# The formats platforms store a log in (their records, one or more a line): the whole verdict stays.
FORMATS: dict[str, Callable[[bytes], bytes]] = {
    "cri": _records(_cri),
    "cri-partial": _records(_cri_split),
    "cri-o-offset": _records(
        lambda i, line, ended: b"2026-12-04T09:54:17.83101922+01:00 stdout F " + line + b"\n"
    ),
    "docker-json-file": _records(_docker),
    "docker-json-file-split": _records(lambda i, line, ended: _docker(i, line, ended, size=1 + i % 97)),
    "journald-json": _records(_journald),
    "journald-short-iso": _each_line(
        lambda i: b"2026-12-04T08:%02d:%02d+0000 gpu-node-7 python3[4242]: " % (i // 60 % 60, i % 60)
    ),
    "journald-short-iso-precise": _each_line(
        lambda i: b"2026-12-04T08:%02d:%02d.%06d+0000 gpu-node-7 python3[4242]: " % (i // 60 % 60, i % 60, i)
    ),
    # journalctl -o short-precise: the classic syslog time with its microseconds (journalctl(1) --output)
    "journald-short-precise": _each_line(
        lambda i: b"Dec 04 08:%02d:%02d.%06d gpu-node-7 python3[4242]: " % (i // 60 % 60, i % 60, i)
    ),
    # Ray's prefix of a worker's line forwarded to the driver, "({actor or task name} pid={pid}[, ip={ip}]) "
    # (ray/_private/worker.py print_worker_logs): a Serve replica's actor name holds colons and a deployment's slash
    "ray-serve-replica": _each_line(
        lambda i: b"(ServeReplica:default:LLMServer:meta-llama/Llama-3.1-8B pid=4242) "
    ),
    "ray-task": _each_line(lambda i: b"(_EngineBackgroundProcess pid=4243, ip=10.0.0.7) "),
    # a launcher relaying a container's lines through Python logging at one level, each tagged as the container's
    # ('%(asctime)s - %(levelname)s - %(message)s' and logger.info(f"[container] {line}"))
    "python-logging-container-relay": _each_line(
        lambda i: b"2026-12-04 08:%02d:%02d,%03d - INFO - [container] " % (i // 60 % 60, i % 60, i % 1000)
    ),
    # LocalAI's relay of a backend's output through its zerolog console log (pkg/model initializers.go)
    "localai-backend-relay": _each_line(lambda i: b"10:41AM DBG GRPC(llm-model-127.0.0.1:36865): stderr "),
    # stacked: kubectl logs --prefix --timestamps, docker compose logs --timestamps
    "kubectl-prefix-timestamps": _each_line(lambda i: b"[pod/llm-0/server] " + _stamp(i).encode() + b" "),
    "compose-timestamps": _each_line(lambda i: b"llm-1  | " + _stamp(i).encode() + b" "),
}


def _verdict(path: Path) -> tuple[object, ...]:
    _, v = replay_path(path)
    v = v.to_json()
    error = v["error"] or {}
    return v["state"], v["phase"], error.get("category"), error.get("summary")


@pytest.fixture(scope="module")
def originals() -> dict[Path, tuple[object, ...]]:
    return {log: _verdict(log) for log in LOGS}


# Logs whose lines were changed when they were copied, so that a platform's prefix in front of each line is no log any
# platform stores (both KNOWN_GAPS of tests/test_corpus.py): colour codes that lost their escape ('36m(EngineCore_DP0
# pid=820)0m ERROR ...': no ESC, no '['), and long lines a terminal wrapped (a platform stores the process's line whole,
# behind one prefix, not each fragment behind its own)
_CHANGED_WHEN_COPIED = {
    "vllm-ascend-2026-gpustack-ray-npu-enginecore-failed-to-start-after-moe-layer-init-ansi-remnants-cut-gpustack4194.log",
    "vllm-ascend-2026-v0.21-glm51-acl-graph-stream-synchronize-worker-traceback-wrapped-lines-cut-vllmascend10700.log",
    "vllm-0.8.4-glm4-32b-worker-dynamo-compile-frames-soft-wrapped-cut-issue16818.log",
    # TabbyAPI's console wrapped a frame line at the blank before its function ('..., line 409, in' / 'run_asgi')
    "other-2025-tabbyapi-exl3-tool-call-chat-500-asgi-exception-traceback-served-on-cut-tabbyapi392.log",
}


# A log whose verdict is read from pieces of a traceback the assembler does not join (a KNOWN_GAPS entry of
# tests/test_corpus.py): TabbyAPI's console wrapped every frame at a space, each piece its own line behind compose's
# prefix ('File ' alone, its path on the next line); which pieces read as a traceback depends on the prefixes, so
# its (wrong) verdict is not one a transport should keep.
_READ_FROM_PIECES = {
    "other-2025-tabbyapi-compose-unload-endpoint-request-traceback-wrapped-cut-tabbyapi337.log"
}


def _changed(
    transform: Callable[[bytes], bytes], originals: dict[Path, tuple[object, ...]], tmp: Path, fields: int
) -> list[str]:
    changed = []
    for log in LOGS:
        if log.name in _CHANGED_WHEN_COPIED or log.name in _READ_FROM_PIECES:
            continue
        moved = tmp / log.name
        moved.write_bytes(transform(log.read_bytes()))
        before, after = originals[log][:fields], _verdict(moved)[:fields]
        if before != after:
            changed.append(f"{log.parent.name}/{log.name}: {before} -> {after}")
    return changed


@pytest.mark.parametrize("name", sorted(LOSSLESS))
def test_a_lossless_transport_keeps_the_whole_verdict(
    name: str, originals: dict[Path, tuple[object, ...]], tmp_path: Path
) -> None:
    assert _changed(LOSSLESS[name], originals, tmp_path, 4) == []


# Logs whose long lines a terminal or a boxed viewer (k9s) wrapped when they were copied: Ray prefixes each line a
# worker wrote, before any terminal wraps it, so a Ray prefix in front of each wrapped fragment is no log Ray prints
# (a fragment behind its own process tag reads as a record of that process, not as the rest of a line).
_WRAPPED_WHEN_COPIED = {
    "sglang-2025-k9s-boxed-scheduler-exception-event-loop-overlap-after-ready-traceback-cut-issue4017.log",
    "vllm-v1-xpu-kv-cache-too-small-wrapped-lines-arcb70-issue4.log",
    "vllm-xpu-2026-llm-scaler-0.10.3-tp-workers-bookkeeping-sync-to-list-wrapped-paths-traceback-cut-issue235.log",
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_log_stored_in_a_platforms_format_keeps_the_whole_verdict(
    name: str, originals: dict[Path, tuple[object, ...]], tmp_path: Path
) -> None:
    """Every corpus log stored as CRI records (whole, or long lines in P parts cut anywhere), Docker json-file
    records (cut into parts), journald JSON entries (some messages as byte arrays) or journalctl's short-iso and
    short-precise lines, behind Ray's worker prefix, a launcher's logging relay or LocalAI's backend relay, or
    behind stacked prefixes, gives the verdict of the plain log, summary included."""
    changed = _changed(FORMATS[name], originals, tmp_path, 4)
    if name.startswith("ray-"):
        changed = [c for c in changed if c.split("/", 1)[1].split(":", 1)[0] not in _WRAPPED_WHEN_COPIED]
    assert changed == []


# Logs copied from a log UI's table view (Grafana Loki's: every row '  |   | TIME | LINE |'), not written by a
# process: another process's record would reach such a paste as a row of the same table, never as a bare line
# inside a traceback's rows, so the bare record of INTERLEAVED is not a transport of theirs (their frames are read
# as rows of a traceback because each row begins with '|').
_UI_TABLES = {"sglang-2026-loki-table-pp-cp-503-then-scheduler-exception-event-loop-pp-cut-issue25887.log"}
# A crop whose traceback is its opening line and one frame (header, frame, statement): the record lands right after
# the opening line and is read as its exception line, so the frame after it, which alone says where it failed (the
# event loop the statement calls: serving), belongs to no traceback. The same with two frames (sglang PR 4618's
# five lines): the record lands between the first frame and its statement, the call into the event loop that
# alone says where it failed (the frame after it is torch's decorator wrapper).
_FRAME_AFTER_THE_MIDDLE = {
    "sglang-ascend-2026-glm5-stress-ascendc-gather-v3-assert-out-of-range-scheduler-event-loop-ascendsglang74.log",
    "sglang-2025-dp-attention-scheduler-exception-event-loop-overlap-cut-pr4618.log",
}


@pytest.mark.parametrize("name", sorted(INTERLEAVED))
def test_another_processs_record_between_the_lines_keeps_the_verdict(
    name: str, originals: dict[Path, tuple[object, ...]], tmp_path: Path
) -> None:
    changed = _changed(INTERLEAVED[name], originals, tmp_path, 3)
    kept = _UI_TABLES | _FRAME_AFTER_THE_MIDDLE
    assert [c for c in changed if c.split("/", 1)[1].split(":", 1)[0] not in kept] == []


def test_the_corpus_is_there() -> None:
    assert len(LOGS) >= 285
