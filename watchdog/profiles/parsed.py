"""The bundled profiles' TOML, parsed ahead of time: `parsed.json` beside them, so a start parses no TOML.

Parsing the eight bundled files with tomllib is a fifth of `watchdog replay`'s start; `json.loads` of the same
data is forty times faster. The file is made from the TOML files (`python -m watchdog.profiles.parsed`), and
it is used for a file only when that file's bytes are the ones it was made from (the same length and the same
CRC-32 and Adler-32), so an edited TOML file is always read itself, never an old copy of it.
tests/test_parsed_profiles.py fails when the file is out of date.
"""

from __future__ import annotations

import functools
import json
import sys
import zlib
from importlib import resources
from typing import Any

from watchdog.vocabulary import ENGINES

__all__ = ["BUNDLED", "FILE", "build", "parsed"]

BUNDLED = (*ENGINES, "common")  # the bundled profile files, by name
FILE = "parsed.json"  # in watchdog/profiles/


def parsed(name: str, raw: bytes) -> dict[str, Any] | None:
    """The parsed TOML of bundled profile `name` whose file holds `raw`; None when `parsed.json` was made from
    other bytes (or is missing or damaged): then the file is parsed itself."""
    entry = _entries().get(name)
    if not isinstance(entry, dict) or entry.get("sum") != _sum(raw):
        return None
    data = entry.get("data")
    return data if isinstance(data, dict) else None


def build() -> str:
    """The text of `parsed.json` for the bundled TOML files as they are now."""
    import tomllib  # noqa: PLC0415 - only to make the file

    entries = {}
    for name in BUNDLED:
        raw = resources.files("watchdog.profiles").joinpath(f"{name}.toml").read_bytes()
        entries[name] = {"sum": _sum(raw), "data": tomllib.loads(raw.decode("utf-8"))}
    return json.dumps(entries, ensure_ascii=False, indent=1) + "\n"


def _sum(raw: bytes) -> list[int]:
    # two independent 32-bit checksums and the length: an edit that keeps all three is as good as impossible
    # (a cryptographic hash would import hashlib, which costs as much as the JSON saves)
    return [len(raw), zlib.crc32(raw), zlib.adler32(raw)]


@functools.cache
def _entries() -> dict[str, Any]:
    try:
        entries = json.loads(resources.files("watchdog.profiles").joinpath(FILE).read_bytes())
    except (OSError, ValueError):
        return {}  # no file (a trimmed install) or a damaged one: every profile is parsed from its TOML
    return entries if isinstance(entries, dict) else {}


if __name__ == "__main__":  # pragma: no cover - the maintainers' command, checked by the tests
    target = resources.files("watchdog.profiles").joinpath(FILE)
    with resources.as_file(target) as path:
        path.write_text(build(), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
