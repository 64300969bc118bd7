"""Line templates (pure): a line with every digit made `0`, and whether a pattern reads every digit alike.

A live server repeats a few kinds of line that differ only in their numbers (times, counts, rates). A pattern
that tells no digit from another (`digit_blind`: no digit of its own, a class holds every digit or none, no
back-reference) matches a line exactly where it matches the line's template (`template`), with the same spans and
groups taking part: what a search finds in one line of a template it finds, at the same places, in every other.
So a search's outcome that depends on places alone is found once per template and looked up after (the
analyzer's serving lines and the detection of the engine in a log's head).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["TEMPLATES_MAX", "TEMPLATE_BYTES", "ZEROED", "digit_blind", "has_digit", "template"]

ZEROED = bytes.maketrans(b"123456789", b"000000000")
"""`bytes.translate`'s table of `template` (for a caller that makes one per line: one call fewer)."""
_DIGITS = frozenset(range(0x30, 0x3A))
TEMPLATES_MAX = 1024
"""The templates a cache keyed by them holds at most (it is emptied when full: a few kinds of line repeat)."""
TEMPLATE_BYTES = 1024
"""The longest template (a line with its newline) a cache keeps: a longer line (an argument dump) is mostly one of a
kind, and a cache of them would hold a megabyte apiece."""

# the regex parser's tree, as `re` itself parses a pattern (CPython 3.11+; typeshed does not describe them)
_p: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")


def template(line: bytes) -> bytes:
    """`line` with each ASCII digit made `0` (every other byte as it is)."""
    return line.translate(ZEROED)


def has_digit(text: bytes | str) -> bool:
    """Whether `text` holds an ASCII digit (a literal that does tells a line from another of its template)."""
    return not _DIGITS.isdisjoint(text.encode() if isinstance(text, str) else text)


def digit_blind(pattern: bytes | str) -> bool:
    """Whether `pattern` (a regex, or a literal given as `re.escape` of it) tells no digit from another, so that
    it matches a line where, and as, it matches the line's `template`. False where that is not certain."""
    try:
        tree = _p.parse(pattern, 0)
    except re.error:
        return False
    return _blind(tree.data)


def _blind(items: Any) -> bool:
    # the parsed items of a pattern (`re._parser`'s), each checked; anything not known is not blind
    c = _c
    for op, av in items:
        if op in (c.LITERAL, c.NOT_LITERAL):
            if av in _DIGITS:
                return False
        elif op is c.IN:
            if not _class_blind(av):
                return False
        elif op in (c.ANY, c.AT):
            continue
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT) or op is getattr(c, "POSSESSIVE_REPEAT", None):
            if not _blind(av[2]):
                return False
        elif op is c.SUBPATTERN:
            if not _blind(av[-1]):
                return False
        elif op is c.BRANCH:
            if not all(_blind(branch) for branch in av[1]):
                return False
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if not _blind(av[1]):
                return False
        elif op is getattr(c, "ATOMIC_GROUP", None):
            if not _blind(av):
                return False
        else:  # a back-reference (it compares what two places hold), a conditional group, anything new
            return False
    return True


# the digits of each category of a class (bytes patterns): every digit or none
_ALL, _NONE = "all", "none"


def _class_blind(items: Any) -> bool:
    # a character class holds every digit or none of them
    c = _c
    digits: set[int] = set()
    for op, av in items:
        if op is c.NEGATE:
            continue
        if op is c.LITERAL:
            if av in _DIGITS:
                digits.add(av)
        elif op is c.RANGE:
            digits.update(d for d in _DIGITS if av[0] <= d <= av[1])
        elif op is c.CATEGORY:
            held = _CATEGORY_DIGITS.get(av)
            if held is None:
                return False
            if held == _ALL:
                digits.update(_DIGITS)
        else:
            return False
    return not digits or digits == _DIGITS


_CATEGORY_DIGITS = {
    _c.CATEGORY_DIGIT: _ALL,
    _c.CATEGORY_WORD: _ALL,
    _c.CATEGORY_NOT_SPACE: _ALL,
    _c.CATEGORY_NOT_LINEBREAK: _ALL,
    _c.CATEGORY_NOT_DIGIT: _NONE,
    _c.CATEGORY_NOT_WORD: _NONE,
    _c.CATEGORY_SPACE: _NONE,
    _c.CATEGORY_LINEBREAK: _NONE,
}
