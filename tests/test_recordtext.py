"""A record's JSON text written save after save (`watchdog.core.recordtext`): the same text as `to_record` dumped,
whatever changed since the save before, and the same answer to whether a text in it may hold a credential."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from watchdog.core.analyzer import Analyzer
from watchdog.core.recordtext import RecordText
from watchdog.core.redaction import may_hold_secret
from watchdog.core.resume import record_values, to_record
from watchdog.profiles.loader import catalogue

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
LOGS = sorted(CORPUS.rglob("*.log"))
CHUNK = 4096  # bytes fed between two saves


def _dumped(analyzer: Analyzer) -> str:
    return json.dumps(to_record(analyzer), ensure_ascii=False, separators=(",", ":"))


def _texts(value: object) -> list[str]:
    # every text and key of a JSON value
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in [k, *_texts(v)]]
    return [t for v in value for t in _texts(v)] if isinstance(value, list) else []


def _looks(text: str) -> bool:
    # the look the whole record's JSON had before: its quotes and tabs unescaped
    return may_hold_secret(text.replace('\\"', '"').replace("\\t", "\t"))


@pytest.mark.parametrize("log", LOGS[::7], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_save_writes_the_text_of_the_record_as_it_is_then(log: Path) -> None:
    """A log fed chunk by chunk, its record written after each chunk by one writer (what it kept from the save
    before reused), gives the text `json.dumps(to_record(...))` gives then, and says a text may hold a credential
    whenever one of the record's texts does in JSON, and never when the whole record's JSON does not."""
    data = log.read_bytes()
    analyzer, writer = Analyzer(catalogue()), RecordText()
    for at in range(0, len(data) + CHUNK, CHUNK):
        analyzer.feed(data[at : at + CHUNK], at / CHUNK)
        analyzer.tick(at / CHUNK + 0.5)
        text, secret = writer.dumps(record_values(analyzer))
        assert text == _dumped(analyzer)
        texts = _texts(json.loads(text))
        if any(_looks(json.dumps(t, ensure_ascii=False)) for t in texts):
            assert secret
        if secret:
            assert _looks(text)


def test_a_credential_in_a_new_part_is_seen_though_the_rest_was_kept() -> None:
    """A record whose kept parts hold no credential is flagged once a new text holds one, and no longer when it
    is gone: what was kept never hides what changed."""
    writer, kept = RecordText(), ("a", "b" * 100)
    assert writer.dumps({"kept": kept, "texts": []}) == (
        '{"kept":["a","' + "b" * 100 + '"],"texts":[]}',
        False,
    )
    assert writer.dumps({"kept": kept, "texts": ["--api-key sk-abc123def456ghi789jkl012"]})[1]
    assert writer.dumps({"kept": kept, "tail": b"password=hunter2hunter2"})[1]
    assert writer.dumps({"kept": kept, "texts": ["fine"]}) == (
        '{"kept":["a","' + "b" * 100 + '"],"texts":["fine"]}',
        False,
    )


def test_a_kept_part_that_may_hold_a_credential_says_so_at_every_save() -> None:
    """A part kept from the save before (the same frozen value) whose text may hold a credential flags every
    later record it is in, though it is not looked at again."""
    writer, kept = RecordText(), ("--api-key", "sk-abc123def456ghi789jkl012")
    for _ in range(3):
        assert writer.dumps({"kept": kept, "texts": ["fine"]})[1]
    assert not writer.dumps({"texts": ["fine"]})[1]
