"""The bundled profiles parsed ahead of time (watchdog/profiles/parsed.json): the TOML exactly, never stale."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from watchdog.profiles import loader, parsed


def _toml(name: str) -> bytes:
    return resources.files("watchdog.profiles").joinpath(f"{name}.toml").read_bytes()


def _same(a: Any, b: Any, path: str = "") -> None:
    # == would take 1 for 1.0 and True for 1, and dicts in another key order (the rules' order is file order)
    assert type(a) is type(b), path
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            _same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


@pytest.fixture
def fresh_loader() -> Iterator[None]:
    """The loader's and the parsed file's caches empty before and after the test."""
    for cached in (loader._draft, loader._bundled, parsed._entries):
        cached.cache_clear()
    yield
    for cached in (loader._draft, loader._bundled, parsed._entries):
        cached.cache_clear()


def test_parsed_json_is_up_to_date() -> None:
    """parsed.json is what `python -m watchdog.profiles.parsed` makes of the TOML files as they are."""
    made = resources.files("watchdog.profiles").joinpath(parsed.FILE).read_text(encoding="utf-8")
    assert made == parsed.build(), "a bundled profile changed: run `python -m watchdog.profiles.parsed`"


@pytest.mark.parametrize("name", parsed.BUNDLED)
def test_the_parsed_data_is_the_toml_exactly(name: str, fresh_loader: None) -> None:
    """Each bundled file's data comes from parsed.json, and it is tomllib's, types and key order included."""
    assert parsed.parsed(name, _toml(name)) is not None
    _same(loader._draft(name).data, tomllib.loads(_toml(name).decode("utf-8")))


def test_an_edited_file_is_read_itself(fresh_loader: None) -> None:
    """A bundled file whose bytes are not those parsed.json was made from gets no data from it."""
    raw = _toml("sglang")
    assert parsed.parsed("sglang", raw) is not None
    assert parsed.parsed("sglang", raw + b"\n# edited\n") is None
    assert parsed.parsed("sglang", raw.replace(b"sglang", b"sglanG", 1)) is None
    assert parsed.parsed("no-such-engine", raw) is None


@pytest.mark.parametrize("file", ["missing.json", "model.py"])
def test_without_a_usable_parsed_file_the_toml_is_parsed(
    file: str, monkeypatch: pytest.MonkeyPatch, fresh_loader: None
) -> None:
    """A missing or damaged parsed.json is no error: every profile is parsed from its TOML, the same."""
    monkeypatch.setattr(parsed, "FILE", file)
    assert parsed.parsed("sglang", _toml("sglang")) is None
    for name in parsed.BUNDLED:
        _same(loader._draft(name).data, tomllib.loads(_toml(name).decode("utf-8")))
    assert loader.load_profile("sglang").rules
