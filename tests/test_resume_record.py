"""Resume records (`watchdog.core.resume`): an analyzer recorded, through JSON, restored, reads on as if it
had never stopped; older records are migrated, newer ones refused; the current shape is pinned."""

from __future__ import annotations

import codecs
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watchdog.core.analyzer import Analyzer
from watchdog.core.resume import MIGRATIONS, VERSION, migrate, restore, to_record
from watchdog.core.verdict import build_verdict
from watchdog.profiles.loader import load_engine

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES / "resume"))
import make_records  # noqa: E402 - the fixtures' maker: how its records were taken

CORPUS = FIXTURES / "corpus"
LOGS = {
    "crash": make_records.CRASH,
    "ready": CORPUS / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log",
    "killed": CORPUS / "vllm" / "captured-vllm-enginecore-killed-cpu.log",
    "ollama": CORPUS / "ollama" / "ollama-ready-llama-server-backend-started-2026-issue17482.log",
}
DATA = {name: path.read_bytes() for name, path in LOGS.items()}
# the ready log as PowerShell's `>` writes it: UTF-16 with a byte-order mark (the decoder's state is recorded)
DATA["utf16"] = codecs.BOM_UTF16_LE + DATA["ready"].decode("utf-8", "replace").encode("utf-16-le")
RECORDS = sorted((FIXTURES / "resume").glob("record-v*.json"))


def _verdict(analyzer: Analyzer) -> dict[str, Any]:
    """The verdict object of `replay --json`."""
    return build_verdict(analyzer).to_json()


def _whole(data: bytes) -> dict[str, Any]:
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(data, 0.0)
    analyzer.finish(0.0)
    return _verdict(analyzer)


WHOLE = {name: _whole(data) for name, data in DATA.items()}


def _through_json(analyzer: Analyzer) -> Analyzer:
    """`analyzer`'s record, written as JSON and read back into a new analyzer."""
    restored = Analyzer(load_engine(None))
    restore(restored, json.loads(json.dumps(to_record(analyzer))))
    return restored


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(DATA)), cuts=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3))
def test_a_record_read_back_goes_on_to_the_verdict_of_the_whole_log(name: str, cuts: list[float]) -> None:
    """A log cut anywhere, once or several times (each cut: record -> JSON -> a new analyzer), ends with the
    verdict object of reading it whole: state, phase, error, timeline, progress, facts, lines and bytes."""
    data = DATA[name]
    analyzer, pos = Analyzer(load_engine(None)), 0
    for at in sorted(int(c * len(data)) for c in cuts):
        analyzer.feed(data[pos:at], 0.0)
        analyzer, pos = _through_json(analyzer), at
    analyzer.feed(data[pos:], 0.0)
    analyzer.finish(0.0)
    assert _verdict(analyzer) == WHOLE[name]


def test_a_restored_live_lifecycle_measures_no_duration_across_the_restart() -> None:
    """A follower's clock does not run while the daemon is down: a restored lifecycle that was live takes its
    current incarnation's entries before the restart as not seen live (`live_from` after them)."""
    one = make_records.CRASH.read_bytes()
    analyzer = Analyzer(load_engine(None))
    analyzer.feed(one[:200], 0.0)
    analyzer.caught_up(0.0)  # the follower has read the log as it was: it sees the next lines live
    analyzer.feed(one[200 : len(one) // 2], 5.0)
    live_from, entries = analyzer.lifecycle.current.live_from, len(analyzer.lifecycle.current.timeline)
    assert live_from is not None
    assert live_from < entries
    restored = _through_json(analyzer)
    assert restored.lifecycle.current.live_from == entries


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_every_versions_record_reads_on_to_the_verdict_of_the_whole_log(path: Path, tmp_path: Path) -> None:
    """The checked-in record of each version (an older one migrated to this one) restored, fed the rest of its
    log and its end, gives the verdict of reading the whole log."""
    record = json.loads(path.read_text())
    one = make_records.CRASH.read_bytes()
    analyzer = Analyzer(load_engine(None))
    restore(analyzer, record)
    assert (analyzer.bytes_read, analyzer.lifecycle.current.number) == (len(one) + make_records.cut(one), 2)
    analyzer.feed(one[make_records.cut(one) :], 100.0)
    analyzer.finish(100.0)
    whole = make_records.fed(one + one)
    whole.finish(100.0)
    got, want = _verdict(analyzer), _verdict(whole)
    # the comparison with the launch before holds durations too: its phases are compared as the timeline's; the
    # checked-in records were written before incarnations kept their arguments, so theirs are not compared
    assert got | {"timeline": None, "changes": None} == want | {"timeline": None, "changes": None}
    got_changes, want_changes = got["changes"], want["changes"]
    unlike = {"phases": None, "arguments_compared": None}
    assert got_changes | unlike == want_changes | unlike
    assert [p["phase"] for p in got_changes["phases"]] == [p["phase"] for p in want_changes["phases"]]
    # the entries as they are; their durations differ (the rest was fed at other clock times than the whole)
    got, want = got["timeline"], want["timeline"]
    assert [{**e, "duration_seconds": None} for e in got] == [{**e, "duration_seconds": None} for e in want]


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def test_the_record_this_build_writes_has_the_shape_of_its_versions_fixture() -> None:
    """The record of the fixture's launch, taken now, has the keys and value types of the checked-in record of
    this `VERSION`: a change of what a record holds fails here (make it a new version, with its migration and
    its fixture: `tests/fixtures/resume/make_records.py`)."""
    one = make_records.CRASH.read_bytes()
    now = to_record(make_records.fed(one + one[: make_records.cut(one)]))
    fixture = json.loads((FIXTURES / "resume" / f"record-v{VERSION}.json").read_text())
    assert _shape(now) == _shape(fixture)
    assert now == fixture


def test_an_older_version_is_migrated_and_a_newer_or_unknown_one_refused() -> None:
    """Every version before this one has its migration (which leaves the record it reads as it was); a record
    of a newer version, or with no version, is refused with the version named."""
    assert set(MIGRATIONS) == set(range(1, VERSION))
    oldest = json.loads(RECORDS[0].read_text())
    assert migrate(oldest)["version"] == VERSION
    assert oldest == json.loads(
        RECORDS[0].read_text()
    )  # migrations make new dicts: the record is left as it was
    for version in (VERSION + 1, None, 0, "1"):
        with pytest.raises(ValueError, match="record version"):
            migrate({**oldest, "version": version})
