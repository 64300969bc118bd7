"""The generic webhook: the alert as JSON, or a body made from a template over the alert's flat fields."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from watchdog.alerts.alert import Alert, AlertKind
from watchdog.alerts.compose import COLOUR, EMOJI, inert, lead, plain_text, traceback_tail
from watchdog.alerts.message import Message, Options
from watchdog.exceptions import DeliveryError

__all__ = ["build", "check_template", "flat_fields"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A format spec may pad or align, not allocate: `{summary:>999999999}` would.
_SPEC = re.compile(r"[<>^=]?[+\- ]?#?0?([0-9]{0,3})(\.[0-9]{1,4})?s?")
_TEMPLATE_TRACEBACK_CHARS = 3000
# The fields that hold log text: made `inert` in a template (whose body usually goes to a chat service).
_LOG_TEXT = frozenset(
    {"summary", "hint", "traceback", "last_line", "detail", "facts", "lead", "traceback_end", "changed"}
)


def flat_fields(alert: Alert) -> dict[str, str]:
    """Every name a template may use, each a string: the alert's fields, plus `text` (the whole alert as
    plain text), `lead`, `emoji`, `colour` (#RRGGBB), `traceback_end`, `fact_<name>`, `label_<name>`.
    Log text (summary, hint, traceback, last line, detail, facts) is `inert`: no mention, no link."""
    out: dict[str, str] = {}
    for key, value in alert.to_dict().items():
        if isinstance(value, list):
            out[key] = ", ".join(str(v) for v in value) if key != "traceback" else "\n".join(value)
        elif isinstance(value, dict):
            out[key] = ", ".join(f"{k}={_text(v)}" for k, v in value.items())
        else:
            out[key] = "" if value is None else str(value)
    out["text"] = plain_text(alert)
    out["lead"] = lead(alert)
    out["emoji"] = EMOJI[alert.kind]
    out["colour"] = f"#{COLOUR[alert.kind]:06X}"
    out["traceback_end"] = traceback_tail(alert.traceback, _TEMPLATE_TRACEBACK_CHARS)
    for key in _LOG_TEXT:
        out[key] = inert(out[key])
    for name, value in alert.facts:
        out[f"fact_{_slug(name)}"] = inert(_text(value))
    for name, value in alert.labels:
        out[f"label_{_slug(name)}"] = value
    return out


def build(alert: Alert, options: Options) -> Message:
    """The body: the alert as JSON (`Alert.to_dict()` plus `text`), or `options["template"]` filled in.

    A template is a string, or a mapping/list whose string leaves are filled in (it stays a JSON
    structure, so no value can break it). A string template is JSON by default (`content_type`): its
    values are JSON-string-escaped, and the result must parse. Fields are `{name}` of `flat_fields`, with an
    optional small format spec; attribute and index lookups (`{a.b}`, `{a[0]}`) are refused.
    """
    template = options.get("template")
    if template is None:
        return Message(json={**alert.to_dict(), "text": plain_text(alert)})
    values = flat_fields(alert)
    content_type = str(options.get("content_type") or "application/json")
    if isinstance(template, str):
        if "json" in content_type:
            escaped = {k: json.dumps(v, ensure_ascii=False)[1:-1] for k, v in values.items()}
            text = _fill(template, escaped)
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                raise DeliveryError(
                    f"the webhook template does not make valid JSON ({exc.msg} at character {exc.pos}): "
                    'quote each field, as in {"text": "{title}"}'
                ) from None
        else:
            text = _fill(template, values)
        return Message(text=text, content_type=content_type)
    if isinstance(template, Mapping | Sequence):
        return Message(json=_fill_tree(template, values))
    raise DeliveryError(
        f"the webhook template must be a string, a table or a list, not {type(template).__name__}"
    )


def check_template(template: object) -> None:
    """Raise ValueError naming the first field a template may not use (for config validation)."""
    sample = dict.fromkeys(_TEMPLATE_NAMES, "")
    try:
        if isinstance(template, str):
            _fill(template, sample)
        else:
            _fill_tree(template, sample)
    except DeliveryError as exc:
        raise ValueError(str(exc)) from None


# The fields of `flat_fields` a template may name, besides fact_<name> and label_<name>.
_TEMPLATE_NAMES = [
    *Alert(AlertKind.READY, "", "", "", "", 1, "", datetime.now(UTC)).to_dict(),
    *("text", "lead", "emoji", "colour", "traceback_end"),
]


class _Formatter(string.Formatter):
    """str.format_map over a flat dict of strings, with no way to reach anything else."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if not _NAME.fullmatch(field_name):
            raise DeliveryError(f"the webhook template field {{{field_name}}} is not a plain name")
        if field_name in kwargs:
            return kwargs[field_name], field_name
        if field_name.startswith(("fact_", "label_")):
            return "", field_name  # facts and labels vary by launch: an absent one is empty
        raise DeliveryError(
            f"the webhook template field {{{field_name}}} is unknown; known: {', '.join(_TEMPLATE_NAMES)}, "
            "fact_<name>, label_<name>"
        )

    def format_field(self, value: Any, format_spec: str) -> Any:
        match = _SPEC.fullmatch(format_spec)
        if match is None or (match.group(1) and int(match.group(1)) > 200):
            raise DeliveryError(f"the webhook template format spec {format_spec!r} is not allowed")
        return format(str(value), format_spec.removesuffix("s"))

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion not in (None, "s", "r"):
            raise DeliveryError(f"the webhook template conversion !{conversion} is not allowed")
        return super().convert_field(value, conversion)


def _fill(template: str, values: Mapping[str, str]) -> str:
    try:
        return _Formatter().vformat(template, (), values)
    except (ValueError, IndexError) as exc:
        raise DeliveryError(f"the webhook template is malformed: {exc}") from None


def _fill_tree(node: object, values: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return _fill(node, values)
    if isinstance(node, Mapping):
        return {str(k): _fill_tree(v, values) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_fill_tree(v, values) for v in node]
    if node is None or isinstance(node, bool | int | float):
        return node
    raise DeliveryError(
        f"the webhook template holds a {type(node).__name__}: use strings, numbers, tables, lists"
    )


def _text(value: object) -> str:
    if isinstance(value, dict):  # a progress entry
        return f"{value.get('done')}/{value.get('total')}"
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)
