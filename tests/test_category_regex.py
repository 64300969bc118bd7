"""Category and line rules' regexes: a bundled profile's are compiled on first use, and every one of them compiles."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchdog.exceptions import ConfigError
from watchdog.profiles import loader
from watchdog.profiles.categoryrules import CategoryRule, Regex, required_texts
from watchdog.profiles.model import LazyPattern, Profile, parse_profile
from watchdog.profiles.parsed import BUNDLED
from watchdog.vocabulary import ENGINES, Category

_FIELDS = ("exceptions", "modules", "functions", "template", "phrase")


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_category_regex_compiles_on_first_use(name: str) -> None:
    """A bundled profile's category rules are not compiled at load; each compiles when first tried."""
    profile = loader.Draft(
        loader._draft(name).data, f"watchdog/profiles/{name}.toml"
    ).profile()  # a fresh one
    assert profile.categories or name not in ("common", "sglang", "trtllm")  # the files with [[category]]
    assert all(rule._compiled is None for rule in profile.categories)
    for rule in profile.categories:
        endings = rule.exceptions.endings if rule.exceptions is not None else None
        cls = endings[0] if endings else "ValueError"  # a class it may match: another is not tried
        message = " ".join(rule._texts()) or "x"  # wording it may match: other wording is not tried
        rule.matches(cls, [message], f"{cls}: {message}", "", "")
        assert rule._compiled is not None
        regexes = [getattr(rule, f) for f in _FIELDS]
        assert all(
            isinstance(r, Regex) and r.compiled() == re.compile(r.pattern, r.flags)
            for r in regexes
            if r is not None
        )


def test_a_rule_of_classes_is_not_compiled_for_a_line_without_one() -> None:
    """A rule that names exception classes cannot hold for a line with no class: it says so without compiling
    its regexes (a crash's categorization tries most of a profile's rules, and compiling was most of its cost)."""
    rule = CategoryRule(Category.OOM, exceptions=Regex("(?:OutOfMemory)"), template=Regex("CUDA out"))
    assert not rule.matches(None, ["CUDA out of memory"], "CUDA out of memory", "", "")
    assert rule._compiled is None
    assert rule.matches("OutOfMemory", ["CUDA out of memory"], "OutOfMemory: CUDA out of memory", "", "")
    assert rule._compiled is not None


_CLASS_RULES = sorted(
    {
        rule.exceptions
        for name in ENGINES
        for rule in loader.load_engine(name).categories  # type: ignore[union-attr]
        if rule.exceptions is not None and rule.exceptions.endings is not None
    }
)


def test_most_rules_of_classes_know_their_endings() -> None:
    """The bundled rules of classes whose names end with plain text know those endings (the names alone: the
    pre-check is exact, and does not guess at one with more regex syntax)."""
    assert len(_CLASS_RULES) >= 20
    made = CategoryRule(Category.OOM, exceptions=Regex("(?:[\\w.]*\\.)?(?:(?:OutOfMemory))"))
    assert made.exceptions is not None
    assert made.exceptions.endings is None  # a Regex made by hand: its regex alone decides


@pytest.mark.parametrize("regex", [pytest.param(r, id=r.pattern[-60:]) for r in _CLASS_RULES])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_class_a_rule_matches_has_one_of_its_endings(regex: Regex, data: st.DataObject) -> None:
    """Every class a rule's `exceptions` regex matches ends with one of its endings: a class without one is
    rejected before the regex is compiled, and so rightly."""
    assert regex.endings is not None
    cls = data.draw(st.from_regex(re.compile(regex.pattern), fullmatch=True))
    assert cls.endswith(regex.endings)


def test_a_rule_of_classes_is_not_compiled_for_another_class() -> None:
    """A bundled rule of classes says no to a class with none of its endings without compiling its regexes."""
    rule = next(
        r
        for r in loader.load_engine("vllm").categories  # type: ignore[union-attr]
        if r.exceptions is not None and r.exceptions.endings == ("KeyError",)
    )
    fresh = CategoryRule(rule.category, exceptions=rule.exceptions, template=rule.template, tier=rule.tier)
    assert not fresh.matches("ValueError", ["x"], "ValueError: x", "", "")
    assert fresh._compiled is None
    fresh.matches("builtins.KeyError", ["'x'"], "builtins.KeyError: 'x'", "", "")
    assert fresh._compiled is not None


