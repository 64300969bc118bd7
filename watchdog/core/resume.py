"""Resume records: what an analyzer must carry across a restart, as a versioned JSON object, and back (pure).

A record holds what the next bytes are read with (the framing's unfinished line, the encoding, the engine
and the user profiles' ids, the lines still held for engine detection), the lifecycle (each incarnation with
its number, state, phase, timeline, progress, facts, errors and error, the live flag), the tracebacks still
open and the error rules matched on their exception lines, and the counts (lines, bytes, the line base of the
current file). What can be made again is not in it: the profile's rules and their keyword search (from the
engine's name, by the caller's loader), the line-template caches (refilled as lines come), the engine
detector of a provisional engine (read again from the head it was fed, which is kept), and the settings
(crash grace, stall_after, deadlines: the launch's, applied anew). Bytes are kept as Latin-1 text (one
character per byte). The lifecycle's clock times are the follower's, which goes on from the checkpoint's.

`VERSION` is the record's schema. A record of an older version is brought to this one by `MIGRATIONS` (keyed
by the version it reads, each giving the next); a newer one is refused. Dataclasses (incarnations,
transitions, errors, tracebacks, blocks) are written field by field, those at their default left out: a field
a new build adds with a default reads an older record unchanged; any other change of a field is a new version
with its migration (`tests/test_resume_record.py` pins the current shape).

Versions: 1, the first; 2 (issue 27 too) leaves out the fields at their default and a timeline transition's
incarnation number (each is its incarnation's): 300 crashes' record, 149 KB of JSON in version 1, is 132 KB.
"""

from __future__ import annotations

import codecs
import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from watchdog.core.encoding import Transcoder
from watchdog.core.framing import Block, Framer
from watchdog.core.lifecycle import Incarnation
from watchdog.core.redaction import mask_secrets
from watchdog.core.scanner import Scanner
from watchdog.core.tracebacks import Assembler, Traceback
from watchdog.profiles.model import Profile, Rule
from watchdog.vocabulary import State

if TYPE_CHECKING:
    from watchdog.core.analyzer import Analyzer

__all__ = ["MIGRATIONS", "VERSION", "Record", "masked", "migrate", "restore", "to_record"]

Record = dict[str, Any]
ProfileLoader = Callable[[str, Sequence[Profile]], Profile]

VERSION = 2


def _from_1(record: Record) -> Record:
    # version 1 wrote every field (version 2 reads a missing one as its default) and the transitions' numbers
    def incarnation(inc: Record) -> Record:
        timeline = [[{k: v for k, v in t.items() if k != "incarnation"}, at] for t, at in inc["timeline"]]
        return {**inc, "timeline": timeline}

    lifecycle = record["lifecycle"]
    current, history = incarnation(lifecycle["current"]), [incarnation(i) for i in lifecycle["history"]]
    return {**record, "version": 2, "lifecycle": {**lifecycle, "current": current, "history": history}}


# version read -> that record as the next version (pure: dicts in, dicts out)
MIGRATIONS: dict[int, Callable[[Record], Record]] = {1: _from_1}


def to_record(analyzer: Analyzer) -> Record:
    """What a restart needs of `analyzer` to go on as if it had never stopped (its texts as they are: see
    `masked`)."""
    a, framer, transcoder, scanner = analyzer, analyzer.framer, analyzer.transcoder, analyzer._scanner
    asm, lc = scanner.assembler, analyzer.lifecycle
    decoder = transcoder._decoder
    return {
        "version": VERSION,
        "engine": a.engine,
        "profiles": [p.source for p in a._extra],  # the user profiles', by the files they were read from
        "framer": {"buf": _text(framer._buf), "offset": framer._buf_offset, "skipping": framer._skipping},
        "transcoder": {
            "head": _text(transcoder._head),
            "decided": transcoder.decided,
            "encoding": transcoder.encoding,
            "decoder": None if decoder is None else _json(decoder.getstate()),
        },
        "lifecycle": {
            "current": _incarnation(lc.current),
            "history": [_incarnation(inc) for inc in lc.history],
            "live": lc.live,
            "memory_growing": lc.memory_growing,
        },
        "scanner": {
            "open": [[key, _json(tb)] for key, tb in asm._open.items()],
            "last": asm._last,
            "chain_next": sorted(asm._chain_next),
            "handling_next": sorted(asm._handling_next),
            "logging_error": sorted(asm._logging_error),
            # the error rules that matched open tracebacks' exception lines: what a report takes of them
            "annotations": [
                [line, {k: getattr(rule, k) for k in _ANNOTATION}]
                for line, rule in scanner._annotations.items()
            ],
            "last_relevant": scanner.last_relevant,
            "benign_lines": scanner.benign_lines,
            "error_lines": scanner.error_lines,
        },
        "detection": {
            "held": _json(a._held),
            "held_since": a._held_since,
            "head": _text(a._raw_head),
            "provisional": a._provisional,
            "emitted": sorted(([s.value, n] for s, n in a._head_emitted), key=lambda e: (e[0], e[1] or 0)),
        },
        "tail": _text(a._tail),
        "lines_read": a.lines_read,
        "line_base": a._line_base,
        "undated": a._undated,
        "bytes_read": a.bytes_read,
        "caught_up": a._caught_up,
        "last_data": a._last_data,
        "cut_reported": a._cut_reported,
    }


