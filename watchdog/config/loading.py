"""Loading the config file: TOML read without blocking on a FIFO, the environment's `LLW_` variables over it,
secret references (`env:NAME`, `file:/path`) resolved, and validation errors explained with the file (or the
variable), the key path and what is allowed."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from watchdog.config.environment import ENVIRONMENT_SOURCE, apply_environment
from watchdog.config.models import (
    _IDENTIFIER,
    _READ_FLAGS,
    SECRET_FILE_LIMIT,
    Config,
    DaemonConfig,
    Deadlines,
    HostConfig,
    LaunchConfig,
    Loc,
    NotifierConfig,
    _KeyProblem,
    key_path,
)
from watchdog.exceptions import ConfigError
from watchdog.vocabulary import file_kind

# -- loading ---------------------------------------------------------------------------------------------


def load_config(path: Path | None, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read, resolve and validate a config file, and the config's variables of the environment over it.

    Args:
        path: the TOML file; None: no file, the config is the environment's `LLW_...` variables alone.
        environ: the environment (default: the process's): its `LLW_SECTION__KEY` variables override the
            file's keys (docs/config.md, "From the environment").

    Returns:
        The validated config, secrets resolved (kept in `SecretStr`).

    Raises:
        ConfigError: the file cannot be read or is not TOML (the message has the line and column), a
            secret reference cannot be resolved, or a key is unknown, mistyped or breaks a rule; the
            message names the file (or the variable that set the key), the key path and what is allowed.
    """
    source = ENVIRONMENT_SOURCE if path is None else str(path)
    data = {} if path is None else _read_toml(path)
    environ = os.environ if environ is None else environ
    overrides = apply_environment(data, environ)
    try:
        sources = _resolve_secrets(data, source, environ)
        config = parse_config(data, source=source)
    except ConfigError as exc:
        raise overrides.blame(exc) from None
    for loc, _, _ in _secret_locations(data):
        variable = overrides.variable_at(key_path(loc))
        if variable is not None:
            sources.setdefault(loc, variable)  # shown as "********** (LLW_NOTIFIERS__TEAM__URL)"
    config._secret_sources = sources
    config._environment = overrides.settings
    return config


def _read_toml(path: Path) -> dict[str, Any]:
    source = str(path)
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read the config file: {exc.strerror or exc}") from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise ConfigError(source, "", f"is {kind}, not a config file")
        with os.fdopen(fd, "rb", closefd=False) as file:
            return tomllib.load(file)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", f"invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(source, "", f"not UTF-8 text (byte {exc.start}): a config file is TOML") from None
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read the config file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def parse_config(data: Mapping[str, Any], *, source: str = "<config>") -> Config:
    """Validate already-parsed TOML (secrets taken as given: `load_config` resolves references first).

    Args:
        data: the TOML document as a dict.
        source: the file's name, for messages.

    Returns:
        The validated config.

    Raises:
        ConfigError: the first problem found (and how many more there are), naming `source` and the key path.
    """
    try:
        return Config.model_validate(data)
    except _KeyProblem as exc:
        raise ConfigError(source, exc.key, exc.problem) from None
    except ValidationError as exc:
        problems = [(key_path(error["loc"]), _explain(error)) for error in exc.errors(include_url=False)]
        key, problem = problems[0]
        if len(problems) > 1:
            others = "; ".join(f"{k}: {p}" for k, p in problems[1:4])
            more = f" (and {len(problems) - 4} more)" if len(problems) > 4 else ""
            problem = f"{problem}\n  also: {others}{more}"
        raise ConfigError(source, key, problem) from None


