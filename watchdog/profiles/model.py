"""Engine profiles: the rules that map an engine's log lines to phases, progress, facts and verdicts (no I/O).

A profile is a TOML file (`watchdog/profiles/<engine>.toml`, or a user's `--profile`); docs/profiles.md is its
schema, table by table. A `Catalogue` hands the core every engine's `detect` markers and, once one is found,
its profile.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from watchdog.exceptions import ConfigError
from watchdog.profiles.categoryrules import CategoryRule, parse_category_rule, required_texts
from watchdog.profiles.keys import check_keys
from watchdog.vocabulary import ARGUMENT_FLAG_STYLES, ARGUMENT_SYNTAXES, ENGINES, STARTUP_PHASES, Category

__all__ = [
    "CATEGORIES",
    "ENGINES",
    "ROLES",
    "RULE_KINDS",
    "SERVING_GROUPS",
    "SERVING_REQUESTS",
    "STATES",
    "TRACE_KINDS",
    "Catalogue",
    "CategoryRule",
    "Draft",
    "Hint",
    "LazyPattern",
    "Profile",
    "Rule",
    "Searched",
    "merge",
    "parse_profile",
]

RULE_KINDS = (
    "start",
    "phase",
    "progress",
    "fact",
    "ready",
    "error",
    "benign",
    "stop",
    "dying",
    "arguments",
    "served",
    "serving",
)
SERVING_REQUESTS = ("started", "tokens", "finished", "idle")
"""What a `[[serving]]` rule's `request` says its line is: a request started, made progress (tokens), finished,
or none is left."""
SERVING_GROUPS = ("running", "waiting", "tokens", "prompt", "slot")
"""The named groups a `[[serving]]` rule's regex may have: requests running and waiting, tokens generated and
prompt tokens prefilled (a count or a rate, since its last line), a request's slot."""
TRACE_KINDS = ("frame", "main", "step", "consequence", "teardown", "caught", "request", "hint")
STATES = tuple(s.value for s in STARTUP_PHASES)
_TEMPLATES = {"functions": r"in (?:{})(?!\w)", "exceptions": r"^(?:[\w.]*\.)?(?:{})\b"}
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
    "survivable",
    "versions",
    "note",
    "hint",
    "early",
    "confirm_due",
    "syntax",
    "flags",
    "request",
    "clean_exit",
}

BUNDLED_SOURCE = "watchdog/profiles/"  # where a bundled profile says it comes from (`Profile.source`)
# Rule kinds whose regex's groups are checked as a profile loads: their regexes compile then, checked or not
_GROUPS_CHECKED = frozenset({"progress", "fact", "arguments", "serving"})


