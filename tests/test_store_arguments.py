"""The state file keeps each incarnation's arguments (schema 6): written with its snapshots, not erased by a
snapshot that has none, read back into the baseline a relaunch is compared with, and added to an older file."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from snapshots import verdict_from_json

from watchdog.core.arguments import Argument
from watchdog.core.verdict import Status
from watchdog.store import DB_NAME, MIGRATIONS, open_store

pytestmark = pytest.mark.anyio

ARGS = (
    Argument("mem_fraction_static", "--mem-fraction-static", "0.78"),
    Argument("tp_size", "--tp-size", "8"),
)


def _status(state: str, *, arguments: tuple[Argument, ...] = ()) -> Status:
    verdict = verdict_from_json(
        {
            "engine": "sglang",
            "state": state,
            "phase": state,
            "timeline": [
                {"state": "starting", "line": 1, "at": None, "duration_seconds": 20.0},
                {"state": "loading_weights", "line": 3, "at": None, "duration_seconds": 250.0},
                {"state": state, "line": 9, "at": None},
            ],
            "facts": {"avail_mem_after_weights_gb": 16.3, "per_gpu": {"0": 1.0}},
            "time_to_ready_seconds": 270.0,
        }
    )
    return Status(replace(verdict, arguments=arguments), name="kimi", host="gpu1")


async def test_arguments_are_kept_and_read_back_as_a_baseline(tmp_path: Path) -> None:
    """A snapshot's arguments are stored with the incarnation; a later snapshot without any (the store's
    write of a verdict that did not carry them) keeps them; the record's baseline has them, the phases it went
    through whole, its time to ready and its plain facts."""
    async with open_store(tmp_path) as store:
        await store.record_transition("kimi", 1, _status("ready", arguments=ARGS))
        await store.record_transition("kimi", 1, _status("ready"))
        [record] = await store.history("kimi")
    assert record.arguments == ARGS
    base = record.baseline()
    assert (base.incarnation, base.arguments, base.time_to_ready) == (1, ARGS, 270.0)
    assert dict(base.phases) == {"starting": 20.0, "loading_weights": 250.0}
    assert dict(base.facts) == {"avail_mem_after_weights_gb": 16.3}


async def test_an_older_state_file_gains_the_arguments_column(tmp_path: Path) -> None:
    """A state file of the schema before (5) is migrated: its incarnations are kept, with no arguments."""
    path = tmp_path / DB_NAME
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute(f"INSERT INTO schema_version VALUES ({len(MIGRATIONS) - 1})")
        for script in MIGRATIONS[:-1]:
            db.executescript(script)
        db.execute(
            "INSERT INTO incarnations (launch, incarnation, started_at, updated_at) VALUES ('kimi', 1, 1, 1)"
        )
    db.close()
    async with open_store(tmp_path) as store:
        [record] = await store.history("kimi")
        assert record.arguments == ()
        await store.record_transition("kimi", 2, _status("ready", arguments=ARGS))
        assert [r.arguments for r in await store.history("kimi")] == [ARGS, ()]
