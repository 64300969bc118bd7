"""Resuming at a checkpoint: the blob, the file identity check, and followers restarted on a real store."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from daemon_process import DaemonProcess
from http_client import get
from structlog.testing import capture_logs

import watchdog
from watchdog.core.analyzer import Analyzer
from watchdog.core.recordtext import RecordText
from watchdog.core.redaction import mask_secrets, redact_text
from watchdog.core.resume import record_values
from watchdog.follow.checkpoint import (
    CHECKPOINT_INTERVAL,
    FORMAT,
    Checkpoint,
    decode,
    encode,
    settings_id,
)
from watchdog.follow.follower import CHECKPOINT_QUIET, CHECKPOINT_SLACK, LaunchFollower, LaunchSpec
from watchdog.follow.replay import replay_path
from watchdog.follow.sources import Chunk, parse_target
from watchdog.follow.sources.identity import IDENTITY_WINDOW, FileIdentity, FileWindows, local_identity
from watchdog.follow.sources.local import LocalSource
from watchdog.follow.sources.remote import identity_command
from watchdog.follow.sources.ssh import SSHSource
from watchdog.follow.sources.sshpool import SSHOptions, SSHPool
from watchdog.follow.testing import ManualClock
from watchdog.profiles.loader import load_engine, load_profile_file
from watchdog.store import StateStore, open_store
from watchdog.vocabulary import State

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"
LOGS = sorted(CORPUS.rglob("*.log"))
CRASH = CORPUS / "vllm" / "vllm-capture-cudagraph-cuda-error-not-permitted-v0.19.1-qbraid.log"
READY = CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"
DEADLINE = 30.0
GRACE = 6.0  # virtual seconds that let a crash's grace and settle window pass


def _spec(path: Path | str, **kw: Any) -> LaunchSpec:
    return LaunchSpec(name="resumed", target=parse_target(str(path)), **kw)


def _key(v: Any) -> tuple[Any, ...]:
    v = v if isinstance(v, dict) else v.to_json()
    e = v.get("error") or {}
    return (v["state"], v["phase"], e.get("category"), e.get("summary"), tuple(e.get("ranks") or ()))


def _read(path: Path) -> bytes:
    return path.read_bytes()  # a small fixture, read before anything is followed


def _identity(path: Path, offset: int) -> FileIdentity:
    found = local_identity(str(path), offset)
    assert found is not None
    return found


# -- the blob -------------------------------------------------------------------------------------------------


def _fed(data: bytes) -> Analyzer:
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(data, 0.0)
    return analyzer


def _checkpoint(tmp_path: Path, data: bytes, cut: int) -> tuple[Path, Checkpoint]:
    path = tmp_path / "log"
    path.write_bytes(data)
    return path, Checkpoint(_identity(path, cut), 12.5, _fed(data[:cut]))


def _record_text(blob: bytes) -> str:
    """The resume record a checkpoint's blob holds, as its JSON text."""
    length = int.from_bytes(blob[5:9], "big")
    header = json.loads(blob[9 : 9 + length])
    return zlib.decompress(blob[9 + length + header["head"] + header["before"] :]).decode()


def _digested(identity: FileIdentity) -> FileIdentity:
    return dataclasses.replace(
        identity, head=hashlib.sha256(identity.head).digest(), before=hashlib.sha256(identity.before).digest()
    )


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem[:60])
def test_a_checkpoint_read_back_goes_on_like_a_replay_of_the_whole_log(tmp_path: Path, log: Path) -> None:
    """Every corpus log cut in two: the first half's analyzer, encoded, decoded and fed the second half, ends
    with the verdict, line count and byte count of a replay of the whole log."""
    data = _read(log)
    cut = len(data) // 2 + 7  # mid-line, usually: the unfinished line is part of the state
    _, checkpoint = _checkpoint(tmp_path, data, cut)
    blob = encode(checkpoint, settings="s")
    assert blob is not None
    restored = decode(blob, settings="s")
    assert restored.identity == _digested(checkpoint.identity)
    assert restored.elapsed == 12.5
    analyzer = restored.analyzer
    analyzer.feed(data[cut:], 0.0)
    analyzer.finish(0.0)
    whole, verdict = replay_path(log)
    verdict = verdict.to_json()
    inc, want = analyzer.lifecycle.verdict_incarnation(), whole.lifecycle.verdict_incarnation()
    assert (inc.state, inc.phase, inc.number) == (want.state, want.phase, want.number)
    assert (analyzer.lines_read, analyzer.bytes_read) == (verdict["lines_read"], verdict["bytes_read"])


SECRETS = ("sk-abc123def456ghi789jkl012", "hf_AbCdEfGhIjKlMnOpQrStUvWx", "hunter2hunter2")


@pytest.mark.parametrize("where", ["in the head", "in a traceback", "cut in the secret"])
def test_a_checkpoint_holds_no_secret_of_its_log_and_goes_on_the_same(tmp_path: Path, where: str) -> None:
    """Credentials in the log (its banner, a crash's lines, the unfinished line at the cut): none in the blob nor
    in the record it holds (the windows are digests, the texts masked, lengths kept), and the restored analyzer
    still ends like a replay of the whole log."""
    leak = f" --api-key {SECRETS[0]} HF_TOKEN={SECRETS[1]} password={SECRETS[2]}".encode()
    lines = _read(CRASH).splitlines(keepends=True)
    at = (
        1
        if where == "in the head"
        else next(i for i, line in enumerate(lines) if b"CUDA error: operation not permitted" in line)
    )
    lines[at] = lines[at].rstrip(b"\n") + leak + b"\n"
    data = b"".join(lines)
    path = tmp_path / "server.log"
    path.write_bytes(data)
    end_of_leak = sum(map(len, lines[: at + 1])) - 1
    cut = end_of_leak - 10 if where == "cut in the secret" else end_of_leak + 1
    checkpoint = Checkpoint(_identity(path, cut), 1.0, _fed(data[:cut]))
    blob = encode(checkpoint, settings="s")
    assert blob is not None
    record = _record_text(blob)
    for secret in SECRETS:
        assert secret.encode() not in blob
        assert secret not in record
    if where != "cut in the secret":
        assert "*" * len(SECRETS[2]) in record  # masked where it was, not dropped
    analyzer = decode(blob, settings="s").analyzer
    analyzer.feed(data[cut:], 0.0)
    analyzer.finish(0.0)
    whole, verdict = replay_path(path)
    verdict = verdict.to_json()
    inc, want = analyzer.lifecycle.verdict_incarnation(), whole.lifecycle.verdict_incarnation()
    assert (inc.state, inc.phase, inc.number) == (want.state, want.phase, want.number)
    assert (analyzer.lines_read, analyzer.bytes_read) == (verdict["lines_read"], verdict["bytes_read"])


