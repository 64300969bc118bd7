"""Durable state: per launch and incarnation the state, transitions, facts and verdicts (SQLite; docs/architecture.md)."""

from __future__ import annotations

from watchdog.store.database import (
    DB_NAME,
    LOCK_NAME,
    MIGRATIONS,
    StateDirLock,
    connect,
    db_path,
    lock_state_dir,
    passing,
    refuse_legacy_state,
    transaction,
)
from watchdog.store.records import IncarnationRecord, TransitionRecord
from watchdog.store.state import (
    MAX_CHECKPOINT_BYTES,
    MAX_TRANSITIONS_PER_INCARNATION,
    RETRY_SECONDS,
    TRANSITION_BATCH_DELAY,
    StateStore,
    open_store,
)
from watchdog.vocabulary import MAX_INCARNATIONS_PER_LAUNCH

__all__ = [
    "DB_NAME",
    "LOCK_NAME",
    "MAX_CHECKPOINT_BYTES",
    "MAX_INCARNATIONS_PER_LAUNCH",
    "MAX_TRANSITIONS_PER_INCARNATION",
    "MIGRATIONS",
    "RETRY_SECONDS",
    "TRANSITION_BATCH_DELAY",
    "IncarnationRecord",
    "StateDirLock",
    "StateStore",
    "TransitionRecord",
    "connect",
    "db_path",
    "lock_state_dir",
    "open_store",
    "passing",
    "refuse_legacy_state",
    "transaction",
]
