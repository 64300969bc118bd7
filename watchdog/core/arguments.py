"""Launch arguments: an engine's own dump of its arguments (a repr, a dict, a Debug struct, a Go map, a command
line) as typed (name, flag, value) triples, read safely: never evaluated, values kept as written (pure).

Which line holds the dump, and in which syntax, is the profiles' knowledge (`[[arguments]]` rules).
"""

from __future__ import annotations

import ast
import functools
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from watchdog.core.redaction import redact_text

__all__ = [
    "MAX_ARGUMENTS",
    "MAX_VALUE",
    "REDACTED",
    "Argument",
    "argument",
    "flag_of",
    "from_command",
    "merge",
    "parse_arguments",
    "unclosed",
]

MAX_ARGUMENTS = 1000  # a dump's arguments kept (SGLang's ServerArgs has ~400)
MAX_VALUE = 500  # characters of a value kept
# arguments made once and shared (name, text, style): a few launches' dumps of a few hundred each
_MADE_CACHE = 8192
_MADE_TEXT = 200  # characters of an argument's text, at most, for it to be shared so
REDACTED = "<redacted>"

_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSE = frozenset(_OPEN.values())
_HEAD = re.compile(r"^\s*[\w.]*\s*(?P<open>[(\[{])")  # Name( / Name { / map[ / {
_GO_ITEM = re.compile(r"^[\w.-]+:")


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument a launch was started with: its name as the dump writes it, the flag a person types for
    it, and its value as written (a string literal's quotes taken off)."""

    name: str
    flag: str
    value: str


def flag_of(name: str, style: str) -> str:
    """The command-line flag of argument `name` in `style` (`watchdog.vocabulary.ARGUMENT_FLAG_STYLES`)."""
    if style == "kebab" and not name.startswith("-"):
        return "--" + name.replace("_", "-")
    return name


def argument(name: str, value: str, *, flags: str = "name") -> Argument:
    """One argument of a dump written one a line (the "line" syntax), as `parse_arguments` gives them."""
    return _finish([(name.strip(), value)], flags)[0]


# A launch in a crash loop prints the same dump at every start: its arguments are read out of it once (the bracket
# scan of SGLang's 2.4 KB dump takes ~1 ms, making its ~90 arguments of the pairs found ~50 us more); read again,
# they would be equal (both steps are pure), each `Argument` frozen and the tuple immutable: the first is handed out.
@functools.lru_cache(maxsize=64)
def parse_arguments(text: str, syntax: str, *, flags: str = "name") -> tuple[Argument, ...]:
    """The arguments of dump `text` written in `syntax` (`watchdog.vocabulary.ARGUMENT_SYNTAXES`, but "line"), credentials redacted.

    `text` starts at the dump (`ServerArgs(...`, `{...`, `Args {...`, `map[...`, or a command line); text after
    its closing bracket is ignored, and a dump cut short gives the arguments it holds whole. Never raises on bad
    input: what does not read as an argument is left out.
    """
    if syntax == "argv":
        return _finish(_argv(text), "name")
    return _finish(_pairs(text, syntax), flags)


def _pairs(text: str, syntax: str) -> tuple[tuple[str, str], ...]:
    body = _body(text)
    if body is None:
        return ()
    if syntax == "go-map":
        pairs = _go_items(body)
    else:
        sep = "=" if syntax == "python-kwargs" else ":"
        pairs = (_pair(item, sep) for item in _split(body, ","))
    return tuple((n, v) for n, v in pairs if n)


def from_command(argv: Iterable[str]) -> tuple[Argument, ...]:
    """The arguments of a command given as its words (a launch's `command`), as `parse_arguments` reads a
    command line."""
    return _finish(_argv_words(list(argv)), "name")


def merge(before: Iterable[Argument], more: Iterable[Argument]) -> tuple[Argument, ...]:
    """`before` with `more` added: one of the same name replaces it in place, a new one goes at the end."""
    out = {a.name: a for a in before}
    out.update((a.name, a) for a in more)
    return tuple(out.values())[:MAX_ARGUMENTS]


@functools.lru_cache(maxsize=64)  # as `parse_arguments`: the same dump at every start of a crash loop
def unclosed(text: str) -> bool:
    """Whether the dump `text` begins has a bracket not closed yet (TGI prints its `Args {` over many lines):
    the next lines are the rest of it."""
    m = _HEAD.search(text)
    if m is None:
        return False
    depth = 0
    for ch, _ in _scan(text, m.start("open")):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return False
    return True


# -- reading -------------------------------------------------------------------------------------------------


def _scan(text: str, start: int = 0) -> Iterator[tuple[str, int]]:
    # each bracket of `text` from `start` outside string literals, with its index; a `<` only where it opens a
    # repr (`<LoadFormat.AUTO: 'auto'>`), not a comparison. The regex skips the plain characters between (most
    # of a dump): a loop over every character made a 5 kB dump cost milliseconds.
    quote = ""
    skip, n = -1, len(text)
    stack: list[str] = []
    for m in _SIGNIFICANT.finditer(text, start):
        i = m.start()
        if i < skip:
            continue  # the character after a backslash in a string literal
        ch = text[i]
        if quote:
            if ch == "\\":
                skip = i + 2
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN and (ch != "<" or (i + 1 < n and text[i + 1].isalpha())):
            stack.append(_OPEN[ch])
            yield ch, i
        elif ch in _CLOSE and stack and stack[-1] == ch:
            stack.pop()
            yield ch, i
        elif ch in ",= :" and not stack:
            yield ch, i


_SIGNIFICANT = re.compile(r"""[\\'"()\[\]{}<>,= :]""")


def _body(text: str) -> str | None:
    # what is between the dump's opening bracket and its closing one (or the end, for a dump cut short)
    m = _HEAD.search(text)
    if m is None:
        return None
    start = m.start("open")
    depth = 0
    for ch, i in _scan(text, start):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return text[start + 1 :]


def _split(body: str, sep: str) -> list[str]:
    # `body` cut at each `sep` outside brackets and quotes (`_scan` gives those only)
    out, last = [], 0
    for ch, i in _scan(body):
        if ch == sep:
            out.append(body[last:i])
            last = i + 1
    out.append(body[last:])
    return [item.strip() for item in out if item.strip()]


def _pair(item: str, sep: str) -> tuple[str, str]:
    # "name=value", "'name': value", "name: value": cut at the first `sep` outside quotes and brackets
    for ch, i in _scan(item):
        if ch == sep:
            name, value = item[:i].strip(), item[i + 1 :].strip()
            return _unquote(name), value
        if ch in _OPEN:
            break
    return "", ""


def _go_items(body: str) -> Iterator[tuple[str, str]]:
    # map[A:1 B: C:[x y]]: items are cut at spaces outside brackets; a piece that names no key goes with the one
    # before (a value with a space in it)
    items: list[str] = []
    for piece in _split(body, " "):
        if _GO_ITEM.match(piece) or not items:
            items.append(piece)
        else:
            items[-1] += " " + piece
    for item in items:
        name, _, value = item.partition(":")
        yield name, value


def _argv(text: str) -> list[tuple[str, str]]:
    try:
        words = shlex.split(text)
    except ValueError:  # an unclosed quote: the words as the spaces cut them
        words = text.split()
    return _argv_words(words)


def _argv_words(words: list[str]) -> list[tuple[str, str]]:
    # --name value, --name=value, -n value; a flag with no value after it is "true"; positional words are left
    # out, as the program's name is
    out: list[tuple[str, str]] = []
    i = 1 if words and not words[0].startswith("-") else 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word in ("-", "--") or _is_number(word):
            continue
        name, eq, value = word.partition("=")
        if not eq:
            if i < len(words) and (not words[i].startswith("-") or _is_number(words[i])):
                value, i = words[i], i + 1
            else:
                value = "true"
        out.append((name, value))
    return out


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _unquote(text: str) -> str:
    # a string literal's value ('x', "x"); anything else as written
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        inner = text[1:-1]
        if "\\" not in inner and text[0] not in inner:
            return inner  # no escape, nor a quote inside: what `literal_eval` gives, at 1/50th of its cost
        try:
            value = ast.literal_eval(text)  # a literal only: never evaluates code
        except (ValueError, SyntaxError):
            return text[1:-1]
        if isinstance(value, str):
            return value
    return text


def _finish(pairs: Iterable[tuple[str, str]], flags: str) -> tuple[Argument, ...]:
    out: dict[str, Argument] = {}
    for name, raw in pairs:
        out[name] = _made(name, raw, flags) if len(name) + len(raw) <= _MADE_TEXT else _make(name, raw, flags)
        if len(out) >= MAX_ARGUMENTS:
            break
    return tuple(out.values())


def _make(name: str, raw: str, flags: str) -> Argument:
    value = _unquote(raw.strip().rstrip(","))[:MAX_VALUE]
    return Argument(name, flag_of(name, flags), _redacted(name, value))


# The same (frozen) Argument for the same short text: a relaunch, and a fleet's launches of one engine, dump
# mostly the same arguments; each is then unquoted and checked for a credential once, and held once in memory.
_made = functools.lru_cache(maxsize=_MADE_CACHE)(_make)


def _redacted(name: str, value: str) -> str:
    # `api_key='...'`, `--api-key X`, `hf_...`: the value of a credential never leaves the core
    if value in ("", "None", "null"):
        return value
    whole = f"{name}={value}"
    if redact_text(whole) != whole or redact_text(f"{name} {value}") != f"{name} {value}":
        return REDACTED
    return value
