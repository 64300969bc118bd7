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

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from watchdog.exceptions import ConfigError
from watchdog.vocabulary import ENGINES, STARTUP_PHASES, Category

__all__ = [
    "ENGINES",
    "RULE_KINDS",
    "EngineDetector",
    "Profile",
    "Rule",
    "detect_engine",
    "load_profile",
    "load_profile_file",
]

RULE_KINDS = ("start", "phase", "progress", "fact", "ready", "error", "benign", "stop")
STATES = tuple(s.value for s in STARTUP_PHASES)
ROLES = ("cause", "wrapper")
CATEGORIES = tuple(Category)
_DIGITS = re.compile(r"\d")
_ALLOWED_KEYS = {"match", "regex", "state", "name", "category", "role", "fatal", "versions", "note", "hint"}


@dataclass(frozen=True, slots=True)
class Rule:
    """One line rule of a profile."""

    kind: str  # one of RULE_KINDS
    match: str  # literal that must occur in the line
    regex: re.Pattern[str] | None = None  # searched in the line's content once `match` is found
    state: str | None = None  # phase implied by the line
    name: str | None = None  # progress counter name
    category: str | None = None  # error category
    role: str = "cause"  # error role: "cause" (may be the root cause) or "wrapper" (points at one elsewhere)
    fatal: bool = False  # the launch is over when this line appears (no grace period)
    hint: str | None = None  # error hint template, formatted with the facts
    versions: str = ""  # engine versions that print the line

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
    bundled: bool = field(default=False, compare=False)  # exactly what `load_profile(name)` gives

    def rules_of(self, kind: str) -> tuple[Rule, ...]:
        """The rules of one kind, in file order."""
        return tuple(r for r in self.rules if r.kind == kind)


def load_profile(engine: str, extra: Sequence[Path | Profile] = ()) -> Profile:
    """Load a bundled engine profile merged with the common rules and any user profiles for it.

    `extra` holds user profiles, loaded (`load_profile_file`) or as paths to load.
    """
    if engine not in ENGINES:
        raise ConfigError("--engine", "", f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}, auto")
    user = _loaded(extra)
    base = _bundled(engine)
    common = _bundled("common")
    mine = [p for p in user if p.name == engine]
    rules = tuple(r for p in mine for r in p.rules) + base.rules + common.rules
    detect = tuple(d for p in mine for d in p.detect) + base.detect
    early = base.early_health or any(p.early_health for p in mine)
    source = ", ".join([*(p.source for p in mine), base.source])
    return Profile(engine, detect, rules, source, early_health=early, bundled=not mine)


