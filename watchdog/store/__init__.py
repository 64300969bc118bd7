"""Durable state: per launch and incarnation the state, transitions, facts and verdicts (SQLite).

The package's modules: `connection` (the file, its schema and migrations), `statedir` (the directory's lock),
`database` (one call at a time, write-behind, passing faults), `records`, `announcements`, `checkpoints`,
`silences` (each part's rows) and `state` (`StateStore`, the parts in one object).

One file, `<state_dir>/watchdog.sqlite3`, in WAL mode with `synchronous=NORMAL`: a commit survives the daemon
being killed (`kill -9`); only a power loss may take back the last commits, never corrupt the file. One
connection, used by one call at a time: every public method is a coroutine that holds a lock and runs the
blocking sqlite call in a worker thread (`anyio.to_thread.run_sync`), so the event loop never waits on disk.
While `write_behind` runs (the daemon runs it), transitions are written in batches, a few a commit.

What it keeps, and why:

- the state, the transitions (state, line, log time, reason, wall time), the facts and the verdict object, so
  that `watchdog history` can put two launches side by side;
- per verdict, whether it was announced: after a restart a verdict already announced is not announced again
  (`record_verdict` says so), and one saved but not announced (the daemon died in between) is announced then;
- silences (issue 9): a launch's alerts held until a wall time;
- the problems said and not resolved yet (a crash, a stall, an outage), written in the same transaction as
  their alerts' outbox rows and the verdict's announcement (`watchdog.alerts.outbox.Notes`): a restarted
  daemon resolves each once, whether its launch was relaunched or removed from the config while it was down;
- per launch, one checkpoint (`watchdog.follow.checkpoint`): the follower's analysis at a byte offset, so that a
  restarted daemon resumes reading there instead of at the log's start. The store keeps the blob as it is
  given (at most `MAX_CHECKPOINT_BYTES`); the follower decides when to write it (every few seconds while the
  log grows, soon after a transition, and when it stops) and whether to trust it;
- the alert outbox (`watchdog.alerts.outbox`), on a connection of its own made by `connect`.

The directory is made 0700 and the files 0600 whatever the umask; `lock_state_dir` keeps a second daemon off
the directory; a file with a table missing or damaged pages (`PRAGMA quick_check`) is refused at the start
(`ConfigError`, exit 78), and a row that does not decode is left out of the history with one warning.

A write that meets a passing fault (`passing`: another process's lock past `BUSY_TIMEOUT`, a full disk, an
I/O error) loses nothing that matters: verdicts, announcements, transitions and checkpoints are kept and
written again every `RETRY_SECONDS` (by `write_behind`, or before the next call), `failing` says why
meanwhile (for /healthz), and a verdict that cannot be written is still answered (whether it was announced is
read: a read works under a lock and on a full disk).

Growth is bounded: at most `MAX_INCARNATIONS_PER_LAUNCH` incarnations per launch (older ones are pruned with
their transitions and verdicts) and `MAX_TRANSITIONS_PER_INCARNATION` transitions per incarnation (later ones
are not stored; the incarnation's state and verdict are still kept up to date).
"""

from __future__ import annotations

from watchdog.store.checkpoints import MAX_CHECKPOINT_BYTES
from watchdog.store.connection import DB_NAME, connect, db_path, passing, transaction
from watchdog.store.database import RETRY_SECONDS, TRANSITION_BATCH_DELAY
from watchdog.store.migrations import MIGRATIONS
from watchdog.store.records import MAX_TRANSITIONS_PER_INCARNATION, IncarnationRecord, TransitionRecord
from watchdog.store.state import StateStore, open_store
from watchdog.store.statedir import LOCK_NAME, StateDirLock, lock_state_dir, refuse_legacy_state
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
