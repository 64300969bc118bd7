"""Engine profiles: the data files that map an engine's log lines to phases, progress, facts and verdicts.

A profile is a TOML file (`watchdog/profiles/<engine>.toml`, or a user's file given with `--profile`). Every
rule has a literal `match` (a substring that must be in the line, used as a fast prefilter; it may not
contain digits, so that lines differing only in numbers share one prefilter decision) and an optional
`regex` searched in the line once the literal is found. Rule tables:

- `[[start]]`     a launch begins (a second one in the same log starts a new incarnation)
- `[[phase]]`     `state = "loading_weights" | "allocating_kv_cache" | "capturing_graphs" | "starting"`
- `[[progress]]`  `name` ("weights", "graphs", or "@phase" for the current phase's bar); regex groups
                  `done` and `total` (or `percent`)
- `[[fact]]`      each named regex group becomes a fact (numbers become floats)
- `[[ready]]`     the server can serve
- `[[error]]`     an error line that is not a Python exception: `category`; `role` = "cause" (default) or
                  "wrapper" (points at a cause printed elsewhere); `fatal = true` when the launch is over
                  the moment it appears (otherwise an error is final once no progress follows it);
                  `hint` (formatted with the facts) overrides the category's hint
- `[[benign]]`    looks alarming but is not: never an error, never progress
- `[[stop]]`      a clean, intended shutdown

Every rule may carry `versions` (which engine versions print it) and `note`. A user profile may set
`extends = "sglang"` to add rules to a bundled engine (its rules are tried first).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from watchdog.exceptions import ConfigError
from watchdog.vocabulary import ENGINES, STARTUP_PHASES, Category

__all__ = ["CATEGORIES", "ENGINES", "ROLES", "RULE_KINDS", "STATES", "Profile", "Rule", "parse_profile"]

RULE_KINDS = ("start", "phase", "progress", "fact", "ready", "error", "benign", "stop")
STATES = tuple(s.value for s in STARTUP_PHASES)
ROLES = ("cause", "wrapper")
CATEGORIES = tuple(Category)
_DIGITS = re.compile(r"\d")
_ALLOWED_KEYS = {
    "match",
    "regex",
    "state",
    "name",
    "category",
    "role",
    "fatal",
    "versions",
    "note",
    "hint",
    "early",
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One line rule of a profile."""

    kind: str  # one of RULE_KINDS
    match: str  # literal that must occur in the line
    regex: re.Pattern[str] | None = None  # searched in the line's content once `match` is found
    state: str | None = None  # phase implied by the line
    name: str | None = None  # progress counter name
    category: Category | None = None  # error category
    role: str = "cause"  # error role: "cause" (may be the root cause) or "wrapper" (points at one elsewhere)
    fatal: bool = False  # the launch is over when this line appears (no grace period)
    hint: str | None = None  # error hint template, formatted with the facts
    versions: str = ""  # engine versions that print the line
    early: bool = False  # a ready line printed just before the server accepts connections (see ReadyReached)

    def apply(self, content: str) -> dict[str, str] | None:
        """Return the regex groups when the rule matches `content` (empty when it has no regex), else None."""
        if self.match not in content:
            return None
        if self.regex is None:
            return {}
        m = self.regex.search(content)
        if m is None:
            return None
        return {k: v for k, v in m.groupdict().items() if v is not None}


@dataclass(frozen=True, slots=True)
class Profile:
    """An engine's rules, ready to match."""

    name: str
    detect: tuple[str, ...] = ()  # substrings of the first lines that identify the engine
    rules: tuple[Rule, ...] = ()
    source: str = ""  # the file(s) it was read from
    early_health: bool = False  # its health endpoint answers 200 before the server can serve
    # ... or only once it can serve: a 200 is ready whatever the log showed (vLLM starts its HTTP server after
    # its engine; llama.cpp answers 503 while loading): a log at warning level need not show the weights loaded
    health_means_ready: bool = False
    bundled: bool = field(default=False, compare=False)  # exactly what `load_profile(name)` gives

    def rules_of(self, kind: str) -> tuple[Rule, ...]:
        """The rules of one kind, in file order."""
        return tuple(r for r in self.rules if r.kind == kind)


