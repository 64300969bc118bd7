"""The config's reference: its JSON Schema and docs/config.md's tables, generated from the models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from watchdog.config.environment import PREFIX, SEPARATOR
from watchdog.config.models import (
    Config,
    DaemonConfig,
    Deadlines,
    HostConfig,
    LaunchConfig,
    NotifierConfig,
)


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of the config file (what `watchdog config-schema` prints)."""
    return Config.model_json_schema(mode="validation")


def config_reference_markdown() -> str:
    """The key tables of docs/config.md, generated from the models (a test keeps the docs in step)."""
    tables: list[tuple[str, tuple[str, ...], type[BaseModel]]] = [
        ("[daemon]", ("daemon",), DaemonConfig),
        ("[hosts.NAME]", ("hosts", "NAME"), HostConfig),
        ("[launches.NAME]", ("launches", "NAME"), LaunchConfig),
        ("deadlines = { PHASE = DURATION }", ("launches", "NAME", "deadlines"), Deadlines),
        ("[notifiers.NAME]", ("notifiers", "NAME"), NotifierConfig),
    ]
    out: list[str] = []
    for title, path, model in tables:
        summary = (model.__doc__ or "").split(": ", 1)[-1].strip()
        first = next(iter(model.model_fields))
        variable = PREFIX + SEPARATOR.join(part.upper() for part in (*path, "KEY"))
        example = PREFIX + SEPARATOR.join(part.upper() for part in (*path, first))
        out += [f"### `{title}`", "", summary[:1].upper() + summary[1:], ""]
        out += [f"From the environment: `{variable}` (e.g. `{example}`).", ""]
        out += ["| key | type | default | meaning |", "|---|---|---|---|"]
        properties = model.model_json_schema()["properties"]
        for key, field in model.model_fields.items():
            kind = _markdown_type(properties[key])
            default = (
                "required"
                if field.is_required()
                else _markdown_default(field.get_default(call_default_factory=True))
            )
            out.append(f"| `{key}` | {kind} | {default} | {field.description or ''} |")
        out.append("")
    return "\n".join(out)


def _markdown_type(schema: Mapping[str, Any]) -> str:
    if "anyOf" in schema:
        parts = [_markdown_type(part) for part in schema["anyOf"] if part.get("type") != "null"]
        return " or ".join(dict.fromkeys(parts))
    if "enum" in schema:
        return " \\| ".join(f'`"{value}"`' for value in schema["enum"])
    if schema.get("writeOnly"):
        return "secret"
    if schema.get("format") == "path":
        return "path"
    if "pattern" in schema and schema.get("type") == "string":
        return "duration"
    if "$ref" in schema:
        return "table"
    if schema.get("type") == "number" and "exclusiveMinimum" in schema:
        return "duration"
    if schema.get("type") == "array":
        return f"array of {_markdown_type(schema.get('items', {}))}"
    return {"string": "string", "integer": "integer", "boolean": "boolean", "object": "table"}.get(
        str(schema.get("type")), "value"
    )


def _markdown_default(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, BaseModel | dict | tuple) and not value:
        return "empty"
    if isinstance(value, BaseModel):
        return "none set"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}` (s)"
    return f"`{value}`"