class LazyPattern:
    """A rule's regex as written, compiled the first time it is searched: a bundled profile's rules of the kinds
    whose groups need no check at load, and its traceback tables (the tests compile every one). A log holds the
    literals of few of a profile's ~80 rules, and compiling them all was half of loading it. Until then a text
    that holds none of the texts one of which its every match holds (`required_texts` of `texts_of`: a regex of
    which every match of `pattern` holds a match; `pattern` itself by default) is no match, without compiling
    (a profile's traceback tables were 54 compiles of every replay of its engine). Equal to another by its text."""

    __slots__ = ("_compiled", "_texts", "_texts_of", "pattern")

    def __init__(self, pattern: str, texts_of: str | None = None) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None
        self._texts_of = pattern if texts_of is None else texts_of
        self._texts: tuple[str, ...] | None = None  # found when first asked

    def compile_now(self) -> bool:
        """Compile it now, ahead of its first search; whether there was anything to do."""
        if self._compiled is not None:
            return False
        self.compiled()
        return True

    def compiled(self) -> re.Pattern[str]:
        """The compiled regex (compiled once)."""
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled

    def search(self, text: str) -> re.Match[str] | None:
        """As `re.Pattern.search`."""
        compiled = self._compiled
        if compiled is None:
            if self._none_in(text):
                return None
            compiled = self.compiled()
        return compiled.search(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """As `re.Pattern.finditer`."""
        compiled = self._compiled
        if compiled is None:
            if self._none_in(text):
                return iter(())
            compiled = self.compiled()
        return compiled.finditer(text)

    def _none_in(self, text: str) -> bool:
        # whether `text` holds none of the texts one of which every match holds (so no match)
        texts = self._texts
        if texts is None:
            texts = self._texts = required_texts(self._texts_of)
        return bool(texts) and not any(t in text for t in texts)

    @property
    def groupindex(self) -> Mapping[str, int]:
        """As `re.Pattern.groupindex`."""
        return self.compiled().groupindex

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazyPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"re.compile({self.pattern!r})"  # as the compiled one's

    def __reduce__(self) -> tuple[Any, ...]:
        return LazyPattern, (self.pattern, self._texts_of)  # compiled again, when used


@dataclass(frozen=True, slots=True)
class Rule:
    """One line rule of a profile."""

    kind: str  # one of RULE_KINDS
    match: str  # literal that must occur in the line
    regex: re.Pattern[str] | LazyPattern | None = None  # searched in the line's content once `match` is found
    state: str | None = None  # phase implied by the line
    name: str | None = None  # progress counter name
    category: Category | None = None  # error category
    role: str = "cause"  # error role: "cause" (may be the root cause) or "wrapper" (points at one elsewhere)
    fatal: bool = False  # the launch is over when this line appears (no grace period)
    # ... only while the launch is starting (`fatal = "starting"`): printed on a path that ends a starting engine
    # (its caller is a startup step with no handler), and also on one an engine that serves goes on from
    fatal_starting: bool = False
    survivable: bool = False  # an error the engine may go on from (a retry): not certain by category
    hint: str | None = None  # error hint template, formatted with the facts
    versions: str = ""  # engine versions that print the line
    early: bool = False  # a ready line printed just before the server accepts connections (see ReadyReached)
    # a [[ready]] rule's: the line that confirms an early ready line is due after this one (the server's path is
    # sure to print it); without `early` the line is no ready line itself (see ReadyReached.confirm_due)
    confirm_due: bool = False
    syntax: str = ""  # an arguments rule's: how its dump is written (`ARGUMENT_SYNTAXES`)
    flags: str = "name"  # an arguments rule's: how its names read as flags (`ARGUMENT_FLAG_STYLES`)
    request: str = ""  # a serving rule's: what its line says of one request (`SERVING_REQUESTS`); "": counts
    clean_exit: bool = False  # a dying rule's: printed at every exit, a clean stop's too (exit noise)

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


# A traceback table's regex: a bundled profile's compiled when first searched (`LazyPattern`), a user's as it loads
Searched = re.Pattern[str] | LazyPattern


@dataclass(frozen=True, slots=True)
class Hint:
    """What an operator can do about an error of `category`: a `[[hint]]` table."""

    category: str
    text: str  # formatted with the facts and what the message names (see `watchdog.core.categories`)
    phases: tuple[str, ...] = ()  # only for an error in one of these phases (any when empty)
    when: Searched | None = None  # only when the error's summary matches


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
    frames: tuple[tuple[str, Searched], ...] = ()  # (phase, a frame of it): [[frame]]
    mains: tuple[Searched, ...] = ()  # [[main]]
    steps: tuple[Searched, ...] = ()  # [[step]]
    consequences: tuple[Searched, ...] = ()  # [[consequence]]
    # [[teardown]]: searched in a traceback's innermost frame and exception line ("<frame>\n<exception line>")
    teardowns: tuple[Searched, ...] = ()
    caught: tuple[Searched, ...] = ()  # [[caught]]: functions that log an exception and go on
    requests: tuple[Searched, ...] = ()  # [[request]]: a request's handlers (their errors are its own)
    hints: tuple[Hint, ...] = ()  # [[hint]], in the order tried
    # arguments whose value differs at every launch by nature (a random seed, a container's host name): a
    # comparison with the launch before leaves them out
    volatile_arguments: tuple[str, ...] = ()
    categories: tuple[
        CategoryRule, ...
    ] = ()  # [[category]]: what an error's class, module, message say it is
    # its hash, computed once (`__hash__`): a profile keys the analyzer's caches of compiled rules, looked up per
    # block of lines, and hashing every rule again took 64 us a look-up
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        """The hash of its fields (as the dataclass's would be), computed the first time only."""
        known = self._hash
        if known is None:
            known = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash", known)
        return known

    def lazy_patterns(self) -> Iterator[LazyPattern]:
        """Its regexes compiled when first searched (`LazyPattern`): its traceback tables', its hints' and its
        rules'; a caller with time to spare compiles them ahead (`Analyzer.prepare`)."""
        tables = (
            *(pattern for _, pattern in self.frames),
            *self.mains,
            *self.steps,
            *self.consequences,
            *self.teardowns,
            *self.caught,
            *self.requests,
            *(hint.when for hint in self.hints),
            *(rule.regex for rule in self.rules),
        )
        yield from (pattern for pattern in tables if isinstance(pattern, LazyPattern))

    def rules_of(self, kind: str) -> tuple[Rule, ...]:
        """The rules of one kind, in file order."""
        return tuple(r for r in self.rules if r.kind == kind)


def parse_profile(data: Mapping[str, Any], where: str, *, checked: bool = False) -> Profile:
    name = data.get("extends", data.get("name"))
    if not isinstance(name, str) or not name:
        raise ConfigError(where, "name", 'a profile needs `name = "..."` (or `extends = "<engine>"`)')
    detect = data.get("detect", [])
    if not isinstance(detect, list) or not all(isinstance(d, str) for d in detect):
        raise ConfigError(where, "detect", "must be a list of strings")
    rules: list[Rule] = []
    traces: dict[str, list[Any]] = {kind: [] for kind in TRACE_KINDS}
    categories = [
        parse_category_rule(raw, CATEGORIES, where, f"category[{i}]", checked=checked)
        for i, raw in enumerate(_tables(data, "category", where))
    ]
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
            "volatile_arguments",
            "category",
        }:
            continue
        if key not in RULE_KINDS + TRACE_KINDS:
            raise ConfigError(where, key, f"unknown table; allowed: {', '.join(RULE_KINDS + TRACE_KINDS)}")
        if not isinstance(value, list):
            raise ConfigError(where, key, f"must be an array of tables: [[{key}]]")
        for i, raw in enumerate(value):
            if key in traces:
                traces[key].append(_trace(key, raw, where, f"{key}[{i}]", checked=checked))
            else:
                rules.append(_rule(key, raw, where, f"{key}[{i}]", checked=checked))
    early = data.get("early_health", False)
    if not isinstance(early, bool):
        raise ConfigError(where, "early_health", "must be true or false")
    serving = data.get("health_means_ready", False)
    if not isinstance(serving, bool) or (serving and early):
        raise ConfigError(where, "health_means_ready", "must be true or false, and not with early_health")
    volatile = data.get("volatile_arguments", [])
    if not isinstance(volatile, list) or not all(isinstance(v, str) and v for v in volatile):
        raise ConfigError(where, "volatile_arguments", "must be a list of argument names")
    return Profile(
        name,
        tuple(detect),
        tuple(rules),
        where,
        early_health=early,
        health_means_ready=serving,
        frames=tuple(traces["frame"]),
        mains=tuple(traces["main"]),
        steps=tuple(traces["step"]),
        consequences=tuple(traces["consequence"]),
        teardowns=tuple(traces["teardown"]),
        caught=tuple(traces["caught"]),
        requests=tuple(traces["request"]),
        hints=tuple(traces["hint"]),
        volatile_arguments=tuple(volatile),
        categories=tuple(categories),
    )


