"""A launch's resume record as JSON text, save after save, the text of its parts that cannot change kept (pure).

A checkpoint encodes its analyzer's whole record at every save (`watchdog.follow.checkpoint`): most of it is
the text of values that never change once made (a past incarnation's arguments, error and timeline entries are
frozen dataclasses and tuples). `RecordText` writes the same text as `json.dumps(to_record(analyzer))` with
compact separators, and with it whether a text of the record may hold a credential (`may_hold_secret` of the JSON
text of each value that cannot change, and of each key: the look the whole record's JSON had before, piece by
piece); the text and that answer of each value that cannot change (of an immutable type all through) are kept
from one save to the next, so a save costs what changed since, not the whole record.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Mapping
from typing import Any

from watchdog.core.redaction import may_hold_secret
from watchdog.core.resume import dataclass_defaults, to_json

__all__ = ["RecordText"]

_encode_str = json.encoder.encode_basestring  # json.dumps(ensure_ascii=False)'s
# id -> (the value, kept alive so that its id stays its; its text; [its text, its look])
_Kept = dict[int, tuple[object, str, list[Any]]]
_CONSTANTS = {None: "null", True: "true", False: "false"}


class RecordText:
    """Writes one launch's records (`resume.record_values`) as JSON, one save after another, reusing the text
    of each value that cannot change from the save before (only those of that save are kept: memory stays that
    of one record)."""

    def __init__(self) -> None:
        self._before: _Kept = {}
        self._now: _Kept = {}
        self._new: list[
            list[Any]
        ] = []  # [text, look] of each value not looked at yet (look None until it is)
        self._seen = False  # a kept value's look said it may hold a credential

    def dumps(self, values: Mapping[str, Any]) -> tuple[str, bool]:
        """`values` as `json.dumps(to_json(values), ensure_ascii=False, separators=(",", ":"))` writes them, and
        whether a text in them may hold what `mask_secrets` masks: `may_hold_secret` of the JSON text of each
        value that cannot change and of each key (their quotes and tabs unescaped: `"api_key": "..."`,
        `token:\\tvalue`), as the whole record's JSON was looked at before, a part kept answering as it did."""
        self._now, self._new, self._seen = {}, [], False
        try:
            text, _ = self._mapping(values)
            secret = self._look() or self._seen
        except BaseException:
            self._before = {}  # nothing half looked at is kept
            raise
        else:
            self._before = self._now
        finally:
            self._now, self._new = {}, []
        return text, secret

    def _look(self) -> bool:
        # the texts not looked at yet: at once (one search of them all, nearly always clean), else one by one
        new = self._new
        if not new:
            return False
        if not _may_hold("\n".join(entry[0] for entry in new)):
            for entry in new:
                entry[1] = False
            return False
        for entry in new:
            entry[1] = _may_hold(entry[0])
        return any(entry[1] for entry in new)

    # Each writer returns (text, frozen: it cannot change); the texts to look at go to `_new`: each value that
    # cannot change inside one that can (`_root`), which keeps it with its look.

    def _value(self, value: Any) -> tuple[str, bool]:
        kind = type(value)
        if kind is int:
            return int.__repr__(value), True
        if kind is float:  # json.dumps's text of a float (NaN and the infinities its own)
            return (float.__repr__(value) if math.isfinite(value) else json.dumps(value)), True
        if value is None or kind is bool:
            return _CONSTANTS[value], True
        if kind is str:
            return _encode_str(value), True
        if kind is tuple or kind is list:
            return self._sequence(value, frozen=kind is tuple)
        if kind is dict:
            return self._mapping(value)
        if kind is bytes:
            return _encode_str(value.decode("latin-1")), True
        if isinstance(value, enum.Enum):  # a constant
            return self._value(value.value)[0], True
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value)
        # a set (sorted as JSON values), a bytearray: small and changing; written as `to_json` makes them
        text = json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))
        self._new.append([text, None])
        return text, False

    def _root(self, value: Any) -> tuple[str, bool]:
        # a value inside one that can change: if it cannot, its text and look are kept for the next save (by id)
        kind = type(value)
        if kind in _SCALARS:
            return self._value(value)
        key = id(value)
        kept = self._before.get(key)
        if kept is not None and kept[0] is value:
            self._now[key] = kept
            self._seen = self._seen or kept[2][1] is not False
            return kept[1], True
        text, frozen = self._value(value)
        if frozen:
            entry: list[Any] = [text, None]
            self._new.append(entry)
            if kind is not bytes:  # a buffer: another object at every save, its text only memory
                self._now[key] = (value, text, entry)
        return text, frozen

    def _sequence(self, value: tuple[Any, ...] | list[Any], *, frozen: bool) -> tuple[str, bool]:
        parts = [self._value(item) if frozen else self._root(item) for item in value]
        return "[" + ",".join(text for text, _ in parts) + "]", self._all(parts, frozen=frozen)

    def _mapping(self, value: Mapping[Any, Any]) -> tuple[str, bool]:
        if any(type(key) is not str for key in value):  # JSON's keys are texts: json.dumps writes others so
            text = json.dumps(to_json(dict(value)), ensure_ascii=False, separators=(",", ":"))
            self._new.append([text, None])
            return text, False
        parts = [self._key(key) + ":" + self._root(item)[0] for key, item in value.items()]
        return "{" + ",".join(parts) + "}", False

    def _key(self, key: str) -> str:
        # a mapping's key: the record's names, facts' and progress' (a vocabulary, the same at every launch's
        # every save): its text and look made once for every writer (`_KEYS`), not kept by each launch's
        known = _KEYS.get(key)
        if known is None:
            text = _encode_str(key)
            if len(_KEYS) >= _KEYS_KEPT:
                _KEYS.clear()
            known = _KEYS[key] = (text, _may_hold(text))
        self._seen = self._seen or known[1]
        return known[0]

    def _dataclass(self, value: Any) -> tuple[str, bool]:
        # as `to_json` writes it: its fields in order, those at their default left out
        cls: type = type(value)
        frozen: bool = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        names, parts = [], []
        for name, default in dataclass_defaults(cls):
            item = getattr(value, name)
            if item != default:
                names.append(name)
                parts.append(self._value(item) if frozen else self._root(item))
        text = ",".join(_encode_str(name) + ":" + part[0] for name, part in zip(names, parts, strict=True))
        return "{" + text + "}", self._all(parts, frozen=frozen)

    def _all(self, parts: list[tuple[str, bool]], *, frozen: bool) -> bool:
        # whether a container of `parts` cannot change (`frozen`: its type cannot); one of a frozen type that
        # holds a part that can is one that can, and its frozen parts, kept by nobody, are looked at as such
        if not frozen:
            return False
        if all(part_frozen for _, part_frozen in parts):
            return True
        self._new.extend([text, None] for text, part_frozen in parts if part_frozen)
        return False


def _may_hold(text: str) -> bool:
    # `may_hold_secret` of JSON text, its quotes and tabs unescaped
    return may_hold_secret(text.replace('\\"', '"').replace("\\t", "\t"))


_SCALARS = frozenset({int, float, bool, type(None)})  # their text is made faster than looked up
# A mapping key's text and whether it may hold a credential, by the key (`RecordText._key`): shared by every
# launch's writer (kept by each, the same ~70 names cost 200 launches ~4 MB); at most `_KEYS_KEPT`, then anew.
_KEYS: dict[str, tuple[str, bool]] = {}
_KEYS_KEPT = 4096