def masked(record: Any) -> Any:
    """`record` with every text in it (the log's lines, raw or read) passed through `mask_secrets`: lengths
    kept, so offsets into them stay right."""
    kind = type(record)
    if kind is str:
        return mask_secrets(record)
    if kind is dict:
        return {k: masked(v) for k, v in record.items()}
    if kind is list:
        return [masked(v) for v in record]
    return record


def migrate(record: Mapping[str, Any]) -> Record:
    """`record` as this build's `VERSION`.

    Raises:
        ValueError: a newer version, or none.
    """
    out = dict(record)
    version = out.get("version")
    if type(version) is not int or not 0 < version <= VERSION:
        raise ValueError(f"record version {version!r}, this build reads up to {VERSION}")
    while version < VERSION:
        if version not in MIGRATIONS:
            raise ValueError(f"record version {version} has no migration")
        out = MIGRATIONS[version](out)
        version = out["version"]
    return out


def restore(analyzer: Analyzer, record: Mapping[str, Any], load: ProfileLoader) -> None:
    """Put `record`'s state into `analyzer`, made anew with the launch's settings (as a follower makes it):
    after it, it reads on as the recorded one would. `load` gives the recorded engine's profile (with the
    analyzer's user profiles: `watchdog.profiles.loader.load_profile`). `analyzer` is changed only once all of
    `record` was read.

    Raises:
        ValueError: a record this build cannot read (damaged, another version, other user profiles).
        ConfigError: `load` knows no such engine.
    """
    try:
        _restore(analyzer, migrate(record), load)
    except (LookupError, TypeError, AttributeError) as exc:  # a key, an index or an encoding missing
        raise ValueError(f"the record does not load: {exc!r}") from exc


def _restore(a: Analyzer, r: Record, load: ProfileLoader) -> None:
    users = [p.source for p in a._extra]
    if r["profiles"] != users:
        raise ValueError("taken with other user profiles")
    engine = _load(str | None, r["engine"])
    profile = None if engine is None else load(engine, a._extra)
    if profile is None and a.profile is not None:
        raise ValueError(f"taken before the engine was known, this launch's is {a.profile.name}")
    f = r["framer"]
    framer = Framer(max_line=a.framer.max_line)
    framer._buf, framer._buf_offset = _load(bytes, f["buf"]), _load(int, f["offset"])
    framer._skipping = _load(bool, f["skipping"])
    t = r["transcoder"]
    transcoder = Transcoder()
    transcoder._head, transcoder.decided = _load(bytes, t["head"]), _load(bool, t["decided"])
    transcoder.encoding = _load(str, t["encoding"])
    if t["decoder"] is not None:
        transcoder._decoder = codecs.getincrementaldecoder(transcoder.encoding)("replace")
        transcoder._decoder.setstate(_load(tuple[bytes, int], t["decoder"]))
    c = r["lifecycle"]
    current, history = _load(Incarnation, c["current"]), _load(list[Incarnation], c["history"])
    for inc in (current, *history):
        inc.timeline = [(dataclasses.replace(t, incarnation=inc.number), at) for t, at in inc.timeline]
    live, memory_growing = _load(bool, c["live"]), _load(bool, c["memory_growing"])
    if live:
        # the follower's clock did not run while it was down: entries before and after are on two clocks
        current.live_from = len(current.timeline)
    s = r["scanner"]
    asm = Assembler()
    asm._open = {_load(str, k): _load(Traceback, tb) for k, tb in s["open"]}
    asm._last = _load(str | None, s["last"])
    sets = [_load(set[str], s[k]) for k in ("chain_next", "handling_next", "logging_error")]
    asm._chain_next, asm._handling_next, asm._logging_error = sets
    scanner = Scanner()
    scanner.assembler = asm
    scanner._annotations = {
        _load(int, line): Rule("error", **{k: _load(_ANNOTATION[k], rule[k]) for k in _ANNOTATION})
        for line, rule in s["annotations"]
    }
    scanner.last_relevant = _load(str, s["last_relevant"])
    scanner.benign_lines, scanner.error_lines = _load(int, s["benign_lines"]), _load(int, s["error_lines"])
    d = r["detection"]
    held, held_since = _load(list[Block], d["held"]), _load(float | None, d["held_since"])
    provisional = _load(bool, d["provisional"])
    emitted = {(State(s), _load(int | None, n)) for s, n in d["emitted"]}
    counts = [_load(int, r[k]) for k in ("lines_read", "line_base", "bytes_read")]
    flags = [_load(bool, r[k]) for k in ("undated", "caught_up", "cut_reported")]
    raw_head, tail, last_data = _load(bytes, d["head"]), _load(bytes, r["tail"]), _load(float, r["last_data"])
    # every part read: the analyzer takes them
    a.framer, a.transcoder, a._scanner = framer, transcoder, scanner
    lc = a.lifecycle
    lc.current, lc.history, lc.live, lc.memory_growing = current, history, live, memory_growing
    a._held, a._held_since, a._head_emitted = held, held_since, emitted
    a._raw_head, a._detector, a._head_cut = bytearray(raw_head), None, 0  # the detector reads the head again
    a.lines_read, a._line_base, a.bytes_read = counts
    a._undated, a._caught_up, a._cut_reported = flags
    a._provisional = provisional
    a._tail, a._last_data = tail, last_data
    a._candidates, a._irrelevant, a._parked = set(), set(), {}
    if profile is not None:
        a._use(profile)  # its rules, as the lifecycle's state now says (startup or settled)


