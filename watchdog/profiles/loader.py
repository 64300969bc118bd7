"""Loading engine profiles: the bundled TOML files (read once) and users' files, merged per engine with the
common rules. The rules themselves are described in `watchdog.profiles.model`."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from watchdog.exceptions import ConfigError
from watchdog.profiles.model import RULE_KINDS, Profile, Rule, parse_profile
from watchdog.vocabulary import ENGINES

__all__ = [
    "ENGINES",
    "RULE_KINDS",
    "Profile",
    "Rule",
    "bundled_detect",
    "bundled_profile",
    "load_profile",
    "load_profile_file",
]


def load_profile(engine: str, extra: Sequence[Path | Profile] = ()) -> Profile:
    """Load a bundled engine profile merged with the common rules and any user profiles for it.

    `extra` holds user profiles, loaded (`load_profile_file`) or as paths to load.
    """
    if engine not in ENGINES:
        raise ConfigError("--engine", "", f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}, auto")
    user = _loaded(extra)
    base = bundled_profile(engine)
    common = bundled_profile("common")
    mine = [p for p in user if p.name == engine]
    rules = tuple(r for p in mine for r in p.rules) + base.rules + common.rules
    detect = tuple(d for p in mine for d in p.detect) + base.detect
    early = base.early_health or any(p.early_health for p in mine)
    serving = base.health_means_ready and not early
    source = ", ".join([*(p.source for p in mine), base.source])
    return Profile(engine, detect, rules, source, early_health=early, health_means_ready=serving)


def load_profile_file(path: Path) -> Profile:
    """Read and validate one profile file; errors name the file, the key path and what is allowed."""
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
def bundled_profile(name: str) -> Profile:
    """The bundled profile of engine `name`, read once."""
    return parse_profile(_bundled_data(name), f"watchdog/profiles/{name}.toml")


@functools.cache
def bundled_detect(name: str) -> tuple[str, ...]:
    """The `detect` markers of engine `name`'s bundled profile, without compiling its rules: engine detection
    reads every engine's markers, and only the engine it finds needs its rules."""
    return tuple(_bundled_data(name).get("detect", ()))


@functools.cache
def _bundled_data(name: str) -> dict[str, Any]:
    ref = resources.files("watchdog.profiles").joinpath(f"{name}.toml")
    return tomllib.loads(ref.read_text(encoding="utf-8"))


def _loaded(extra: Sequence[Path | Profile]) -> list[Profile]:
    return [p if isinstance(p, Profile) else load_profile_file(p) for p in extra]


def preload_profiles() -> None:
    """Read and compile every bundled profile now (blocking: call it from a worker thread in async code), so
    that the first engine detection does not."""
    for name in ENGINES:
        bundled_profile(name)
    bundled_profile("common")