def parse_profile(data: Mapping[str, Any], where: str) -> Profile:
    name = data.get("extends", data.get("name"))
    if not isinstance(name, str) or not name:
        raise ConfigError(where, "name", 'a profile needs `name = "..."` (or `extends = "<engine>"`)')
    detect = data.get("detect", [])
    if not isinstance(detect, list) or not all(isinstance(d, str) for d in detect):
        raise ConfigError(where, "detect", "must be a list of strings")
    rules: list[Rule] = []
    for key, value in data.items():
        if key in {
            "name",
            "extends",
            "detect",
            "description",
            "versions",
            "note",
            "early_health",
            "health_means_ready",
        }:
            continue
        if key not in RULE_KINDS:
            raise ConfigError(where, key, f"unknown table; allowed: {', '.join(RULE_KINDS)}")
        if not isinstance(value, list):
            raise ConfigError(where, key, f"must be an array of tables: [[{key}]]")
        for i, raw in enumerate(value):
            rules.append(_rule(key, raw, where, f"{key}[{i}]"))
    early = data.get("early_health", False)
    if not isinstance(early, bool):
        raise ConfigError(where, "early_health", "must be true or false")
    serving = data.get("health_means_ready", False)
    if not isinstance(serving, bool) or (serving and early):
        raise ConfigError(where, "health_means_ready", "must be true or false, and not with early_health")
    return Profile(name, tuple(detect), tuple(rules), where, early_health=early, health_means_ready=serving)


def _rule(kind: str, raw: object, where: str, path: str) -> Rule:
    if not isinstance(raw, dict):
        raise ConfigError(where, path, "must be a table")
    unknown = set(raw) - _ALLOWED_KEYS
    if unknown:
        raise ConfigError(
            where, f"{path}.{sorted(unknown)[0]}", f"unknown key; allowed: {', '.join(sorted(_ALLOWED_KEYS))}"
        )
    match = raw.get("match")
    if not isinstance(match, str) or not match:
        raise ConfigError(where, f"{path}.match", "required: a non-empty literal substring of the line")
    if _DIGITS.search(match):
        raise ConfigError(where, f"{path}.match", "may not contain digits (put numbers in `regex`)")
    regex = None
    if "regex" in raw:
        try:
            regex = re.compile(str(raw["regex"]))
        except re.error as exc:
            raise ConfigError(where, f"{path}.regex", f"invalid regular expression: {exc}") from exc
    state = raw.get("state")
    if kind == "error" and state == "ready":
        pass  # an error only the serving server prints: a crash after ready
    elif state is not None and state not in STATES:
        raise ConfigError(where, f"{path}.state", f"{state!r} is not a phase; allowed: {', '.join(STATES)}")
    if kind == "phase" and state is None:
        raise ConfigError(where, f"{path}.state", f"required for a phase; allowed: {', '.join(STATES)}")
    category = raw.get("category")
    if category is not None and category not in CATEGORIES:
        raise ConfigError(
            where, f"{path}.category", f"{category!r} unknown; allowed: {', '.join(CATEGORIES)}"
        )
    role = raw.get("role", "cause")
    fatal = bool(raw.get("fatal", False))
    if role == "fatal":  # shorthand: a root cause that also ends the launch
        role, fatal = "cause", True
    if role not in ROLES:
        raise ConfigError(where, f"{path}.role", f"{role!r} unknown; allowed: {', '.join(ROLES)}, fatal")
    name = raw.get("name")
    if kind == "progress":
        if not isinstance(name, str):
            raise ConfigError(where, f"{path}.name", 'required: "weights", "graphs", ... or "@phase"')
        if regex is None or not ({"done", "total"} <= set(regex.groupindex) or "percent" in regex.groupindex):
            raise ConfigError(where, f"{path}.regex", "needs named groups (?P<done>...) and (?P<total>...)")
    if kind == "fact" and (regex is None or not regex.groupindex):
        raise ConfigError(where, f"{path}.regex", "needs named groups, one per fact")
    return Rule(
        kind=kind,
        match=match,
        regex=regex,
        state=state,
        name=name,
        category=None if category is None else Category(category),
        role=role,
        fatal=fatal,
        hint=raw.get("hint"),
        versions=str(raw.get("versions", "")),
        early=_early(raw, kind, where, path),
    )


def _early(raw: Mapping[str, Any], kind: str, where: str, path: str) -> bool:
    early = raw.get("early", False)
    if not isinstance(early, bool) or (early and kind != "ready"):
        raise ConfigError(where, f"{path}.early", "true or false, and only on a [[ready]] rule")
    return early
