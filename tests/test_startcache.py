"""A replay's compiles kept between runs: what loads back is what a compile makes, anything else is a compile."""

from __future__ import annotations

import collections
import dataclasses
import marshal
import os
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from watchdog.cli import startcache
from watchdog.cli.startcache import KeptCompiles
from watchdog.follow.databases import DiskDatabases

CRASHED = (
    Path(__file__).parent / "fixtures" / "corpus" / "vllm" / "vllm-kv-cache-no-memory-compose-issue10439.log"
)
NEEDS_RE = pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info[:2] not in startcache._RE_VERSIONS,
    reason="regexes are kept on CPython 3.11-3.13 only",
)

PATTERNS: list[tuple[Any, int]] = [
    (r"(?P<level>INFO|ERROR) (?P<md>\d\d-\d\d) (?:x|y)*+\[(?P=level)\]", 0),
    (r"(?i)\bout of memory\b|CUDA error: (?P<what>.+)$", re.MULTILINE),
    (rb"#running-req: (?P<running>\d+)[^g\n]*+", 0),
    (r"^(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+)h)?$", re.ASCII),
    (r"(?<=\S)(?=\[\d{4}-)|é(?!x)", re.IGNORECASE),
]
TEXTS = ["INFO 05-21 xy[INFO]", "an Out Of Memory here", "CUDA error: bad\n", "2d3h", "a[2025-01", "É", ""]


def _kept(tmp_path: Path) -> KeptCompiles:
    return KeptCompiles(DiskDatabases(tmp_path), b"the key")


def _same(made: re.Pattern[Any], compiled: re.Pattern[Any]) -> None:
    assert (made.pattern, made.flags, made.groups, dict(made.groupindex)) == (
        compiled.pattern,
        compiled.flags,
        compiled.groups,
        dict(compiled.groupindex),
    )
    for text in TEXTS:
        subject: Any = text.encode() if isinstance(compiled.pattern, bytes) else text
        assert [m.span() + m.groups() for m in made.finditer(subject)] == [
            m.span() + m.groups() for m in compiled.finditer(subject)
        ]


@NEEDS_RE
def test_a_kept_regex_loads_back_as_the_pattern_a_compile_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regex compiled through the kept compiles, saved and loaded in a fresh run, is made without a compile and
    equals a compiled one: flags, groups, names, every match."""
    compiled = [startcache._RE_COMPILE(pattern, flags) for pattern, flags in PATTERNS]
    first = _kept(tmp_path)
    for (pattern, flags), reference in zip(PATTERNS, compiled, strict=True):
        _same(first.compile_regex(pattern, flags), reference)
    first.save()
    second = _kept(tmp_path)

    def no_compile(*args: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(startcache, "_compile", no_compile)
    for (pattern, flags), reference in zip(PATTERNS, compiled, strict=True):
        _same(second.compile_regex(pattern, flags), reference)
    assert not second.grew


@NEEDS_RE
def test_opcodes_refused_or_a_damaged_file_are_a_compile(tmp_path: Path) -> None:
    """Kept opcodes `_sre` refuses, or a kept code that is no code, are compiled again (and kept right); a damaged
    file is no file."""
    pattern, flags = PATTERNS[0]
    kept = _kept(tmp_path)
    args = startcache._compile(pattern, flags)
    kept.regexes[(pattern, flags)] = marshal.dumps((args[0], [17, 99999, 3], *args[2:]))
    _same(kept.compile_regex(pattern, flags), startcache._RE_COMPILE(pattern, flags))
    assert marshal.loads(kept.regexes[(pattern, flags)]) == args
    kept.codes[("exec", "x = 1")] = b"not marshal"
    space: dict[str, Any] = {}
    kept.exec("x = 1", space)
    assert space["x"] == 1
    kept.save()
    (path,) = tmp_path.iterdir()
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0x20
    path.write_bytes(bytes(raw))
    assert _kept(tmp_path).regexes == {}


def test_a_dataclass_made_from_kept_methods_is_the_same_class(tmp_path: Path) -> None:
    """A frozen dataclass whose methods' code came from the file behaves as one compiled: init, defaults, repr,
    equality, hash, frozenness; the second run compiles nothing."""

    def make(kept: KeptCompiles) -> Any:
        source = (
            "@dataclass(frozen=True, slots=True)\nclass Seen:\n    line: int\n    at: str | None = None\n"
        )
        space: dict[str, Any] = {"dataclass": dataclasses.dataclass}
        own = dataclasses.__dict__.get("exec")
        dataclasses.exec = kept.exec  # type: ignore[attr-defined]
        try:
            exec(compile("from __future__ import annotations\n" + source, "<test>", "exec"), space)
        finally:
            if own is None:
                del dataclasses.exec  # type: ignore[attr-defined]
        return space["Seen"]

    first = _kept(tmp_path)
    make(first)
    assert first.grew
    assert first.codes
    first.save()
    second = _kept(tmp_path)
    seen = make(second)
    assert not second.grew
    one = seen(3)
    assert (one.line, one.at, repr(one)) == (3, None, "Seen(line=3, at=None)")
    assert one == seen(3, None)
    assert one != seen(4)
    assert hash(one) == hash(seen(3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.line = 5


def test_the_programs_replay_keeps_its_compiles_and_gives_the_same_verdict(tmp_path: Path) -> None:
    """`watchdog replay` writes its compiles to the cache folder on its first run; the next reads them, writes
    nothing, and prints the same verdict; a replay with no cache folder prints it too."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "watchdog.cli", "replay", str(CRASHED), "--json"]
    first = subprocess.run(command, capture_output=True, env=env, check=False)
    (path,) = (tmp_path / "cache" / "watchdog" / "compiled").iterdir()
    inode = path.stat().st_ino
    second = subprocess.run(command, capture_output=True, env=env, check=False)
    assert path.stat().st_ino == inode  # not written again
    homeless = {k: v for k, v in env.items() if k not in {"XDG_CACHE_HOME", "HOME"}}
    none = subprocess.run(command, capture_output=True, env=homeless, check=False)
    assert first.returncode == second.returncode == none.returncode == 1
    assert first.stdout == second.stdout == none.stdout
    assert b'"category": "oom"' in first.stdout
    assert first.stderr == second.stderr == b""


def test_a_named_tuple_made_from_kept_code_is_the_same_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typing.NamedTuple whose `__new__` and field annotations' forward references came from the file behaves as
    one compiled (fields, defaults, types as text); the second run compiles nothing."""
    source = "class Seen(NamedTuple):\n    line: int\n    at: str | None = None\n"

    def make(kept: KeptCompiles) -> Any:
        monkeypatch.setattr(collections, "eval", kept.eval, raising=False)
        monkeypatch.setattr(typing, "compile", kept.compile_text, raising=False)
        space: dict[str, Any] = {"NamedTuple": typing.NamedTuple, "__name__": "made"}
        exec(compile("from __future__ import annotations\n" + source, "<test>", "exec"), space)
        return space["Seen"]

    first = _kept(tmp_path)
    make(first)
    assert {mode for mode, _ in first.codes} == {"eval"}
    first.save()
    second = _kept(tmp_path)
    seen = make(second)
    assert not second.grew
    assert (seen(3), seen(3, "x").at, seen._fields) == ((3, None), "x", ("line", "at"))
    assert typing.get_type_hints(seen, {"NamedTuple": typing.NamedTuple}) == {"line": int, "at": str | None}
