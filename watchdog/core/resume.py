"""Resume records: what an analyzer carries across a restart, as a versioned JSON object, and back (pure).

`FIELDS` is the schema; what can be made again is not in it. Older versions migrate (`MIGRATIONS`), newer ones
are refused; docs/operations.md says what a record holds and why.
"""

from __future__ import annotations

import codecs
import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from watchdog.core.framing import Block
from watchdog.core.lifecycle import Incarnation
from watchdog.core.redaction import mask_secrets
from watchdog.core.tracebacks import Traceback
from watchdog.profiles.model import BUNDLED_SOURCE, Rule
from watchdog.vocabulary import State

if TYPE_CHECKING:
    from watchdog.core.analyzer import Analyzer

__all__ = [
    "FIELDS",
    "MIGRATIONS",
    "VERSION",
    "Record",
    "dataclass_defaults",
    "masked",
    "migrate",
    "record_values",
    "restore",
    "to_json",
    "to_record",
]

Record = dict[str, Any]

VERSION = 7
_ASM = "_scanner.assembler."
# record key -> (the analyzer's attribute, by its path; its type). Dataclasses are written field by field, those
# at their default left out; bytes as Latin-1 text. A provisional engine's detector reads its head again.
FIELDS: dict[str, tuple[str, Any]] = {
    "framer.buf": ("framer._buf", bytes),  # the unfinished last line
    "framer.offset": ("framer._buf_offset", int),
    "framer.skipping": ("framer._skipping", bool),
    "formats.format": ("unwrapper.format", str | None),  # the log's record format, once its first record came
    "formats.pending": (
        "unwrapper.pending",
        dict[str, tuple[int, bytes]],
    ),  # lines begun in records, by stream
    "transcoder.head": ("transcoder._head", bytes),
    "transcoder.decided": ("transcoder.decided", bool),
    "transcoder.encoding": ("transcoder.encoding", str),
    "lifecycle.current": ("lifecycle.current", Incarnation),
    "lifecycle.history": ("lifecycle.history", list[Incarnation]),
    "lifecycle.live": ("lifecycle.live", bool),
    "lifecycle.memory_growing": ("lifecycle.memory_growing", bool),
    "scanner.open": (_ASM + "_open", dict[str, Traceback]),  # the tracebacks still open, by stream
    "scanner.last": (_ASM + "_last", str | None),
    "scanner.chain_next": (_ASM + "_chain_next", set[str]),
    "scanner.handling_next": (_ASM + "_handling_next", set[str]),
    "scanner.logging_error": (_ASM + "_logging_error", set[str]),
    "scanner.last_relevant": ("_scanner.last_relevant", str),
    "scanner.benign_lines": ("_scanner.benign_lines", int),
    "scanner.error_lines": ("_scanner.error_lines", int),
    "detection.held": ("_held", list[Block]),  # lines held while the engine is not known yet
    "detection.held_since": ("_held_since", float | None),
    "detection.head": ("_raw_head", bytearray),
    "detection.provisional": ("_provisional", bool),
    "detection.emitted": ("_head_emitted", set[tuple[State, int | None]]),
    "tail": ("_tail", bytes),
    "lines_read": ("lines_read", int),
    "line_base": ("_line_base", int),
    "undated": ("_undated", bool),
    "bytes_read": ("bytes_read", int),
    "caught_up": ("_caught_up", bool),
    "last_data": ("_last_data", float),
    "cut_reported": ("_cut_reported", bool),
    # a serving line not read yet (`Analyzer._parks`): its bytes, its line number, the follower's clock then
    "serving.parked": ("_parked", tuple[bytes, int, float] | None),
}
# ... and besides: `engine`, the user `profiles` (their files), the UTF-16 `transcoder.decoder`'s state and
# `scanner.annotations`: the error rules matched on open tracebacks' exception lines (without their regex)


