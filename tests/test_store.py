"""The state store (a real SQLite file under tmp_path) and `watchdog history`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import unavailable
from snapshots import status_from_json, verdict_from_json
from structlog.testing import capture_logs

from watchdog import jsontext
from watchdog.alerts.outbox import Outbox
from watchdog.cli.app import main
from watchdog.cli.history import format_history
from watchdog.exceptions import ConfigError
from watchdog.store import (
    DB_NAME,
    MAX_CHECKPOINT_BYTES,
    MAX_INCARNATIONS_PER_LAUNCH,
    MAX_TRANSITIONS_PER_INCARNATION,
    MIGRATIONS,
    TRANSITION_BATCH_DELAY,
    StateStore,
    db_path,
    open_store,
)

pytestmark = pytest.mark.anyio


def entry(state: str, line: int | None, duration: float | None = None, reason: str = "") -> dict[str, Any]:
    """A timeline entry as `LaunchFollower.status()` gives it as JSON."""
    item: dict[str, Any] = {"state": state, "line": line, "at": None, "reason": reason}
    if duration is not None:
        item["duration_seconds"] = duration
    return item


def status(
    timeline: list[dict[str, Any]], facts: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """A status snapshot in the shape the daemon passes to the store."""
    last = timeline[-1]["state"] if timeline else "pending"
    out: dict[str, Any] = {
        "engine": "sglang",
        "state": last,
        "phase": last,
        "error": None,
        "timeline": timeline,
        "progress": {},
        "facts": facts or {},
        "host": "gpu1",
        "labels": {},
    }
    out.update(extra)
    return out


STARTED = [entry("starting", 1, 12.0, "launch started"), entry("loading_weights", 10, 194.0, "phase marker")]


async def test_what_was_written_survives_a_store_that_was_never_closed(tmp_path: Path) -> None:
    """A second store opened on the file of one never closed (as after kill -9) has its checkpoint (where the
    launch resumes), transitions and announcements."""
    first = await StateStore.open(tmp_path)
    try:
        assert await first.load_checkpoint("kimi") is None
        await first.record_transition("kimi", 1, status_from_json(status(STARTED)))
        await first.save_checkpoint("kimi", 4096, b"state")
        await first.record_verdict(
            "kimi", 1, verdict_from_json({"state": "ready", "phase": "ready"}), "ready"
        )
        await first.mark_announced("kimi", 1, "ready")
        second = await StateStore.open(tmp_path)
        try:
            assert await second.load_checkpoint("kimi") == b"state"
            assert await second.record_verdict(
                "kimi", 1, verdict_from_json({"state": "ready", "phase": "ready"}), "ready"
            )
            [record] = await second.history("kimi")
            assert (record.state, record.announced) == ("ready", ("ready",))
            assert [t.state for t in record.transitions] == ["starting", "loading_weights"]
        finally:
            await second.close()
    finally:
        await first.close()


def test_resume_after_kill_9_of_a_real_process(tmp_path: Path) -> None:
    """A process killed with SIGKILL after its writes leaves checkpoint, verdicts and announcements readable."""
    script = textwrap.dedent(
        f"""
        import sys, anyio
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from snapshots import status_from_json, verdict_from_json
        from watchdog.store import StateStore

        async def main():
            store = await StateStore.open({str(tmp_path)!r})
            await store.record_transition("kimi", 2, status_from_json({{"state": "crashed", "phase": "allocating_kv_cache",
                "timeline": [{{"state": "starting", "line": 1}}, {{"state": "crashed", "line": 40}}]}}))
            await store.save_checkpoint("kimi", 8192, b"state")
            await store.record_verdict("kimi", 2, verdict_from_json({{"state": "crashed", "phase": "allocating_kv_cache"}}), "crashed")
            await store.mark_announced("kimi", 2, "crashed")
            await store.record_verdict("other", 1, verdict_from_json({{"state": "ready", "phase": "ready"}}), "ready")
            print("written", flush=True)
            sys.stdin.read()  # hold the connection open until killed

        anyio.run(main)
        """
    )
    _killed_after(script, "written")

    async def check() -> None:
        async with open_store(tmp_path) as store:
            assert await store.load_checkpoint("kimi") == b"state"
            [kimi] = await store.history("kimi")
            assert (kimi.incarnation, kimi.state, kimi.announced) == (2, "crashed", ("crashed",))
            [other] = await store.history("other")
            assert other.verdict is not None
            assert (other.state, other.verdict["phase"], other.announced) == ("ready", "ready", ())
            # read again by the restarted daemon: the one announced is not announced again, the other is
            assert await store.record_verdict("kimi", 2, verdict_from_json({"state": "crashed"}), "crashed")
            assert not await store.record_verdict(
                "other", 1, verdict_from_json({"state": "ready", "phase": "ready"}), "ready"
            )

    anyio.run(check)


async def test_a_verdict_is_announced_once_across_restarts(tmp_path: Path) -> None:
    """A verdict marked announced stays announced after reopening; one saved and not announced is not."""
    ready = {"state": "ready", "phase": "ready"}
    crashed = {"state": "crashed", "phase": "ready"}
    async with open_store(tmp_path) as store:
        assert not await store.record_verdict("kimi", 1, verdict_from_json(ready), "ready")
        await store.mark_announced("kimi", 1, "ready")
        # the same incarnation crashes after ready: another verdict, announced separately
        assert not await store.record_verdict("kimi", 1, verdict_from_json(crashed), "crashed")
    async with open_store(tmp_path) as store:
        [record] = await store.history("kimi")
        assert record.verdict is not None
        assert (record.verdict["state"], record.verdict["phase"], record.announced) == (
            "crashed",
            "ready",
            ("ready",),
        )
        # saving the verdicts again (re-read after a restart): the announced one stays announced
        assert await store.record_verdict("kimi", 1, verdict_from_json(ready), "ready")
        assert not await store.record_verdict("kimi", 2, verdict_from_json(ready), "ready")
        assert not await store.record_verdict("kimi", 1, verdict_from_json(crashed), "crashed")
        await store.mark_announced("kimi", 1, "crashed")
        assert await store.record_verdict("kimi", 1, verdict_from_json(crashed), "crashed")
        [_, record] = await store.history("kimi")
        assert record.announced == ("ready", "crashed")


async def test_record_verdict_saves_and_tells_whether_it_was_announced(tmp_path: Path) -> None:
    """`record_verdict` stores the verdict under its key and says whether that key was announced before."""
    async with open_store(tmp_path) as store:
        assert (
            await store.record_verdict(
                "kimi", 1, verdict_from_json({"state": "ready", "phase": "ready"}), "ready"
            )
            is False
        )
        await store.mark_announced("kimi", 1, "ready")
        assert (
            await store.record_verdict(
                "kimi", 1, verdict_from_json({"state": "ready", "phase": "ready"}), "ready"
            )
            is True
        )
        assert (
            await store.record_verdict("kimi", 1, verdict_from_json({"state": "stalled"}), "stalled#2")
            is False
        )
        [record] = await store.history("kimi")
        assert record.announced == ("ready",)


def _committed(path: Path, query: str, launch: str) -> list[Any]:
    """`query`'s rows for `launch` as another connection sees them (committed rows only)."""
    with sqlite3.connect(path / DB_NAME) as other:
        rows = other.execute(query, (launch,)).fetchall()
    other.close()
    return rows


