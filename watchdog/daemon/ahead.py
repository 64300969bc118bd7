"""What the daemon makes before its launches start, off its event loop: every engine's profile and databases.

An analyzer compiles what it reads with when it first needs it: the bundled profiles (a TOML file and many regexes
each) at its first engine detection, and each rule set's Hyperscan databases as its engine is detected and as the
server comes up (10 to 130 ms of CPU each, 5 of them in the first second of a vLLM log). In a replay that is
the start of the run; in the daemon it is one callback of the event loop, where every other launch and the HTTP
server wait for it. So the daemon makes them all here, in a worker thread, before the first launch starts:
the profiles are kept (every launch of an engine shares them), the databases are kept compressed in memory
(`watchdog.follow.databases.MemoryDatabases`, and in the user's cache folder where there is one, as a replay
keeps them: the next start loads them), and a launch loads its engine's in a fraction of a millisecond.
Compiling every bundled engine's (43 databases) takes 1 to 2 s of CPU once (0.2 s loaded from the cache folder); a
profile made once is not made again in this process (a reload, another daemon in the same process).
"""

from __future__ import annotations

from collections.abc import Iterable

from watchdog.core.analyzer import make_databases
from watchdog.core.detection import EngineDetector
from watchdog.core.prefilter import keep_databases
from watchdog.follow.databases import DiskDatabases, MemoryDatabases, cache_folder
from watchdog.profiles.loader import catalogue, preload_profiles
from watchdog.profiles.model import Catalogue, Profile

__all__ = ["make_ahead"]

_kept: MemoryDatabases | None = None  # the process's store, made at the first daemon's start
_made: set[Profile] = set()  # the profiles whose databases it holds


def make_ahead(user_profiles: Iterable[tuple[Profile, ...]] = ()) -> MemoryDatabases:
    """Make every bundled profile and every engine's databases (blocking: call it from a worker thread), and
    those of the catalogues with `user_profiles` (each launch's), and have the prefilter keep them in memory;
    return the store that keeps them."""
    global _kept  # noqa: PLW0603 - the process's one store, as the prefilter's setting is the process's
    preload_profiles()
    if _kept is None:
        folder = cache_folder()
        _kept = MemoryDatabases(None if folder is None else DiskDatabases(folder))
    keep_databases(_kept)
    for user in dict.fromkeys((*user_profiles, ())):
        _make(catalogue(user))
    return _kept


def _make(known: Catalogue) -> None:
    EngineDetector(known.markers)  # the search for every engine's markers (kept: every detection uses it)
    for name in known.names:
        profile = known.profile(name)
        if profile not in _made:
            make_databases(profile)
            _made.add(profile)