def test_a_log_of_lines_that_all_differ_checkpoints_small(tmp_path: Path) -> None:
    """A log of 20,000 lines that all differ (hex ids) leaves nothing per line in the analyzer: the checkpoint
    stays small, and the restored analyzer reads on as the saved one does."""
    lines = b"".join(b"request id=%s done\n" % os.urandom(8).hex().encode() for _ in range(20_000))
    _, checkpoint = _checkpoint(tmp_path, lines, len(lines))
    blob = encode(checkpoint, settings="s")
    assert blob is not None
    assert len(blob) < 16 * 1024
    restored = decode(blob, settings="s").analyzer
    assert restored.feed(lines[:1000], 1.0) == checkpoint.analyzer.feed(lines[:1000], 1.0)


def test_a_bundled_profile_is_saved_by_name_and_the_rule_set_made_again(tmp_path: Path) -> None:
    """The record names the engine (the profile's rules are not in it); the restored analyzer has the same
    profile and the same rule set, made again from it."""
    _, checkpoint = _checkpoint(tmp_path, _read(READY), len(_read(READY)))
    analyzer = checkpoint.analyzer
    analyzer.caught_up(0.0)  # the engine is detected, the launch ready: the settled rule set
    assert analyzer.profile is not None
    blob = encode(checkpoint, settings="s")
    assert blob is not None
    record = json.loads(_record_text(blob))
    assert (record["engine"], record["profiles"]) == ("sglang", [])
    assert analyzer.profile.source not in _record_text(blob)
    restored = decode(blob, settings="s").analyzer
    assert restored.profile == analyzer.profile
    assert restored._scanner.rules == analyzer._scanner.rules
    assert restored._scanner.rules


def test_a_users_profile_is_named_and_loaded_again_with_its_rules(tmp_path: Path) -> None:
    """A checkpoint taken with a user's profile names it; restored into an analyzer with that profile, its
    rules are in use again; into one without it (other settings, which the settings id also tells), it is
    refused."""
    user = tmp_path / "mine.toml"
    user.write_text('extends = "vllm"\n[[error]]\nmatch = "MY FATAL"\nfatal = true\n')
    mine = load_profile_file(user)
    analyzer = Analyzer(load_engine("vllm", [mine]))
    analyzer.feed(_read(CRASH)[:3000], 0.0)
    path = tmp_path / "log"
    path.write_bytes(_read(CRASH))
    blob = encode(Checkpoint(_identity(path, 3000), 1.0, analyzer), settings="s")
    assert blob is not None
    assert json.loads(_record_text(blob))["profiles"] == [str(user)]
    restored = decode(blob, settings="s", analyzer=Analyzer(load_engine("vllm", [mine]))).analyzer
    assert restored.profile == analyzer.profile
    assert any(r.match == "MY FATAL" for r in restored._scanner.rules)
    with pytest.raises(ValueError, match="other user profiles"):
        decode(blob, settings="s", analyzer=Analyzer(load_engine("vllm")))


def test_a_checkpoint_over_the_cap_is_not_encoded(tmp_path: Path) -> None:
    """`encode` gives None for a state larger than the cap (the follower then keeps the last one saved)."""
    _, checkpoint = _checkpoint(tmp_path, _read(CRASH), 5000)
    assert encode(checkpoint, settings="s", max_bytes=2000) is None
    assert encode(checkpoint, settings="s") is not None


def _evil() -> bytes:
    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, ("echo pwned",))

    return pickle.dumps(Boom())


def _with_record(blob: bytes, state: bytes) -> bytes:
    """`blob` with `state` where its compressed record was."""
    length = int.from_bytes(blob[5:9], "big")
    header = json.loads(blob[9 : 9 + length])
    return blob[: 9 + length + header["head"] + header["before"]] + state


def _newer(text: str) -> bytes:
    record = json.loads(text)
    record["version"] += 1
    return zlib.compress(json.dumps(record).encode())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param(lambda b: b"XXXX" + b[4:], "not a checkpoint", id="magic"),
        pytest.param(lambda b: b[:4] + bytes([FORMAT + 1]) + b[5:], "format", id="format"),
        pytest.param(lambda b: b[:4] + bytes([FORMAT - 1]) + b[5:], "format 3", id="pickle-format"),
        pytest.param(lambda b: b[:30], "cut short|header", id="cut"),
        pytest.param(lambda b: b[:3], "too short", id="tiny"),
        pytest.param(lambda b: b[:-200] + b"\x00" * 200, "does not load|cut short", id="damaged-record"),
        pytest.param(lambda b: b[:-1], "cut short", id="record-cut"),
        pytest.param(lambda b: _with_record(b, _evil()), "does not load", id="a-pickle"),
        pytest.param(lambda b: _with_record(b, zlib.compress(b"[1]")), "not an object", id="not-a-record"),
        pytest.param(
            lambda b: _with_record(b, _newer(_record_text(b))), "record version", id="newer-version"
        ),
    ],
)
def test_a_damaged_or_foreign_blob_is_refused(tmp_path: Path, change: Any, reason: str) -> None:
    """A blob that is not this format, cut, whose record is damaged, not a record (a pickle: never run), or of a
    newer version than this build reads: ValueError saying why, never a crash."""
    _, checkpoint = _checkpoint(tmp_path, _read(CRASH), 3000)
    blob = encode(checkpoint, settings="s")
    assert blob is not None
    with pytest.raises(ValueError, match=reason):
        decode(change(blob), settings="s")