@pytest.mark.parametrize(
    ("pattern", "texts"),
    [
        (r"\[Errno -2\] Name or service not known$", ("[Errno -2] Name or service not known",)),
        (r"(?:CUDA|HIP|CUDA driver) error: out of memory", (" error: out of memory",)),
        (r"(?:\[Rank:\d+\] )?FATAL ERROR :: MODULE:\w+ ", ("FATAL ERROR :: MODULE:",)),
        (
            r"(?:ImportError)|(?:undefined symbol)|(?:cannot find -l\w+)",
            ("ImportError", "undefined symbol", "cannot find -l"),
        ),
        (r"ab+c", ("ab",)),  # "+": the b is there, maybe more than once
        (r"a{2}bc|x?yz|foo{bar}", ("bc", "yz", "bar")),  # a character a quantifier follows is in no run
        (r"a[]b]c\.d", ("c.d",)),
        (r"a\|b|c", ("a|b", "c")),
        (r"(?:a|b)(?:c)|d", ()),  # an alternative whose every run is in a group
        (r"(?:ab)?|cd", ()),
        (r"(?i)abc", ()),  # an inline flag
        (r"(?x)a b", ()),
        (r"abc)", ()),  # not a regex
    ],
)
def test_required_texts(pattern: str, texts: tuple[str, ...]) -> None:
    """Texts one of which every match holds: each alternative's longest run of plain characters outside groups."""
    assert required_texts(pattern) == texts


_WORDING = sorted(
    {
        (field, regex)
        for name in ENGINES
        for rule in loader.load_engine(name).categories  # type: ignore[union-attr]
        for field, regex in (("template", rule.template), ("phrase", rule.phrase))
        if regex is not None and required_texts(regex.pattern)
    }
)


def test_most_rules_of_wording_have_texts() -> None:
    """Most bundled templates and phrases have texts one of which their every match holds."""
    assert len(_WORDING) >= 100


@pytest.mark.parametrize(("field", "regex"), [pytest.param(f, r, id=r.pattern[-60:]) for f, r in _WORDING])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_match_of_a_rule_of_wording_holds_one_of_its_texts(
    field: str, regex: Regex, data: st.DataObject
) -> None:
    """Every text a bundled template or phrase matches holds one of its texts (a phrase's: an ASCII text, case
    aside): an error with none of them is refused before the regex is compiled, and so rightly."""
    match = data.draw(st.from_regex(re.compile(regex.pattern, regex.flags), fullmatch=True))
    texts = required_texts(regex.pattern)
    if field == "template":
        assert any(text in match for text in texts)
    elif match.isascii():
        assert any(text.lower() in match.lower() for text in texts)


def test_a_rule_of_wording_is_not_compiled_for_an_error_without_its_texts() -> None:
    """A template rule whose texts no message holds, and a phrase rule whose texts an ASCII line does not hold (case
    aside), say no without compiling their regexes; a line that is not ASCII is looked at by the phrase's regex."""
    template = CategoryRule(Category.OOM, template=Regex("(?:CUDA|HIP) error: out of memory"))
    assert not template.matches(
        "RuntimeError", ["Not enough memory"], "RuntimeError: Not enough memory", "", ""
    )
    assert template._compiled is None
    said = "CUDA error: out of memory"
    assert template.matches("RuntimeError", ["x", said], f"RuntimeError: {said}", "", "")
    assert template._compiled is not None
    phrase = CategoryRule(Category.OOM, phrase=Regex("(?:out of memory)|(?:OOM)", re.IGNORECASE))
    assert not phrase.matches(None, [], "the node ran out of disk", "", "")
    assert phrase._compiled is None
    assert phrase.matches(None, [], "Out Of Memory on rank 3", "", "")
    assert phrase._compiled is not None
    fresh = CategoryRule(Category.OOM, phrase=Regex("(?:kill)", re.IGNORECASE))
    assert fresh.matches(
        None, [], "process \u212aill 9", "", ""
    )  # the Kelvin sign is a K to the regex, case aside


def test_a_user_profiles_bad_category_regex_fails_at_load(tmp_path: Path) -> None:
    """A user profile's category regex is compiled as it loads: an invalid one is a ConfigError naming it."""
    path = tmp_path / "mine.toml"
    path.write_text('extends = "vllm"\n[[category]]\ncategory = "oom"\nphrase = ["out of (memory"]\n')
    with pytest.raises(ConfigError, match=r"category\[0\]\.phrase.*invalid regular expression"):
        loader.load_profile_file(path)
    path.write_text('extends = "vllm"\n[[category]]\ncategory = "oom"\nphrase = ["out of memory"]\n')
    (rule,) = loader.load_profile_file(path).categories
    assert rule.phrase == Regex("(?:out of memory)", re.IGNORECASE)


def test_rules_are_equal_by_their_regexes_compiled_or_not() -> None:
    """Two rules of the same regexes are equal and hash alike, one tried (compiled) and one not."""
    tried = CategoryRule(Category.OOM, phrase=Regex("out of memory", re.IGNORECASE))
    fresh = CategoryRule(Category.OOM, phrase=Regex("out of memory", re.IGNORECASE))
    assert tried.matches(None, [], "CUDA Out Of Memory", "", "")
    assert tried._compiled is not None
    assert fresh._compiled is None
    assert (tried, hash(tried)) == (fresh, hash(fresh))
    assert fresh != CategoryRule(Category.OOM, phrase=Regex("out of memory"))


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_rule_regex_compiles_on_first_use(name: str) -> None:
    """A bundled profile's rules whose groups need no check at load (errors, phases, ...) are not compiled at load;
    each compiles when first searched, to the regex its file says; the others are compiled at load."""
    profile = loader.Draft(
        loader._draft(name).data, f"watchdog/profiles/{name}.toml"
    ).profile()  # a fresh one
    lazy = [r.regex for r in profile.rules if isinstance(r.regex, LazyPattern)]
    assert lazy or name in ("generic",)
    assert all(pattern._compiled is None for pattern in lazy)
    for pattern in lazy:
        pattern.search(" ".join(required_texts(pattern._texts_of)) or "a line")  # a line it may match
        assert pattern._compiled is not None
        assert pattern.compiled() == re.compile(pattern.pattern)
    eager = [r for r in profile.rules if r.regex is not None and not isinstance(r.regex, LazyPattern)]
    assert all(r.kind in ("progress", "fact", "arguments", "serving") for r in eager)