def merge(name: str, user: Sequence[Profile], base: Profile | None, common: Profile) -> Profile:
    """Engine `name`'s profile: the user's profiles of it, then its bundled one (None for a user's own
    engine), then the common rules, tried in that order."""
    own = [*user, *([base] if base else [])]
    parts = [*own, common]
    early = any(p.early_health for p in own)
    return Profile(
        name,
        tuple(d for p in own for d in p.detect),
        tuple(r for p in parts for r in p.rules),
        ", ".join(p.source for p in own),
        early_health=early,
        health_means_ready=any(p.health_means_ready for p in own[len(user) :] or own) and not early,
        frames=tuple(f for p in parts for f in p.frames),
        mains=tuple(m for p in parts for m in p.mains),
        steps=tuple(m for p in parts for m in p.steps),
        consequences=tuple(m for p in parts for m in p.consequences),
        teardowns=tuple(m for p in parts for m in p.teardowns),
        caught=tuple(m for p in parts for m in p.caught),
        requests=tuple(m for p in parts for m in p.requests),
        hints=tuple(h for p in parts for h in p.hints),
        volatile_arguments=tuple(dict.fromkeys(v for p in parts for v in p.volatile_arguments)),
        categories=tuple(c for p in parts for c in p.categories),
    )


class Draft:
    """A profile file's parsed TOML, compiled into a `Profile` when first asked for: detection reads every
    engine's `detect` markers, and only the engine it finds needs its rules."""

    __slots__ = ("_profile", "data", "where")

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data, self.where = data, where
        self._profile: Profile | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return Draft, (self.data, self.where)  # the compiled profile is made again

    @property
    def compiled(self) -> bool:
        """Whether its profile was asked for (and compiled)."""
        return self._profile is not None

    @property
    def detect(self) -> tuple[str, ...]:
        """The profile's `detect` markers, without compiling its rules."""
        return tuple(self.data.get("detect", ()))

    def profile(self) -> Profile:
        """The compiled profile (the same object each time)."""
        if self._profile is None:
            # a bundled file's: its category regexes compile (the tests compile each), on first use
            self._profile = parse_profile(self.data, self.where, checked=True)
        return self._profile