def _secret_locations(data: Mapping[str, Any]) -> Iterator[tuple[Loc, Any, str | int]]:
    """(key path, container, index) of every value that may be a secret reference."""
    daemon = data.get("daemon")
    if isinstance(daemon, dict):
        for key in ("basic_auth_user", "basic_auth_password", "probe_token"):
            if key in daemon:
                yield ("daemon", key), daemon, key
    notifiers = data.get("notifiers")
    if isinstance(notifiers, dict):
        for name, notifier in notifiers.items():
            if not isinstance(notifier, dict):
                continue
            for key in ("url", "token", "routing_key"):
                if key in notifier:
                    yield ("notifiers", name, key), notifier, key
            urls = notifier.get("urls")
            if isinstance(urls, list):
                for index in range(len(urls)):
                    yield ("notifiers", name, "urls", index), urls, index


def _resolve_secrets(data: dict[str, Any], source: str, environ: Mapping[str, str]) -> dict[Loc, str]:
    """Replace each `env:NAME` / `file:/path` reference in `data` by its value; return the references."""
    sources: dict[Loc, str] = {}
    for loc, container, index in _secret_locations(data):
        value = container[index]
        if not isinstance(value, str) or not value.startswith(("env:", "file:")):
            continue
        key = key_path(loc)
        container[index] = _read_secret(value, source, key, environ)
        sources[loc] = value
    return sources


def _read_secret(reference: str, source: str, key: str, environ: Mapping[str, str]) -> str:
    scheme, _, name = reference.partition(":")
    if scheme == "env":
        if not _IDENTIFIER.match(name):
            raise ConfigError(source, key, f"{reference!r}: give env:NAME with NAME a variable name")
        value = environ.get(name)
        if value is None:
            raise ConfigError(source, key, f"environment variable {name} is not set ({reference})")
    else:
        path = os.path.expanduser(name)
        if not path.startswith("/"):
            raise ConfigError(source, key, f"{reference!r}: give file:/absolute/path")
        value = _read_secret_file(path, source, key, reference)
    if not value.strip():
        raise ConfigError(source, key, f"the secret from {reference} is empty")
    return value


def _read_secret_file(path: str, source: str, key: str, reference: str) -> str:
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise ConfigError(source, key, f"cannot read {reference}: {exc.strerror or exc}") from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise ConfigError(source, key, f"{reference} is {kind}, not a file holding the secret")
        raw = os.read(fd, SECRET_FILE_LIMIT + 1)
    except OSError as exc:
        raise ConfigError(source, key, f"cannot read {reference}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > SECRET_FILE_LIMIT:
        raise ConfigError(source, key, f"{reference} is larger than {SECRET_FILE_LIMIT} bytes: not a secret")
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ConfigError(source, key, f"{reference} is not UTF-8 text") from None


_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "an array",
    dict: "a table",
}
_EXPECTED = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "list_type": "must be an array",
    "tuple_type": "must be an array",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
}


def _explain(error: Any) -> str:
    """Say what is wrong and what is allowed, without repeating the value (it may be a secret)."""
    kind, loc = error["type"], tuple(error["loc"])
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        return f"unknown key; allowed: {', '.join(allowed)}" if allowed else "unknown key"
    if kind == "missing":
        return "is required"
    if kind in _EXPECTED:
        got = _TYPE_NAMES.get(type(error.get("input")), "something else")
        return f"{_EXPECTED[kind]}, not {got}"
    if kind == "value_error":
        return str(error["ctx"]["error"])
    return str(error["msg"])


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class of the table at `loc` (the table names in hosts/launches/notifiers skipped)."""
    if not loc:
        return Config
    model = _SECTIONS.get(str(loc[0]))
    depth = 1 if model is DaemonConfig else 2  # [daemon], else [hosts.NAME], [launches.NAME], ...
    if model is None or len(loc) < depth:
        return None
    if len(loc) == depth:
        return model
    return Deadlines if model is LaunchConfig and loc[2:] == ("deadlines",) else None


_SECTIONS: dict[str, type[BaseModel]] = {
    "daemon": DaemonConfig,
    "hosts": HostConfig,
    "launches": LaunchConfig,
    "notifiers": NotifierConfig,
}


def _allowed_keys(loc: Loc) -> list[str]:
    model = _model_at(loc)
    return list(model.model_fields) if model is not None else []
