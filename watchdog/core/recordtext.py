"""A launch's resume record as JSON text, save after save, the text of its parts that cannot change kept (pure).

A checkpoint encodes its analyzer's whole record at every save (`watchdog.follow.checkpoint`): most of it is
the text of values that never change once made (a past incarnation's arguments, error and timeline entries are
frozen dataclasses and tuples). `RecordText` writes the same text as `json.dumps(to_record(analyzer))` with
`resume.SEPARATORS`, and with it whether any text of the record may hold a credential (`may_hold_secret` of each
text and key); the text and that answer of each value that cannot change (of an immutable type, all through)
are kept from one save to the next, so a save costs what changed since, not the whole record.
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
_Kept = dict[
    int, tuple[object, str, bool]
]  # id -> (the value, kept alive so that its id stays its; text; secret)
_CONSTANTS = {None: "null", True: "true", False: "false"}


class RecordText:
    """Writes one launch's records (`resume.record_values`) as JSON, one save after another, reusing the text
    of each value that cannot change from the save before (only those of that save are kept: memory stays that
    of one record)."""

    def __init__(self) -> None:
        self._before: _Kept = {}
        self._now: _Kept = {}
        self._short: dict[str, bool] = {}  # short texts' `may_hold_secret`, by text (names, states, phases)

    def dumps(self, values: Mapping[str, Any]) -> tuple[str, bool]:
        """`values` as `json.dumps(to_json(values), ensure_ascii=False, separators=(",", ":"))` writes them, and
        whether any of their texts (values or keys) may hold what `mask_secrets` masks (`may_hold_secret`)."""
        self._now = {}
        try:
            text, _, secret = self._mapping(values)
        finally:
            self._before, self._now = self._now, {}
        return text, secret

    # Each writer returns (text, frozen: it cannot change, secret: a text in it may hold a credential).

    def _value(self, value: Any) -> tuple[str, bool, bool]:
        kind = type(value)
        if kind is int:
            return int.__repr__(value), True, False
        if kind is float:  # json.dumps's text of a float (NaN and the infinities its own)
            return (float.__repr__(value) if math.isfinite(value) else json.dumps(value)), True, False
        if value is None or kind is bool:
            return _CONSTANTS[value], True, False
        kept = self._before.get(id(value))
        if kept is not None and kept[0] is value:
            return kept[1], True, kept[2]
        if kind is str:
            return _encode_str(value), True, self._secret(value)
        if kind is tuple or kind is list:
            return self._sequence(value, frozen=kind is tuple)
        if kind is dict:
            return self._mapping(value)
        if kind is bytes:
            text = value.decode("latin-1")
            return _encode_str(text), True, self._secret(text)
        if isinstance(value, enum.Enum):
            text, _, secret = self._value(value.value)
            return text, True, secret
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value)
        # a set (sorted as JSON values), a bytearray: small and changing; written as `to_json` makes them
        plain = to_json(value)
        return json.dumps(plain, ensure_ascii=False, separators=(",", ":")), False, self._texts_secret(plain)

    def _child(self, value: Any) -> tuple[str, bool, bool]:
        # a value inside another: one that cannot change is kept for the next save (its id is the key)
        out = self._value(value)
        if out[1] and type(value) not in _UNKEPT:
            self._now[id(value)] = (value, out[0], out[2])
        return out

    def _sequence(self, value: tuple[Any, ...] | list[Any], *, frozen: bool) -> tuple[str, bool, bool]:
        parts, secret = [], False
        for item in value:
            text, item_frozen, item_secret = self._value(item) if frozen else self._child(item)
            parts.append(text)
            frozen, secret = frozen and item_frozen, secret or item_secret
        return "[" + ",".join(parts) + "]", frozen, secret

    def _mapping(self, value: Mapping[Any, Any]) -> tuple[str, bool, bool]:
        parts, secret = [], False
        for key, item in value.items():
            if type(key) is not str:  # JSON's keys are texts: json.dumps writes any other as it does
                plain = to_json(dict(value))
                return (
                    json.dumps(plain, ensure_ascii=False, separators=(",", ":")),
                    False,
                    self._texts_secret(plain),
                )
            key_text, _, key_secret = self._child(key)
            text, _, item_secret = self._child(item)
            parts.append(key_text + ":" + text)
            secret = secret or key_secret or item_secret
        return "{" + ",".join(parts) + "}", False, secret

    def _dataclass(self, value: Any) -> tuple[str, bool, bool]:
        # as `to_json` writes it: its fields in order, those at their default left out
        cls: type = type(value)
        frozen: bool = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        parts, secret = [], False
        for name, default in dataclass_defaults(cls):
            item = getattr(value, name)
            if item != default:
                text, item_frozen, item_secret = self._value(item) if frozen else self._child(item)
                parts.append(_encode_str(name) + ":" + text)
                frozen, secret = frozen and item_frozen, secret or item_secret
        return "{" + ",".join(parts) + "}", frozen, secret

    def _secret(self, text: str) -> bool:
        # `may_hold_secret`, a short text's answer remembered (the same few names, states and phases every save)
        if len(text) > _SHORT:
            return may_hold_secret(text)
        known = self._short.get(text)
        if known is None:
            if len(self._short) >= _SHORT_KEPT:
                self._short.clear()
            known = self._short[text] = may_hold_secret(text)
        return known

    def _texts_secret(self, value: Any) -> bool:
        # whether any text or key of a JSON value may hold a credential
        kind = type(value)
        if kind is str:
            return self._secret(value)
        if kind is dict:
            return any(self._texts_secret(k) or self._texts_secret(v) for k, v in value.items())
        return kind is list and any(self._texts_secret(v) for v in value)


_SHORT = 64  # texts up to this long have their answer remembered ...
_SHORT_KEPT = 512  # ... this many of them at most

# values not kept: numbers and constants (their text is made faster than looked up), and bytes (the buffers: another
# object at every save, whose text and old object would only take memory)
_UNKEPT = frozenset({int, float, bool, type(None), bytes})
