"""Category rules' regexes: a bundled profile's are compiled on first use, and every one of them compiles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from watchdog.exceptions import ConfigError
from watchdog.profiles import loader
from watchdog.profiles.categoryrules import CategoryRule, Regex
from watchdog.profiles.parsed import BUNDLED

_FIELDS = ("exceptions", "modules", "functions", "template", "phrase")


def _regexes(rules: tuple[CategoryRule, ...]) -> list[Regex]:
    return [r for rule in rules for r in (getattr(rule, f) for f in _FIELDS) if r is not None]


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_category_regex_compiles_on_first_use(name: str) -> None:
    """A bundled profile's category regexes are not compiled at load, and each compiles when first used."""
    profile = loader.Draft(loader._draft(name).data, f"watchdog/profiles/{name}.toml").profile()  # a fresh one
    regexes = _regexes(profile.categories)
    assert regexes or name not in ("common", "sglang", "trtllm")  # the files with [[category]] tables
    assert all(r._compiled is None for r in regexes)
    for regex in regexes:
        assert regex.compiled() == re.compile(regex.pattern, regex.flags)
        assert regex.compiled() is regex.compiled()


def test_a_user_profiles_bad_category_regex_fails_at_load(tmp_path: Path) -> None:
    """A user profile's category regex is compiled as it loads: an invalid one is a ConfigError naming it."""
    path = tmp_path / "mine.toml"
    path.write_text('extends = "vllm"\n[[category]]\ncategory = "oom"\nphrase = ["out of (memory"]\n')
    with pytest.raises(ConfigError, match=r"category\[0\]\.phrase.*invalid regular expression"):
        loader.load_profile_file(path)
    path.write_text('extends = "vllm"\n[[category]]\ncategory = "oom"\nphrase = ["out of memory"]\n')
    (rule,) = loader.load_profile_file(path).categories
    assert rule.phrase is not None and rule.phrase._compiled is not None


def test_regexes_are_equal_by_pattern_and_flags() -> None:
    """Two rules of the same regexes are equal and hash alike, compiled or not (a profile's equality)."""
    assert Regex("a|b") == Regex("a|b", 0, re.compile("a|b"))
    assert hash(Regex("a|b")) == hash(Regex("a|b", 0, re.compile("a|b")))
    assert Regex("a|b") != Regex("a|b", re.IGNORECASE)
    assert Regex("a") != Regex("b")
