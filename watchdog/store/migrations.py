"""The state file's schema, as the migrations that make it: never edit one that has shipped, append."""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

# Each migration takes the schema from version i to i + 1; never edit one that has shipped, append.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE incarnations (
        id INTEGER PRIMARY KEY,
        launch TEXT NOT NULL,
        incarnation INTEGER NOT NULL,
        host TEXT NOT NULL DEFAULT '',
        engine TEXT,
        state TEXT NOT NULL DEFAULT 'pending',
        phase TEXT NOT NULL DEFAULT 'pending',
        started_at REAL NOT NULL,           -- unix time the store first heard of it
        updated_at REAL NOT NULL,
        read_offset INTEGER NOT NULL DEFAULT 0,
        facts TEXT NOT NULL DEFAULT '{}',
        progress TEXT NOT NULL DEFAULT '{}',
        labels TEXT NOT NULL DEFAULT '{}',
        verdict TEXT,                       -- the latest verdict object, JSON
        UNIQUE (launch, incarnation)
    );
    CREATE TABLE transitions (
        incarnation_id INTEGER NOT NULL REFERENCES incarnations (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        state TEXT NOT NULL,
        line INTEGER,
        at TEXT,
        reason TEXT NOT NULL DEFAULT '',
        wall REAL NOT NULL,                 -- unix time it happened (the follower's clock, anchored)
        duration REAL,                      -- seconds until the next entry, by the log's own times
        PRIMARY KEY (incarnation_id, seq)
    );
    CREATE TABLE verdicts (
        incarnation_id INTEGER NOT NULL REFERENCES incarnations (id) ON DELETE CASCADE,
        key TEXT NOT NULL,                  -- e.g. the verdict's state: ready, crashed, stalled
        verdict TEXT,
        saved_at REAL,
        announced_at REAL,
        PRIMARY KEY (incarnation_id, key)
    );
    CREATE TABLE silences (
        launch TEXT PRIMARY KEY,
        until REAL NOT NULL                 -- unix time
    );
    """,
    """
    CREATE TABLE checkpoints (
        launch TEXT PRIMARY KEY,
        read_offset INTEGER NOT NULL,       -- the byte offset of the log's current file the state is at
        saved_at REAL NOT NULL,             -- unix time
        state BLOB NOT NULL                 -- watchdog.follow.checkpoint's blob: header, file identity, pickled state
    );
    """,
    # the alert outbox (watchdog.alerts.outbox), which made this table itself before: kept if it is there
    """
    CREATE TABLE IF NOT EXISTS outbox (
        id INTEGER PRIMARY KEY,
        notifier TEXT NOT NULL,
        destination INTEGER NOT NULL,       -- index of the notifier's URL (0 for a notifier with one)
        key TEXT NOT NULL,                  -- the alert's dedup key, or a reminder's
        alert TEXT NOT NULL,                -- Alert.to_dict(), JSON: no URL, no secret
        created_at REAL NOT NULL,           -- unix time
        attempts INTEGER NOT NULL DEFAULT 0,
        next_try REAL NOT NULL,             -- unix time
        delivered_at REAL,
        failed_at REAL,
        error TEXT NOT NULL DEFAULT '',
        UNIQUE (notifier, destination, key)
    );
    """,
    # verdicts keeps the announcements only (the verdict object is the incarnation's `verdict`); rebuilt, as
    # DROP COLUMN needs SQLite 3.35
    """
    CREATE TABLE verdicts_announced (
        incarnation_id INTEGER NOT NULL REFERENCES incarnations (id) ON DELETE CASCADE,
        key TEXT NOT NULL,                  -- e.g. the verdict's state: ready, crashed, stalled
        announced_at REAL NOT NULL,         -- unix time
        PRIMARY KEY (incarnation_id, key)
    );
    INSERT INTO verdicts_announced (incarnation_id, key, announced_at)
        SELECT incarnation_id, key, announced_at FROM verdicts WHERE announced_at IS NOT NULL;
    DROP TABLE verdicts;
    ALTER TABLE verdicts_announced RENAME TO verdicts;
    """,
    # the problems said and not resolved yet (watchdog.alerts.outbox), written with their alerts' outbox rows
    # in one transaction: a restarted daemon resolves each once, as if it had never stopped
    """
    CREATE TABLE problems (
        launch TEXT NOT NULL,               -- the launch, or host:NAME for a host's outage
        kind TEXT NOT NULL,                 -- crashed, stalled, unreachable
        key TEXT NOT NULL,                  -- its outbox key (its resolution's is KEY/resolved)
        alert TEXT NOT NULL,                -- Alert.to_dict(), JSON: no URL, no secret
        notifiers TEXT NOT NULL,            -- JSON list: the notifiers it goes to, by name
        told TEXT NOT NULL,                 -- JSON list: those that heard it (they hear its resolution)
        opened_at REAL NOT NULL,            -- unix time
        PRIMARY KEY (launch, kind)
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