# What the scanner keeps of an error rule that matched a traceback's exception line (`Scanner._traceback`).
_ANNOTATION: dict[str, Any] = {
    "match": str,
    "state": str | None,
    "category": str | None,
    "role": str,
    "fatal": bool,
    "hint": str | None,
}


def _incarnation(inc: Incarnation) -> Record:
    out: Record = _json(inc)
    for transition, _ in out.get("timeline", ()):
        transition.pop("incarnation", None)  # its incarnation's number
    return out


def _text(data: bytes | bytearray) -> str:
    return bytes(data).decode("latin-1")


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _json(value: Any) -> Any:
    # A value of the core (dataclasses, enums, bytes, tuples, sets) as JSON's: each dataclass as its fields.
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        if all(type(v) is str for v in value):  # most of a record: a traceback's lines
            return list(value)
        return [_json(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if kind is bytes or kind is bytearray:
        return _text(value)
    if kind is set or kind is frozenset:
        return sorted(_json(v) for v in value)
    if kind is dict:
        return {k: _json(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ((k, getattr(value, k), default) for k, default in _defaults(type(value)))
        return {k: v if type(v) in _PLAIN else _json(v) for k, v, default in fields if v != default}
    raise TypeError(f"{kind.__name__} is not part of a record")


@functools.cache
def _defaults(cls: type) -> tuple[tuple[str, Any], ...]:
    # each field of a dataclass, and its default (MISSING: none, always written)
    return tuple(
        (f.name, f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
        for f in dataclasses.fields(cls)
    )


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _load(hint: Any, value: Any) -> Any:
    # `value` (JSON's) as the type `hint` names, checked on the way (a damaged record raises, never loads).
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType:
        if value is None and types.NoneType in args:
            return None
        kinds = [k for k in args if k is not types.NoneType]
        if len(kinds) == 1:
            return _load(kinds[0], value)
        if type(value) in kinds or (float in kinds and type(value) is int):  # a fact: a number or a text
            return value
    elif origin is list:
        return [_load(args[0], v) for v in _list(value)]
    elif origin is set:
        return {_load(args[0], v) for v in _list(value)}
    elif origin is tuple:
        items = _list(value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_load(args[0], v) for v in items)
        if len(items) == len(args):
            return tuple(_load(k, v) for k, v in zip(args, items, strict=True))
    elif origin is dict:
        if type(value) is dict:
            return {_load(args[0], k): _load(args[1], v) for k, v in value.items()}
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if type(value) is dict:
            fields = _fields(hint)
            unknown = value.keys() - fields.keys()
            if unknown:
                raise ValueError(f"{hint.__name__} has no field {sorted(unknown)[0]!r}")
            return hint(**{k: _load(fields[k], v) for k, v in value.items()})
    elif hint is bytes:
        if type(value) is str:
            return value.encode("latin-1")
    elif hint is float:
        if type(value) in (float, int):
            return value
    elif type(value) is hint:
        return value
    raise ValueError(f"{value!r:.60} is not a {hint}")


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise ValueError(f"{value!r:.60} is not a list")
    return value
