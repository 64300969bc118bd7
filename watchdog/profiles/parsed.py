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
from pathlib import Path
from typing import Any

from watchdog.vocabulary import ENGINES

__all__ = ["BUNDLED", "FILE", "build", "bundled_file", "parsed"]

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
        raw = bundled_file(f"{name}.toml")
        entries[name] = {"sum": _sum(raw), "data": tomllib.loads(raw.decode("utf-8"))}
    return json.dumps(entries, ensure_ascii=False, indent=1) + "\n"


def _sum(raw: bytes) -> list[int]:
    # two independent 32-bit checksums and the length: an edit that keeps all three is as good as impossible
    # (a cryptographic hash would import hashlib, which costs as much as the JSON saves)
    return [len(raw), zlib.crc32(raw), zlib.adler32(raw)]


def bundled_file(name: str) -> bytes:
    """The bytes of the file `name` of the bundled profiles' folder (a profile's TOML, `parsed.json`).

    Read beside this module where the package is installed as files (as pip installs it): importing
    importlib.resources (zipfile, tempfile, shutil) would cost a replay's start a tenth; through it otherwise
    (a package in a zip archive)."""
    try:
        return (Path(__file__).parent / name).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        pass  # not installed as files (a path inside a zip archive), or a trimmed install: as resources say
    from importlib import resources  # noqa: PLC0415

    return resources.files("watchdog.profiles").joinpath(name).read_bytes()


@functools.cache
def _entries() -> dict[str, Any]:
    try:
        entries = json.loads(bundled_file(FILE))
    except (OSError, ValueError):
        return {}  # no file (a trimmed install) or a damaged one: every profile is parsed from its TOML
    return entries if isinstance(entries, dict) else {}


if __name__ == "__main__":  # pragma: no cover - the maintainers' command, checked by the tests
    from importlib import resources

    target = resources.files("watchdog.profiles").joinpath(FILE)
    with resources.as_file(target) as path:
        path.write_text(build(), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