def _stored_states(path: Path, launch: str) -> list[str]:
    """The transitions of `launch` as another connection sees them (committed rows only)."""
    rows = _committed(
        path,
        "SELECT t.state FROM transitions t JOIN incarnations i ON i.id = t.incarnation_id"
        " WHERE i.launch = ? ORDER BY i.incarnation, t.seq",
        launch,
    )
    return [r[0] for r in rows]


def _stored_checkpoint(path: Path, launch: str) -> tuple[int, bytes] | None:
    """The checkpoint of `launch` (offset, blob) as another connection sees it (committed rows only)."""
    with sqlite3.connect(path / DB_NAME) as other:
        row = other.execute(
            "SELECT read_offset, state FROM checkpoints WHERE launch = ?", (launch,)
        ).fetchone()
    other.close()
    return None if row is None else (int(row[0]), bytes(row[1]))


async def test_write_behind_writes_a_batch_with_the_last_snapshot_of_each_incarnation(tmp_path: Path) -> None:
    """With `write_behind` running, `record_transition` returns before anything is written; the snapshots of
    that moment are then written together, the last one of an incarnation standing for the earlier ones."""
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        timeline = [entry("starting", 1), entry("loading_weights", 2), entry("allocating_kv_cache", 3)]
        for n in range(1, 4):
            await store.record_transition("kimi", 1, status_from_json(status(timeline[:n])))
        await store.record_transition("qwen", 4, status_from_json(status(timeline[:1])))
        assert _stored_states(tmp_path, "kimi") == []  # nothing on disk yet: no trip per transition
        with anyio.fail_after(TRANSITION_BATCH_DELAY + 5):
            while True:  # another connection's view: polled
                if _stored_states(tmp_path, "qwen"):
                    break
                await anyio.sleep(0.02)
        assert _stored_states(tmp_path, "kimi") == ["starting", "loading_weights", "allocating_kv_cache"]
        assert _stored_states(tmp_path, "qwen") == ["starting"]
        tg.cancel_scope.cancel()


def _taken_into(taken: list[int], timeline: list[dict[str, Any]]) -> Callable[[], Any]:
    """A snapshot given as a function: the status of `timeline` as it is when taken, its length noted in `taken`."""

    def snapshot() -> Any:
        taken.append(len(timeline))
        return status_from_json(status(timeline))

    return snapshot


async def _states_stored(path: Path, launch: str) -> None:
    """Until another connection sees a state of `launch` stored (polled), within the batch delay and 5 s."""
    with anyio.fail_after(TRANSITION_BATCH_DELAY + 5):
        while True:  # another connection's view: polled
            if _stored_states(path, launch):
                break
            await anyio.sleep(0.02)


async def test_write_behind_takes_a_snapshot_given_as_a_function_once_when_it_writes(tmp_path: Path) -> None:
    """A snapshot given as a function is taken when its batch is written, once for the incarnation's
    transitions of that batch: what is stored is the incarnation as it is then."""
    timeline = [entry("starting", 1), entry("loading_weights", 2), entry("allocating_kv_cache", 3)]
    taken: list[int] = []
    snapshot = _taken_into(taken, timeline)
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        for _ in range(3):
            await store.record_transition("kimi", 1, snapshot)
        timeline.append(entry("capturing_graphs", 4))  # more happened before the batch was written
        assert taken == []
        await _states_stored(tmp_path, "kimi")
        assert taken == [4]
        assert _stored_states(tmp_path, "kimi") == [
            "starting",
            "loading_weights",
            "allocating_kv_cache",
            "capturing_graphs",
        ]
        tg.cancel_scope.cancel()


async def test_a_startup_whose_phases_come_within_a_second_is_one_snapshot(tmp_path: Path) -> None:
    """A relaunch's phases, read a few tenths of a second apart (a crash loop's startup, as the engine prints
    it), wait for one batch: the incarnation's snapshot (a verdict built) is taken once for all of them, not
    once a phase."""
    timeline = [entry("starting", 1)]
    taken: list[int] = []
    snapshot = _taken_into(taken, timeline)
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        await store.record_transition("kimi", 1, snapshot)
        for n, state in enumerate(("loading_weights", "allocating_kv_cache"), start=2):
            await anyio.sleep(0.2)  # the log's pace: the next phase's line comes 0.2 s later
            timeline.append(entry(state, n))
            await store.record_transition("kimi", 1, snapshot)
        await _states_stored(tmp_path, "kimi")
        assert taken == [3]
        assert _stored_states(tmp_path, "kimi") == ["starting", "loading_weights", "allocating_kv_cache"]
        tg.cancel_scope.cancel()


async def test_write_behind_writes_waiting_transitions_and_checkpoints_before_any_other_call(
    tmp_path: Path,
) -> None:
    """What waits to be written (a transition, then a checkpoint after it) is on disk before another call is
    made, here a verdict: in the order it was given, so a checkpoint is never on disk without the transitions
    before it."""
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        await store.record_transition("kimi", 1, status_from_json(status(STARTED)))
        await store.save_checkpoint("kimi", 100, b"state")
        assert _stored_states(tmp_path, "kimi") == []
        assert _stored_checkpoint(tmp_path, "kimi") is None  # nothing on disk yet
        await store.record_verdict(
            "kimi", 1, verdict_from_json({"state": "ready", "phase": "ready"}), "ready"
        )
        assert _stored_states(tmp_path, "kimi") == [e["state"] for e in STARTED]
        assert _stored_checkpoint(tmp_path, "kimi") == (100, b"state")
        tg.cancel_scope.cancel()