@dataclass(frozen=True)
class Catalogue:
    """The engines a log may be detected as: their `detect` markers, and the profile of the one found (made
    by the profiles' loader, which reads the files; the core only asks it)."""

    bundled: tuple[tuple[str, Draft], ...]  # (engine, its file) in detection order: a tie goes to the first
    common: Draft
    user: tuple[Profile, ...] = ()  # user profiles: of a bundled engine (`extends`) or of their own
    # each engine's merged profile, made once: every launch (and each relaunch) of an engine shares it
    _merged: dict[str, Profile] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        """Every engine it knows: the bundled ones, then the users' own."""
        bundled = tuple(name for name, _ in self.bundled)
        return bundled + tuple(dict.fromkeys(p.name for p in self.user if p.name not in bundled))

    @functools.cached_property
    def markers(self) -> tuple[tuple[str, str], ...]:
        """(engine, marker) pairs, the users' first; the fallback engine (the last bundled) has none (made once:
        each launch's engine detection holds them while its head is read, ~100 objects a copy)."""
        own = [(p.name, d) for p in self.user for d in p.detect]
        return (*own, *((name, d) for name, draft in self.bundled[:-1] for d in draft.detect))

    def profile(self, name: str) -> Profile:
        """Engine `name`'s profile, merged with the common rules and the users' profiles of it (the same object
        each time)."""
        if (made := self._merged.get(name)) is not None:
            return made
        base = next((d.profile() for n, d in self.bundled if n == name), None)
        user = [p for p in self.user if p.name == name]
        if base is None and not user:
            raise KeyError(name)
        made = self._merged[name] = merge(name, user, base, self.common.profile())
        return made


