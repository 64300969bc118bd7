"""The verdict of a log does not depend on how it reached the tool (metamorphic tests over the whole corpus).

A log met in the field is the engine's output passed through a transport: Docker's or kubectl's timestamps,
journald's prefix, compose's service column, Windows line ends, a terminal capture's padding, a UTF-8 BOM,
a stray binary line at the head of a reused file, another process's record landing between the lines of a
traceback. None of that changes what happened, so none of it may change the verdict. Each transform below is
applied to every corpus log; the verdict (outcome, phase, category, and for the lossless transforms the
summary) must be the one of the original log.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from watchdog.follow.replay import replay_path

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
LOGS = sorted(CORPUS.glob("*/*.log"))


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


def _verdict(path: Path) -> tuple[object, ...]:
    _, v = replay_path(path)
    v = v.to_json()
    error = v["error"] or {}
    return v["state"], v["phase"], error.get("category"), error.get("summary")


@pytest.fixture(scope="module")
def originals() -> dict[Path, tuple[object, ...]]:
    return {log: _verdict(log) for log in LOGS}


def _changed(
    transform: Callable[[bytes], bytes], originals: dict[Path, tuple[object, ...]], tmp: Path, fields: int
) -> list[str]:
    changed = []
    for log in LOGS:
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


@pytest.mark.parametrize("name", sorted(INTERLEAVED))
def test_another_processs_record_between_the_lines_keeps_the_verdict(
    name: str, originals: dict[Path, tuple[object, ...]], tmp_path: Path
) -> None:
    assert _changed(INTERLEAVED[name], originals, tmp_path, 3) == []


def test_the_corpus_is_there() -> None:
    assert len(LOGS) >= 285