def test_other_settings_are_refused_and_the_build_is_no_part_of_them(tmp_path: Path) -> None:
    """A checkpoint taken under other launch settings is refused before its record is read; a change of engine
    or target changes the settings id, learned deadlines do not, and the blob names no build (before issue 27
    another build's checkpoint was refused: an upgrade read every log from its start)."""
    _, checkpoint = _checkpoint(tmp_path, _read(READY), 3000)
    blob = encode(checkpoint, settings="s")
    assert blob is not None
    with pytest.raises(ValueError, match="other settings"):
        decode(blob, settings="other")
    length = int.from_bytes(blob[5:9], "big")
    assert "build" not in json.loads(blob[9 : 9 + length])
    spec = _spec("/x.log")
    assert settings_id(spec) == settings_id(_spec("/x.log"))
    assert settings_id(spec) != settings_id(dataclasses.replace(spec, engine="vllm"))
    assert settings_id(spec) != settings_id(_spec("/y.log"))
    # learned deadlines change as the history grows: they are applied anew, not compared
    assert settings_id(spec) == settings_id(dataclasses.replace(spec, deadlines=(("loading_weights", 60.0),)))


# -- the file's identity --------------------------------------------------------------------------------------


def test_the_same_file_grown_matches_and_changed_files_do_not(tmp_path: Path) -> None:
    """Taken at an offset: the file appended to matches; a new file at the path, the file truncated, or its
    bytes rewritten before the offset or at its start, do not (each with its reason)."""
    data = _read(CRASH)
    path = tmp_path / "log"
    cut = 3 * IDENTITY_WINDOW + 100
    path.write_bytes(data[:cut])
    taken = _identity(path, cut)
    assert (len(taken.head), len(taken.before)) == (IDENTITY_WINDOW, IDENTITY_WINDOW)
    with path.open("ab") as f:
        f.write(data[cut:])
    assert taken.mismatch(_identity(path, cut)) is None

    rewritten = bytearray(data)
    rewritten[cut - 10] ^= 0xFF
    path.write_bytes(bytes(rewritten))  # the same inode, other bytes just before the offset
    assert "rewritten" in (taken.mismatch(_identity(path, cut)) or "")
    rewritten = bytearray(data)
    rewritten[5] ^= 0xFF
    path.write_bytes(bytes(rewritten))
    assert "replaced" in (taken.mismatch(_identity(path, cut)) or "")
    path.write_bytes(data[: cut - 1])
    assert "truncated" in (taken.mismatch(_identity(path, cut)) or "")
    _replace(path, data)
    assert "another file" in (taken.mismatch(_identity(path, cut)) or "")
    assert local_identity(str(tmp_path / "none"), cut) is None
    assert local_identity(str(tmp_path), 0) is None  # a directory


def _replace(path: Path, data: bytes) -> None:
    """Put a new file at `path`, made while the old one still exists (so it cannot get its inode back)."""
    new = path.with_name(path.name + ".new")
    new.write_bytes(data)
    os.replace(new, path)


def test_the_windows_a_follower_keeps_are_those_the_file_shows(tmp_path: Path) -> None:
    """However the bytes are chunked, the windows a follower keeps equal what identifying the file reads."""
    data = _read(CRASH)
    path = tmp_path / "log"
    path.write_bytes(data)
    lines = [len(line) for line in data.splitlines(keepends=True)]  # a live log's reads: kept as pieces
    for sizes in ([1] * 50 + [len(data)], [IDENTITY_WINDOW - 1, 3, 10_000], [len(data)], lines):
        windows, pos = FileWindows(), 0
        for size in sizes:
            windows.feed(data[pos : pos + size])
            pos = min(len(data), pos + size)
            assert windows.matches(_identity(path, pos))


def test_the_remote_command_quotes_its_path_and_takes_only_an_int_offset() -> None:
    """The identity command passes the path and the numbers as single-quoted words; a non-int offset is refused."""
    command = identity_command("/logs/it's here; rm -rf ~", 10_000, window=IDENTITY_WINDOW)
    assert "'/logs/it'\"'\"'s here; rm -rf ~'" in command
    assert command.endswith(" 4096 5905 4096")
    for bad in (-1, 1.5, "12; reboot", True):
        with pytest.raises(ValueError):
            identity_command("/x", bad, window=IDENTITY_WINDOW)  # type: ignore[arg-type]


# -- followers restarted on a real store ----------------------------------------------------------------------