def _tables(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ConfigError(where, key, f"must be an array of tables: [[{key}]]")
    return value


def _rule(kind: str, raw: object, where: str, path: str, *, checked: bool = False) -> Rule:
    if not isinstance(raw, dict):
        raise ConfigError(where, path, "must be a table")
    check_keys(raw, _ALLOWED_KEYS, where, path)
    match = raw.get("match")
    if not isinstance(match, str) or not match:
        raise ConfigError(where, f"{path}.match", "required: a non-empty literal substring of the line")
    if _DIGITS.search(match):
        raise ConfigError(where, f"{path}.match", "may not contain digits (put numbers in `regex`)")
    regex: re.Pattern[str] | LazyPattern | None = None
    if "regex" in raw:
        if checked and kind not in _GROUPS_CHECKED:
            regex = LazyPattern(str(raw["regex"]))  # known to compile: compiled when first used
        else:
            regex = _compile(raw["regex"], where, f"{path}.regex")
    state = raw.get("state")
    if kind in ("error", "stop") and state == "ready":
        pass  # an error only the serving server prints: a crash after ready; a stop line only once it served
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
    fatal_raw = raw.get("fatal", False)
    if fatal_raw not in (True, False, "starting") or (fatal_raw == "starting" and kind != "error"):
        raise ConfigError(where, f"{path}.fatal", 'true, false, or "starting" (only for an error rule)')
    fatal_starting = fatal_raw == "starting"
    fatal = fatal_raw is True
    if role == "fatal":  # shorthand: a root cause that also ends the launch
        role, fatal = "cause", True
    if role not in ROLES:
        raise ConfigError(where, f"{path}.role", f"{role!r} unknown; allowed: {', '.join(ROLES)}, fatal")
    survivable = bool(raw.get("survivable", False))
    if survivable and (kind != "error" or fatal or fatal_starting):
        raise ConfigError(where, f"{path}.survivable", "only for an error rule that is not fatal")
    clean_exit = raw.get("clean_exit", False)
    if not isinstance(clean_exit, bool) or (clean_exit and kind != "dying"):
        raise ConfigError(where, f"{path}.clean_exit", "true or false, only for a dying rule")
    name = raw.get("name")
    if kind == "progress":
        if not isinstance(name, str):
            raise ConfigError(where, f"{path}.name", 'required: "weights", "graphs", ... or "@phase"')
        if regex is None or not ({"done", "total"} <= set(regex.groupindex) or "percent" in regex.groupindex):
            raise ConfigError(where, f"{path}.regex", "needs named groups (?P<done>...) and (?P<total>...)")
    if kind == "fact" and (regex is None or not regex.groupindex):
        raise ConfigError(where, f"{path}.regex", "needs named groups, one per fact")
    syntax, flags = _syntax(raw, kind, regex, where, path)
    request = _request(raw, kind, regex, where, path)
    return Rule(
        kind=kind,
        match=match,
        regex=regex,
        state=state,
        name=name,
        category=None if category is None else Category(category),
        role=role,
        fatal=fatal,
        fatal_starting=fatal_starting,
        survivable=survivable,
        hint=raw.get("hint"),
        versions=str(raw.get("versions", "")),
        early=_early(raw, kind, where, path),
        confirm_due=_confirm_due(raw, kind, where, path),
        syntax=syntax,
        flags=flags,
        request=request,
        clean_exit=clean_exit,
    )


def _request(
    raw: Mapping[str, Any], kind: str, regex: re.Pattern[str] | LazyPattern | None, where: str, path: str
) -> str:
    # a [[serving]] rule's `request`, and the regex groups it may read (SERVING_GROUPS)
    request = raw.get("request", "")
    if kind != "serving":
        if "request" in raw:
            raise ConfigError(where, f"{path}.request", "only on a [[serving]] rule")
        return ""
    if request not in ("", *SERVING_REQUESTS):
        raise ConfigError(
            where, f"{path}.request", f"{request!r} unknown; allowed: {', '.join(SERVING_REQUESTS)}"
        )
    groups = set(regex.groupindex) if regex is not None else set()
    unknown = groups - set(SERVING_GROUPS)
    if unknown:
        raise ConfigError(
            where,
            f"{path}.regex",
            f"unknown group {sorted(unknown)[0]!r}; allowed: {', '.join(SERVING_GROUPS)}",
        )
    if not request and not groups & {"running", "waiting"}:
        raise ConfigError(
            where, f"{path}.regex", "needs (?P<running>...) or (?P<waiting>...), or give the rule a `request`"
        )
    return str(request)


def _trace(
    kind: str, raw: object, where: str, path: str, *, checked: bool = False
) -> tuple[str, Searched] | Searched | Hint:
    # one table of what a traceback's words tell (TRACE_KINDS); `checked`: a bundled profile's (its regexes known
    # to compile: compiled when first searched)
    if not isinstance(raw, dict):
        raise ConfigError(where, path, "must be a table")
    allowed = {
        "versions",
        "note",
        "regex",
        *(("category", "text", "phases", "when") if kind == "hint" else ()),
    }
    allowed |= {"state"} if kind == "frame" else set()
    allowed |= {"exceptions" if kind == "consequence" else "functions"} if kind != "hint" else set()
    check_keys(raw, allowed, where, path)
    if kind == "hint":
        category, text, phases = raw.get("category"), raw.get("text"), raw.get("phases", [])
        if category not in CATEGORIES:
            raise ConfigError(
                where, f"{path}.category", f"{category!r} unknown; allowed: {', '.join(CATEGORIES)}"
            )
        if not isinstance(text, str) or not text:
            raise ConfigError(where, f"{path}.text", "required: the hint, a non-empty string")
        if not isinstance(phases, list) or not set(phases) <= {*STATES, "ready"}:
            raise ConfigError(
                where, f"{path}.phases", f"a list of phases; allowed: {', '.join(STATES)}, ready"
            )
        when = _searched(raw["when"], where, f"{path}.when", checked) if "when" in raw else None
        return Hint(category, text, tuple(phases), when)
    words = [k for k in ("functions", "exceptions") if k in raw]
    if len(words) + ("regex" in raw) != 1:
        raise ConfigError(where, path, f"give one of {' or '.join(sorted(allowed & {*_TEMPLATES, 'regex'}))}")
    if words:
        names = raw[words[0]]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(where, f"{path}.{words[0]}", "must be a non-empty list of regexes")
        # a match holds a match of one of the names
        pattern = _searched(
            _TEMPLATES[words[0]].format("|".join(names)),
            where,
            f"{path}.{words[0]}",
            checked,
            "|".join(f"(?:{n})" for n in names),
        )
    else:
        pattern = _searched(raw["regex"], where, f"{path}.regex", checked)
    if kind != "frame":
        return pattern
    state = raw.get("state")
    if state not in {*STATES, "ready"}:
        raise ConfigError(
            where, f"{path}.state", f"{state!r} is not a phase; allowed: {', '.join(STATES)}, ready"
        )
    return (state, pattern)


def _searched(regex: object, where: str, path: str, checked: bool, texts_of: str | None = None) -> Searched:
    # a traceback table's regex: a bundled profile's compiled when first searched, a user's now (a bad one is a
    # ConfigError at load)
    return LazyPattern(str(regex), texts_of) if checked else _compile(regex, where, path)


def _compile(regex: object, where: str, path: str) -> re.Pattern[str]:
    try:
        return re.compile(str(regex))
    except re.error as exc:
        raise ConfigError(where, path, f"invalid regular expression: {exc}") from exc


def _early(raw: Mapping[str, Any], kind: str, where: str, path: str) -> bool:
    early = raw.get("early", False)
    if not isinstance(early, bool) or (early and kind != "ready"):
        raise ConfigError(where, f"{path}.early", "true or false, and only on a [[ready]] rule")
    return early


def _confirm_due(raw: Mapping[str, Any], kind: str, where: str, path: str) -> bool:
    due = raw.get("confirm_due", False)
    if not isinstance(due, bool) or (due and kind != "ready"):
        raise ConfigError(where, f"{path}.confirm_due", "true or false, and only on a [[ready]] rule")
    return due


def _syntax(
    raw: Mapping[str, Any], kind: str, regex: re.Pattern[str] | LazyPattern | None, where: str, path: str
) -> tuple[str, str]:
    # an [[arguments]] rule's `syntax` and `flags`, and the regex groups its syntax reads
    if kind != "arguments":
        for key in ("syntax", "flags"):
            if key in raw:
                raise ConfigError(where, f"{path}.{key}", "only on an [[arguments]] rule")
        return "", "name"
    syntax, flags = raw.get("syntax"), raw.get("flags", "name")
    if syntax not in ARGUMENT_SYNTAXES:
        raise ConfigError(
            where, f"{path}.syntax", f"{syntax!r} unknown; allowed: {', '.join(ARGUMENT_SYNTAXES)}"
        )
    if flags not in ARGUMENT_FLAG_STYLES:
        raise ConfigError(
            where, f"{path}.flags", f"{flags!r} unknown; allowed: {', '.join(ARGUMENT_FLAG_STYLES)}"
        )
    groups = {"name", "value"} if syntax == "line" else {"args"}
    if regex is None or not groups <= set(regex.groupindex):
        wanted = " and ".join(f"(?P<{g}>...)" for g in sorted(groups))
        raise ConfigError(where, f"{path}.regex", f"needs the named group(s) {wanted}")
    return syntax, flags