def _from_1(record: Record) -> Record:
    # version 1 grouped the parts' fields ({"framer": {"buf": ...}}), its open tracebacks in [stream, traceback]
    # pairs, its annotations without their kind, and wrote every field of a dataclass (a missing one: its default)
    out = {k: v for k, v in record.items() if type(v) is not dict} | {"version": 2}
    for part in ("framer", "transcoder", "lifecycle", "scanner", "detection"):
        out.update((f"{part}.{k}", v) for k, v in record[part].items())
    out["scanner.open"] = dict(out["scanner.open"])
    out["scanner.annotations"] = [[n, {**rule, "kind": "error"}] for n, rule in out["scanner.annotations"]]
    return out


def _from_2(record: Record) -> Record:
    # version 2 knew no record formats: its logs were read as plain lines
    return {**record, "version": 3, "formats.format": "plain", "formats.pending": {}}


def _from_3(record: Record) -> Record:
    # version 3 knew no launch arguments: its incarnations have none (the field's default, left out)
    return {**record, "version": 4}


def _from_4(record: Record) -> Record:
    # version 4 knew no header levels: its open tracebacks have none (the field's default, left out)
    return {**record, "version": 5}


def _from_5(record: Record) -> Record:
    # version 5 read every serving line as it came: none waits
    return {**record, "version": 6, "serving.parked": None}


def _from_6(record: Record) -> Record:
    # version 6 kept the log's last 8 KB as they were cut, its first line cut too (`LastLines` leaves it out):
    # read as it is, its cut line goes once the window moves past it
    return {**record, "version": 7}


# version read -> that record as the next version (pure: new dicts, the record read left as it was)
MIGRATIONS: dict[int, Callable[[Record], Record]] = {
    1: _from_1,
    2: _from_2,
    3: _from_3,
    4: _from_4,
    5: _from_5,
    6: _from_6,
}


def to_record(analyzer: Analyzer) -> Record:
    """What a restart needs of `analyzer` to go on as if it had never stopped (its texts as they are: see
    `masked`)."""
    return {key: to_json(value) for key, value in record_values(analyzer).items()}


def record_values(analyzer: Analyzer) -> dict[str, Any]:
    """`to_record`'s keys, each with its value as `analyzer` holds it (`to_json` of it is the record's): what
    `watchdog.core.recordtext` writes as JSON text without making the record first."""
    decoder, scanner = analyzer.transcoder._decoder, analyzer._scanner
    return {
        "version": VERSION,
        "engine": analyzer.engine,
        "profiles": _users(analyzer),
        **{key: _get(analyzer, path) for key, (path, _) in FIELDS.items()},
        "transcoder.decoder": None if decoder is None else decoder.getstate(),
        "scanner.annotations": [[n, replace(rule, regex=None)] for n, rule in scanner._annotations.items()],
    }


def masked(record: Any) -> Any:
    """`record` with every text in it passed through `mask_secrets` (lengths kept: offsets stay right)."""
    kind = type(record)
    if kind is str:
        return mask_secrets(record)
    if kind is dict:
        return {k: masked(v) for k, v in record.items()}
    return [masked(v) for v in record] if kind is list else record


def migrate(record: Mapping[str, Any]) -> Record:
    """`record` as this build's `VERSION`.

    Raises:
        ValueError: a newer version, or none.
    """
    out, version = dict(record), record.get("version")
    if type(version) is not int or not 0 < version <= VERSION:
        raise ValueError(f"record version {version!r}, this build reads up to {VERSION}")
    while version < VERSION:
        out = MIGRATIONS[version](out)
        version = out["version"]
    return out