async def test_write_behind_writes_the_last_checkpoint_of_each_launch(tmp_path: Path) -> None:
    """With `write_behind` running, `save_checkpoint` returns before anything is written; the last checkpoint
    of each launch is then written within the batch delay."""
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        await store.save_checkpoint("kimi", 100, b"first")
        await store.save_checkpoint("kimi", 200, b"second")
        await store.save_checkpoint("qwen", 50, b"other")
        assert _stored_checkpoint(tmp_path, "kimi") is None
        with anyio.fail_after(TRANSITION_BATCH_DELAY + 5):
            while True:  # another connection's view: polled
                if _stored_checkpoint(tmp_path, "qwen") is not None:
                    break
                await anyio.sleep(0.02)
        assert _stored_checkpoint(tmp_path, "kimi") == (200, b"second")
        assert _stored_checkpoint(tmp_path, "qwen") == (50, b"other")
        tg.cancel_scope.cancel()


async def test_a_snapshot_that_cannot_be_written_does_not_fail_what_is_written_with_it(
    tmp_path: Path,
) -> None:
    """A waiting snapshot whose write fails is dropped with a warning; the checkpoint waiting with it is still
    written, the call they precede is made, and the launches of later snapshots are stored as usual."""
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        broken = status_from_json(status(STARTED))
        bad = dataclasses.replace(broken.verdict.timeline[0], reason="\ud800")  # no UTF-8 for SQLite
        broken = dataclasses.replace(broken, verdict=dataclasses.replace(broken.verdict, timeline=(bad,)))
        await store.record_transition("kimi", 1, broken)
        await store.save_checkpoint("kimi", 100, b"state")
        with capture_logs() as logs:
            assert await store.load_checkpoint("kimi") == b"state"
        assert [e["event"] for e in logs] == ["transitions not stored"]
        await store.record_transition("kimi", 1, status_from_json(status(STARTED)))
        await store.save_checkpoint("kimi", 200, b"later")
        await store.flush()
        assert _stored_states(tmp_path, "kimi") == [e["state"] for e in STARTED]
        assert _stored_checkpoint(tmp_path, "kimi") == (200, b"later")
        tg.cancel_scope.cancel()


async def test_close_writes_the_transitions_still_waiting(tmp_path: Path) -> None:
    """Snapshots still waiting when the writer stops are written by `close`."""
    async with open_store(tmp_path) as store:
        async with anyio.create_task_group() as tg:
            await tg.start(store.write_behind)
            await store.record_transition("kimi", 1, status_from_json(status(STARTED)))
            tg.cancel_scope.cancel()
        assert _stored_states(tmp_path, "kimi") == []
    assert _stored_states(tmp_path, "kimi") == [e["state"] for e in STARTED]


async def test_wal_mode_and_synchronous_normal(tmp_path: Path) -> None:
    """The file is in WAL mode (seen by another connection) and the store's connection uses synchronous=NORMAL."""
    async with open_store(tmp_path) as store:
        await store.record_transition("kimi", 1, status_from_json(status(STARTED)))
        assert (tmp_path / f"{DB_NAME}-wal").exists()
        with sqlite3.connect(tmp_path / DB_NAME) as other:
            assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert other.execute("SELECT version FROM schema_version").fetchone()[0] == len(MIGRATIONS)
        other.close()
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


async def test_concurrent_writes_from_many_tasks_are_serialized(tmp_path: Path) -> None:
    """Writes from 60 tasks at once over one connection all land, with no transaction error."""
    async with open_store(tmp_path) as store:

        async def launch(n: int) -> None:
            name = f"launch-{n % 6}"
            timeline = [entry("starting", 1, 1.0), entry("loading_weights", 2 + n)]
            await store.record_transition(name, n, status_from_json(status(timeline, {"n": n})))
            await store.save_checkpoint(name, n * 10, b"state")
            await store.record_verdict(
                name, n, verdict_from_json({"state": "ready", "phase": "ready", "facts": {"n": n}}), "ready"
            )
            await store.mark_announced(name, n, "ready")

        async with anyio.create_task_group() as tg:
            for n in range(60):
                tg.start_soon(launch, n)
        records = await store.history(limit=100)
        assert len(records) == 60
        assert {(r.launch, r.incarnation, r.facts["n"], r.state) for r in records} == {
            (f"launch-{n % 6}", n, n, "ready") for n in range(60)
        }
        assert all(r.announced == ("ready",) and len(r.transitions) == 2 for r in records)
        assert [await store.load_checkpoint(f"launch-{n}") for n in range(6)] == [b"state"] * 6


async def test_timeline_entries_are_stored_once(tmp_path: Path) -> None:
    """A growing timeline adds only its new entries; a stall that returns is kept; a re-read adds nothing."""
    stall = entry("stalled", None, reason="no progress for 600s")
    resumed = entry("loading_weights", None, reason="log activity resumed")
    timeline = [*STARTED, stall, resumed, stall]
    async with open_store(tmp_path) as store:
        for n in range(1, len(timeline) + 1):
            await store.record_transition("kimi", 1, status_from_json(status(timeline[:n])))
            await store.record_transition("kimi", 1, status_from_json(status(timeline[:n])))
    async with open_store(tmp_path) as store:
        await store.record_transition(
            "kimi", 1, status_from_json(status(timeline))
        )  # read again after a restart
        [record] = await store.history()
    assert [(t.state, t.line, t.reason) for t in record.transitions] == [
        (e["state"], e["line"], e["reason"]) for e in timeline
    ]
    assert record.ongoing == "stalled"


async def test_durations_learned_later_are_filled_in(tmp_path: Path) -> None:
    """An entry's log duration, known only once the next entry came, is stored when it is known."""
    async with open_store(tmp_path) as store:
        await store.record_transition("kimi", 1, status_from_json(status([entry("starting", 1)])))
        await store.record_transition(
            "kimi", 1, status_from_json(status([entry("starting", 1, 12.5), entry("ready", 9)]))
        )
        [record] = await store.history()
    assert record.phase_durations == {"starting": 12.5}
    assert record.time_to_ready == 12.5
    assert record.ongoing is None