def load_profile_file(path: Path) -> Profile:
    """Read and validate one profile file; errors name the file, the key path and what is allowed."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read profile: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            str(path), "", f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"invalid TOML: {exc}") from exc
    return _parse(data, str(path))


@functools.cache
def _bundled(name: str) -> Profile:
    ref = resources.files("watchdog.profiles").joinpath(f"{name}.toml")
    return _parse(tomllib.loads(ref.read_text(encoding="utf-8")), f"watchdog/profiles/{name}.toml")


def _parse(data: Mapping[str, Any], where: str) -> Profile:
    name = data.get("extends", data.get("name"))
    if not isinstance(name, str) or not name:
        raise ConfigError(where, "name", 'a profile needs `name = "..."` (or `extends = "<engine>"`)')
    detect = data.get("detect", [])
    if not isinstance(detect, list) or not all(isinstance(d, str) for d in detect):
        raise ConfigError(where, "detect", "must be a list of strings")
    rules: list[Rule] = []
    for key, value in data.items():
        if key in {"name", "extends", "detect", "description", "versions", "note", "early_health"}:
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
    return Profile(name, tuple(detect), tuple(rules), where, early_health=early)


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
        category=category,
        role=role,
        fatal=fatal,
        hint=raw.get("hint"),
        versions=str(raw.get("versions", "")),
    )


def _loaded(extra: Sequence[Path | Profile]) -> list[Profile]:
    return [p if isinstance(p, Profile) else load_profile_file(p) for p in extra]


# Lines between the tracebacks of one chain: its header, exception lines and the chain markers.
_CHAIN_OR_EXCEPTION = re.compile(
    r"Traceback \(most recent call last\)|During handling of the above exception|"
    r"The above exception was the direct cause|(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Interrupt)\b"
)


def detect_engine(lines: Iterable[str], extra: Sequence[Path | Profile] = ()) -> str | None:
    """Name the engine whose `detect` markers appear most often in `lines` (a log's first lines), or None.

    Counting, not first-hit: an SGLang log may show one line of vLLM's (old SGLang imported vLLM), but
    its own markers outnumber it.
    """
    detector = EngineDetector(extra)
    for line in lines:
        detector.feed(line)
    return detector.engine()


class EngineDetector:
    """`detect_engine` one line at a time: a log's head that grows is read once, not again per new line.

    `engine()` tells what `detect_engine` would say of the lines fed so far; `copy()` lets a caller try a last
    line that may still grow (an unfinished one) without feeding it for good.
    """

    __slots__ = ("_chain", "_frames", "_markers", "_owner", "count", "score")

    def __init__(self, extra: Sequence[Path | Profile] = (), *, _markers: tuple[tuple[str, str], ...] = ()):
        """Look for the `detect` markers of the bundled engines and of `extra` (user profiles)."""
        if not _markers:
            markers: list[tuple[str, str]] = []
            for prof in _loaded(extra):
                markers.extend((prof.name, d) for d in prof.detect)
            for engine in ENGINES[:-1]:
                markers.extend((engine, d) for d in _bundled(engine).detect)
            _markers = tuple(markers)
        self._markers = _markers
        self.count = 0  # lines fed
        self.score: dict[str, int] = {}
        # A traceback's frames below the engine's own name the libraries it called (old SGLang ran vLLM's
        # layers): those do not count for the library. Python prints a chain of tracebacks ("During handling of
        # the above exception, ...") oldest first; the last one holds the process's own outer frames, so its
        # engine owns the frames of the whole chain (an excerpt may start in the middle of the first one's
        # library frames).
        self._chain: list[tuple[str | None, dict[str, int]]] = []  # (owner, frame counts) of each traceback
        self._owner: str | None = None  # the engine of the outermost engine frame of the traceback being read
        self._frames: dict[str, int] = {}

    def copy(self) -> EngineDetector:
        """An independent detector in the same state."""
        other = EngineDetector(_markers=self._markers)
        other.count, other.score = self.count, dict(self.score)
        other._chain = [(o, dict(f)) for o, f in self._chain]
        other._owner, other._frames = self._owner, dict(self._frames)
        return other

    def feed(self, line: str) -> None:
        """Read the next line of the head."""
        self.count += 1
        stripped = line.lstrip()
        frame = stripped.startswith('File "')
        if not frame and stripped == line:  # not a frame, nor a frame's indented source line
            self._end_traceback()
            text = stripped.strip()
            if text and not _CHAIN_OR_EXCEPTION.match(text):
                self._end_chain(self.score)
        for engine, marker in self._markers:
            if marker in line:
                if not frame:
                    self.score[engine] = self.score.get(engine, 0) + 1
                    continue
                if self._owner is None:
                    self._owner = engine
                if engine == self._owner:
                    self._frames[engine] = self._frames.get(engine, 0) + 1

    def engine(self) -> str | None:
        """The engine the lines fed so far name (as if they were all the lines), or None."""
        score = dict(self.score)
        chain = [
            *self._chain,
            *([(self._owner, self._frames)] if self._owner is not None or self._frames else []),
        ]
        _score_chain(chain, score)
        if not score:
            return None
        return max(score, key=lambda e: score[e])  # ties: the engine whose marker came first

    def _end_traceback(self) -> None:
        if self._owner is not None or self._frames:
            self._chain.append((self._owner, self._frames))
        self._owner, self._frames = None, {}

    def _end_chain(self, score: dict[str, int]) -> None:
        self._end_traceback()
        _score_chain(self._chain, score)
        self._chain.clear()


def _score_chain(chain: list[tuple[str | None, dict[str, int]]], score: dict[str, int]) -> None:
    chain_owner = next((o for o, _ in reversed(chain) if o is not None), None)
    for _, counts in chain:
        if chain_owner is not None and counts.get(chain_owner):
            score[chain_owner] = score.get(chain_owner, 0) + counts[chain_owner]


def preload_profiles() -> None:
    """Read and compile every bundled profile now (blocking: call it from a worker thread in async code), so
    that the first engine detection does not."""
    for name in ENGINES:
        _bundled(name)
    _bundled("common")
