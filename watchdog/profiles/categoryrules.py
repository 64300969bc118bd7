"""Category rules: a profile's `[[category]]` tables, what an exception's class, module and message say it is."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from watchdog.exceptions import ConfigError
from watchdog.profiles.keys import check_keys
from watchdog.vocabulary import Category

__all__ = ["TIERS", "CategoryRule", "Regex", "parse_category_rule", "required_texts"]

# The precedence of a rule, from what it names (docs/categories.md): lower is tried first. A class is what
# failed; a message template is that failure's own wording; a module is only where it was raised; a phrase
# found anywhere in a line is the last resort before a class that wraps other errors' messages.
TIERS = (
    "class+template",
    "class+where",
    "class",
    "template+where",
    "template",
    "where",
    "phrase",
    "wrapper-class",
)

_KEYS = {"category", "exceptions", "modules", "functions", "template", "phrase", "wraps", "versions", "note"}


class Regex(NamedTuple):
    """A category rule's regex as written, compiled the first time the rule is tried (`CategoryRule.matches`):
    a rule is tried only for an error, and most of a profile's rules never are (compiling them all was a third
    of loading a profile). A tuple: a profile's hash and equality stay in C."""

    pattern: str
    flags: int = 0
    # an `exceptions` regex's: the endings one of which a class it matches has (each name's part after its last
    # dot, where every name is letters, digits, "_" and dots); None: the regex alone decides
    endings: tuple[str, ...] | None = None

    def compiled(self) -> re.Pattern[str]:
        """The compiled regex."""
        return re.compile(self.pattern, self.flags)


_Pattern = re.Pattern[str] | None
_Compiled = tuple[_Pattern, _Pattern, _Pattern, _Pattern, _Pattern]


@dataclass(frozen=True, slots=True)
class CategoryRule:
    """One `[[category]]` table: the category of an error whose class, place and message all match."""

    category: Category
    exceptions: Regex | None = None  # the exception's class, qualified as printed or by its last parts
    modules: Regex | None = None  # searched in the file paths of the innermost frames (or the line's)
    functions: Regex | None = None  # searched in the innermost frames' function names
    template: Regex | None = None  # matched at the start of the exception's message
    phrase: Regex | None = None  # searched anywhere in the line (the legacy last resort)
    wraps: bool = False  # the class carries other errors' messages: tried after every message rule
    tier: int = 0  # its precedence (an index of TIERS), from the fields it has
    # the five regexes compiled, in the order `matches` tries them, once it was first tried
    _compiled: _Compiled | None = field(default=None, init=False, repr=False, compare=False)
    # texts one of which every match of `template` or `phrase` holds (`_texts`), found when the rule is first tried
    _required: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False)

    def matches(
        self, cls: str | None, messages: Sequence[str], line: str, paths: str, functions: str
    ) -> bool:
        """Whether the rule holds for an error of class `cls` (None for a line with no class) whose message
        may begin at any of `messages` (the text after the class, a message it carries), in the whole `line`,
        raised in the innermost frames' `paths` and `functions` (newline-joined)."""
        if (names := self.exceptions) is not None and (
            cls is None or (names.endings is not None and not cls.endswith(names.endings))
        ):
            return (
                False  # a rule of classes, for no class or another one: its regexes are not compiled for it
            )
        # A rule of wording (a template, or a phrase in an ASCII line) that holds none of the texts one of which its
        # every match holds: not compiled for it either (a crash tried about a hundred templates and a dozen phrases
        # of a profile, compiling each: 13 ms of a replay's CPU on the development machine)
        required = self._required
        if required is None:
            required = self._texts()
            object.__setattr__(self, "_required", required)  # frozen: a cache, as `_compiled`
        if required:
            if self.template is not None:
                if not any(text in m for m in messages for text in required):
                    return False
            elif line.isascii():
                # case aside, the ASCII letters of the phrase's texts match only the same letters of the line
                lowered = line.lower()
                if not any(text in lowered for text in required):
                    return False
        compiled = self._compiled or self._compile()
        # each looked up only when the one before it held: most rules fail at their first
        if (pattern := compiled[0]) is not None and (cls is None or not pattern.fullmatch(cls)):
            return False
        if (pattern := compiled[1]) is not None and not pattern.search(paths):
            return False
        if (pattern := compiled[2]) is not None and not pattern.search(functions):
            return False
        if (pattern := compiled[3]) is not None and not pattern.search(line):
            return False
        return (pattern := compiled[4]) is None or any(pattern.match(m) for m in messages)

    def _texts(self) -> tuple[str, ...]:
        # `_required`: a template's `required_texts`, or a phrase's (in lower case: an ASCII line's, in lower case,
        # holds one of them where it matches)
        if (template := self.template) is not None and not template.flags:
            return required_texts(template.pattern)
        if (phrase := self.phrase) is not None and phrase.flags == re.IGNORECASE:
            texts = required_texts(phrase.pattern)
            return tuple(t.lower() for t in texts) if all(map(str.isascii, texts)) else ()
        return ()

    def compile_now(self) -> bool:
        """Compile its regexes now, ahead of the first error it is tried for; whether there was anything to do."""
        if self._compiled is not None:
            return False
        self._compile()
        return True

    def _compile(self) -> _Compiled:
        compiled = tuple(
            None if r is None else r.compiled()
            for r in (self.exceptions, self.modules, self.functions, self.phrase, self.template)
        )
        object.__setattr__(self, "_compiled", compiled)  # frozen: a cache, not a field (no part of equality)
        return compiled  # type: ignore[return-value]


