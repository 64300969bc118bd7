"""What the daemon makes before its launches start (watchdog/daemon/ahead.py): every database a launch reads
with, so that none is compiled in the event loop."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from watchdog.core import analyzer, detection, scanner
from watchdog.core.prefilter import ENGINE, keep_databases
from watchdog.daemon.ahead import make_ahead
from watchdog.follow.databases import DiskDatabases, MemoryDatabases
from watchdog.follow.replay import replay_path
from watchdog.profiles.loader import load_profile_file
from watchdog.vocabulary import State

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
# every engine's logs, a tenth of each (every tenth by name): launches that came up, crashed while starting and
# after it, each rule set of each engine read with
LOGS = [
    log
    for engine in sorted(CORPUS.iterdir())
    if engine.is_dir()
    for log in sorted(engine.glob("*.log"))[::10]
]


class _Counting:
    """A store over another that counts what is loaded, and what is saved (compiled) and by which thread."""

    def __init__(self, under: MemoryDatabases) -> None:
        self.under = under
        self.loads = 0
        self.saved: list[str] = []

    def load(self, key: bytes) -> bytes | None:
        self.loads += 1
        return self.under.load(key)

    def save(self, key: bytes, database: bytes) -> None:
        self.saved.append(threading.current_thread().name)
        self.under.save(key, database)


def _fresh_caches() -> None:
    # what earlier tests of this process made: a launch here makes its rule sets again (loaded, or compiled)
    analyzer._rule_set.cache_clear()
    scanner._MADE.clear()
    detection._any_marker.cache_clear()


def _hyperscan_only() -> None:
    if ENGINE != "hyperscan":
        pytest.skip("hyperscan is not installed here: there are no databases")


def test_every_database_a_launch_reads_with_is_made_ahead() -> None:
    """After `make_ahead`, replays of every engine's logs (a tenth of the corpus, states and engines mixed)
    load every database they read with and compile none."""
    _hyperscan_only()
    assert len({log.parent for log in LOGS}) >= 6  # each engine's folder (and servers no profile knows)
    store = _Counting(make_ahead())
    keep_databases(store)
    _fresh_caches()
    states = set()
    for log in LOGS:
        _, verdict = replay_path(log)
        states.add(verdict.state)
    assert store.saved == []
    assert store.loads >= 6 * 2  # each engine's startup rule set, and its scanner's
    assert {State.READY, State.CRASHED} <= states


def test_a_user_profile_is_made_ahead_too(tmp_path: Path) -> None:
    """A launch's own profile (one of its own engine, one that extends a bundled one) is made ahead with the
    rest: its launch loads its databases too."""
    _hyperscan_only()
    own = tmp_path / "mine.toml"
    own.write_text(
        'name = "mine"\ndetect = ["mine-server starting"]\n'
        '[[error]]\nmatch = "mine-server: fatal"\n'
        '[[ready]]\nmatch = "mine-server listening"\n',
        encoding="utf-8",
    )
    log = tmp_path / "mine.log"
    log.write_text(
        "mine-server starting\nmine-server listening\nmine-server: fatal: gone\n", encoding="utf-8"
    )
    profile = load_profile_file(own)
    store = _Counting(make_ahead([(profile,)]))
    keep_databases(store)
    _fresh_caches()
    _, verdict = replay_path(log, profiles=(profile,))
    assert verdict.engine == "mine"
    assert store.saved == []
    assert store.loads >= 2


def test_memory_keeps_compressed_over_the_files(tmp_path: Path) -> None:
    """The daemon's store keeps a database in memory and in the files under it; loads one the files have (and
    keeps it); one neither has is a miss."""
    files = DiskDatabases(tmp_path)
    files.save(b"older", b"a database kept by a replay " * 100)
    memory = MemoryDatabases(files)
    assert memory.load(b"older") == b"a database kept by a replay " * 100
    (tmp_path / next(p.name for p in tmp_path.iterdir())).unlink()
    assert memory.load(b"older") == b"a database kept by a replay " * 100  # kept in memory
    memory.save(b"new", b"compiled now " * 100)
    assert files.load(b"new") == b"compiled now " * 100
    assert memory.load(b"new") == b"compiled now " * 100
    assert memory.load(b"neither") is None
    assert len(memory) == 2
    assert MemoryDatabases().load(b"new") is None
