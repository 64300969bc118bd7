"""The config from the environment: `LLW_SECTION__KEY=VALUE` variables merged over the file's tables."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from watchdog.config.models import Config, Loc, key_path
from watchdog.exceptions import ConfigError

__all__ = [
    "ENVIRONMENT_SOURCE",
    "PREFIX",
    "SEPARATOR",
    "Overrides",
    "apply_environment",
    "config_variables",
    "set_by_environment",
]

PREFIX = "LLW_"  # every variable of the config starts so (in any case)
SEPARATOR = "__"  # between the levels of a key path: LLW_LAUNCHES__KIMI__STALL_AFTER
ENVIRONMENT_SOURCE = "the environment"  # what messages name when there is no config file

# What Kubernetes puts in a pod's environment for each Service of its namespace (enableServiceLinks): a
# Service named `llw` or `llw-...` gives LLW_SERVICE_HOST, LLW_PORT_9469_TCP_ADDR and the like. They have no
# `__`, so no config variable looks like one; they are left alone rather than refused.
_SERVICE_LINK = re.compile(
    r"^LLW(?:_[A-Z0-9_]+)?_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?"
    r"|PORT(?:_[0-9]+_(?:TCP|UDP|SCTP)(?:_PROTO|_PORT|_ADDR)?)?)$"
)
_EXAMPLE = "LLW_DAEMON__LISTEN"
_BARE_PATH = re.compile(r"^(?:\.[A-Za-z0-9_]+)+$")  # ".log", ".deadlines.starting"


@dataclass
class Overrides:
    """What the environment set: each variable's key, and what it made or changed, to blame errors on it.

    `settings`: the key path each variable sets, by location (`("daemon", "listen")`: `LLW_DAEMON__LISTEN`).
    """

    settings: dict[Loc, str] = field(default_factory=dict)
    _leaves: dict[Loc, str] = field(default_factory=dict)  # each value set, and the variable that set it
    _created: dict[Loc, str] = field(default_factory=dict)  # each table the environment made

    def variable_at(self, key: str) -> str | None:
        """The variable that set the key path `key` (`launches.kimi.log`), or one above it, or made its table."""
        found = self._source(key)
        return None if found is None else found[1]

    def blame(self, error: ConfigError) -> ConfigError:
        """The same error said of the variable that set its key, when one did (else `error` itself)."""
        found = self._source(error.key) if error.key else None
        if found is None:
            return error
        table, variable = found
        problem = error.problem
        rest = error.key[len(key_path(table)) :]
        if table in self._created and _BARE_PATH.match(rest):
            # a key missing from a table the environment made: the variable that would set it
            levels = [str(part).upper() for part in table] + rest[1:].upper().split(".")
            problem = f"{problem}: set {_variable(PREFIX, levels)} too"
        return ConfigError(variable, error.key, problem)

    def _source(self, key: str) -> tuple[Loc, str] | None:
        """The deepest location that a variable set or made at or above `key`, and that variable."""
        best: tuple[Loc, str] | None = None
        for loc, variable in (*self._leaves.items(), *self._created.items()):
            path = key_path(loc)
            if (key == path or key.startswith((f"{path}.", f"{path}["))) and (
                best is None or len(loc) > len(best[0])
            ):
                best = (loc, variable)
        return best


def config_variables(environ: Mapping[str, str]) -> list[str]:
    """The names of the variables in `environ` that are the config's (`LLW_...`, service links left out),
    sorted."""
    return sorted(name for name in environ if _is_config_variable(name))


def apply_environment(data: dict[str, Any], environ: Mapping[str, str]) -> Overrides:
    """Merge the config's variables of `environ` into the parsed file `data`: the environment wins.

    `LLW_` then the key path, its levels separated by `__`, matched to the config's keys whatever their case;
    a table's NAME (`LLW_LAUNCHES__KIMI_EP__LOG`) is the table of that name in `data` (in any case, `_`
    standing for `-` or `.` too), else a new table of the name in lower case. A value is TOML when it parses
    as a TOML value that the key takes (`9100`, `true`, `["a", "b"]`, `{ log = "/x" }`), else the text; a
    secret is always the text. A table's value is a TOML inline table, merged key by key into the file's.

    Args:
        data: the file's TOML document (empty when there is none), changed in place.
        environ: the process's environment.

    Returns:
        What each variable set (to say so, and to blame the later errors of its keys on it).

    Raises:
        ConfigError: a variable names no key (the message names the variable, the key and what is allowed),
            names a table ambiguously, gives a table a value that is not an inline table, or sets a key that
            another variable sets too.
    """
    overrides = Overrides()
    # A name spelled with '-' or '.' first: `kimi-ep` names the table that `KIMI_EP` then also finds.
    for variable in sorted(
        config_variables(environ), key=lambda name: ("-" not in name and "." not in name, name)
    ):
        loc, schema = _locate(variable, data, overrides)
        value = _value(variable, loc, schema, environ[variable])
        for leaf in _leaves(loc, value):
            for other, by in overrides._leaves.items():
                if leaf[: len(other)] == other or other[: len(leaf)] == leaf:
                    raise ConfigError(variable, key_path(loc), f"also set by {by}: set each key once")
            overrides._leaves[leaf] = variable
        _merge(data, loc, value, variable, overrides)
        overrides.settings[loc] = variable
    return overrides


# -- names to keys ---------------------------------------------------------------------------------------


def _is_config_variable(name: str) -> bool:
    upper = name.upper()
    if not upper.startswith(PREFIX):
        return False
    return SEPARATOR in upper[len(PREFIX) :] or not _SERVICE_LINK.match(upper)


def _locate(variable: str, data: dict[str, Any], overrides: Overrides) -> tuple[Loc, dict[str, Any]]:
    """The key location the variable names, and the schema of that key; a NAME no table has is noted as made."""
    levels = variable[len(PREFIX) :].split(SEPARATOR)
    if "" in levels or "___" in variable:
        raise ConfigError(
            variable, "", f"levels are separated by exactly two underscores, e.g. {_EXAMPLE}: one is empty"
        )
    loc: Loc = ()
    schema = _root_schema()
    node: Any = data
    for depth, level in enumerate(levels):
        table = _table(schema)
        if table is None:
            raise ConfigError(
                variable,
                key_path(loc),
                "is a value, not a table: end the variable's name at "
                + _variable(variable[: len(PREFIX)], levels[:depth]),
            )
        if "properties" in table:  # a model: its keys are fixed
            key = level.lower()
            if key not in table["properties"]:
                raise ConfigError(variable, key_path((*loc, key)), _unknown(levels, depth, table))
            schema = table["properties"][key]
        else:  # a table of names: hosts, launches, labels...
            key = _name(variable, loc, level, node if isinstance(node, dict) else {})
            if not isinstance(node, dict) or key not in node:
                overrides._created.setdefault((*loc, key), variable)
            schema = table["additionalProperties"] if isinstance(table["additionalProperties"], dict) else {}
        loc = (*loc, key)
        node = node.get(key) if isinstance(node, dict) else None
    return loc, schema


def _unknown(levels: list[str], depth: int, table: Mapping[str, Any]) -> str:
    allowed = list(table["properties"])
    problem = f"unknown key; allowed: {', '.join(allowed)}"
    # LLW_DAEMON_LISTEN: one underscore where two separate the levels
    level = levels[depth]
    for key in allowed:
        if level.lower().startswith(f"{key}_"):
            fixed = [*levels[:depth], level[: len(key)], level[len(key) + 1 :], *levels[depth + 1 :]]
            return f"{problem} (levels are separated by two underscores: {_variable(PREFIX, fixed)})"
    return problem


def _variable(prefix: str, levels: list[str]) -> str:
    return prefix + SEPARATOR.join(levels)


def _name(variable: str, loc: Loc, level: str, names: Mapping[str, Any]) -> str:
    """The table name `level` stands for among `names`: exact, else ignoring case with `_` for `-` or `.`."""
    tiers = (lambda name: name == level, lambda name: _folded(name) == _folded(level))
    for matches in tiers:
        found = [name for name in names if matches(name)]
        if len(found) == 1:
            return found[0]
        if found:
            listed = " and ".join(key_path((*loc, name)) for name in sorted(found))
            raise ConfigError(
                variable,
                key_path(loc),
                f"{level} could be {listed}: spell the name exactly in the variable (Kubernetes and "
                f"`docker run -e` take '-' and '.' in a name), or set the table in "
                f"{_variable(PREFIX, [str(part).upper() for part in loc])} as TOML",
            )
    return level.lower()


def _folded(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


# -- the schema ------------------------------------------------------------------------------------------


@cache
def _schema() -> dict[str, Any]:
    return Config.model_json_schema(mode="validation")  # as `watchdog config-schema` prints it


def _root_schema() -> dict[str, Any]:
    return {key: value for key, value in _schema().items() if key != "$defs"}


def _members(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The alternatives a key's schema allows, references resolved, `null` left out."""
    if "$ref" in schema:
        yield _schema()["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    elif "anyOf" in schema:
        for member in schema["anyOf"]:
            yield from _members(member)
    elif schema.get("type") != "null":
        yield schema


def _table(schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The table a key may be (a model's, with `properties`, or one of names), or None for a plain value."""
    for member in _members(schema):
        if "properties" in member or member.get("type") == "object":
            return {"additionalProperties": True, **member}
    return None


_KINDS: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def _value(variable: str, loc: Loc, schema: Mapping[str, Any], text: str) -> Any:
    """The variable's text as the value of its key: TOML where it parses as something the key takes."""
    members = list(_members(schema))
    kinds = {"object" if "properties" in m else str(m.get("type")) for m in members}
    if any(m.get("writeOnly") for m in members):
        return text  # a secret is opaque: a password may look like TOML
    parsed = _toml(text)
    kind = None if parsed is None else _KINDS.get(type(parsed))
    if kind == "integer" and "number" in kinds:
        kind = "number"
    # a date is taken as text, and so is a chat id of digits for a key that takes text
    value = parsed if kind is not None and (kind in kinds or "string" not in kinds) else text
    if kinds == {"object"} and not isinstance(value, dict):
        raise ConfigError(
            variable, key_path(loc), "is a table: give a TOML inline table, e.g. { key = value, ... }"
        )
    return value


def _toml(text: str) -> Any | None:
    """The TOML value `text` spells, or None."""
    try:
        document = tomllib.loads(f"value = {text}")
    except tomllib.TOMLDecodeError:
        return None
    return document["value"] if len(document) == 1 else None  # one value, not `1\nother = 2`


# -- merging ---------------------------------------------------------------------------------------------


def _leaves(loc: Loc, value: Any) -> Iterator[Loc]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves((*loc, key), item)
    else:
        yield loc


def _merge(data: dict[str, Any], loc: Loc, value: Any, variable: str, overrides: Overrides) -> None:
    node = data
    for part in loc[:-1]:
        assert isinstance(part, str)  # the environment names tables, never array items
        if not isinstance(node.get(part), dict):
            node[part] = {}  # a key the environment goes below is a table, whatever the file said
        node = node[part]
    _put(node, loc, value, variable, overrides)


def _put(node: dict[str, Any], loc: Loc, value: Any, variable: str, overrides: Overrides) -> None:
    """Set `node[loc[-1]]`; a table is merged key by key into the table there (the environment's keys win)."""
    key = loc[-1]
    assert isinstance(key, str)
    if not isinstance(value, dict):
        node[key] = value
        return
    if not isinstance(node.get(key), dict):
        if key not in node:
            overrides._created.setdefault(loc, variable)
        node[key] = {}
    for name, item in value.items():
        _put(node[key], (*loc, name), item, variable, overrides)


def set_by_environment(config: Config) -> dict[str, str]:
    """The keys of a loaded config that the environment set: key path -> the variable that set it."""
    return {key_path(loc): variable for loc, variable in config._environment.items()}