# A regex's tokens, for `required_texts` (a loop over a pattern's characters in Python cost as much as the compiles
# it saves): a run of plain characters (an escaped sign is plain; one that a quantifier follows is not in a run), a
# plain character that a quantifier follows, a class, a count, an inline flag, a group's start and end, "|", a
# quantifier, anything else (".", "^", "$", "+", an escaped letter or digit: a class or a code)
_TOKEN = re.compile(
    r"""(?P<run>(?:(?:[^.^$*+?{}\[\]()|\\]|\\[^A-Za-z0-9])(?![*?{]))+)
    |(?P<quantified>[^.^$*+?{}\[\]()|\\]|\\[^A-Za-z0-9])
    |(?P<other>\[\^?\]?(?:[^\]\\]|\\.)*\]|\{\d*(?:,\d*)?\}|[*?{]|\\.?|[.^$+\[\]}])
    |(?P<flag>\(\?[aiLmsux-])
    |(?P<open>\()
    |(?P<close>\))
    |(?P<alt>\|)""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def required_texts(pattern: str) -> tuple[str, ...]:
    """Texts one of which every match of the regex `pattern` (compiled with no flags) holds: of each alternative at
    its top, the longest run of plain characters outside any group or class (of an alternative that is one group,
    its own alternatives'). Empty where an alternative has no such run, or where the pattern is beyond this
    reading (an inline flag, a group left open). A character that a quantifier follows is in no run."""
    texts: list[str] = []
    depth = 0  # of groups
    start = 0  # where the alternative begins
    best = ""  # its longest run so far
    group = -1  # where the group that begins it (as "(?:") ends; -1: no such group
    end = len(pattern)
    for token in _TOKEN.finditer(pattern):
        kind = token.lastgroup
        if kind == "run" and depth == 0:
            run = _ESCAPE.sub(r"\1", token[0]) if "\\" in token[0] else token[0]
            best = run if len(run) > len(best) else best
        elif kind == "open":
            if depth == 0 and token.start() == start and pattern.startswith("(?:", start):
                group = -2  # (its end is found when it closes)
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth < 0:
                return ()
            if depth == 0 and group == -2:
                group = token.end()
        elif kind == "flag":
            return ()
        elif kind == "alt" and depth == 0:
            found = _alternative(pattern, start, token.start(), best, group)
            if not found:
                return ()
            texts += found
            start, best, group = token.end(), "", -1
    if depth:
        return ()
    found = _alternative(pattern, start, end, best, group)
    return (*texts, *found) if found else ()


def _alternative(pattern: str, start: int, end: int, best: str, group: int) -> tuple[str, ...]:
    # `required_texts` of the alternative pattern[start:end], whose longest run is `best`: of a group alone ("(?:a|b)",
    # `group` its end), its alternatives'
    if group == end:
        return required_texts(pattern[start + 3 : end - 1])
    return (best,) if best else ()


def parse_category_rule(
    raw: object, categories: tuple[str, ...], where: str, path: str, *, checked: bool = False
) -> CategoryRule:
    """A `[[category]]` table read from a profile file at `where` (its key path `path`). `checked`: its regexes
    are known to compile (a bundled profile's: the tests compile them all), so they are compiled on first use;
    else each is compiled now, and an invalid one is a `ConfigError` at load."""
    if not isinstance(raw, Mapping):
        raise ConfigError(where, path, "must be a table")
    check_keys(raw, _KEYS, where, path)
    category = raw.get("category")
    if category not in categories:
        raise ConfigError(
            where, f"{path}.category", f"{category!r} unknown; allowed: {', '.join(categories)}"
        )
    exceptions = _names(raw, "exceptions", r"(?:[\w.]*\.)?(?:{})", where, path, checked=checked)
    modules = _names(raw, "modules", "{}", where, path, checked=checked)
    functions = _names(raw, "functions", r"(?:^|\n)(?:{})$", where, path, checked=checked)
    template = _regex(raw, "template", where, path, checked=checked)
    phrase = _names(raw, "phrase", "{}", where, path, flags=re.IGNORECASE, checked=checked)
    wraps = raw.get("wraps", False)
    if not isinstance(wraps, bool) or (wraps and (exceptions is None or template or modules or functions)):
        raise ConfigError(where, f"{path}.wraps", "true or false; true only on a rule of exceptions alone")
    if phrase is not None and (exceptions or template):
        raise ConfigError(where, f"{path}.phrase", "a phrase stands alone (a class or a template says more)")
    if not (exceptions or template or modules or functions or phrase):
        raise ConfigError(where, path, "give exceptions, template, modules, functions or phrase")
    where_ = modules is not None or functions is not None
    if wraps:
        tier = "wrapper-class"
    elif phrase is not None:
        tier = "phrase"
    elif exceptions is not None:
        tier = "class+template" if template else "class+where" if where_ else "class"
    else:
        tier = "template+where" if template and where_ else "template" if template else "where"
    return CategoryRule(
        Category(category), exceptions, modules, functions, template, phrase, wraps, TIERS.index(tier)
    )


def _names(
    raw: Mapping[str, object], key: str, form: str, where: str, path: str, *, flags: int = 0, checked: bool
) -> Regex | None:
    # a list of regexes, one alternative each, put into `form`
    if key not in raw:
        return None
    names = raw[key]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(where, f"{path}.{key}", "must be a non-empty list of regexes")
    regex = _compile(form.format("|".join(f"(?:{n})" for n in names)), where, f"{path}.{key}", flags, checked)
    if key == "exceptions" and all(found := [_ENDS_PLAIN.fullmatch(n) for n in names]):
        # the regex ends with one of the names, each of which ends with plain text after its last dot: a class it
        # matches ends with one of those texts
        return regex._replace(endings=tuple(m["last"].rpartition(".")[2] for m in found if m))
    return regex


# A name of classes whose last part is plain text: optional groups of letters, digits, "_" and dots, escaped or not
# ("(?:torch\.)?(?:cuda\.)?"), then letters, digits, "_" and dots ("OutOfMemoryError", "zmq\.error\.ZMQError")
_ENDS_PLAIN = re.compile(r"(?:\(\?:(?:[\w.]|\\[\w.])+\)\?)*(?P<last>(?:[\w.]|\\\.)+)")


def _regex(raw: Mapping[str, object], key: str, where: str, path: str, *, checked: bool) -> Regex | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(where, f"{path}.{key}", "must be a non-empty regex")
    return _compile(value, where, f"{path}.{key}", 0, checked)


def _compile(regex: str, where: str, path: str, flags: int, checked: bool) -> Regex:
    try:
        if not checked:
            re.compile(regex, flags)  # now, to say an invalid one at load (re keeps it for the first use)
        return Regex(regex, flags)
    except re.error as exc:
        raise ConfigError(where, path, f"invalid regular expression: {exc}") from exc