async def test_history_is_newest_first_and_filters_by_launch(tmp_path: Path) -> None:
    """history() lists incarnations newest first, of one launch or all, up to the limit."""
    async with open_store(tmp_path) as store:
        for launch, inc in (("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)):
            await store.record_transition(launch, inc, status_from_json(status(STARTED)))
        assert [(r.launch, r.incarnation) for r in await store.history()] == [
            ("a", 3),
            ("b", 2),
            ("a", 2),
            ("b", 1),
            ("a", 1),
        ]
        assert [r.incarnation for r in await store.history("a", limit=2)] == [3, 2]
        assert await store.history("nobody") == []


async def test_growth_is_bounded_per_launch(tmp_path: Path) -> None:
    """Beyond MAX_INCARNATIONS_PER_LAUNCH the oldest incarnations go, with their rows; transitions are capped."""
    extra = 7
    async with open_store(tmp_path) as store:
        for inc in range(1, MAX_INCARNATIONS_PER_LAUNCH + extra + 1):
            await store.record_transition("kimi", inc, status_from_json(status(STARTED)))
            await store.record_verdict("kimi", inc, verdict_from_json({"state": "ready"}), "ready")
            await store.mark_announced("kimi", inc, "ready")
        await store.record_transition("other", 1, status_from_json(status(STARTED)))
        long = [
            entry("stalled" if i % 2 else "loading_weights", i)
            for i in range(2 * MAX_TRANSITIONS_PER_INCARNATION)
        ]
        await store.record_transition("flappy", 1, status_from_json(status(long)))
        kept = await store.history("kimi", limit=1000)
        assert len(kept) == MAX_INCARNATIONS_PER_LAUNCH
        assert kept[-1].incarnation == extra + 1
        assert len(await store.history("other")) == 1
        [flappy] = await store.history("flappy")
        assert len(flappy.transitions) == MAX_TRANSITIONS_PER_INCARNATION
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        counts = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("transitions", "verdicts")]
    db.close()
    assert counts == [
        2 * (MAX_INCARNATIONS_PER_LAUNCH + 1) + MAX_TRANSITIONS_PER_INCARNATION,
        MAX_INCARNATIONS_PER_LAUNCH,
    ]


async def test_silences_expire(tmp_path: Path) -> None:
    """A silence is listed until its time passes, and can be replaced or removed."""
    async with open_store(tmp_path) as store:
        await store.add_silence("kimi", 2000.0)
        await store.add_silence("other", 1500.0)
        assert await store.silences(now=1000.0) == {"kimi": 2000.0, "other": 1500.0}
        assert await store.silences(now=1600.0) == {"kimi": 2000.0}
        await store.add_silence("kimi", 3000.0)
        assert await store.silences(now=2500.0) == {"kimi": 3000.0}
        await store.remove_silence("kimi")
        assert await store.silences(now=0.0) == {}


async def test_a_file_from_a_newer_watchdog_is_refused(tmp_path: Path) -> None:
    """A state file with a schema newer than this watchdog knows is a configuration error naming the file."""
    async with open_store(tmp_path):
        pass
    with sqlite3.connect(tmp_path / DB_NAME) as db:
        db.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS) + 1,))
    db.close()
    with pytest.raises(ConfigError, match="newer watchdog") as info:
        await StateStore.open(tmp_path)
    assert str(tmp_path / DB_NAME) in str(info.value)


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    """A state file that is not SQLite is a configuration error, not a traceback."""
    (tmp_path / DB_NAME).write_bytes(b"not a database, just text " * 100)
    with pytest.raises(ConfigError, match="not a watchdog state file"):
        await StateStore.open(tmp_path)


def _fill(state_dir: Path) -> None:
    """Two configurations of one model, as the daemon would record them."""

    async def fill() -> None:
        async with open_store(state_dir) as store:
            timeline = [
                entry("starting", 1, 12.0),
                entry("loading_weights", 10, 194.0),
                entry("allocating_kv_cache", 23, 2.0),
                entry("crashed", 40),
            ]
            crashed = status(timeline, {"avail_mem_after_weights_gb": 16.3, "kv_cache_tokens": 812345})
            await store.record_transition("kimi-mem085", 1, status_from_json(crashed))
            error = {"category": "oom", "summary": "RuntimeError: Not enough memory"}
            verdict = {**crashed, "state": "crashed", "phase": "allocating_kv_cache", "error": error}
            await store.record_verdict("kimi-mem085", 1, verdict_from_json(verdict), "crashed")
            timeline = [
                entry("starting", 1, 11.0),
                entry("loading_weights", 10, 190.0),
                entry("allocating_kv_cache", 23, 40.0),
                entry("capturing_graphs", 30, 150.0),
                entry("ready", 90),
            ]
            ready = status(timeline, {"avail_mem_after_weights_gb": 21.7, "kv_cache_tokens": 1200000})
            await store.record_transition("kimi-mem080", 1, status_from_json(ready))
            await store.record_verdict(
                "kimi-mem080", 1, verdict_from_json({**ready, "time_to_ready_seconds": 391.0}), "ready"
            )

    anyio.run(fill)


