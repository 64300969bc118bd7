"""The prefilter's databases kept in files: what is saved loads back, anything else is a miss, never an error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from watchdog.core.prefilter import ENGINE
from watchdog.follow import databases
from watchdog.follow.databases import DiskDatabases, cache_folder

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_saved_database_loads_back_under_its_key_only(tmp_path: Path) -> None:
    """A database saved under a key loads back under it; another key (even one named like it) is a miss."""
    store = DiskDatabases(tmp_path / "kept")
    assert store.load(b"key") is None
    store.save(b"key", b"\x00database\nbytes")
    assert store.load(b"key") == b"\x00database\nbytes"
    assert store.load(b"other key") is None
    (path,) = (tmp_path / "kept").iterdir()
    os.rename(path, tmp_path / "kept" / databases._name(b"yek"))  # as if two keys shared a file's name
    assert store.load(b"yek") is None


@pytest.mark.parametrize("offset", [0, 10, 40, -20, -1])
def test_a_damaged_file_is_a_miss(tmp_path: Path, offset: int) -> None:
    """A kept file with a byte changed anywhere (its header, its key, its checksum, the database) is a miss."""
    store = DiskDatabases(tmp_path)
    store.save(b"the key", b"the database, some bytes long")
    (path,) = tmp_path.iterdir()
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x20
    path.write_bytes(bytes(raw))
    assert store.load(b"the key") is None
    path.write_bytes(bytes(raw[:-5]))  # cut short
    assert store.load(b"the key") is None


def test_a_read_only_folder_is_a_miss_not_an_error(tmp_path: Path) -> None:
    """Where the folder cannot be made (a read-only home), saving does nothing and loading misses."""
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would go")
    store = DiskDatabases(blocked / "kept")
    store.save(b"key", b"database")
    assert store.load(b"key") is None


def test_the_oldest_files_go_beyond_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No more than MAX_FILES databases are kept: the oldest files go first."""
    monkeypatch.setattr(databases, "MAX_FILES", 3)
    store = DiskDatabases(tmp_path)
    for n in range(5):
        store.save(b"key %d" % n, b"database")
        os.utime(tmp_path / databases._name(b"key %d" % n), (1000 + n, 1000 + n))
    assert [store.load(b"key %d" % n) for n in range(5)] == [None, None, *[b"database"] * 3]


def test_a_database_loaded_is_kept_over_one_saved_later_and_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load marks its file used: beyond MAX_FILES the least recently used go, not the first saved (a folder
    that other profiles' databases fill keeps the ones every start loads)."""
    monkeypatch.setattr(databases, "MAX_FILES", 3)
    store = DiskDatabases(tmp_path)
    for n in range(3):
        store.save(b"key %d" % n, b"database")
        os.utime(tmp_path / databases._name(b"key %d" % n), (1000 + n, 1000 + n))
    assert store.load(b"key 0") == b"database"  # the oldest, used now
    store.save(b"key 3", b"database")
    assert [store.load(b"key %d" % n) for n in range(4)] == [b"database", None, b"database", b"database"]


@pytest.mark.parametrize(
    ("environment", "folder"),
    [
        pytest.param({"XDG_CACHE_HOME": "/c", "HOME": "/h"}, "/c/watchdog/hyperscan", id="xdg"),
        pytest.param({"XDG_CACHE_HOME": "", "HOME": "/h"}, "/h/.cache/watchdog/hyperscan", id="home"),
        pytest.param(
            {"XDG_CACHE_HOME": "rel", "HOME": "/h"}, "/h/.cache/watchdog/hyperscan", id="relative-xdg"
        ),
        pytest.param({"XDG_CACHE_HOME": "", "HOME": ""}, None, id="no-home"),
    ],
)
def test_the_cache_folder(
    environment: dict[str, str], folder: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is the XDG cache's (an absolute $XDG_CACHE_HOME, else ~/.cache); none without a home."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert cache_folder() == (None if folder is None else Path(folder))


def _replay(log: Path, cache: Path, command: str = "replay") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "watchdog.cli", command, "--json", str(log)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_replay_keeps_its_databases_and_says_the_same_with_them(tmp_path: Path) -> None:
    """`watchdog replay` keeps its compiled databases in the cache folder; the next replay, which loads them,
    prints the same verdict, as does one whose cache folder cannot be written."""
    log = FIXTURES / "corpus" / "vllm" / "captured-vllm-sigterm-in-flight-cpu.log"
    folder = tmp_path / "cache" / "watchdog" / "hyperscan"
    first = _replay(log, tmp_path / "cache")
    kept = sorted(folder.glob("*.hsdb"))
    assert bool(kept) == (ENGINE == "hyperscan")
    second = _replay(log, tmp_path / "cache")
    assert sorted(folder.glob("*.hsdb")) == kept
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would go")
    third = _replay(log, blocked)
    assert first.returncode == second.returncode == third.returncode
    assert first.stdout == second.stdout == third.stdout
    assert first.stdout.startswith("{")
    assert first.stderr == second.stderr == third.stderr == ""


@pytest.mark.skipif(ENGINE != "hyperscan", reason="the databases are Hyperscan's")
def test_watch_loads_the_databases_a_replay_kept_and_says_the_same(tmp_path: Path) -> None:
    """`watchdog watch`, a command started as often as `replay` (`watch && next-step`), keeps and loads the same
    databases: after a replay it compiles none (no file added), and its verdict is the one it gives without them;
    alone, it keeps them for the next command."""
    log = FIXTURES / "corpus" / "vllm" / "captured-vllm-sigterm-in-flight-cpu.log"
    folder = tmp_path / "cache" / "watchdog" / "hyperscan"
    _replay(log, tmp_path / "cache")
    kept = sorted(folder.glob("*.hsdb"))
    files = [(p.stat().st_ino, p.stat().st_size) for p in kept]  # a save writes a new file (a new inode)
    times = [p.stat().st_mtime_ns for p in kept]
    watched = _replay(log, tmp_path / "cache", "watch")
    assert sorted(folder.glob("*.hsdb")) == kept
    assert [(p.stat().st_ino, p.stat().st_size) for p in kept] == files
    # each loaded, and so marked used (the bound keeps the ones in use)
    assert all(p.stat().st_mtime_ns > t for p, t in zip(kept, times, strict=True))
    alone = _replay(log, tmp_path / "alone", "watch")
    assert sorted(p.name for p in (tmp_path / "alone" / "watchdog" / "hyperscan").glob("*.hsdb"))
    assert watched.returncode == alone.returncode
    assert watched.stdout == alone.stdout
    assert watched.stdout.startswith("{")
