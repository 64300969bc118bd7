"""Loading engine profiles: the bundled TOML files (read once) and users' files, as a merged `Profile` or a
`Catalogue` of every engine for detection.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path

from watchdog.exceptions import ConfigError
from watchdog.profiles.model import BUNDLED_SOURCE, RULE_KINDS, Catalogue, Draft, Profile, Rule, parse_profile
from watchdog.profiles.parsed import bundled_file, parsed
from watchdog.vocabulary import ENGINES

__all__ = [
    "ENGINES",
    "RULE_KINDS",
    "Catalogue",
    "Profile",
    "Rule",
    "catalogue",
    "load_engine",
    "load_profile",
    "load_profile_file",
    "preload_profiles",
]


def load_engine(engine: str | None, extra: Sequence[Path | Profile] = ()) -> Profile | Catalogue:
    """What an analyzer is given for `engine`: its profile, or to detect it (None or "auto") the catalogue."""
    return catalogue(extra) if engine in (None, "auto") else load_profile(engine, extra)


def load_profile(engine: str, extra: Sequence[Path | Profile] = ()) -> Profile:
    """Load engine `engine`'s profile (bundled, or one a user profile names) merged with the common rules and
    the user profiles `extra` of it (loaded by `load_profile_file`, or paths to load)."""
    known = catalogue(extra)
    try:
        return known.profile(engine)
    except KeyError:
        allowed = ", ".join((*known.names, "auto"))
        raise ConfigError(
            "--engine", "", f"unknown engine {engine!r}; allowed: {allowed}, or a --profile file's `name`"
        ) from None


def catalogue(extra: Sequence[Path | Profile] = ()) -> Catalogue:
    """Every engine a log may be detected as: the bundled ones and those of the user profiles `extra`."""
    user = tuple(p if isinstance(p, Profile) else load_profile_file(p) for p in extra)
    return dataclasses.replace(_bundled(), user=user) if user else _bundled()


def load_profile_file(path: Path) -> Profile:
    """Read and validate one profile file; errors name the file, the key path and what is allowed."""
    import tomllib  # noqa: PLC0415 - not for a start that reads only the bundled profiles (parsed ahead)

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read profile: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            str(path), "", f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"invalid TOML: {exc}") from exc
    return parse_profile(data, str(path))


@functools.cache
def _bundled() -> Catalogue:
    return Catalogue(tuple((name, _draft(name)) for name in ENGINES), _draft("common"))


@functools.cache
def _draft(name: str) -> Draft:
    raw = bundled_file(f"{name}.toml")
    data = parsed(name, raw)  # parsed ahead of time, if the file is the one it was parsed from
    if data is None:
        import tomllib  # noqa: PLC0415 - rare: parsed.json is older than the file

        data = tomllib.loads(raw.decode("utf-8"))
    return Draft(data, f"{BUNDLED_SOURCE}{name}.toml")


def preload_profiles() -> None:
    """Read and compile every bundled profile now (blocking: call it from a worker thread in async code), so
    that the first engine detection does not."""
    for _, draft in (*_bundled().bundled, ("common", _bundled().common)):
        draft.profile()