def _trace_patterns(profile: Profile) -> list[Any]:
    # every regex of a profile's traceback tables
    return [
        *(p for _, p in profile.frames),
        *profile.mains,
        *profile.steps,
        *profile.consequences,
        *profile.teardowns,
        *profile.caught,
        *profile.requests,
        *(h.when for h in profile.hints if h.when is not None),
    ]


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_traceback_table_regex_compiles_on_first_use(name: str) -> None:
    """A bundled profile's traceback tables ([[frame]], [[main]], ... and hints' `when`) are not compiled at load;
    each compiles when first searched, to the regex its file says. A user profile's compile as it loads."""
    profile = loader.Draft(
        loader._draft(name).data, f"watchdog/profiles/{name}.toml"
    ).profile()  # a fresh one
    patterns = _trace_patterns(profile)
    assert patterns or name in ("generic", "ollama")
    assert all(isinstance(p, LazyPattern) and p._compiled is None for p in patterns)
    for pattern in patterns:
        pattern.search(" ".join(required_texts(pattern._texts_of)) or "a line")  # a text it may match
        assert pattern._compiled is not None
        assert pattern.compiled() == re.compile(pattern.pattern)
    user = parse_profile(
        {"name": "mine", "frame": [{"state": "loading_weights", "functions": ["load_it"]}]}, "x"
    )
    assert all(isinstance(p, re.Pattern) for p in _trace_patterns(user))


_TRACE_TEXTS = sorted(
    {
        (p.pattern, p._texts_of)
        for name in ENGINES
        for p in _trace_patterns(loader.load_engine(name))  # type: ignore[arg-type]
        if isinstance(p, LazyPattern) and required_texts(p._texts_of) and "(?!" not in p.pattern
    }
)


def test_most_traceback_tables_have_texts() -> None:
    """Most bundled traceback-table regexes have texts one of which their every match holds."""
    assert len(_TRACE_TEXTS) >= 60


@pytest.mark.parametrize(("pattern", "texts_of"), [pytest.param(p, t, id=p[-60:]) for p, t in _TRACE_TEXTS])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_match_of_a_traceback_table_holds_one_of_its_texts(
    pattern: str, texts_of: str, data: st.DataObject
) -> None:
    """Every text a bundled traceback table's regex matches holds one of its texts: a traceback with none of them
    is no match without compiling the regex, and so rightly."""
    match = data.draw(st.from_regex(re.compile(pattern), fullmatch=True))
    assert any(text in match for text in required_texts(texts_of))


def test_a_frame_table_is_not_compiled_for_a_traceback_without_its_names() -> None:
    """A lazily compiled regex says no (`search`, `finditer`) to a text without any of its texts, uncompiled; a
    frame table's texts are its functions' names."""
    frame = LazyPattern(r"in (?:load_model|init_\w+)(?!\w)", texts_of=r"(?:load_model)|(?:init_\w+)")
    assert frame.search('  File "x.py", line 3, in serve') is None
    assert list(frame.finditer('  File "x.py", line 3, in serve')) == []
    assert frame._compiled is None
    assert [m.group(0) for m in frame.finditer('File "x.py", line 3, in init_cache')] == ["in init_cache"]
    assert frame._compiled is not None
    copy = pickle.loads(pickle.dumps(LazyPattern(frame.pattern, frame._texts_of)))
    assert (copy._texts_of, copy.search("in serve"), copy._compiled) == (frame._texts_of, None, None)


def test_a_lazy_rule_regex_is_equal_by_its_text_and_pickles() -> None:
    """Two lazily compiled regexes of the same text are equal and hash alike, one searched and one not; a pickled
    one compiles again when used; a user profile's rules are compiled as it loads."""
    tried, fresh = LazyPattern(r"out of (?P<what>\w+)"), LazyPattern(r"out of (?P<what>\w+)")
    assert tried.search("CUDA out of memory") is not None
    assert (tried == fresh, hash(tried) == hash(fresh), tried == LazyPattern("other")) == (True, True, False)
    copy = pickle.loads(pickle.dumps(tried))
    assert copy == tried
    assert copy._compiled is None
    assert copy.groupindex == {"what": 1}
    assert repr(fresh) == repr(re.compile(r"out of (?P<what>\w+)"))
