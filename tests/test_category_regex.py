"""Category rules' regexes: a bundled profile's are compiled on first use, and every one of them compiles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from watchdog.exceptions import ConfigError
from watchdog.profiles import loader
from watchdog.profiles.categoryrules import CategoryRule, Regex
from watchdog.profiles.parsed import BUNDLED
from watchdog.vocabulary import Category

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
        rule.matches("ValueError", ["x"], "ValueError: x", "", "")
        assert rule._compiled is not None
        regexes = [getattr(rule, f) for f in _FIELDS]
        assert all(isinstance(r, Regex) and r.compiled() == re.compile(*r) for r in regexes if r is not None)


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
