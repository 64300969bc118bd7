"""The one check every profile table shares: no key but the ones it allows."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from watchdog.exceptions import ConfigError

__all__ = ["check_keys"]


def check_keys(raw: Mapping[str, object], allowed: Collection[str], where: str, path: str) -> None:
    """Refuse a table of the profile file `where` (at key path `path`) with a key not in `allowed`.

    Raises:
        ConfigError: naming the first unknown key (sorted) and every key allowed.
    """
    unknown = set(raw) - set(allowed)
    if unknown:
        raise ConfigError(
            where, f"{path}.{sorted(unknown)[0]}", f"unknown key; allowed: {', '.join(sorted(allowed))}"
        )