def test_history_command_puts_two_configurations_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`watchdog history` prints each incarnation as a column, newest first, facts and phases across a row."""
    # the columns it fits in are the terminal's (COLUMNS, else the test process's own terminal, 80 in a
    # narrow one, or pytest-xdist's worker's): both fit in 120
    monkeypatch.setenv("COLUMNS", "120")
    _fill(tmp_path)
    assert main(["history", "--state-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["kimi-mem080", "#1", "kimi-mem085", "#1"]
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines[1:]]
    rows = {row[0]: row[1:] for row in cells}
    assert rows["avail_mem_after_weights_gb"] == ["21.7 GB", "16.3 GB"]
    assert rows["kv_cache_tokens"] == ["1,200,000", "812,345"]
    assert rows["loading_weights"] == ["3m10s", "3m14s"]
    assert rows["capturing_graphs"] == ["2m30s"]
    assert rows["to ready"] == ["6m31s"]
    assert rows["outcome"] == ["ready after 6m31s", "crashed in allocating_kv_cache"]
    assert rows["error"] == ["oom: RuntimeError: Not enough memory"]
    # a value sits under its column's heading
    col = lines[0].index("kimi-mem085")
    assert next(line for line in lines if "avail_mem" in line).index("16.3 GB") == col


def test_history_command_filters_and_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`watchdog history LAUNCH --json` prints that launch's incarnations as a JSON list."""
    _fill(tmp_path)
    assert main(["history", "kimi-mem085", "--state-dir", str(tmp_path), "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record["launch"] == "kimi-mem085"
    assert record["state"] == "crashed"
    assert record["phase_durations"] == {
        "starting": 12.0,
        "loading_weights": 194.0,
        "allocating_kv_cache": 2.0,
    }
    assert record["facts"]["avail_mem_after_weights_gb"] == 16.3
    assert record["verdict"]["error"]["category"] == "oom"
    assert record["announced"] == []


def test_history_command_without_state_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`watchdog history` on a directory with no state file exits 64 and says which file it looked for."""
    assert main(["history", "--state-dir", str(tmp_path / "nothing")]) == 64
    err = capsys.readouterr().err
    assert "no watchdog state" in err
    assert "--state-dir" in err
    assert not (tmp_path / "nothing").exists(), "reading history must not create the state directory"


def test_history_wraps_columns_to_the_width(tmp_path: Path) -> None:
    """Columns that do not fit the width go into another block with the row labels repeated."""

    async def read() -> list[Any]:
        async with open_store(tmp_path) as store:
            for inc in range(1, 7):
                await store.record_transition(
                    "kimi", inc, status_from_json(status(STARTED, {"avail_mem_after_weights_gb": inc}))
                )
            return await store.history()

    records = anyio.run(read)
    text = format_history(records, width=80)
    blocks = text.split("\n\n")
    assert len(blocks) > 1
    assert all(len(line) <= 80 for line in text.splitlines())
    assert all("avail_mem_after_weights_gb" in block for block in blocks)
    assert text.index("kimi #6") < text.index("kimi #1")


async def test_history_reads_while_the_daemon_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`watchdog history` reads a state file that a running daemon holds open in WAL mode, and writes nothing."""
    async with open_store(tmp_path) as store:
        await store.record_transition(
            "kimi", 1, status_from_json(status(STARTED, {"avail_mem_after_weights_gb": 16.3}))
        )
        assert (tmp_path / f"{DB_NAME}-wal").stat().st_size > 0
        assert await anyio.to_thread.run_sync(main, ["history", "--state-dir", str(tmp_path), "--json"]) == 0
        [record] = json.loads(capsys.readouterr().out)
        assert (record["launch"], record["state"]) == ("kimi", "loading_weights")
        assert record["phase_durations"] == {"starting": 12.0, "loading_weights": 194.0}
        await store.record_transition("kimi", 1, status_from_json(status([*STARTED, entry("ready", 30)])))
        [after] = await store.history()
        assert after.state == "ready"


async def test_a_version_1_state_file_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    """A state file written before checkpoints (schema 1) gains the checkpoints table and keeps its data."""
    path = tmp_path / DB_NAME
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version VALUES (1)")
        for statement in MIGRATIONS[0].split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(
            "INSERT INTO incarnations (launch, incarnation, started_at, updated_at, read_offset)"
            " VALUES ('kimi', 1, 1.0, 1.0, 4096)"
        )
    db.close()
    async with open_store(tmp_path) as store:
        [record] = await store.history("kimi")
        assert record.offset == 4096
        assert await store.load_checkpoint("kimi") is None
        await store.save_checkpoint("kimi", 4096, b"state")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM schema_version").fetchone()[0] == len(MIGRATIONS)
    db.close()


# The outbox's table as watchdog.alerts.outbox made it itself, before it was a migration (schema 2).
_OLD_OUTBOX = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY,
    notifier TEXT NOT NULL,
    destination INTEGER NOT NULL,
    key TEXT NOT NULL,
    alert TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_try REAL NOT NULL,
    delivered_at REAL,
    failed_at REAL,
    error TEXT NOT NULL DEFAULT '',
    UNIQUE (notifier, destination, key)
)
"""


@pytest.mark.parametrize("first", ["store", "outbox"])
async def test_a_version_2_state_file_is_migrated_and_keeps_its_pending_alerts(
    tmp_path: Path, first: str
) -> None:
    """A state file of schema 2, with the outbox table the outbox made itself and an alert pending in it, is
    migrated by whichever opens it first (store or outbox): the alert is still pending, and the verdicts
    announced are still announced."""
    path = tmp_path / DB_NAME
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version VALUES (2)")
        for script in MIGRATIONS[:2]:
            for statement in script.split(";"):
                if statement.strip():
                    db.execute(statement)
        db.execute(_OLD_OUTBOX)
        db.execute(
            "INSERT INTO outbox (notifier, destination, key, alert, created_at, attempts, next_try)"
            " VALUES ('pager', 0, 'kimi/1/crashed', '{\"state\": \"crashed\"}', 5.0, 2, 9.0)"
        )
        db.execute(
            "INSERT INTO incarnations (launch, incarnation, started_at, updated_at) VALUES ('kimi', 1, 1, 1)"
        )
        db.execute(
            "INSERT INTO verdicts (incarnation_id, key, verdict, saved_at, announced_at)"
            " VALUES (1, 'ready', '{}', 1.0, 2.0), (1, 'crashed', '{}', 3.0, NULL)"
        )
    db.close()
    if first == "outbox":
        await (await Outbox.open(path)).close()
    async with open_store(tmp_path) as store:
        box = await Outbox.open(store.path)
        try:
            [item] = await box.pending()
            assert (item.notifier, item.destination, item.key, item.alert) == (
                "pager",
                0,
                "kimi/1/crashed",
                {"state": "crashed"},
            )
            assert (item.created_at, item.attempts, item.next_try) == (5.0, 2, 9.0)
            await box.delivered(item, 10.0)
            assert await box.pending() == []
        finally:
            await box.close()
        [record] = await store.history("kimi")
        assert record.announced == ("ready",)
        assert await store.record_verdict("kimi", 1, verdict_from_json({"state": "ready"}), "ready")
        assert not await store.record_verdict("kimi", 1, verdict_from_json({"state": "crashed"}), "crashed")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM schema_version").fetchone()[0] == len(MIGRATIONS)
    db.close()


async def test_a_checkpoint_is_kept_per_launch_replaced_and_survives_a_reopen(tmp_path: Path) -> None:
    """The last checkpoint saved for a launch is the one loaded, also by a store opened again; other launches'
    checkpoints are untouched."""
    async with open_store(tmp_path) as store:
        await store.save_checkpoint("a", 10, b"first")
        await store.save_checkpoint("a", 20, b"second")
        await store.save_checkpoint("b", 5, b"\x00\xff binary")
    async with open_store(tmp_path) as store:
        assert await store.load_checkpoint("a") == b"second"
        assert await store.load_checkpoint("b") == b"\x00\xff binary"
        assert await store.load_checkpoint("c") is None


async def test_a_checkpoint_over_the_cap_is_refused_and_the_last_one_kept(tmp_path: Path) -> None:
    """A blob larger than MAX_CHECKPOINT_BYTES is not written: ValueError, and the previous one stays."""
    async with open_store(tmp_path) as store:
        await store.save_checkpoint("a", 10, b"kept")
        with pytest.raises(ValueError, match="over the"):
            await store.save_checkpoint("a", 20, b"x" * (MAX_CHECKPOINT_BYTES + 1))
        assert await store.load_checkpoint("a") == b"kept"


@pytest.mark.parametrize("what", ["store", "outbox"])
async def test_closed_from_a_cancelled_scope_the_file_is_still_closed(tmp_path: Path, what: str) -> None:
    """The supervisor closes the outbox (and `open_store` the store) while its scope is being cancelled: the
    SQLite connection is closed all the same, not left to the garbage collector (Python 3.13 warns)."""
    opened = await (StateStore.open(tmp_path) if what == "store" else Outbox.open(db_path(tmp_path)))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await opened.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        opened._conn.execute("SELECT 1")


def test_history_never_prints_a_duration_an_older_build_stored_unbounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state file in which an older build kept a phase of decades and a time to ready of -7200 s: `watchdog
    history` shows them as unknown, never a negative duration nor decades."""
    monkeypatch.setenv("COLUMNS", "120")

    async def fill() -> None:
        async with open_store(tmp_path) as store:
            timeline = [
                entry("starting", 1, 946_684_800.0),
                entry("loading_weights", 10, -7220.0),
                entry("ready", 90),
            ]
            ready = status(timeline)
            await store.record_transition("off", 1, status_from_json(ready))
            await store.record_verdict(
                "off", 1, verdict_from_json({**ready, "time_to_ready_seconds": -7200.0}), "ready"
            )

    anyio.run(fill)
    assert main(["history", "--state-dir", str(tmp_path)]) == 0
    rows = {
        row[0]: row[1:]
        for row in (re.split(r"\s{2,}", x.strip()) for x in capsys.readouterr().out.splitlines())
    }
    assert rows["outcome"] == ["ready"]
    shown = [cell for label, row in rows.items() if label != "started (UTC)" for cell in row]
    assert not [cell for cell in shown if cell.startswith("-") or "-" in cell.split()[-1]], rows
    assert rows.get("to ready") in (None, [], [""]), rows  # unknown, not -7200 s
    assert main(["history", "--state-dir", str(tmp_path), "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record["time_to_ready_seconds"] is None
    assert all(0 <= d < 60 for d in record["phase_durations"].values()), (
        record
    )  # the wall clock's, not the log's


def _stored_verdicts(path: Path, launch: str) -> list[tuple[int, str | None, str | None]]:
    """Each incarnation of `launch` (number, state, the verdict's state) as another connection sees them."""
    rows = _committed(
        path,
        "SELECT incarnation, state, json_extract(verdict, '$.state') FROM incarnations WHERE launch = ?"
        " ORDER BY incarnation",
        launch,
    )
    return [(int(n), state, verdict) for n, state, verdict in rows]


def _stored_announced(path: Path, launch: str) -> list[tuple[int, str]]:
    """The announcements of `launch` (incarnation, key) as another connection sees them."""
    with sqlite3.connect(path / DB_NAME) as other:
        rows = other.execute(
            "SELECT i.incarnation, v.key FROM verdicts v JOIN incarnations i ON i.id = v.incarnation_id"
            " WHERE i.launch = ? ORDER BY i.incarnation, v.key",
            (launch,),
        ).fetchall()
    other.close()
    return [(int(n), str(key)) for n, key in rows]


async def _written(path: Path, launch: str, incarnation: int) -> None:
    """Wait (a deadline, polled from another connection) until the verdict of the incarnation is on disk."""
    with anyio.fail_after(TRANSITION_BATCH_DELAY + 5):
        while True:  # another connection's view: polled
            if any(n == incarnation and v for n, _, v in _stored_verdicts(path, launch)):
                break
            await anyio.sleep(0.02)


async def test_a_verdict_said_to_no_one_is_noted_announced_with_its_write(tmp_path: Path) -> None:
    """`record_verdict(..., announce=True)` (nothing goes to the outbox to note it with) writes the verdict and
    its announcement together: the first time it was not announced, from then on (a restart too) it was."""
    crashed = verdict_from_json({"state": "crashed", "phase": "ready"})
    async with open_store(tmp_path) as store:
        assert not await store.record_verdict("kimi", 1, crashed, "crashed", announce=True)
        assert _stored_announced(tmp_path, "kimi") == [(1, "crashed")]
        assert await store.record_verdict("kimi", 1, crashed, "crashed", announce=True)
        assert not await store.record_verdict("kimi", 1, crashed, "crashed#2")  # another key: not noted
    async with open_store(tmp_path) as store:
        assert await store.record_verdict("kimi", 1, crashed, "crashed", announce=True)
        assert _stored_announced(tmp_path, "kimi") == [(1, "crashed")]


async def test_a_verdict_of_an_incarnation_born_in_this_process_is_written_with_the_batch(
    tmp_path: Path,
) -> None:
    """With `write_behind` running, the verdict (said to no one) of an incarnation numbered above what
    `last_incarnations` found in the file returns at once, answered from memory, and is written with its
    announcement in the next batch; one of an incarnation the file had is written and read at once."""
    ready = verdict_from_json({"state": "ready", "phase": "ready"})
    crashed = verdict_from_json({"state": "crashed", "phase": "ready"})
    async with open_store(tmp_path) as store:
        await store.record_verdict("kimi", 1, ready, "ready")
        await store.mark_announced("kimi", 1, "ready")
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        assert await store.last_incarnations() == {"kimi": (1, False)}
        # known in the file: asked of it, written now
        assert await store.record_verdict("kimi", 1, ready, "ready", announce=True)
        # born here: not on disk yet, and answered without a read
        assert not await store.record_verdict("kimi", 2, crashed, "crashed", announce=True)
        assert not await store.record_verdict("qwen", 1, crashed, "crashed", announce=True)  # a launch unseen
        assert _stored_verdicts(tmp_path, "kimi") == [(1, "ready", "ready")]
        assert await store.record_verdict("kimi", 2, crashed, "crashed", announce=True)
        await _written(tmp_path, "kimi", 2)
        await _written(tmp_path, "qwen", 1)
        assert _stored_verdicts(tmp_path, "kimi") == [(1, "ready", "ready"), (2, "crashed", "crashed")]
        assert _stored_announced(tmp_path, "kimi") == [(1, "ready"), (2, "crashed")]
        assert _stored_announced(tmp_path, "qwen") == [(1, "crashed")]
        tg.cancel_scope.cancel()


async def test_a_verdict_announced_through_the_outbox_is_asked_of_the_file(tmp_path: Path) -> None:
    """A verdict recorded without `announce` (its announcement goes with its outbox rows, on another
    connection) is written at once, and its incarnation's later answers are read from the file: an
    announcement the store did not write is never taken for none."""
    crashed = verdict_from_json({"state": "crashed", "phase": "ready"})
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        await store.last_incarnations()
        assert not await store.record_verdict("kimi", 1, crashed, "crashed")
        assert _stored_verdicts(tmp_path, "kimi") == [(1, "crashed", "crashed")]
        with sqlite3.connect(tmp_path / DB_NAME) as other:  # as `Outbox` notes it (`Notes.announced`)
            other.execute(
                "INSERT INTO verdicts (incarnation_id, key, announced_at)"
                " SELECT id, 'crashed', 0 FROM incarnations WHERE launch = 'kimi' AND incarnation = 1"
            )
        other.close()
        assert await store.record_verdict("kimi", 1, crashed, "crashed", announce=True)
        tg.cancel_scope.cancel()


def test_a_crash_whose_verdict_waited_for_its_batch_is_said_once_after_kill_9(tmp_path: Path) -> None:
    """A daemon killed before the batch that holds a verdict (said to no one) and its announcement is written
    loses both together: the next one, reading the crash again, finds it not announced and says it, once."""
    script = textwrap.dedent(
        f"""
        import sys, anyio
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from snapshots import verdict_from_json
        from watchdog.store import StateStore

        async def main():
            store = await StateStore.open({str(tmp_path)!r})
            await store.record_verdict("kimi", 1, verdict_from_json({{"state": "ready"}}), "ready", announce=True)
            async with anyio.create_task_group() as tg:
                await tg.start(store.write_behind)
                await store.last_incarnations()
                said = await store.record_verdict(
                    "kimi", 2, verdict_from_json({{"state": "crashed"}}), "crashed", announce=True
                )
                print("deferred" if not said else "said before", flush=True)
                sys.stdin.read()  # the event loop held until killed: the batch is never written

        anyio.run(main)
        """
    )
    _killed_after(script, "deferred")

    async def restarted() -> None:
        assert _stored_verdicts(tmp_path, "kimi") == [(1, "ready", "ready")]
        assert _stored_announced(tmp_path, "kimi") == [(1, "ready")]
        async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
            await tg.start(store.write_behind)
            assert await store.last_incarnations() == {"kimi": (1, False)}
            crashed = verdict_from_json({"state": "crashed"})
            assert not await store.record_verdict("kimi", 2, crashed, "crashed", announce=True)  # said now
            assert await store.record_verdict("kimi", 2, crashed, "crashed", announce=True)  # and only now
            assert await store.record_verdict("kimi", 1, verdict_from_json({"state": "ready"}), "ready")
            tg.cancel_scope.cancel()
        assert _stored_announced(tmp_path, "kimi") == [(1, "ready"), (2, "crashed")]

    anyio.run(restarted)


async def test_a_waiting_verdict_does_not_undo_a_newer_snapshot_of_its_incarnation(tmp_path: Path) -> None:
    """A snapshot taken after a verdict that waits in the same batch is the newer: the incarnation's state is
    the snapshot's, its verdict object the verdict's."""
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        await store.last_incarnations()
        ready = verdict_from_json({"state": "ready", "phase": "ready"})
        assert not await store.record_verdict("kimi", 1, ready, "ready", announce=True)
        timeline = [entry("starting", 1), entry("ready", 2), entry("crashed", 3)]
        await store.record_transition("kimi", 1, lambda: status_from_json(status(timeline)))
        await _written(tmp_path, "kimi", 1)
        assert _stored_verdicts(tmp_path, "kimi") == [(1, "crashed", "ready")]
        tg.cancel_scope.cancel()


async def test_a_verdict_stands_for_the_snapshot_that_waits(tmp_path: Path) -> None:
    """`stands_for` puts a status made of the verdict in place of the snapshot function that waits for the
    incarnation (never called then); with none waiting it makes nothing."""
    called: list[str] = []

    def snapshot() -> Any:
        called.append("snapshot")
        return status_from_json(status([entry("starting", 1)]))

    def of_verdict() -> Any:
        called.append("verdict")
        return status_from_json(status([entry("starting", 1), entry("crashed", 9)]))

    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        assert not store.stands_for("kimi", 1, of_verdict)
        await store.record_transition("kimi", 1, snapshot)
        assert store.stands_for("kimi", 1, of_verdict)
        assert not store.stands_for("kimi", 1, of_verdict)  # a status waits now, not a function
        with anyio.fail_after(TRANSITION_BATCH_DELAY + 5):
            while True:  # another connection's view: polled
                if _stored_states(tmp_path, "kimi"):
                    break
                await anyio.sleep(0.02)
        assert called == ["verdict"]
        assert _stored_states(tmp_path, "kimi") == ["starting", "crashed"]
        tg.cancel_scope.cancel()


def _killed_after(script: str, word: str) -> None:
    """Run `script` in a fresh interpreter until it prints `word`, then kill it with SIGKILL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the writer did not report within 60 s"
        assert proc.stdout.readline().strip() == word
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


async def test_an_incarnation_written_again_is_not_read_back(tmp_path: Path) -> None:
    """A crash loop's later writes of an incarnation (its next transitions, its verdict) ask the file nothing:
    its row and timeline are those the store wrote last; what they add is stored as before."""
    statements: list[str] = []
    async with open_store(tmp_path) as store:
        await store.record_transition("kimi", 1, status_from_json(status(STARTED)))
        store._conn.set_trace_callback(statements.append)
        crashed = [*STARTED, entry("crashed", 40, reason="Scheduler hit an exception")]
        await store.record_transition("kimi", 1, status_from_json(status(crashed)))
        await store.record_verdict(
            "kimi", 1, verdict_from_json({"state": "crashed", "phase": "ready"}), "crashed"
        )
        store._conn.set_trace_callback(None)
        [record] = await store.history()
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert selects == [s for s in selects if "FROM verdicts" in s]  # whether it was announced: asked
    assert [t.state for t in record.transitions] == [e["state"] for e in crashed]
    assert record.state == "crashed"
    assert record.verdict is not None
    assert record.verdict["state"] == "crashed"


async def test_a_write_that_failed_leaves_no_row_behind_for_the_next(tmp_path: Path) -> None:
    """An incarnation's first write that fails (rolled back: a reason SQLite cannot encode) leaves the next
    write of it to make its row anew: the verdict written after it is stored, not lost on a row that is gone."""
    async with open_store(tmp_path) as store:
        broken = status_from_json(status(STARTED))
        bad = dataclasses.replace(broken.verdict.timeline[0], reason="\ud800")  # no UTF-8 for SQLite
        broken = dataclasses.replace(broken, verdict=dataclasses.replace(broken.verdict, timeline=(bad,)))
        with pytest.raises(UnicodeEncodeError):
            await store.record_transition("kimi", 1, broken)
        await store.record_verdict(
            "kimi", 1, verdict_from_json({"state": "crashed", "phase": "ready"}), "crashed"
        )
        await store.record_transition("kimi", 1, status_from_json(status(STARTED)))
        [record] = await store.history()
    assert record.verdict is not None
    assert record.verdict["state"] == "crashed"
    assert [t.state for t in record.transitions] == [e["state"] for e in STARTED]


CRASH_VERDICT = {
    "state": "crashed",
    "phase": "allocating_kv_cache",
    "error": {
        "category": "oom",
        "summary": "RuntimeError: Größe 1.5e-07 GB",
        "traceback": ["Traceback", "x"],
    },
    "timeline": [entry("starting", 1, 12.0, "launch started"), entry("crashed", 9, reason="fatal")],
    "facts": {"avail_mem_after_weights_gb": 16.3, "kv_cache_tokens": 812345, "ratio": 1.5e-07},
}


@pytest.mark.parametrize("orjson", [pytest.param(True, id="orjson"), pytest.param(False, id="json")])
async def test_a_stored_verdict_reads_back_as_json_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, orjson: bool
) -> None:
    """The state file's JSON (a verdict, its facts) is orjson's where it is installed (the `fast` extra), else
    json's compact text as before; either reads back as the same values."""
    if orjson and not jsontext.HAS_ORJSON:
        unavailable("orjson is not installed (the `fast` extra)", "WATCHDOG_REQUIRE_ORJSON")
    if not orjson:
        monkeypatch.setattr(jsontext, "_ORJSON", None)
    verdict = verdict_from_json(CRASH_VERDICT)
    async with open_store(tmp_path) as store:
        await store.record_verdict("kimi", 1, verdict, "crashed")
    [(text, facts)] = _committed(tmp_path, "SELECT verdict, facts FROM incarnations WHERE launch = ?", "kimi")
    assert json.loads(text) == verdict.to_json()
    assert json.loads(facts) == CRASH_VERDICT["facts"]
    as_json = json.dumps(verdict.to_json(), default=str, separators=(",", ":"))
    if orjson:  # orjson's own text: the summary's letters as they are, not \u escapes
        assert "Größe" in text
        assert text != as_json
    else:
        assert text == as_json


async def _crash_batch(store: StateStore, verdict: Any) -> None:
    """A crash as the daemon records it with `write_behind` running: its transition's snapshot, the verdict's
    status standing for it, the verdict (said to no one) noted announced with it; then the batch written."""
    await store.record_transition("kimi", 2, lambda: status_from_json(status(STARTED)))
    assert store.stands_for(
        "kimi", 2, lambda: dataclasses.replace(status_from_json(status([])), verdict=verdict)
    )
    assert not await store.record_verdict("kimi", 2, verdict, "crashed", announce=True)
    await store.flush()


async def test_a_verdict_whose_status_stood_for_its_snapshot_is_written_in_one_statement(
    tmp_path: Path,
) -> None:
    """A crash's verdict written in the batch where its own status stood for the incarnation's snapshot: the row's
    state, facts and the rest are written once (the snapshot's), the verdict's object and time in one more
    statement; the row reads as when each was written whole."""
    verdict = verdict_from_json(CRASH_VERDICT)
    statements: list[str] = []
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        await store.last_incarnations()
        store._conn.set_trace_callback(statements.append)
        await _crash_batch(store, verdict)
        store._conn.set_trace_callback(None)
        tg.cancel_scope.cancel()
    updates = [s for s in statements if s.lstrip().upper().startswith("UPDATE INCARNATIONS")]
    assert len(updates) == 2
    [(state, phase, facts, text)] = _committed(
        tmp_path, "SELECT state, phase, facts, verdict FROM incarnations WHERE launch = ?", "kimi"
    )
    assert (state, phase) == ("crashed", "allocating_kv_cache")
    assert json.loads(facts) == CRASH_VERDICT["facts"]
    assert json.loads(text) == verdict.to_json()
    assert _stored_announced(tmp_path, "kimi") == [(2, "crashed")]


async def test_a_verdict_written_after_its_snapshot_failed_writes_its_row_whole(tmp_path: Path) -> None:
    """When the snapshot its status stood for cannot be stored (a reason SQLite cannot encode: that part of the
    batch is dropped), the verdict written after it still sets the incarnation's state, phase and facts."""
    good = verdict_from_json(CRASH_VERDICT)
    bad = dataclasses.replace(good.timeline[0], reason="\ud800")  # no UTF-8 for SQLite
    verdict = dataclasses.replace(good, timeline=(bad, *good.timeline[1:]))
    async with open_store(tmp_path) as store, anyio.create_task_group() as tg:
        await tg.start(store.write_behind)
        await store.last_incarnations()
        with capture_logs() as logs:
            await _crash_batch(store, verdict)
        tg.cancel_scope.cancel()
    assert [e["event"] for e in logs] == ["transitions not stored"]
    [(state, phase, facts)] = _committed(
        tmp_path, "SELECT state, phase, facts FROM incarnations WHERE launch = ?", "kimi"
    )
    assert (state, phase) == ("crashed", "allocating_kv_cache")
    assert json.loads(facts) == CRASH_VERDICT["facts"]