def restore(analyzer: Analyzer, record: Mapping[str, Any]) -> None:
    """Put `record`'s state into `analyzer`, made anew with the launch's settings, which then reads on as the
    recorded one would; it is changed only once all of `record` was read.

    Raises:
        ValueError: a record this build cannot read (damaged, another version, other user profiles or engine).
    """
    try:
        r = migrate(record)
        if r["profiles"] != _users(analyzer):
            raise ValueError("taken with other user profiles")
        # None: detecting it (the settings id says the launch's is unset)
        engine = _load(str | None, r["engine"])
        profile = analyzer.profile
        if engine is not None and (profile is None or profile.name != engine):
            if analyzer._catalogue is None:
                raise ValueError(f"taken with engine {engine!r}")
            profile = analyzer._catalogue.profile(engine)
        values = {path: _load(hint, r[key]) for key, (path, hint) in FIELDS.items()}
        state = _load(tuple[bytes, int] | None, r["transcoder.decoder"])
        annotations = {_load(int, n): _load(Rule, rule) for n, rule in r["scanner.annotations"]}
        decoder = (
            None if state is None else codecs.getincrementaldecoder(values["transcoder.encoding"])("replace")
        )
    except (LookupError, TypeError, AttributeError) as exc:  # a key, an index or an encoding missing
        raise ValueError(f"the record does not load: {exc!r}") from exc
    for path, value in values.items():  # every part read: the analyzer takes them
        parent, _, name = path.rpartition(".")
        setattr(_get(analyzer, parent) if parent else analyzer, name, value)
    if decoder is not None:
        decoder.setstate(state)
    analyzer.transcoder._decoder, analyzer._scanner._annotations = decoder, annotations
    current = analyzer.lifecycle.current
    if analyzer.lifecycle.live:  # the follower's clock did not run while it was down: two clocks
        current.live_from = len(current.timeline)
    analyzer._detector, analyzer._head_cut = None, 0
    if profile is not None:
        analyzer._use(profile)  # its rules, as the lifecycle's state says (startup or settled)


def _users(analyzer: Analyzer) -> list[str]:
    # the user profiles' files: those of its catalogue, or those merged into its named engine's profile
    if analyzer._catalogue is not None:
        return [p.source for p in analyzer._catalogue.user]
    sources = analyzer.profile.source.split(", ") if analyzer.profile is not None else []
    return [s for s in sources if not s.startswith(BUNDLED_SOURCE)]


def _get(obj: Any, path: str) -> Any:
    return functools.reduce(getattr, path.split("."), obj)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def to_json(value: Any) -> Any:
    """A value of the core (dataclasses, enums, bytes, tuples, sets) as JSON's: each dataclass as its fields,
    those at their default (`dataclass_defaults`) left out."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is tuple or kind is list:
        return list(value) if all(type(v) is str for v in value) else [to_json(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if kind is bytes or kind is bytearray:
        return bytes(value).decode("latin-1")
    if kind is set:
        return sorted((to_json(v) for v in value), key=repr)
    if kind is dict:
        return {k: to_json(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ((k, getattr(value, k), default) for k, default in dataclass_defaults(type(value)))
        return {k: v if type(v) in _PLAIN else to_json(v) for k, v, default in fields if v != default}
    raise TypeError(f"{kind.__name__} is not part of a record")


@functools.cache
def dataclass_defaults(cls: type) -> tuple[tuple[str, Any], ...]:
    """Each field of dataclass `cls`, and its default (`dataclasses.MISSING`: none, always written)."""
    fields = dataclasses.fields(cls)
    return tuple((f.name, f.default_factory() if callable(f.default_factory) else f.default) for f in fields)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _load(hint: Any, value: Any) -> Any:
    # `value` (JSON's) as the type `hint` names, checked on the way: a damaged record raises, never loads.
    origin, args, kind = typing.get_origin(hint), typing.get_args(hint), type(value)
    if origin is types.UnionType:
        if value is None and types.NoneType in args:
            return None
        kinds = [k for k in args if k is not types.NoneType]
        if len(kinds) == 1:
            return _load(kinds[0], value)
        if kind in kinds or (float in kinds and kind is int):  # a fact: a number or a text
            return value
    elif origin in (list, set) and kind is list:
        return origin(_load(args[0], v) for v in value)
    elif origin is tuple and kind is list:
        hints = [args[0]] * len(value) if args[-1] is Ellipsis else args
        return tuple(_load(h, v) for h, v in zip(hints, value, strict=True))
    elif origin is dict and kind is dict:
        return {_load(args[0], k): _load(args[1], v) for k, v in value.items()}
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint) and kind is dict:
        fields = _hints(hint)
        return hint(**{k: _load(fields[k], v) for k, v in value.items()})  # an unknown field: KeyError
    elif hint in (bytes, bytearray) and kind is str:
        return hint(value.encode("latin-1"))
    elif kind is hint or (hint is float and kind is int):
        return value
    raise ValueError(f"{value!r:.60} is not a {hint}")