class CountingSource:
    """A real source, and what it delivered: where reading started and how many bytes came."""

    def __init__(self, inner: LocalSource | SSHSource) -> None:
        self.inner = inner
        self.first_offset: int | None = None
        self.bytes = 0

    def open_follow(
        self, offset: int = 0, cursor: str | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[Any]]:
        return self._open(offset)

    @asynccontextmanager
    async def _open(self, offset: int) -> AsyncIterator[AsyncIterator[Any]]:
        async with self.inner.open_follow(offset) as items:
            yield self._count(items)

    async def _count(self, items: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in items:
            if isinstance(item, Chunk):
                if self.first_offset is None:
                    self.first_offset = item.offset
                self.bytes += len(item.data)
            yield item

    async def identify(self, offset: int) -> FileIdentity | None:
        return await self.inner.identify(offset)


async def _follow(spec: LaunchSpec, source: CountingSource, store: StateStore) -> LaunchFollower:
    """Run a follower until it has read the log as it is and the crash settle window passed, then stop it."""
    clock = ManualClock()
    follower = LaunchFollower(spec, source=source, clock=clock, checkpoints=store)

    async def drain() -> None:
        with follower.updates:
            async for _ in follower.updates:
                pass

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            await tg.start(follower.run)
            await clock.advance(GRACE)
            tg.cancel_scope.cancel()
    return follower


@pytest.mark.parametrize("log", [READY, CRASH], ids=["ready", "crash"])
@pytest.mark.parametrize("cut", [0.05, 0.6], ids=["early", "late"])
async def test_a_restarted_follower_reads_only_the_new_bytes(tmp_path: Path, log: Path, cut: float) -> None:
    """Followed, stopped, appended to, followed again on the same store: the second follower starts at the
    offset the first reached, reads only the appended bytes, and ends with the verdict, line count and byte
    count of a replay of the whole file."""
    data = _read(log)
    first_part = int(len(data) * cut)
    path = tmp_path / "server.log"
    path.write_bytes(data[:first_part])
    async with open_store(tmp_path / "state") as store:
        first = CountingSource(LocalSource(path))
        await _follow(_spec(path), first, store)
        assert (first.first_offset, first.bytes) == (0, first_part)
        with path.open("ab") as f:
            f.write(data[first_part:])
        second = CountingSource(LocalSource(path))
        follower = await _follow(_spec(path), second, store)
    assert follower.resumed_at == first_part
    assert (second.first_offset, second.bytes) == (first_part, len(data) - first_part)
    _, replayed = replay_path(path)
    replayed = replayed.to_json()
    assert follower.concluded is not None
    assert _key(follower.concluded.verdict) == _key(replayed)
    status = follower.status().to_json()
    assert (status["lines_read"], status["bytes_read"]) == (replayed["lines_read"], replayed["bytes_read"])


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_replace, id="replaced"),
        pytest.param(lambda p, d: p.write_bytes(d[:100]), id="truncated"),
        pytest.param(lambda p, d: p.write_bytes(d.replace(b"INFO", b"info", 1)), id="rewritten"),
    ],
)
async def test_a_checkpoint_of_a_file_that_changed_is_ignored(tmp_path: Path, change: Any) -> None:
    """The log replaced, truncated or rewritten while the follower was stopped: the checkpoint is ignored (and
    the reason logged), and the new follower reads the file from its start to the replay's verdict."""
    data = _read(CRASH)
    path = tmp_path / "server.log"
    path.write_bytes(data[: len(data) // 2])
    async with open_store(tmp_path / "state") as store:
        await _follow(_spec(path), CountingSource(LocalSource(path)), store)
        assert await store.load_checkpoint("resumed") is not None
        change(path, data)
        second = CountingSource(LocalSource(path))
        with capture_logs() as logs:
            follower = await _follow(_spec(path), second, store)
    assert follower.resumed_at is None
    assert (second.first_offset, second.bytes) == (0, path.stat().st_size)
    assert [e["event"] for e in logs if "checkpoint" in e["event"]] == [
        "checkpoint ignored; reading the log from its start"
    ]
    _, replayed = replay_path(path)
    replayed = replayed.to_json()
    assert _key(follower.status().to_json()) == _key(replayed)


async def test_a_checkpoint_under_other_settings_or_damaged_is_ignored(tmp_path: Path) -> None:
    """A checkpoint taken for another engine setting, or one damaged in the store, is not used: the log is
    read from its start."""
    data = _read(READY)
    path = tmp_path / "server.log"
    path.write_bytes(data)
    async with open_store(tmp_path / "state") as store:
        await _follow(_spec(path), CountingSource(LocalSource(path)), store)
        source = CountingSource(LocalSource(path))
        follower = await _follow(_spec(path, engine="sglang"), source, store)
        assert (follower.resumed_at, source.bytes) == (None, len(data))
        blob = await store.load_checkpoint("resumed")
        assert blob is not None
        await store.save_checkpoint("resumed", len(data), blob[: len(blob) - 50])
        source = CountingSource(LocalSource(path))
        follower = await _follow(_spec(path, engine="sglang"), source, store)
        assert (follower.resumed_at, source.bytes) == (None, len(data))


def _format_3(spec: LaunchSpec, identity: FileIdentity, base: int) -> bytes:
    """A checkpoint as the build before issue 27 wrote it: format 3, a build id, a pickle of the analyzer."""
    header = {
        "build": "0.9.0+0123456789abcdef",
        "settings": settings_id(spec),
        "offset": identity.offset,
        "elapsed": 1.0,
        "device": identity.device,
        "inode": identity.inode,
        "size": identity.size,
        "head": 32,
        "before": 32,
        "base": base,
    }
    text = json.dumps(header).encode()
    digests = hashlib.sha256(identity.head).digest() + hashlib.sha256(identity.before).digest()
    return (
        b"WDCK"
        + bytes([3])
        + len(text).to_bytes(4, "big")
        + text
        + digests
        + pickle.dumps(Analyzer(load_engine(None)))
    )


@pytest.mark.parametrize("which", ["format 3", "newer record"])
async def test_a_checkpoint_of_its_file_that_cannot_be_read_numbers_the_file_as_before(
    tmp_path: Path, which: str
) -> None:
    """The checkpoint of this very file, in the pickled format before this one (an upgrade from it) or with a
    record of a newer version (a downgrade): the log is read from its start (the reason logged) and its
    launches numbered as before (the checkpoint's `base`), not after the last one stored."""
    data = _read(READY)
    path = tmp_path / "server.log"
    path.write_bytes(data)
    spec = _spec(path)
    identity = _identity(path, len(data))
    if which == "format 3":
        blob = _format_3(spec, identity, base=2)
    else:
        fed = _fed(data)
        fed.lifecycle.current.number = 3
        good = encode(Checkpoint(identity, 1.0, fed, base=2), settings=settings_id(spec))
        assert good is not None
        blob = _with_record(good, _newer(_record_text(good)))
    async with open_store(tmp_path / "state") as store:
        await store.save_checkpoint("resumed", len(data), blob)
        source = CountingSource(LocalSource(path))
        with capture_logs() as logs:
            follower = await _follow(spec, source, store)
    assert (follower.resumed_at, source.first_offset, source.bytes) == (None, 0, len(data))
    ignored = [e for e in logs if e["event"] == "checkpoint ignored; reading the log from its start"]
    assert len(ignored) == 1
    assert ("format 3" if which == "format 3" else "record version") in ignored[0]["reason"]
    assert follower.analyzer.lifecycle.current.number == 3  # base 2: as the first time it was read


class SavesSeen:
    """The real store, and the offsets of the checkpoints saved to it (a test waits on them)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.offsets: list[int] = []
        self._saved = anyio.Event()

    async def load_checkpoint(self, launch: str) -> bytes | None:
        return await self.store.load_checkpoint(launch)

    async def save_checkpoint(self, launch: str, offset: int, blob: bytes) -> None:
        await self.store.save_checkpoint(launch, offset, blob)
        self.offsets.append(offset)
        self._saved.set()
        self._saved = anyio.Event()

    async def wait_for(self, offset: int, clock: ManualClock) -> None:
        """Let the checkpoint interval pass until a checkpoint at `offset` is saved."""
        while offset not in self.offsets:
            saved = self._saved
            await clock.advance(CHECKPOINT_INTERVAL + 1.0)
            if offset not in self.offsets:
                await saved.wait()


async def test_checkpoints_are_saved_while_reading_not_only_at_the_end(tmp_path: Path) -> None:
    """A growing log is checkpointed once per interval while it grows, so that a kill -9 (no final save)
    loses little: each checkpoint is at an offset the follower had read to, and loads."""
    data = _read(READY)
    path = tmp_path / "server.log"
    path.write_bytes(b"")
    clock = ManualClock()
    async with open_store(tmp_path / "state") as store:
        saves = SavesSeen(store)
        follower = LaunchFollower(_spec(path), source=LocalSource(path), clock=clock, checkpoints=saves)
        ends = [len(data) * k // 4 for k in (1, 2, 3, 4)]
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, follower)
                await tg.start(follower.run)
                for start, end in zip([0, *ends], ends, strict=False):
                    with path.open("ab") as f:
                        f.write(data[start:end])
                    await saves.wait_for(end, clock)
                    blob = await store.load_checkpoint("resumed")
                    assert blob is not None
                    assert decode(blob, settings=settings_id(follower.spec)).offset == end
                tg.cancel_scope.cancel()
    assert set(ends) <= set(saves.offsets)
    assert saves.offsets == sorted(saves.offsets)


async def _read_to(follower: LaunchFollower, size: int) -> None:
    # the file is read in real time by a worker thread, which sets no event: wait (under the test's deadline)
    while follower.analyzer.bytes_read < size:  # noqa: ASYNC110
        await anyio.sleep(0.005)


async def test_a_pause_of_a_crash_loops_restart_gap_saves_nothing_a_longer_one_does(tmp_path: Path) -> None:
    """A log that pauses for less than `CHECKPOINT_QUIET` between its transitions (a crash loop's 1-2 s restart
    gap) is still growing: no checkpoint is saved at such a pause (one every `GROWING_INTERVAL`); once it has
    been quiet for `CHECKPOINT_QUIET`, its checkpoint is saved where it ends."""
    lines = _read(READY).splitlines(keepends=True)
    first, parts = b"".join(lines[:3]), [b"".join(lines[3:8]), b"".join(lines[8:16]), b"".join(lines[16:])]
    path = tmp_path / "server.log"
    path.write_bytes(first)
    clock = ManualClock()
    gap = 2.0  # a crash loop's restart gap (the daemon bench's are 1 to 2 s)
    async with open_store(tmp_path / "state") as store:
        saves = SavesSeen(store)
        follower = LaunchFollower(_spec(path), source=LocalSource(path), clock=clock, checkpoints=saves)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, follower)
                await tg.start(follower.run)
                await saves.wait_for(len(first), clock)  # the file's first bytes
                size = len(first)
                for part in parts:
                    with path.open("ab") as f:
                        f.write(part)
                    size += len(part)
                    await _read_to(follower, size)
                    await clock.advance(gap)  # 3 x 2 s: a save after a transition would be due (5 s)
                assert follower.analyzer.lifecycle.current.state == State.READY  # transitions came
                checkpoints = follower._checkpoints
                assert checkpoints is not None
                assert not checkpoints._busy  # none started (a save may still be on its way to the store)
                assert set(saves.offsets) == {len(first)}
                await clock.advance(CHECKPOINT_QUIET - gap)
                await saves.wait_for(size, clock)
                tg.cancel_scope.cancel()


async def test_a_log_that_keeps_growing_is_looked_at_for_its_quiet_every_few_seconds_and_saved_once_quiet(
    tmp_path: Path,
) -> None:
    """A log that grows for long (a line a second: never quiet for `CHECKPOINT_QUIET`) wakes the follower's clock
    to look for the quiet its checkpoint waits for no more often than every `CHECKPOINT_SLACK - CHECKPOINT_QUIET`
    seconds, not every `CHECKPOINT_QUIET`; once it stops, it is saved where it ends, `CHECKPOINT_QUIET` to
    `CHECKPOINT_SLACK` seconds after its last line."""
    first = _read(READY)
    path = tmp_path / "server.log"
    path.write_bytes(first)
    clock = ManualClock()
    async with open_store(tmp_path / "state") as store:
        saves = SavesSeen(store)
        follower = LaunchFollower(_spec(path), source=LocalSource(path), clock=clock, checkpoints=saves)
        ticks: list[float] = []
        tick = follower.analyzer.tick

        def counted(now: float) -> Any:
            ticks.append(now)
            return tick(now)

        follower.analyzer.tick = counted  # type: ignore[method-assign]
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, follower)
                await tg.start(follower.run)
                await saves.wait_for(len(first), clock)  # the file as it was, and ready
                assert follower.analyzer.lifecycle.current.state == State.READY
                size, grown, start = len(first), 60, clock.now()
                for _ in range(grown):
                    with path.open("ab") as f:
                        f.write(b"an unrelated line of output, the log growing\n")
                    size = path.stat().st_size
                    await _read_to(follower, size)
                    await clock.advance(1.0)
                last = clock.now() - 1.0
                looks = [t for t in ticks if t >= start]
                assert len(looks) <= grown // (CHECKPOINT_SLACK - CHECKPOINT_QUIET) + 2
                checkpoints = follower._checkpoints
                assert checkpoints is not None
                before = checkpoints._saved_at  # (the follower's clock: the manual one)
                while checkpoints._saved_at == before and clock.now() - last < 3 * CHECKPOINT_SLACK:
                    await clock.advance(0.25)
                    await anyio.wait_all_tasks_blocked()
                assert CHECKPOINT_QUIET <= checkpoints._saved_at - last <= CHECKPOINT_SLACK + 0.5
                await saves.wait_for(size, clock)
                tg.cancel_scope.cancel()


class SlowToIdentify(CountingSource):
    """A real local source whose file identification (an SSH command, on a remote host) hangs until released."""

    def __init__(self, inner: LocalSource) -> None:
        super().__init__(inner)
        self.asked = anyio.Event()
        self.release = anyio.Event()

    async def identify(self, offset: int) -> FileIdentity | None:
        self.asked.set()
        await self.release.wait()
        return await self.inner.identify(offset)


async def test_reading_and_ticks_never_wait_for_a_checkpoint_being_saved(tmp_path: Path) -> None:
    """A save that hangs identifying the file (a host slow to open another channel) holds back neither the
    lines nor the clock: a stall is still seen, then the rest of the startup written meanwhile is read and the
    launch is ready, while the save still waits."""
    data = _read(READY)
    path = tmp_path / "server.log"
    path.write_bytes(data[: len(data) * 2 // 3])
    clock = ManualClock()
    source = SlowToIdentify(LocalSource(path))
    async with open_store(tmp_path / "state") as store:
        follower = LaunchFollower(
            _spec(path, stall_after=60.0), source=source, clock=clock, checkpoints=store
        )

        async def concluded(state: str) -> None:
            for _ in range(100):  # virtual minutes, a tick at a time
                await clock.advance(GRACE)
                if follower.concluded is not None and follower.concluded.state.value == state:
                    return
            raise AssertionError(f"not {state}: {follower.concluded}")

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, follower)
                await tg.start(follower.run)
                await clock.advance(CHECKPOINT_INTERVAL + 1.0)
                await source.asked.wait()  # a save is under way, stuck
                await concluded("stalled")
                with path.open("ab") as f:
                    f.write(data[len(data) * 2 // 3 :])
                # the file is read in real time by a worker thread, which sets no event: the virtual clock moves
                # on once it has been read (under the test's deadline)
                while follower.analyzer.bytes_read < len(data):  # noqa: ASYNC110
                    await anyio.sleep(0.005)
                await concluded("ready")
                assert not source.release.is_set()
                source.release.set()
                tg.cancel_scope.cancel()


async def _drain(follower: LaunchFollower) -> None:
    with follower.updates:
        async for _ in follower.updates:
            pass


@pytest.mark.sshd
async def test_a_restarted_follower_over_ssh_resumes_at_the_offset(
    tmp_path: Path, sshd: Any, ssh_options: SSHOptions
) -> None:
    """Over the real sshd: the file is identified on the host, the remote reader starts at the offset and
    sends only the appended bytes, and the verdict is the replay's; a file replaced on the host is read
    from its start."""
    data = _read(CRASH)
    path = tmp_path / "server.log"
    cut = len(data) // 3
    path.write_bytes(data[:cut])
    spec = _spec(f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{path}")

    def source(pool: SSHPool) -> CountingSource:
        return CountingSource(
            SSHSource(pool, sshd.host, str(path), port=sshd.port, user=sshd.user, stat_interval=0.05)
        )

    async with SSHPool(ssh_options) as pool, open_store(tmp_path / "state") as store:
        first = source(pool)
        await _follow(spec, first, store)
        assert first.bytes == cut
        with path.open("ab") as f:
            f.write(data[cut:])
        second = source(pool)
        follower = await _follow(spec, second, store)
        assert follower.resumed_at == cut
        assert (second.first_offset, second.bytes) == (cut, len(data) - cut)
        _, replayed = replay_path(path)
        replayed = replayed.to_json()
        assert follower.concluded is not None
        assert _key(follower.concluded.verdict) == _key(replayed)

        _replace(path, data)
        third = source(pool)
        follower = await _follow(spec, third, store)
        assert (follower.resumed_at, third.first_offset, third.bytes) == (None, 0, len(data))


async def test_a_restarted_daemon_resumes_each_launch_at_its_checkpoint(tmp_path: Path) -> None:
    """The daemon with a state store: stopped mid-launch, the log grows, a new daemon on the same state resumes
    the launch at the offset it had reached and ends with the replay's verdict and line count."""
    from watchdog.daemon.supervisor import Daemon, LaunchPlan  # noqa: PLC0415 - the daemon only for this test

    data = _read(CRASH)
    path = tmp_path / "server.log"
    cut = len(data) // 5
    path.write_bytes(data[:cut])
    plans = {"resumed": LaunchPlan(_spec(path))}

    async def run(until: str) -> list[dict[str, Any]]:
        daemon = Daemon(plans, store=store, handle_signals=False)
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                await tg.start(daemon.run)
                statuses = await daemon.wait_until(lambda s: s[0]["state"] == until)
                await daemon.stop()
        return statuses

    async with open_store(tmp_path / "state") as store:
        with capture_logs() as first_logs:
            await run("capturing_graphs")
        assert not [e for e in first_logs if e["event"] == "resuming from checkpoint"]
        with path.open("ab") as f:
            f.write(data[cut:])
        with capture_logs() as logs:
            (status,) = await run("crashed")
    resumed = [e for e in logs if e["event"] == "resuming from checkpoint"]
    assert [(e["launch"], e["offset"]) for e in resumed] == [("resumed", cut)]
    _, replayed = replay_path(path)
    replayed = replayed.to_json()
    assert _key(status) == _key(replayed)
    assert (status["lines_read"], status["bytes_read"]) == (replayed["lines_read"], replayed["bytes_read"])


def _upgraded(root: Path, version: str) -> Path:
    """A copy of this package under `root`, another build of it: its version says `version`, and one line of
    its code differs (a build id, a hash of the package's code and version, would tell the two apart)."""
    package = root / "watchdog"
    shutil.copytree(Path(watchdog.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    vocabulary = package / "vocabulary.py"
    text = vocabulary.read_text()
    assert "return _version(DISTRIBUTION)" in text
    vocabulary.write_text(text.replace("return _version(DISTRIBUTION)", f"return {version!r}"))
    with (package / "core" / "lifecycle.py").open("a") as f:
        f.write("\n_UPGRADED = True  # another build's code\n")
    return root


def _build_info(url: str) -> str:
    text = get(url + "metrics", timeout=DEADLINE).text
    return next(line for line in text.splitlines() if line.startswith("watchdog_build_info{"))


def test_a_launch_resumed_across_an_upgrade_reads_only_the_bytes_appended(tmp_path: Path) -> None:
    """Issue 27's done-when: a daemon follows a launch and stops; the log grows; another build of the package
    (its version and code changed) starts on the same state directory and resumes at the checkpoint's offset
    (no "checkpoint ignored": before, another build's checkpoint was refused and the log read again from its
    start), reading only the appended bytes, and its verdict, line and byte counts are those of `watchdog
    replay` of the whole log."""
    data = _read(CRASH)
    lines = data.splitlines(keepends=True)
    cut = sum(map(len, lines[:43]))  # the first part ends with line 43, which begins the graph capture
    log = tmp_path / "server.log"
    log.write_bytes(data[:cut])
    config = tmp_path / "watchdog.toml"
    config.write_text(
        f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "state"}"\nlog_format = "json"\n\n'
        f'[launches.L]\nlog = "{log}"\n'
    )
    first = DaemonProcess(config, deadline=DEADLINE)
    try:
        url = first.wait(event="http_listening")["url"]
        first.wait(event="transition", launch="L", state="capturing_graphs", line=43)  # the whole first part
        old_build = _build_info(url)
        first.stop()
    finally:
        first.close()
    with log.open("ab") as f:
        f.write(data[cut:])
    root = _upgraded(tmp_path / "upgraded", "99.0+upgraded")
    env = {**os.environ, "PYTHONPATH": str(root)}
    second = DaemonProcess(config, deadline=DEADLINE, env=env, cwd=root)
    try:
        url = second.wait(event="http_listening")["url"]
        second.wait(event="announced", launch="L", state="crashed")
        status = get(url + "status", timeout=DEADLINE).json()[0]
        new_build = _build_info(url)
        second.stop()
    finally:
        second.close()
    assert 'version="99.0+upgraded"' in new_build
    assert new_build != old_build
    assert not [
        e for e in second.seen if e.get("event") == "checkpoint ignored; reading the log from its start"
    ]
    resumed = [e for e in second.seen if e.get("event") == "resuming from checkpoint"]
    assert [(e["launch"], e["offset"]) for e in resumed] == [("L", cut)]
    replayed = json.loads(
        subprocess.run(
            [sys.executable, "-m", "watchdog.cli", "replay", str(log), "--json"],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        ).stdout
    )
    assert _key(status) == _key(replayed)
    assert (status["lines_read"], status["bytes_read"]) == (replayed["lines_read"], replayed["bytes_read"])
    assert status["bytes_read"] == len(data)


def test_a_crash_loop_of_300_restarts_keeps_a_bounded_history_and_checkpoint(tmp_path: Path) -> None:
    """A log of 300 starts, each crashing (a server restarted by its supervisor into the same log): the
    lifecycle keeps the last PAST_INCARNATIONS_HELD past incarnations, the checkpoint stays under 128 KiB
    (it was 7 MB, over the 1 MiB cap past ~45 restarts), and the verdict still says incarnation 300 of 300,
    with the newest crash's root cause and traceback, also after the checkpoint is read back."""
    from watchdog.core.verdict import build_verdict  # noqa: PLC0415
    from watchdog.vocabulary import PAST_INCARNATIONS_HELD  # noqa: PLC0415

    one = _read(CRASH)
    analyzer = Analyzer(load_engine(None))
    for n in range(300):
        analyzer.feed(one, float(n))
    analyzer.finish(300.0)
    assert len(analyzer.lifecycle.history) == PAST_INCARNATIONS_HELD
    first, _ = replay_path(CRASH)
    _ = _.to_json()
    want = build_verdict(first).to_json()
    verdict = build_verdict(analyzer).to_json()
    assert (verdict["incarnation"], verdict["incarnations"]) == (300, 300)
    assert _key(verdict) == _key(want)
    assert verdict["error"]["traceback"] == want["error"]["traceback"]
    path = tmp_path / "log"
    path.write_bytes(one)
    blob = encode(Checkpoint(_identity(path, len(one)), 1.0, analyzer), settings="s")
    assert blob is not None
    assert len(blob) < 128 * 1024
    restored = decode(blob, settings="s").analyzer
    restored.feed(one, 301.0)
    restored.finish(302.0)
    again = build_verdict(restored).to_json()
    assert (again["incarnation"], again["incarnations"]) == (301, 301)
    assert _key(again) == _key(want)


class RefusingSaves(SavesSeen):
    """The real store, whose checkpoint writes fail (as a full disk makes them) until `refuse` is cleared."""

    def __init__(self, store: StateStore) -> None:
        super().__init__(store)
        self.refuse = True
        self.refused = 0
        self._refused = anyio.Event()

    async def save_checkpoint(self, launch: str, offset: int, blob: bytes) -> None:
        if self.refuse:
            self.refused += 1
            self._refused.set()
            self._refused = anyio.Event()
            raise OSError(28, "No space left on device")
        await super().save_checkpoint(launch, offset, blob)

    async def wait_refused(self, count: int, clock: ManualClock) -> None:
        """Let the checkpoint interval pass until `count` saves were refused."""
        while self.refused < count:
            refused = self._refused
            await clock.advance(CHECKPOINT_INTERVAL + 1.0)
            if self.refused < count:
                await refused.wait()


async def test_a_checkpoint_that_cannot_be_written_says_so_once_until_one_is(tmp_path: Path) -> None:
    """Checkpoints whose writes fail are tried at every interval and said once (one warning, not one per
    interval, not none); once one is written again that is said too, and the next failure is warned again."""
    data = _read(READY)
    path = tmp_path / "server.log"
    path.write_bytes(b"")
    clock = ManualClock()
    async with open_store(tmp_path / "state") as store:
        saves = RefusingSaves(store)
        follower = LaunchFollower(_spec(path), source=LocalSource(path), clock=clock, checkpoints=saves)
        with capture_logs() as logs, anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, follower)
                await tg.start(follower.run)
                for k in (1, 2, 3):  # a log that grows: a save is due at every interval
                    with path.open("ab") as f:
                        f.write(data[len(data) * (k - 1) // 4 : len(data) * k // 4])
                    await saves.wait_refused(k, clock)
                saves.refuse = False
                with path.open("ab") as f:
                    f.write(data[len(data) * 3 // 4 :])
                await saves.wait_for(len(data), clock)
                tg.cancel_scope.cancel()
    events = [e["event"] for e in logs if e["event"].startswith("checkpoint")]
    assert events.count("checkpoint not saved (a restart reads from the last one saved, or the start)") == 1
    assert "checkpoint saved again" in events


@pytest.mark.sshd
async def test_a_checkpoint_over_ssh_names_its_file_without_a_remote_command(
    tmp_path: Path, sshd: Any, ssh_options: SSHOptions
) -> None:
    """The SSH reader's header names the file it streams (device and inode): the follower's checkpoints are
    saved without one remote `identify` each (200 launches' saves choked their hosts); only a restore asks the
    host, once, and the checkpoint it reads back names the file `identify` finds."""
    data = _read(CRASH)
    path = tmp_path / "server.log"
    cut = len(data) // 2
    path.write_bytes(data[:cut])
    spec = _spec(f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{path}")

    async with SSHPool(ssh_options) as pool, open_store(tmp_path / "state") as store:
        commands: list[str] = []
        run, open_reader = pool.run, pool.open_reader

        async def counted_run(host: str, command: str, **kw: Any) -> Any:
            commands.append(command)
            return await run(host, command, **kw)

        async def counted_reader(host: str, name: str, args: list[str], **kw: Any) -> Any:
            commands.append(name)  # a reader script (its own channel, or through the multiplexer)
            return await open_reader(host, name, args, **kw)

        pool.run = counted_run  # type: ignore[method-assign]
        pool.open_reader = counted_reader  # type: ignore[method-assign]

        def source() -> CountingSource:
            return CountingSource(
                SSHSource(pool, sshd.host, str(path), port=sshd.port, user=sshd.user, stat_interval=0.05)
            )

        first = source()
        follower = await _follow(spec, first, store)
        assert first.bytes == cut
        assert follower._checkpoints is not None
        assert follower._checkpoints.saves >= 1
        assert [c for c in commands if "watchdog-identify" in c] == []

        with path.open("ab") as f:
            f.write(data[cut:])
        second = source()
        follower = await _follow(spec, second, store)
        assert follower.resumed_at == cut  # the saved device and inode are those the host's identify finds
        assert len([c for c in commands if "watchdog-identify" in c]) == 1  # the restore's
        assert (second.first_offset, second.bytes) == (cut, len(data) - cut)


def _looks_secret(*texts: str | bytes) -> bool:
    """Whether the look `encode` takes at a record's texts (`RecordText`) says a record holding `texts` (each a
    text, or a buffer: bytes, read as Latin-1), saved after a record without them, may hold a credential."""
    writer = RecordText()
    writer.dumps({"texts": ["before"], "tail": b""})
    return writer.dumps(
        {
            "texts": [t for t in texts if type(t) is str],
            "tail": b"".join(t for t in texts if type(t) is bytes),
        }
    )[1]


def test_the_cheap_look_finds_every_line_redaction_would_change_and_masking_keeps_lengths() -> None:
    """The look at a record's texts before every text is masked says yes for every corpus line, and every
    secret-bearing line, that `redact_text` changes, inside a record as a text and as raw bytes (Latin-1);
    `mask_secrets` keeps every length and leaves none of the secrets."""
    leaks = [
        f"--api-key {SECRETS[0]}",
        f"HF_TOKEN={SECRETS[1]}",
        f"password={SECRETS[2]}",
        "Authorization: Bearer abcdefgh12345678",
        "https://user:pw123456@example.com/x",
        f"{SECRETS[0]}",
        '{"api_key": "abcdefgh12345"}',
        "token:\tabcdefgh12345",
    ]
    lines = [line.decode("utf-8", "replace") for log in LOGS for line in _read(log).splitlines()]
    changed = [line for line in lines + leaks if redact_text(line) != line]
    assert len(changed) > len(leaks)  # the corpus has some too (`token: 7`, ...)
    for line in changed:
        assert _looks_secret(line), line
        assert _looks_secret(line.encode().decode("latin-1")), line
        assert _looks_secret(line.encode()), line
        for value in (line, line.encode(), bytearray(line.encode())):
            masked = mask_secrets(value)
            assert type(masked) is type(value)
            assert len(masked) == len(value)
    for leak in leaks:
        assert not any(secret in mask_secrets(leak) for secret in SECRETS)


def test_a_count_named_after_a_hash_is_no_reason_to_mask_a_checkpoint() -> None:
    """SGLang's serving lines (`#new-token: 7`, `#token: 380`: counts, which redaction leaves alone) do not send
    every checkpoint of a serving SGLang launch through the masking of every text of its record."""
    serving = (
        b"[2025-01-23 19:35:28 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, cache hit rate: "
        b"0.00%, token usage: 0.00, #running-req: 0, #queue-req: 0\n"
        b"[2025-01-23 19:35:29 TP0] Decode batch. #running-req: 1, #token: 380, token usage: 0.02, gen throughput "
        b"(token/s): 30.12, #queue-req: 0\n"
    )
    for pad in range(250, 280):
        # the log's kept tail (its last 8 KB) begins at each byte of the second line's start, some inside a
        # count's name (`ew-token: 380`, 254-258 and 269-276 as the bytes fall): the cut line is not kept
        analyzer = Analyzer(load_engine(None))
        analyzer.feed(_read(READY) + serving * 50 + b"x" * pad + b"\n", 0.0)
        assert not RecordText().dumps(record_values(analyzer))[1], pad
    assert _looks_secret("#running-req: 1, token: s3cr3t-value")
